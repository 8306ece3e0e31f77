"""A modal that streams a long action's steps (relaunch, doctor) and shows how it ended."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, Static

from spark_tui.events import ActionProgress


class OutputScreen(ModalScreen[None]):
    """Shows ActionProgress lines as they come; Escape closes (the work goes on)."""

    BINDINGS: ClassVar = [Binding("escape,enter", "close", "Close")]

    def __init__(self, title: str) -> None:
        super().__init__(classes="output-modal")
        self.title_text = title
        self.finished: bool | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="output-dialog"):
            yield Static(Text(self.title_text, style="bold"), id="output-title")
            yield Log(id="output-log", max_lines=5000)
            yield Static("Running… (Escape hides this; the work goes on)", id="output-result")

    def add_progress(self, p: ActionProgress) -> None:
        where = f"[{p.node}] " if p.node else ""
        line = f"{where}{p.status:>7} {p.step}"
        if p.command:
            line += f": $ {p.command}"
        if p.detail:
            line += f"  {p.detail}"
        self.query_one(Log).write_line(line)

    def finish(self, ok: bool, summary: str) -> None:
        self.finished = ok
        self.query_one("#output-result", Static).update(
            Text(
                ("Done: " if ok else "Failed: ") + summary, style="bold green" if ok else "bold red"
            )
        )

    def action_close(self) -> None:
        self.dismiss(None)
