"""The serving engine's progress, read from its log lines as they arrive
(vLLM and SGLang): loading → capturing → serving, with the n/m counters, so
the rules can tell "stuck at 0/36 for minutes" from "slow but moving".
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from spark_tui.nodes.state import ServingState

_LOAD = re.compile(r"Loading (?:safetensors|pt) checkpoint shards:.*?(\d+)/(\d+)", re.I)
_LOAD_PCT = re.compile(r"Loading (?:safetensors|pt) checkpoint shards:\s+(\d+)%", re.I)
_CAPTURE = re.compile(r"Capturing (?:CUDA graphs?|batches)[^|\n]*\|[^|\n]*\|\s*(\d+)/(\d+)", re.I)
_CAPTURE_START = re.compile(r"Capturing (?:CUDA graphs?|cudagraph|batches)", re.I)
_SERVING = re.compile(
    r"Application startup complete|Uvicorn running on|The server is fired up and ready to roll"
)
# An engine starting (again): after a crash only these lines mean a new start; the
# traceback and shutdown lines that follow a crash do not.
_STARTING = re.compile(
    r"vLLM API server version|Starting vLLM API server|Initializing a V1 LLM engine"
    r"|server_args=ServerArgs\(|Launch sglang server|sglang\.launch_server"
)
_CRASHED = re.compile(
    r"EngineDeadError|Engine core initialization failed|died unexpectedly|"
    r"RuntimeError: Engine process failed to start"
)
_THROUGHPUT = re.compile(
    r"Avg generation throughput: ([\d.]+) tokens/s(?:, Running: (\d+) reqs)?|"
    r"gen throughput \(token/s\): ([\d.]+)(?:, #queue-req: \d+)?"
)
_SGLANG_RUNNING = re.compile(r"#running-req: (\d+)")
# lines only the engine prints (a Ray daemon's own log has none of them)
_ENGINE_LINES = (_LOAD, _LOAD_PCT, _CAPTURE_START, _SERVING, _THROUGHPUT, _SGLANG_RUNNING)
# Lines that say nothing moved do not break the log's silence (the stall detector's
# log.silent_s): the access log of spark-tui's own /metrics and /health reads, vLLM's
# once-a-minute "No available shared memory broadcast block" and a stats line with no
# throughput at all.
_NO_PROGRESS = re.compile(
    r'"GET /(?:metrics|health|v1/models) HTTP/[\d.]+" 200'
    r"|No available shared memory broadcast block found in \d+ second"
    r"|Avg prompt throughput: 0\.0 tokens/s, Avg generation throughput: 0\.0 tokens/s"
)


class ServingTracker:
    """Feeds on one node's serving log; `state` is the ServingState so far."""

    def __init__(self) -> None:
        self.state = ServingState()
        self.engine_seen = False  # a line of the engine itself (not Ray's) since the reset

    def _set(self, **changes: Any) -> None:
        self.state = dataclasses.replace(self.state, **changes)

    def reset(self, phase: str, now: float) -> None:
        """A new launch attempt: nothing of the last one's progress counts."""
        self.state = ServingState(phase=phase, progress_at=now)
        self.engine_seen = False

    def mark_crashed(self) -> None:
        """The knowledge base recognised an error wall in this log: the engine stopped."""
        self._set(phase="crashed")

    def feed(self, line: str, now: float) -> ServingState:
        """Update from one log line seen at clock time `now`."""
        s = self.state
        if _NO_PROGRESS.search(line):
            m = _THROUGHPUT.search(line)
            if m and m.group(2) is not None:  # the running count still counts
                self._set(requests_running=float(m.group(2)), tok_s=0.0)
            return self.state
        self._set(last_log_at=now)
        if any(r.search(line) for r in _ENGINE_LINES):
            self.engine_seen = True
        if s.phase in ("stopped", "crashed"):
            # what a stopped or dead stack prints last (shutdown, a traceback) starts nothing:
            # only an engine starting, or its progress, does
            if not _STARTING.search(line) and not any(r.search(line) for r in _ENGINE_LINES):
                return self.state
            self._set(phase="starting", progress_at=now)
        if m := _CAPTURE.search(line):
            done, total = int(m.group(1)), int(m.group(2))
            moved = (done, total) != (s.capture_done, s.capture_total) or s.phase != "capturing"
            self._set(phase="capturing", capture_done=done, capture_total=total)
            if moved:
                self._set(progress_at=now)
        elif _CAPTURE_START.search(line) and s.phase != "capturing":
            self._set(phase="capturing", capture_done=0, progress_at=now)
        elif (m := _LOAD.search(line)) and s.phase in ("starting", "loading", "stopped"):
            done, total = int(m.group(1)), int(m.group(2))
            pct = 100.0 * done / total if total else None
            if pct is not None and pct != s.load_pct:
                self._set(progress_at=now)
            self._set(phase="loading", load_pct=pct)
        elif (m := _LOAD_PCT.search(line)) and s.phase in ("starting", "loading"):
            self._set(phase="loading", load_pct=float(m.group(1)), progress_at=now)
        if _SERVING.search(line):
            self._set(phase="serving", progress_at=now)
        if _CRASHED.search(line):
            self._set(phase="crashed")
        if m := _THROUGHPUT.search(line):
            tok_s = float(m.group(1) or m.group(3) or 0.0)
            self._set(tok_s=tok_s)
            if m.group(2) is not None:
                self._set(requests_running=float(m.group(2)))
            if tok_s > 0:
                self._set(tokens_moved_at=now)
        if m := _SGLANG_RUNNING.search(line):
            self._set(requests_running=float(m.group(1)))
        return self.state
