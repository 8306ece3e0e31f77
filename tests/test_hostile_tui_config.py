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
        await _keys_still_work(app, pilot, what)

    _run(config, check)


async def _keys_still_work(app, pilot, what: str) -> None:
    detail = app.main_screen.query_one(DiagnosisDetail)
    panel = detail.render_text().plain
    assert "The recipe cannot be used" in panel and what in panel, panel
    for key in ("r", "escape", "d", "escape", "a", "s", "escape", "u"):
        await pilot.press(key)
        await pilot.pause(0.3)
    assert app.is_running  # still up: every key answered, nothing raised
    assert threading.active_count() < 200


def _plant(path: Path, kind: str) -> None:
    """The user's recipe file `path`, made bad in one way."""
    import os

    if kind == "fifo":  # opening it for reading would wait for a writer forever
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling-symlink":
        path.symlink_to(path.parent / "gone.yaml")
    elif kind == "symlink-loop":
        path.symlink_to(path)
    elif kind == "dev-zero":  # endless
        path.symlink_to("/dev/zero")
    elif kind == "huge":  # 60 MB of valid YAML
        with path.open("w") as f:
            f.write("id: no-such-recipe\ntitle: t\nnotes: |\n")
            f.write(("  " + "x" * 998 + "\n") * 60_000)
    elif kind == "sparse":  # 8 GiB that take no disk
        with path.open("wb") as f:
            f.truncate(8 << 30)
    elif kind == "binary":
        path.write_bytes(b"id: no-such-recipe\n\xff\xfe\x00\x01\n")
    elif kind == "alias-bomb":  # 9**10 values once expanded
        lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
        lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
        path.write_text("\n".join(lines) + "\nid: no-such-recipe\n")
    elif kind == "deep":
        path.write_text("id: no-such-recipe\nnotes: " + "[" * 100_000 + "]" * 100_000 + "\n")
    elif kind == "a-list":
        path.write_text("- id: no-such-recipe\n")


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        ("fifo", "not a regular file"),
        ("directory", "it is a directory"),
        ("dangling-symlink", "No such file or directory"),
        ("symlink-loop", "Too many levels of symbolic links"),
        ("dev-zero", "not a regular file"),
        ("huge", "larger than 1024 KiB: refused"),
        ("sparse", "larger than 1024 KiB: refused"),
        ("binary", "not UTF-8 text"),
        ("alias-bomb", "once aliases are expanded (an alias bomb?)"),
        ("deep", "nested more than 32 levels deep"),
        ("a-list", "the recipe must be a mapping"),
    ],
)
def test_every_way_the_recipe_file_can_be_bad_is_said_in_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, what: str
) -> None:
    """This stop's variants of attack 4: the user's recipe file is something no recipe is
    (all held). The app starts within its timeout, says which file and what, and runs on."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    mine = tmp_path / "config" / "spark-tui" / "recipes" / "no-such-recipe.yaml"
    mine.parent.mkdir(parents=True)
    _plant(mine, kind)
    config = tmp_path / "cluster.yaml"
    config.write_text("recipe: no-such-recipe\n" + NODES)

    async def check(app, pilot) -> None:
        status = app.main_screen.query_one(StatusLine)
        for _ in range(100):
            if status.tone == "error":
                break
            await pilot.pause(0.1)
        assert status.tone == "error" and what in status.now, status.now
        assert str(mine) in status.now and "running without a recipe" in status.now
        await _keys_still_work(app, pilot, what)

    _run(config, check)


def test_a_recipe_file_root_cannot_read_is_said_in_the_app(tmp_path: Path) -> None:
    """Mode 000, read by a root without the capability to override it (setpriv drops
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH; as root the file would just be read)."""
    import os
    import subprocess
    import sys

    from tests.conftest import IN_CI, require_tool

    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("needs root (the suite runs as root in CI)")
        pytest.skip("needs root")
    require_tool("setpriv")
    mine = tmp_path / "config" / "spark-tui" / "recipes" / "no-such-recipe.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("id: no-such-recipe\n")
    mine.chmod(0)
    config = tmp_path / "cluster.yaml"
    config.write_text("recipe: no-such-recipe\n" + NODES)
    probe = (
        "import asyncio, sys\n"
        "from spark_tui.tui.launch import open_app\n"
        "from spark_tui.tui.widgets.status_line import StatusLine\n"
        "app, session = open_app(sys.argv[1], read_only=True, scenario=None)\n"
        "async def run():\n"
        "    async with app.run_test(size=(140, 45)) as pilot:\n"
        "        status = app.main_screen.query_one(StatusLine)\n"
        "        for _ in range(200):\n"
        "            if status.tone == 'error':\n"
        "                break\n"
        "            await pilot.pause(0.1)\n"
        "        print(status.tone, status.now)\n"
        "try:\n"
        "    asyncio.run(run())\n"
        "finally:\n"
        "    session.close()\n"
    )
    drop = "-dac_override,-dac_read_search"
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"))
    argv = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}"]
    out = subprocess.run(
        [*argv, sys.executable, "-c", probe, str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stdout.startswith("error "), out.stdout
    assert f"{mine}: recipe 'no-such-recipe' did not load: cannot read: Permission denied" in (
        out.stdout
    ), out.stdout


@pytest.mark.parametrize(
    "text",
    [
        "nodes: [unclosed\n",  # YAML syntax
        "recipe: x\nnodes:\n  - {name: a, host: local, role: boss}\n",  # a wrong value
        "- just\n- a list\n",  # not a mapping
        "nodes:\n  - {name: a, host: local, role: head, colour: red}\n",  # unknown field
        "\x1b]0;pwned\x07nodes: []\n",  # a control character
        # this stop's variants: `recipe:` that is no recipe id (all held)
        "recipe: [a, b]\n" + NODES,
        "recipe: {a: 1}\n" + NODES,
        "recipe: 12\n" + NODES,
        "recipe: ''\n" + NODES,
        "recipe: '../../../../etc/passwd'\n" + NODES,
        "recipe: '[bold red]x[/]'\n" + NODES,  # Rich markup, shown as written
        'recipe: "bad\\u202egnp"\n' + NODES,  # a bidi override
        'recipe: "bad\\0x"\n' + NODES,  # NUL
    ],
    ids=[
        "yaml-syntax",
        "bad-role",
        "not-a-mapping",
        "unknown-field",
        "escape",
        "recipe-list",
        "recipe-mapping",
        "recipe-number",
        "recipe-empty",
        "recipe-path",
        "recipe-markup",
        "recipe-bidi",
        "recipe-nul",
    ],
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
        assert "\u202e" not in status.now + panel and "\x00" not in status.now + panel
        if "[bold red]" in text:  # the markup is shown, not applied
            assert "'[bold red]x[/]'" in status.now, status.now
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
