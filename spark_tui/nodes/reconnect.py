"""One watcher for every SSH connection: notices a dropped connection and reopens it with
back-off, on one thread for any number of nodes (a thread per node made 500 threads at 500
nodes). A reopen can wait out a connect timeout, so reopens run on their own short-lived
threads, at most MAX_OPENS at once; the others wait their turn (their back-off keeps
counting)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Protocol

MAX_OPENS = 4  # reopen attempts in flight at once, across all nodes


class Watched(Protocol):
    """What the watcher needs of a connection (SSHTransport)."""

    name: str

    @property
    def watch_s(self) -> float: ...  # how often a live connection is looked at

    @property
    def backoff_s(self) -> Sequence[float]: ...  # waits before each reopen attempt

    def alive_now(self) -> bool: ...

    def mark_lost(self) -> None: ...  # the connection is gone: say so now

    def reopen(self) -> None: ...  # one connection attempt (may block)


class Reconnector:
    def __init__(self, max_opens: int = MAX_OPENS) -> None:
        self._cond = threading.Condition()
        self._due: dict[Watched, float] = {}  # when each connection is looked at next
        self._attempt: dict[Watched, int] = {}  # failed reopens in a row
        self._waiting: set[Watched] = set()  # dead, its back-off running out
        self._opening: set[Watched] = set()  # a reopen in flight
        self._max_opens = max_opens
        self._thread: threading.Thread | None = None

    def add(self, t: Watched) -> None:
        with self._cond:
            self._due[t] = time.monotonic() + t.watch_s
            self._attempt[t] = 0
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ssh-watch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, t: Watched) -> None:
        with self._cond:
            self._due.pop(t, None)
            self._attempt.pop(t, None)
            self._waiting.discard(t)
            self._cond.notify()

    def wake(self, t: Watched) -> None:
        """Look at `t` now (a call saw its connection drop); a back-off running is kept."""
        with self._cond:
            if t in self._due and t not in self._waiting:
                self._due[t] = 0.0
                self._cond.notify()

    def watching(self) -> int:
        with self._cond:
            return len(self._due)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._due:
                    self._thread = None  # an add() starts another
                    return
                now = time.monotonic()
                full = len(self._opening) >= self._max_opens  # the dead wait for a slot
                idle = [
                    t
                    for t in self._due
                    if t not in self._opening and not (full and t in self._waiting)
                ]
                ready = [t for t in idle if self._due[t] <= now]
                if not ready:
                    nearest = min((self._due[t] for t in idle), default=now + 1.0)
                    self._cond.wait(min(max(nearest - now, 0.01), 1.0))
                    continue
            for t in ready:
                self._look(t, now)

    def _look(self, t: Watched, now: float) -> None:
        with self._cond:
            known, waiting = t in self._due, t in self._waiting
        if not known:
            return
        alive = not waiting and t.alive_now()
        if not alive and not waiting:
            t.mark_lost()
        with self._cond:
            if t not in self._due:
                return
            reopen_due = t in self._waiting
            if not reopen_due:
                if alive:
                    self._attempt[t] = 0
                    self._due[t] = now + t.watch_s
                    return
                backoff = tuple(t.backoff_s) or (1.0,)
                delay = backoff[min(self._attempt[t], len(backoff) - 1)]
                self._waiting.add(t)
                self._due[t] = now + delay
                reopen_due = delay <= 0
            if not reopen_due or len(self._opening) >= self._max_opens:
                return  # its back-off, or a free slot, first
            self._waiting.discard(t)
            self._opening.add(t)
            self._attempt[t] += 1
        opener = threading.Thread(
            target=self._reopen, args=(t,), name=f"ssh-open:{t.name}", daemon=True
        )
        opener.start()

    def _reopen(self, t: Watched) -> None:
        try:
            t.reopen()
        finally:
            with self._cond:
                self._opening.discard(t)
                if t in self._due:
                    self._due[t] = 0.0  # alive now? (else the next back-off)
                self._cond.notify()


RECONNECTOR = Reconnector()
