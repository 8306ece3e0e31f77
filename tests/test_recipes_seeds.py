"""Each working recipe, rendered, keeps every flag and env var of its seed's command.

The seed text is parsed from verbatim excerpts (tests/seed-commands/); the
rendered plan is parsed the way a shell would (shlex, then the `sh -c`
payloads again), so a quoting slip that merged or split words would fail here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.recipes.render import render_plan

SEEDS = Path(__file__).parent / "seed-commands"
_ENV = re.compile(r"(?<![\w-])([A-Z][A-Za-z0-9_]*)=([^\s\"'\\]+)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?:(=|[ \t]+)([^\s\\'\",()]+))?")
_VOLUME = re.compile(r"(?<![\w-])-v\s+(\S+?)[\"\s]")
# words of the seeds' own launchers that spark-tui replaces by its own steps
LAUNCHER_ENV = {"VLLM_SPARK_EXTRA_DOCKER_ARGS"}
LAUNCHER_FLAGS = {"--eth-if", "--ib-if", "--launch-script"}


def cluster(ips: tuple[str, ...], fabric_if: str) -> ClusterConfig:
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
    return ClusterConfig(nodes=nodes, source="test")


def seed_items(text: str) -> tuple[set[tuple[str, str]], dict[str, str | None], set[str]]:
    """(env pairs, flag -> value or None for bare, volumes) found in seed text."""
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    env = {(k, v.rstrip(".")) for k, v in _ENV.findall(body) if k not in LAUNCHER_ENV}
    flags: dict[str, str | None] = {}
    for flag, _sep, value in _FLAG.findall(body):
        value = value.rstrip(".")  # prose: "--load-format safetensors."
        flags[flag] = value if value and not value.startswith("-") else None
    return env, flags, set(_VOLUME.findall(body + " "))


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
    env: set[tuple[str, str]] = set()
    flags: dict[str, set[str]] = {}
    volumes: set[str] = set()
    for argv in plan_words(plan):
        for i, w in enumerate(argv):
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", w)
            if m and (i == 0 or argv[0] == "export" or argv[i - 1] == "-e"):
                env.add((m[1], m[2]))
            if w == "-v" and i + 1 < len(argv):
                volumes.add(argv[i + 1])
            if w.startswith("--"):
                name, eq, val = w.partition("=")
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                value = val if eq else (nxt if nxt and not nxt.startswith("-") else "")
                flags.setdefault(name, set()).add(value)
    return env, flags, volumes


CASES = {
    # recipe id: (seed excerpt, cluster IPs, fabric interface, --set)
    "minimax-m2.7-nvfp4-vllm-tp2": (
        "000-minimax-m2.7-nvfp4.txt",
        ("10.0.0.1", "10.0.0.2"),
        "bond0",
        (),
    ),
    "minimax-m2.7-mxfp4-vllm-tp2": (
        "001-minimax-m2.7-mxfp4.txt",
        ("10.10.10.1", "10.10.10.2"),
        "enP7s7",
        (),
    ),
    "minimax-m3-nvfp4-vllm-tp3": (
        "002-minimax-m3-nvfp4.txt",
        ("10.10.10.1", "10.10.10.2", "10.10.10.3"),
        "enp1s0f0np0",
        ("image=chthonic-vllm:local",),
    ),
    "minimax-m2.5-nvfp4-vllm-ep": (
        "003-minimax-m2.5-nvfp4-ep.txt",
        ("10.10.10.1", "10.10.10.2"),
        "enp1s0f0np0",
        (),
    ),
}


@pytest.mark.parametrize("recipe_id", sorted(CASES))
def test_seed_command_survives_rendering(recipe_id: str) -> None:
    excerpt, ips, fabric_if, sets = CASES[recipe_id]
    text = (SEEDS / excerpt).read_text()
    recipe = load_recipes().get(recipe_id)
    plan = render_plan(recipe, cluster(ips, fabric_if), sets=sets, stamp="T")
    env, flags, volumes = rendered_items(plan)
    seed_env, seed_flags, seed_volumes = seed_items(text)
    assert seed_env or seed_flags
    lost = [f"{k}={v}" for k, v in sorted(seed_env) if (k, v) not in env]
    for flag, value in sorted(seed_flags.items()):
        if flag in LAUNCHER_FLAGS:
            continue
        if value is not None:
            value = value.replace("<spark1-ip>", ips[0])
        if flag not in flags:
            lost.append(flag)
        elif value is not None and value not in flags[flag]:
            lost.append(f"{flag} {value} (rendered: {sorted(flags[flag])})")
    lost += [f"-v {v}" for v in seed_volumes if v not in volumes]
    assert not lost, f"{recipe_id} lost from seed {excerpt}: {lost}"


def test_seed_000_launcher_words_are_mapped() -> None:
    """launch-cluster.sh's --eth-if/--ib-if/-n become the fabric env of every node."""
    plan = render_plan(
        load_recipes().get("minimax-m2.7-nvfp4-vllm-tp2"),
        cluster(("10.0.0.1", "10.0.0.2"), "bond0"),
        stamp="T",
    )
    env, flags, _ = rendered_items(plan)
    assert {("NCCL_SOCKET_IFNAME", "bond0"), ("GLOO_SOCKET_IFNAME", "bond0")} <= env
    assert ("NCCL_IB_HCA", "rocep1s0f0,roceP2p1s0f0") in env
    assert {("VLLM_HOST_IP", "10.0.0.1"), ("VLLM_HOST_IP", "10.0.0.2")} <= env
    # cudagraph_mode:none of run_vllm.sh
    assert '{"cudagraph_mode":"NONE"}' in flags["--compilation-config"]


def test_seed_001_drops_caches_and_serves_inside_ray_head() -> None:
    plan = render_plan(
        load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2"),
        cluster(("10.10.10.1", "10.10.10.2"), "enP7s7"),
        stamp="T",
    )
    drops = [s for s in plan.steps if s.id == "drop-caches"]
    assert [s.node for s in drops] == ["spark1", "spark2"]
    assert all(s.command == "sync; sudo -n sysctl -w vm.drop_caches=3" for s in drops)
    serve = next(s for s in plan.steps if s.id == "serve")
    assert shlex.split(serve.command)[:5] == ["docker", "exec", "-d", "ray-head", "sh"]
    assert "ray://" not in plan.to_text()


def test_profiles_carry_the_seeds_figures() -> None:
    book = load_recipes()
    agentic = book.get("minimax-m2.7-nvfp4-vllm-tp2").with_profile("agentic")
    spec = agentic.serve.args["--speculative-config"]
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 5
    assert agentic.measured.tok_s == 48.3
    ep = book.get("minimax-m2.5-nvfp4-vllm-ep")
    graphs = ep.with_profile("cuda-graph")
    assert "--enforce-eager" not in graphs.serve.args and graphs.cuda_graphs
    assert "8 req" in ep.profiles["cuda-graph"].stability
    assert ep.profiles["cutlass"].measured.tok_s == 13.7
    assert ep.with_profile("cutlass").serve.env["VLLM_USE_FLASHINFER_MOE_FP4"] == "1"
