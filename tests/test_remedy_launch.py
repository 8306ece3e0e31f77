"""Launch plans run for real through LocalTransport with shim tools on PATH."""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path

import pytest

from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher
from spark_tui.recipes.clusters import simulated_cluster
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.overrides import apply_sets
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.fixes import action_plan, run_fix
from spark_tui.remedy.launch import AutoRelaunchGuard, LaunchRunner, parse_smoke
from spark_tui.state import StateDir
from tests.remedy_shims import StepClock, journal, make_world, revisions, run_env


@functools.cache
def kb_matcher() -> Matcher:
    """The built-in knowledge base's matcher (a session hands its own to a launch)."""
    return Matcher(load_knowledge())


def _sets(tmp_path: Path) -> tuple[str, ...]:
    # the serve log lives in the temp dir: `docker exec` runs on this machine here
    return (f"serve.log={tmp_path / 'serve.log'}",)


def test_plan_runs_through_shims_and_measures_tok_s(tmp_path: Path) -> None:
    cluster = simulated_cluster(2)
    world = make_world(tmp_path / "w", cluster)
    recipe = load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2")
    plan = render_plan(recipe, cluster, sets=_sets(tmp_path), stamp="T1")
    events = []
    runner = LaunchRunner(
        world.transports, StepClock(), events.append, journal(), "r1", matcher=kb_matcher()
    )
    result = runner.run_steps(plan.steps)
    assert result.ok, result.describe()
    assert result.tok_s == pytest.approx(32.0)  # 64 completion tokens in 2.0 s
    head_calls = world.calls("spark1")
    worker_calls = world.calls("spark2")
    assert any(c.startswith("docker run -d --name ray-head") for c in head_calls)
    assert any("ray start --address=10.10.10.1:6379" in c for c in worker_calls)
    drops = [c for c in head_calls + worker_calls if c == "sudo -n sysctl -w vm.drop_caches=3"]
    assert len(drops) == 2
    assert not any("--rm" in c.split() or "--restart" in c for c in head_calls + worker_calls)
    # vllm ran inside "ray-head" with the recipe's argv and env, word for word
    argv = (world.shared / "vllm-argv").read_text().splitlines()
    assert argv[:2] == ["serve", "/models/MiniMax-M2.7-MXFP4"]
    assert argv[argv.index("--max-model-len") + 1] == "131072"
    env = (world.shared / "vllm-env").read_text().splitlines()
    assert "RAY_memory_usage_threshold=0.97" in env
    # progress streamed, and every command journaled
    assert any("Application startup complete" in e.detail for e in events if e.status == "ok")
    entries = journal().entries()
    journaled = [e["action"] for e in entries]
    assert {"stop-leftovers", "drop-caches", "ray-head", "ray-worker", "wait-ray"} <= set(journaled)
    assert journaled[-1] == "smoke" and entries[-1]["tok_s"] == pytest.approx(32.0)
    # each command: its `started` record, then its `finished` one; only the waits of one group
    # (every node's own ready wait, waited for together) overlap
    together = {"wait-node-ready", "wait-ready"}
    alone = [e for e in entries if e["action"] not in together]
    assert [e["event"] for e in alone] == ["started", "finished"] * (len(alone) // 2)
    grouped = [e for e in entries if e["action"] in together]
    assert [e["event"] for e in grouped] == ["started", "started", "finished", "finished"]
    for cmd in {e["cmd"] for e in entries}:
        started, finished = [e for e in entries if e["cmd"] == cmd]
        assert (started["event"], finished["event"]) == ("started", "finished")
        assert started["run"] == "r1"
        assert (started["node"], started["command"]) == (finished["node"], finished["command"])
        assert finished["outcome"] == "exit" and finished["exit_code"] == 0


def test_a_crash_in_the_serve_log_fails_fast(tmp_path: Path) -> None:
    cluster = simulated_cluster(2)
    world = make_world(tmp_path / "w", cluster)
    (world.shared / "crash").write_text("1")
    plan = render_plan(
        load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2"), cluster, sets=_sets(tmp_path)
    )
    clock = StepClock()
    result = LaunchRunner(world.transports, clock, matcher=kb_matcher()).run_steps(plan.steps)
    assert not result.ok and result.failed is not None
    assert result.failed.step.id == "wait-ready"
    assert "Unsupported architecture" in result.failed.detail
    assert sum(clock.slept) < 600  # did not sit out the 2400 s startup timeout


def test_wait_for_ray_times_out_with_a_reason(tmp_path: Path) -> None:
    cluster = simulated_cluster(2)
    world = make_world(tmp_path / "w", cluster)
    plan = render_plan(load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2"), cluster)
    wait = next(s for s in plan.steps if s.id == "wait-ray")
    result = LaunchRunner(world.transports, StepClock(), matcher=kb_matcher()).run_step(
        wait
    )  # no Ray started
    assert not result.ok and "timed out after 600 s" in result.detail


def test_smoke_output_parsing() -> None:
    body = json.dumps({"choices": [{"message": {}}], "usage": {"completion_tokens": 10}})
    assert parse_smoke(body + "\n0.5\n") == (10, 0.5, "")
    assert parse_smoke("curl: (7) Failed to connect\n0.0\n")[2].startswith("not JSON")
    assert parse_smoke("")[2] == "no answer"


def test_relaunch_applies_pending_patches(tmp_path: Path) -> None:
    cluster = simulated_cluster(2)
    world = make_world(tmp_path / "w", cluster)
    base = load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2")
    store = revisions()
    store.patch(base, note="test", set_args={"--max-num-seqs": 64})
    assert store.pending(base.id)
    # the recipe in use (its newest revision), as a session relaunches it
    recipe = apply_sets(load_recipes().get(base.id), _sets(tmp_path))
    assert recipe.revision == 1
    plan = action_plan("relaunch", "Relaunch", [("relaunch", {"clean": True})], cluster, recipe)
    assert plan.needs_confirmation  # a relaunch stops serving: asked like any fix
    result = run_fix(plan, run_env(world.transports), yes=True)
    assert result.ok, result.message
    assert result.launched.ok and result.tok_s == pytest.approx(32.0)
    assert result.verify and result.verified is True
    argv = (world.shared / "vllm-argv").read_text().splitlines()
    assert argv[argv.index("--max-num-seqs") + 1] == "64"
    assert not store.pending(base.id)
    events = [e["event"] for e in journal().entries()]
    assert events[0] == "fix-start" and events[-1] == "fix-end"
    assert events.count("started") == events.count("finished") > 0


def test_one_automatic_relaunch_per_diagnosis() -> None:
    path = StateDir.real().auto_relaunch_path
    guard = AutoRelaunchGuard(path)
    assert guard.claim("vllm-free-memory-low@spark2#1", 1.0)
    assert not guard.claim("vllm-free-memory-low@spark2#1", 2.0)
    assert AutoRelaunchGuard(path).allowed("vllm-free-memory-low@spark2#2")  # a new diagnosis
    assert not AutoRelaunchGuard(path).allowed("vllm-free-memory-low@spark2#1")  # survives restarts


def test_hostile_recipe_values_are_quoted_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    cluster = simulated_cluster(2)
    world = make_world(tmp_path / "w", cluster)
    hostile = f"$(touch {marker})"
    sets = (
        *_sets(tmp_path),
        f"serve.--served-model-name={hostile}",
        f"env.EVIL=`touch {marker}`; touch {marker}",
        f"ray.env.EVIL2='; touch {marker}; '",
        "serve.--quote-test=a'b\"c",
    )
    plan = render_plan(load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2"), cluster, sets=sets)
    result = LaunchRunner(world.transports, StepClock(), matcher=kb_matcher()).run_steps(plan.steps)
    assert result.ok, result.describe()
    assert not marker.exists()
    argv = (world.shared / "vllm-argv").read_text().splitlines()
    assert argv[argv.index("--served-model-name") + 1] == hostile
    assert argv[argv.index("--quote-test") + 1] == "a'b\"c"
    assert f"EVIL=`touch {marker}`; touch {marker}" in (world.shared / "vllm-env").read_text()
    run = next(s for s in plan.steps if s.id == "ray-head")
    assert f"EVIL2='; touch {marker}; '" in shlex.split(run.command)


def test_a_known_wall_in_the_serve_log_ends_the_wait_naming_it() -> None:
    # the simulated page-cache-hog: vLLM dies on "Free memory on device" — no generic
    # death marker in that line; the knowledge base's matcher recognises it
    from spark_tui.sim import SteppedClock, build_sim_cluster

    with build_sim_cluster("page-cache-hog", clock=SteppedClock()) as c:
        plan = render_plan(c.recipe, c.config)
        started = c.clock.now()
        result = LaunchRunner(c.transports, c.clock, matcher=kb_matcher()).run_steps(plan.steps)
        assert not result.ok and result.failed is not None
        assert result.failed.step.id == "wait-ready"
        assert "vllm-free-memory-low: " in result.failed.detail
        assert c.clock.now() - started < result.failed.step.timeout_s / 2
