"""LocalTransport: this machine, through subprocess (`host: local`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from spark_tui.nodes.transport import (
    CommandResult,
    LineSplitter,
    LineStream,
    Reachability,
    Transport,
)


class _ProcessLines(LineStream):
    def __init__(self, command: str, env: dict[str, str] | None) -> None:
        self._proc = subprocess.Popen(
            ["sh", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._closed = threading.Event()
        self._ended = False
        self._lines = LineSplitter()
        out = self._proc.stdout
        assert out is not None
        self._fd = out.fileno()
        os.set_blocking(self._fd, False)  # read_lines never waits

    def fileno(self) -> int | None:
        return None if self._closed.is_set() else self._fd

    def read_lines(self) -> list[str] | None:
        if self._closed.is_set() or self._ended:
            return None
        try:
            data = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return []
        except (OSError, ValueError):  # closed under us
            data = b""
        if not data:
            self._ended = True
            last = self._lines.flush()
            return [last] if last else None
        return self._lines.feed(data)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
        if self._proc.stdout:
            self._proc.stdout.close()


class LocalTransport(Transport):
    """Runs commands with `sh -c` on this machine. `env` replaces the environment
    (tests use it to put shim tools first on PATH)."""

    def __init__(self, name: str = "local", env: dict[str, str] | None = None) -> None:
        self.name = name
        self._env = env
        self._since = time.time()

    def run(self, command: str, timeout: float = 30.0, input: bytes | None = None) -> CommandResult:
        start = time.monotonic()
        proc = subprocess.Popen(
            ["sh", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            timed_out = True
        return CommandResult(
            command=command,
            exit_code=proc.returncode if not timed_out else -9,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def stream(self, command: str) -> LineStream:
        return _ProcessLines(command, self._env)

    def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        with Path(path).open("rb") as fh:
            return fh.read(max_bytes)

    @property
    def state(self) -> Reachability:
        return Reachability(True, self._since)
