"""Fixes as typed actions: plan (exact commands per node) → preview → confirm → run → verify.

`plan_fix` renders every action of a fix for the real cluster once; the
preview prints the plan's commands and `run_fix` runs exactly those strings,
so what the user approved is byte for byte what runs. Safety (DESIGN.md):
read-only refuses everything; disruptive and destructive fixes need a
confirmation naming each node; one fix at a time (FixLock); every command is
journaled (flushed, fsync'ed) before the next starts; a failure stops the fix
and says what failed where; an interruption is journaled with the nodes done.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from spark_tui import paths, shell
from spark_tui.clock import Clock, RealClock
from spark_tui.errors import InputError, SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.transport import NodeUnreachable, Transport
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.recipes.render import render_plan, stamp_now, stop_leftovers_command
from spark_tui.recipes.revisions import RevisionStore, apply_patch, unified_diff
from spark_tui.remedy.journal import FixLock, Journal
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.remedy.render import (
    BOOT_ID_COMMAND,
    GENERIC_STOP_STACK,
    evidence_command,
    node_values,
    render_action,
)

Emit = Callable[[ActionProgress], None]
Confirm = Callable[[str, tuple[str, ...]], bool]
VerifyFacts = Callable[[str | None], Mapping[str, object]]
REBOOT_TIMEOUT_S = 900.0
REBOOT_POLL_S = 10.0


class ReadOnlyRefused(SparkTuiError):
    """--read-only: no action runs."""


@dataclass(frozen=True)
class PlannedCommand:
    """One exact command on one node."""

    node: str
    command: str
    root: bool = False


@dataclass(frozen=True)
class PlannedAction:
    """One action of a fix, rendered for the cluster."""

    index: int
    type: str
    commands: tuple[PlannedCommand, ...] = ()
    recipe_before: Recipe | None = None
    recipe_after: Recipe | None = None  # patch-recipe / restart-ray
    diff: str = ""
    switch_to: str | None = None
    launch: LaunchPlan | None = None  # relaunch / restart-ray: the steps it runs
    items: tuple[str, ...] = ()  # collect-evidence

    @property
    def nodes(self) -> tuple[str, ...]:
        out: list[str] = []
        for c in self.commands:
            if c.node not in out:
                out.append(c.node)
        if self.launch is not None:
            out += [n for n in self.launch.nodes if n not in out]
        return tuple(out)

    def preview_lines(self) -> list[str]:
        head = f"# {self.index + 1}. {self.type}"
        if self.type == "patch-recipe":
            assert self.recipe_after is not None
            lines = [f"{head}: recipe {self.recipe_after.id} gets a new revision"]
            return lines + (self.diff.splitlines() or ["# (no change)"])
        if self.type == "switch-recipe":
            return [f"{head}: use recipe {self.switch_to} from now on"]
        lines = [head + (f" on {', '.join(self.nodes)}" if self.nodes else "")]
        if self.type == "restart-ray" and self.diff:
            lines += self.diff.splitlines()
        node = None
        for c in self.commands:
            if c.node != node:
                node = c.node
                lines.append(f"# on {node}:")
            lines.append(c.command)
        if self.type == "reboot":
            lines.append(
                f"# then wait for the node to answer with a new boot id (≤ {REBOOT_TIMEOUT_S:g} s)"
            )
        if self.launch is not None:
            for step in self.launch.steps:
                lines.append(f"# on {step.node}:")
                lines += step.paste_lines()
        return lines


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

    def commands(self) -> list[PlannedCommand]:
        """Every node command the fix runs, in order (launch steps excluded)."""
        return [c for a in self.actions for c in a.commands]

    def preview_lines(self) -> list[str]:
        lines = [
            f"# fix {self.fix.id}"
            + (f" for {self.wall}" if self.wall else "")
            + f": {self.fix.title} [{self.fix.risk}"
            + (", needs root]" if self.fix.root else "]")
        ]
        for a in self.actions:
            lines += a.preview_lines()
        if self.fix.verify:
            lines.append("# verify: " + "; ".join(str(c) for c in self.fix.verify))
        return lines

    def confirmation_prompt(self) -> str:
        verb = {"disruptive": "stops serving", "destructive": "reboots or changes files"}.get(
            self.fix.risk, "runs commands"
        )
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
) -> FixPlan:
    """Render each action for the real nodes. Patches chain: a relaunch after a
    patch-recipe in the same fix launches the patched recipe."""
    stamp = stamp or stamp_now()
    current = recipe
    planned: list[PlannedAction] = []
    for i, action in enumerate(fix.actions):
        p = action.params
        kind = action.type
        if kind in ("run", "reboot", "move-aside", "stop-stack", "collect-evidence"):
            targets = cluster.select(action.on, seen)
            cmds: list[PlannedCommand] = []
            items: tuple[str, ...] = ()
            for node in targets:
                if kind == "stop-stack":
                    lines = (
                        [stop_leftovers_command(current, stamp)]
                        if current
                        else [GENERIC_STOP_STACK]
                    )
                elif kind == "collect-evidence":
                    items = tuple(p.get("items") or ())
                    lines = [evidence_command(item, current, stamp) for item in items]
                else:
                    try:
                        lines = render_action(action, node_values(cluster, node), stamp=stamp)
                    except KeyError as exc:
                        raise InputError(
                            f"fix {fix.id}: {node.name} has no value for {{{exc.args[0]}}} "
                            "(set it in cluster.yaml)"
                        ) from None
                root = bool(p.get("root")) or kind in ("reboot", "move-aside")
                cmds += [PlannedCommand(node.name, line, root) for line in lines]
            planned.append(PlannedAction(i, kind, tuple(cmds), items=items))
        elif kind == "patch-recipe":
            if current is None:
                raise InputError(
                    f"fix {fix.id} changes the recipe: name one (cluster.yaml recipe:)"
                )
            after = apply_patch(
                current,
                target=str(p.get("target", "serve")),
                set_args=p.get("set_args"),
                unset_args=p.get("unset_args"),
                set_env=p.get("set_env"),
                unset_env=p.get("unset_env"),
            )
            after = replace(after, revision=current.revision + 1)
            planned.append(
                PlannedAction(
                    i,
                    kind,
                    recipe_before=current,
                    recipe_after=after,
                    diff=unified_diff(current, after),
                )
            )
            current = after
        elif kind == "restart-ray":
            if current is None or current.executor != "ray":
                raise InputError(f"fix {fix.id} restarts Ray: it needs a Ray recipe")
            after = apply_patch(current, target="ray", set_args=p.get("args"), set_env=p.get("env"))
            after = replace(after, revision=current.revision + 1)
            full = render_plan(after, cluster, stamp=stamp)
            steps = tuple(
                s
                for s in full.steps
                if s.id in ("stop-leftovers", "ray-head", "ray-worker", "wait-ray")
            )
            planned.append(
                PlannedAction(
                    i,
                    kind,
                    recipe_before=current,
                    recipe_after=after,
                    diff=unified_diff(current, after),
                    launch=replace(full, steps=steps),
                )
            )
            current = after
        elif kind == "switch-recipe":
            to = p.get("to") or (current.instead if current else None)
            if not to:
                raise InputError(
                    f"fix {fix.id}: switch to which recipe? "
                    + (
                        current.instead_note
                        if current and current.instead_note
                        else "none is named"
                    )
                )
            if recipes is not None and to not in recipes:
                raise InputError(f"fix {fix.id}: no recipe {to!r}")
            planned.append(PlannedAction(i, kind, switch_to=str(to)))
            if recipes is not None:
                current = recipes[str(to)]
        elif kind == "relaunch":
            if current is None:
                raise InputError(f"fix {fix.id} relaunches: name the recipe (cluster.yaml recipe:)")
            clean = p.get("clean", True)
            launch = render_plan(
                replace(current, drop_caches=current.drop_caches or bool(clean)),
                cluster,
                stamp=stamp,
            )
            planned.append(PlannedAction(i, kind, launch=launch))
        else:
            raise InputError(f"fix {fix.id}: unknown action type {kind!r}")
    return FixPlan(fix, wall, cluster, recipe, seen, stamp, tuple(planned))


@dataclass(frozen=True)
class VerifyResult:
    node: str | None
    condition: str
    holds: bool


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

    @property
    def verified(self) -> bool | None:
        return all(v.holds for v in self.verify) if self.verify else None


def _noop(_: ActionProgress) -> None:
    pass


def run_fix(
    plan: FixPlan,
    transports: Mapping[str, Transport],
    confirm: Confirm | None = None,
    emit: Emit | None = None,
    journal: Journal | None = None,
    read_only: bool = False,
    yes: bool = False,
    verify_facts: VerifyFacts | None = None,
    clock: Clock | None = None,
    store: RevisionStore | None = None,
    lock: FixLock | None = None,
) -> FixResult:
    """Run a planned fix. Returns a FixResult (ok or not); raises ReadOnlyRefused,
    FixAlreadyRunning, or re-raises an interruption after journaling it."""
    emit = emit or _noop
    if read_only:
        raise ReadOnlyRefused(
            f"read-only: refusing fix {plan.fix.id} "
            f"({len(plan.actions)} action(s) on {', '.join(plan.nodes) or 'the recipe'})"
        )
    run_id = uuid.uuid4().hex[:12]
    if (
        plan.needs_confirmation
        and not yes
        and (confirm is None or not confirm(plan.confirmation_prompt(), plan.nodes))
    ):
        emit(ActionProgress(plan.fix.id, None, None, "skipped", "not confirmed: nothing ran"))
        return FixResult(plan, False, run_id, "not confirmed: nothing ran")
    journal = journal or Journal()
    clock = clock or RealClock()
    store = store or RevisionStore()
    lock = lock or FixLock()
    lock.acquire(f"fix {plan.fix.id}")
    result = FixResult(plan, True, run_id, recipe=plan.recipe)
    journal.append(
        event="fix-start",
        run=run_id,
        fix=plan.fix.id,
        wall=plan.wall,
        risk=plan.fix.risk,
        nodes=list(plan.nodes),
    )
    try:
        for action in plan.actions:
            if not _run_action(action, plan, transports, emit, journal, clock, store, result):
                journal.append(
                    event="fix-end",
                    run=run_id,
                    fix=plan.fix.id,
                    status="failed",
                    message=result.message,
                )
                return result
        _verify(plan, result, verify_facts, journal, emit)
        journal.append(
            event="fix-end",
            run=run_id,
            fix=plan.fix.id,
            status="ok",
            verified=result.verified,
            message=result.message,
        )
        return result
    except BaseException as exc:
        done = "; ".join(f"{n}: {', '.join(a)}" for n, a in result.done.items()) or "none"
        journal.append(
            event="fix-interrupted",
            run=run_id,
            fix=plan.fix.id,
            reason=type(exc).__name__,
            done=result.done,
            message=f"interrupted; done so far: {done}",
        )
        raise
    finally:
        lock.release()


def _journal_cmd(
    journal: Journal,
    result: FixResult,
    node: str | None,
    action: str,
    command: str,
    exit_code: int | None,
    tail: str,
) -> None:
    journal.append(
        event="command",
        run=result.run_id,
        fix=result.plan.fix.id,
        node=node,
        action=action,
        command=command,
        exit_code=exit_code,
        output_tail=tail,
    )


def _fail(result: FixResult, node: str | None, message: str, emit: Emit, step: str) -> bool:
    result.ok = False
    result.failed_node = node
    result.message = message
    emit(ActionProgress(step, node, None, "failed", message))
    return False


def _commit_recipe(
    action: PlannedAction, note: str, store: RevisionStore, journal: Journal, result: FixResult
):
    """Make the action's recipe change a new revision (with its diff) and journal it."""
    assert action.recipe_before is not None and action.recipe_after is not None
    rev = store.commit(action.recipe_before, action.recipe_after, note)
    result.recipe = store.current(action.recipe_after.id)
    _journal_cmd(
        journal,
        result,
        None,
        action.type,
        f"recipe {rev.recipe_id} revision {rev.number}",
        0,
        rev.diff[-2000:],
    )
    return rev


def _run_action(
    action: PlannedAction,
    plan: FixPlan,
    transports: Mapping[str, Transport],
    emit: Emit,
    journal: Journal,
    clock: Clock,
    store: RevisionStore,
    result: FixResult,
) -> bool:
    kind = action.type
    if kind == "patch-recipe":
        rev = _commit_recipe(action, f"fix {plan.fix.id}", store, journal, result)
        emit(
            ActionProgress(
                kind, None, None, "ok", f"recipe {rev.recipe_id} is now revision {rev.number}"
            )
        )
        return True
    if kind == "switch-recipe":
        path = paths.state_dir() / "active-recipe"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(action.switch_to) + "\n")
        _journal_cmd(journal, result, None, kind, f"use recipe {action.switch_to}", 0, "")
        emit(ActionProgress(kind, None, None, "ok", f"recipe is now {action.switch_to}"))
        return True
    if kind == "restart-ray":
        _commit_recipe(action, f"fix {plan.fix.id}: restart Ray", store, journal, result)
    if action.launch is not None:
        runner = LaunchRunner(transports, clock, emit, journal, result.run_id, context=plan.fix.id)
        launched = runner.run_steps(action.launch.steps)
        for s in launched.steps:
            if s.ok:
                result.done.setdefault(s.step.node, []).append(f"{kind}:{s.step.id}")
        result.tok_s = launched.tok_s or result.tok_s
        if not launched.ok:
            return _fail(
                result,
                launched.failed.step.node if launched.failed else None,
                launched.describe(),
                emit,
                kind,
            )
        return True
    for cmd in action.commands:
        transport = transports.get(cmd.node)
        if transport is None:
            return _fail(result, cmd.node, f"no connection to {cmd.node}", emit, kind)
        emit(ActionProgress(kind, cmd.node, cmd.command, "running"))
        boot_before = _boot_id(transport) if kind == "reboot" else None
        try:
            res = transport.run(cmd.command, timeout=300.0)
        except NodeUnreachable as exc:
            if kind == "reboot":  # the connection may drop as the node goes down
                _journal_cmd(
                    journal,
                    result,
                    cmd.node,
                    kind,
                    cmd.command,
                    None,
                    f"connection dropped: {exc.reason}",
                )
            else:
                _journal_cmd(
                    journal, result, cmd.node, kind, cmd.command, None, f"unreachable: {exc.reason}"
                )
                return _fail(
                    result,
                    cmd.node,
                    f"{kind} on {cmd.node}: unreachable ({exc.reason})",
                    emit,
                    kind,
                )
        else:
            _journal_cmd(
                journal,
                result,
                cmd.node,
                kind,
                cmd.command,
                res.exit_code if not res.timed_out else None,
                res.tail(),
            )
            if kind == "collect-evidence":
                _save_evidence(result.run_id, cmd, res.stdout + res.stderr)
            elif not res.ok:
                tail = res.tail(5)
                why = "timed out" if res.timed_out else f"exit {res.exit_code}"
                if shell.needs_sudo_password(tail):
                    why += f": sudo needs a password. {shell.SUDOERS_HINT}"
                elif tail:
                    why += f": {tail}"
                return _fail(result, cmd.node, f"{kind} failed on {cmd.node}: {why}", emit, kind)
        if kind == "reboot" and not _wait_back(
            transport, cmd.node, boot_before, clock, emit, journal, result
        ):
            return _fail(
                result,
                cmd.node,
                f"{cmd.node} did not come back within {REBOOT_TIMEOUT_S:g} s",
                emit,
                kind,
            )
        result.done.setdefault(cmd.node, []).append(kind)
        emit(ActionProgress(kind, cmd.node, cmd.command, "ok"))
    return True


def _boot_id(transport: Transport) -> str | None:
    try:
        res = transport.run(BOOT_ID_COMMAND, timeout=15.0)
    except NodeUnreachable:
        return None
    return res.stdout.strip() if res.ok else None


def _wait_back(
    transport: Transport,
    node: str,
    before: str | None,
    clock: Clock,
    emit: Emit,
    journal: Journal,
    result: FixResult,
) -> bool:
    """Poll until the node answers with a new boot id, counting down through emit."""
    deadline = clock.now() + REBOOT_TIMEOUT_S
    while True:
        left = deadline - clock.now()
        if left <= 0:
            return False
        emit(
            ActionProgress(
                "reboot",
                node,
                None,
                "running",
                f"waiting for {node} to come back: {left:.0f} s left",
            )
        )
        clock.sleep(min(REBOOT_POLL_S, left))
        now_id = _boot_id(transport)
        if now_id is not None and now_id != before:
            _journal_cmd(
                journal, result, node, "reboot-wait", BOOT_ID_COMMAND, 0, f"back, boot id {now_id}"
            )
            return True


def _save_evidence(run_id: str, cmd: PlannedCommand, text: str) -> None:
    d = paths.state_dir() / "evidence" / run_id
    d.mkdir(parents=True, exist_ok=True)
    n = len(list(d.glob(f"{cmd.node}-*.txt")))
    (d / f"{cmd.node}-{n:02d}.txt").write_text(f"$ {cmd.command}\n{text}", encoding="utf-8")


def _verify(
    plan: FixPlan, result: FixResult, verify_facts: VerifyFacts | None, journal: Journal, emit: Emit
) -> None:
    if not plan.fix.verify:
        return
    recipe_facts = result.recipe.facts() if result.recipe is not None else {}
    nodes: list[str | None] = list(plan.nodes) or [None]
    for node in nodes:
        facts: dict[str, object] = dict(recipe_facts)
        if verify_facts is not None:
            try:
                facts.update(verify_facts(node))
            except SparkTuiError as exc:  # unreadable now: the check fails, it is not skipped
                emit(ActionProgress("verify", node, None, "failed", f"cannot read: {exc}"))
        for cond in plan.fix.verify:
            holds = cond.holds(facts)
            result.verify.append(VerifyResult(node, str(cond), holds))
            journal.append(
                event="verify",
                run=result.run_id,
                fix=plan.fix.id,
                node=node,
                condition=str(cond),
                holds=holds,
            )
    ok = result.verified
    emit(
        ActionProgress(
            "verify",
            None,
            None,
            "ok" if ok else "failed",
            "; ".join(
                f"{v.node or 'recipe'}: {v.condition} → {'yes' if v.holds else 'no'}"
                for v in result.verify
            ),
        )
    )
    if not ok:
        result.message = "the fix ran but its check does not hold yet"
