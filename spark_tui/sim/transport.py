"""SimTransport: the Transport of a simulated node (spark_tui.nodes.transport contract)."""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Callable, Iterator

from spark_tui.nodes.transport import (
    CommandResult,
    LineStream,
    NodeUnreachable,
    Reachability,
    Transport,
)
from spark_tui.sim import docker as dk
from spark_tui.sim import gpu
from spark_tui.sim.node import SimNode
from spark_tui.sim.shell import Ctx, read_path, run_script
from spark_tui.sim.timedlog import TimedLog
from spark_tui.sim.world import SimWorld

BASE_ENV = {
    "HOME": "/home/milo",
    "USER": "milo",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "SHELL": "/bin/bash",
}
GENERIC_STREAM_S = 5.0  # simulated seconds a stream of an unknown long command runs


class SimTransport(Transport):
    """Runs command lines on one simulated node. Its state changes only through them."""

    def __init__(self, world: SimWorld, node: SimNode) -> None:
        self.world = world
        self.node = node
        self.name = node.name
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise NodeUnreachable(self.name, "transport closed", self.world.clock.now())
        if not self.node.is_up():
            raise NodeUnreachable(self.name, self.node.down_reason(), self.node.down_from)

    def connect(self) -> None:
        self._check()

    def _ctx(self) -> Ctx:
        return Ctx(self.world, self.node, None, dict(BASE_ENV))

    def run(self, command: str, timeout: float = 30.0, input: bytes | None = None) -> CommandResult:
        self._check()
        start = self.world.clock.now()
        ctx = self._ctx()
        ctx.deadline = start + timeout
        stdin = input.decode("utf-8", "replace") if input else ""
        with self.world.lock:
            r = run_script(command, ctx, stdin)
        if ctx.blocked:
            # a foreground command that never ends: it runs until the timeout kills it
            return CommandResult(command, -9, r.out, r.err, timeout, timed_out=True)
        return CommandResult(command, r.rc, r.out, r.err, self.world.clock.now() - start)

    def stream(self, command: str) -> LineStream:
        self._check()
        return _SimStream(self, command)

    def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        self._check()
        real = self.node.mounted(path)
        if real is not None:
            with open(real, "rb") as fh:
                return fh.read(max_bytes)
        with self.world.lock:
            text = read_path(self._ctx(), path)
        if text is None:
            raise FileNotFoundError(path)
        return text.encode()[:max_bytes]

    @property
    def state(self) -> Reachability:
        n = self.node
        if self._closed:
            return Reachability(False, self.world.clock.now(), "closed")
        if n.is_up():
            return Reachability(True, n.booted_at)
        return Reachability(
            False, n.down_from or self.world.clock.now(), n.down_reason(), retrying=True
        )

    def close(self) -> None:
        self._closed = True


class _SimStream(LineStream):
    """A long-running command's output as simulated time passes. Its steps yield a line, or
    None for "nothing more now" (read_lines returns what came before it and never waits)."""

    def __init__(self, transport: SimTransport, command: str) -> None:
        self.t = transport
        self.command = command
        self._closed = threading.Event()
        self._steps: Iterator[str | None] | None = None

    def close(self) -> None:
        self._closed.set()

    def read_lines(self) -> list[str] | None:
        if self._closed.is_set():
            return None
        if self._steps is None:
            self._steps = self._run()
        out: list[str] = []
        for line in self._steps:
            if line is None:
                return out
            out.append(line)
        self._closed.set()  # the command ended
        return out or None

    def _run(self) -> Iterator[str | None]:
        try:
            argv = shlex.split(self.command)
        except ValueError:
            argv = []
        follow = _follow_target(self.t, argv)
        if follow is None:
            if argv[:2] == ["nvidia-smi", "dmon"]:
                yield from self._dmon(argv)
                return
            try:
                # a command that never ends is cut after a while (its output so far is kept)
                r = self.t.run(self.command, timeout=GENERIC_STREAM_S)
            except NodeUnreachable:
                return
            yield from (r.stdout + r.stderr).splitlines()
            return
        log, tail_n, alive = follow
        clock = self.t.world.clock
        now = clock.now()
        seen = log.count(now)
        start = max(0, seen - tail_n) if tail_n >= 0 else 0
        yield from log.lines(now)[start:seen]
        while not self._closed.is_set():
            yield None
            now = clock.now()
            if not self.t.node.is_up():
                return
            count = log.count(now)
            if count > seen:
                yield from log.lines(now)[seen:count]
                seen = count
            elif not alive():
                return

    def _dmon(self, argv: list[str]) -> Iterator[str | None]:
        clock = self.t.world.clock
        yield from gpu.dmon_header(argv)
        count = None
        if "-c" in argv:
            try:
                count = int(argv[argv.index("-c") + 1])
            except (ValueError, IndexError):
                count = None
        n = 0
        next_t = clock.now()
        while not self._closed.is_set() and (count is None or n < count):
            while clock.now() < next_t and not self._closed.is_set():
                yield None
            if not self.t.node.is_up():
                return
            yield gpu.dmon_line(self.t.world, self.t.node, clock.now(), argv)
            n += 1
            next_t += 1.0


def is_stream_command(command: str) -> bool:
    """A command that keeps printing until stopped (docker logs -f, tail -F, dmon)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if argv[:2] == ["nvidia-smi", "dmon"] and "-c" not in argv:
        return True
    if argv[:2] == ["docker", "logs"] and any(a in ("-f", "--follow") for a in argv):
        return True
    return "tail" in argv and any(a in ("-f", "-F", "--follow") for a in argv)


def _tail_n(args: list[str], default: int) -> int:
    for i, a in enumerate(args):
        if a in ("-n", "--tail") and i + 1 < len(args):
            v = args[i + 1]
            return -1 if v == "all" else int(v.lstrip("+") or 0)
        m = re.fullmatch(r"--tail=(\S+)", a)
        if m:
            return -1 if m.group(1) == "all" else int(m.group(1))
    return default


def _follow_target(
    t: SimTransport, argv: list[str]
) -> tuple[TimedLog, int, Callable[[], bool]] | None:
    """(the log to follow, lines of history to show, is-the-writer-alive) for -f commands."""
    node = t.node
    if argv[:2] == ["docker", "logs"] and any(a in ("-f", "--follow") for a in argv):
        ref = next(
            (
                a
                for a in reversed(argv[2:])
                if not a.startswith("-") and not a.isdigit() and a != "all"
            ),
            "",
        )
        c = dk.find(node, ref)
        if c is None:
            return None
        return c.log, _tail_n(argv, -1), lambda: c.running
    if argv[:2] == ["docker", "exec"] and "tail" in argv:
        i = argv.index("tail")
        targs = argv[i + 1 :]
        if not any(a in ("-f", "-F", "--follow") for a in targs):
            return None
        ref = next((a for a in argv[2:i] if not a.startswith("-")), "")
        c = dk.find(node, ref)
        path = next((a for a in reversed(targs) if a.startswith("/")), "")
        if c is None or not path or not c.running:
            return None  # docker exec answers with its error, as on a real node
        f = c.files.get(path)
        if not isinstance(f, TimedLog):
            f = TimedLog()
            c.files[path] = f  # tail -F waits for the file to appear
        return f, _tail_n(targs, 10), lambda: c.running
    return None
