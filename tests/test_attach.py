"""Attach to a deployment spark-tui did not start (issue 15): found by its processes, its
port read from its command line, its log followed wherever its output goes, its walls named;
the logs cluster.yaml names are followed too; and what runs can be adopted as a recipe."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.events import DiagnosisRaised, LogLines
from spark_tui.session import open_cluster
from tests.conftest import require_tool
from tests.sshd_nodes import start_sshd_cluster
from tests.test_nodes_monitor import FREE_MEMORY_LINE


def test_an_eugr_deployment_is_found_followed_and_diagnosed_on_the_simulated_cluster() -> None:
    sources: set[tuple[str, str]] = set()
    walls: set[tuple[str, str]] = set()

    def listen(event) -> None:
        if isinstance(event, LogLines):
            sources.add((event.node, event.source))
        elif isinstance(event, DiagnosisRaised):
            walls.add((event.diagnosis.wall.id, event.diagnosis.source))

    with open_cluster(scenario="attach-eugr", speed=120) as session:
        assert session.recipe() is None and not session.plays_launch  # spark-tui launched nothing
        session.start(listen)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and ("serving-stall", "spark1:readings") not in walls:
            time.sleep(0.2)
        head = session.states()["spark1"]
        # found by its process: model and port from its command line
        assert head.engine is not None and head.engine.port == 8000
        assert head.engine.model == "openai/gpt-oss-120b"
        # its log: the file its output goes to inside eugr's container, followed
        assert any(n == "spark1" and s.startswith("engine:") for n, s in sources), sources
        assert head.serving.phase == "serving"  # read from that log
        # its walls: /metrics read on its port (the stall), its libnccl files in its container
        assert ("serving-stall", "spark1:readings") in walls, walls
        assert ("nccl-dual-build", "spark1:readings") in walls, walls


def test_adopting_what_runs_gives_a_recipe_of_its_command_line(capsys) -> None:
    assert main(["recipes", "adopt", "--demo", "attach-eugr", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "+# Adopted by spark-tui from the engine running on spark1" in out
    for flag in ("--port: 8000", "--gpu-memory-utilization: 0.7", "--served-model-name: gpt-oss"):
        assert f"+    {flag}" in out, out
    assert "+  head: vllm_node" in out and "+image: vllm-node" in out


@pytest.fixture
def one_sshd_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One real sshd node (spark1, head); HOME points at its client side."""
    require_tool("sshd")
    cluster = start_sshd_cluster(tmp_path / "sshd", names=("spark1",))
    monkeypatch.setenv("HOME", str(cluster.home))
    try:
        yield cluster
    finally:
        cluster.stop()


def _diagnoses_until(session, wall: str, seconds: float = 30.0) -> list:
    seen: list = []
    session.start(lambda e: seen.append(e.diagnosis) if isinstance(e, DiagnosisRaised) else None)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not any(d.wall.id == wall for d in seen):
        time.sleep(0.2)
    return seen


def test_a_bare_vllm_serve_on_a_real_node_is_found_and_its_log_file_followed(
    one_sshd_node, tmp_path: Path
) -> None:
    node = one_sshd_node.node("spark1")
    fake = tmp_path / "bin" / "vllm"  # a stand-in engine: the real tool needs a GPU
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'INFO Starting vLLM API server'\nsleep 1\n"
        f"echo {json.dumps(FREE_MEMORY_LINE)}\nsleep 120\n"  # no exec: sh stays the engine
    )
    fake.chmod(0o755)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        engine = subprocess.Popen(
            [str(fake), "serve", "fake-org/fake-model", "--port", "18123"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # what `ps` on that node shows (the node's own processes only: a test machine runs
        # every test node's processes)
        node.set_file(
            "ps.txt", f"{engine.pid} 0 /bin/sh {fake} serve fake-org/fake-model --port 18123\n"
        )
        config = one_sshd_node.write_cluster_yaml()
        with open_cluster(config) as session:
            seen = _diagnoses_until(session, "vllm-free-memory-low")
            d = next((d for d in seen if d.wall.id == "vllm-free-memory-low"), None)
            assert d is not None, [x.wall.id for x in seen]
            assert d.node == "spark1" and d.source == f"spark1:engine:{engine.pid}"
            st = session.states()["spark1"]
            assert st.engine is not None and st.engine.port == 18123
            assert st.engine.model == "fake-org/fake-model"
    finally:
        os.killpg(engine.pid, 9)
        engine.wait()


def test_a_log_named_in_cluster_yaml_is_followed(one_sshd_node, tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO starting\n")
    config = one_sshd_node.write_cluster_yaml()
    text = config.read_text().replace(
        "    role: head\n", f"    role: head\n    logs:\n      - file: {log}\n"
    )
    config.write_text(text)
    with open_cluster(config) as session:
        seen: list = []
        session.start(
            lambda e: seen.append(e.diagnosis) if isinstance(e, DiagnosisRaised) else None
        )
        time.sleep(1.5)  # the tail runs: a line written now reaches the matcher
        with log.open("a") as fh:
            fh.write(FREE_MEMORY_LINE + "\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not seen:
            time.sleep(0.2)
        assert [(d.wall.id, d.source) for d in seen] == [
            ("vllm-free-memory-low", f"spark1:log:file:{log}")
        ]


def test_a_bad_logs_entry_is_refused_with_its_line(tmp_path: Path, capsys) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "nodes:\n  - name: a\n    host: local\n    role: head\n    logs:\n      - socket: /x\n"
    )
    assert main(["status", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}:6:" in err and "logs item 1" in err


def test_evidence_of_an_attached_eugr_deployment_reads_its_container(tmp_path: Path) -> None:
    """Attached to eugr's vllm_node (no recipe), evidence is read in vllm_node, not in a
    `ray-head` that is not there; with no serving container known, each item read in a
    container fails, saying so (never an empty success)."""
    from spark_tui.remedy.evidence import collect_evidence

    with open_cluster(scenario="attach-eugr", speed=120) as session:
        session.start(lambda e: None)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "spark1" not in session.serving_containers():
            time.sleep(0.2)
        found = session.serving_containers()
        assert found.get("spark1") == "vllm_node"
        items = ["log-tail", "nccl-libraries", "py-spy"]
        res = collect_evidence(
            items, ["spark1"], session.transports, None, root=tmp_path, containers=found
        )
        text = {p.name: p.read_text() for p in res.files}
        assert "$ docker exec vllm_node sh -c" in text["spark1-nccl-libraries.txt"]
        assert "$ docker exec vllm_node sh -c" in text["spark1-py-spy.txt"]
        assert "$ docker logs --tail 500 vllm_node" in text["spark1-log-tail.txt"]
        assert "ray-head" not in "".join(text.values())
        assert "spark1 log-tail" not in res.failures and "spark1 py-spy" not in res.failures
        none = collect_evidence(items, ["spark1"], session.transports, None, root=tmp_path / "x")
        assert set(none.failures) == {f"spark1 {i}" for i in items}
        assert all("no serving container" in p.read_text() for p in none.files)
