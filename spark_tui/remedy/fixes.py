"""Fixes as typed actions: plan (exact commands per node) → preview → confirm → run → verify.

`plan_fix` renders every action of a fix for the real cluster once, through the action
kinds of spark_tui.remedy.actions; the preview prints the plan and `run_fix` runs exactly
those strings, so what the user approved is byte for byte what runs. Safety: `--read-only`
refuses (spark_tui.policy); disruptive and destructive fixes need a confirmation naming
each node; one change at a time (FixLock); every target node is connected, its host key
checked, before the first command; every command has a `started` record in the journal
before it runs and a `finished` one after; a journal that cannot be written stops the fix
before anything runs; a failure stops the fix and says what failed where.

A relaunch and a stop are plans of the same kind (`action_plan`), so they are previewed,
confirmed and journaled like any fix.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui import policy
from spark_tui.clock import Clock
from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.schema import Action, Fix
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.transport import NodeUnreachable, Transport
from spark_tui.policy import ReadOnlyRefused
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.render import stamp_now
from spark_tui.recipes.revisions import RevisionStore
from spark_tui.remedy.actions import kind
from spark_tui.remedy.actions.base import (
    RISK_ORDER,
    NoHooks,
    PlanContext,
    PlannedAction,
    PlannedCommand,
    RunContext,
    SessionHooks,
    UndoDue,
    VerifyResult,
)
from spark_tui.remedy.journal import FixLock, Journal, JournalUnwritable
from spark_tui.state import StateDir

if TYPE_CHECKING:
    from spark_tui.kb.matcher import Matcher

Emit = Callable[[ActionProgress], None]
Confirm = Callable[[str, tuple[str, ...]], bool]
VerifyFacts = Callable[[str | None], Mapping[str, object]]

__all__ = [
    "Confirm",
    "FixPlan",
    "FixResult",
    "PlannedAction",
    "PlannedCommand",
    "ReadOnlyRefused",
    "RunEnvironment",
    "VerifyResult",
    "action_plan",
    "plan_fix",
    "run_fix",
]


@dataclass(frozen=True)
class FixPlan:
    """A fix rendered for a cluster: every command it will run, per node."""

    fix: Fix
    wall: str
    cluster: ClusterConfig
    recipe: Recipe | None
    seen: str | None
    stamp: str
    actions: tuple[PlannedAction, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        out: list[str] = []
        for a in self.actions:
            out += [n for n in a.nodes if n not in out]
        return tuple(out)

    @property
    def needs_confirmation(self) -> bool:
        return self.fix.risk in ("disruptive", "destructive")

    @property
    def recipe_after(self) -> Recipe | None:
        """The recipe in use once the fix ran (patched, switched), as planned."""
        recipe = self.recipe
        for a in self.actions:
            if a.recipe_after is not None and a.kind.changes_recipe:
                recipe = a.recipe_after
        return recipe

    @property
    def relaunches(self) -> bool:
        return any(a.kind.relaunches for a in self.actions)

    def commands(self) -> list[PlannedCommand]:
        """Every node command the fix runs, in order (launch steps excluded)."""
        return [c for a in self.actions for c in a.commands]

    def preview_lines(self) -> list[str]:
        what = "" if self.wall in ("", self.fix.id) else f" for {self.wall}"
        lines = [
            f"# {self.fix.id}{what}: {self.fix.title} [{self.fix.risk}"
            + (", needs root]" if self.fix.root else "]")
        ]
        for a in self.actions:
            lines += a.preview_lines()
        if self.fix.verify:
            lines.append("# verify: " + "; ".join(str(c) for c in self.fix.verify))
        from spark_tui.redact import redact

        return [redact(line) for line in lines]  # shown: secrets as ${NAME}

    def confirmation_prompt(self) -> str:
        verb = {
            "disruptive": "stops what serves there, if anything",
            "destructive": "reboots or changes files",
        }.get(self.fix.risk, "runs commands")
        where = ", ".join(self.nodes) or "the recipe only"
        return f"{self.fix.title}: this {verb} ({self.fix.risk}) on {where}. Run it?"


def plan_fix(
    fix: Fix,
    cluster: ClusterConfig,
    recipe: Recipe | None = None,
    seen: str | None = None,
    stamp: str | None = None,
    wall: str = "",
    recipes: Mapping[str, Recipe] | None = None,
    containers: Mapping[str, str] | None = None,
    facts: Mapping[str, Mapping[str, object]] | None = None,
) -> FixPlan:
    """Render each action for the real nodes. Patches chain: a relaunch after a
    patch-recipe in the same fix launches the patched recipe. `containers`: node -> the
    serving container running there (what evidence reads when no recipe is in use);
    `facts`: node -> its readings at hand (an undo's preview shows the value it would
    set back; the run reads it again just before the change)."""
    stamp = stamp or stamp_now()
    current = recipe
    planned: list[PlannedAction] = []
    for i, action in enumerate(fix.actions):
        k = kind(action.type)
        ctx = PlanContext(cluster, current, seen, stamp, fix.id, recipes, containers, facts)
        pa = k.plan(i, action, ctx)
        planned.append(pa)
        current = k.recipe_after(pa, ctx)
    return FixPlan(fix, wall, cluster, recipe, seen, stamp, tuple(planned))


def action_plan(
    fix_id: str,
    title: str,
    actions: list[tuple[str, dict[str, Any]]],
    cluster: ClusterConfig,
    recipe: Recipe | None,
    *,
    risk: str | None = None,
    stamp: str | None = None,
) -> FixPlan:
    """A plan that is not a wall's fix (relaunch, stop): the same preview, confirmation,
    journal and run. Its risk is the highest its actions need."""
    acts = tuple(Action(t, p) for t, p in actions)
    risk = risk or max((kind(a.type).min_risk for a in acts), key=RISK_ORDER.index)
    root = any(kind(a.type).needs_root for a in acts) or any(a.params.get("root") for a in acts)
    fix = Fix(fix_id, title, risk, root, acts)  # type: ignore[arg-type]  # one of RISKS: from the kinds' min_risk above
    return plan_fix(fix, cluster, recipe, stamp=stamp, wall=fix_id)


@dataclass
class FixResult:
    """How a fix ended: ok; or what failed on which node; which nodes got what."""

    plan: FixPlan
    ok: bool
    run_id: str
    message: str = ""
    failed_node: str | None = None
    done: dict[str, list[str]] = field(default_factory=dict)  # node -> actions done
    verify: list[VerifyResult] = field(default_factory=list)
    recipe: Recipe | None = None  # the recipe after the fix (patched / switched)
    tok_s: float | None = None
    launched: Any = None  # the LaunchResult of a relaunch or restart-ray
    rebooted: set[str] = field(default_factory=set)
    # changes to set back if the fix fails after them (remedy.undo), and how that went
    undo_due: list[UndoDue] = field(default_factory=list)
    undone: list[UndoDue] = field(default_factory=list)
    undo_failed: list[tuple[UndoDue, str]] = field(default_factory=list)

    @property
    def verified(self) -> bool | None:
        return all(v.holds for v in self.verify) if self.verify else None

    def did(self, node: str, action: str) -> None:
        """Record that an action finished on a node (once, however many commands it took)."""
        done = self.done.setdefault(node, [])
        if action not in done:
            done.append(action)

    def summary(self) -> str:
        """One line: how it ended and what was checked (never 'verified: verified')."""
        if not self.ok:
            return self.message or "failed"
        checks = "; ".join(
            f"{v.condition}{f' on {v.node}' if v.node else ''}: {'yes' if v.holds else 'NO'}"
            for v in self.verify
        )
        if self.verified is False:
            return f"ran, but a check does not hold yet — {checks}"
        tail = f" ({self.message})" if self.message else ""
        return (f"checked: {checks}" if checks else "done (nothing to check)") + tail


@dataclass
class RunEnvironment:
    """What every run needs, from the session: connections, journal, revisions, the lock,
    where evidence goes, the clock, and the session's hooks (reboots, launches)."""

    transports: Mapping[str, Transport]
    journal: Journal
    revisions: RevisionStore
    state: StateDir
    clock: Clock
    hooks: SessionHooks = field(default_factory=NoHooks)
    stop: threading.Event | None = None  # set when the session closes: waits end early
    matcher: Matcher | None = None  # the session's (its knowledge base, loaded once)

    @property
    def lock(self) -> FixLock:
        return FixLock(self.state.lock_path)


def _noop(_: ActionProgress) -> None:
    pass


def run_fix(
    plan: FixPlan,
    env: RunEnvironment,
    confirm: Confirm | None = None,
    emit: Emit | None = None,
    yes: bool = False,
    verify_facts: VerifyFacts | None = None,
) -> FixResult:
    """Run a planned fix. Returns a FixResult (ok or not); raises ReadOnlyRefused,
    FixAlreadyRunning or JournalUnwritable before anything ran, or re-raises an
    interruption after journaling it."""
    emit = emit or _noop
    where = ", ".join(plan.nodes) or "the recipe"
    policy.refuse_if_read_only(f"run {plan.fix.id} ({len(plan.actions)} action(s) on {where})")
    run_id = uuid.uuid4().hex[:12]
    if (
        plan.needs_confirmation
        and not yes
        and (confirm is None or not confirm(plan.confirmation_prompt(), plan.nodes))
    ):
        emit(ActionProgress(plan.fix.id, None, None, "skipped", "not confirmed: nothing ran"))
        return FixResult(plan, False, run_id, "not confirmed: nothing ran")
    lock = env.lock
    lock.acquire(f"{plan.fix.id}")
    try:
        result = FixResult(plan, True, run_id, recipe=plan.recipe)
        env.journal.append(
            event="fix-start",
            run=run_id,
            fix=plan.fix.id,
            wall=plan.wall,
            risk=plan.fix.risk,
            nodes=list(plan.nodes),
            pid=os.getpid(),
        )
        ctx = RunContext(
            env.transports,
            env.journal,
            env.clock,
            env.revisions,
            env.state,
            run_id,
            plan.fix.id,
            emit,
            result,
            env.hooks,
            env.stop,
            env.matcher,
            read_facts=_fact_reader(plan, env, verify_facts),
        )
        try:
            if _preflight(plan, ctx):
                for action in plan.actions:
                    if not action.kind.run(action, ctx):
                        break
            if result.ok:
                _verify(plan, ctx, verify_facts)
            if result.undo_due and (not result.ok or result.verified is False):
                _set_back(ctx)
        except BaseException as exc:
            done = "; ".join(f"{n}: {', '.join(a)}" for n, a in result.done.items()) or "none"
            back = [*reversed(result.undo_due), *(f[0] for f in result.undo_failed)]
            if back:  # interrupted: nothing more runs, the way back is said
                done += "; to set the nodes back: " + "; ".join(
                    f"{d.node}: {d.command}" for d in back
                )
            # a journal that failed mid-run fails again here: its own error says what ran
            with contextlib.suppress(JournalUnwritable):
                env.journal.append(
                    event="fix-interrupted",
                    run=run_id,
                    fix=plan.fix.id,
                    reason=type(exc).__name__,
                    done=result.done,
                    message=f"interrupted; finished so far: {done}",
                    # changed and not set back: what would set each node back, by hand
                    not_undone=[{"node": d.node, "command": d.command} for d in back],
                )
            raise
        env.journal.append(
            event="fix-end",
            run=run_id,
            fix=plan.fix.id,
            status="ok" if result.ok else "failed",
            verified=result.verified,
            message=result.summary(),
            undone=[{"node": d.node, "command": d.command} for d in result.undone],
            not_undone=[{"node": d.node, "command": d.command} for d, _ in result.undo_failed],
        )
        return result
    finally:
        lock.release()


def _fact_reader(
    plan: FixPlan, env: RunEnvironment, verify_facts: VerifyFacts | None
) -> Callable[[str], Mapping[str, object]]:
    """How an undo reads a node's value before a change: the session's fresh readings (the
    verify step's), else one reading of the node here (the same sampler)."""
    if verify_facts is not None:
        return verify_facts

    def sample_node(node: str) -> Mapping[str, object]:
        from spark_tui.nodes.sampler import sample

        return sample(env.transports[node], plan.cluster.node(node), env.clock).facts()

    return sample_node


def _set_back(ctx: RunContext) -> None:
    """The fix failed after changes that say how to undo them: set each node back, and say
    so in the result (a failed check becomes a failed fix: nothing it did is left)."""
    from spark_tui.remedy.undo import said, set_back

    result = ctx.result
    why = result.message
    if result.ok:  # its check failed
        bad = [v for v in result.verify if not v.holds]
        why = "; ".join(
            f"{v.node + ': ' if v.node else ''}the check {v.condition} failed" for v in bad
        )
    set_back(ctx)
    back = said(result.undone, result.undo_failed)
    result.ok = False
    result.message = f"{why}; {back}"
    ctx.emit(ActionProgress("undo", None, None, "failed" if result.undo_failed else "ok", back))


def _preflight(plan: FixPlan, ctx: RunContext) -> bool:
    """Every node the plan touches answers, with a trusted host key, before anything runs:
    a multi-node fix never half-applies because one node was refused."""
    for node in plan.nodes:
        transport = ctx.transports.get(node)
        if transport is None:
            return ctx.fail(node, f"no connection to {node}; nothing ran", "connect")
        try:
            transport.connect()
        except NodeUnreachable as exc:
            ctx.journal.append(
                event="preflight", run=ctx.run_id, fix=ctx.context, node=node, reason=exc.reason
            )
            return ctx.fail(node, f"{node}: {exc.reason}; nothing ran on any node", "connect")
    return True


def _verify(plan: FixPlan, ctx: RunContext, verify_facts: VerifyFacts | None) -> None:
    """The actions' own checks, then the fix's conditions on fresh readings."""
    result = ctx.result
    for action in plan.actions:
        result.verify += action.kind.verify(action, ctx)
    if plan.fix.verify:
        recipe_facts = result.recipe.facts() if result.recipe is not None else {}
        nodes: list[str | None] = list(plan.nodes) or [None]
        for node in nodes:
            facts: dict[str, object] = dict(recipe_facts)
            if verify_facts is not None:
                try:
                    facts.update(verify_facts(node))
                except SparkTuiError as exc:  # unreadable now: the check fails, it is not skipped
                    ctx.emit(ActionProgress("verify", node, None, "failed", f"cannot read: {exc}"))
            for cond in plan.fix.verify:
                result.verify.append(VerifyResult(node, str(cond), cond.holds(facts)))
    for v in result.verify:
        ctx.journal.append(
            event="verify",
            run=ctx.run_id,
            fix=plan.fix.id,
            node=v.node,
            condition=v.condition,
            holds=v.holds,
        )
    if result.verify:
        ok = result.verified
        ctx.emit(ActionProgress("verify", None, None, "ok" if ok else "failed", result.summary()))
