"""`spark-tui watch --json --demo SCENARIO`: the live pipeline, headless, over a playing scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def watch(scenario: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_tui",
            "watch",
            "--json",
            "--demo",
            scenario,
            "--duration",
            "2",
            "--speed",
            "200",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_page_cache_hog_streams_the_free_memory_wall_with_its_cause() -> None:
    proc = watch("page-cache-hog")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {d["event"] for d in lines} <= {
        "diagnosis",
        "resolved",
        "reachable",
        "unreachable",
        "relaunch",
    }
    walls = {d["wall"]: d for d in lines if d["event"] == "diagnosis"}
    d = walls["vllm-free-memory-low"]
    assert d["severity"] == "error" and d["node"] in ("spark1", "spark2")
    assert d["cause"] == "page-cache" and d["fixes"][0] == "drop-page-caches"
    assert "Free memory on device" in d["evidence"] and d["time"].endswith("+00:00")
    assert set(d) >= {
        "event",
        "wall",
        "title",
        "severity",
        "file",
        "line",
        "count",
        "evidence",
        "fixes",
        "node",
        "time",
    }


def test_healthy_scenario_raises_no_error() -> None:
    proc = watch("healthy")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    errors = [d for d in lines if d["event"] == "diagnosis" and d["severity"] == "error"]
    assert errors == []
    assert not any(d["event"] == "unreachable" for d in lines)


def test_unknown_scenario_is_bad_input() -> None:
    proc = watch("no-such-scenario")
    assert proc.returncode == 2 and "no-such-scenario" in proc.stderr


def test_a_demo_without_duration_stops_at_its_documented_limit_and_says_so() -> None:
    """`watch --demo` would otherwise run for ever on a story that has ended: it stops after
    the limit its --help and the README give, and says so on stderr."""
    from spark_tui.cli.watch import DEMO_DURATION_S

    helped = subprocess.run(
        [sys.executable, "-m", "spark_tui", "watch", "--help"], capture_output=True, text=True
    ).stdout
    assert f"with --demo, {DEMO_DURATION_S:g})" in " ".join(helped.split())
    assert (
        f"with `--demo`, {DEMO_DURATION_S:g} s unless `--duration`"
        in Path(__file__).resolve().parent.parent.joinpath("README.md").read_text()
    )
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui", "watch", "--json", "--demo", "healthy"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"stopped after {DEMO_DURATION_S:g} s (--duration S to watch longer)" in proc.stderr
    assert "stopped after" not in watch("healthy").stderr  # a --duration given: no news


def test_auto_relaunch_says_each_decision_once_however_often_the_engine_crashes() -> None:
    """An engine in a restart loop crashes again and again: `watch --json --auto-relaunch`
    says its answer once per decision, each line with its event and time (it once printed
    150 identical relaunch lines in 40 s)."""
    import io
    import threading

    from spark_tui.cli.watch import EventPrinter, _watch
    from spark_tui.driver import Driver
    from spark_tui.session import open_cluster
    from tests.test_json_schema import errors_of

    out = io.StringIO()
    printer = EventPrinter(True, out)
    printer._phase = {}
    stop = threading.Event()
    with open_cluster(scenario="page-cache-hog", speed=240.0) as session:
        printer.now = session.clock.now
        session.start(printer)
        assert not session.apply(session.plan_launch(), yes=True).ok  # the wall stops it
        session.monitor.wait_rounds(2)

        def crash_again_and_again() -> None:  # each a change into "crashed", as a loop makes
            for _ in range(12):
                printer.crashed_on = "spark1"
                printer.crashed.set()
                stop.wait(0.3)

        loop = threading.Thread(target=crash_again_and_again)
        loop.start()
        _watch(session, Driver(session), printer, stop, 6.0, True)
        stop.set()
        loop.join()
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    decisions = [x for x in lines if x["event"] == "relaunch"]
    assert decisions, lines
    assert all(not errors_of("event", x) for x in lines), lines
    said = [json.dumps({k: v for k, v in x.items() if k != "time"}) for x in decisions]
    assert len(said) == len(set(said)), said
    assert len(decisions) <= 2, decisions  # the answer, and at most one change of it
