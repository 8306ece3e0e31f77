"""The journal of everything spark-tui did to a node: JSON lines under state_dir().

One line per command (time, run id, fix, node, action, command, exit code,
output tail), flushed and fsync'ed before the next command starts, so a crash
mid-fix leaves every line written so far readable. A torn last line (power
cut during a write) is skipped on reading, never fatal.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_tui import paths
from spark_tui.errors import SparkTuiError


def journal_path() -> Path:
    return paths.state_dir() / "journal.jsonl"


class Journal:
    """Append-only JSON lines; every append is flushed and fsync'ed."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or journal_path()

    def append(self, **entry: Any) -> dict[str, Any]:
        record = {"time": time.time(), **entry}
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return record

    def entries(self) -> list[dict[str, Any]]:
        """Every readable entry, oldest first (a torn line is skipped)."""
        return list(self)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry

    def run(self, run_id: str) -> list[dict[str, Any]]:
        return [e for e in self if e.get("run") == run_id]


@dataclass(frozen=True)
class InterruptedFix:
    """A fix whose journal has a start and no end: which nodes got which actions."""

    run: str
    fix: str
    started: float
    planned_nodes: tuple[str, ...]
    done: dict[str, list[str]]  # node -> actions that finished ok

    def describe(self) -> str:
        got = ", ".join(f"{n} ({', '.join(a)})" for n, a in self.done.items()) or "no node"
        missing = [n for n in self.planned_nodes if n not in self.done]
        rest = f"; not reached: {', '.join(missing)}" if missing else ""
        return f"fix {self.fix} (run {self.run}) was interrupted: done on {got}{rest}"


def interrupted_fixes(journal: Journal | None = None) -> list[InterruptedFix]:
    """Fixes that started and never ended (a crash, a kill, a lost terminal)."""
    journal = journal or Journal()
    starts: dict[str, dict[str, Any]] = {}
    done: dict[str, dict[str, list[str]]] = {}
    ended: set[str] = set()
    for e in journal:
        run = str(e.get("run", ""))
        kind = e.get("event")
        if kind == "fix-start":
            starts[run] = e
            done[run] = {}
        elif kind in ("fix-end", "fix-interrupted"):
            ended.add(run)
        elif kind == "command" and e.get("exit_code") == 0 and e.get("node"):
            done.setdefault(run, {}).setdefault(str(e["node"]), []).append(str(e.get("action")))
    return [
        InterruptedFix(
            run,
            str(s.get("fix")),
            float(s.get("time", 0.0)),
            tuple(s.get("nodes") or ()),
            done.get(run, {}),
        )
        for run, s in starts.items()
        if run not in ended
    ]


class FixAlreadyRunning(SparkTuiError):
    """Another fix holds the lock."""


class FixLock:
    """One fix at a time, across processes: an flock on state_dir()/fix.lock.
    The kernel drops it when the holder dies, so a crash never leaves it stuck."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "fix.lock"
        self._fd: int | None = None

    def acquire(self, what: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.read(fd, 400).decode("utf-8", "replace").strip()
            finally:
                os.close(fd)
            raise FixAlreadyRunning(
                f"a fix is already running ({holder or 'unknown'}); wait for it to finish"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{what}, pid {os.getpid()}".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FixLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
