"""A cluster.yaml of 500 nodes cannot make spark-tui run a thread per node: the monitor's
rounds, its dmon streams and a followed log on every node run on a fixed number of
threads (the first frame's seconds at 500 nodes are measured in bench/README.md)."""

from __future__ import annotations

import threading
import time

from spark_tui.monitor import MAX_WORKERS
from spark_tui.session import Session

NODES = 500


def test_500_nodes_with_a_log_each_run_on_a_bounded_number_of_threads() -> None:
    session = Session.open(None, scenario="healthy", sim_nodes=NODES, speed=20.0)
    before = threading.active_count()
    sampled: set[str] = set()
    lock = threading.Lock()

    def listen(event: object) -> None:
        node = getattr(event, "node", None)
        if type(event).__name__ == "NodeSampled" and node is not None:
            with lock:
                sampled.add(node)

    peak = before
    try:
        monitor = session.start(listen)
        for node in session.config.nodes:  # a followed log on every node, as after a launch
            monitor.tail(node.name, "serve", "docker logs -f --tail 10 vllm_node 2>/dev/null")
        # far more nodes read, streams followed at once and dmon streams heard than there are
        # threads (all 500 nodes' 1,000 streams take minutes on a loaded 2-core machine: the
        # rounds and the opens share the pool, by design)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            peak = max(peak, threading.active_count())
            with lock:
                done = len(sampled)
            with monitor._lock:
                streams = len(monitor._streams)
                dmon = sum(1 for v in monitor._dmon.values() if v)
            if done >= 10 * MAX_WORKERS and streams >= 20 * MAX_WORKERS and dmon >= 5 * MAX_WORKERS:
                break
            time.sleep(0.1)
        assert done >= 10 * MAX_WORKERS, f"{done} nodes sampled"
        assert streams >= 20 * MAX_WORKERS and dmon >= 5 * MAX_WORKERS, (streams, dmon)
        peak = max(peak, threading.active_count())
    finally:
        session.close()
    # the pool, the stream pump, the line flusher and the evidence gatherer at most
    assert peak - before <= MAX_WORKERS + 3, (before, peak)


def test_ssh_connections_share_one_watcher_thread(tmp_path, monkeypatch) -> None:
    """Real sshd nodes, many connections: one watcher thread for all of them (it was one per
    node), and each connection's own thread is paramiko's; a dropped node still comes back."""
    from tests.conftest import require_tool
    from tests.sshd_nodes import start_sshd_cluster

    require_tool("sshd")
    cluster = start_sshd_cluster(tmp_path / "sshd", names=("spark1", "spark2"))
    monkeypatch.setenv("HOME", str(cluster.home))
    before = threading.active_count()
    conns = [cluster.transport(name) for name in ("spark1", "spark2") for _ in range(10)]
    try:
        for t in conns:
            assert t.run("echo up").stdout == "up\n"
        names = [th.name for th in threading.enumerate()]
        assert names.count("ssh-watch") == 1, names
        assert not [n for n in names if n.startswith("ssh-watch:")], names
        # paramiko's one thread per connection, and the one watcher
        assert threading.active_count() - before <= len(conns) + 1, names
        cluster.node("spark2").stop()
        dropped = [t for t in conns if t.name == "spark2"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(t.state.reachable for t in dropped):
            time.sleep(0.05)
        assert not any(t.state.reachable for t in dropped)
        cluster.node("spark2").start()
        while time.monotonic() < deadline and not all(t.state.reachable for t in dropped):
            time.sleep(0.05)
        assert all(t.run("echo back").stdout == "back\n" for t in conns)
        assert [th.name for th in threading.enumerate()].count("ssh-watch") == 1
    finally:
        for t in conns:
            t.close()
        cluster.stop()
