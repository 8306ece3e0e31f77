"""The walls seen: one keyed row per wall per source, updated in place; active walls first
(most severe, then newest), resolved ones below them, dimmed, with when they resolved."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from spark_tui.kb.diagnosis import DiagnosisSnapshot
from spark_tui.kb.schema import SEVERITY_RANK, SUSPECTED
from spark_tui.tui.formatting import clock_hms
from spark_tui.tui.messages import DiagnosisChosen

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "green"}
FIXED_WIDTH = 8 + 4 + 9 + 8 + 1 + 1  # node, n, state, seen (each with its gap), the scrollbar


def diagnosis_key(d: DiagnosisSnapshot) -> str:
    """The row key of a diagnosis: 'wall|source'."""
    return f"{d.wall.id}|{d.source}"


def row_order(d: DiagnosisSnapshot) -> tuple:
    """Active before resolved; then errors, warnings, infos; then newest first."""
    seen = d.last_seen or d.first_seen
    return (not d.active, SEVERITY_RANK.get(d.severity, 9), -seen, d.wall.id, str(d.source))


class DiagnosesTable(DataTable):
    """Rows keyed by 'wall|source'; a repeat only updates its count and time. The wall
    column takes the width the others leave (wall names are never cut on 80 columns)."""

    def __init__(self, *, simulated: bool = False, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cell_padding=0)
        self.diagnoses: dict[str, DiagnosisSnapshot] = {}
        self.simulated = simulated
        self._order: list[str] = []
        self._walls: dict[str, Text] = {}  # the wall cell of each row, as stored
        self._wall_width = 26

    def on_mount(self) -> None:
        self.add_column(" wall", key="wall", width=self._wall_width)
        self.add_column("node", key="node", width=8)
        self.add_column("n", key="count", width=4)
        self.add_column("state", key="severity", width=9)
        # a simulated cluster runs on its own clock: say so where its times are shown
        self.add_column("sim time" if self.simulated else "seen", key="seen", width=8)

    def on_resize(self) -> None:
        width = max(18, self.size.width - FIXED_WIDTH - 1)
        if width != self._wall_width and self.columns:
            self._wall_width = width
            column = self.columns[next(iter(self.columns))]
            column.width = width
            column.auto_width = False
            self._require_update_dimensions = True
            self.refresh()

    def upsert(self, d: DiagnosisSnapshot) -> str:
        """Add or update the row of a diagnosis; returns its key."""
        key = diagnosis_key(d)
        self.diagnoses[key] = d
        if d.active:
            wall = Text(f" {d.wall.id}", no_wrap=True, overflow="ellipsis")
            # "?": only suspected (a symptom in the log; readings would confirm it)
            mark = "?" if d.confidence == SUSPECTED else ""
            state = Text(d.severity + mark, style=SEVERITY_STYLE.get(d.severity, ""))
            seen = Text(clock_hms(d.last_seen or d.first_seen))
        elif d.state == "fixed":  # a verified fix: waiting for the relaunch that proves it
            wall = Text(f" {d.wall.id}", no_wrap=True, overflow="ellipsis")
            state = Text("fixed", style="green")
            seen = Text(clock_hms(d.fixed_at))
        else:
            wall = Text(f" {d.wall.id}", style="dim", no_wrap=True, overflow="ellipsis")
            state = Text("resolved", style="dim green")
            seen = Text(clock_hms(d.resolved_at), style="dim")
        node = Text(d.node or d.source.subject, style="" if d.active else "dim")
        count = Text(str(d.count), style="" if d.active else "dim")
        if key in self.rows:
            for column, value in (
                ("wall", wall),
                ("node", node),
                ("count", count),
                ("severity", state),
                ("seen", seen),
            ):
                self.update_cell(key, column, value)
        else:
            self.add_row(wall, node, count, state, seen, key=key)
        order = sorted(self.diagnoses, key=lambda k: row_order(self.diagnoses[k]))
        self._walls[key] = wall
        if order != self._order:  # a repeat of a row in place changes nothing: no re-sort
            self._order = order
            selected = self.selected_key()
            # the wall cell object names its row: sort by our order, through the public API
            rank = {id(self._walls[k]): i for i, k in enumerate(order)}
            self.sort("wall", key=lambda cell: rank.get(id(cell), len(rank)))
            if selected is not None:
                self.move_cursor(row=self.get_row_index(selected), scroll=False)
        return key

    def first_active(self) -> str | None:
        """The key of the row on top when it is active (the wall to show first)."""
        if self._order and self.diagnoses[self._order[0]].active:
            return self._order[0]
        return None

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(DiagnosisChosen(event.row_key.value))
