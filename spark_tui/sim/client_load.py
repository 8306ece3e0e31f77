"""A client that keeps requests running on a serving engine (the serving-stall scenario):
tokens move at the engine's rate and vLLM logs its stats every 10 s, until the engine wedges;
from then on only /health, SM % and the shared-memory broadcast warnings go on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_tui.sim import logs

if TYPE_CHECKING:
    from spark_tui.sim.timedlog import TimedLog

STATS_EVERY_S = 10.0  # vLLM's stats logger interval
REQUESTS_IN_FLIGHT = 2  # the client keeps two requests running once the engine serves
SHM_WARN_EVERY_S = 60.0
STATS_FOR_S = 2 * 3600.0  # how far ahead the stats lines of an engine that never wedges go
WARN_FOR_S = 3600.0


@dataclass(frozen=True)
class ClientLoad:
    """Steady requests from `start`; tokens frozen from `wedge_at` (None: never)."""

    start: float
    wedge_at: float | None
    tok_s: float

    def active(self, now: float) -> bool:
        return now >= self.start

    def running(self, now: float) -> int:
        """Requests the client has in flight at `now` (the engine alive)."""
        return REQUESTS_IN_FLIGHT if self.active(now) else 0

    def tokens(self, now: float) -> float:
        """Tokens the client's requests have produced by `now` (the engine alive)."""
        if not self.active(now):
            return 0.0
        stop = now if self.wedge_at is None else min(now, self.wedge_at)
        return self.tok_s * max(0.0, stop - self.start)

    def wedged(self, now: float) -> bool:
        return self.wedge_at is not None and now >= self.wedge_at

    def write_log(self, sink: TimedLog, pid: int, api_pid: int) -> None:
        """Schedule vLLM's stats lines while tokens move, then the wedged engine's warnings."""
        end = self.wedge_at if self.wedge_at is not None else self.start + STATS_FOR_S
        t = self.start + STATS_EVERY_S
        while t < end:
            sink.add(
                t,
                logs.render(
                    "vllm",
                    "stats",
                    api_pid=api_pid,
                    ts=logs.vllm_ts(t),
                    tok_s=f"{self.tok_s:.1f}",
                    running=REQUESTS_IN_FLIGHT,
                )[0],
            )
            t += STATS_EVERY_S
        if self.wedge_at is None:
            return
        t = self.wedge_at + SHM_WARN_EVERY_S
        while t < self.wedge_at + WARN_FOR_S:
            sink.add(t, logs.render("vllm", "shm-broadcast-wait", pid=pid, ts=logs.vllm_ts(t))[0])
            t += SHM_WARN_EVERY_S
