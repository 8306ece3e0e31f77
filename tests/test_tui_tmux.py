"""Every demo in a real terminal (tmux, 80x24, the default speed), pressing nothing: the
scenario's launch starts by itself and its wall is in the walls table within two minutes;
the status line says what is happening and the next key; `q` (and `y` when it asks,
because an action still runs) quits with exit code 0 and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest

from spark_tui.sim import scenario_names
from spark_tui.sim.scenarios import get
from tests.conftest import require_tool

COLS, ROWS = 80, 24
WALL_WITHIN_S = 120.0  # real seconds at the default speed (the bar)


class Terminal:
    """One detached tmux session running a command; its screen as text."""

    def __init__(self, command: str, cols: int = COLS, rows: int = ROWS) -> None:
        self.name = f"spark-tui-test-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "TERM": "xterm-256color"}
        # the exit code stays on screen after the app ends
        shell = f"{command}; echo SPARK-TUI-EXITED $?; sleep 60"
        self._tmux("new-session", "-d", "-s", self.name, "-x", str(cols), "-y", str(rows), shell)

    def _tmux(self, *args: str) -> str:
        # a server of its own (-L): one test's server going down never takes the next's
        r = subprocess.run(
            ["tmux", "-L", self.name, *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        return r.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def press(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def wait(self, condition: Callable[[str], object], limit_s: float) -> str:
        """Poll the screen until condition(screen) holds; the screen, or fail saying it."""
        deadline = time.monotonic() + limit_s
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if condition(screen):
                return screen
            time.sleep(0.5)
        raise AssertionError(f"not on screen within {limit_s:.0f} s:\n{screen}")

    def close(self) -> None:
        self._tmux("kill-server")


@pytest.fixture
def terminal():
    require_tool("tmux")
    opened: list[Terminal] = []

    def start(command: str) -> Terminal:
        t = Terminal(command)
        opened.append(t)
        return t

    yield start
    for t in opened:
        t.close()


def _walls_table(screen: str) -> str:
    """The walls table's rows: from its header line to the first line that is not a row."""
    lines = screen.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("wall ")), None)
    return "\n".join(lines[start : start + 6]) if start is not None else ""


@pytest.mark.slow
@pytest.mark.parametrize("name", scenario_names())
def test_a_demo_tells_its_story_unprompted_at_80x24(terminal, name: str) -> None:
    scenario = get(name)
    t = terminal(f"{sys.executable} -m spark_tui.entry demo {name}")
    # within seconds the launch runs (the status line says so), or has already met its wall
    t.wait(
        lambda s: "launching " in s or "serving" in s or any(w in s for w in scenario.walls),
        60,
    )
    started = time.monotonic()
    if scenario.walls:
        screen = t.wait(lambda s: any(w in _walls_table(s) for w in scenario.walls), WALL_WITHIN_S)
        wall = next(w for w in scenario.walls if w in _walls_table(screen))
        row = next(line for line in _walls_table(screen).splitlines() if wall in line)
        assert any(sev in row for sev in ("error", "warning")), row  # with its severity
    else:
        screen = t.wait(lambda s: "serving " in s, WALL_WITHIN_S)
    assert time.monotonic() - started < WALL_WITHIN_S
    # what is happening — which key comes next (once a toast over it has gone)
    screen = t.wait(lambda s: " — " in s.splitlines()[-2], 20)
    assert "Traceback" not in screen
    t.press("q")
    screen = t.wait(lambda s: "SPARK-TUI-EXITED" in s or "Quit anyway?" in s, 20)
    if "Quit anyway?" in screen:  # an action still runs: it asks first
        t.press("y")
    # a launch's waits end at their next poll once quitting is confirmed
    screen = t.wait(lambda s: "SPARK-TUI-EXITED" in s, 30)
    assert "SPARK-TUI-EXITED 0" in screen, screen
    assert "Traceback" not in screen, screen
