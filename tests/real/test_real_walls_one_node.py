"""Walls of one node on the real engine (vLLM's CPU build), in order, sharing what they can:
the flags checked against the image before anything stops; the port taken by an earlier
engine's container, named, freed and relaunched by one `up` to serving (the quick failure
first); on that serving engine a wedge while requests run (the Worker process stopped) and then
the Worker killed, each named by `watch --json` from the real log and readings; last a restart
loop of a container with a restart policy, its real RestartCount rising.

One engine start to serving for the module (the shared cores make it 3-8 minutes). A TP the
heads do not divide is named and fixed on the real engine too, but its fix (TP 2) does not serve
on the CPU build (the first request fails in the EngineCore): that wall's real log is in the
corpus, not here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.real.conftest import ENGINE_TIMEOUT_S, RealCluster, json_lines, spark_tui

pytestmark = pytest.mark.real

IMAGE = "vllm-cpu:0.32.0"
OLD_FLAGS = "tiny-llama-cpu-vllm-old-flags-check"
# an engine of an earlier launch, by another launcher: the node's serve port is held
EARLIER = "vllm_earlier"
LISTENER = (
    "import socket, time; s = socket.socket(); "
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "s.bind(('0.0.0.0', 8000)); s.listen(); time.sleep(100000)"
)


def _user_recipe(config_home: Path, rid: str, title: str, args: dict, env: dict) -> None:
    """The one-node tiny recipe copied under the user's recipes with flags/env added."""
    recipe = yaml.safe_load((ROOT / "recipes" / "tiny-llama-cpu-vllm.yaml").read_text())
    recipe["id"] = rid
    recipe["title"] = title
    recipe["serve"]["args"].update(args)
    if env:
        recipe["serve"]["env"] = {**(recipe["serve"].get("env") or {}), **env}
    d = config_home / "spark-tui" / "recipes"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{rid}.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))


@pytest.fixture(scope="module")
def home(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user's config and state for the module (their recipes, journal, revisions) and
    their cluster.yaml naming the recipe they run (the harness's, with `recipe:` changed):
    the path of that cluster.yaml."""
    root = tmp_path_factory.mktemp("one-node")
    config = yaml.safe_load(real_cluster.config.read_text())
    config["recipe"] = "tiny-llama-cpu-vllm"
    (root / "cluster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    _user_recipe(
        root / "config",
        OLD_FLAGS,
        "Tiny Llama with a flag from an older vLLM",
        {"--disable-log-requests": True},
        {},
    )
    yield root / "cluster.yaml"
    for node in real_cluster.nodes:
        real_cluster.exec(
            node,
            "docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1; pkill -f 'curl -sN' ; true",
            check=False,
        )


@pytest.fixture(autouse=True)
def _same_user(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test of the module is the same user (config and state kept between them)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home.parent / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home.parent / "state"))


def _running(c: RealCluster, node: str, name: str) -> bool:
    out = c.exec(node, f"docker inspect -f '{{{{.State.Running}}}}' {name}", check=False)
    return out.strip() == "true"


class Watch:
    """`spark-tui watch --json` in the background; its events read as they come."""

    def __init__(self, config: Path, *extra: str) -> None:
        self.path = Path(os.environ.get("TMPDIR", "/tmp")) / f"watch-{os.getpid()}-{time.time()}"
        self.file = open(self.path, "w")  # noqa: SIM115  # open while watch writes it
        self.proc = subprocess.Popen(
            ["python", "-m", "spark_tui", "watch", "--json", "--config", str(config), *extra],
            stdout=self.file,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )

    def events(self) -> list[dict]:
        return json_lines(self.path.read_text())

    def wait(self, what: str, pred: Callable[[dict], bool], timeout: float) -> dict:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            for e in self.events():
                if pred(e):
                    return e
            if self.proc.poll() is not None:
                break
            time.sleep(2)
        raise AssertionError(f"watch: {what} not within {timeout:.0f} s: {self.events()[-30:]}")

    def started(self, timeout: float = 60) -> None:
        """Until watch has read the nodes once (its first line: on the harness the fabric's
        readings always say something), or the timeout: the engine's log is tailed by then."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout and not self.events():
            time.sleep(1)

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self.file.close()
        return err


def _diag(wall: str) -> Callable[[dict], bool]:
    return lambda e: e.get("event") == "diagnosis" and e.get("wall") == wall


def _hold_the_port(c: RealCluster) -> None:
    """The earlier engine's container listening on spark1's serve port (started once)."""
    if not _running(c, "spark1", EARLIER):
        c.exec(
            "spark1",
            f"docker rm -f {EARLIER} >/dev/null 2>&1; docker run -d --name {EARLIER} "
            f'--network host {IMAGE} python3 -c "{LISTENER}"',
        )
    c.wait_for(
        "the port held",
        lambda: ":8000 " in c.exec("spark1", "ss -ltnH", check=False),
        timeout=120,
    )


def _metric(c: RealCluster, name: str) -> float:
    text = c.exec("spark1", "curl -s -m 5 http://127.0.0.1:8000/metrics", check=False)
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _requests(c: RealCluster, n: int, tokens: int, then: str = "") -> None:
    """n streamed completions on spark1, in the background on the node (ignore_eos: each
    runs its full length); `then`: a command the node runs once they are under way (in the
    same shell: the tiny model answers in seconds, quicker than another round trip)."""
    body = json.dumps(
        {
            "model": "/models/tiny-llama",
            "prompt": "Two small computers",
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": True,
        }
    )
    fire = "".join(
        f"setsid curl -sN -m 900 -H 'Content-Type: application/json' -d '{body}' "
        f"http://127.0.0.1:8000/v1/completions > /tmp/req{i}.out 2>&1 < /dev/null & "
        for i in range(n)
    )
    wait = (
        "for i in $(seq 100); do grep -q '^data: {' /tmp/req0.out 2>/dev/null && break; "
        "sleep 0.1; done; "
    )
    c.exec("spark1", "rm -f /tmp/req*.out; " + fire + (wait + then if then else "true"))


def _engine_pids(c: RealCluster, title: str) -> list[str]:
    return c.exec("spark1", f"pgrep -f '{title}' || true").split()


def _elapsed(events: list[dict], a: dict, b: dict) -> float:
    from datetime import datetime

    def t(e: dict) -> float:
        return datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()

    return t(b) - t(a)


def test_check_flags_names_the_refused_flag_before_anything_stops(
    real_cluster: RealCluster, home: Path
) -> None:
    """The image's own --help, in a throw-away container on spark1: --disable-log-requests
    (older vLLM) is unknown to 0.32; a container already running on the node keeps running."""
    c = real_cluster
    _hold_the_port(c)
    before = c.exec("spark1", "docker ps -aq").split()
    res = spark_tui("recipes", "check-flags", OLD_FLAGS, "--config", str(home), "--json")
    assert res.returncode == 1, (res.stdout[-2000:], res.stderr[-2000:])
    report = json_lines(res.stdout)[-1]
    assert report["node"] == "spark1" and report["image"] == IMAGE, report
    assert report["known_options"] > 300 and report["error"] == "", report
    assert report["unknown"] == ["--disable-log-requests"], report
    # nothing stopped, nothing left: the same containers, the earlier engine still up
    assert c.exec("spark1", "docker ps -aq").split() == before
    assert _running(c, "spark1", EARLIER)


def test_the_port_taken_by_an_earlier_engine_is_named_freed_and_serves(
    real_cluster: RealCluster, home: Path
) -> None:
    """An earlier engine's container holds :8000: the launch dies binding the port
    (port-in-use, from the real log), its fix stops that stack and launches again, which
    serves. The relaunch reuses the container name: no restart loop is read into it."""
    c = real_cluster
    _hold_the_port(c)  # left by the test before, or started now
    res = spark_tui("up", "--config", str(home), "--yes", "--json", timeout=2 * ENGINE_TIMEOUT_S)
    events = json_lines(res.stdout)
    assert res.returncode == 0, (events, res.stderr[-3000:])
    port = next(e for e in events if _diag("port-in-use")(e))
    assert port["node"] == "spark1", port
    fix = next(e for e in events if e.get("event") == "fix" and e.get("wall") == "port-in-use")
    assert fix["fix"] == "stop-stack-and-relaunch" and fix["ok"], fix
    assert not _running(c, "spark1", EARLIER)
    done = events[-1]
    assert done["event"] == "done" and done["serving"] is True, events
    assert done["tok_s"] and done["tok_s"] > 0
    # a relaunch under the same container name is no restart loop (docker restarted nothing)
    assert not [e for e in events if _diag("restart-loop")(e)], events
    # the report names each node's Docker Engine (its daemon: 20.10 here, the client is newer)
    server = c.exec("spark1", "docker version --format '{{.Server.Version}}'").strip()
    report = spark_tui("report", "--config", str(home), timeout=300)
    assert report.returncode == 0 and server in report.stdout, report.stdout[-3000:]
    print(
        "port-in-use named after",
        _elapsed(events, events[0], port),
        "s; fixed",
        _elapsed(events, events[0], fix),
        "s; serving",
        _elapsed(events, events[0], done),
        "s",
    )


def test_a_wedged_worker_is_a_serving_stall_on_the_real_counters(
    real_cluster: RealCluster, home: Path
) -> None:
    """Requests running, then every Worker process stopped (SIGSTOP; the EngineCore waits on
    them): /metrics keeps the requests running with no token, the log goes quiet but for the
    EngineCore's shared-memory broadcast notice; watch names serving-stall. SIGCONT: the
    tokens move again."""
    c = real_cluster
    watch = Watch(home)
    workers: list[str] = []
    try:
        # requests under way, then every Worker stopped (the node's own shell, at once)
        _requests(c, 8, 440, then="pkill -STOP -f 'VLLM::Worke[r]'")
        workers = _engine_pids(c, "VLLM::Worke[r]")
        assert workers, c.exec("spark1", "ps -eo pid,args")
        assert _metric(c, "vllm:num_requests_running") >= 1
        t0 = time.monotonic()
        tokens = _metric(c, "vllm:generation_tokens_total")
        stall = watch.wait("serving-stall", _diag("serving-stall"), timeout=300)
        named_s = time.monotonic() - t0
        assert stall["node"] == "spark1", stall
        assert _metric(c, "vllm:num_requests_running") >= 1
        assert _metric(c, "vllm:generation_tokens_total") == tokens  # nothing moved
        # the EngineCore's own notice is in the serve log
        log = c.exec("spark1", "docker exec vllm_node cat /tmp/vllm-serve.log")
        assert "No available shared memory broadcast block found in 60 seconds" in log
        print("serving-stall named after", named_s, "s:", stall)
    finally:
        if workers:
            c.exec("spark1", f"kill -CONT {' '.join(workers)}", check=False)
        err = watch.close()
    assert "Traceback" not in err, err[-3000:]
    c.wait_for(
        "tokens again after SIGCONT",
        lambda: _metric(c, "vllm:generation_tokens_total") > tokens,
        timeout=120,
    )


def test_an_engine_process_killed_mid_serving_is_named(
    real_cluster: RealCluster, home: Path
) -> None:
    """SIGKILL of the EngineCore while requests run: the API server's monitor says the engine
    core exited, the server shuts down; watch names engine-process-killed from the real log.
    (The Worker killed instead reads "Worker proc VllmWorker-0 died unexpectedly (exit code:
    None)" on 0.32: the status read before it was collected, as a worker that died with no
    error reads too, so the log alone cannot name a kill there. The fix is a relaunch: one
    more engine start on the shared cores, left to `up` and the test above.)"""
    c = real_cluster
    watch = Watch(home)
    try:
        watch.started()  # the serve log is read inside the container: tailed before it ends
        _requests(c, 8, 440, then="pkill -KILL -f 'VLLM::EngineCor[e]'")
        t0 = time.monotonic()
        killed = watch.wait("engine-process-killed", _diag("engine-process-killed"), timeout=180)
        assert killed["node"] == "spark1", killed
        print("engine-process-killed named after", time.monotonic() - t0, "s")
    finally:
        err = watch.close()
    assert "Traceback" not in err, err[-3000:]


def test_a_restart_loop_reads_the_real_restart_count(real_cluster: RealCluster, home: Path) -> None:
    """A container with a restart policy (as compose's `restart: unless-stopped` starts one)
    whose engine refuses a flag: docker restarts it again and again, RestartCount rises in
    `docker inspect`; watch names restart-loop; its fix stops the stack."""
    c = real_cluster
    res = spark_tui("stop", "--config", str(home), "--yes", "--json", timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    c.exec(
        "spark1",
        "docker rm -f vllm_node >/dev/null 2>&1; docker run -d --name vllm_node "
        f"--restart unless-stopped --network host -v /root/models:/models {IMAGE} "
        "python -m vllm.entrypoints.openai.api_server --model /models/tiny-llama "
        "--max-model-len 512 --enforce-eager --disable-log-requests",
    )

    def count() -> int:
        out = c.exec("spark1", "docker inspect -f '{{.RestartCount}}' vllm_node", check=False)
        return int(out.strip() or 0)

    watch = Watch(home)
    try:
        c.wait_for("a first restart", lambda: count() >= 1, timeout=300)
        loop = watch.wait("restart-loop", _diag("restart-loop"), timeout=120)
        assert loop["node"] == "spark1", loop
        c.wait_for("the count rising", lambda: count() >= 2, timeout=300)
    finally:
        err = watch.close()
    assert "Traceback" not in err, err[-3000:]
    res = spark_tui(
        "fix", "restart-loop", "--node", "spark1", "--fix", "stop-stack-everywhere",
        "--config", str(home), "--yes", timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])

    # stopped (and renamed aside, its log kept): docker restarts it no more — nothing of the
    # stack runs now, nor after longer than the restart policy's back-off
    def running() -> str:
        return c.exec("spark1", "docker ps -q --filter name=vllm", check=False).strip()

    assert running() == "", c.exec("spark1", "docker ps -a", check=False)
    time.sleep(15)
    assert running() == "", c.exec("spark1", "docker ps -a", check=False)
