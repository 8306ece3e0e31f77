"""The rules engine over readings: durations, scopes, causes, no code per wall.

The spin is the real capture (fixtures/real/h200/dmon-spin.txt: SM 100 %, memory 0 %)
with CUDA-graph capture stuck and the log silent; real work is dmon-copy.txt."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.clock import ScaledClock
from spark_tui.kb.loader import load_knowledge, parse_wall
from spark_tui.kb.schema import Wall
from spark_tui.nodes.parsers.dmon import DmonSample, parse_dmon
from spark_tui.nodes.parsers.meminfo import parse_meminfo
from spark_tui.nodes.parsers.serving import ServingTracker
from spark_tui.nodes.rules import RESOLVE_AFTER_S, RuleEngine, cluster_facts
from spark_tui.nodes.state import GpuReading, MemoryReading, NodeState, ServingState
from spark_tui.yamlfile import parse_yaml

H200 = Path(__file__).parent / "fixtures" / "real" / "h200"
GIB = 1 << 30

HANG_YAML = """
id: test-capture-hang
title: capture hangs
severity: error
kind: metric
engines: [vllm]
summary: GPUs spin while capture does not move.
signatures:
  - when:
      - serving.phase == 'capturing'
      - gpu.sm_pct >= 90
      - gpu.mem_bw_pct <= 5
      - log.silent_s >= 120
      - serving.progress_age_s >= 120
    for: 120
causes:
  - id: sglang
    title: SGLang
    when: ["recipe.engine == 'sglang'"]
    fixes: [disable-cuda-graph]
  - id: vllm
    title: vLLM
    when: ["recipe.engine == 'vllm'"]
    fixes: [enforce-eager]
fixes:
  - id: disable-cuda-graph
    title: --disable-cuda-graph
    risk: disruptive
    actions: [{type: patch-recipe, set_args: {--disable-cuda-graph: true}}]
  - id: enforce-eager
    title: --enforce-eager
    risk: disruptive
    actions: [{type: patch-recipe, set_args: {--enforce-eager: true}}]
references: [seeds/000]
"""


def small_wall(text: str) -> Wall:
    return parse_wall(parse_yaml(text, "test.yaml"), "test.yaml")


def gpu0(samples) -> list[DmonSample]:
    return [s for s in samples if s.gpu == 0]


def state_at(now: float, sample: DmonSample, tracker: ServingTracker, name: str = "spark1"):
    gpu = GpuReading(0, "NVIDIA H200", sm_pct=sample.sm_pct, mem_bw_pct=sample.mem_bw_pct)
    return NodeState(name, now, gpus=(gpu,), serving=tracker.state)


def run_minutes(
    engine: RuleEngine,
    samples,
    minutes: float,
    clock: ScaledClock,
    tracker,
    progress_every_s: float | None = None,
    recipe=None,
):
    """Sample every 2 s for `minutes` of simulated time; return every firing."""
    firings = []
    steps = int(minutes * 60 / 2)
    for i in range(steps):
        clock.advance(2.0)
        now = clock.now()
        if progress_every_s and i % int(progress_every_s / 2) == 0:
            done = min(36, i // int(progress_every_s / 2))
            tracker.feed(f"Capturing CUDA graphs (decode, FULL):  {done}%|#   | {done}/36", now)
        s = samples[i % len(samples)]
        firings += engine.evaluate_states({"spark1": state_at(now, s, tracker)}, now, recipe)
    return firings


@pytest.fixture
def clock() -> ScaledClock:
    return ScaledClock(speed=0.0)  # time moves only when the test advances it


def stuck_capture(clock: ScaledClock) -> ServingTracker:
    t = ServingTracker()
    t.feed("Capturing CUDA graphs (decode, FULL):   0%|          | 0/36", clock.now())
    return t


@pytest.mark.parametrize("source", ["test wall", "built-in knowledge"])
def test_spin_fires_only_after_minutes(source: str, clock: ScaledClock) -> None:
    wall = (
        small_wall(HANG_YAML)
        if source == "test wall"
        else load_knowledge().get("cuda-graph-capture-hang")
    )
    spin = gpu0(parse_dmon((H200 / "dmon-spin.txt").read_text()))
    assert {(s.sm_pct, s.mem_bw_pct) for s in spin} == {(100.0, 0.0)}
    engine = RuleEngine([wall])
    tracker = stuck_capture(clock)
    # one busy sample: nothing
    clock.advance(2.0)
    assert (
        engine.evaluate_states(
            {"spark1": state_at(clock.now(), spin[0], tracker)},
            clock.now(),
            {"recipe.engine": "vllm"},
        )
        == []
    )
    # the first two minutes of silence: still nothing (log.silent_s must reach 120 first)
    assert run_minutes(engine, spin, 1.9, clock, tracker, recipe={"recipe.engine": "vllm"}) == []
    # minutes of it: raised once, with the cause the recipe picks
    firings = run_minutes(engine, spin, 5, clock, tracker, recipe={"recipe.engine": "vllm"})
    assert len(firings) == 1 and firings[0].new
    d = firings[0].diagnosis
    assert (d.wall.id, d.source, d.node) == (wall.id, "spark1:readings", "spark1")
    assert d.cause is not None and "vllm" in d.cause
    assert "enforce-eager" in d.fixes()[0]
    assert "gpu.sm_pct >= 90 (is 100)" in d.evidence and "for 120 s" in d.evidence
    assert len(engine.book) == 1


def test_real_work_does_not_fire(clock: ScaledClock) -> None:
    wall = small_wall(HANG_YAML)
    copy = gpu0(parse_dmon((H200 / "dmon-copy.txt").read_text()))
    engine = RuleEngine([wall, load_knowledge().get("cuda-graph-capture-hang")])
    tracker = stuck_capture(clock)
    # memory-bound copy with a stuck, silent capture: mem 100 % is not a spin
    assert run_minutes(engine, copy, 10, clock, tracker) == []


def test_gb10_busy_with_progress_does_not_fire(clock: ScaledClock) -> None:
    # GB10: memory % reads 0 under real load, so only progress and the log tell
    busy = [DmonSample(0, 96.0, 0.0)]
    engine = RuleEngine([small_wall(HANG_YAML), load_knowledge().get("cuda-graph-capture-hang")])
    tracker = stuck_capture(clock)
    assert run_minutes(engine, busy, 10, clock, tracker, progress_every_s=20) == []


def test_one_good_sample_resets_the_duration(clock: ScaledClock) -> None:
    engine = RuleEngine([small_wall(HANG_YAML)])
    tracker = stuck_capture(clock)
    spin = [DmonSample(0, 100.0, 0.0)]
    copy = [DmonSample(0, 99.0, 100.0)]
    run_minutes(engine, spin, 3.5, clock, tracker)  # 120 s silent + 90 s of holding
    assert run_minutes(engine, copy, 0.1, clock, tracker) == []
    assert run_minutes(engine, spin, 1.5, clock, tracker) == []  # the 120 s start again
    assert len(run_minutes(engine, spin, 1, clock, tracker)) == 1


def test_cluster_scope_memory_asymmetry_from_real_meminfo(clock: ScaledClock) -> None:
    wall = load_knowledge().get("node-memory-asymmetry")
    real = parse_meminfo((H200 / "meminfo.txt").read_text())
    assert isinstance(real, MemoryReading)
    low = MemoryReading(
        real.total_bytes,
        real.available_bytes - 8 * GIB,
        real.free_bytes - 8 * GIB,
        real.cached_bytes,
    )
    states = {
        "spark1": NodeState("spark1", 0, memory=real),
        "spark2": NodeState("spark2", 0, memory=low),
    }
    assert round(cluster_facts(states)["cluster.available_spread_gib"], 1) == 8.0  # type: ignore[arg-type]
    # while an engine holds the memory the spread says nothing of what a launch could have
    serving = NodeState("spark1", 0, memory=real, serving=ServingState(phase="serving"))
    assert "cluster.available_spread_gib" not in cluster_facts({**states, "spark1": serving})
    engine = RuleEngine([wall])
    firings = []
    for _ in range(30):
        clock.advance(2.0)
        firings += engine.evaluate_states(states, clock.now(), {"recipe.engine": "sglang"})
    assert len(firings) == 1
    d = firings[0].diagnosis
    assert d.source == "cluster:readings" and d.node is None and d.cause == "sglang"


def test_recipe_scope_and_unreachable_node_resets(clock: ScaledClock) -> None:
    kb = load_knowledge()
    engine = RuleEngine(kb)
    recipe = {"recipe.executor": "ray", "recipe.engine": "vllm"}
    firings = engine.evaluate_states({}, clock.now(), recipe)
    assert "ray-object-store-oversized" in {f.diagnosis.wall.id for f in firings}
    assert all(f.diagnosis.source == "recipe:checks" for f in firings if f.subject == "recipe")
    diag = engine.book.get("ray-object-store-oversized", "recipe:checks")
    assert diag is not None and diag.active
    recipe["recipe.ray.args.--object-store-memory"] = "1073741824"
    # cleared, but a wall stays raised until it has been clear for RESOLVE_AFTER_S
    clock.advance(2)
    engine.evaluate_states({}, clock.now(), recipe)
    assert ("ray-object-store-oversized", "recipe") in engine.active()
    assert engine.resolved == [] and diag.active
    clock.advance(RESOLVE_AFTER_S)
    engine.evaluate_states({}, clock.now(), recipe)
    assert ("ray-object-store-oversized", "recipe") not in engine.active()
    assert engine.resolved == [diag] and not diag.active
    assert diag.resolution.startswith("no longer holds: recipe.ray.args.--object-store-memory")
    assert "(is '1073741824')" in diag.resolution
    clock.advance(2)
    engine.evaluate_states({}, clock.now(), recipe)
    assert engine.resolved == []  # resolved once
    # a drm override on a node raises its wall; the node dropping forgets what it held
    on = NodeState("spark2", 0, drm_override=True)
    assert any(
        f.diagnosis.wall.id == "drm-override-halves-memory"
        for f in engine.evaluate_states({"spark2": on}, clock.now(), recipe)
    )
    engine.evaluate_states({"spark2": NodeState("spark2", 0, reachable=False)}, clock.now(), recipe)
    assert ("drm-override-halves-memory", "spark2") not in engine.active()
    # back, with the override still there: raised again (the same diagnosis, seen again)
    again = engine.evaluate_states({"spark2": on}, clock.now(), recipe)
    assert [(f.diagnosis.wall.id, f.new) for f in again] == [("drm-override-halves-memory", False)]
