"""Actions that run commands on nodes: run, reboot, move-aside, stop-stack, collect-evidence."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from spark_tui import shell
from spark_tui.action_schemas import SCHEMAS
from spark_tui.errors import InputError
from spark_tui.events import ActionProgress
from spark_tui.kb.schema import Action
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.transport import NodeUnreachable, Transport
from spark_tui.recipes.render import stop_leftovers_command
from spark_tui.remedy.actions.base import (
    BEFORE_MARK,
    ActionKind,
    PlanContext,
    PlannedAction,
    PlannedCommand,
    PlannedUndo,
    RunContext,
    VerifyResult,
)
from spark_tui.remedy.render import (
    BACKUP_SUFFIX,
    BOOT_ID_COMMAND,
    GENERIC_STOP_STACK,
    STACK_UP,
    evidence_command,
    node_values,
)
from spark_tui.safefile import write_atomic

REBOOT_TIMEOUT_S = 900.0
REBOOT_POLL_S = 10.0


class _PerNode(ActionKind):
    """An action rendered to the same command(s) on each target node."""

    def commands_for(
        self, action: Action, node: NodeConfig, ctx: PlanContext
    ) -> list[PlannedCommand]:
        raise NotImplementedError

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        cmds: list[PlannedCommand] = []
        for node in ctx.cluster.select(action.on, ctx.seen):
            cmds += self.commands_for(action, node, ctx)
        items = tuple(action.params.get("items") or ())
        return PlannedAction(index, self.name, tuple(cmds), items=items)

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        from spark_tui.remedy.undo import CannotUndo, before_change

        for cmd in planned.commands:
            try:
                due = before_change(planned, cmd, ctx)
            except CannotUndo as exc:
                return ctx.fail(cmd.node, str(exc), self.name)
            res = ctx.run_command(cmd, self.name)
            if res is None:
                return ctx.fail(cmd.node, f"{self.name} on {cmd.node}: connection lost", self.name)
            if not res.ok:
                why = ctx.failure_text(res)
                return ctx.fail(cmd.node, f"{self.name} failed on {cmd.node}: {why}", self.name)
            if due is not None:
                ctx.result.undo_due.append(due)
            ctx.result.did(cmd.node, self.name)
            ctx.emit(ActionProgress(self.name, cmd.node, cmd.command, "ok"))
        return True


class RunCommand(_PerNode):
    schema = SCHEMAS["run"]

    @staticmethod
    def render(params: Mapping[str, Any], values: Mapping[str, object] | None) -> str:
        template = str(params["command"])
        if values is None:
            command = shell._PLACEHOLDER.sub(lambda m: f"<{m.group(1)}>", template)
            # <node.fabric_if> stands where a quoted value will: root is `sudo -n CMD` as run
            if params.get("root") and shell.simple_words(shell._PLACEHOLDER.sub("X", template)):
                return "sudo -n " + command
        else:
            command = shell.fill(template, values)
        return shell.as_root(command) if params.get("root") else command

    @staticmethod
    def undo_params(params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The undo as a run's own parameters (command, root: the action's unless it says)."""
        undo = params.get("undo")
        if not isinstance(undo, Mapping):
            return None
        return {"command": undo["command"], "root": bool(undo.get("root", params.get("root")))}

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        lines = [self.render(params, None)]
        undo = self.undo_params(params)
        if undo is not None:
            before = params["undo"].get("before")
            line = self.render(undo, None).replace("<before>", f"<{before} before>")
            lines.append(f"# if a later step or the check fails: {line}")
        return lines

    def _values(self, node: NodeConfig, ctx: PlanContext) -> dict[str, object]:
        values = node_values(ctx.cluster, node)
        if ctx.recipe is not None:
            values.update(ctx.recipe.placeholder_values())
        return values

    def _render(
        self, params: Mapping[str, Any], values: Mapping[str, object], node: str, ctx: PlanContext
    ) -> str:
        try:
            return self.render(params, values)
        except KeyError as exc:
            where = "the recipe in use" if str(exc.args[0]).startswith("model.") else "cluster.yaml"
            raise InputError(
                f"fix {ctx.fix_id}: {node} has no value for {{{exc.args[0]}}} (set it in {where})"
            ) from None

    def commands_for(
        self, action: Action, node: NodeConfig, ctx: PlanContext
    ) -> list[PlannedCommand]:
        line = self._render(action.params, self._values(node, ctx), node.name, ctx)
        return [PlannedCommand(node.name, line, bool(action.params.get("root")))]

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        planned = super().plan(index, action, ctx)
        undo = self.undo_params(action.params)
        if undo is None:
            return planned
        spec = action.params["undo"]
        before = spec.get("before")
        undos = []
        for node in ctx.cluster.select(action.on, ctx.seen):
            values = self._values(node, ctx)
            # every placeholder but {before} filled now: one the node lacks fails the plan
            self._render(undo, {**values, "before": BEFORE_MARK}, node.name, ctx)
            template = _fill_all_but_before(str(undo["command"]), values)
            now = (ctx.facts or {}).get(node.name, {}).get(before) if before else None
            undos.append(
                PlannedUndo(
                    node.name,
                    template,
                    bool(undo["root"]),
                    before,
                    str(spec.get("restores") or ""),
                    now,
                )
            )
        return dataclasses.replace(planned, undo=tuple(undos))

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        """The commands, then (commented: never run as a script) what sets each node back
        if a later step or the fix's check fails, with the value read now where known."""
        lines = super().preview_lines(planned)
        if not planned.undo:
            return lines
        before = planned.undo[0].before
        how = ""
        if before is not None:
            now = [f"{u.node} {u.now}" for u in planned.undo if u.now is not None]
            how = f" to its {before} as read on it just before this step" + (
                f" (now: {', '.join(now)})" if now else ""
            )
        lines.append(f"# if a later step or the check fails, each node is set back{how}:")
        lines += [f"#   on {u.node}: {u.preview_command()}" for u in planned.undo]
        return lines


def _fill_all_but_before(template: str, values: Mapping[str, object]) -> str:
    """An undo's command with every placeholder filled (quoted) but {before}: that one is
    read on the node just before the change."""

    def sub(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) == "before" else shell.quote(values[m.group(1)])

    return shell._PLACEHOLDER.sub(sub, template)


class Reboot(_PerNode):
    schema = SCHEMAS["reboot"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        return [shell.as_root("reboot")]

    def commands_for(
        self, action: Action, node: NodeConfig, ctx: PlanContext
    ) -> list[PlannedCommand]:
        return [PlannedCommand(node.name, shell.as_root("reboot"), True)]

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        return [
            *super().preview_lines(planned),
            f"# then wait for each node to answer with a new boot id (≤ {REBOOT_TIMEOUT_S:g} s)",
        ]

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        for cmd in planned.commands:
            transport = ctx.transports.get(cmd.node)
            if transport is None:
                return ctx.fail(cmd.node, f"no connection to {cmd.node}", self.name)
            before = _boot_id(transport)
            ctx.hooks.expect_reboot(cmd.node)  # before the command: the node may drop at once
            res = ctx.run_command(cmd, self.name, timeout=60.0)
            # the connection may drop as the node goes down: that is no failure here
            if res is not None and not res.ok and not res.timed_out:
                why = ctx.failure_text(res)
                return ctx.fail(cmd.node, f"reboot failed on {cmd.node}: {why}", self.name)
            if not _wait_back(transport, cmd.node, before, ctx):
                return ctx.fail(
                    cmd.node,
                    f"{cmd.node} did not come back within {REBOOT_TIMEOUT_S:g} s",
                    self.name,
                )
            ctx.result.did(cmd.node, self.name)
            ctx.emit(ActionProgress(self.name, cmd.node, cmd.command, "ok"))
        return True

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        back = ctx.result.rebooted
        return [VerifyResult(n, "boot id changed", n in back) for n in planned.nodes]


def _boot_id(transport: Transport) -> str | None:
    try:
        res = transport.run(BOOT_ID_COMMAND, timeout=15.0)
    except NodeUnreachable:
        return None
    return res.stdout.strip() if res.ok else None


def _wait_back(transport: Transport, node: str, before: str | None, ctx: RunContext) -> bool:
    """Poll until the node answers with a new boot id, counting down through emit."""
    deadline = ctx.clock.now() + REBOOT_TIMEOUT_S
    while True:
        left = deadline - ctx.clock.now()
        if left <= 0:
            return False
        ctx.emit(
            ActionProgress(
                "reboot", node, None, "running", f"waiting for {node} to come back: {left:.0f} s"
            )
        )
        ctx.clock.sleep(min(REBOOT_POLL_S, left))
        if ctx.stop is not None and ctx.stop.is_set():
            return False  # spark-tui is closing: the node reboots without us watching
        now_id = _boot_id(transport)
        if now_id is not None and now_id != before:
            ctx.journal.append(
                event="reboot-back", run=ctx.run_id, fix=ctx.context, node=node, boot_id=now_id
            )
            ctx.result.rebooted.add(node)
            return True


class MoveAside(_PerNode):
    schema = SCHEMAS["move-aside"]

    @staticmethod
    def render(params: Mapping[str, Any], stamp: str) -> str:
        path = str(params["path"])
        backup = path + BACKUP_SUFFIX.format(stamp=stamp)
        cmd = f"mv -n -- {shell.quote(path)} {shell.quote(backup)}"
        return shell.as_root(cmd) if params.get("root", True) else cmd

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        return [self.render(params, "<timestamp>")]

    def commands_for(
        self, action: Action, node: NodeConfig, ctx: PlanContext
    ) -> list[PlannedCommand]:
        root = bool(action.params.get("root", True))
        return [PlannedCommand(node.name, self.render(action.params, ctx.stamp), root)]


class StopStack(_PerNode):
    schema = SCHEMAS["stop-stack"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        return [GENERIC_STOP_STACK]

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        ok = super().run(planned, ctx)
        ctx.hooks.stopped(tuple(ctx.result.done))
        return ok

    def commands_for(
        self, action: Action, node: NodeConfig, ctx: PlanContext
    ) -> list[PlannedCommand]:
        lines = [stop_leftovers_command(ctx.recipe, ctx.stamp)] if ctx.recipe else []
        return [PlannedCommand(node.name, line) for line in [*lines, GENERIC_STOP_STACK]]

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        out = []
        for node in planned.nodes:
            try:
                res = ctx.transports[node].run(STACK_UP, timeout=30.0)
                up = [n for n in res.stdout.split() if n] if res.ok else ["(docker did not answer)"]
            except NodeUnreachable as exc:
                up = [f"(unreachable: {exc.reason})"]
            what = "no serving container up" + (f" (still up: {', '.join(up)})" if up else "")
            out.append(VerifyResult(node, what, not up))
        return out


class CollectEvidence(_PerNode):
    schema = SCHEMAS["collect-evidence"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        return [f"# collect into the incident report: {', '.join(params.get('items', []))}"]

    def commands_for(
        self, action: Action, node: NodeConfig, ctx: PlanContext
    ) -> list[PlannedCommand]:
        items = action.params.get("items") or ()
        return [
            PlannedCommand(
                node.name,
                evidence_command(
                    item, ctx.recipe, ctx.stamp, node.role, (ctx.containers or {}).get(node.name)
                ),
            )
            for item in items
        ]

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        # read-only: a command that fails is written into the evidence, it stops nothing
        for cmd in planned.commands:
            res = ctx.run_command(cmd, self.name, timeout=120.0)
            text = "(connection lost)" if res is None else res.stdout + res.stderr
            if res is not None and not res.ok:
                text += f"\n({ctx.failure_text(res)})"
            _save_evidence(ctx, cmd, text)
            ctx.result.did(cmd.node, self.name)
            ok = res is not None and res.ok  # saved either way; never shown as read when not
            ctx.emit(ActionProgress(self.name, cmd.node, cmd.command, "ok" if ok else "failed"))
        return True

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        d = ctx.state.evidence_dir / ctx.run_id
        return [VerifyResult(n, "evidence saved", any(d.glob(f"{n}-*.txt"))) for n in planned.nodes]


def _save_evidence(ctx: RunContext, cmd: PlannedCommand, text: str) -> None:
    d = ctx.state.evidence_dir / ctx.run_id
    d.mkdir(parents=True, exist_ok=True)
    n = len(list(d.glob(f"{cmd.node}-*.txt")))
    write_atomic(d / f"{cmd.node}-{n:02d}.txt", f"$ {cmd.command}\n{text}")


KINDS: tuple[type[ActionKind], ...] = (RunCommand, Reboot, MoveAside, StopStack, CollectEvidence)
