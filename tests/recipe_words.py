"""What a source command asks for, and what a rendered launch plan gives, as comparable sets.

Source commands are read independently of spark_tui.recipes.community: a verbatim text
excerpt (seeds, playbooks) by regular expressions, a community recipe file (eugr, sparkrun)
by filling its `{placeholders}` from `defaults` and splitting the command with shlex. The
rendered plan is parsed the way a shell would (shlex, then the `sh -c` payloads again), so
a quoting slip that merged or split words fails the comparison.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.plan import LaunchPlan

TESTS = Path(__file__).parent
SEEDS = TESTS / "seed-commands"
COMMANDS = TESTS / "data" / "commands"
COMMUNITY = TESTS / "data" / "community"
_ENV = re.compile(r"(?<![\w-])([A-Z][A-Za-z0-9_]*)=([^\s\"'\\]+)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*)(?:(=|[ \t]+)([^\s\\'\",()]+))?")
_VOLUME = re.compile(r"(?<![\w-])-v\s+(\S+?)[\"\s]")
# words of the sources' own launchers that spark-tui replaces by its own steps
LAUNCHER_ENV = {"VLLM_SPARK_EXTRA_DOCKER_ARGS", "VLLM_IMAGE"}
LAUNCHER_FLAGS = {"--eth-if", "--ib-if", "--launch-script", "--head", "--worker"}
# the spellings spark-tui keeps (the facts and walls test the long vLLM names)
ALIASES = {
    "vllm": {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size"},
    "sglang": {"--tp": "--tp-size", "--pp": "--pp-size"},
}


def canonical(flag: str, engine: str = "vllm") -> str:
    flag = ALIASES.get(engine, {}).get(flag, flag)
    if flag.startswith("--"):
        name, dot, rest = flag[2:].partition(".")
        flag = "--" + name.replace("_", "-") + dot + rest
    return flag


def same_value(a: str, b: str) -> bool:
    """Equal as text, or as numbers ('0.70' is 0.7)."""
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def cluster(
    ips: tuple[str, ...], fabric_if: str, models_dir: str = "~/.cache/huggingface"
) -> ClusterConfig:
    nodes = tuple(
        NodeConfig(
            name=f"spark{i + 1}",
            host=f"spark{i + 1}",
            role="head" if i == 0 else "worker",
            fabric_if=fabric_if,
            fabric_ip=ip,
        )
        for i, ip in enumerate(ips)
    )
    return ClusterConfig(nodes=nodes, source="test", models_dir=models_dir)


def excerpt_items(
    text: str, fill: dict[str, str] | None = None
) -> tuple[set[tuple[str, str]], dict[str, str | None], set[str]]:
    """(env pairs, flag -> value or None for bare, volumes) found in excerpt text; `fill`
    replaces the excerpt's shell variables ($VLLM_HOST_IP…) first."""
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    for var, value in sorted((fill or {}).items(), key=lambda kv: -len(kv[0])):
        body = body.replace(var, value)
    env = {(k, v.rstrip(".")) for k, v in _ENV.findall(body) if k not in LAUNCHER_ENV}
    flags: dict[str, str | None] = {}
    for flag, _sep, value in _FLAG.findall(body):
        value = value.rstrip(".")  # prose: "--load-format safetensors."
        flags[canonical(flag)] = value if value and not value.startswith("-") else None
    return env, flags, set(_VOLUME.findall(body + " "))


def community_items(path: Path) -> tuple[set[tuple[str, str]], dict[str, str | None], str]:
    """(env pairs, flag -> first value or None, model) of an eugr or sparkrun recipe file."""
    data = yaml.safe_load(path.read_text())
    values: dict[str, Any] = {k: v for k, v in (data.get("defaults") or {}).items()}
    values.setdefault("model", data.get("model"))
    command = data["command"]
    eugr = "runtime" not in data  # eugr's files have no runtime, whatever their version
    if eugr:  # run-recipe.py fills it with Python's str.format: doubled braces are braces
        command = command.format(**{k: _text(v) for k, v in values.items()})
    else:
        command = re.sub(r"\{(\w+)\}", lambda m: _text(values[m[1]]), command)
    words = shlex.split(re.sub(r"\\[ \t]*\n", " ", command), comments=True)
    engine = "sglang" if "sglang" in " ".join(words[:3]) else "vllm"
    flags: dict[str, str | None] = {}
    model = words[2] if words[:2] == ["vllm", "serve"] and not words[2].startswith("-") else ""
    for i, w in enumerate(words):
        if w.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", w):
            name, eq, val = w.partition("=")
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if eq and name.startswith("--"):
                flags[canonical(name, engine)] = val
            else:
                plain = nxt and (not nxt.startswith("-") or re.fullmatch(r"-?\d+(\.\d+)?", nxt))
                flags[canonical(w, engine)] = nxt if plain else None
    for flag in ("--model", "--model-path"):
        if flags.get(flag):
            model = str(flags.pop(flag))
    if eugr:  # run-recipe.py strips it (no-Ray multi-node, or solo)
        flags.pop("--distributed-executor-backend", None)
    env = {(str(k), _text(v)) for k, v in (data.get("env") or {}).items()}
    return env, flags, model


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _split(text: str) -> list[list[str]]:
    """Shell words, one list per simple command (split at ; && || |)."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    out: list[list[str]] = [[]]
    for tok in lex:
        if tok in (";", "&&", "||", "|", "&"):
            out.append([])
        else:
            out[-1].append(tok)
    return [argv for argv in out if argv]


def plan_words(plan: LaunchPlan) -> list[list[str]]:
    """Every command of the plan as argv lists, `sh -c` payloads split again."""
    out: list[list[str]] = []
    for step in plan.steps:
        for argv in _split(step.command):
            out.append(argv)
            if "-c" in argv:
                out += _split(argv[argv.index("-c") + 1])
    return out


def rendered_items(plan: LaunchPlan) -> tuple[set[tuple[str, str]], dict[str, set[str]], set[str]]:
    """(env pairs, flag -> the words after it, volumes) of every command of a plan."""
    env: set[tuple[str, str]] = set()
    flags: dict[str, set[str]] = {}
    volumes: set[str] = set()
    for argv in plan_words(plan):
        for i, w in enumerate(argv):
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", w, re.S)
            if m and (i == 0 or argv[0] == "export" or argv[i - 1] == "-e"):
                env.add((m[1], m[2]))
            if w == "-v" and i + 1 < len(argv):
                volumes.add(argv[i + 1])
            if w.startswith("-"):
                name, eq, val = w.partition("=")
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                value = val if eq else (nxt if nxt and not nxt.startswith("-") else "")
                flags.setdefault(name, set()).add(value)
    return env, flags, volumes


def lost_items(
    plan: LaunchPlan,
    env: set[tuple[str, str]],
    flags: dict[str, str | None],
    volumes: set[str] = frozenset(),  # type: ignore[assignment]
    model: str = "",
) -> list[str]:
    """What of a source command the rendered plan does not carry."""
    r_env, r_flags, r_volumes = rendered_items(plan)
    lost = [f"{k}={v}" for k, v in sorted(env) if (k, v) not in r_env]
    for flag, value in sorted(flags.items()):
        if flag in LAUNCHER_FLAGS:
            continue
        if flag not in r_flags:
            lost.append(flag)
        elif value is not None and not any(same_value(value, r) for r in r_flags[flag]):
            lost.append(f"{flag} {value} (rendered: {sorted(r_flags[flag])})")
    lost += [f"-v {v}" for v in sorted(volumes) if v not in r_volumes]
    if model and not any(model in argv for argv in plan_words(plan)):
        lost.append(f"model {model}")
    return lost
