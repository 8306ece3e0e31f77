"""A log tail with nothing to read (the serve log inside a container that is not there) backs
off instead of running `docker exec … tail` every period, and is opened again at once when a
launch begins or the container appears. Counted on a node's shim tools (the same shims the
sshd tests use; its `docker exec` fails as docker does for a container that does not exist)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from spark_tui.clock import ScaledClock
from spark_tui.monitor import TAIL_BACKOFF_MAX
from tests.test_nodes_monitor import LEAKED_MEMINFO, local_monitor, wait_for

SERVE_LOG = "docker exec vllm_node tail -n 200 -F /tmp/vllm-serve.log"
KEY = ("box", "serve")
PERIOD_S = 1.0  # clock seconds


def _tails(node) -> int:
    return sum(1 for c in node.commands() if c.startswith("docker exec vllm_node tail"))


def _wait_clock(clock: ScaledClock, until: float, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while clock.now() < until:
        assert time.monotonic() < deadline, "the clock did not move"
        time.sleep(0.02)


def _running_container(node) -> None:
    node.set_file(
        "docker-ps.jsonl",
        json.dumps(
            {
                "ID": "c0ffee",
                "Image": "vllm-cpu:0.32.0",
                "Names": "vllm_node",
                "State": "running",
                "Status": "Up 1 second",
            }
        )
        + "\n",
    )


def _backed_off_to_the_cap(mon, clock: ScaledClock) -> None:
    """Fast clock until the tail waits the longest back-off, then real time: its next try is
    TAIL_BACKOFF_MAX periods (16 s) away once the try planned at the old speed has run."""
    wait_for(lambda: mon._tail_misses.get(KEY, 0) >= 5, "the back-off at its cap", 60)
    clock.set_speed(1.0)
    misses = mon._tail_misses[KEY]
    wait_for(lambda: mon._tail_misses.get(KEY, 0) > misses, "the try planned before", 30)


def test_a_tail_with_no_container_backs_off_and_a_launch_reopens_it_at_once(
    tmp_path: Path,
) -> None:
    clock = ScaledClock(speed=40.0)
    mon, _events, node = local_monitor(
        tmp_path, LEAKED_MEMINFO, clock=clock, period_s=PERIOD_S, dmon=False
    )
    mon.start()
    try:
        t0 = clock.now()
        mon.follow({"box": [SERVE_LOG]})
        _wait_clock(clock, t0 + 120)
        tried = _tails(node)
        # every period would be 120 tries; 1, 2, 4, 8, 16, 16 … periods apart at most 11
        assert 2 <= tried <= 12, node.commands()
        _backed_off_to_the_cap(mon, clock)
        before = _tails(node)
        mon.new_attempt(["box"])  # a launch begins: its log is read from its first line
        wait_for(lambda: _tails(node) > before, "the tail opened at once", 8.0)
    finally:
        mon.stop()


def test_a_container_appearing_reopens_a_backed_off_tail_once(tmp_path: Path) -> None:
    clock = ScaledClock(speed=40.0)
    mon, _events, node = local_monitor(
        tmp_path, LEAKED_MEMINFO, clock=clock, period_s=PERIOD_S, dmon=False
    )
    mon.start()
    try:
        mon.follow({"box": [SERVE_LOG]})
        _backed_off_to_the_cap(mon, clock)
        before = _tails(node)
        _running_container(node)  # started by hand (or by another launcher) on the node
        # the next round (every 3 periods on an idle node) sees it; the back-off was 16 s
        wait_for(lambda: _tails(node) > before, "the tail opened when the container ran", 8.0)
        # its tail still fails (the shim has no file in it): back-off again from one period,
        # not reopened every round for the same container
        clock.set_speed(40.0)
        t1 = clock.now()
        _wait_clock(clock, t1 + 60)
        assert _tails(node) - before <= 12, node.commands()  # every round: 60
        assert mon._tail_misses.get(KEY, 0) >= 3
    finally:
        mon.stop()
    assert TAIL_BACKOFF_MAX * PERIOD_S > 8.0  # what "at once" above is measured against


def test_a_launch_wait_looks_at_once_when_the_monitor_reads_its_line(tmp_path: Path) -> None:
    """The wait for the ready line polls every 60 s; the monitor, which follows the same log
    with `tail -F`, says when the line arrived: the wait polls then, not a minute later."""
    import threading

    from spark_tui.clock import RealClock
    from spark_tui.recipes.plan import LaunchStep
    from spark_tui.remedy.launch import LaunchRunner

    log = tmp_path / "serve.log"
    log.write_text("INFO loading weights\n")
    mon, _events, _node = local_monitor(tmp_path, LEAKED_MEMINFO, clock=RealClock(), dmon=False)
    mon.start()
    try:
        mon.tail("box", "serve", f"tail -n 200 -F {log}")
        step = LaunchStep(
            "wait-ready", "launch", "box", "wait for the ready line", "wait-line",
            f"cat {log}", timeout_s=600, interval_s=60, expect="Application startup complete",
        )  # fmt: skip
        runner = LaunchRunner(mon.transports, RealClock(), seen=mon.expect_line)

        def ready() -> None:
            with log.open("a") as f:  # the engine appends to its log
                f.write("INFO Application startup complete.\n")

        writer = threading.Timer(1.0, ready)
        writer.start()
        t0 = time.monotonic()
        result = runner.run_step(step)
        took = time.monotonic() - t0
        writer.join()
    finally:
        mon.stop()
    assert result.ok, result.detail
    assert result.polls == 2  # the first, and the one the monitor's line woke
    assert took < 30.0  # the next poll was 60 s away
