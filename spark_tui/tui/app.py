"""The spark-tui application (a first shell: the knowledge base browser)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Footer, Header, Static

from spark_tui.kb.loader import load_knowledge


class SparkTuiApp(App[int]):
    TITLE = "spark-tui"
    BINDINGS: ClassVar = [("q", "quit", "Quit")]

    def __init__(
        self, config: str | None = None, read_only: bool = False, scenario: str | None = None
    ) -> None:
        super().__init__()
        self.config_path = config
        self.read_only = read_only
        self.scenario = scenario

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("No cluster yet: the knowledge base of walls.", id="status")
        yield DataTable(id="walls", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("wall", "severity", "title")
        for wall in load_knowledge():
            table.add_row(wall.id, wall.severity, wall.title, key=wall.id)
