"""The walls seen: one keyed row per wall per source, updated in place, newest first."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.tui.formatting import clock_hms
from spark_tui.tui.messages import DiagnosisChosen

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "green"}


def diagnosis_key(d: Diagnosis) -> str:
    """The row key of a diagnosis: 'wall|source'."""
    return f"{d.wall.id}|{d.source}"


def _rev(text: object) -> tuple[int, ...]:
    """A key that sorts text A→Z inside a reverse (newest-first) sort."""
    return tuple(-ord(c) for c in str(text))


class DiagnosesTable(DataTable):
    """Rows keyed by 'wall|source'; a repeat only updates its count and time."""

    # fixed widths: rows arrive while the monitor streams, and auto widths lag behind
    COLUMNS = (
        ("wall", "wall", 25),
        ("node", "node", 7),
        ("n", "count", 3),
        ("sev", "severity", 7),
        ("seen", "seen", 8),
    )

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.diagnoses: dict[str, Diagnosis] = {}
        self._order: dict[tuple[str, str], tuple[float]] = {}

    def on_mount(self) -> None:
        for label, key, width in self.COLUMNS:
            self.add_column(label, key=key, width=width)

    def upsert(self, d: Diagnosis) -> str:
        """Add or update the row of a diagnosis (a resolved one dimmed); returns its key."""
        key = diagnosis_key(d)
        self.diagnoses[key] = d
        seen = clock_hms(d.last_seen or d.first_seen)
        wall = Text(d.wall.id, style="" if d.active else "dim strike")
        severity = (
            Text(d.severity, style=SEVERITY_STYLE.get(d.severity, ""))
            if d.active
            else Text("resolved", style="dim")
        )
        if key in self.rows:
            self.update_cell(key, "seen", seen)
            self.update_cell(key, "count", str(d.count))
            self.update_cell(key, "wall", wall)
            self.update_cell(key, "severity", severity)
        else:
            self.add_row(wall, d.node or d.source, str(d.count), severity, seen, key=key)
        # newest first by the time itself; equal times in a fixed order (wall, node), never
        # in the order events happened to arrive
        self._order[(d.wall.id, d.node or d.source)] = (d.last_seen or d.first_seen,)
        # a repeat of the row already on top changes nothing: no re-sort, no redraw of every row
        if self.get_row_index(key) != 0 or len(self._order) != getattr(self, "_sorted_rows", -1):
            selected = self.selected_key()
            self.sort(
                "wall",
                "node",
                key=lambda v: (
                    *self._order.get((str(v[0]), str(v[1])), (0.0,)),
                    _rev(v[0]),
                    _rev(v[1]),
                ),
                reverse=True,
            )
            self._sorted_rows = len(self._order)
            if selected is not None:
                self.move_cursor(row=self.get_row_index(selected), scroll=False)
        return key

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
