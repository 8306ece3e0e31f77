"""ClusterMonitor: rounds, log matching with causes from readings, rules, drops and returns."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from spark_tui.clock import ScaledClock
from spark_tui.events import DiagnosisRaised, LogLines, NodeSampled, ReachabilityChanged
from spark_tui.kb.loader import load_knowledge
from spark_tui.monitor import ClusterMonitor
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.local import LocalTransport
from tests.sshd_nodes import SshdCluster, shim_env, shim_node, sshd_cluster  # noqa: F401

FIX = Path(__file__).parent / "fixtures"
FREE_MEMORY_LINE = (
    "(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:0 (11.19/119.67 GiB) on "
    "startup is less than desired GPU memory utilization (0.9, 107.70 GiB). Decrease GPU memory "
    "utilization or reduce GPU memory used by other processes."
)
# a GB10 whose memory is held by nobody: 55 GiB used, no cache, no GPU process
LEAKED_MEMINFO = """MemTotal:       127607176 kB
MemFree:        68000000 kB
MemAvailable:   70000000 kB
Buffers:           10000 kB
Cached:          1500000 kB
SwapTotal:             0 kB
SwapFree:              0 kB
Shmem:             10000 kB
"""


class Events(list):
    """Collects events from any thread."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def __call__(self, event) -> None:
        with self._lock:
            self.append(event)

    def of(self, kind) -> list:
        with self._lock:
            return [e for e in self if isinstance(e, kind)]


def wait_for(predicate, what: str, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for: {what}")


def local_monitor(tmp_path: Path, meminfo: str, clock=None, **kw):
    node = shim_node(tmp_path)
    node.set_file("meminfo.txt", meminfo)
    cluster = ClusterConfig((NodeConfig("box", "local", "head"),))
    events = Events()
    mon = ClusterMonitor(
        cluster,
        {"box": LocalTransport("box", env=shim_env(node))},
        load_knowledge(),
        clock or ScaledClock(speed=0.0),
        events,
        **kw,
    )
    return mon, events, node


@pytest.mark.parametrize(
    ("meminfo", "cause", "first_fix"),
    [
        ((FIX / "gb10" / "meminfo.txt").read_text(), "page-cache", "drop-page-caches"),
        (LEAKED_MEMINFO, "leaked-memory", "reboot-leaking-node"),
    ],
)
def test_readings_pick_the_cause_of_a_log_wall(tmp_path, meminfo, cause, first_fix) -> None:
    mon, events, _ = local_monitor(tmp_path, meminfo)
    state = mon.sample_once("box")
    assert state.reachable and state.memory is not None
    mon.feed_line("box", "serve", "INFO starting")
    mon.feed_line("box", "serve", FREE_MEMORY_LINE)
    batches = events.of(LogLines)
    assert batches[-1].marks == ((0, "vllm-free-memory-low", "error"),)
    assert batches[-1].first_line_no == 2
    raised = [
        e for e in events.of(DiagnosisRaised) if e.diagnosis.wall.id == "vllm-free-memory-low"
    ]
    assert len(raised) == 1 and raised[0].new
    d = raised[0].diagnosis
    assert (d.node, d.source, d.line, d.cause) == ("box", "box:serve", 2, cause)
    assert d.fixes()[0] == first_fix
    live = mon.diagnoses().get("vllm-free-memory-low", "box:serve")
    assert live is not None and live is not d  # the event carries a frozen snapshot of it
    assert live.snapshot() == d


def test_capture_hang_from_rounds_and_a_silent_log(tmp_path) -> None:
    clock = ScaledClock(speed=0.0)
    mon, events, node = local_monitor(
        tmp_path,
        (FIX / "gb10" / "meminfo.txt").read_text(),
        clock,
        recipe_facts=lambda: {"recipe.engine": "sglang"},
    )
    # the engine's container is up (a node with nothing of the stack up is stopped)
    node.set_file(
        "docker-ps.jsonl",
        '{"ID":"7c6b5a4d3e2f","Image":"lmsysorg/sglang:spark","Names":"sglang_node",'
        '"State":"running","Status":"Up 3 minutes"}\n',
    )
    mon.feed_line("box", "serve", "Capturing batches (bs=160 avail_mem=20.1 GB):   0%|    | 0/36")

    def hang():
        return [
            e
            for e in events.of(DiagnosisRaised)
            if e.diagnosis.wall.id == "cuda-graph-capture-hang"
        ]

    mon.sample_once("box")  # GB10 query: SM 96 %, memory 0 %
    assert mon.states()["box"].facts()["serving.phase"] == "capturing"
    assert hang() == []  # one busy sample
    clock.advance(150)
    mon.sample_once("box")
    assert hang() == []  # silent for 150 s: the condition starts to hold
    clock.advance(130)
    mon.sample_once("box")
    (e,) = hang()
    assert e.diagnosis.source == "box:readings" and e.diagnosis.cause == "sglang-capture"
    assert e.diagnosis.fixes()[0] == "sglang-disable-cuda-graph"


def test_missing_tools_still_sample(tmp_path) -> None:
    mon, events, node = local_monitor(tmp_path, LEAKED_MEMINFO)
    node.remove_tool("nvidia-smi")
    node.remove_tool("docker")
    # the real docker here has no daemon: its own error, not a crash
    s = mon.sample_once("box")
    assert s.unavailable["gpu"] == "nvidia-smi: not available"
    assert s.memory is not None and events.of(NodeSampled)


def test_monitor_over_real_sshd_survives_a_drop(sshd_cluster: SshdCluster) -> None:
    spark1, spark2 = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    container = {
        "ID": "ab12",
        "Image": "vllm/vllm-openai:v0.13.0",
        "Names": "vllm_node",
        "State": "running",
        "Status": "Up 1 minute",
    }
    spark1.set_file("docker-ps.jsonl", json.dumps(container) + "\n")
    spark1.set_file("serve.log", f"INFO loading\n{FREE_MEMORY_LINE}\n")
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    events = Events()
    mon = ClusterMonitor(cluster, transports, load_knowledge(), ScaledClock(), events, period_s=0.2)
    mon.start()
    try:

        def sampled(name):
            return [e for e in events.of(NodeSampled) if e.node == name and e.state.reachable]

        wait_for(lambda: sampled("spark1") and sampled("spark2"), "both nodes sampled")
        # the serving container's log is tailed by itself and matched
        wait_for(
            lambda: any(
                e.diagnosis.wall.id == "vllm-free-memory-low" for e in events.of(DiagnosisRaised)
            ),
            "the log wall",
        )
        d = mon.diagnoses().get("vllm-free-memory-low", "spark1:container:vllm_node")
        assert d is not None and d.node == "spark1"
        assert any(c.startswith("docker logs -f --tail 200 vllm_node") for c in spark1.commands())
        # one remote process per round: every sampling round is one `sh -c` script
        assert "nvidia-smi dmon -s pu" in spark2.commands()
        spark2.stop()
        wait_for(
            lambda: any(
                e.node == "spark2" and not e.reachability.reachable
                for e in events.of(ReachabilityChanged)
            ),
            "spark2 seen down",
        )
        assert mon.reachability()["spark2"].retrying
        before = len(sampled("spark1"))
        wait_for(lambda: len(sampled("spark1")) > before + 2, "spark1 keeps being sampled")
        spark2.start()
        wait_for(lambda: mon.reachability()["spark2"].reachable, "spark2 back by itself")
        n = len(sampled("spark2"))
        wait_for(lambda: len(sampled("spark2")) > n, "spark2 sampled again")
    finally:
        mon.stop()
    assert not any(t.is_alive() for t in mon._threads)


# Ray's daemons as `ps -ww -eo pid=,uid=,args=` shows them on a head (binaries under Ray's package:
# ray/core/src/ray/gcs/gcs_server and ray/core/src/ray/raylet/raylet)
_RAY = "/usr/local/lib/python3.12/dist-packages/ray/core/src/ray"
RAY_HEAD_PS = (
    f"   4211     0 {_RAY}/gcs/gcs_server --log_dir=/tmp/ray/session_latest/logs --gcs_server_port=6379\n"
    f"   4390     0 {_RAY}/raylet/raylet --node_ip_address=10.10.10.1 --object_manager_port=0\n"
)


def test_one_remote_session_per_round_and_slow_sections_every_nth(sshd_cluster: SshdCluster):
    from spark_tui.clock import RealClock
    from spark_tui.nodes.sampler import Sampler

    node = sshd_cluster.node("spark1")
    node.set_file("ray-status.txt", (FIX / "gb10" / "ray-status.txt").read_text())
    node.set_file("docker-ps.jsonl", (FIX / "gb10" / "docker-ps.jsonl").read_text())  # ray-head
    node.set_file("ps.txt", RAY_HEAD_PS)
    t = sshd_cluster.transport("spark1")
    sampler = Sampler(t, node.node_config("head"), RealClock(), slow_every=3)
    try:
        states = [sampler.next_round() for _ in range(4)]
        node.set_file("ps.txt", "")  # Ray's head stopped: nothing to ask any more
        states += [sampler.next_round() for _ in range(3)]
    finally:
        t.close()
    # one per round, and one more in the first: Ray asked where ps just saw its head
    assert node.sshd_log().count("Starting session: command") == 8
    assert t.connects == 1
    calls = node.commands()
    assert sum(c.startswith("ps -ww -eo pid=,uid=,args=") for c in calls) == 7  # every round
    # `ray status` only where ps saw Ray's gcs_server: in round 1 right after ps saw it, then
    # in the slow round 4; never once the head is gone (not even in the slow round 7)
    ray_calls = [c for c in calls if c.startswith("docker exec")]
    assert ray_calls == ["docker exec ray-head ray status"] * 2
    assert sum(c.startswith("nvidia-smi --query-gpu") for c in calls) == 7
    assert sum(c.startswith("ibdev2netdev") for c in calls) == 3  # slow rounds 1, 4, 7
    assert [s.ray_head for s in states] == [True] * 4 + [False] * 3
    # between slow rounds the slow readings are carried over
    assert all(s.ray is not None and s.ray.gpus_total == 2.0 for s in states[0:4])
    assert all(s.ray is None for s in states[4:])  # Ray's head is not here any more
    assert all(s.facts()["net.roce_devices"] == 1 for s in states)


def test_ray_status_is_asked_in_the_container_ray_runs_in(sshd_cluster: SshdCluster) -> None:
    """Another launcher's container (eugr's vllm_node): ps shows Ray's head in it."""
    from spark_tui.clock import RealClock
    from spark_tui.nodes.sampler import Sampler

    node = sshd_cluster.node("spark1")
    node.set_file("ray-status.txt", (FIX / "gb10" / "ray-status.txt").read_text())
    node.set_file(
        "docker-ps.jsonl",
        '{"ID":"ab","Image":"vllm-node","Names":"vllm_node","State":"running","Status":"Up"}\n',
    )
    node.set_file("ps.txt", RAY_HEAD_PS)
    t = sshd_cluster.transport("spark1")
    sampler = Sampler(t, node.node_config("head"), RealClock(), slow_every=3)
    try:
        states = [sampler.next_round() for _ in range(2)]
    finally:
        t.close()
    assert [c for c in node.commands() if c.startswith("docker exec")] == [
        "docker exec vllm_node ray status"
    ]
    assert states[1].ray is not None and states[1].ray.gpus_total == 2.0
    facts = states[1].facts()
    assert facts["ray.member"] is True and facts["engine.running"] is False


def test_a_boot_id_change_nobody_asked_for(tmp_path) -> None:
    mon, _events, node = local_monitor(tmp_path, LEAKED_MEMINFO)
    node.set_file("boot.txt", "9257d276-7f33-47af-b507-554202799ff7\n741.19 1378.38\n")
    assert mon.sample_once("box").facts()["boot.changed_unasked"] is False
    node.set_file("boot.txt", "0c0ffee0-7f33-47af-b507-554202799ff7\n12.50 20.00\n")
    s = mon.sample_once("box")
    assert s.facts()["boot.changed_unasked"] is True and s.uptime_s == 12.5
    mon.expect_reboot("box")
    node.set_file("boot.txt", "1c0ffee0-7f33-47af-b507-554202799ff7\n10.00 20.00\n")
    assert mon.sample_once("box").facts()["boot.changed_unasked"] is False


CRASH = (
    "(EngineCore pid=27) ERROR 11-25 19:38:30 [core.py:1101] EngineCore failed to start.\n"
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n"
)
BANNER = (
    "(APIServer pid=1) INFO 11-25 19:40:02 [api_server.py:1896] vLLM API server version 0.32.0\n"
)


@pytest.mark.parametrize("relaunch", [True, False])
def test_a_relaunch_under_the_same_name_is_no_restart_loop(tmp_path, relaunch: bool) -> None:
    """The serve log's tail, opened again: after a launch began it reads the new container's
    log (same name), whose banner after the old crash is no restart; within the same launch
    (docker restarted the container) the banner after the crash is the restart loop's shape."""
    mon, events, _ = local_monitor(tmp_path, LEAKED_MEMINFO, period_s=0.05)
    log = tmp_path / "serve.log"
    log.write_text(CRASH)
    mon.start()
    try:
        mon.tail("box", "serve", f"cat {log} 2>/dev/null")
        wait_for(lambda: "failed to start" in str(events.of(LogLines)), "the crash read")
        log.unlink()  # the container is gone: the tail reads nothing
        if relaunch:
            mon.new_attempt(["box"])
        wait_for(lambda: mon._opened_in[("box", "serve")] == mon.attempt, "opened again")
        log.write_text(BANNER)
        wait_for(lambda: "API server version" in str(events.of(LogLines)), "the banner read")
        time.sleep(0.3)
        mon._drain()
    finally:
        mon.stop()
    loops = [e for e in events.of(DiagnosisRaised) if e.diagnosis.wall.id == "restart-loop"]
    assert (loops == []) if relaunch else loops, loops


def test_events_carry_frozen_snapshots_the_book_goes_on_changing(tmp_path: Path) -> None:
    """A raised event keeps the diagnosis as it was when raised: the same wall seen again,
    then made history by a new launch attempt, changes the book, never an event already
    sent; nothing can change what an event carried."""
    import dataclasses

    from spark_tui.events import DiagnosisResolved

    mon, events, _node = local_monitor(tmp_path, LEAKED_MEMINFO, dmon=False, auto_tail=False)
    mon.feed_line("box", "serve", FREE_MEMORY_LINE)
    mon.feed_line("box", "serve", FREE_MEMORY_LINE)
    (first,) = [
        e for e in events.of(DiagnosisRaised) if e.diagnosis.wall.id == "vllm-free-memory-low"
    ]
    live = next(d for d in mon.diagnoses() if d.wall.id == "vllm-free-memory-low")
    assert (first.new, first.diagnosis.state) == (True, "active")
    assert (first.diagnosis.count, live.count) == (1, 2)  # seen again: the book's, not the event's
    mon.new_attempt(["box"])
    (resolved,) = [
        e for e in events.of(DiagnosisResolved) if e.diagnosis.wall.id == "vllm-free-memory-low"
    ]
    assert resolved.diagnosis.state == "resolved"
    assert "new one began" in resolved.diagnosis.resolution
    assert live.state == "resolved" and live is not resolved.diagnosis
    # what was sent before stays as it was
    assert (first.diagnosis.count, first.diagnosis.state, first.diagnosis.resolved_at) == (
        1,
        "active",
        None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.diagnosis.count = 99  # type: ignore[misc]
    assert isinstance(first.diagnosis.evidence_lines, tuple)
