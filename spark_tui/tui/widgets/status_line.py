"""The status line: what is happening and the key that comes next; the recipe on the right."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

STATE_STYLE = {"error": "bold red", "warning": "bold yellow", "ok": "bold green", "": "bold"}


class StatusLine(Static):
    """One line at the bottom of the main screen: `now` (styled by `tone`), `next_key`
    after it, the recipe and its revision on the right (cut first when space runs out)."""

    now: reactive[str] = reactive("starting")
    tone: reactive[str] = reactive("")  # error | warning | ok | ""
    next_key: reactive[str] = reactive("")
    recipe: reactive[str] = reactive("no recipe")
    read_only: reactive[bool] = reactive(False)

    def render(self) -> Text:
        width = max(10, self.size.width)
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.read_only:
            text.append(" READ-ONLY ", style="reverse bold")
            text.append(" ")
        key = f" — {self.next_key}" if self.next_key else ""
        # the key to press matters most: `now` gives way first, down to 40 cells (what and
        # where), then the key's own words are cut at the edge
        room = width - text.cell_len - len(key)
        now = self.now if len(self.now) <= room else self.now[: max(40, room) - 1] + "…"
        now = self.now if len(now) >= len(self.now) else now
        text.append(now, style=STATE_STYLE.get(self.tone, "bold"))
        text.append(key)
        right = f"recipe {self.recipe}"
        room = width - text.cell_len - 2
        if room >= len(right):
            text.append(" " * (room - len(right) + 1))
            text.append(right, style="dim")
        return text
