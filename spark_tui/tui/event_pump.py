"""From engine threads to the UI thread: a bounded, coalescing hand-over (toolong's way).

The monitor calls `emit(event)` from its own threads at any rate. Log lines go
into a bounded buffer (the oldest are dropped and counted when the UI falls
behind); other events into a plain queue (they are few). Each emit posts one
`EventsPending` message that replaces any pending one, so the UI wakes once
per refresh and takes everything in one batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from spark_tui.events import Event, LogLines


@dataclass
class Batch:
    """What the UI takes in one go: log line batches, other events, lines dropped."""

    logs: list[LogLines] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    dropped_lines: int = 0


class EventPump:
    """Thread-safe; `emit` never blocks the engine for longer than a lock."""

    def __init__(self, wake: Callable[[], None], max_pending_lines: int = 50_000) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._logs: deque[LogLines] = deque()
        self._pending_lines = 0
        self._events: list[Event] = []
        self._dropped = 0
        self.max_pending_lines = max_pending_lines
        self._woken = False

    def emit(self, event: Event) -> None:
        """Called from any thread by the engines."""
        with self._lock:
            if isinstance(event, LogLines):
                self._logs.append(event)
                self._pending_lines += len(event.lines)
                # bounded: drop whole oldest batches the UI has not taken yet
                while self._pending_lines > self.max_pending_lines and len(self._logs) > 1:
                    old = self._logs.popleft()
                    self._pending_lines -= len(old.lines)
                    self._dropped += len(old.lines)
            else:
                self._events.append(event)
            if self._woken:
                return
            self._woken = True
        self._wake()

    def drain(self) -> Batch:
        """Everything pending, in arrival order per kind (UI thread)."""
        with self._lock:
            batch = Batch(list(self._logs), self._events, self._dropped)
            self._logs.clear()
            self._events = []
            self._pending_lines = 0
            self._dropped = 0
            self._woken = False
        return batch
