"""Pilot tests of what the screen says staying true (issue 12): spark-tui's own reboot is
never "unexpected", walls resolve after their fix and a relaunch, every node's pane shows
the phase its engine is in, and the TUI, `watch` and `up` name the same walls."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from spark_tui.session import open_cluster
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable
from spark_tui.tui.widgets.node_pane import NodePane
from spark_tui.up import bring_up
from tests.test_tui_live import live_app, select_wall, wait_for


async def _run_plan(pilot, app, key: str, ok: bool = True) -> None:
    """Press `key` (a, r or s), confirm the preview, wait for the run to end, close."""
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
    modal = app.screen
    await pilot.press("y")
    await wait_for(pilot, lambda: modal.phase == "done", limit_s=90)
    assert modal.result is ok, str(modal.query_one("#fix-question").render())
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, FixModal))


def _rows(app) -> dict[str, object]:
    return app.main_screen.query_one(DiagnosesTable).diagnoses


def test_a_reboot_spark_tui_makes_while_the_monitor_runs_is_never_unexpected() -> None:
    async def scenario() -> None:
        app = live_app("leaked-memory-unbalanced", speed=400.0)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(
                pilot, lambda: any(k.startswith("unified-memory-leak|") for k in _rows(app))
            )
            await select_wall(pilot, app, "unified-memory-leak")
            node = app.session.sim.nodes["spark2"]
            boots = node.boot_id
            await _run_plan(pilot, app, "a")  # reboot the leaking node, wait for it
            assert node.boot_id != boots  # it really rebooted
            monitor = app.session.monitor
            # rounds after the new boot id: the monitor saw it and took it for ours
            for _ in range(3):
                await asyncio.to_thread(monitor.wait_rounds, 1)
            assert not any(k.startswith("node-unexpected-reboot|") for k in _rows(app))
            leak = next(d for k, d in _rows(app).items() if k.startswith("unified-memory-leak|"))
            assert not leak.active and leak.resolution  # its readings cleared: resolved

    asyncio.run(scenario())


def test_walls_resolve_after_their_fix_and_a_relaunch_and_every_pane_tells_the_phase() -> None:
    async def scenario() -> None:
        app = live_app("page-cache-hog", speed=400.0)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: any(k.startswith("page-cache-hog|") for k in _rows(app)))
            await _run_plan(pilot, app, "r", ok=False)  # fails: vLLM sees too little memory
            rows = _rows(app)
            await wait_for(pilot, lambda: any(k.startswith("vllm-free-memory-low|") for k in rows))
            await select_wall(pilot, app, "vllm-free-memory-low")
            await _run_plan(pilot, app, "a")  # drop the caches on every node
            await _run_plan(pilot, app, "r")  # and relaunch: it serves

            def page_cache_rows_resolved() -> bool:
                pc = [d for k, d in rows.items() if k.startswith("page-cache-hog|")]
                return bool(pc) and not any(d.active for d in pc)

            await wait_for(pilot, page_cache_rows_resolved)
            free = [d for k, d in rows.items() if k.startswith("vllm-free-memory-low|")]
            assert free and not any(d.active for d in free)
            assert all("attempt" in d.resolution or "fixed" in d.resolution for d in free)
            # the table says so: resolved rows are marked, not removed
            table = app.main_screen.query_one(DiagnosesTable)
            key = next(k for k in rows if k.startswith("vllm-free-memory-low|"))
            assert str(table.get_cell(key, "severity")) == "resolved"
            # both nodes' panes say serving (the worker's rank logs through the head)
            panes = {p.node.name: p for p in app.main_screen.query(NodePane)}
            await wait_for(
                pilot,
                lambda: all(
                    p.state is not None and p.state.serving.phase == "serving"
                    for p in panes.values()
                ),
                state=lambda: {
                    n: p.state and (p.state.serving.phase, p.state.time, p.state.unavailable)
                    for n, p in panes.items()
                },
            )
            worker = panes["spark2"]
            assert "Ray: member" in str(worker.query_one(".stack").render())
            await _run_plan(pilot, app, "s")  # stop: every pane says stopped
            await wait_for(
                pilot,
                lambda: all(p.state.serving.phase == "stopped" for p in panes.values()),
                state=lambda: {n: p.state.serving.phase for n, p in panes.items()},
            )

    asyncio.run(scenario())


def _walls_of_first_launch_tui(scenario_name: str) -> set[str]:
    found: set[str] = set()

    async def scenario() -> None:
        app = live_app(scenario_name, speed=400.0)
        app.autoplay = True  # the demo plays its launch by itself
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(
                pilot,
                lambda: any(
                    d.severity == "error" and d.wall.id != "restart-loop"
                    for d in _rows(app).values()
                ),
                limit_s=90,
            )
            found.update(d.wall.id for d in _rows(app).values() if d.severity == "error")

    asyncio.run(scenario())
    return found


def test_the_tui_watch_and_up_name_the_same_walls() -> None:
    name = "cuda-graph-deadlock"
    tui = _walls_of_first_launch_tui(name)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_tui",
            "watch",
            "--json",
            "--demo",
            name,
            "--duration",
            "3",
            "--speed",
            "400",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    watch = {
        e["wall"]
        for e in map(json.loads, proc.stdout.splitlines())
        if e["event"] == "diagnosis" and e["severity"] == "error"
    }
    events: list[dict] = []
    with open_cluster(scenario=name, speed=400.0) as session:
        bring_up(session, events.append, None, yes=True)
    first_launch: set[str] = set()
    launches = -1  # before the doctor; 0: until the first launch ends (its step is said then)
    for e in events:
        launches += e["event"] in ("doctor", "launch")
        if launches == 0 and e["event"] == "diagnosis" and e["severity"] == "error":
            first_launch.add(e["wall"])
    assert tui == watch == first_launch == {"cuda-graph-capture-hang"}, (tui, watch, first_launch)
