"""`ps -ww -eo pid=,args=` (filtered to Ray and the engines): who runs the serving stack on a
node, whoever started it — Ray's gcs_server (the head) and raylet (a member), and the
engine's API process with its model and port, read from its command line."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from spark_tui.engine_command import DEFAULT_PORT, engine_words, parse_command


@dataclass(frozen=True)
class EngineProcess:
    """A serving engine's API process, from its command line."""

    pid: int
    kind: str  # vllm | sglang
    model: str | None
    port: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class StackProcesses:
    ray_head: bool = False  # gcs_server runs here
    ray_member: bool = False  # a raylet runs here
    engine: EngineProcess | None = None


def _words(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError:  # ps drops the quoting: an unbalanced quote is not an error here
        return args.split()


def engine_from_args(pid: int, words: list[str]) -> EngineProcess | None:
    """The engine an argument vector starts, or None (the docker CLI, a log tail, a shell
    running a command string: the engine is its child, with its own line)."""
    if not words or os.path.basename(words[0]) in ("docker", "tail", "grep"):
        return None
    if os.path.basename(words[0]) in ("sh", "bash", "dash") and words[1:2] == ["-c"]:
        return None
    engine = engine_words(words)
    if engine is None:
        return None
    parsed = parse_command(engine)
    port = parsed.args.get("--port")
    try:
        port = int(port) if port is not None and port is not True else DEFAULT_PORT[parsed.engine]
    except (TypeError, ValueError):
        port = DEFAULT_PORT[parsed.engine]
    return EngineProcess(pid, parsed.engine, parsed.model, port, tuple(words))


_LINE = re.compile(r"^\s*(\d+)\s+(.*\S)\s*$")


def parse_processes(text: str) -> StackProcesses:
    """Ray's daemons and the first engine API process in the filtered process list."""
    head = member = False
    engine: EngineProcess | None = None
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, args = int(m.group(1)), m.group(2)
        words = _words(args)
        first = os.path.basename(words[0]) if words else ""
        if first == "gcs_server" or "/gcs_server" in (words[0] if words else ""):
            head = True
        elif first == "raylet":
            member = True
        elif engine is None:
            engine = engine_from_args(pid, words)
    return StackProcesses(head, member or head, engine)


_CONTAINER_ID = re.compile(r"docker[-/]([0-9a-f]{12,64})")
_UNIT = re.compile(r"/([A-Za-z0-9@._:-]+\.service)(?:/|$)")


@dataclass(frozen=True)
class EngineOutput:
    """Where an engine process's output goes (ENGINE_OUTPUT's answer)."""

    target: str | None  # a file path, or "pipe:[…]", "socket:[…]", "/dev/pts/3"
    container_id: str | None  # the docker container it runs in
    unit: str | None  # the systemd unit it runs under (outside docker)

    @property
    def file(self) -> str | None:
        """The file it writes to (not a pipe, a socket or a terminal)."""
        t = self.target
        return t if t and t.startswith("/") and not t.startswith(("/dev/", "/proc/")) else None


def parse_engine_output(text: str) -> EngineOutput:
    """`readlink /proc/PID/fd/1; cat /proc/PID/cgroup` → EngineOutput."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    target = lines[0] if lines and not lines[0].startswith(("0::", "1:", "2:")) else None
    cgroups = "\n".join(lines[1:] if target else lines)
    cid = _CONTAINER_ID.search(cgroups)
    unit = _UNIT.search(cgroups) if cid is None else None
    return EngineOutput(target, cid.group(1) if cid else None, unit.group(1) if unit else None)
