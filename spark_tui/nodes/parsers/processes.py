"""`id -u; ps -ww -eo pid=,uid=,args=` (filtered to Ray and the engines): who runs the serving stack on a
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


INTERPRETERS = ("sh", "bash", "dash")  # and python*: what runs an engine's entry script


def _interpreter(word: str) -> bool:
    base = os.path.basename(word)
    return base.startswith("python") or base in INTERPRETERS


def starts_engine(words: list[str]) -> bool:
    """The argument vector runs an engine itself: its program is the engine's entry point
    (`vllm serve`, `sglang …`), or an interpreter running it (`python3 /usr/bin/vllm serve`,
    `python3 -m vllm.entrypoints.openai.api_server`) — not an engine's name anywhere in it
    (`sleep 1 vllm serve`, `bash -c 'vllm serve …'`: the engine would be a child, own line)."""
    if not words:
        return False
    if engine_words(words[:1] + words[1:3]) is not None and not _interpreter(words[0]):
        return True  # vllm serve …
    if _interpreter(words[0]) and len(words) > 1:
        if words[1] == "-m":
            return engine_words(words[:3]) is not None
        return engine_words(words[1:3]) is not None
    return False


def engine_from_args(pid: int, words: list[str]) -> EngineProcess | None:
    """The engine an argument vector starts, or None (the docker CLI, a log tail, a shell
    running a command string: the engine is its child, with its own line)."""
    if not starts_engine(words):
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


_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(.*\S)\s*$")


def parse_processes(text: str) -> StackProcesses:
    """Ray's daemons and the first engine API process in the filtered process list
    (`id -u` then `ps -ww -eo pid=,uid=,args=`). Only a process of root or of the user we
    are on the node is believed: another user's process that calls itself `vllm serve`
    is not the engine (attaching to it would follow files and run commands it chose)."""
    head = member = False
    engine: EngineProcess | None = None
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    own = {0, int(first)} if first.isdigit() else {0}
    for line in lines[1:] if first.isdigit() else lines:
        m = _LINE.match(line)
        if not m or int(m.group(2)) not in own:
            continue
        pid, args = int(m.group(1)), m.group(3)
        words = _words(args)
        first = os.path.basename(words[0]) if words else ""
        if first == "gcs_server" or "/gcs_server" in (words[0] if words else ""):
            head = True
        elif first == "raylet":
            member = True
        elif engine is None:
            engine = engine_from_args(pid, words)
    return StackProcesses(head, member or head, engine)


# the whole cgroup line of a docker container's process (v2 under systemd, v2 cgroupfs,
# v1), and of a system service: anchored, so nothing a user names elsewhere can pass for one
_CONTAINER_ID = re.compile(
    r"^\d+:[^:\n]*:/(?:system\.slice/docker-([0-9a-f]{64})\.scope|docker/([0-9a-f]{64}))$", re.M
)
_UNIT = re.compile(r"^\d+:[^:\n]*:/system\.slice/([A-Za-z0-9@._:-]+\.service)$", re.M)
EXE_MARK = "@@spark-tui exe"
FD_MARK = "@@spark-tui fd1"
DELETED = " (deleted)"


@dataclass(frozen=True)
class EngineOutput:
    """Where an engine process's output goes (ENGINE_OUTPUT's answer)."""

    target: str | None  # a file path, or "pipe:[…]", "socket:[…]", "/dev/pts/3"
    container_id: str | None  # the docker container it runs in
    unit: str | None  # the systemd unit it runs under (outside docker)
    exe: str | None = None  # its executable, as the kernel names it

    @property
    def file(self) -> str | None:
        """The file it writes to (not a pipe, a socket, a terminal, nor one deleted since:
        a name ending in " (deleted)" may be anyone's file now)."""
        t = self.target
        if not t or not t.startswith("/") or t.startswith(("/dev/", "/proc/")):
            return None
        return None if t.endswith(DELETED) or "\n" in t else t

    @property
    def real_engine(self) -> bool:
        """Its executable is an engine's or an interpreter's (not known: not refused)."""
        return (
            self.exe is None
            or _interpreter(self.exe)
            or (os.path.basename(self.exe) in ("vllm", "sglang"))
        )


def parse_engine_output(text: str) -> EngineOutput:
    """ENGINE_OUTPUT's answer → EngineOutput: the cgroup lines (the kernel's, first), then
    the executable and the fd's target, each after its marker and taken whole."""
    cgroups, _, rest = text.partition(f"\n{EXE_MARK}\n")
    if not _:
        cgroups, _, rest = text.partition(f"{EXE_MARK}\n")
    exe, _, target = rest.partition(f"\n{FD_MARK}\n")
    if not _ and rest.startswith(f"{FD_MARK}\n"):
        exe, target = "", rest[len(FD_MARK) + 1 :]
    target = target.removesuffix("\n")
    cid = _CONTAINER_ID.search(cgroups)
    unit = _UNIT.search(cgroups) if cid is None else None
    return EngineOutput(
        target or None,
        (cid.group(1) or cid.group(2)) if cid else None,
        unit.group(1) if unit else None,
        exe.strip() or None,
    )


def parse_engine_argv(text: str) -> list[str] | None:
    """ENGINE_ARGV's answer → the engine's argument vector, word for word; [] when the
    process is not ours to believe (another owner, or no longer an engine: its pid was
    reused); None when the node did not answer in that form (the words ps showed stand)."""
    import base64
    import binascii

    lines = text.split("\n")
    if len(lines) < 3 or not lines[0].strip().isdigit() or not lines[1].strip().isdigit():
        return None
    if int(lines[1]) not in {0, int(lines[0])}:
        return []
    try:
        raw = base64.b64decode(lines[2].strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    words = [w.decode("utf-8", errors="replace") for w in raw.split(b"\0")]
    if words and words[-1] == "":
        words.pop()
    return words if starts_engine(words) else []
