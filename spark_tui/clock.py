"""Time, injectable: real time for real nodes, simulated time for the simulator
(which runs a 5-minute weight load in seconds). Everything that measures a
duration (rules `for: 120`, back-off, waits in a launch plan) asks a Clock."""

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


class RealClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


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
