"""A log whose lines appear as simulated time passes (engines schedule lines ahead)."""

from __future__ import annotations

import bisect
import threading


class TimedLog:
    """Lines stamped with the clock time they are written; readers see those up to now."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._seq = 0.0

    def add(self, t: float, line: str) -> None:
        with self._lock:
            # keep insertion order for equal times
            self._seq += 1e-9
            i = bisect.bisect_right(self._times, t)
            self._times.insert(i, t)
            self._lines.insert(i, line)

    def add_many(self, t: float, lines: list[str], step: float = 0.0) -> float:
        for i, line in enumerate(lines):
            self.add(t + i * step, line)
        return t + max(0, len(lines) - 1) * step

    def lines(self, now: float) -> list[str]:
        with self._lock:
            return self._lines[: bisect.bisect_right(self._times, now)]

    def count(self, now: float) -> int:
        with self._lock:
            return bisect.bisect_right(self._times, now)

    def text(self, now: float) -> str:
        lines = self.lines(now)
        return "".join(line + "\n" for line in lines)

    def last_time(self, now: float) -> float | None:
        with self._lock:
            i = bisect.bisect_right(self._times, now)
            return self._times[i - 1] if i else None

    def cut_after(self, t: float) -> None:
        """A killed writer writes nothing more."""
        with self._lock:
            i = bisect.bisect_right(self._times, t)
            del self._times[i:]
            del self._lines[i:]
