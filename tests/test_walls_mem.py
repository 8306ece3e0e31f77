"""Memory and architecture walls: causes choose the right first fix, metric/check rules fire on
the readings they describe (and not on near misses), fixes keep the seeds' exact flags.

Log examples of these walls are checked by tests/test_walls_examples.py; here are the parts that
are decided by facts (spark_tui/facts.py names), plus regex edges no example file shows.
"""

from __future__ import annotations

import pytest

from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.schema import ReadingRule, Wall
from spark_tui.recipes.model import ModelSpec, Recipe, ServeSpec
from spark_tui.remedy.render import preview_lines
from tests.wall_helpers import apply_fix

KB = load_knowledge(use_user=False)
MATCHER = Matcher(KB)

DROP_CACHES = "sysctl -w vm.drop_caches=3"  # after `sync`, as root


def wall(wall_id: str) -> Wall:
    return KB.get(wall_id)


def first_fix(wall_id: str, facts: dict[str, object]) -> str:
    return wall(wall_id).fixes_for(facts)[0].id


def cause(wall_id: str, facts: dict[str, object]) -> str | None:
    chosen = wall(wall_id).choose_cause(facts)
    return chosen.id if chosen else None


def fires(rule: ReadingRule, facts: dict[str, object]) -> bool:
    return all(c.holds(facts) for c in rule.when)


def any_rule_fires(wall_id: str, facts: dict[str, object]) -> bool:
    return any(fires(r, facts) for r in wall(wall_id).rules)


def walls_in(*lines: str) -> set[str]:
    return {h.wall.id for h in MATCHER.scan_lines("test.log", lines)}


# ------------------------------------------------------------------ causes


@pytest.mark.parametrize("wall_id", ["vllm-free-memory-low", "sglang-memory-unbalanced"])
@pytest.mark.parametrize(
    ("facts", "expected_cause", "expected_fix"),
    [
        # Seed 001: ~29 GB of the last run still cached on a node.
        (
            {"memory.cached_gib": 29.0, "memory.unexplained_gib": 1.0},
            "page-cache",
            "drop-page-caches",
        ),
        # Seed 000: 33 GB leaked by a crashed container, nothing cached, no GPU process.
        (
            {"memory.cached_gib": 1.5, "memory.unexplained_gib": 33.8, "memory.gpu_process_gib": 0},
            "leaked-memory",
            "reboot-leaking-node",
        ),
        # Seed 000: parakeet-asr and csm-tts hold ~8 GB per node.
        (
            {"memory.cached_gib": 2.0, "memory.unexplained_gib": 1.0, "memory.gpu_process_gib": 8},
            "other-services",
            None,  # engine-specific, checked below
        ),
    ],
)
def test_memory_startup_walls_choose_cause_from_readings(
    wall_id: str, facts: dict[str, object], expected_cause: str, expected_fix: str | None
) -> None:
    assert cause(wall_id, facts) == expected_cause
    if expected_fix:
        assert first_fix(wall_id, facts) == expected_fix


def test_other_services_lower_the_engines_own_memory_fraction() -> None:
    facts = {"memory.cached_gib": 2.0, "memory.unexplained_gib": 1.0, "memory.gpu_process_gib": 8}
    vllm_fix = wall("vllm-free-memory-low").fixes_for(facts)[0]
    assert vllm_fix.id == "lower-gpu-memory-utilization"
    assert vllm_fix.actions[0].params["set_args"] == {"--gpu-memory-utilization": 0.82}
    sglang_fix = wall("sglang-memory-unbalanced").fixes_for(facts)[0]
    assert sglang_fix.actions[0].params["set_args"] == {"--mem-fraction-static": 0.75}


def test_cache_wins_over_leak_because_dropping_is_safe_and_goes_first() -> None:
    facts = {"memory.cached_gib": 25.0, "memory.unexplained_gib": 30.0}
    assert cause("vllm-free-memory-low", facts) == "page-cache"


@pytest.mark.parametrize("wall_id", ["vllm-free-memory-low", "sglang-memory-unbalanced"])
def test_near_misses_choose_no_cause_and_keep_the_default_order(wall_id: str) -> None:
    facts = {
        "memory.cached_gib": 9.9,
        "memory.unexplained_gib": 19.9,
        "memory.gpu_process_gib": 3.9,
    }
    assert cause(wall_id, facts) is None
    assert [f.id for f in wall(wall_id).fixes_for(facts)] == [f.id for f in wall(wall_id).fixes]
    assert wall(wall_id).fixes[0].id == "drop-page-caches"


def test_unknown_readings_are_never_evidence() -> None:
    assert cause("vllm-free-memory-low", {}) is None


@pytest.mark.parametrize(
    ("facts", "expected_cause", "expected_fix"),
    [
        (
            {"recipe.executor": "ray", "memory.cached_gib": 30.0},
            "ray-object-store",
            "cap-ray-object-store",
        ),
        (
            {
                "recipe.executor": "ray",
                "recipe.ray.args.--object-store-memory": 1073741824,
                "memory.cached_gib": 30.0,
            },
            "page-cache",
            "drop-page-caches",
        ),
        ({"recipe.executor": "mp", "memory.cached_gib": 2.0}, "overcommitted", None),
    ],
)
def test_nvrm_oom_causes(
    facts: dict[str, object], expected_cause: str, expected_fix: str | None
) -> None:
    assert cause("nvrm-oom", facts) == expected_cause
    fix = wall("nvrm-oom").fixes_for(facts)[0]
    assert fix.id == (expected_fix or "lower-gpu-memory-utilization")


def test_nvrm_oom_object_store_fix_patches_and_restarts_ray_with_the_seed_value() -> None:
    fix = wall("nvrm-oom").fix("cap-ray-object-store")
    assert fix is not None and fix.risk == "disruptive"
    patch, restart = fix.actions
    assert (patch.type, patch.params["target"]) == ("patch-recipe", "ray")
    assert patch.params["set_args"] == {"--object-store-memory": 1073741824}
    assert restart.type == "restart-ray"
    assert restart.params["args"] == {"--object-store-memory": 1073741824}
    assert not fix.verify[0].holds({})
    assert fix.verify[0].holds({"recipe.ray.args.--object-store-memory": 1073741824})
    assert "ray start --object-store-memory 1073741824" in preview_lines(fix)


@pytest.mark.parametrize(
    ("engine", "expected"),
    [("sglang", "lower-mem-fraction-static"), ("vllm", "lower-gpu-memory-utilization")],
)
def test_cuda_oom_fixes_follow_the_engine(engine: str, expected: str) -> None:
    assert first_fix("cuda-oom", {"recipe.engine": engine}) == expected


def test_cuda_oom_keeps_seed_001_limits() -> None:
    fix = wall("cuda-oom").fix("cap-context-and-batch")
    assert fix is not None
    assert fix.actions[0].params["set_args"] == {
        "--max-model-len": 131072,
        "--max-num-batched-tokens": 8192,
        "--max-num-seqs": 128,
    }
    kv = wall("cuda-oom").fix("fp8-kv-cache")
    assert kv is not None and kv.actions[0].params["set_args"] == {"--kv-cache-dtype": "fp8"}
    assert kv.verify[0].holds({"recipe.serve_args.--kv-cache-dtype": "fp8"})


def test_ray_monitor_kill_disables_the_monitor_unless_memory_really_ran_out() -> None:
    assert first_fix("ray-memory-monitor-kill", {"kernel.nvrm_oom_count": 0}) == (
        "disable-ray-memory-monitor"
    )
    assert first_fix("ray-memory-monitor-kill", {"kernel.nvrm_oom_count": 12}) == (
        "raise-ray-memory-threshold"
    )
    fix = wall("ray-memory-monitor-kill").fix("disable-ray-memory-monitor")
    assert fix is not None
    patch, restart = fix.actions
    assert patch.params == {"target": "ray", "set_env": {"RAY_memory_monitor_refresh_ms": "0"}}
    assert restart.params["env"] == {"RAY_memory_monitor_refresh_ms": "0"}
    assert fix.verify[0].holds({"recipe.ray.env.RAY_memory_monitor_refresh_ms": "0"})
    assert fix.verify[0].holds({"recipe.ray.env.RAY_memory_monitor_refresh_ms": 0})
    assert not fix.verify[0].holds({"recipe.ray.env.RAY_memory_monitor_refresh_ms": "250"})


def test_asymmetry_fixes_follow_the_engine() -> None:
    sglang = [f.id for f in wall("node-memory-asymmetry").fixes_for({"recipe.engine": "sglang"})]
    assert sglang[:3] == ["drop-page-caches", "lower-mem-fraction-static", "raise-dist-timeout"]
    vllm = [f.id for f in wall("node-memory-asymmetry").fixes_for({"recipe.engine": "vllm"})]
    assert vllm[:2] == ["drop-page-caches", "lower-gpu-memory-utilization"]
    timeout = wall("node-memory-asymmetry").fix("raise-dist-timeout")
    assert timeout is not None
    assert timeout.actions[0].params["set_args"] == {"--dist-timeout": 1800}


@pytest.mark.parametrize(
    ("engine", "expected"), [("sglang", "triton-fp8-gemm"), ("vllm", "vllm-disable-deep-gemm")]
)
def test_deepgemm_fallback_follows_the_engine(engine: str, expected: str) -> None:
    fixes = [f.id for f in wall("deepgemm-unsupported-arch").fixes_for({"recipe.engine": engine})]
    assert fixes[:2] == [expected, "switch-to-nvfp4-marlin"]


def test_jit_kernel_fix_sets_all_four_seed_switches() -> None:
    fix = wall("jit-kernel-unsupported-arch").fixes[0]
    assert fix.actions[0].params["set_env"] == {
        "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH": "1",
        "SGLANG_TOPK_TRANSFORM_512_TORCH": "1",
        "SGLANG_OPT_USE_TILELANG_MHC_PRE": "0",
        "SGLANG_OPT_USE_TILELANG_MHC_POST": "0",
    }
    done = {f"recipe.env.{k}": v for k, v in fix.actions[0].params["set_env"].items()}
    assert all(c.holds(done) for c in fix.verify)
    assert not all(
        c.holds({**done, "recipe.env.SGLANG_OPT_USE_TILELANG_MHC_POST": "1"}) for c in fix.verify
    )


def test_drop_caches_is_the_seed_command_as_root_on_every_node() -> None:
    for wall_id in (
        "vllm-free-memory-low",
        "sglang-memory-unbalanced",
        "nvrm-oom",
        "page-cache-hog",
        "node-memory-asymmetry",
    ):
        fix = wall(wall_id).fix("drop-page-caches")
        assert fix is not None and fix.root and fix.risk == "safe", wall_id
        sync, drop = fix.actions
        assert (sync.type, sync.on, sync.params) == ("run", "all", {"on": "all", "command": "sync"})
        assert (drop.type, drop.on, drop.params["command"]) == ("run", "all", DROP_CACHES)
        # one program as root, so a sudoers rule can allow exactly it (no root shell)
        assert preview_lines(fix) == [
            "# on every node:",
            "sync",
            "# on every node:",
            f"sudo -n {DROP_CACHES}",
        ]
        assert fix.verify[0].holds({"memory.cached_gib": 0.8})
        assert not fix.verify[0].holds({"memory.cached_gib": 29.0})


def test_reboots_and_file_moves_are_destructive() -> None:
    for wall_id, fix_id in [
        ("unified-memory-leak", "reboot-leaking-node"),
        ("vllm-free-memory-low", "reboot-leaking-node"),
        ("drm-override-halves-memory", "move-override-aside-and-reboot"),
    ]:
        fix = wall(wall_id).fix(fix_id)
        assert fix is not None and fix.risk == "destructive" and fix.root, (wall_id, fix_id)


def test_drm_override_fix_moves_the_file_aside_then_reboots() -> None:
    fix = wall("drm-override-halves-memory").fixes[0]
    move, reboot = fix.actions
    assert move.type == "move-aside"
    assert move.params["path"] == "/etc/modprobe.d/zz-nvidia-drm-override.conf"
    assert reboot.type == "reboot"
    # GB10's nvidia-smi prints [N/A] for memory: the verify must hold without gpu.cuda_total_gib
    after = {"files.drm_override": False}
    assert all(c.holds(after) for c in fix.verify)
    assert not all(c.holds({"files.drm_override": True}) for c in fix.verify)


def test_instanttensor_fix_loads_with_safetensors() -> None:
    fix = wall("instanttensor-gds").fixes[0]
    assert fix.actions[0].params["set_args"] == {"--load-format": "safetensors"}
    assert fix.verify[0].holds({"recipe.serve_args.--load-format": "safetensors"})
    assert not fix.verify[0].holds({"recipe.serve_args.--load-format": "instanttensor"})


def test_unsupported_flashmla_explains_why_only_a_recipe_switch_helps() -> None:
    w = wall("flashmla-unsupported-arch")
    assert [a.type for f in w.fixes for a in f.actions] == ["switch-recipe"]
    assert "no flag" in w.summary.lower() and "recompiling flashmla" in w.explain.lower()


# ------------------------------------------------------------------ metric / check rules


def test_unified_memory_leak_rule() -> None:
    (rule,) = wall("unified-memory-leak").rules
    assert (rule.scope, rule.for_s) == ("node", 30.0)
    leak = {"memory.unexplained_gib": 33.8, "gpu.process_count": 0, "memory.cached_gib": 1.2}
    assert fires(rule, leak)
    assert not fires(rule, {**leak, "gpu.process_count": 1})  # something still runs
    assert not fires(rule, {**leak, "memory.unexplained_gib": 19.9})
    assert not fires(rule, {"gpu.process_count": 0})  # leak not measured: no evidence


def test_node_memory_asymmetry_rules() -> None:
    rules = wall("node-memory-asymmetry").rules
    assert {r.scope for r in rules} == {"cluster"}
    assert wall("node-memory-asymmetry").severity == "warning"
    # Seed 000: 107 GB vs 100 GB after reboot.
    assert any_rule_fires("node-memory-asymmetry", {"cluster.available_spread_gib": 7.0})
    assert not any_rule_fires("node-memory-asymmetry", {"cluster.available_spread_gib": 5.0})
    swapping = {"cluster.available_spread_gib": 4.0, "cluster.swap_used_max_gib": 5.0}
    assert any_rule_fires("node-memory-asymmetry", swapping)
    assert not any_rule_fires(
        "node-memory-asymmetry", {**swapping, "cluster.swap_used_max_gib": 0.5}
    )
    assert not any_rule_fires(
        "node-memory-asymmetry", {**swapping, "cluster.available_spread_gib": 2.5}
    )


def test_page_cache_hog_rules() -> None:
    hog = {"memory.cached_gib": 29.0, "serving.phase": "stopped"}
    assert any_rule_fires("page-cache-hog", hog)
    # a launch in progress fills the cache legitimately (the weights being read)
    assert not any_rule_fires("page-cache-hog", {**hog, "serving.phase": "starting"})
    assert any_rule_fires("page-cache-hog", {**hog, "serving.phase": "crashed"})
    # While serving or loading, a big cache is the model being read: not this wall.
    assert not any_rule_fires("page-cache-hog", {**hog, "serving.phase": "serving"})
    assert not any_rule_fires("page-cache-hog", {**hog, "serving.phase": "loading"})
    assert not any_rule_fires("page-cache-hog", {**hog, "memory.cached_gib": 19.5})
    stopped_rule = next(
        r for r in wall("page-cache-hog").rules if "serving.phase == 'stopped'" in map(str, r.when)
    )
    assert (stopped_rule.scope, stopped_rule.for_s) == ("node", 10.0)


def test_drm_override_rules() -> None:
    assert wall("drm-override-halves-memory").kind == "check"
    assert any_rule_fires("drm-override-halves-memory", {"files.drm_override": True})
    assert not any_rule_fires("drm-override-halves-memory", {"files.drm_override": False})
    half = {"gpu.cuda_total_gib": 61.9, "gpu.name": "NVIDIA GB10"}
    assert any_rule_fires("drm-override-halves-memory", half)
    assert not any_rule_fires("drm-override-halves-memory", {**half, "gpu.cuda_total_gib": 119.7})
    # ~62 GB is normal on a smaller discrete GPU: only GB10 is judged by its total.
    assert not any_rule_fires("drm-override-halves-memory", {**half, "gpu.name": "NVIDIA L40S"})
    assert not any_rule_fires("drm-override-halves-memory", {})


def test_metric_and_check_walls_have_no_log_signatures() -> None:
    for wall_id in (
        "unified-memory-leak",
        "node-memory-asymmetry",
        "page-cache-hog",
        "drm-override-halves-memory",
    ):
        w = wall(wall_id)
        assert w.rules and not w.signatures, wall_id


# ------------------------------------------------------------------ regex edges


def test_ray_summary_without_oom_kills_is_not_a_monitor_kill() -> None:
    # Ray's raylet summary format (node_manager.cc) also reports crashes with zero OOM kills.
    line = (
        "(raylet) [2024-06-12 10:00:00,000 E 1 1] (raylet) node_manager.cc:2963: 0 Workers "
        "(tasks / actors) killed due to memory pressure (OOM), 1 Workers crashed due to other "
        "reasons at node (ID: abc, IP: 10.0.0.2) over the last time period."
    )
    assert "ray-memory-monitor-kill" not in walls_in(line)
    assert "ray-memory-monitor-kill" in walls_in(line.replace(": 0 Workers", ": 12 Workers"))


def test_sglang_imbalance_warning_without_exception_is_not_the_error() -> None:
    # Newer SGLang logs the same text as a warning (logger.warning(msg)) and goes on loading.
    warning = (
        "[2026-05-01 10:00:00 TP1] The memory capacity is unbalanced. Some GPUs may be occupied "
        "by other processes. min_per_gpu_memory=90.1, local_gpu_memory=101.3, "
        "local_gpu_memory * 0.9=91.2"
    )
    assert "sglang-memory-unbalanced" not in walls_in(warning)
    assert "sglang-memory-unbalanced" in walls_in("RuntimeError: " + warning.split("] ", 1)[1])


def test_instanttensor_check_macro_format_is_recognised() -> None:
    # CUFILE_CHECK / CUDA_CHECK in scitix/InstantTensor csrc/instant_tensor/common.hpp build
    # "<__FILE__>:<__LINE__> '<call>' -> <code>:<text>"; the calls are from loader_io_cufile.cpp.
    cufile = (
        "/build/InstantTensor/csrc/loader_io_cufile.cpp:23 "
        "'cuFileHandleRegister(&f.cufile_handle, &descr)' -> 5030"
    )
    host = "/build/InstantTensor/csrc/instant_tensor/host_registration.hpp:40 'cudaHostRegister(ptr, size, 0)' -> 1"
    assert "instanttensor-gds" in walls_in(cufile)
    assert "instanttensor-gds" in walls_in(host)


def test_free_memory_message_variants() -> None:
    for line in (
        "ValueError: Free memory on device xpu:0 (18.79/28.57 GiB) on startup is less than "
        "desired GPU memory utilization (0.7, 20.0 GiB).",
        "(EngineCore pid=1) ValueError: Free memory on device cuda:0 (2.6/121.63 GiB) on startup "
        "is less than desired GPU memory utilization (0.08, 9.73 GiB)",
    ):
        assert "vllm-free-memory-low" in walls_in(line)
    # The KV-cache sizing error mentions memory and gpu_memory_utilization but is another
    # problem: a context too long for the KV space (its own wall), not free memory at start.
    assert walls_in(
        "ValueError: To serve at least one request with the model's max seq len (196608), "
        "23.25 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(22.5 GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len`"
    ) == {"kv-cache-too-small-for-context"}


def test_cuda_oom_variants_and_near_misses() -> None:
    assert "cuda-oom" in walls_in("RuntimeError: CUDA error: out of memory")
    assert "cuda-oom" in walls_in(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total)"
    )
    assert "cuda-oom" not in walls_in(
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    )
    assert "cuda-oom" not in walls_in(
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    )


# ------------------------------------------------------------------ fixes applied to a real recipe

MEM_WALLS = (
    "vllm-free-memory-low",
    "sglang-memory-unbalanced",
    "nvrm-oom",
    "cuda-oom",
    "ray-memory-monitor-kill",
    "unified-memory-leak",
    "node-memory-asymmetry",
    "page-cache-hog",
    "drm-override-halves-memory",
    "flashmla-unsupported-arch",
    "deepgemm-unsupported-arch",
    "no-kernel-image",
    "jit-kernel-unsupported-arch",
    "instanttensor-gds",
    "fp4-marlin-fallback-notice",
)


def greedy_recipe(engine: str = "vllm") -> Recipe:
    """A first-try recipe with the memory settings these walls undo (recipes.model, not a mock)."""
    return Recipe(
        id="greedy",
        title="first try",
        engine=engine,
        executor="ray",
        model=ModelSpec(id="m", path="/models/m"),
        nodes=2,
        serve=ServeSpec(
            args={
                "--tensor-parallel-size": 2,
                "--gpu-memory-utilization": 0.9,
                "--mem-fraction-static": 0.85,
                "--max-model-len": 196608,
                "--max-num-seqs": 256,
                "--load-format": "instanttensor",
            },
            env={},
        ),
    )


def recipe_fixes() -> list[tuple[str, str]]:
    out = []
    for wall_id in MEM_WALLS:
        for fix in wall(wall_id).fixes:
            patches = any(a.type == "patch-recipe" for a in fix.actions)
            if patches and fix.verify and all(c.path.startswith("recipe.") for c in fix.verify):
                out.append((wall_id, fix.id))
    return out


def test_recipe_patch_fixes_are_collected() -> None:
    assert len(recipe_fixes()) >= 15


@pytest.mark.parametrize(("wall_id", "fix_id"), recipe_fixes())
def test_fix_applied_to_a_recipe_passes_its_verify(wall_id: str, fix_id: str) -> None:
    fix = wall(wall_id).fix(fix_id)
    assert fix is not None
    before = greedy_recipe()
    assert not all(c.holds(before.facts()) for c in fix.verify), f"{fix_id} already holds"
    after = apply_fix(before, fix)
    failed = [str(c) for c in fix.verify if not c.holds(after.facts())]
    assert failed == [], f"{wall_id}/{fix_id}: verify fails after the patch: {failed}"


def test_nvrm_object_store_cause_clears_once_the_recipe_caps_it() -> None:
    recipe = greedy_recipe()
    assert cause("nvrm-oom", recipe.facts()) == "ray-object-store"
    fixed = apply_fix(recipe, wall("nvrm-oom").fix("cap-ray-object-store"))  # type: ignore[arg-type]
    assert fixed.facts()["recipe.ray.args.--object-store-memory"] == 1073741824
    assert cause("nvrm-oom", fixed.facts()) == "overcommitted"


def test_engine_causes_read_the_recipes_own_facts() -> None:
    assert first_fix("cuda-oom", greedy_recipe("sglang").facts()) == "lower-mem-fraction-static"
    assert first_fix("cuda-oom", greedy_recipe("vllm").facts()) == "lower-gpu-memory-utilization"
