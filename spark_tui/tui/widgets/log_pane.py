"""The log pane: a title that says what is shown (filters, follow, folds), the log, the
search box. The screen's keys call `act` (they work whatever has the focus)."""

from __future__ import annotations

from typing import TypeVar

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label

from spark_tui.tui.widgets.log_view import LEVELS, LogView

LEVEL_WORDS = {"all": "", "warning": "warnings and errors", "error": "errors only"}


T = TypeVar("T")


def _cycle(options: list[T], current: T) -> T:
    return (
        options[(options.index(current) + 1) % len(options)] if current in options else options[0]
    )


class LogPane(Vertical):
    """Holds the LogView; `nodes` are the names the node filter cycles through."""

    def __init__(self, nodes: list[str], scrollback: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.nodes = nodes
        self.scrollback = scrollback

    def compose(self) -> ComposeResult:
        yield Label("", id="log-title")
        yield LogView(self.scrollback, id="log")
        yield Input(
            placeholder="search the log (Enter: next, Escape: close)",
            id="search",
            classes="-hidden",
        )

    def on_mount(self) -> None:
        self.update_title()

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def act(self, what: str) -> None:
        """One of the log keys: node, origin, level, follow, wrap, wall, wall-back, search."""
        log = self.view
        if what == "node":
            log.node = _cycle([None, *self.nodes], log.node)
        elif what == "origin":
            log.origin = _cycle([None, *log.sources], log.origin)
        elif what == "level":
            log.level = _cycle(list(LEVELS), log.level)
        elif what == "follow":
            log.follow = not log.follow
        elif what == "wrap":
            log.wrap = not log.wrap
        elif what in ("wall", "wall-back"):
            if log.next_wall_line(backwards=what == "wall-back") is None:
                self.notify("No line of the log matched a wall.", severity="information")
        elif what == "search":
            box = self.query_one("#search", Input)
            box.remove_class("-hidden")
            box.focus()
        self.update_title()

    def show_node(self, node: str | None) -> None:
        self.view.node = node
        self.update_title()

    def update_title(self) -> None:
        log = self.view
        parts = [f"log: {'every node' if log.node is None else log.node}"]
        if log.origin is not None:
            parts.append(log.origin or "serve log")
        if LEVEL_WORDS[log.level]:
            parts.append(LEVEL_WORDS[log.level])
        parts.append("following" if log.follow else "paused (G follows)")
        if log.wrap:
            parts.append("wrapped")
        if log.search:
            parts.append(f"search: {log.search}")
        if log.folded_lines:
            parts.append(f"{log.folded_lines} repeats folded")
        self.query_one("#log-title", Label).update(" · ".join(parts))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        line = self.view.find_next(event.value)
        self.update_title()
        if event.value and line is None:
            self.notify(f"not in the log: {event.value}", severity="warning")

    def on_key(self, event) -> None:
        box = self.query_one("#search", Input)
        if event.key == "escape" and box.has_focus:
            box.add_class("-hidden")
            self.view.focus()
            event.stop()
