"""One small snapshot app: the spark-tui app on the simulated cluster (three GB10 nodes, or
one, scenario page-cache-hog), frozen in time and driven in the app's own thread: twelve
sampling rounds of real simulated readings through the real monitor, Ray's start banner
printed twice (folded) and vLLM log lines from the simulator's log text (the free-memory
failure); with three nodes spark2's cache dropped (its page-cache-hog resolves) and spark3
unplugged. No thread, no wall-clock time, no random jitter: the same picture everywhere.

Used by tests/test_tui_snapshots.py and screenshots/make.py.
"""

from __future__ import annotations

import os
import time

os.environ["TZ"] = "UTC"  # clock times on screen must not depend on the machine
time.tzset()

# freeze the cursor blink (a blinking cursor is a different picture every half second)
from textual.widgets import Input  # noqa: E402

import spark_tui.recipes.render as _render  # noqa: E402
import spark_tui.remedy.fixes as _fixes  # noqa: E402
from spark_tui import policy  # noqa: E402
from spark_tui.kb.loader import load_knowledge  # noqa: E402
from spark_tui.monitor import ClusterMonitor  # noqa: E402
from spark_tui.session import Session  # noqa: E402
from spark_tui.sim import build_sim_cluster  # noqa: E402
from spark_tui.sim import logs as simlogs  # noqa: E402
from spark_tui.state import StateDir  # noqa: E402
from spark_tui.tui.app import SparkTuiApp  # noqa: E402

Input.cursor_blink._default = False  # type: ignore[attr-defined]


def _frozen_stamp() -> str:
    return "20260528-202640"  # backup names and renamed containers carry a stamp: freeze it


def freeze_stamps(monkeypatch=None) -> None:
    """The same stamp in every plan, for a picture that never changes. With a monkeypatch
    (tests) only for that test: a frozen stamp left behind would give two launches of a
    later test the same rename target, and the second launch a name conflict."""
    for module in (_render, _fixes):
        if monkeypatch is not None:
            monkeypatch.setattr(module, "stamp_now", _frozen_stamp)
        else:
            module.stamp_now = _frozen_stamp


SCENARIO = "page-cache-hog"
ROUNDS = 12  # sampling rounds, 2 simulated seconds apart (the page-cache rule holds 10 s)
LOG_VALUES = {"pid": 4242, "api_pid": 4100, "ts": "05-28 20:26:31", "rank": 0, "world": 3}


def snapshot_session(read_only: bool = False, nodes: int = 3) -> Session:
    """The simulated cluster with its clock stopped (speed 0: time moves only by advance())."""
    if read_only:
        policy.set_read_only(True)
    sim = build_sim_cluster(SCENARIO, nodes=nodes, speed=0.0)
    return Session(
        sim.config,
        dict(sim.transports),
        sim.clock,
        load_knowledge(),
        StateDir.for_simulation(SCENARIO),
        sim=sim,
        scenario=SCENARIO,
    )


class SnapshotApp(SparkTuiApp):
    """The real app, not live: the monitor's rounds run here, in order, at mount."""

    def __init__(self, read_only: bool = False, nodes: int = 3) -> None:
        super().__init__(snapshot_session(read_only, nodes), live=False)

    def on_mount(self) -> None:
        super().on_mount()
        s = self.session
        monitor = ClusterMonitor(
            s.config,
            s.transports,
            s.kb,
            s.clock,
            self.pump.emit,
            recipe_facts=s.recipe_facts,
            dmon=False,
            auto_tail=False,
        )
        s.monitor = monitor  # never started: no threads
        for _ in range(ROUNDS):
            for node in s.config.nodes:
                monitor.sample_once(node.name)
            s.clock.advance(2.0)
        banner = simlogs.render("ray", "start-head", ip="10.10.10.1")
        for line in banner + banner:  # `ray start` printed its banner again: folded
            monitor.feed_line("spark1", "container:ray-head", line)
        lines = simlogs.render("vllm", "init", **LOG_VALUES)
        lines += simlogs.render("vllm", "fp4-marlin", **LOG_VALUES)
        lines += simlogs.render(
            "vllm",
            "free-memory-low",
            free="11.19",
            total="119.67",
            util="0.82",
            need="98.13",
            **LOG_VALUES,
        )
        for line in lines:
            monitor.feed_line("spark1", "serve", line)
        monitor.sample_once("spark1")  # its phase after the crash
        if len(s.config.nodes) < 3:
            return
        s.sim.nodes["spark2"].page_cache_gib = 0.0  # dropped: its page-cache-hog resolves
        for _ in range(7):
            monitor.sample_once("spark2")
            s.clock.advance(2.0)
        s.sim.nodes["spark3"].reachable = False  # unplugged
        s.clock.advance(2.0)
        monitor.sample_once("spark3")


async def select_first_diagnosis(pilot) -> None:
    """run_before for snapshots: the first row selected, its details shown."""
    from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable

    await pilot.pause()
    table = pilot.app.screen.query_one(DiagnosesTable)
    table.focus()
    key = next(k for k in table.diagnoses if k.startswith("vllm-free-memory-low|"))
    table.move_cursor(row=table.get_row_index(key))
    await pilot.pause()


def bringup_step(step: str):
    """run_before for snapshots: the bring-up screen open on one step."""

    async def run_before(pilot) -> None:
        from textual.widgets import ListView

        from spark_tui.bringup import BRINGUP_STEPS

        await pilot.pause()
        await pilot.press("b")
        await pilot.pause()
        pilot.app.screen.query_one(ListView).index = [s for s, _t in BRINGUP_STEPS].index(step)
        await pilot.pause()

    return run_before


if __name__ == "__main__":
    SnapshotApp().run()
