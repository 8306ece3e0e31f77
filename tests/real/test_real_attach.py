"""Deployments started on the nodes by hand, found and followed by spark-tui; the TUI's panes
on the real cluster.

One start of two real engines serves the module (they need not become healthy: the product
finds an engine from its process and follows its log from the first line):
- spark1: the way eugr's launch-cluster.sh starts one (tests/data/eugr-358bf26): a container
  named `vllm_node` (`docker run -d --rm --network host --ipc=host --gpus all --name
  vllm_node --entrypoint= IMAGE sleep infinity`; its `--privileged` left out, as its
  non-privileged mode does, since the harness's containers share this machine's kernel, and
  its `--ulimit nofile=…` too: the node's hard limit is lower and runc refuses it), the engine then run in it with `docker exec -d vllm_node bash -c "CMD >> /proc/1/fd/1
  2>&1"`, so its output is the container's own log;
- spark2: a bare engine, no container: `python -m vllm.entrypoints.openai.api_server` started
  with nohup from a shell on the node, its output in a file in the user's home. The nodes have
  only the host's Python, so the engine's own Python environment (the image's root: its
  /opt/venv) is entered with chroot in a private mount namespace; to the node (and to
  spark-tui) it is a plain process of the node, writing to /root/vllm-serve.log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui.events import LogLines
from spark_tui.session import Session
from tests.real.conftest import CACHE, RealCluster, json_lines, spark_tui

pytestmark = pytest.mark.real

ENGINE_ARGS = (
    "--model {model} --port 8000 --max-model-len 512 --kv-cache-memory-bytes 268435456 "
    "--enforce-eager"
)
# the engine's own first lines (vLLM 0.32's api_server): its banner and the arguments it took
REAL_LINE = ("non-default args: {", "version 0.32.0")
FIRST_LINES_S = 300.0


def _eugr_engine(c: RealCluster) -> None:
    cmd = "python -m vllm.entrypoints.openai.api_server " + ENGINE_ARGS.format(
        model="/models/tiny-llama"
    )
    c.exec(
        "spark1",
        "docker rm -f vllm_node >/dev/null 2>&1; "
        "docker run --ipc=host --gpus all -d --rm --network host "
        "--name vllm_node --entrypoint= -v /root/models:/models vllm-cpu:0.32.0 sleep infinity "
        f"&& docker exec -d vllm_node bash -c '{cmd} >> /proc/1/fd/1 2>&1'",
    )


def _bare_engine(c: RealCluster) -> int:
    """The engine as a process of spark2; its pid (also its process group's)."""
    root = CACHE / "build" / "rootfs"
    cmd = (
        "env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root /opt/venv/bin/python -m "
        "vllm.entrypoints.openai.api_server " + ENGINE_ARGS.format(model="/root/models/tiny-llama")
    )
    inner = (
        f"R={root}; mount -t proc proc $R/proc && mount --rbind /sys $R/sys && "
        "mount --rbind /dev $R/dev && mount -t tmpfs tmpfs $R/dev/shm && "
        "mount -t tmpfs tmpfs $R/tmp && mount --rbind /root $R/root && "
        f"exec chroot $R {cmd}"
    )
    out = c.exec(
        "spark2",
        # `cd; setsid … &`, not `cd && setsid … &`: that backgrounds a subshell holding ssh's
        # output open; here each exec keeps the pid, so $! is the engine's
        f"cd /root; setsid nohup unshare -m --propagation private sh -c '{inner}' "
        "> /root/vllm-serve.log 2>&1 < /dev/null & echo $!",
    )
    return int(out.strip().splitlines()[-1])


def _has_first_lines(c: RealCluster, node: str, command: str) -> bool:
    out = c.exec(node, command, check=False)
    return any(x in out for x in REAL_LINE)


@pytest.fixture(scope="module")
def engines(real_cluster: RealCluster) -> Iterator[RealCluster]:
    c = real_cluster
    _eugr_engine(c)
    pid = _bare_engine(c)
    try:
        c.wait_for(
            "the eugr-style engine's first lines",
            lambda: _has_first_lines(c, "spark1", "docker logs vllm_node 2>&1 | head -n 40"),
            timeout=FIRST_LINES_S,
        )
        c.wait_for(
            "the bare engine's first lines",
            lambda: _has_first_lines(c, "spark2", "head -n 40 /root/vllm-serve.log"),
            timeout=FIRST_LINES_S,
        )
        yield c
    finally:
        c.exec("spark1", "docker rm -f vllm_node >/dev/null 2>&1", check=False)
        # the engine's process group (setsid made its pid the group's id): API server and EngineCore
        c.exec(
            "spark2",
            f"kill -TERM -- -{pid} 2>/dev/null; sleep 5; kill -KILL -- -{pid}",
            check=False,
        )


def _node(status: dict, name: str) -> dict:
    return next(n for n in status["nodes"] if n["name"] == name)


def test_both_hand_started_engines_are_found_and_their_real_logs_followed(
    engines: RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = engines
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    res = spark_tui("status", "--config", str(c.config), "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    status = json_lines(res.stdout)[0]
    head, worker = _node(status, "spark1"), _node(status, "spark2")
    assert "vllm_node" in head["containers"], head
    assert head["model"] == "/models/tiny-llama" and head["port"] == 8000, head
    # the bare engine: no container on spark2, found from its process
    assert worker["containers"] == [], worker
    assert worker["model"] == "/root/models/tiny-llama" and worker["port"] == 8000, worker

    # the same attach path the TUI and watch use: the session follows each engine's output
    lines: dict[str, list[tuple[str, str]]] = {"spark1": [], "spark2": []}

    def listen(event: object) -> None:
        if isinstance(event, LogLines) and event.node in lines:
            lines[event.node] += [(event.source, x) for x in event.lines]

    session = Session.open(c.config)
    try:
        session.start(listen)

        def followed(node: str) -> bool:
            return any(any(r in x for r in REAL_LINE) for _s, x in lines[node])

        c.wait_for(
            "both engines' real lines", lambda: followed("spark1") and followed("spark2"), 120
        )
        states = session.states()
        assert states["spark1"].engine is not None and states["spark2"].engine is not None
    finally:
        session.close()
    sources = {n: {s for s, x in got if any(r in x for r in REAL_LINE)} for n, got in lines.items()}
    # spark1: the container's own output (eugr's >> /proc/1/fd/1: `docker logs`); spark2: the
    # file the bare process writes, read through its open descriptor (`engine:PID`)
    assert sources["spark1"] == {"container:vllm_node"}, sources
    assert sources["spark2"] and all(s.startswith("engine:") for s in sources["spark2"]), sources
    real = [x for _s, x in lines["spark2"] if "non-default args" in x]
    assert real and "'model': '/root/models/tiny-llama'" in real[0], real


def test_the_tui_panes_show_each_nodes_real_readings_and_the_engines_log(
    engines: RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real app on the real cluster, driven by Textual's pilot: each node's pane fed by
    that node's readings (the nvidia-smi shim's GB10, the node's /proc/meminfo), the log pane
    showing the engines' own lines."""
    from spark_tui.tui.app import SparkTuiApp
    from spark_tui.tui.widgets.log_view import LogView
    from spark_tui.tui.widgets.node_pane import NodePane

    c = engines
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    mem_kib = {
        n: int(c.exec(n, "grep MemTotal /proc/meminfo").split()[1]) for n in ("spark1", "spark2")
    }
    seen: dict[str, tuple[str, int, dict[str, str]]] = {}
    log_seen: list[str] = []

    async def scenario() -> None:
        session = Session.open(c.config)
        try:
            app = SparkTuiApp(session)
            async with app.run_test(size=(160, 50)) as pilot:
                panes = {p.node.name: p for p in app.main_screen.query(NodePane)}
                assert sorted(panes) == ["spark1", "spark2"]
                log = app.main_screen.query_one(LogView)

                def ready() -> bool:
                    texts = log.visible_texts()
                    return all(
                        p.state is not None and p.state.gpus and p.state.memory
                        for p in panes.values()
                    ) and all(
                        any(t.startswith(f"{n}: ") and "non-default args" in t for t in texts)
                        for n in panes
                    )

                t0 = time.monotonic()
                while not ready():
                    assert time.monotonic() - t0 < 120, (
                        {n: p._shown for n, p in panes.items()},
                        log.visible_texts()[-10:],
                    )
                    await pilot.pause(0.5)
                for name, p in panes.items():
                    assert p.state is not None and p.state.memory is not None
                    gpu = p.state.gpus[0].name
                    seen[name] = (gpu, p.state.memory.total_bytes, dict(p._shown))
                log_seen.extend(log.visible_texts())
        finally:
            session.close()

    asyncio.run(scenario())
    for name in ("spark1", "spark2"):
        gpu_name, total, shown = seen[name]
        assert gpu_name == "NVIDIA GB10"
        assert total == mem_kib[name] * 1024
        # what the pane shows: the shim's power and temperature, the node's memory, its stack
        assert "W" in shown[".swap-gpu"] and "°C" in shown[".swap-gpu"], shown
        assert "used " in shown[".strip"] and "cache " in shown[".strip"], shown
    assert "vllm_node" in seen["spark1"][2][".stack"]
    assert "containers: none running" in seen["spark2"][2][".stack"]
    assert any(t.startswith("spark1: ") and "non-default args" in t for t in log_seen)
