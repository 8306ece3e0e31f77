"""Plain-text renderings of readings for the panes (no Textual here: easy to test)."""

from __future__ import annotations

import time

from spark_tui.facts import GIB
from spark_tui.nodes.state import MemoryReading, ServingState
from spark_tui.nodes.transport import Reachability


def clock_hms(t: float | None) -> str:
    """Clock seconds as local HH:MM:SS ("--:--:--" when unknown)."""
    if t is None:
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.localtime(t))


def gib(n_bytes: float | None) -> str:
    """Bytes as GiB with one decimal."""
    return "?" if n_bytes is None else f"{n_bytes / GIB:.1f}"


def reachability_text(r: Reachability | None) -> str:
    """'reachable' or 'unreachable since 12:03:14, retrying'."""
    if r is None or r.reachable:
        return "reachable"
    text = f"unreachable since {clock_hms(r.since)}"
    if r.retrying:
        text += ", retrying"
    if r.reason:
        text += f" ({r.reason})"
    return text


def serving_text(s: ServingState) -> str:
    """stopped · starting · loading n % · capturing graphs n/N · serving at x tok/s · crashed."""
    if s.phase == "loading":
        return f"loading {s.load_pct:.0f} %" if s.load_pct is not None else "loading"
    if s.phase == "capturing":
        if s.capture_done is not None and s.capture_total:
            return f"capturing graphs {s.capture_done}/{s.capture_total}"
        return "capturing graphs"
    if s.phase == "serving":
        return f"serving at {s.tok_s:.1f} tok/s" if s.tok_s is not None else "serving"
    return s.phase


def memory_split(m: MemoryReading) -> tuple[int, int, int, int]:
    """(used, page cache, free, available after dropping caches) in bytes.

    used + page cache + free == total; `after drop` is the figure that matters
    before a launch (free + page cache - shared memory, as the facts compute it).
    """
    cache = max(0, min(m.cached_bytes, m.total_bytes))
    free = max(0, min(m.free_bytes, m.total_bytes - cache))
    used = max(0, m.total_bytes - cache - free)
    after_drop = max(0, m.free_bytes + m.cached_bytes - m.shmem_bytes)
    return used, cache, free, after_drop
