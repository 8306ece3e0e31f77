"""The walls table: a wall id longer than its column is cut with a mark, never run into the
node column (`fp4-marlin-fallback-noticespark2`)."""

from __future__ import annotations

import asyncio
import re
from html import unescape
from pathlib import Path

from textual.app import App, ComposeResult

from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.source import Source
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable

KB = load_knowledge(use_user=False)


def _screen_lines(svg: str) -> list[str]:
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(m[2]), []).append((float(m[1]), unescape(m[3])))
    return ["".join(t for _, t in sorted(v)).replace("\xa0", " ") for _, v in sorted(rows.items())]


def test_a_long_wall_id_is_cut_with_an_ellipsis(tmp_path: Path) -> None:
    wall = KB.walls["fp4-marlin-fallback-notice"]

    class TableApp(App):
        def compose(self) -> ComposeResult:
            yield DiagnosesTable()

    async def scenario() -> list[str]:
        app = TableApp()
        async with app.run_test(size=(50, 6)) as pilot:
            table = app.query_one(DiagnosesTable)
            d = Diagnosis(
                wall, Source.log("spark2", "serve"), 1, "evidence", node="spark2", first_seen=1.0
            )
            table.upsert(d)
            await pilot.pause()
            app.save_screenshot(str(tmp_path / "shot.svg"))
        return _screen_lines((tmp_path / "shot.svg").read_text())

    lines = asyncio.run(scenario())
    row = next(line for line in lines if "spark2" in line)
    assert "…" in row.split("spark2")[0], row
    assert "fp4-marlin-fallb" in row and not re.search(r"[a-z]spark2", row), row
