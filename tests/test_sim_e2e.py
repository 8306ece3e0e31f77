"""End to end, no TUI: from a cold simulated cluster, launch the scenario's recipe, take
the diagnoses spark-tui makes (ClusterMonitor over the simulated nodes: readings, serve
logs, kernel log) and the first fix it proposes, apply it (spark_tui.remedy.fixes), relaunch,
repeat until the smoke request answers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.schema import SEVERITY_RANK
from spark_tui.monitor import KERNEL_SOURCE, ClusterMonitor
from spark_tui.nodes.transport import STREAM_POLL_S as POLL_S
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.session import open_cluster
from spark_tui.sim import SteppedClock

MAX_LAUNCHES = 4
WATCH_S = 15 * 60  # simulated time the monitor watches a failed launch
STEP_S = 20.0
TAIL_POLL_S = 3 * POLL_S


@dataclass
class Story:
    launches: int = 0
    walls: list[list[str]] = field(default_factory=list)  # per launch
    fixes: list[tuple[str, str]] = field(default_factory=list)  # (wall, fix)
    outcomes: list[str] = field(default_factory=list)  # how each launch plan ended
    served: bool = False
    final_recipe: str = ""


def _stamp(c) -> str:
    """A stamp for renamed containers from the simulated clock (one per plan: never reused,
    whatever the wall clock or a frozen stamp_now elsewhere in the suite says)."""
    c.stamps = getattr(c, "stamps", 0) + 1
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(c.clock.now())) + f"-{c.stamps}"


def _watch(c, monitor: ClusterMonitor, seconds: float) -> None:
    """Sample every node (readings, kernel log) while simulated time passes."""
    t_end = c.clock.now() + seconds
    while True:
        for name in c.transports:
            monitor.sample_once(name)
        if c.clock.now() >= t_end:
            return
        c.clock.advance(STEP_S)
        time.sleep(TAIL_POLL_S)  # let the log tails (the stream pump, as in the TUI) catch up
        # without start() the monitor has no flusher thread: hand it the tailed lines now
        monitor._drain()


def _launch(c, kb, recipe, run: bool = True) -> ClusterMonitor:
    """Run the launch plan (unless a fix just did) with a fresh monitor tailing the plan's
    log sources, as the TUI does."""
    monitor = ClusterMonitor(
        c.config,
        c.transports,
        kb,
        c.clock,
        lambda e: None,
        recipe_facts=lambda: recipe.facts(),
        dmon=False,
        auto_tail=False,
    )
    plan = render_plan(recipe, c.config, stamp=_stamp(c))
    runner = LaunchRunner(c.transports, c.clock)
    tailing = False
    for step in plan.steps if run else ():
        if step.kind != "run" and not tailing:
            for node, sources in plan.log_sources.items():
                for i, command in enumerate(sources):
                    monitor.tail(node, f"log{i}", command)
            tailing = True
        r = runner.run_step(step)
        for name in c.transports:  # the monitor reads the nodes while the launch goes on (as
            monitor.sample_once(name)  # in the TUI): a container it sees reopens its log tail
        if not r.ok:
            monitor.outcome = f"{step.id} on {step.node}: {r.detail[:300]}"  # type: ignore[attr-defined]
            break
    if not tailing:
        for node, sources in plan.log_sources.items():
            for i, command in enumerate(sources):
                monitor.tail(node, f"log{i}", command)
    return monitor


def _first_fix(diags: list, served: bool):
    """The fix spark-tui proposes first: the most severe diagnosis with a fix, a node's
    readings before a log line (a log line's cause is chosen from the node that printed it,
    which for SGLang's balance check is the healthy one), then the earliest
    (warnings only when nothing serves)."""
    diags = sorted(
        diags,
        key=lambda d: (SEVERITY_RANK[d.severity], not d.source.endswith("readings"), d.first_seen),
    )
    for d in diags:
        if d.severity == "info" or (served and d.severity != "error"):
            continue
        fixes = d.fixes()
        if fixes:
            return d, next(f for f in d.wall.fixes if f.id == fixes[0])
    return None, None


def _smoke_ok(c, recipe) -> bool:
    smoke = render_plan(recipe, c.config).steps[-1]
    r = c.transports[smoke.node].run(smoke.command, timeout=600)
    return r.exit_code == 0 and '"choices"' in r.stdout


def play(name: str) -> Story:
    story = Story()
    kb = load_knowledge()
    book = {r.id: r for r in load_recipes(use_user=False, use_revisions=False)}
    # time moves only with the waits: the story is the same on a loaded machine
    with open_cluster(scenario=name, clock=SteppedClock()) as session:
        c = session.sim
        recipe = c.recipe
        book[recipe.id] = recipe
        old_kernel: set[str] = set()
        launched_by_fix = False
        while story.launches < MAX_LAUNCHES:
            if not launched_by_fix:
                story.launches += 1
            monitor = _launch(c, kb, recipe, run=not launched_by_fix)
            story.outcomes.append(getattr(monitor, "outcome", "launched"))
            served = _smoke_ok(c, recipe)
            if served:  # a served engine still gets requests: walls that wait for load show up
                for _ in range(8):
                    served = _smoke_ok(c, recipe) and served
            _watch(c, monitor, 120 if served else WATCH_S)
            monitor.stop(close_transports=False)
            # a new launch is a new watch; kernel lines from before it are old news
            diags = [
                d
                for d in monitor.diagnoses()
                if d.severity != "info"
                and not (d.source.endswith(KERNEL_SOURCE) and d.evidence in old_kernel)
            ]
            story.walls.append(sorted({d.wall.id for d in diags}))
            served = served and _smoke_ok(c, recipe)
            if served and not any(d.severity == "error" for d in diags):
                story.served = True
                break
            diag, fix = _first_fix(diags, served)
            if fix is None:
                break
            story.fixes.append((diag.wall.id, fix.id))
            for t in c.transports.values():
                old_kernel |= set(t.run("dmesg --ctime 2>/dev/null").stdout.splitlines())
            plan = plan_fix(
                fix,
                c.config,
                recipe,
                seen=diag.target_node,
                wall=diag.wall.id,
                recipes=book,
                stamp=_stamp(c),
            )
            fr = run_fix(plan, session.environment(), yes=True)
            assert fr.ok, fr.message
            if fr.recipe is not None:
                recipe = fr.recipe
            switched = next((a.switch_to for a in plan.actions if a.type == "switch-recipe"), None)
            if switched:
                recipe = book[switched]
            book[recipe.id] = recipe
            # a fix that relaunches is the next launch; otherwise the loop relaunches
            launched_by_fix = any(a.type == "relaunch" for a in plan.actions)
            if launched_by_fix:
                story.launches += 1
        story.final_recipe = recipe.id
    return story


FIXABLE = [
    "page-cache-hog",
    "leaked-memory-unbalanced",
    "cuda-graph-deadlock",
    "head-nvrm-oom",
    "host-ip-mismatch",
    "ray-client-single-gpu",
    "drm-override",
    "ray-channel-timeout",
]


def test_healthy_serves_on_the_first_launch_with_no_error() -> None:
    story = play("healthy")
    assert story.served and story.launches == 1 and not story.fixes, story


@pytest.mark.parametrize("name", FIXABLE)
def test_scenario_is_diagnosed_fixed_and_serves(name: str) -> None:
    from spark_tui.sim.scenarios import get

    scenario = get(name)
    story = play(name)
    kb = load_knowledge()
    errors = {w for w in story.walls[0] if kb.get(w).severity == "error"}
    # the diagnoses are the scenario's walls: every error named is one of them
    assert errors and errors <= set(scenario.walls), story
    # every applied fix came from the knowledge base, for the wall it was proposed for
    assert story.fixes and all(f in {x.id for x in kb.get(w).fixes} for w, f in story.fixes), story
    assert story.served, story
    assert story.launches <= 2, story


def test_flashmla_sglang_ends_by_switching_to_the_vllm_recipe() -> None:
    story = play("flashmla-sglang")
    assert "flashmla-unsupported-arch" in story.walls[0], story
    assert story.fixes == [("flashmla-unsupported-arch", "switch-to-vllm-recipe")], story
    assert story.served and story.launches == 2, story
    assert story.final_recipe == "minimax-m2.7-nvfp4-vllm-tp2"
