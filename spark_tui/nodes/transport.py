"""One way to run a command on a node, whatever the node is.

Implementations: LocalTransport (subprocess, host: local), SSHTransport
(paramiko, one connection per node), SimTransport (spark_tui.sim: a simulated
GB10 node that answers the same commands). One test suite runs over all of
them (tests/test_transport_contract.py).

Every command is one POSIX `sh` command line, already quoted by
spark_tui.shell. A transport never raises for a dropped node except
NodeUnreachable, and records the reachability for the UI in `state`.
"""

from __future__ import annotations

import abc
import select
import time
from collections.abc import Iterator
from dataclasses import dataclass

from spark_tui.errors import SparkTuiError
from spark_tui.untrusted import clean


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: exit code, output (text, decoded leniently), seconds taken.

    The output is what a node says: it is cleaned here, where it enters (spark_tui.untrusted),
    whichever transport made the result, so nothing read from it can steer a terminal."""

    command: str
    exit_code: int
    stdout: str
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "stdout", clean(self.stdout))
        object.__setattr__(self, "stderr", clean(self.stderr))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, lines: int = 20) -> str:
        """The last lines of stdout and stderr, for the journal and error messages."""
        text = (self.stdout + ("\n" + self.stderr if self.stderr else "")).strip("\n")
        return "\n".join(text.splitlines()[-lines:])


class NodeUnreachable(SparkTuiError):
    """The node cannot be reached now (the transport keeps retrying in the background)."""

    def __init__(self, node: str, reason: str, since: float | None = None) -> None:
        self.node = node
        self.reason = reason = clean(reason, keep_newlines=False)  # a peer's banner, an error
        self.since = since
        super().__init__(f"{node}: unreachable ({reason})")


@dataclass(frozen=True)
class Reachability:
    """What the UI shows: 'reachable', or 'unreachable since 12:03:14, retrying'."""

    reachable: bool
    since: float  # when this state began (clock seconds)
    reason: str = ""
    retrying: bool = False


MAX_LINE = 1 << 20  # bytes of one line kept; the rest is counted, not held


class LineSplitter:
    """Bytes as they arrive, cut into lines: a newline is searched for only in the new
    bytes (never the pending ones again), and a line longer than MAX_LINE keeps its first
    MAX_LINE bytes and says how many more it had. So a 100 MB line without a newline
    takes linear time and 1 MiB of memory."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []
        self._held = 0
        self._cut = 0

    def feed(self, data: bytes) -> list[str]:
        """The lines `data` completes (without their newline or a trailing \\r)."""
        out: list[str] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            self._hold(data[start:nl])
            out.append(self._line())
            start = nl + 1
        if start < len(data):
            self._hold(data[start:] if start else data)
        return out

    def flush(self) -> str | None:
        """The last line when the output ended without a newline (None: nothing pending)."""
        if not self._parts and not self._cut:
            return None
        return self._line()

    def _hold(self, chunk: bytes) -> None:
        room = self.max_line - self._held
        if room >= len(chunk):
            self._parts.append(chunk)
            self._held += len(chunk)
            return
        if room > 0:
            self._parts.append(chunk[:room])
            self._held += room
        self._cut += len(chunk) - max(room, 0)

    def _line(self) -> str:
        raw = b"".join(self._parts)
        cut = self._cut
        self._parts, self._held, self._cut = [], 0, 0
        text = raw.decode("utf-8", errors="replace")
        if cut:
            return f"{text} [line cut: {cut} more bytes]"
        return text[:-1] if text.endswith("\r") else text


STREAM_POLL_S = 0.02  # real seconds between looks at a stream that has no descriptor to wait on


class LineStream(abc.ABC):
    """Output of a long-running command (dmon, a log tail), line by line.

    Read without blocking (`read_lines`), so one thread can follow any number of streams
    (spark_tui.nodes.pump); `fileno` says when to look again. Iterating waits for lines."""

    @abc.abstractmethod
    def read_lines(self) -> list[str] | None:
        """The lines (without their newline) that arrived since the last call, without
        waiting ([] when none yet); None once the command ended or close() was called."""

    def fileno(self) -> int | None:
        """A descriptor that turns readable when `read_lines` may have more (select/epoll);
        None: look again every STREAM_POLL_S."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the command (idempotent)."""

    def __iter__(self) -> Iterator[str]:
        """Lines as they arrive; ends when the command ends or close() is called."""
        while True:
            lines = self.read_lines()
            if lines is None:
                return
            if lines:
                yield from lines
                continue
            fd = self.fileno()
            if fd is None:
                time.sleep(STREAM_POLL_S)
                continue
            try:
                select.select([fd], [], [], 0.2)
            except (OSError, ValueError):  # closed under us: read_lines says so
                time.sleep(STREAM_POLL_S)

    def __enter__(self) -> LineStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transport(abc.ABC):
    """A connection to one node."""

    #: the node's name, as in cluster.yaml
    name: str

    @abc.abstractmethod
    def run(self, command: str, timeout: float = 30.0, input: bytes | None = None) -> CommandResult:
        """Run one shell command line and wait for it, at most `timeout` seconds
        (then the result has timed_out=True and the command is killed).

        Raises NodeUnreachable when the node cannot be reached; a command that
        runs and fails is a CommandResult with its exit code, never an exception.
        """

    @abc.abstractmethod
    def stream(self, command: str) -> LineStream:
        """Start a long-running command and return its output as a LineStream.
        Raises NodeUnreachable when the node cannot be reached."""

    @abc.abstractmethod
    def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        """The first `max_bytes` bytes of a file on the node.
        Raises FileNotFoundError when it does not exist, NodeUnreachable when the node is gone."""

    @property
    @abc.abstractmethod
    def state(self) -> Reachability:
        """Reachability now (never blocks)."""

    def connect(self) -> None:  # noqa: B027 - a transport with nothing to open checks nothing
        """Open the connection now (host key checked); raises NodeUnreachable. Before the
        first command of a change, every node it touches is connected this way."""

    def close(self) -> None:  # noqa: B027 - optional for transports that hold nothing
        """Release the connection."""
