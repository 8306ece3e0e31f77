"""The journal of everything spark-tui did to a node: a write-ahead log of JSON lines.

Before a command runs on a node, a `started` record (run, node, command, time) is
written, flushed and fsync'ed; after it, `finished` with the exit code, or with
`connection lost`, `timed out` or `interrupted`. Every write is checked: a journal
that cannot be written (a full disk, a read-only directory, a file-size limit)
raises JournalUnwritable and nothing runs, so no command ever runs unrecorded.

A torn last line (power cut during a write) is skipped on reading, never fatal; so is a
record that is not what spark-tui writes (named by file and line in `skipped`), so one bad
line never blocks `report` or a fix. The file is opened as spark-tui's own (never through a
symlink, never a FIFO, only a regular file of this user: spark_tui.safefile).
`unfinished()` names the runs and commands that started and never ended — a kill,
a crash, a lost terminal — so the next run, `report` and the TUI can say exactly
which commands may have half-run, on which node.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_tui.errors import SparkTuiError
from spark_tui.redact import redact_data
from spark_tui.safefile import UnsafeFile, check_fd, open_state

# how a command ended, besides its exit code
CONNECTION_LOST = "connection lost"
TIMED_OUT = "timed out"
INTERRUPTED = "interrupted"


def _why(path: Path, exc: OSError) -> str:
    """` PATH: why` for an ordinary failure; `: why` for a refused file (it names itself)."""
    if isinstance(exc, UnsafeFile):
        return f": {exc}"
    return f" {path}: {exc.strerror or exc}"


class JournalUnwritable(SparkTuiError):
    """The journal cannot be written: the action must not run."""


class Journal:
    """Append-only JSON lines; every append is checked, flushed and fsync'ed.

    `simulated` marks every record of a simulated cluster's journal (a demo's journal
    lives apart from the real one; a report that reads it says so)."""

    def __init__(self, path: Path, *, simulated: bool = False) -> None:
        self.path = path
        self.simulated = simulated
        self.skipped: list[str] = []  # "file:line: why" of records left out on the last read
        self._ran: dict[str, list[str]] = {}  # run -> "node: command" this process started

    def append(self, **entry: Any) -> dict[str, Any]:
        """Write one record; raises JournalUnwritable when it is not all on disk."""
        record = {"time": time.time(), **entry}
        if self.simulated:
            record["simulated"] = True
        # secrets (a recipe's HF_TOKEN in a command, an output tail) only as ${NAME}
        text = json.dumps(redact_data(record), ensure_ascii=False, default=str)
        data = (text + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_state(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError as exc:  # UnsafeFile included
            raise self._unwritable(exc) from None
        try:
            written = 0
            while written < len(data):
                n = os.write(fd, data[written:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, "no space left")
                written += n
            os.fsync(fd)
        except OSError as exc:
            # a torn line is skipped on reading; truncating it keeps the file clean for the next
            with contextlib.suppress(OSError):
                os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_END) - written)
            raise self._unwritable(exc) from None
        finally:
            os.close(fd)
        return record

    def _unwritable(self, exc: OSError) -> JournalUnwritable:
        return JournalUnwritable(
            f"cannot write the journal{_why(self.path, exc)}; nothing was run "
            "(free space or fix the permissions of the state directory)"
        )

    def _stopped(self, exc: JournalUnwritable, run: str) -> JournalUnwritable:
        """The journal failed in the middle of a run: say exactly what ran before."""
        ran = self._ran.get(run)
        if not ran:
            return exc
        text = str(exc).replace("; nothing was run", "", 1)
        return JournalUnwritable(
            f"{text.split(' (free space')[0]}; the change stopped there, after running: "
            + "; ".join(ran)
            + " (nothing after these ran; free space or fix the permissions of the state "
            "directory)"
        )

    # ---- commands, write-ahead -------------------------------------------------------
    @contextlib.contextmanager
    def command(
        self, run: str, context: str, node: str | None, action: str, command: str
    ) -> Iterator[CommandRecord]:
        """`started` now; `finished` when the block ends: with the result the block gave
        (CommandRecord.finish), else `connection lost` (the node dropped), else
        `interrupted` (Ctrl-C, a kill that Python sees, a bug)."""
        rec = CommandRecord(self, uuid.uuid4().hex[:12], run, context, node, action, command)
        try:
            self.append(
                event="started",
                cmd=rec.id,
                run=run,
                fix=context,
                node=node,
                action=action,
                command=command,
                pid=os.getpid(),
            )
        except JournalUnwritable as exc:
            raise self._stopped(exc, run) from None
        _OPEN_HERE.add(rec.id)
        ran = self._ran.setdefault(run, [])
        ran.append(f"{node or 'this machine'}: {command} (started; its end is not recorded)")
        rec.ran_index = len(ran) - 1
        try:
            yield rec
        except JournalUnwritable as exc:
            raise self._stopped(exc, run) from None
        except BaseException as exc:
            if not rec.done:
                from spark_tui.nodes.transport import NodeUnreachable

                lost = isinstance(exc, NodeUnreachable)
                rec.finish(
                    None,
                    f"{exc.reason}" if lost else type(exc).__name__,  # type: ignore[attr-defined]  # a NodeUnreachable when lost: it has .reason
                    outcome=CONNECTION_LOST if lost else INTERRUPTED,
                )
            raise
        finally:
            _OPEN_HERE.discard(rec.id)
        if not rec.done:
            rec.finish(None, "", outcome=INTERRUPTED)

    # ---- reading -----------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """Every readable entry, oldest first (a torn line is skipped)."""
        return list(self)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.skipped = []
        try:
            fd = open_state(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:  # UnsafeFile included
            raise JournalUnwritable(f"cannot read the journal{_why(self.path, exc)}") from None
        with os.fdopen(fd, "rb") as fh:
            check_fd(fh.fileno(), self.path)
            number = 0
            while True:
                raw = fh.readline(MAX_RECORD + 1)
                if not raw:
                    break
                number += 1
                where = f"{self.path}:{number}"
                if len(raw) > MAX_RECORD and not raw.endswith(b"\n"):
                    while raw and not raw.endswith(b"\n"):  # the rest of the long line
                        raw = fh.readline(1 << 20)
                    self.skipped.append(f"{where}: longer than {MAX_RECORD} bytes: skipped")
                    continue
                torn = not raw.endswith(b"\n")
                try:
                    entry = json.loads(raw.decode("utf-8", "replace"))
                except ValueError:
                    if not torn and raw.strip():  # a torn last line is a power cut: quiet
                        self.skipped.append(f"{where}: not a JSON record: skipped")
                    continue
                problem = record_problem(entry)
                if problem:
                    self.skipped.append(f"{where}: {problem}: skipped")
                    continue
                if entry.get("event") != "check":
                    yield entry

    def run(self, run_id: str) -> list[dict[str, Any]]:
        return [e for e in self if e.get("run") == run_id]


MAX_RECORD = 1 << 20  # one journal record (an output tail is a few KB)
_TEXT_FIELDS: tuple[str, ...] = (
    "event",
    "run",
    "cmd",
    "fix",
    "node",
    "action",
    "command",
    "outcome",
)
_TEXT_FIELDS += ("output_tail", "message", "status", "wall", "risk", "reason", "recipe")


def record_problem(entry: object) -> str | None:
    """Why a journal line is not a record spark-tui wrote (None: it is one). Only the
    fields readers rely on are checked: text is text, numbers are numbers."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    if not isinstance(entry.get("event"), str):
        return "no event name"
    for key in _TEXT_FIELDS:
        if entry.get(key) is not None and not isinstance(entry[key], str):
            return f"{key!r} is not text"
    t = entry.get("time", 0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t != t or abs(t) > 1e11:
        return "'time' is not a time"
    for key in ("pid", "exit_code", "revision"):
        v = entry.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            return f"{key!r} is not a whole number"
    nodes = entry.get("nodes")
    if nodes is not None and not (
        isinstance(nodes, list) and all(isinstance(n, str) for n in nodes)
    ):
        return "'nodes' is not a list of node names"
    done = entry.get("done")
    if done is not None and not (
        isinstance(done, dict)
        and all(isinstance(v, list) and all(isinstance(a, str) for a in v) for v in done.values())
    ):
        return "'done' is not a map of nodes to actions"
    return None


@dataclass
class CommandRecord:
    """One command's pair of records; `finish` writes the second."""

    journal: Journal
    id: str
    run: str
    context: str
    node: str | None
    action: str
    command: str
    done: bool = False
    ran_index: int | None = None  # its line in the journal's list of what this run ran

    def finish(
        self, exit_code: int | None, tail: str = "", *, outcome: str = "exit", **extra: Any
    ) -> None:
        """Record how it ended: outcome `exit` (with the code), `timed out`,
        `connection lost` or `interrupted`."""
        self.done = True
        ran = self.journal._ran.get(self.run)
        if ran is not None and self.ran_index is not None:
            how = f"exit {exit_code}" if outcome == "exit" else outcome
            ran[self.ran_index] = f"{self.node or 'this machine'}: {self.command} ({how})"
        self.journal.append(
            event="finished",
            cmd=self.id,
            run=self.run,
            fix=self.context,
            node=self.node,
            action=self.action,
            command=self.command,
            outcome=outcome,
            exit_code=exit_code,
            output_tail=tail,
            **extra,
        )


@dataclass(frozen=True)
class UnfinishedRun:
    """A fix or launch that started and never ended: which commands ran to the end,
    which started and have no end (they may have half-run), which nodes it never reached."""

    run: str
    fix: str
    started: float
    planned_nodes: tuple[str, ...]
    done: dict[str, list[str]] = field(default_factory=dict)  # node -> actions that ended ok
    cut: tuple[tuple[str, str], ...] = ()  # (node, command) started and never finished
    # (node, command) what sets a node back as it was before a change of this run (its
    # `undo-saved` records), not yet run to the end
    set_back: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        got = ", ".join(f"{n} ({', '.join(a)})" for n, a in self.done.items()) or "no node"
        parts = [f"{self.fix} (run {self.run}) was interrupted: finished on {got}"]
        if self.cut:
            parts.append(
                "started and never finished: "
                + "; ".join(f"{n}: {c[:120]}" for n, c in self.cut)
                + " (check these nodes: the command may have half-run)"
            )
        touched = set(self.done) | {n for n, _c in self.cut}
        missing = [n for n in self.planned_nodes if n not in touched]
        if missing:
            parts.append(f"not reached: {', '.join(missing)}")
        if self.set_back:
            parts.append(
                "to set the nodes back as they were before it: "
                + "; ".join(f"{n}: {c[:160]}" for n, c in reversed(self.set_back))
            )
        return "; ".join(parts)


def unfinished(journal: Journal) -> list[UnfinishedRun]:
    """Runs with a start and no end, and commands with a `started` and no `finished` (a
    bring-up step has no run record of its own), whose process is gone (a run still going
    is not interrupted: another spark-tui may be running it now)."""
    starts: dict[str, dict[str, Any]] = {}
    done: dict[str, dict[str, list[str]]] = {}
    open_cmds: dict[str, dict[str, tuple[str, str]]] = {}
    first_cmd: dict[str, dict[str, Any]] = {}  # the first `started` of each run
    ended: set[str] = set()
    set_back: dict[str, list[tuple[str, str]]] = {}  # run -> undo commands not yet run
    for e in journal:
        run = str(e.get("run", ""))
        kind = e.get("event")
        if kind == "undo-saved" and isinstance(e.get("undo"), str):
            set_back.setdefault(run, []).append((str(e.get("node")), e["undo"]))
        elif kind == "finished" and e.get("action") == "undo" and e.get("exit_code") == 0:
            undone = (str(e.get("node")), str(e.get("command")))
            if undone in set_back.get(run, []):
                set_back[run].remove(undone)
        if kind in ("fix-start", "run-start"):
            starts[run] = e
        elif kind in ("fix-end", "fix-interrupted", "run-end"):
            ended.add(run)
        elif kind == "started":
            first_cmd.setdefault(run, e)
            open_cmds.setdefault(run, {})[str(e.get("cmd"))] = (
                str(e.get("node")),
                str(e.get("command", "")),
            )
        elif kind == "finished":
            open_cmds.get(run, {}).pop(str(e.get("cmd")), None)
            if e.get("outcome") == "exit" and e.get("exit_code") == 0 and e.get("node"):
                actions = done.setdefault(run, {}).setdefault(str(e["node"]), [])
                if str(e.get("action")) not in actions:  # several commands, one action
                    actions.append(str(e.get("action")))
    out = []
    for run, first in first_cmd.items():  # commands cut in a run with no run record
        if run not in starts and open_cmds.get(run) and not writer_alive(first.get("pid")):
            starts[run] = {**first, "nodes": ()}
    for run, s in starts.items():
        if run in ended or writer_alive(s.get("pid")):
            continue
        out.append(
            UnfinishedRun(
                run,
                str(s.get("fix")),
                float(s.get("time", 0.0)),
                tuple(s.get("nodes") or ()),
                done.get(run, {}),
                tuple(open_cmds.get(run, {}).values()),
                tuple(set_back.get(run, ())),
            )
        )
    return out


_OPEN_HERE: set[str] = set()  # commands this process has started and not finished


def command_running(entry: dict[str, Any]) -> bool:
    """Whether the command of a `started` record runs now: in this process, or in the
    spark-tui process that wrote it (still alive)."""
    return str(entry.get("cmd")) in _OPEN_HERE or writer_alive(entry.get("pid"))


def writer_alive(pid: object) -> bool:
    """Whether the process that wrote a start record still runs (on this machine)."""
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FixAlreadyRunning(SparkTuiError):
    """Another fix holds the lock."""


class FixLock:
    """One change at a time, across processes: an flock on a file of the state directory.
    The kernel drops it when the holder dies, so a crash never leaves it stuck."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, what: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_state(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:  # UnsafeFile included
            raise JournalUnwritable(
                f"cannot open the lock{_why(self.path, exc)}; nothing was run"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.read(fd, 400).decode("utf-8", "replace").strip()
            finally:
                os.close(fd)
            raise FixAlreadyRunning(
                f"another change is running ({holder or 'unknown'}); wait for it to finish"
            ) from None
        # who holds it, for the message another process shows; optional (a full disk)
        with contextlib.suppress(OSError):
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
