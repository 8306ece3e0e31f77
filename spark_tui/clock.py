"""Time, injectable: real time for real nodes, simulated time for the simulator
(which runs a 5-minute weight load in seconds). Everything that measures a
duration (rules `for: 120`, back-off, waits in a launch plan) asks a Clock.

Two kinds of waiting: `sleep` is the caller's own time passing (a launch step
polling every 10 s); `wait` is a background loop idling until its next round,
interruptible by a stop event. `rate` says how many clock seconds pass per real
second, so a loop can choose a period in clock seconds that is sane in real
time. No other code needs to know whether time is simulated."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds (epoch-like; only differences matter)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait this many clock seconds."""
        ...

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Idle this many clock seconds, or until `stop` is set; True when it was set."""
        ...

    @property
    def rate(self) -> float:
        """Clock seconds per real second (1 for real time)."""
        ...

    def real_seconds(self, seconds: float) -> float:
        """The real seconds `wait(seconds, ...)` idles when nothing stops it (a scheduler
        that idles for many loops at once plans with it)."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(self.real_seconds(seconds))

    def real_seconds(self, seconds: float) -> float:
        return max(0.0, seconds)

    @property
    def rate(self) -> float:
        return 1.0


class ScaledClock:
    """Simulated time: `speed` simulated seconds pass per real second, from `start`.
    `advance()` jumps ahead at once (tests)."""

    def __init__(self, speed: float = 1.0, start: float = 1_780_000_000.0) -> None:
        self.speed = speed
        self._start_sim = start
        self._start_real = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return (
                self._start_sim + (time.monotonic() - self._start_real) * self.speed + self._offset
            )

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.speed if self.speed > 0 else 0)

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(self.real_seconds(seconds))

    def real_seconds(self, seconds: float) -> float:
        # a stopped clock (speed 0) idles a short real moment: its time moves only by sleep()
        real = seconds / self.speed if self.speed > 0 else min(seconds, 0.05)
        return max(0.01, real)

    @property
    def rate(self) -> float:
        return self.speed if self.speed > 0 else 1.0

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def set_speed(self, speed: float) -> None:
        """Change the speed from now on without a jump in time (the demo's speed key, tests)."""
        with self._lock:
            now_real = time.monotonic()
            current = self._start_sim + (now_real - self._start_real) * self.speed + self._offset
            self._start_sim, self._start_real, self._offset = current, now_real, 0.0
            self.speed = speed
