"""A log wall whose fix was verified shows as fixed until the relaunch proves it: in the
TUI (the wall table's state, the status line, the journal of events) and in the event
language `watch --json` and `up --json` print (a `fixed` line, then `resolved`)."""

from __future__ import annotations

import asyncio

from spark_tui.event_journal import EventJournal
from spark_tui.event_lines import WallFixed, WallResolved, line
from spark_tui.session import open_cluster
from spark_tui.tui.messages import ActionFinished
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable
from tests.test_json_schema import errors_of
from tests.test_tui_live import live_app, select_wall, wait_for

WALL = "vllm-free-memory-low"  # page-cache-hog's launch fails on it; dropping caches fixes it


def test_the_event_journal_says_fixed_then_resolved_by_the_relaunch() -> None:
    with open_cluster(scenario="page-cache-hog", speed=240.0) as session:
        journal = EventJournal(session.clock.now)
        session.start(journal.said)
        assert not session.apply(session.plan_launch(), yes=True).ok
        session.monitor.wait_rounds(2)
        low = next(d for d in session.diagnoses() if d.wall.id == WALL)
        result = session.apply(session.plan_fix(low, low.wall.fix("drop-page-caches")), yes=True)
        assert result.ok and result.verified is not False, result.summary()
        said = [x for x in journal.snapshot() if getattr(x, "wall", None) == WALL]
        assert isinstance(said[-1], WallFixed), said
        assert said[-1].how.startswith("fixed: ") and "next launch proves it" in said[-1].how
        assert session.apply(session.plan_launch(), yes=True).ok
        session.monitor.wait_rounds(1)
        said = [x for x in journal.snapshot() if getattr(x, "wall", None) == WALL]
        assert isinstance(said[-1], WallResolved) and "a new one began" in said[-1].how, said
        for x in journal.snapshot():
            assert not errors_of("event", line(x)), (line(x), errors_of("event", line(x)))


def test_the_tui_shows_a_verified_log_wall_fix_as_fixed_until_the_relaunch() -> None:
    async def scenario() -> None:
        app = live_app("page-cache-hog", speed=400.0)
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            table = app.main_screen.query_one(DiagnosesTable)
            status = app.main_screen.query_one("#status")

            def finished(action: str) -> list:
                return [m for m in seen if isinstance(m, ActionFinished) and m.action == action]

            def state_of(wall: str) -> str:
                key = next(k for k in table.diagnoses if k.startswith(f"{wall}|"))
                return table.diagnoses[key].state + " " + " ".join(map(str, table.get_row(key)))

            await wait_for(
                pilot, lambda: any(k.startswith("page-cache-hog|") for k in table.diagnoses)
            )
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            await pilot.press("y")
            await wait_for(pilot, lambda: len(finished("relaunch")) == 1, limit_s=60)
            await wait_for(pilot, lambda: any(k.startswith(f"{WALL}|") for k in table.diagnoses))
            await pilot.press("enter")
            await select_wall(pilot, app, WALL)
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            assert app.screen.plan.fix.id == "drop-page-caches"
            await pilot.press("y")
            await wait_for(pilot, lambda: app.screen.phase == "done", limit_s=30)
            await pilot.press("enter")
            assert finished("fix")[-1].ok, finished("fix")[-1].summary
            # fixed, not resolved and not an error: the wall table and the status line say so
            await wait_for(
                pilot, lambda: state_of(WALL).startswith("fixed"), state=lambda: state_of(WALL)
            )
            assert " fixed " in state_of(WALL) + " " and "error" not in state_of(WALL)
            await wait_for(
                pilot, lambda: status.now == "fixed", state=lambda: (status.now, status.next_key)
            )
            assert status.next_key.startswith("r relaunches")
            journal = app.main_screen.events.snapshot()
            assert any(isinstance(x, WallFixed) and x.wall == WALL for x in journal)
            # the relaunch proves it: resolved
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            await pilot.press("y")
            await wait_for(pilot, lambda: len(finished("relaunch")) == 2, limit_s=60)
            assert finished("relaunch")[-1].ok, finished("relaunch")[-1].summary
            await wait_for(
                pilot, lambda: state_of(WALL).startswith("resolved"), state=lambda: state_of(WALL)
            )

    asyncio.run(scenario())
