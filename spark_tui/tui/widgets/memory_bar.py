"""The unified-memory bar of a node: used / page cache / free, and what a drop would give."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from spark_tui.nodes.state import MemoryReading
from spark_tui.tui.formatting import gib, memory_split


class MemoryBar(Widget):
    """Three lines: a bar (used, page cache, free), the figures, and what a cache drop gives."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "memorybar--used",
        "memorybar--cache",
        "memorybar--free",
    }
    DEFAULT_CSS = """
    MemoryBar { height: 3; text-wrap: nowrap; text-overflow: ellipsis; }
    MemoryBar > .memorybar--used { color: $error; }
    MemoryBar > .memorybar--cache { color: $warning; }
    MemoryBar > .memorybar--free { color: $success; }
    """

    memory: reactive[MemoryReading | None] = reactive(None)

    def render(self) -> Text:
        m = self.memory
        if m is None or m.total_bytes <= 0:
            return Text("memory: no reading yet", style="dim")
        used, cache, _free, after_drop = memory_split(m)
        width = max(10, self.size.width - 3)
        cells = [round(width * part / m.total_bytes) for part in (used, cache)]
        cells.append(max(0, width - sum(cells)))
        text = Text("[", no_wrap=True, overflow="crop")
        plain = self.app.no_color  # without colour, the shades tell the parts apart
        for part, cls, ch in zip(cells, ("used", "cache", "free"), ("█", "▒", "░"), strict=True):
            style = self.get_component_rich_style(f"memorybar--{cls}")
            if plain:
                text.append(ch * part, style=style)
            else:  # coloured cells: exact widths in every terminal font
                text.append(" " * part, style=Style(bgcolor=style.color))
        text.append("]\n")
        text.append(f"used {gib(used)}", style=self.get_component_rich_style("memorybar--used"))
        text.append(" · ")
        text.append(f"cache {gib(cache)}", style=self.get_component_rich_style("memorybar--cache"))
        text.append(f" · avail {gib(m.available_bytes)}\n")
        text.append(
            f"after drop: {gib(after_drop)}",
            style=self.get_component_rich_style("memorybar--free") + Style(bold=True),
        )
        text.append(f" of {gib(m.total_bytes)} GiB")
        return text
