"""What sparkrun's own dry run launches per node, and what `spark-tui recipes render --json`
launches per node, as comparable records.

sparkrun's side is tests/data/sparkrun-registries/dryrun-sparkrun-<version>.json, written by
tools/sparkrun_dryrun.py running sparkrun's `run --dry-run` (see that directory's SOURCES.md);
spark-tui's side is parsed from the plan's `docker run` commands the way a shell reads them.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from tests.recipe_words import TESTS, same_value

REGISTRIES = TESTS / "data" / "sparkrun-registries"
DRYRUN = REGISTRIES / "dryrun-sparkrun-0.4.2.json"
DOCS = TESTS.parent / "docs" / "recipes.md"
ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "--tp": "--tp-size",
    "--pp": "--pp-size",
}
_SPARKRUN_HOST = re.compile(r"10\.77\.0\.(\d+)")
_OUR_HOST = re.compile(r"10\.10\.10\.(\d+)")


@dataclass
class Node:
    image: str
    model: str
    flags: dict[str, tuple[str, ...]]
    env: dict[str, str]
    executor: str
    extra: dict[str, Any] = field(default_factory=dict)


def _hosts(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: f"HOST{int(m.group(1)) - 1}", text)


def serve_flags(words: list[str]) -> tuple[str, dict[str, tuple[str, ...]]]:
    """(model, canonical flag -> values) of a serve command's words."""
    if words[:2] == ["vllm", "serve"]:
        model, rest = words[2], words[3:]
    else:
        start = next(i for i, w in enumerate(words) if w.startswith("-"))
        rest = words[start:]
        model = ""
    flags: dict[str, tuple[str, ...]] = {}
    i = 0
    while i < len(rest):
        word = rest[i]
        name, eq, value = word.partition("=")
        values: list[str] = [value] if eq else []
        i += 1
        while not eq and i < len(rest) and not rest[i].startswith("--") and rest[i] not in ALIASES:
            values.append(rest[i])
            i += 1
        name = ALIASES.get(name, name)
        name = "--" + name.lstrip("-").replace("_", "-")
        if name == "--model-path":
            model = values[0]
            continue
        flags[name] = tuple(values)
    return model, flags


def sparkrun_launch(key: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DRYRUN.read_text())["recipes"][key]
    return data


def sparkrun_nodes(entry: dict[str, Any]) -> list[Node]:
    out = []
    executor = {"vllm-distributed": "native", "sglang": "native"}.get(entry["runtime"], "ray")
    for node in entry["nodes"]:
        words = [_hosts(w, _SPARKRUN_HOST) for w in node["serve"]]
        model, flags = serve_flags(words)
        env = {**node["env"], **node.get("serve_env", {})}
        out.append(Node(node["image"], model, flags, env, executor))
    return out


def our_nodes(plan: dict[str, Any]) -> list[Node]:
    out = []
    for step in plan["steps"]:
        if step["id"] != "serve":
            continue
        words = shlex.split(_hosts(step["command"], _OUR_HOST))
        env: dict[str, str] = {}
        i = words.index("run") + 1
        image = ""
        while i < len(words):
            w = words[i]
            if w == "-e":
                k, _, v = words[i + 1].partition("=")
                env[k] = v
                i += 2
            elif w in (
                "--name",
                "-v",
                "--label",
                "--shm-size",
                "--entrypoint",
                "--ulimit",
                "--network",
                "--gpus",
                "--user",
                "--cap-add",
                "--device",
                "--security-opt",
                "--restart",
            ):
                i += 2
            elif w.startswith("-"):
                i += 1
            else:
                image = w
                break
        payload = words[words.index("-c", i) + 1]
        serve = shlex.split(payload.split(" > ", 1)[0])
        while serve and "=" in serve[0] and not serve[0].startswith("-"):
            k, _, v = serve.pop(0).partition("=")  # env VAR=… before the command
            env[k] = v
        if serve and serve[0] in ("env", "exec"):
            serve.pop(0)
        model, flags = serve_flags(serve)
        executor = (
            "ray"
            if "--distributed-executor-backend" in flags
            and flags["--distributed-executor-backend"] == ("ray",)
            else "native"
        )
        out.append(Node(image, model, flags, env, executor))
    return out


def differences(theirs: list[Node], ours: list[Node]) -> set[tuple[str, str]]:
    """(kind, name) of every way the two launches differ, over all nodes."""
    diff: set[tuple[str, str]] = set()
    if len(theirs) != len(ours):
        return {("nodes", f"{len(theirs)} != {len(ours)}")}
    for a, b in zip(theirs, ours, strict=True):
        if a.image != b.image:
            diff.add(("image", f"{a.image} != {b.image}"))
        if a.model != b.model:
            diff.add(("model", f"{a.model} != {b.model}"))
        if a.executor != b.executor:
            diff.add(("executor", f"{a.executor} != {b.executor}"))
        for flag in a.flags.keys() - b.flags.keys():
            diff.add(("flag only sparkrun passes", flag))
        for flag in b.flags.keys() - a.flags.keys():
            diff.add(("flag only spark-tui passes", flag))
        for flag in a.flags.keys() & b.flags.keys():
            va, vb = a.flags[flag], b.flags[flag]
            if len(va) != len(vb) or not all(same_value(x, y) for x, y in zip(va, vb, strict=True)):
                diff.add(("flag value", f"{flag} {' '.join(va)} != {' '.join(vb)}"))
        for var in a.env.keys() - b.env.keys():
            diff.add(("env only sparkrun sets", var))
        for var in b.env.keys() - a.env.keys():
            diff.add(("env only spark-tui sets", var))
        for var in a.env.keys() & b.env.keys():
            if a.env[var] != b.env[var]:
                diff.add(("env value", f"{var}={a.env[var]} != {b.env[var]}"))
    return diff


def deliberate() -> dict[tuple[str, str], str]:
    """docs/recipes.md's table of deliberate differences: (kind, name pattern) -> reason; a
    name cell may list several names or shell patterns, comma-separated."""
    text = DOCS.read_text()
    section = text.split("### Deliberate differences from sparkrun's dry run", 1)[1]
    section = section.split("\n#", 1)[0]
    out: dict[tuple[str, str], str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if (
            len(cells) == 3
            and cells[0] not in ("what differs", "---")
            and not set(cells[0]) <= {"-"}
        ):
            for name in cells[1].split(","):
                out[(cells[0], name.strip().strip("`"))] = cells[2]
    return out


def explained(diff: tuple[str, str], listed: dict[tuple[str, str], str]) -> bool:
    return any(kind == diff[0] and fnmatch.fnmatchcase(diff[1], pat) for kind, pat in listed)
