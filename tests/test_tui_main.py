"""Pilot tests of the main screen on the replayed three-node cluster (tests/tui_snapshot_app.py)."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import DataTable

from spark_tui.tui.messages import ActionFinished
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.screens.help_screen import HelpScreen
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable
from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail
from spark_tui.tui.widgets.log_view import LogView, line_level
from spark_tui.tui.widgets.node_pane import NodePane
from spark_tui.tui.widgets.status_line import StatusLine
from tests.tui_snapshot_app import SnapshotApp, freeze_stamps, select_first_diagnosis


@pytest.fixture(autouse=True)
def _frozen_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    freeze_stamps(monkeypatch)


def test_panes_show_readings_reachability_and_serving_state() -> None:
    asyncio.run(_test_panes_show_readings_reachability_and_serving_state())


async def _test_panes_show_readings_reachability_and_serving_state() -> None:
    app = SnapshotApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panes = {p.node.name: p for p in app.screen.query(NodePane)}
        assert set(panes) == {"spark1", "spark2", "spark3"}
        assert str(panes["spark1"].query_one(".serving").render()) == "serving: crashed"
        reach = str(panes["spark3"].query_one(".reach").render())
        assert reach == "unreachable since 20:27:20, retrying (no route to host)"
        assert panes["spark3"].has_class("-unreachable")
        assert not panes["spark2"].has_class("-unreachable")
        assert (
            len(panes["spark1"].sm_history) == 13
        )  # one sample per round (12 and one after the crash)
        assert panes["spark3"].sm_history[-1] is None  # unreachable: a gap, never a full bar
        memory = panes["spark1"].state.memory
        assert memory.cached_bytes > 100 * 2**30  # the scenario's page cache


def test_signature_line_shows_its_diagnosis_newest_error_first() -> None:
    asyncio.run(_test_signature_line_shows_its_diagnosis_newest_error_first())


async def _test_signature_line_shows_its_diagnosis_newest_error_first() -> None:
    app = SnapshotApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DiagnosesTable)
        walls = [str(table.get_row_at(i)[0]).strip() for i in range(table.row_count)]
        assert {"vllm-free-memory-low", "page-cache-hog", "fp4-marlin-fallback-notice"} <= set(
            walls
        )
        log = app.screen.query_one(LogView)
        error_lines = [e for e in log._rows() if e.severity == "error"]
        assert any("Free memory on device" in e.text for e in error_lines)
        # the most severe wall is shown by itself: its summary, the cause the readings
        # chose, the evidence and the fixes with their exact commands
        detail = app.screen.query_one(DiagnosisDetail)
        assert detail.diagnosis is not None and detail.diagnosis.wall.id == "vllm-free-memory-low"
        text = detail.render_text().plain
        assert "Cause (from the readings): the page cache still holds" in text
        assert "Evidence" in text and "Free memory on device cuda:0 (11.19/119.67 GiB)" in text
        assert "sudo -n sysctl -w vm.drop_caches=3" in text


def test_log_source_follow_and_search() -> None:
    asyncio.run(_test_log_source_follow_and_search())


async def _test_log_source_follow_and_search() -> None:
    app = SnapshotApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        log = app.screen.query_one(LogView)
        texts = log.visible_texts()
        assert any("Free memory on device" in t for t in texts)
        assert len([t for t in texts if t.endswith("Ray runtime started.")]) == 1  # folded
        await pilot.press("l")
        assert log.node == "spark1"
        assert all(t.startswith("spark1:") for t in log.visible_texts())
        await pilot.press("l", "l", "l")
        assert log.node is None
        await pilot.press("v")  # warnings and errors only
        rows = log._rows()
        assert 0 < len(rows) < 5 and all(line_level(e) >= 1 for e in rows)
        assert any("Free memory on device" in e.text for e in rows)
        await pilot.press("v", "v")
        assert log.level == "all"
        await pilot.press("f")
        assert log.follow is False
        await pilot.press("slash")
        await pilot.press(*"Supported_tasks", "enter")
        await pilot.pause()
        assert log.search == "Supported_tasks"
        assert "search: Supported_tasks" in str(app.screen.query_one("#log-title").render())


def test_apply_opens_preview_with_per_node_commands_and_n_cancels() -> None:
    asyncio.run(_test_apply_opens_preview_with_per_node_commands_and_n_cancels())


async def _test_apply_opens_preview_with_per_node_commands_and_n_cancels() -> None:
    app = SnapshotApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await select_first_diagnosis(pilot)
        await pilot.press("a")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, FixModal)
        preview = modal.plan
        assert set(preview.nodes) == {"spark1", "spark2", "spark3"}  # drop caches on every node
        text = str(modal.query_one("#fix-preview").render())
        for node in preview.nodes:
            assert f"on {node}:" in text
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, FixModal)


def test_read_only_refuses_every_change_with_a_clear_message() -> None:
    asyncio.run(_test_read_only_refuses_every_change_with_a_clear_message())


async def _test_read_only_refuses_every_change_with_a_clear_message() -> None:
    app = SnapshotApp(read_only=True)
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await pilot.pause()
        status = app.screen.query_one(StatusLine)
        journal = app.session.journal
        await pilot.press("r")  # the relaunch's preview shows: read-only hides nothing
        await pilot.pause()
        assert isinstance(app.screen, FixModal)
        assert "Read-only" in str(app.screen.query_one("#fix-question").render())
        await pilot.press("y")  # … and the engine refuses to run it
        for _ in range(600):  # bounded (30 s): under a loaded machine the refusal takes a while
            await pilot.pause(0.05)
            if app.screen.phase == "done":
                break
        assert "read-only: refused to run relaunch" in app.main_screen.last_result[2]
        assert status.read_only
        await pilot.press("enter")
        await select_first_diagnosis(pilot)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, FixModal)
        await pilot.press("y")
        for _ in range(600):  # bounded (30 s): under a loaded machine the refusal takes a while
            await pilot.pause(0.05)
            if app.screen.phase == "done":
                break
        refused = [m for m in seen if isinstance(m, ActionFinished) and not m.ok]
        assert any("read-only: refused to run drop-page-caches" in m.summary for m in refused)
        assert journal.entries() == []  # nothing ran, nothing was journaled
        nodes = app.session.sim.nodes  # (the replay dropped spark2's cache itself)
        assert all(nodes[n].page_cache_gib > 20 for n in ("spark1", "spark3"))


def test_help_and_palette_hold_every_action() -> None:
    asyncio.run(_test_help_and_palette_hold_every_action())


async def _test_help_and_palette_hold_every_action() -> None:
    from spark_tui.tui.commands import ACTIONS

    app = SnapshotApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        keys = {b.key for b in app.main_screen.BINDINGS} | {b.key for b in app.BINDINGS}
        assert {"a", "r", "b", "d", "l", "slash", "f", "u", "e", "q", "question_mark"} <= keys
        assert {"n", "o", "v", "w", "ctrl+c", "j", "k", "g", "G"} <= keys
        actions = {a for _n, a, _h in ACTIONS}
        for binding in app.main_screen.BINDINGS:
            assert binding.action in actions


def test_narrow_terminal_stacks_the_panes() -> None:
    asyncio.run(_test_narrow_terminal_stacks_the_panes())


async def _test_narrow_terminal_stacks_the_panes() -> None:
    app = SnapshotApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.has_class("-narrow")
        xs = {p.region.x for p in app.screen.query(NodePane)}
        assert len(xs) == 1  # one column
        assert isinstance(app.screen.query_one(DiagnosesTable), DataTable)


def test_no_color_is_respected_and_t_switches_dark_and_light(monkeypatch) -> None:
    from spark_tui.tui.widgets.memory_bar import MemoryBar

    monkeypatch.setenv("NO_COLOR", "1")

    async def scenario() -> None:
        app = SnapshotApp()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert app.no_color
            bar = app.screen.query(MemoryBar).first()
            assert "█" in bar.render().plain  # without colour the shades tell the parts apart
            theme = app.theme
            await pilot.press("t")
            assert app.theme != theme and "light" in app.theme

    asyncio.run(scenario())


def test_palette_runs_actions_and_read_only_refuses_undo_and_bringup_steps() -> None:
    from spark_tui.tui.screens.bringup_screen import BringUpScreen

    async def scenario() -> None:
        app = SnapshotApp(read_only=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Undo the last", "enter")
            await pilot.pause(0.3)
            assert "read-only: refused to undo" in app.main_screen.last_result[2]
            await pilot.press("escape")  # the action's output screen shows the refusal too
            await pilot.pause()
            await pilot.press("b")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, BringUpScreen)
            screen._show("launch")
            await pilot.press("g")
            await pilot.pause()
            assert screen.driver.status("launch") == "pending"  # nothing ran
            assert "read-only: refused to run the launch step" in app.main_screen.last_result[2]

    asyncio.run(scenario())


def test_mouse_click_on_a_node_tails_its_log() -> None:
    async def scenario() -> None:
        app = SnapshotApp()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            log = app.screen.query_one(LogView)
            await pilot.click("#node-spark2")
            await pilot.pause()
            assert log.node == "spark2"
            assert "log: spark2" in str(app.screen.query_one("#log-title").render())

    asyncio.run(scenario())


def test_r_previews_the_rollback_to_what_last_served_and_asks() -> None:
    asyncio.run(_test_r_previews_the_rollback_to_what_last_served_and_asks())


async def _test_r_previews_the_rollback_to_what_last_served_and_asks() -> None:
    from dataclasses import replace

    from spark_tui.recipes.revisions import mark_served
    from spark_tui.tui.screens.confirm_modal import ConfirmModal

    app = SnapshotApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        session = app.session
        recipe = session.recipe()
        await pilot.press("R")  # nothing served yet: one clear line, nothing asked
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmModal)
        assert any("never served" in str(n.message) for n in app._notifications)
        good = "sha256:" + "a" * 64
        changed = replace(recipe, image="vllm-node:known-good")
        mark_served(session.revisions, changed, 40.0, {"spark1": good})
        await pilot.press("R")
        for _ in range(100):  # the nodes' copies of the image are read in a worker first
            await pilot.pause(0.05)
            if isinstance(app.screen, ConfirmModal):
                break
        assert isinstance(app.screen, ConfirmModal)
        assert f"+image: {good}" in app.screen.prompt
        assert f"image: pinned to {good} — what vllm-node:known-good was" in app.screen.prompt
        await pilot.press("n")  # cancelled: the recipe is unchanged
        await pilot.pause()
        assert session.revisions.current(recipe.id) is None


def _screen_rows(svg: str) -> list[str]:
    """The text of an exported screenshot, row by row (what a user sees, cuts included)."""
    import html
    import re

    rows: dict[float, list[str]] = {}
    for y, text in re.findall(r'<text[^>]*y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(y), []).append(html.unescape(re.sub("<[^>]+>", "", text)))
    return ["".join(rows[y]).replace("\xa0", " ") for y in sorted(rows)]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48)])
def test_tok_s_and_a_missing_docker_or_nvidia_smi_are_never_cut(size) -> None:
    """A node that serves with neither docker nor nvidia-smi readable: at every size each
    node's tok/s and the two missing tools are on screen whole."""
    import dataclasses

    from spark_tui.nodes.state import ServingState

    async def scenario() -> list[str]:
        app = SnapshotApp()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            for pane in app.screen.query(NodePane):
                state = app.session.monitor.states()[pane.node.name]
                if not state.reachable:
                    continue
                pane.set_state(
                    dataclasses.replace(
                        state,
                        serving=ServingState(phase="serving", tok_s=1234.5678),
                        gpus=(),
                        unavailable={
                            **state.unavailable,
                            "gpu": "nvidia-smi: not available",
                            "containers": "docker: not available",
                        },
                    )
                )
            await pilot.pause(0.2)
            return _screen_rows(app.export_screenshot())

    rows = asyncio.run(scenario())
    text = "\n".join(rows)
    assert text.count("serving at 1234.6 tok/s") == 2, text  # spark1 and spark2 (spark3 is down)
    if size == (80, 24):  # the strips: short words for the missing tools
        assert sum("no nvidia-smi · no docker" in r for r in rows) == 2, text
    else:
        assert text.count("GPU: nvidia-smi: not available") == 2, text
        assert text.count("containers: docker: not available") == 2, text


def test_the_journal_of_events_shows_the_lines_watch_json_prints() -> None:
    """`J`: the TUI's journal of events, in the event language of `watch --json` (the same
    lines for the same events: the one journal and serializer), each valid by the schema."""
    import io
    import json

    from textual.widgets import Log

    from spark_tui.cli.watch import EventPrinter
    from spark_tui.tui.screens.events_screen import EventsScreen
    from tests.test_json_schema import errors_of

    seen: list[object] = []

    async def scenario() -> list[str]:
        app = SnapshotApp()
        emit = app.pump.emit

        def recording(event: object) -> None:
            seen.append(event)
            emit(event)

        app.pump.emit = recording  # type: ignore[method-assign]  # what the monitor reports
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.3)
            await pilot.press("J")
            await pilot.pause(0.2)
            assert isinstance(app.screen, EventsScreen)
            return list(app.screen.query_one(Log).lines)

    shown = asyncio.run(scenario())
    out = io.StringIO()
    printer = EventPrinter(True, out)
    printer._phase = {}
    for event in seen:
        printer(event)
    assert shown == out.getvalue().splitlines()
    lines = [json.loads(s) for s in shown]
    said = {(x["event"], x.get("wall") or x.get("node")) for x in lines}
    assert ("diagnosis", "vllm-free-memory-low") in said, said
    assert ("resolved", "page-cache-hog") in said, said  # spark2's page cache dropped
    assert ("unreachable", "spark3") in said, said
    for x in lines:
        assert errors_of("event", x) == [], x
