"""The journal of events: what a session's monitor reports and the steps its driver takes,
as lines of the one event language (spark_tui.event_lines). `watch --json` prints these
lines and the TUI's journal of events (`J`) shows them, so both say the same thing in the
same words; `up --json` prints the same types through the same serializer.

Which monitor events make a line (`said`): a wall raised for the first time, a readings
wall raised again (a new episode), a wall that readings confirmed; a log wall whose fix
was checked (fixed, waiting for the relaunch that proves it); a wall that resolved; a node
that dropped, or came back after it dropped (a node reachable from the start is not news). Every line has its time: when it happened by the session's clock."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from spark_tui.driver import Step, step_events
from spark_tui.event_lines import LineEvent, NodeReach, diagnosis_seen, wall_fixed, wall_resolved
from spark_tui.events import (
    DiagnosisFixed,
    DiagnosisRaised,
    DiagnosisResolved,
    ReachabilityChanged,
)

LIMIT = 5000  # lines kept (the oldest go first)


class EventJournal:
    """The lines said so far (newest last), and the rule of which events make one."""

    def __init__(self, now: Callable[[], float], limit: int = LIMIT) -> None:
        self.now = now
        self.lines: deque[LineEvent] = deque(maxlen=limit)
        self._lock = threading.Lock()
        self._down: set[str] = set()  # nodes said to be unreachable (so "again" is true)
        self._sure: dict[tuple[str, str], str] = {}  # confidence said per wall and source

    def said(self, event: object) -> LineEvent | None:
        """The line a monitor event makes (kept), or None when it is not news."""
        line: LineEvent | None = None
        with self._lock:
            if isinstance(event, ReachabilityChanged):
                r = event.reachability
                if r.reachable and event.node not in self._down:
                    return None  # reachable from the start: nothing to say
                (self._down.discard if r.reachable else self._down.add)(event.node)
                line = NodeReach(  # stamped when it dropped or came back
                    node=event.node, reachable=r.reachable, reason=r.reason or None, time=r.since
                )
            elif isinstance(event, DiagnosisResolved):
                line = wall_resolved(event.diagnosis, event.time)
            elif isinstance(event, DiagnosisFixed):
                line = wall_fixed(event.diagnosis, event.time)
            elif isinstance(event, DiagnosisRaised):
                d = event.diagnosis
                key = (d.wall.id, str(d.source))
                surer = self._sure.get(key, d.confidence) != d.confidence  # readings confirmed it
                self._sure[key] = d.confidence
                if event.new or d.source.from_readings or surer:
                    line = diagnosis_seen(d, event.time)
            if line is not None:
                self.lines.append(line)
        return line

    def stepped(self, step: Step, recipe: Any = None) -> list[LineEvent]:
        """The lines of a driver's step (as `up --json` prints them), stamped now; kept."""
        out = [replace(e, time=self.now()) for e in step_events(step, recipe)]
        with self._lock:
            self.lines.extend(out)
        return out

    def snapshot(self) -> list[LineEvent]:
        with self._lock:
            return list(self.lines)
