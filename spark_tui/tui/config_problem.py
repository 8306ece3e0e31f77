"""The app when cluster.yaml cannot be read at all (bad YAML, a field that is wrong): it
starts anyway and says what is wrong — the file, the line, what to change — in a panel and
the status line, instead of a traceback or an app that never opens."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from spark_tui.tui.widgets.status_line import StatusLine


class ConfigProblemApp(App[int]):
    """Shows why the cluster cannot be opened; q quits (exit code 2, as the headless
    commands give for bad input)."""

    TITLE = "spark-tui"
    BINDINGS: ClassVar = [Binding("q", "quit_app", "Quit")]
    CSS = "#problem { padding: 1 2; } #problem-text { width: 100%; }"

    def __init__(self, message: str, source: str | None) -> None:
        super().__init__()
        self.message = message
        self.source = source

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="problem"):
            yield Static(self._text(), id="problem-text")
        yield StatusLine(id="status")
        yield Footer()

    def _text(self) -> Text:
        out = Text("The cluster cannot be opened\n\n", style="bold red")
        for line in self.message.splitlines():
            out.append(f"  {line}\n")
        out.append(
            "\nFix the file and start spark-tui again (spark-tui doctor checks it, "
            "spark-tui discover writes one), or start without it: spark-tui demo.",
            style="dim",
        )
        return out

    def on_mount(self) -> None:
        status = self.query_one(StatusLine)
        first = self.message.splitlines()[0] if self.message else "cannot open the cluster"
        status.now, status.tone, status.next_key = first, "error", "q quits"
        self.sub_title = self.source or ""

    def action_quit_app(self) -> None:
        self.exit(2)
