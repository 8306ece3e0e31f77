"""`J`: the journal of events — the walls raised and resolved, the nodes that dropped, the
driver's steps — as the lines `watch --json` and `up --json` print (spark_tui.event_journal,
one serializer: spark_tui.event_lines.dumps), newest last."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, Static

from spark_tui.event_journal import EventJournal
from spark_tui.event_lines import dumps


class EventsScreen(ModalScreen[None]):
    """The journal's lines so far; Escape closes."""

    BINDINGS: ClassVar = [Binding("escape,enter,J", "close", "Close")]

    def __init__(self, journal: EventJournal) -> None:
        super().__init__(classes="output-modal")
        self.journal = journal

    def compose(self) -> ComposeResult:
        self.lines = self.journal.snapshot()
        with Vertical(id="output-dialog"):
            yield Static(Text("Journal of events (as watch --json prints them)", style="bold"))
            yield Log(id="output-log", max_lines=len(self.lines) + 1)
            yield Static(f"{len(self.lines)} events · Escape closes", id="output-result")

    def on_mount(self) -> None:
        self.query_one(Log).write_lines(dumps(e) for e in self.lines)

    def action_close(self) -> None:
        self.dismiss(None)
