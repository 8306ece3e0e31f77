"""No line is lost to a diagnosis: three nodes behind real sshd each write 5,000 lines/s,
walls planted late, while the front end stalls; the matcher still sees every planted line.

The queue between the tails and the matcher is made small and the consumer slow so that it
fills (as it does when a 2-core machine is loaded): the tails must wait, not drop."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spark_tui import shell
from spark_tui.clock import RealClock
from spark_tui.events import LogLines
from spark_tui.kb.loader import load_knowledge
from spark_tui.monitor import ClusterMonitor
from tests.sshd_nodes import start_sshd_cluster

HEALTHY = (
    "(APIServer pid=4100) INFO 05-28 20:26:31 [loggers.py:127] Engine 000: Avg prompt "
    "throughput: 0.0 tokens/s, Avg generation throughput: 36.6 tokens/s seq={seq}"
)
WALL = (
    "(EngineCore_DP0 pid=4242) ValueError: Free memory on device cuda:0 (9.79/119.67 GiB) on "
    "startup is less than desired GPU memory utilization (0.82, 98.13 GiB). seq={seq}"
)
RATE = 5_000  # lines per second per node
SECONDS = 3
PLANTS = 20  # per node, all in the last fifth of the flood


@pytest.mark.sshd
@pytest.mark.slow
def test_every_planted_wall_is_matched_under_a_flood_with_a_stalled_front_end(
    tmp_path: Path,
) -> None:
    names = ("spark1", "spark2", "spark3")
    sshd = start_sshd_cluster(tmp_path / "sshd", names=names)
    logs = {n: tmp_path / f"{n}.log" for n in names}
    for p in logs.values():
        p.write_text("")
    found: dict[str, set[int]] = {n: set() for n in names}
    received = {"lines": 0}
    lock = threading.Lock()

    def emit(event: object) -> None:
        if not isinstance(event, LogLines):
            return
        with lock:
            stall = received["lines"] == 0
            received["lines"] += len(event.lines)
        if stall:  # a front end that stalls once, longer than a tail ever waited to queue
            time.sleep(6.0)
        for index, wall, _severity in event.marks:
            if wall == "vllm-free-memory-low":
                seq = int(event.lines[index].rsplit("seq=", 1)[1])
                with lock:
                    found[event.node].add(seq)

    monitor = ClusterMonitor(
        sshd.cluster_config(),
        {n: sshd.transport(n) for n in names},
        load_knowledge(use_user=False),
        RealClock(),
        emit,
        period_s=60.0,
        dmon=False,
        auto_tail=False,
        max_queued_lines=500,
    )
    total = RATE * SECONDS
    planted = {seq for seq in range(total * 4 // 5, total, total // 5 // PLANTS)}
    try:
        monitor.start()
        for n in names:
            monitor.tail(n, "serve", f"tail -n0 -F {shell.quote(str(logs[n]))}")
        time.sleep(2.0)  # the tails are open

        def write(node: str) -> None:
            with logs[node].open("a") as fh:
                start = time.monotonic()
                for seq in range(total):
                    fh.write((WALL if seq in planted else HEALTHY).format(seq=seq) + "\n")
                    if seq % 500 == 499:  # 5,000 lines/s, in bursts of 500
                        fh.flush()
                        ahead = (seq + 1) / RATE - (time.monotonic() - start)
                        if ahead > 0:
                            time.sleep(ahead)

        writers = [threading.Thread(target=write, args=(n,)) for n in names]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if all(found[n] == planted for n in names) and received["lines"] >= 3 * total:
                    break
            time.sleep(0.2)
    finally:
        monitor.stop()
        sshd.stop()
    assert received["lines"] == 3 * total  # every line reached the matcher and the front end
    for n in names:
        assert found[n] == planted, (n, sorted(planted - found[n])[:5])
