"""What every kind of fix action is: its parameters, its plan per node, its preview, how it
runs and what it verifies. One class per kind (the registry in this package); the engine
(spark_tui.remedy.fixes) and the knowledge base's loader only talk to this interface.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from spark_tui.action_schemas import ActionSchema
from spark_tui.clock import Clock
from spark_tui.events import ActionProgress
from spark_tui.kb.schema import Action
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.transport import CommandResult, NodeUnreachable, Transport
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.remedy.journal import TIMED_OUT, Journal

if TYPE_CHECKING:
    from spark_tui.kb.matcher import Matcher
    from spark_tui.recipes.revisions import RevisionStore
    from spark_tui.state import StateDir

Emit = Callable[[ActionProgress], None]
NO_RECIPE = (
    "it needs a recipe — name one in cluster.yaml (recipe: ID), or adopt the deployment "
    "running now as one (spark-tui recipes adopt)"
)
RISK_ORDER = ("safe", "disruptive", "destructive")
TARGET_WORDS = {
    "all": "every node",
    "head": "the head",
    "workers": "every worker",
    "seen": "the node where it was seen",
}


@dataclass(frozen=True)
class PlannedCommand:
    """One exact command on one node."""

    node: str
    command: str
    root: bool = False


BEFORE_MARK = "SPARKTUIBEFORE"  # where {before} stands in a preview with no reading yet


@dataclass(frozen=True)
class PlannedUndo:
    """How one node is set back if a later step or the fix's check fails: `template` (the
    undo's command, its node values filled at plan time, `{before}` filled at run time with
    the fact `before` read on the node just before the change), as root or not; `now`: that
    fact in the readings the plan was made from (the preview shows it; the run reads again)."""

    node: str
    template: str
    root: bool
    before: str | None = None
    restores: str = ""  # in words, `{before}` filled: e.g. "MTU {before}"
    now: object = None

    def command(self, value: object) -> str:
        """The exact command, `value` the fact as read before the change."""
        from spark_tui import shell

        filled = shell.fill(self.template, {"before": value}) if self.before else self.template
        return shell.as_root(filled) if self.root else filled

    def preview_command(self) -> str:
        """The command as the preview shows it: with the value read now, else a mark."""
        if self.before is None:
            return self.command(None)
        if self.now is not None:
            return self.command(self.now)
        return self.command(BEFORE_MARK).replace(BEFORE_MARK, f"<{self.before} before>")

    def says(self, value: object) -> str:
        """What setting it back did, in words: 'set back to MTU 1500', else the command."""
        if self.restores:
            return "set back to " + self.restores.replace("{before}", str(value))
        if self.before is not None:
            return f"set back to {self.before} {value}"
        return f"set back ({self.command(value)})"


@dataclass(frozen=True)
class UndoDue:
    """A change made on a node that is set back if the fix fails after it."""

    action: int  # the index of the action that made it
    undo: PlannedUndo
    value: object  # the fact as read just before the change (None: the undo reads none)

    @property
    def node(self) -> str:
        return self.undo.node

    @property
    def command(self) -> str:
        return self.undo.command(self.value)


@dataclass(frozen=True)
class PlannedAction:
    """One action of a fix, rendered for the cluster (what the preview shows is what runs)."""

    index: int
    type: str
    commands: tuple[PlannedCommand, ...] = ()
    recipe_before: Recipe | None = None
    recipe_after: Recipe | None = None  # patch-recipe, restart-ray
    patch: Mapping[str, Any] = field(default_factory=dict)  # the change, to rebase on commit
    diff: str = ""
    switch_to: str | None = None
    launch: LaunchPlan | None = None  # relaunch, restart-ray: the steps it runs
    items: tuple[str, ...] = ()  # collect-evidence
    undo: tuple[PlannedUndo, ...] = ()  # run with `undo:`: per node, how it is set back

    @property
    def kind(self) -> ActionKind:
        from spark_tui.remedy.actions import kind

        return kind(self.type)

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
        return self.kind.preview_lines(self)


@dataclass(frozen=True)
class PlanContext:
    """What planning an action needs: the cluster, the recipe as the previous actions of the
    fix leave it (patches chain), where the wall was seen, the stamp of backups and renamed
    containers, and the recipe book (switch-recipe)."""

    cluster: ClusterConfig
    recipe: Recipe | None
    seen: str | None
    stamp: str
    fix_id: str
    recipes: Mapping[str, Recipe] | None = None
    # node -> the serving container running there (an attached deployment, no recipe)
    containers: Mapping[str, str] | None = None
    # node -> its facts in the readings at hand (what an undo's preview shows as `before`)
    facts: Mapping[str, Mapping[str, object]] | None = None


@dataclass(frozen=True)
class VerifyResult:
    node: str | None
    condition: str
    holds: bool


class SessionHooks(Protocol):
    """What an action tells the session it runs in (the monitor, the recipe in use)."""

    def expect_reboot(self, node: str) -> None:
        """spark-tui is about to reboot this node: its new boot id is not a surprise."""

    def launching(self, plan: LaunchPlan) -> None:
        """A launch of this plan begins: a new attempt (earlier log walls are history)."""

    def launch_blocker(self) -> str | None:
        """An error wall of this attempt that ends a launch's wait early ('wall: evidence'),
        or None: waiting out a startup timeout for a deadlocked engine helps nobody."""

    def line_seen(self, node: str, text: str) -> threading.Event | None:
        """An event set when a log line holding `text` arrives from `node` (the live monitor
        follows the launch's logs): a launch's wait looks at once instead of at its next
        poll. None: nothing follows the logs here (the wait polls only)."""

    def stopped(self, nodes: tuple[str, ...]) -> None:
        """The serving stack was stopped on these nodes."""

    def recipe_changed(self, recipe: Recipe) -> None:
        """The recipe in use changed (a revision committed, another recipe chosen): what runs
        next, and what the readings are judged against, follow it at once."""


class NoHooks:
    def expect_reboot(self, node: str) -> None:
        pass

    def launching(self, plan: LaunchPlan) -> None:
        pass

    def launch_blocker(self) -> str | None:
        return None

    def line_seen(self, node: str, text: str) -> threading.Event | None:
        return None

    def stopped(self, nodes: tuple[str, ...]) -> None:
        pass

    def recipe_changed(self, recipe: Recipe) -> None:
        pass


@dataclass
class RunContext:
    """What running a planned action needs, and where it reports."""

    transports: Mapping[str, Transport]
    journal: Journal
    clock: Clock
    revisions: RevisionStore
    state: StateDir
    run_id: str
    context: str  # the fix id (or "relaunch", "stop", …), for the journal
    emit: Emit
    result: Any  # spark_tui.remedy.fixes.FixResult
    hooks: SessionHooks = field(default_factory=NoHooks)
    stop: threading.Event | None = None  # set when spark-tui is closing: waits end early
    matcher: Matcher | None = None  # the session's: a launch's wait ends on its error walls
    # a node's readings taken now (an undo's `before`, read just before the change)
    read_facts: Callable[[str], Mapping[str, object]] | None = None

    def fail(self, node: str | None, message: str, step: str) -> bool:
        r = self.result
        r.ok, r.failed_node, r.message = False, node, message
        self.emit(ActionProgress(step, node, None, "failed", message))
        return False

    def run_command(
        self, cmd: PlannedCommand, action: str, timeout: float = 300.0
    ) -> CommandResult | None:
        """Run one command with its journal records around it (written before it starts).
        None when the node dropped (journaled as `connection lost`)."""
        transport = self.transports.get(cmd.node)
        if transport is None:
            self.fail(cmd.node, f"no connection to {cmd.node}", action)
            return None
        self.emit(ActionProgress(action, cmd.node, cmd.command, "running"))
        with self.journal.command(self.run_id, self.context, cmd.node, action, cmd.command) as rec:
            try:
                res = transport.run(cmd.command, timeout=timeout)
            except NodeUnreachable as exc:
                rec.finish(None, exc.reason, outcome="connection lost")
                return None
            rec.finish(
                None if res.timed_out else res.exit_code,
                res.tail(),
                outcome=TIMED_OUT if res.timed_out else "exit",
            )
        return res

    def failure_text(self, res: CommandResult) -> str:
        """Why a command failed, in one line."""
        from spark_tui.remedy.launch import failure_text

        return failure_text(res)


class ActionKind(abc.ABC):
    """One kind of action: its parameter schema, plan, preview, run and verify."""

    schema: ClassVar[ActionSchema]  # what a fix may say (spark_tui.action_schemas)

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def min_risk(self) -> str:
        return self.schema.min_risk

    @property
    def needs_root(self) -> bool:
        return self.schema.needs_root

    @property
    def relaunches(self) -> bool:
        return self.schema.relaunches

    @property
    def changes_recipe(self) -> bool:
        return self.schema.changes_recipe

    @property
    def replaces_recipe(self) -> bool:
        return self.schema.replaces_recipe

    @property
    def collects_evidence(self) -> bool:
        return self.schema.collects_evidence

    @property
    def on_nodes(self) -> bool:
        return self.schema.on_nodes

    @property
    def summary(self) -> str:
        return self.schema.summary

    # ---- the knowledge base ------------------------------------------------------------
    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        """The action rendered without a cluster (placeholders shown as <node.fabric_if>)."""
        return [f"# {self.name}"]

    # ---- a cluster -----------------------------------------------------------------------
    @abc.abstractmethod
    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        """Render the action for the real nodes (raises InputError for what is missing)."""

    def recipe_after(self, planned: PlannedAction, ctx: PlanContext) -> Recipe | None:
        """The recipe the next action of the fix sees."""
        return planned.recipe_after if planned.recipe_after is not None else ctx.recipe

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        """'# N. kind on nodes' then the exact commands per node."""
        head = f"# {planned.index + 1}. {self.name}"
        lines = [head + (f" on {', '.join(planned.nodes)}" if planned.nodes else "")]
        lines += per_node_lines(planned.commands)
        return lines

    @abc.abstractmethod
    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        """Run it; False (with ctx.fail) stops the fix."""

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        """What the action itself can check once it ran (beyond the fix's conditions)."""
        return []


def per_node_lines(commands: tuple[PlannedCommand, ...]) -> list[str]:
    """Commands grouped under '# on NODE:' headers."""
    lines: list[str] = []
    node = None
    for c in commands:
        if c.node != node:
            node = c.node
            lines.append(f"# on {node}:")
        lines.append(c.command)
    return lines
