"""Two launches in one second rename the old containers to different names: a relaunch
right after a launch (a fast fix) used to rename to a name already taken, and then the
new container's `docker run --name` met a conflict (exit 125)."""

from __future__ import annotations

import time

import pytest

from spark_tui.recipes import render


def test_stamps_in_one_second_differ_and_sort_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    frozen, later = time.gmtime(1_780_000_000), time.gmtime(1_780_000_001)
    monkeypatch.setattr(render.time, "gmtime", lambda *a: frozen)
    stamps = [render.stamp_now() for _ in range(3)]
    assert len(set(stamps)) == 3
    assert stamps == sorted(stamps)
    assert stamps[0] == "20260528T202640Z"
    monkeypatch.setattr(render.time, "gmtime", lambda *a: later)
    assert render.stamp_now() == "20260528T202641Z"  # a new second starts plain again


def test_the_sim_serves_after_three_launches_in_one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_tui.session import open_cluster

    frozen = time.gmtime(1_780_000_000)
    monkeypatch.setattr(render.time, "gmtime", lambda *a: frozen)
    with open_cluster(scenario="healthy", speed=240.0) as session:
        session.start(lambda _e: None)
        for _ in range(3):  # the first finds nothing to rename; the next two rename
            result = session.apply(session.plan_launch(), None, lambda *_: None, yes=True)
            assert result.ok, result.message
