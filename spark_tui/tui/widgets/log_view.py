"""The log pane: lines of every node (merged, tagged) or filtered, at any rate.

Built as toolong builds its log view: lines live in a bounded deque (`max_lines`, the
scrollback), only the visible rows are rendered, rendered rows are cached, and lines
longer than 10,000 characters are shown without highlighting. Lines arrive in batches
(one `add_lines` per refresh).

Repeats are folded, as log viewers do: a line that repeats one of the last lines of its
node (a banner printed again, a request logged again), or the node's previous line with
only its numbers changed (a progress bar, a stats line), is not added again: the earlier
row shows the newest text and a count. A line that matched a wall never folds into one
that did not.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import deque
from typing import ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

LONG_LINE = 10_000
TAG = 8  # cells of the node tag before every line
RECENT = 64  # a line repeating one of its node's last RECENT lines folds into it
LEVELS = ("all", "warning", "error")  # the level filter: every line, warnings and up, errors
_DIGITS = str.maketrans("", "", "0123456789 ")  # a line's shape: numbers and spacing out
_WORDY = re.compile(r"[A-Za-z]{3}")  # a line with words in it (not blank, not a ruler)
_ERROR = re.compile(r"\b(?:ERROR|CRITICAL|FATAL|Traceback|[A-Za-z]+Error\b|Exception\b)")
_WARNING = re.compile(r"\b(?:WARNING|WARN)\b")


class LogEntry(NamedTuple):
    node: str
    text: str
    severity: str | None  # error | warning | info when the line matched a wall
    source: str = ""  # where on the node it came from (serve log, a container)
    repeats: int = 1  # how many times it came (folded repeats)


def line_level(entry: LogEntry) -> int:
    """0 plain, 1 warning, 2 error: from the wall it matched, else from its words."""
    if entry.severity in ("error", "warning"):
        return 2 if entry.severity == "error" else 1
    if _ERROR.search(entry.text):
        return 2
    return 1 if _WARNING.search(entry.text) else 0


class LogView(ScrollView, can_focus=True):
    """A bounded, virtual log view: follow, folding, filters (node, source, level),
    search, jumps between wall lines, and long lines wrapped or scrolled sideways."""

    BINDINGS: ClassVar = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "logview--node",
        "logview--error",
        "logview--warning",
        "logview--info",
        "logview--match",
        "logview--count",
    }
    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .logview--node { color: $accent; }
    LogView > .logview--error { color: $text-error; background: $error-muted; text-style: bold; }
    LogView > .logview--warning { color: $text-warning; background: $warning-muted; }
    LogView > .logview--info { color: $text-success; }
    LogView > .logview--match { background: $primary-muted; text-style: reverse; }
    LogView > .logview--count { color: $text-muted; text-style: bold; }
    """

    follow: reactive[bool] = reactive(True)
    node: reactive[str | None] = reactive(None)  # None: every node, merged
    origin: reactive[str | None] = reactive(None)  # None: every source of the node(s)
    level: reactive[str] = reactive("all")
    search: reactive[str] = reactive("")
    wrap: reactive[bool] = reactive(False)

    def __init__(self, max_lines: int = 100_000, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_lines = max_lines
        self._entries: deque[LogEntry] = deque(maxlen=max_lines)
        self._base = 0  # absolute number of _entries[0]
        self._view: list[int] | None = None  # absolute numbers shown when filtered
        self._rows_of: list[tuple[int, int]] = []  # wrapped: (line number, part) per row
        self._width = 0
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)
        self._styles: dict[str, Style] = {}
        self._recent: dict[str, dict[str, int]] = {}  # node -> text -> absolute number
        # node -> (its last line, its shape, whether it was a folded repeat)
        self._last: dict[str, tuple[int, str, bool]] = {}
        self.total_lines = 0
        self.folded_lines = 0
        self.sources: dict[str, None] = {}  # every source seen, in order

    # --- data ---------------------------------------------------------------
    def add_lines(
        self,
        node: str,
        lines: tuple[str, ...] | list[str],
        marks: tuple = (),
        source: str = "",
    ) -> None:
        """Append a batch of one node's lines; marks are (index, wall, severity)."""
        if not lines:
            return
        sev = {i: s for i, _wall, s in marks} if marks else {}
        if source not in self.sources:
            self.sources[source] = None
        recent = self._recent.setdefault(node, {})
        last = self._last.get(node)
        new: list[LogEntry] = []
        first = self._base + len(self._entries)  # absolute number of the first new line
        for i, text in enumerate(lines):
            severity = sev.get(i) if sev else None
            n = first + len(new)
            shape = text.translate(_DIGITS)
            folded = recent.get(text)
            # a blank or ruler line folds only inside a repeat (a banner printed again),
            # never out of the middle of its first printing
            if folded is not None and not (_WORDY.search(text) or (last and last[2])):
                folded = None
            if folded is None and last is not None and last[1] == shape:
                folded = last[0]
            if (
                folded is not None
                and folded >= n - RECENT
                and self._fold(folded, text, severity, new, first)
            ):
                last = (folded, shape, True)
                continue
            new.append(LogEntry(node, text, severity, source))
            recent[text] = n
            last = (n, shape, False)
        if last is not None:
            self._last[node] = last
        if len(recent) > 4 * RECENT:  # keep only the last lines' texts
            floor = first + len(new) - RECENT
            self._recent[node] = {t: k for t, k in recent.items() if k >= floor}
        self.total_lines += len(lines)
        if not new:
            return
        count = len(new)
        overflow = len(self._entries) + count - self.max_lines
        if overflow > 0:
            self._base += min(overflow, len(self._entries) + count)
        self._entries.extend(new)
        if self._view is not None:
            start = max(first, self._base)
            self._view.extend(n for n in range(start, first + count) if self._keep(self._at(n)))
            if self._view and self._view[0] < self._base:
                self._view = [n for n in self._view if n >= self._base]
        widest = max(len(e.text) for e in new)
        self._width = max(self._width, min(widest, LONG_LINE) + TAG + 6)
        if self.wrap:
            kept = self._view if self._view is not None else range(first, first + count)
            self._wrap_lines(n for n in kept if n >= max(first, self._base))
        self._update_size()

    def _at(self, n: int) -> LogEntry:
        return self._entries[n - self._base]

    def _fold(
        self, n: int, text: str, severity: str | None, batch: list[LogEntry], first: int
    ) -> bool:
        """Count a repeat on line n (showing its newest text); False when it may not fold.
        Line n may be one of this batch's (`batch`, from absolute number `first`)."""
        if n < self._base:
            return False
        old = batch[n - first] if n >= first else self._at(n)
        if old.severity != severity:
            return False
        folded = old._replace(text=text, repeats=old.repeats + 1)
        if n >= first:
            batch[n - first] = folded
        else:
            self._entries[n - self._base] = folded
            self.refresh()
        self.folded_lines += 1
        return True

    def clear(self) -> None:
        self._entries.clear()
        self._recent.clear()
        self._last.clear()
        self._view = None if self._unfiltered() else []
        self._base = 0
        self._cache.clear()
        self._rewrap()
        self._update_size()

    def visible_texts(self) -> list[str]:
        """The plain lines of the current view (tests and search)."""
        return [f"{e.node}: {e.text}" for e in self._rows()]

    def _rows(self) -> list[LogEntry]:
        if self._view is None:
            return list(self._entries)
        return [self._at(n) for n in self._view]

    def _unfiltered(self) -> bool:
        return self.node is None and self.origin is None and self.level == "all"

    def _keep(self, e: LogEntry) -> bool:
        if self.node is not None and e.node != self.node:
            return False
        if self.origin is not None and e.source != self.origin:
            return False
        return self.level == "all" or line_level(e) >= LEVELS.index(self.level)

    def _line_count(self) -> int:
        return len(self._entries) if self._view is None else len(self._view)

    def _row_count(self) -> int:
        return len(self._rows_of) if self.wrap else self._line_count()

    def _entry(self, line: int) -> tuple[int, LogEntry] | None:
        if line < 0 or line >= self._line_count():
            return None
        n = line + self._base if self._view is None else self._view[line]
        return n, self._at(n)

    def _update_size(self) -> None:
        width = self.scrollable_content_region.width if self.wrap else self._width
        size = Size(width, self._row_count())
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

    # --- wrapping -------------------------------------------------------------
    def _body_width(self) -> int:
        return max(10, self.scrollable_content_region.width - TAG)

    def _rewrap(self) -> None:
        """Screen rows of the view when wrapping: each line takes as many as its length."""
        self._rows_of = []
        if self.wrap:
            numbers = (
                self._view
                if self._view is not None
                else range(self._base, self._base + len(self._entries))
            )
            self._wrap_lines(numbers)

    def _wrap_lines(self, numbers) -> None:
        """Add the rows of these lines (absolute numbers, in order) to the wrapped rows."""
        rows = self._rows_of
        if rows and rows[0][0] < self._base:  # the oldest lines left the scrollback
            self._rows_of = rows = [r for r in rows if r[0] >= self._base]
        body = self._body_width()
        for n in numbers:
            e = self._at(n)
            length = min(len(e.text), LONG_LINE) + (len(f" ×{e.repeats}") if e.repeats > 1 else 0)
            rows.extend((n, part) for part in range(max(1, -(-length // body))))

    def on_resize(self) -> None:
        if self.wrap:
            self._rewrap()
            self._update_size()

    # --- reactives ----------------------------------------------------------
    def _refilter(self) -> None:
        if self._unfiltered():
            self._view = None
        else:
            self._view = [self._base + i for i, e in enumerate(self._entries) if self._keep(e)]
        self._cache.clear()
        self._rewrap()
        self._update_size()

    def watch_node(self) -> None:
        self._refilter()

    def watch_origin(self) -> None:
        self._refilter()

    def watch_level(self) -> None:
        self._refilter()

    def watch_wrap(self) -> None:
        self._cache.clear()
        self._rewrap()
        self._update_size()

    def watch_search(self, _term: str) -> None:
        self._cache.clear()
        self.refresh()

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._update_size()

    def action_scroll_end(self) -> None:
        self.follow = True  # G / End: back to the newest line, and stay there
        self.scroll_end(animate=False)

    def _line_of(self, n: int) -> int:
        """The view line of absolute line number n."""
        if self._view is None:
            return n - self._base
        return bisect_left(self._view, n)

    def _line_at_top(self) -> int:
        y = int(self.scroll_offset.y)
        if self.wrap:
            return (
                self._line_of(self._rows_of[y][0]) if y < len(self._rows_of) else self._line_count()
            )
        return y

    def _scroll_to_line(self, line: int) -> None:
        self.follow = False
        row = line
        if self.wrap:
            hit = self._entry(line)
            n = hit[0] if hit else -1
            row = next((i for i, (k, _p) in enumerate(self._rows_of) if k == n), 0)
        self.scroll_to(y=max(0, row - 2), animate=False)

    def _find(self, test, backwards: bool) -> int | None:
        """The next line (after the top one, wrapping round) for which test(entry) holds;
        scrolled into view."""
        count = self._line_count()
        start = self._line_at_top() + (2 if self.scroll_offset.y else 0)
        start += 0 if backwards else 1
        if backwards:
            order = [*range(min(start, count) - 2, -1, -1), *range(count - 1, start - 2, -1)]
        else:
            order = [*range(min(start, count), count), *range(0, min(start, count))]
        for line in order:
            hit = self._entry(line)
            if hit and test(hit[1]):
                self._scroll_to_line(line)
                return line
        return None

    def find_next(self, term: str, backwards: bool = False) -> int | None:
        """Scroll to the next line containing `term` (case-insensitive); its line or None."""
        self.search = term
        if not term:
            return None
        low = term.lower()
        return self._find(lambda e: low in e.text.lower(), backwards)

    def next_wall_line(self, backwards: bool = False) -> int | None:
        """Scroll to the next line that matched a wall (error or warning first in colour)."""
        return self._find(lambda e: e.severity in ("error", "warning"), backwards)

    # --- rendering ----------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        part = 0
        if self.wrap:
            row = scroll_y + y
            if row >= len(self._rows_of) or self._rows_of[row][0] < self._base:
                return Strip.blank(width, self._style("base"))
            n, part = self._rows_of[row]
            entry = self._at(n)
        else:
            hit = self._entry(scroll_y + y)
            if hit is None:
                return Strip.blank(width, self._style("base"))
            n, entry = hit
        key = (n, self.search, entry.repeats)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_entry(entry)
            self._cache[key] = strip
        if not self.wrap:
            return strip.crop_extend(scroll_x, scroll_x + width, self._style("base"))
        body = self._body_width()
        piece = strip.crop(TAG + part * body, TAG + (part + 1) * body)
        tag = strip.crop(0, TAG) if part == 0 else Strip.blank(TAG, self._style("base"))
        return Strip.join([tag, piece]).extend_cell_length(width, self._style("base"))

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
        tag = Segment(f"{entry.node[: TAG - 1]:>{TAG - 1}} ", base + self._style("logview--node"))
        count = (
            [Segment(f" ×{entry.repeats}", base + self._style("logview--count"))]
            if entry.repeats > 1
            else []
        )
        if len(entry.text) > LONG_LINE:
            # no highlighting on huge lines: render the first part as plain text
            return Strip([tag, Segment(entry.text[:LONG_LINE], base), *count])
        style: Style = base
        if entry.severity:
            style = base + self._style(f"logview--{entry.severity}")
        text = Text(entry.text, style=style, no_wrap=True, end="")
        if self.search:
            text.highlight_words([self.search], self._style("logview--match"), case_sensitive=False)
        # Text.render leaves the base style off its segments: put it under them
        body = Segment.apply_style(text.render(self.app.console), style=style)
        return Strip([tag, *body, *count])
