"""Attack: the TUI died with a 1,300-line traceback when cluster.yaml named an unknown
recipe or one whose file does not load (issue 22, attack 4). It starts on any cluster.yaml
and says what is wrong in the app: the status line and a panel (Textual's pilot), with the
file and line; keys still work. A cluster.yaml that cannot be read at all (bad YAML, a
wrong field) opens an app that says so, and quits with exit code 2."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from spark_tui.tui.launch import open_app
from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail
from spark_tui.tui.widgets.status_line import StatusLine

NODES = "nodes:\n  - {name: a, host: local, role: head}\n"


def _run(config: Path, check) -> None:
    app, session = open_app(str(config), read_only=True, scenario=None)

    async def scenario() -> None:
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.pause(1.0)
            await check(app, pilot)

    try:
        asyncio.run(scenario())
    finally:
        if session is not None:
            session.close()


def _screen_text(app) -> str:
    return app.export_screenshot()


@pytest.mark.parametrize(
    ("recipe_file", "what"),
    [
        (None, "unknown recipe id 'no-such-recipe'"),
        ("id: no-such-recipe\ntitle: [unclosed\n", "no-such-recipe"),  # bad YAML
        ("id: no-such-recipe\ntitle: t\nengine: vllm\n", "no-such-recipe"),  # fields missing
    ],
    ids=["unknown", "yaml-error", "schema-error"],
)
def test_the_tui_starts_on_a_recipe_it_cannot_use_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recipe_file: str | None, what: str
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    if recipe_file is not None:  # the user's own recipe, whose file does not load
        mine = tmp_path / "config" / "spark-tui" / "recipes" / "no-such-recipe.yaml"
        mine.parent.mkdir(parents=True)
        mine.write_text(recipe_file)
    config = tmp_path / "cluster.yaml"
    config.write_text("recipe: no-such-recipe\n" + NODES)

    async def check(app, pilot) -> None:
        status = app.main_screen.query_one(StatusLine)
        for _ in range(100):  # on a loaded machine the first status may come late
            if what in status.now and status.tone == "error":
                break
            await pilot.pause(0.1)
        assert what in status.now and status.tone == "error", status.now
        # the file and the line: cluster.yaml's `recipe:`, or the recipe file's own error
        where = f"{config}:1" if recipe_file is None else "no-such-recipe.yaml:"
        assert where in status.now, status.now
        detail = app.main_screen.query_one(DiagnosisDetail)
        panel = detail.render_text().plain
        assert "The recipe cannot be used" in panel and what in panel, panel
        for key in ("r", "escape", "d", "escape", "a", "s", "escape", "u"):
            await pilot.press(key)
            await pilot.pause(0.3)
        assert app.is_running  # still up: every key answered, nothing raised
        assert threading.active_count() < 200

    _run(config, check)


@pytest.mark.parametrize(
    "text",
    [
        "nodes: [unclosed\n",  # YAML syntax
        "recipe: x\nnodes:\n  - {name: a, host: local, role: boss}\n",  # a wrong value
        "- just\n- a list\n",  # not a mapping
        "nodes:\n  - {name: a, host: local, role: head, colour: red}\n",  # unknown field
        "\x1b]0;pwned\x07nodes: []\n",  # a control character
    ],
    ids=["yaml-syntax", "bad-role", "not-a-mapping", "unknown-field", "escape"],
)
def test_a_cluster_yaml_that_cannot_be_read_opens_an_app_that_says_why(
    tmp_path: Path, text: str
) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(text)

    async def check(app, pilot) -> None:
        status = app.query_one(StatusLine)
        assert str(config) in status.now and status.tone == "error", status.now
        panel = app._text().plain
        assert "The cluster cannot be opened" in panel and str(config) in panel, panel
        assert "\x1b" not in _screen_text(app) + panel
        await pilot.press("q")
        await pilot.pause(0.2)
        assert app.return_value == 2

    _run(config, check)


def test_a_big_cluster_gets_a_dozen_panes_and_one_line_for_the_rest() -> None:
    """40 simulated nodes: panes for the head and the first nodes, the rest counted in one
    line (500 nodes' first frame and threads are measured in bench/README.md)."""
    from spark_tui.session import Session
    from spark_tui.tui.app import SparkTuiApp
    from spark_tui.tui.screens.main_screen import PANE_LIMIT
    from spark_tui.tui.widgets.node_pane import NodePane

    session = Session.open(None, scenario="healthy", sim_nodes=40, speed=20.0)

    async def scenario() -> None:
        app = SparkTuiApp(session)
        async with app.run_test(size=(160, 50)):
            screen = app.main_screen
            assert len(screen.query(NodePane)) == PANE_LIMIT
            assert screen.query_one("#node-spark1", NodePane)  # the head has one
            assert str(screen.query_one("#more-nodes").render()).startswith(
                f"+{40 - PANE_LIMIT} more nodes"
            )

    try:
        asyncio.run(scenario())
    finally:
        session.close()
