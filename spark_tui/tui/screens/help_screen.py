"""`?`: what every key does, and how the screens fit together."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("a", "apply the marked fix of the selected wall: preview per node, confirm, run, verify"),
    ("]", "mark the next fix of the selected wall"),
    ("r", "relaunch the recipe: preview, confirm, then stop, drop caches, launch, smoke request"),
    ("s", "stop serving and Ray on every node (preview, confirm; logs are kept)"),
    ("b", "guided bring-up: cluster, recipe, doctor, fixes, Ray, launch, smoke, tok/s"),
    ("d", "doctor: read-only preflight of every node"),
    ("n / N", "log: scroll to the next / previous line that matched a wall"),
    ("l", "log: every node merged, then each node"),
    ("o", "log: every source, then one (the serve log, a container)"),
    ("v", "log: every line, warnings and errors, errors only"),
    ("/", "log: search (Enter finds the next, Escape closes)"),
    ("f", "log: follow the newest line on / off"),
    ("w", "log: wrap long lines (else left / right scroll them)"),
    ("j k g G", "down, up, top, bottom in the focused list or log (G follows the log again)"),
    ("Tab", "the next pane (walls, detail, log)"),
    ("u", "undo the last recipe patch"),
    ("R", "roll back to the image and recipe revision that last served"),
    ("e", "export the incident report (Markdown)"),
    ("J", "journal of events: walls raised and resolved, steps taken (as watch --json says)"),
    ("t", "dark / light theme"),
    ("ctrl+p", "command palette: every action by name"),
    ("?", "this help"),
    ("q, ctrl+c", "quit (asks first while an action runs)"),
)


class HelpScreen(ModalScreen[None]):
    """Keys and a short orientation; any of q, ?, Escape closes it."""

    BINDINGS: ClassVar = [
        Binding("escape,q,question_mark", "close", "Close"),
    ]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        with VerticalScroll(id="help-dialog"):
            yield Static("spark-tui — keys", classes="help-title")
            yield Static(table)
            yield Static(
                "Panes: one per node (memory: used █ / page cache ▒ / free ░, and what a cache "
                "drop would give), the log of every node merged (repeated lines folded with a "
                "count ×N), the walls seen (active first; resolved ones dimmed, with when), "
                "and the selected wall's cause, fixes with their commands, and evidence. "
                "The status line says what is happening and which key comes next. "
                "With --read-only everything is shown and every change is refused. "
                "The mouse works: click a node to tail its log, a row to see a wall.",
                classes="help-text",
            )

    def action_close(self) -> None:
        self.dismiss(None)
