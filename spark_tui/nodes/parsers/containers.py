"""`docker ps -a --format '{{json .}}'` (one JSON object a line) → Container."""

from __future__ import annotations

import json

from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.state import Container
from spark_tui.untrusted import clean

DOCKER_UNREACHABLE = (
    "cannot connect to the docker daemon",
    "permission denied while trying to connect",
    "is the docker daemon running",
)


def _state(obj: dict) -> str:
    state = obj.get("State")
    if isinstance(state, str) and state:
        return state.lower()
    # docker before 20.10 has no State field: read it from Status ("Up 3 minutes")
    status = str(obj.get("Status", "")).lower()
    for prefix, name in (
        ("up", "running"),
        ("exited", "exited"),
        ("restarting", "restarting"),
        ("created", "created"),
        ("paused", "paused"),
        ("dead", "dead"),
        ("removal", "removing"),
    ):
        if status.startswith(prefix):
            return "paused" if name == "running" and "(paused)" in status else name
    return "unknown"


def parse_docker_ps(text: str) -> tuple[Container, ...] | Unparseable:
    """One Container per JSON line; docker's own errors are Unparseable with docker's words."""
    low = text.lower()
    if any(marker in low for marker in DOCKER_UNREACHABLE):
        return Unparseable("docker: " + text.strip().splitlines()[0][:200])
    containers: list[Container] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return Unparseable(f"not a JSON line: {line[:120]!r}")
        if not isinstance(obj, dict):
            return Unparseable(f"not a JSON object: {line[:120]!r}")
        # JSON's \u001b escapes decode to the controls the transport cleaned from the text
        names = clean(str(obj.get("Names", "")), keep_newlines=False)
        containers.append(
            Container(
                id=clean(str(obj.get("ID", "")), keep_newlines=False),
                name=names.split(",")[0],
                image=clean(str(obj.get("Image", "")), keep_newlines=False),
                state=clean(_state(obj), keep_newlines=False),
                status=clean(str(obj.get("Status", "")), keep_newlines=False),
            )
        )
    return tuple(containers)


def parse_restarts(text: str) -> dict[str, tuple[int, str]] | Unparseable:
    """Container name → (RestartCount, restart policy) from
    `docker inspect --format '{{.Name}} {{.RestartCount}} {{.HostConfig.RestartPolicy.Name}}'`
    (docker prints the name with a leading '/'; an empty policy is docker's "no")."""
    low = text.lower()
    if any(marker in low for marker in DOCKER_UNREACHABLE):
        return Unparseable("docker: " + text.strip().splitlines()[0][:200])
    out: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if len(words) not in (2, 3) or not words[1].isdigit() or len(words[1]) > 9:
            return Unparseable(f"not 'NAME COUNT POLICY': {line.strip()[:120]!r}")
        policy = words[2] if len(words) == 3 else "no"
        out[words[0].lstrip("/")] = (int(words[1]), policy)
    return out
