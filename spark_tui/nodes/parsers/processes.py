"""`ps -ww -eo pid=,args=` (filtered to Ray and the engines): who runs the serving stack on a
node, whoever started it — Ray's gcs_server (the head) and raylet (a member), and the
engine's API process with its model and port, read from its command line."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

_DEFAULT_PORT = {"vllm": 8000, "sglang": 30000}


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


def _flag(words: list[str], *names: str) -> str | None:
    for i, w in enumerate(words):
        for n in names:
            if w == n and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(n + "="):
                return w.split("=", 1)[1]
    return None


def engine_from_args(pid: int, words: list[str]) -> EngineProcess | None:
    """The engine an argument vector starts, or None (the docker CLI, a log tail, …)."""
    if not words or os.path.basename(words[0]) in ("docker", "tail", "grep", "sh", "bash"):
        return None
    kind = model = None
    for i, w in enumerate(words):
        base = os.path.basename(w)
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            kind = "vllm"
            rest = words[i + 2 :]
            model = rest[0] if rest and not rest[0].startswith("-") else None
            break
        if w in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
            kind = "vllm"
            break
        if w == "sglang.launch_server":
            kind = "sglang"
            break
    if kind is None:
        return None
    model = model or _flag(words, "--model", "--model-path")
    port_text = _flag(words, "--port")
    try:
        port = int(port_text) if port_text else _DEFAULT_PORT[kind]
    except ValueError:
        port = _DEFAULT_PORT[kind]
    return EngineProcess(pid, kind, model, port, tuple(words))


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
