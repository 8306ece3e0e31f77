"""Pilot tests of the app on the live simulated cluster: the real monitor, real transports
(simulated GB10 nodes), the real knowledge base. Waits are bounded polls, not timings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_tui.session import Session
from spark_tui.tui.app import SparkTuiApp
from spark_tui.tui.messages import DiagnosisShown, ReachabilityShown
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable
from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail
from spark_tui.tui.widgets.log_view import LogView
from spark_tui.tui.widgets.node_pane import NodePane

FREE_MEMORY_LINE = (
    "ERROR 05-12 09:14:35 [core.py:708] ValueError: Free memory on device cuda:0 "
    "(11.19/119.67 GiB) on startup is less than desired GPU memory utilization "
    "(0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
    "other processes."
)


OPENED: list[Session] = []


@pytest.fixture(autouse=True)
def _close_sessions():
    """Whoever opens a session closes it (the app only stops watching)."""
    yield
    while OPENED:
        OPENED.pop().close()


async def wait_for(
    pilot, condition: Callable[[], object], limit_s: float = 30.0, state: Callable[[], object] = str
) -> None:
    """Let the app run until `condition()` holds (bounded: fails after limit_s, saying `state()`)."""
    for _ in range(int(limit_s / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"not reached within {limit_s} s: {state()}")


def live_app(
    scenario: str = "healthy", read_only: bool = False, speed: float = 20.0
) -> SparkTuiApp:
    session = Session.open(None, read_only=read_only, scenario=scenario, speed=speed)
    OPENED.append(session)
    return SparkTuiApp(session)


def test_panes_fill_from_the_simulated_nodes() -> None:
    async def scenario() -> None:
        app = live_app()
        async with app.run_test(size=(120, 40)) as pilot:
            panes = list(app.main_screen.query(NodePane))
            assert [p.node.name for p in panes] == ["spark1", "spark2"]
            await wait_for(pilot, lambda: all(p.state and p.state.memory for p in panes))
            assert "simulated cluster" in app.sub_title
            for p in panes:
                assert p.state.memory.total_bytes > 100 * 2**30  # a GB10: ~119.7 GiB

    asyncio.run(scenario())


def test_a_signature_line_on_a_node_shows_its_diagnosis() -> None:
    async def scenario() -> None:
        app = live_app()
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: app.session.monitor is not None)
            monitor = app.session.monitor
            monitor.feed_line("spark1", "serve", "INFO 05-12 09:14:33 Starting to load model")
            monitor.feed_line("spark1", "serve", FREE_MEMORY_LINE)

            def shown() -> bool:
                return any(
                    isinstance(m, DiagnosisShown) and m.diagnosis.wall.id == "vllm-free-memory-low"
                    for m in seen
                )

            await wait_for(pilot, shown)
            table = app.main_screen.query_one(DiagnosesTable)
            key = next(k for k in table.diagnoses if k.startswith("vllm-free-memory-low|"))
            assert table.diagnoses[key].node == "spark1"
            table.focus()
            table.move_cursor(row=table.get_row_index(key))
            await pilot.pause()
            detail = app.main_screen.query_one(DiagnosisDetail)
            assert detail.diagnosis is not None
            assert detail.diagnosis.wall.id == "vllm-free-memory-low"
            log = app.main_screen.query_one(LogView)
            await wait_for(pilot, lambda: any(e.severity == "error" for e in log._rows()))
            assert any(
                e.node == "spark1" and "Free memory on device" in e.text and e.severity == "error"
                for e in log._rows()
            )

    asyncio.run(scenario())


def test_a_dropped_node_shows_unreachable_and_comes_back_by_itself() -> None:
    async def scenario() -> None:
        app = live_app()
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            pane = app.main_screen.query_one("#node-spark2", NodePane)
            await wait_for(pilot, lambda: pane.state is not None and pane.state.reachable)
            app.session.sim.nodes["spark2"].reachable = False  # unplugged
            await wait_for(pilot, lambda: pane.has_class("-unreachable"))
            reach = str(pane.query_one(".reach").render())
            assert reach.startswith("unreachable since ") and "retrying" in reach
            assert any(isinstance(m, ReachabilityShown) and not m.reachable for m in seen)
            app.session.sim.nodes["spark2"].reachable = True  # plugged back
            await wait_for(pilot, lambda: not pane.has_class("-unreachable"))
            assert str(pane.query_one(".reach").render()) == "reachable"
            other = app.main_screen.query_one("#node-spark1", NodePane)
            assert not other.has_class("-unreachable")

    asyncio.run(scenario())


async def select_wall(pilot, app: SparkTuiApp, wall: str) -> None:
    """Click-free selection: the row of `wall` gets the cursor (as the user would)."""
    table = app.main_screen.query_one(DiagnosesTable)
    key = next(k for k in table.diagnoses if k.startswith(f"{wall}|"))
    table.focus()
    table.move_cursor(row=table.get_row_index(key))
    await pilot.pause()


def test_apply_previews_confirms_applies_and_verifies_on_the_nodes() -> None:
    from spark_tui.tui.messages import ActionFinished

    async def scenario() -> None:
        app = live_app("page-cache-hog")
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            table = app.main_screen.query_one(DiagnosesTable)
            await wait_for(
                pilot, lambda: any(k.startswith("page-cache-hog|") for k in table.diagnoses)
            )
            await select_wall(pilot, app, "page-cache-hog")
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            modal = app.screen
            assert modal.plan.fix.id == "drop-page-caches"
            assert set(modal.plan.nodes) == {"spark1", "spark2"}
            preview = str(modal.query_one("#fix-preview").render())
            assert preview.count("sudo -n sysctl -w vm.drop_caches=3") == 2
            nodes = app.session.sim.nodes
            assert all(n.page_cache_gib > 20 for n in nodes.values())  # nothing ran yet
            await pilot.press("y")
            await wait_for(pilot, lambda: modal.phase == "done")
            done = [m for m in seen if isinstance(m, ActionFinished) and m.action == "fix"]
            assert done and done[-1].ok, done[-1].summary if done else seen
            assert "checked: memory.cached_gib < 5 on spark1: yes" in done[-1].summary
            assert all(n.page_cache_gib < 5 for n in nodes.values())  # the nodes really changed
            assert str(modal.query_one("#fix-question").render()).startswith("Done — checked")
            output = "\n".join(modal.query_one("#fix-output").lines)
            assert "drop_caches" in output
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, FixModal))
            action, ok, summary = app.main_screen.last_result
            assert (action, ok) == ("fix", True) and summary.startswith("checked")
            status = app.main_screen.query_one("#status")
            assert status.now == "fixed" and status.next_key.startswith("r relaunches")

    asyncio.run(scenario())


def test_relaunch_reaches_serving_in_the_page_cache_hog_scenario() -> None:
    from spark_tui.tui.messages import ActionFinished

    async def scenario() -> None:
        app = live_app("page-cache-hog", speed=400.0)  # a 5-minute weight load in a second
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            table = app.main_screen.query_one(DiagnosesTable)
            await wait_for(
                pilot, lambda: any(k.startswith("page-cache-hog|") for k in table.diagnoses)
            )
            # the first relaunch hits the wall: vLLM sees too little free memory; `r` previews
            # the relaunch (it stops containers) and runs it once confirmed
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            assert app.screen.plan.needs_confirmation
            await pilot.press("y")

            def finished() -> list:
                return [m for m in seen if isinstance(m, ActionFinished) and m.action == "relaunch"]

            await wait_for(pilot, lambda: len(finished()) == 1, limit_s=60)
            assert not finished()[0].ok
            await wait_for(
                pilot, lambda: any(k.startswith("vllm-free-memory-low|") for k in table.diagnoses)
            )
            await pilot.press("enter")
            # its fix (chosen by the readings: the page cache), then relaunch again
            await select_wall(pilot, app, "vllm-free-memory-low")
            await pilot.press("a", "y")
            await wait_for(pilot, lambda: app.screen.phase == "done", limit_s=30)
            await pilot.press("enter")
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            await pilot.press("y")
            await wait_for(pilot, lambda: len(finished()) == 2, limit_s=60)
            last = finished()[-1]
            assert last.ok, last.summary
            assert "tok/s" in last.summary
            head = app.main_screen.query_one("#node-spark1", NodePane)
            await wait_for(
                pilot, lambda: head.state is not None and head.state.serving.phase == "serving"
            )

    asyncio.run(scenario())


def test_doctor_and_export_run_in_workers_and_report_in_the_status_line() -> None:
    from spark_tui import paths
    from spark_tui.tui.messages import ActionFinished
    from spark_tui.tui.screens.output_screen import OutputScreen

    async def scenario() -> None:
        app = live_app("drm-override")
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, OutputScreen))
            out = app.screen

            def finished(action: str) -> list:
                return [m for m in seen if isinstance(m, ActionFinished) and m.action == action]

            await wait_for(pilot, lambda: finished("doctor"), limit_s=60)
            lines = "\n".join(out.query_one("#output-log").lines)
            assert "failed drm-override-halves-memory" in lines
            assert "drm-override-halves-memory" in finished("doctor")[-1].summary
            await pilot.press("escape")
            await pilot.press("e")
            await wait_for(pilot, lambda: finished("export"), limit_s=60)
            done = finished("export")[-1]
            assert done.ok, done.summary
            action, _ok, summary = app.main_screen.last_result
            assert action == "export" and summary.startswith("written to ")
            report = Path(summary.removeprefix("written to "))
            text = report.read_text()
            assert "spark1" in text and "simulated" in text
            # a demo's report outlives the demo, but never lands in the real state directory
            assert not (paths.state_dir() / "reports").exists()

    asyncio.run(scenario())
