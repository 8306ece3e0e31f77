"""`spark-tui watch --json --demo SCENARIO`: the live pipeline, headless, over a playing scenario."""

from __future__ import annotations

import json
import subprocess
import sys


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
