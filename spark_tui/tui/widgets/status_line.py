"""The status line: cluster, recipe and revision, the last action and its result."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static


class StatusLine(Static):
    """One line at the bottom of the main screen."""

    cluster: reactive[str] = reactive("")
    recipe: reactive[str] = reactive("no recipe")
    last_action: reactive[str] = reactive("none yet")
    last_ok: reactive[bool | None] = reactive(None)
    read_only: reactive[bool] = reactive(False)

    def render(self) -> Text:
        text = Text()
        if self.read_only:
            text.append(" READ-ONLY ", style="reverse bold")
            text.append(" ")
        text.append(self.cluster, style="bold")
        text.append(f" · recipe {self.recipe} · last action: ")
        style = {True: "green", False: "bold red", None: ""}[self.last_ok]
        text.append(self.last_action, style=style)
        return text
