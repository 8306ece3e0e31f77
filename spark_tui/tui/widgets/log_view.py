"""The log pane: lines of every node (merged, tagged) or of one node, at any rate.

Built as toolong builds its log view: lines live in a bounded deque
(`max_lines`, the scrollback), only the visible rows are rendered, rendered
rows are cached, and lines longer than 10,000 characters are shown without
highlighting. Lines arrive in batches (one `add_lines` per refresh).
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

LONG_LINE = 10_000


class LogEntry(NamedTuple):
    node: str
    text: str
    severity: str | None  # error | warning | info when the line matched a wall


class LogView(ScrollView, can_focus=True):
    """A bounded, virtual log view with follow, a node filter and search."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "logview--node",
        "logview--error",
        "logview--warning",
        "logview--info",
        "logview--match",
    }
    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .logview--node { color: $accent; }
    LogView > .logview--error { color: $text-error; background: $error-muted; text-style: bold; }
    LogView > .logview--warning { color: $text-warning; background: $warning-muted; }
    LogView > .logview--info { color: $text-success; }
    LogView > .logview--match { background: $primary-muted; text-style: reverse; }
    """

    follow: reactive[bool] = reactive(True)
    source: reactive[str | None] = reactive(None)  # None: every node, merged
    search: reactive[str] = reactive("")

    def __init__(self, max_lines: int = 100_000, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_lines = max_lines
        self._entries: deque[LogEntry] = deque(maxlen=max_lines)
        self._base = 0  # absolute number of _entries[0]
        self._view: list[int] | None = None  # absolute numbers shown when filtered
        self._width = 0
        self._cache: LRUCache[tuple[int, str], Strip] = LRUCache(1024)
        self._styles: dict[str, Style] = {}
        self.total_lines = 0

    # --- data ---------------------------------------------------------------
    def add_lines(self, node: str, lines: tuple[str, ...] | list[str], marks: tuple = ()) -> None:
        """Append a batch of one node's lines; marks are (index, wall, severity)."""
        count = len(lines)
        if not count:
            return
        if marks:
            sev = {i: s for i, _wall, s in marks}
            entries = [LogEntry(node, t, sev.get(i)) for i, t in enumerate(lines)]
        else:  # the common case, at thousands of lines a second: no per-line lookups
            entries = [LogEntry(node, t, None) for t in lines]
        first = self._base + len(self._entries)  # absolute number of the first new line
        overflow = len(self._entries) + count - self.max_lines
        if overflow > 0:
            self._base += min(overflow, len(self._entries) + count)
        self._entries.extend(entries)
        if self._view is not None and node == self.source:
            self._view.extend(range(max(first, self._base), first + count))
        widest = max(map(len, lines))
        self._width = max(self._width, min(widest, LONG_LINE) + len(node) + 3)
        self.total_lines += count
        if self._view and self._view[0] < self._base:
            self._view = [n for n in self._view if n >= self._base]
        self._update_size()

    def clear(self) -> None:
        self._entries.clear()
        self._view = [] if self.source is not None else None
        self._base = 0
        self._cache.clear()
        self._update_size()

    def visible_texts(self) -> list[str]:
        """The plain lines of the current view (tests and search)."""
        return [f"{e.node}: {e.text}" for e in self._rows()]

    def _rows(self) -> list[LogEntry]:
        if self._view is None:
            return list(self._entries)
        return [self._entries[n - self._base] for n in self._view]

    def _row_count(self) -> int:
        return len(self._entries) if self._view is None else len(self._view)

    def _entry(self, row: int) -> tuple[int, LogEntry] | None:
        if row < 0 or row >= self._row_count():
            return None
        n = row + self._base if self._view is None else self._view[row]
        return n, self._entries[n - self._base]

    def _update_size(self) -> None:
        size = Size(self._width, self._row_count())
        if size != self.virtual_size:
            # set without the reactive's layout refresh: a growing log must not re-lay out
            # the whole screen ten times a second; only new scrollbars change the layout
            bars = (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
            self.set_reactive(LogView.virtual_size, size)
            self._scroll_update(size)
            if bars != (self.show_vertical_scrollbar, self.show_horizontal_scrollbar):
                self.refresh(layout=True)
        if self.follow:
            self.scroll_end(animate=False)
        self.refresh()

    # --- reactives ----------------------------------------------------------
    def watch_source(self, source: str | None) -> None:
        if source is None:
            self._view = None
        else:
            self._view = [self._base + i for i, e in enumerate(self._entries) if e.node == source]
        self._cache.clear()
        self._update_size()

    def watch_search(self, _term: str) -> None:
        self._cache.clear()
        self.refresh()

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._update_size()

    def find_next(self, term: str, backwards: bool = False) -> int | None:
        """Scroll to the next row containing `term` (case-insensitive); its row or None."""
        self.search = term
        if not term:
            return None
        low = term.lower()
        count = self._row_count()
        start = int(self.scroll_offset.y) + (0 if backwards else 1)
        order = range(start - 1, -1, -1) if backwards else range(min(start, count), count)
        for row in list(order) + list(range(0, min(start, count))):
            hit = self._entry(row)
            if hit and low in hit[1].text.lower():
                self.follow = False
                self.scroll_to(y=row, animate=False)
                return row
        return None

    # --- rendering ----------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        hit = self._entry(scroll_y + y)
        width = self.scrollable_content_region.width
        if hit is None:
            return Strip.blank(width, self._style("base"))
        n, entry = hit
        key = (n, self.search)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_entry(entry)
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, self._style("base"))

    def _style(self, name: str) -> Style:
        """Styles looked up once per theme (computing them per row is the costly part)."""
        style = self._styles.get(name)
        if style is None:
            style = self.rich_style if name == "base" else self.get_component_rich_style(name)
            self._styles[name] = style
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._cache.clear()
        super().notify_style_update()

    def _render_entry(self, entry: LogEntry) -> Strip:
        base = self._style("base")
        node_style = self._style("logview--node")
        tag = Segment(f"{entry.node:>7} ", base + node_style)
        if len(entry.text) > LONG_LINE:
            # no highlighting on huge lines: render the first part as plain text
            return Strip([tag, Segment(entry.text[:LONG_LINE], base)])
        style: Style = base
        if entry.severity:
            style = base + self._style(f"logview--{entry.severity}")
        text = Text(entry.text, style=style, no_wrap=True, end="")
        if self.search:
            text.highlight_words(
                [self.search],
                self._style("logview--match"),
                case_sensitive=False,
            )
        # Text.render leaves the base style off its segments: put it under them
        body = Segment.apply_style(text.render(self.app.console), style=style)
        return Strip([tag, *body])
