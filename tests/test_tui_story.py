"""Pilot tests of the demo telling its story by itself (the launch, then a client under
load), the status line saying what comes next, the recipe switch followed everywhere, and
quitting that asks only while an action runs. Real monitor, real simulated nodes."""

from __future__ import annotations

import asyncio

import pytest

from spark_tui.session import Session
from spark_tui.tui.app import SparkTuiApp
from spark_tui.tui.messages import ActionFinished
from spark_tui.tui.screens.confirm_modal import ConfirmModal
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable
from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail
from spark_tui.tui.widgets.status_line import StatusLine
from tests.test_tui_live import OPENED, select_wall, wait_for
from tests.test_tui_live import _close_sessions as _close_sessions  # the fixture


def story_app(scenario: str, speed: float = 240.0) -> SparkTuiApp:
    session = Session.open(None, scenario=scenario, speed=speed)
    OPENED.append(session)
    return SparkTuiApp(session, autoplay=True)


def active_walls(app: SparkTuiApp) -> set[str]:
    table = app.main_screen.query_one(DiagnosesTable)
    return {d.wall.id for d in table.diagnoses.values() if d.active}


def test_ray_channel_timeout_shows_its_wall_under_the_story_client_with_nothing_pressed() -> None:
    async def scenario() -> None:
        app = story_app("ray-channel-timeout")
        async with app.run_test(size=(120, 40)) as pilot:
            status = app.main_screen.query_one(StatusLine)
            await wait_for(pilot, lambda: app.main_screen.running == "launch")
            assert status.now.startswith("launching minimax-m2.5-nvfp4-vllm-ep")
            # it serves; the story's client sends requests; one of them times out the channel
            await wait_for(pilot, lambda: "ray-channel-timeout" in active_walls(app), limit_s=90)
            detail = app.main_screen.query_one(DiagnosisDetail)
            await wait_for(
                pilot,
                lambda: (
                    detail.diagnosis is not None
                    and detail.diagnosis.wall.id == "ray-channel-timeout"
                ),
            )
            # the traceback's frames come first (suspected: a warning), its exception line after
            await wait_for(
                pilot,
                lambda: status.now == "error on spark1: ray-channel-timeout",
                state=lambda: status.now,
            )
            assert status.next_key.startswith("a applies fix 1 (Relaunch with --enforce-eager")

    asyncio.run(scenario())


def test_flashmla_switch_leaves_the_status_relaunch_and_bringup_on_the_new_recipe() -> None:
    async def scenario() -> None:
        app = story_app("flashmla-sglang")
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            status = app.main_screen.query_one(StatusLine)
            assert status.recipe.startswith("deepseek-v4-flash-sglang-tp2")
            await wait_for(
                pilot, lambda: "flashmla-unsupported-arch" in active_walls(app), limit_s=90
            )
            await wait_for(pilot, lambda: app.main_screen.running is None)
            await select_wall(pilot, app, "flashmla-unsupported-arch")
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            modal = app.screen
            preview = str(modal.query_one("#fix-preview").render())
            assert "minimax-m2.7-nvfp4-vllm-tp2" in preview
            assert "a different model" in preview  # said before anything runs
            assert modal.plan.needs_confirmation
            await pilot.press("y")
            await wait_for(pilot, lambda: modal.phase == "done", limit_s=30)
            assert modal.result, str(modal.query_one("#fix-question").render())
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, FixModal))
            assert status.recipe.startswith("minimax-m2.7-nvfp4-vllm-tp2")
            assert app.session.recipe().id == "minimax-m2.7-nvfp4-vllm-tp2"
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            assert app.screen.plan.fix.title.startswith("Relaunch minimax-m2.7-nvfp4-vllm-tp2")
            await pilot.press("y")

            def relaunched() -> list[ActionFinished]:
                return [m for m in seen if isinstance(m, ActionFinished) and m.action == "relaunch"]

            await wait_for(pilot, relaunched, limit_s=90)
            assert relaunched()[-1].ok, relaunched()[-1].summary
            await pilot.press("enter")
            await wait_for(
                pilot,
                lambda: status.now.startswith("serving minimax-m2.7"),
                state=lambda: (status.now, status.next_key, active_walls(app)),
            )
            assert status.tone == "ok"

    asyncio.run(scenario())


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
def test_quit_asks_only_while_an_action_runs(key: str) -> None:
    async def scenario() -> None:
        session = Session.open(None, scenario="healthy", speed=20.0)
        OPENED.append(session)
        app = SparkTuiApp(session, autoplay=True)  # a slow clock: the launch runs a while
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.running_action() == "launch")
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
            assert "Launch is running" in str(app.screen.query_one("Static").render())
            await pilot.press("n")  # stay
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmModal))
            assert app.is_running
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
            await pilot.press("y")
            await wait_for(pilot, lambda: not app.is_running)
        assert app.return_code == 0

        idle = SparkTuiApp(session, live=False)
        async with idle.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press(key)  # nothing runs: it quits at once
            await wait_for(pilot, lambda: not idle.is_running)

    asyncio.run(scenario())
