"""Setting nodes back when a fix fails: an action with `undo:` reads, on each node just before
it changes it, the fact its undo restores (the MTU the node had); if a later step or the
fix's check fails, each change is undone — per node, last change first — with that node's
own previous value. Every undo command is journaled (a record before it runs and after it
ends, like every command); a journal that cannot be written stops it.
"""

from __future__ import annotations

import re

from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.nodes.transport import NodeUnreachable
from spark_tui.remedy.actions.base import (
    PlannedAction,
    PlannedCommand,
    RunContext,
    UndoDue,
)

# What a node said is data: a value read before a change becomes one word of the undo's
# command (quoted as well), so it must look like a value, never like a command or a path
# out of place. The same characters the sudoers rule allows for it.
_VALUE = re.compile(r"[A-Za-z0-9_.:/@%+-]{1,64}")


def before_change(planned: PlannedAction, cmd: PlannedCommand, ctx: RunContext) -> UndoDue | None:
    """For a command whose action says how to undo it on this node: read the value it
    restores (journaled) and return what to undo once the command has run. Raises
    CannotUndo when that value cannot be read: the change is not made."""
    undo = next((u for u in planned.undo if u.node == cmd.node), None)
    if undo is None:
        return None
    value: object = None
    if undo.before is not None:
        value = _read(undo.before, cmd.node, ctx)
    if undo.root:
        _sudo_allows(undo.command(value), cmd.node, ctx)
    ctx.journal.append(
        event="undo-saved",
        run=ctx.run_id,
        fix=ctx.context,
        node=cmd.node,
        step=planned.index + 1,
        fact=undo.before,
        value=value,
        undo=undo.command(value),
    )
    return UndoDue(planned.index, undo, value)


class CannotUndo(SparkTuiError):
    """The value an undo restores could not be read on a node before the change."""


def _read(fact: str, node: str, ctx: RunContext) -> object:
    why = "nothing here reads it"
    if ctx.read_facts is not None:
        try:
            value = ctx.read_facts(node).get(fact)
        except (SparkTuiError, NodeUnreachable) as exc:
            why = str(getattr(exc, "reason", exc))
        else:
            if value is None:
                why = "the readings do not show it"
            elif isinstance(value, bool) or not _VALUE.fullmatch(str(value)):
                why = f"it read {str(value)[:40]!r}, not a value to set back"
            else:
                return value
    raise CannotUndo(
        f"cannot read {fact} on {node} before the change ({why}), so it could not be set "
        f"back: nothing changed on {node}"
    )


def _sudo_allows(command: str, node: str, ctx: RunContext) -> None:
    """Ask the node's sudo, running nothing (`sudo -n -l CMD`), whether the undo would be
    allowed: a change that could not be set back is not made."""
    why = ""
    transport = ctx.transports.get(node)
    if transport is None or not command.startswith("sudo -n "):
        why = "no way to ask its sudo"
    else:
        try:
            res = transport.run("sudo -n -l " + command[len("sudo -n ") :], timeout=30.0)
        except NodeUnreachable as exc:
            why = exc.reason
        else:
            if not res.ok:
                why = "sudo -n -l refused it" + (
                    f": {res.stderr.strip()[:160]}" if res.stderr.strip() else ""
                )
    if why:
        raise CannotUndo(
            f"sudo on {node} would not let spark-tui set it back with '{command}' ({why}): "
            f"nothing changed on {node}; 'spark-tui doctor' prints the sudoers rule to allow it"
        )


def set_back(ctx: RunContext) -> None:
    """Undo every change the run made that says how, last first, each node to its own
    previous value; a failed undo does not stop the others. The result says what was set
    back and what was not (with the command to run by hand)."""
    result = ctx.result
    while result.undo_due:
        d = result.undo_due.pop()  # the last change first
        why = ""
        if ctx.transports.get(d.node) is None:
            why = f"no connection to {d.node}"
        else:
            try:
                res = ctx.run_command(PlannedCommand(d.node, d.command, d.undo.root), "undo", 120.0)
            except BaseException:  # interrupted, the journal unwritable: still to set back
                result.undo_due.append(d)
                raise
            if res is None:
                why = "connection lost"
            elif not res.ok:
                why = ctx.failure_text(res)
        if why:
            result.undo_failed.append((d, why))
            ctx.emit(ActionProgress("undo", d.node, d.command, "failed", why))
        else:
            result.undone.append(d)
            ctx.emit(ActionProgress("undo", d.node, d.command, "ok", d.undo.says(d.value)))


def said(undone: list[UndoDue], failed: list[tuple[UndoDue, str]]) -> str:
    """'spark1 and spark2 set back to MTU 1500' (grouped by what was set back), then any
    node that was not, with the command that would set it back."""
    groups: dict[str, list[str]] = {}
    for d in reversed(undone):  # undone last change first: said in the order they were made
        nodes = groups.setdefault(d.undo.says(d.value), [])
        if d.node not in nodes:
            nodes.append(d.node)
    parts = [f"{_and(nodes)} {what}" for what, nodes in groups.items()]
    parts += [f"{d.node} NOT set back ({why}): run '{d.command}' there" for d, why in failed]
    return "; ".join(parts)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
