"""Actions that run (part of) a launch plan: restart-ray and relaunch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from spark_tui import shell
from spark_tui.action_schemas import SCHEMAS
from spark_tui.errors import InputError
from spark_tui.kb.schema import Action
from spark_tui.nodes.transport import NodeUnreachable
from spark_tui.recipes.render import render_plan
from spark_tui.recipes.revisions import mark_served
from spark_tui.remedy.actions.base import (
    NO_RECIPE,
    ActionKind,
    PlanContext,
    PlannedAction,
    RunContext,
    VerifyResult,
)
from spark_tui.remedy.actions.recipe_changes import commit_recipe, planned_patch
from spark_tui.remedy.launch import LaunchRunner

RAY_STEPS = ("stop-leftovers", "ray-head", "ray-worker", "wait-ray")


def run_launch(planned: PlannedAction, ctx: RunContext) -> bool:
    """Run the action's launch steps: the leftovers stopped first, then (a new attempt for
    the session's monitor) Ray and the engine; a wait ends early on an error wall."""
    assert planned.launch is not None
    runner = LaunchRunner(
        ctx.transports,
        ctx.clock,
        ctx.emit,
        ctx.journal,
        ctx.run_id,
        ctx.context,
        matcher=ctx.matcher,
        abort=ctx.hooks.launch_blocker,
        stop=ctx.stop,
        seen=ctx.hooks.line_seen,
    )
    steps = planned.launch.steps
    missing = planned.launch.unresolved()
    if missing:  # before anything is stopped
        return ctx.fail(None, missing_values_text(missing), planned.type)
    first = next((i for i, s in enumerate(steps) if s.phase != "preflight"), len(steps))
    launched = runner.run_steps(steps[:first])
    if launched.ok:
        ctx.hooks.launching(planned.launch)
        rest = runner.run_steps(steps[first:])
        launched.steps += rest.steps
        launched.ok, launched.failed = rest.ok, rest.failed
        launched.tok_s = rest.tok_s or launched.tok_s
    for s in launched.steps:
        if s.ok:
            ctx.result.did(s.step.node, f"{planned.type}:{s.step.id}")
    ctx.result.tok_s = launched.tok_s or ctx.result.tok_s
    ctx.result.launched = launched
    if not launched.ok:
        node = launched.failed.step.node if launched.failed else None
        return ctx.fail(node, launched.describe(), planned.type)
    if any(s.kind == "smoke" for s in planned.launch.steps):
        ctx.revisions.mark_launched(planned.launch.recipe)
        # rollback's target: the recipe, and the image ID each node's container ran
        mark_served(
            ctx.revisions, planned.launch.recipe, launched.tok_s, served_image_ids(planned, ctx)
        )
    return True


def served_image_ids(planned: PlannedAction, ctx: RunContext) -> dict[str, str]:
    """node -> the image ID its container was created from (`docker inspect`), head first,
    read once the launch served: what the recipe's tag named then, whatever it names later. A
    node that does not answer is left out (a read: nothing changes)."""
    assert planned.launch is not None
    recipe = planned.launch.recipe
    out: dict[str, str] = {}
    for i, node in enumerate(planned.launch.nodes):
        transport = ctx.transports.get(node)
        if transport is None:
            continue
        name = recipe.head_container if i == 0 else recipe.worker_container
        command = "docker inspect --format '{{.Image}}' " + shell.quote(name)
        try:
            res = transport.run(command, timeout=30)
        except NodeUnreachable:
            continue
        if res.ok and res.stdout.strip():
            out[node] = res.stdout.strip()
    return out


def missing_values_text(names: list[str]) -> str:
    """Why a launch did not start: the ${NAME} references its commands hold with no value."""
    refs = ", ".join("${" + n + "}" for n in names)
    return (
        f"the recipe refers to {refs}: set {', '.join(names)} in the environment spark-tui "
        "runs in (nothing was stopped or started)"
    )


class RestartRay(ActionKind):
    schema = SCHEMAS["restart-ray"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        args = " ".join(
            f"{k} {shell.quote(v)}" if v is not True else k
            for k, v in (params.get("args") or {}).items()
        )
        env = shell.env_prefix(dict(params.get("env") or {}))
        return ["ray stop --force", f"{env}ray start {args}".rstrip()]

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        current = ctx.recipe
        if current is None or current.executor != "ray":
            raise InputError(f"fix {ctx.fix_id} restarts Ray: it needs a Ray recipe")
        patch = {"target": "ray", "set_args": action.params.get("args") or {}}
        patch["set_env"] = action.params.get("env") or {}
        planned = planned_patch(index, self.name, current, patch)
        assert planned.recipe_after is not None
        full = render_plan(planned.recipe_after, ctx.cluster, stamp=ctx.stamp)
        steps = tuple(s for s in full.steps if s.id in RAY_STEPS)
        return replace(planned, launch=replace(full, steps=steps))

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        lines = [f"# {planned.index + 1}. {self.name} on {', '.join(planned.nodes)}"]
        lines += planned.diff.splitlines()
        return lines + _launch_lines(planned)

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        commit_recipe(planned, f"fix {ctx.context}: restart Ray", ctx)
        return run_launch(planned, ctx)

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        ok = ctx.result.launched is not None and ctx.result.launched.ok
        return [
            VerifyResult(planned.nodes[0] if planned.nodes else None, "Ray shows every GPU", ok)
        ]


class Relaunch(ActionKind):
    schema = SCHEMAS["relaunch"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        return ["# stop the stack on every node, drop caches, run the launch plan again"]

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        current = ctx.recipe
        if current is None:
            raise InputError(f"fix {ctx.fix_id} relaunches: {NO_RECIPE}")
        clean = bool(action.params.get("clean", True))
        launch = render_plan(
            replace(current, drop_caches=current.drop_caches or clean), ctx.cluster, stamp=ctx.stamp
        )
        return PlannedAction(index, self.name, recipe_before=current, launch=launch)

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        assert planned.launch is not None
        r = planned.launch.recipe
        head = f"# {planned.index + 1}. {self.name} {r.id} rev {r.revision} on {', '.join(planned.nodes)}"
        return [head, *(f"# note: {w}" for w in planned.launch.warnings), *_launch_lines(planned)]

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        return run_launch(planned, ctx)

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        launched = ctx.result.launched
        ok = launched is not None and launched.ok
        what = "smoke request answered" + (
            f" ({launched.tok_s:.1f} tok/s)" if ok and launched.tok_s else ""
        )
        return [VerifyResult(planned.nodes[0] if planned.nodes else None, what, ok)]


def _launch_lines(planned: PlannedAction) -> list[str]:
    assert planned.launch is not None
    lines: list[str] = []
    node = None
    for step in planned.launch.steps:
        if step.node != node:
            node = step.node
            lines.append(f"# on {node}:")
        lines += step.paste_lines()
    return lines


KINDS: tuple[type[ActionKind], ...] = (RestartRay, Relaunch)
