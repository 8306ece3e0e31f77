"""What happens next, decided in one place.

The driver looks at one session — its recipe, the doctor's report, the active diagnoses,
the launches so far and what every `Session.apply` did — and names the next move:

    adopt   the deployment running now becomes the recipe (none was named)
    doctor  read-only preflight of every node (before the first launch)
    fix     the fix a diagnosis calls for: before the first launch for every wall the
            doctor found or predicted; after a launch for the wall that stopped it (one
            relaunch per diagnosis: the session's guard)
    launch  the first launch, or the relaunch a fix asked for
    soak    a few requests after the first answer (some walls show only under load)
    serving / stuck   the end: it serves, or why nothing more happens by itself

`take` runs a move, everything through `Session.apply` (journaled, confirmed, verified on
fresh readings). Every apply — the driver's, a fix or relaunch the user runs in the TUI —
reaches the driver (`Session.subscribe_applied`), so what it says next is always true.
`up`, the TUI's bring-up screen and status line, and `watch --auto-relaunch` are views of
it: each shows its moves and their verdicts (`Step`, one presenter: `step_event`).

Which fix first (`offer`): the most severe active wall, a node's readings before the
recipe's checks before log lines (a log line is the symptom; the readings hold its root
cause), then the earliest; of its fixes (its chosen cause's first) the first that changes something here —
never one that only gathers evidence (that runs as the wall is raised).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.diagnosis import DiagnosisSnapshot, source_kind
from spark_tui.kb.schema import SEVERITY_RANK, Fix
from spark_tui.remedy.actions import kind
from spark_tui.remedy.evidence import evidence_only
from spark_tui.remedy.fixes import Confirm, FixPlan, FixResult
from spark_tui.remedy.launch import AutoRelaunchGuard

if TYPE_CHECKING:
    from spark_tui.event_lines import LineEvent
    from spark_tui.nodes.doctor import DoctorReport
    from spark_tui.session import Session

Progress = Callable[[ActionProgress], None]
SOAK_REQUESTS = 8  # requests after the first answer: some walls show only after a few
SETTLE_ROUNDS = 3  # monitor rounds watched after a launch or the soak before judging it
MAX_LAUNCHES = 4
NOT_CONFIRMED = "not confirmed: nothing ran"
END = ("serving", "stuck")


@dataclass(frozen=True)
class Move:
    """The next thing the driver would do, and why (what a hint says)."""

    kind: str  # adopt | doctor | fix | launch | soak | serving | stuck
    why: str
    diagnosis: DiagnosisSnapshot | None = None
    fix: Fix | None = None
    relaunches: bool = False  # a fix whose plan relaunches the recipe

    @property
    def wall(self) -> str | None:
        return self.diagnosis.wall.id if self.diagnosis is not None else None


@dataclass(frozen=True)
class Step:
    """A move taken, and its verdict."""

    kind: str  # adopt | doctor | fix | launch | soak | serving | stuck | refused
    ok: bool
    wall: str | None = None
    fix: str | None = None
    launch: int | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict, compare=False)

    def verdict(self) -> tuple[str, bool, str | None, str | None]:
        """What two front ends must agree on: the step, how it ended, its wall and fix."""
        return (self.kind, self.ok, self.wall, self.fix)


SOURCE_ORDER = {"readings": 0, "recipe": 1, "log": 2}


def rank(d: DiagnosisSnapshot) -> tuple:
    """The order walls are fixed in: most severe; a root cause before a symptom — what a
    node's readings show, then what the recipe's checks predict, then a log line; then the
    earliest (and the wall's id: the same order every time)."""
    return (
        SEVERITY_RANK[d.severity],
        SOURCE_ORDER[source_kind(d.source)],
        d.first_seen,
        d.wall.id,
        d.line,
    )


def diagnosis_key(d: DiagnosisSnapshot) -> str:
    """The guard's key of one diagnosis (one episode of a wall on one node or source)."""
    return f"{d.wall.id}@{d.node or d.source}#{int(d.first_seen)}"


def _relaunches(fix: Fix) -> bool:
    return any(kind(a.type).relaunches for a in fix.actions)


def changes_nodes_disruptively(fix: Fix) -> bool:
    """A fix that is not safe and changes a node itself (a link's MTU, GPU clocks, a file, a
    reboot), not only the recipe: root or not, the node is left different."""
    return fix.risk != "safe" and any(
        k.on_nodes and not (k.collects_evidence or k.relaunches)
        for k in (kind(a.type) for a in fix.actions)
    )


def unattended_fix(fix: Fix) -> bool:
    """A fix an automatic relaunch may take with nobody asked: it relaunches, and every
    action can be taken back (a relaunch, evidence, a recipe revision undo restores)."""

    def undoable(action_type: str) -> bool:
        k = kind(action_type)
        return (
            k.relaunches
            or k.collects_evidence
            or (k.changes_recipe and not k.replaces_recipe and not k.on_nodes)
        )

    return _relaunches(fix) and all(undoable(a.type) for a in fix.actions)


@dataclass(frozen=True)
class RelaunchDecision:
    """What to do after a crash: relaunch once without asking, or ask (and why)."""

    relaunch: bool
    wall: str | None
    reason: str
    fix: str | None = None  # the wall's fix that relaunches
    node: str | None = None


def decide_after_crash(
    diagnoses: list[DiagnosisSnapshot],
    guard: AutoRelaunchGuard,
    when: float,
    changes: Callable[[DiagnosisSnapshot, Fix], bool] = lambda _d, _f: True,
) -> RelaunchDecision:
    """After a crash with nobody asked: the wall `offer` would fix first, relaunched at most
    once per diagnosis and once per wall, and only by a fix that can be taken back."""
    errors = sorted((d for d in diagnoses if d.active and d.severity == "error"), key=rank)
    if not errors:
        return RelaunchDecision(False, None, "no diagnosis: nothing restarts blindly; read the log")
    for d in errors:
        fixes = [f for f in _remedial(d) if changes(d, f)]
        if not fixes:
            continue
        auto = [f for f in fixes if unattended_fix(f)]
        if not auto:
            return RelaunchDecision(
                False,
                d.wall.id,
                f"{d.wall.id}: its fix ({fixes[0].id}) does not relaunch by itself or cannot be "
                "undone; ask",
                fixes[0].id,
                d.node,
            )
        fix = auto[0]
        if not guard.claim(diagnosis_key(d), when, wall=d.wall.id):
            return RelaunchDecision(
                False,
                d.wall.id,
                f"{d.wall.id}: already relaunched once automatically; a second automatic relaunch "
                "on the same wall is refused (ask the user)",
                fix.id,
                d.node,
            )
        return RelaunchDecision(
            True, d.wall.id, f"{d.wall.id}: one automatic relaunch ({fix.id})", fix.id, d.node
        )
    d = errors[0]
    return RelaunchDecision(
        False,
        d.wall.id,
        f"{d.wall.id}: no fix of this wall changes anything here; ask",
        None,
        d.node,
    )


def changes_something(fix: Fix, lines: list[str]) -> bool:
    """False when a fix's planned lines here would leave everything as it is: every recipe
    patch it makes is there already (and the rest only relaunches), or it cannot be planned."""
    if any(line.startswith("# cannot plan") for line in lines):
        return False
    kinds = [kind(a.type) for a in fix.actions]
    patches = sum(k.changes_recipe and not k.replaces_recipe and not k.on_nodes for k in kinds)
    if patches == 0 or any(
        not (k.relaunches or k.collects_evidence or k.changes_recipe)
        or k.on_nodes
        or k.replaces_recipe
        for k in kinds
    ):
        return True
    return sum("# (no change" in line for line in lines) < patches


def reads_only(fix: Fix) -> bool:
    """A fix whose every action runs a command that only reads (`ss -ltnp`, `dmesg -T`): it
    shows something and changes nothing, so a relaunch after it would fail the same way."""
    from spark_tui.kb.readonly import read_only_problem

    def shows(command: object) -> bool:
        # read-only by kb.readonly's rule, less the one write it allows at `safe` (dropping
        # the page cache frees memory: a remedy, not a look)
        return (
            isinstance(command, str)
            and read_only_problem(command) is None
            and "drop_caches" not in command
        )

    return all(a.type == "run" and shows(a.params.get("command")) for a in fix.actions)


def _remedial(d: DiagnosisSnapshot) -> list[Fix]:
    """A diagnosis's fixes in order (its cause's first), without the ones that only gather
    evidence or only read (shown to the user, never a remedy to relaunch on)."""
    out = []
    for fid in d.fixes():
        fix = d.wall.fix(fid)
        if fix is not None and not evidence_only(fix) and not reads_only(fix):
            out.append(fix)
    return out


def fix_for(d: DiagnosisSnapshot, changes: Callable[[Fix], bool]) -> Fix | None:
    """The fix of a diagnosis to apply first: its cause's first that changes something here
    (`changes`), never one that only gathers evidence."""
    return next((f for f in _remedial(d) if changes(f)), None)


class Driver:
    """The next step of one session's bring-up and recovery (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.report: DoctorReport | None = None
        self.launches = 0
        self.launch_ok: bool | None = None  # how the newest launch went
        self.tok_s: float | None = None
        self.soaked = False
        self.relaunch_due = False  # a fix ran after a launch: the next launch proves it
        self.tried: set[str] = set()  # walls a fix was tried for before the first launch
        self.fixes: list[tuple[str, str]] = []  # (wall, fix) applied, in order
        self.steps: list[Step] = []
        self.stuck: str | None = None
        self._listeners: list[Callable[[Step], None]] = []
        self._lock = threading.Lock()
        self._taking = False
        self._settled = False  # settle(): one round read before the first decision
        session.subscribe_applied(self._applied)

    def reset(self) -> None:
        """Start over (another recipe): doctor, fixes and launches counted anew."""
        self.report, self.launches, self.launch_ok, self.tok_s = None, 0, None, None
        self.soaked, self.relaunch_due, self.stuck = False, False, None
        self.tried.clear()

    # ---- what happens next ---------------------------------------------------------
    def offer(self, severities: tuple[str, ...] = ("error", "warning")) -> Move | None:
        """The fix to offer first now (the one key's offer, the status line's hint): before
        the first launch, the fix `next_move` takes before it (a wall the doctor found or
        predicts, fixed without a relaunch); else the first wall by `rank` with a fix."""
        if self.launches == 0 and not self.relaunch_due:
            pre = self._before_launch(severities)
            if pre is not None:
                return pre
        for d in sorted(self._active(severities), key=rank):
            fix = self.fix_for(d)
            if fix is not None:
                return Move("fix", f"{d.wall.id}: {fix.title}", d, fix, _relaunches(fix))
        return None

    def fix_for(self, d: DiagnosisSnapshot) -> Fix | None:
        return fix_for(d, lambda f: self.changes(d, f))

    def next_move(self) -> Move:
        s = self.session
        if self.stuck is not None:
            return Move("stuck", self.stuck)
        if s.recipe() is None:
            if s.running_engine() is not None:
                return Move("adopt", "no recipe named: adopt the deployment running now")
            return Move(
                "stuck",
                "no recipe to bring up and no engine running to adopt: name one in "
                "cluster.yaml (recipe: ID) or with --recipe (spark-tui recipes list)",
            )
        if self.launches == 0:
            if self.report is None:
                return Move("doctor", "read-only preflight of every node")
            if not self.report.reachable:
                return Move("stuck", "a node cannot be reached: see the doctor's report")
            pre = self._before_launch()
            if pre is not None:
                return pre
            return Move("launch", f"launch {self._recipe_label()}")
        if self.relaunch_due:
            return Move("launch", f"relaunch {self._recipe_label()} with the fix")
        errors = self._active(("error",))
        if errors or self.launch_ok is False:
            move = self.offer(("error",)) or self._blocker()
            if move is None or move.diagnosis is None:
                return Move("stuck", "no diagnosis with a fix: nothing restarts blindly")
            if not self.session.guard.allowed(diagnosis_key(move.diagnosis)):
                return Move("stuck", f"{move.wall}: already relaunched once for it")
            if self.launches >= MAX_LAUNCHES:
                return Move("stuck", f"{self.launches} launches: stopping here")
            return move
        if not self.soaked:
            return Move("soak", "a few requests after the first answer")
        return Move("serving", f"serving {self._recipe_label()}")

    def _blocker(self) -> Move | None:
        """A launch that failed with no wall active now: the readings wall that stopped it
        (seen during the launch, cleared since, e.g. by the launch's own stop) names it."""
        since = self.session._last_launch_at
        if self.launch_ok is not False or since is None:
            return None
        seen = [
            d
            for d in self.session.diagnoses(True)
            if d.severity == "error" and d.last_seen >= since and source_kind(d.source) != "log"
        ]
        for d in sorted(seen, key=rank):
            fix = self.fix_for(d)
            if fix is not None:
                return Move("fix", f"{d.wall.id} stopped the launch", d, fix, _relaunches(fix))
        return None

    def _before_launch(self, severities: tuple[str, ...] = ("error", "warning")) -> Move | None:
        """A wall the doctor found or predicts, fixed before the launch: every active error
        or warning with a fix that changes something and neither relaunches nor replaces
        the recipe (the launch comes next anyway); a log wall's destructive fix is never
        taken for an old line. A warning does not stop a launch (it serves, slower or less
        safe): its fix is taken first only when it is safe or changes the recipe alone — a
        disruptive change to a node for it (fabric-slow's MTU, GPU clocks) is offered, never
        made before a launch nobody asked it for."""
        active = self._active(severities)
        seen = {(d.wall.id, d.node) for d in active}
        predicted = [  # what the doctor's readings predict, its durations not waited for
            d.snapshot()
            for d in (self.report.predicted if self.report is not None else [])
            if (d.wall.id, d.node) not in seen and d.severity in severities
        ]
        for d in sorted(active + predicted, key=rank):
            if d.wall.id in self.tried:
                continue
            fix = self.fix_for(d)
            if fix is None:
                continue
            kinds = [kind(a.type) for a in fix.actions]
            if any(k.relaunches or k.replaces_recipe for k in kinds):
                continue
            if source_kind(d.source) == "log" and fix.risk == "destructive":
                continue
            if d.severity != "error" and changes_nodes_disruptively(fix):
                continue
            return Move("fix", f"{d.wall.id}: fixed before the launch", d, fix)
        return None

    # ---- taking a move ---------------------------------------------------------------
    def take(
        self,
        move: Move,
        confirm: Confirm | None = None,
        progress: Progress | None = None,
        *,
        yes: bool = False,
    ) -> Step | None:
        """Run one move (through Session.apply); the step it ended in (None for an end)."""
        s = self.session
        if move.kind in END:
            return None
        if move.kind == "adopt":
            recipe, text = s.adopt_running()
            question = f"Adopt the deployment running now as recipe {recipe.id} and use it?"
            if not yes and (confirm is None or not confirm(question, ())):
                return self._refused("adopt", NOT_CONFIRMED.replace("ran", "saved"))
            s.save_adopted(recipe, text)
            return self._record(Step("adopt", True, detail=recipe.id, data={"text": text}))
        if move.kind == "doctor":
            from spark_tui.nodes.doctor import doctor_summary

            self.report = s.doctor()
            failed = [c.to_json() for c in self.report.checks if c.status == "fail"]
            return self._record(
                Step(
                    "doctor",
                    bool(self.report.reachable) and not failed,
                    detail=doctor_summary(self.report),
                    data={"report": self.report, "failed": failed},
                )
            )
        if move.kind == "soak":
            ok = self._soak()
            self._rounds(SETTLE_ROUNDS)
            self.soaked = True
            if not ok:
                self.launch_ok = False
            return self._record(Step("soak", ok, launch=self.launches))
        if move.kind == "launch":  # refused, it is the launch step that was (not "relaunch")
            return self._apply(s.plan_launch(), confirm, progress, yes, name="launch")
        assert move.diagnosis is not None and move.fix is not None
        plan = s.plan_fix(move.diagnosis, move.fix)
        if self.launches == 0:
            self.tried.add(move.diagnosis.wall.id)
        elif not s.guard.claim(diagnosis_key(move.diagnosis), s.clock.now()):
            self.stuck = f"{move.wall}: already relaunched once for it"
            return None
        return self._apply(plan, confirm, progress, yes)

    def _apply(
        self,
        plan: FixPlan,
        confirm: Confirm | None,
        progress: Progress | None,
        yes: bool,
        name: str | None = None,
    ) -> Step | None:
        with self._lock:
            self._taking = True
            before = len(self.steps)
        try:
            result = self.session.apply(plan, confirm, progress, yes=yes)
        finally:
            self._taking = False
        if result.message == NOT_CONFIRMED:
            return self._refused(name or plan.fix.id, NOT_CONFIRMED)
        if plan.relaunches:
            self._rounds(SETTLE_ROUNDS if not result.ok else 1)
        return self.steps[-1] if len(self.steps) > before else None

    def _refused(self, what: str, why: str) -> Step:
        self.stuck = why
        return self._record(Step("refused", False, fix=what, detail=why))

    def run(
        self,
        confirm: Confirm | None = None,
        progress: Progress | None = None,
        *,
        yes: bool = False,
        until: Callable[[Move], bool] = lambda m: m.kind in END,
    ) -> Move:
        """Take moves until `until` holds for the next one (by default: the end); it."""
        self.settle()
        while True:
            move = self.next_move()
            if until(move):
                return move
            self.take(move, confirm, progress, yes=yes)

    def settle(self) -> None:
        """Before the first decision: one monitor round of every node taken after the
        session opened and its lines matched (what runs, what the readings say), so `up`,
        the bring-up screen and `watch --auto-relaunch` decide from the same state, never
        from how soon each got there. Once per driver; later calls return at once."""
        with self._lock:
            if self._settled:
                return
            self._settled = True
        self._rounds(1)

    def end(self) -> Step:
        """Say how it ended (serving, or stuck and why): the last step."""
        move = self.next_move()
        if move.kind == "serving":
            return self._record(Step("serving", True, launch=self.launches, detail=move.why))
        return self._record(Step("stuck", False, detail=move.why))

    # ---- what every apply tells the driver ----------------------------------------------
    def _applied(self, plan: FixPlan, result: FixResult) -> None:
        """Any plan the session ran (the driver's, or one the user ran from a screen)."""
        if plan.fix.id not in ("relaunch", "stop") and plan.wall:
            if self.launches == 0:
                self.tried.add(plan.wall)
            elif not self._taking:  # the user applied it: it counts as this wall's relaunch
                self._claim_for(plan.wall)
            self.fixes.append((plan.wall, plan.fix.id))
            data: dict[str, Any] = {"plan": plan, "result": result}
            self._record(
                Step("fix", result.ok, plan.wall, plan.fix.id, detail=result.summary(), data=data)
            )
            if self.launches > 0 and result.ok and not plan.relaunches:
                self.relaunch_due = True
        if plan.fix.id == "stop":
            return
        if plan.relaunches:
            self.launches += 1
            self.launch_ok = result.ok
            self.relaunch_due = False
            self.soaked = False
            self.stuck = None
            if result.tok_s is not None:
                self.tok_s = result.tok_s
            self._record(
                Step(
                    "launch",
                    result.ok,
                    launch=self.launches,
                    detail=result.summary() if result.ok else result.message,
                    data={"tok_s": result.tok_s, "recipe": self._recipe_label()},
                )
            )

    def _claim_for(self, wall: str) -> None:
        s = self.session
        for d in s.diagnoses(True):
            if d.wall.id == wall:
                s.guard.claim(diagnosis_key(d), s.clock.now())

    # ---- listeners ------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[Step], None]) -> None:
        """Every step as it ends (from the thread that took it)."""
        self._listeners.append(listener)

    def _record(self, step: Step) -> Step:
        self.steps.append(step)
        for listener in list(self._listeners):
            listener(step)
        return step

    # ---- helpers ----------------------------------------------------------------------------
    def _active(self, severities: tuple[str, ...]) -> list[DiagnosisSnapshot]:
        return [d for d in self.session.diagnoses() if d.active and d.severity in severities]

    def changes(self, d: DiagnosisSnapshot, fix: Fix) -> bool:
        """Whether a fix's plan here changes something (`changes_something`). With no recipe
        yet, a fix that patches one counts: adopting what runs comes first (`adopt`)."""
        if self.session.recipe() is None and any(kind(a.type).changes_recipe for a in fix.actions):
            return True
        return changes_something(fix, self.session.fix_lines(d, fix))

    def _recipe_label(self) -> str:
        r = self.session.recipe()
        return r.id if r is not None else "the recipe"

    def _rounds(self, n: int) -> None:
        if self.session.monitor is not None:
            self.session.monitor.wait_rounds(n)

    def _soak(self, requests: int = SOAK_REQUESTS) -> bool:
        """A few more requests after the first answer: every one must answer."""
        for _ in range(requests):
            try:
                ok, _what = self.session.chat_request()
            except SparkTuiError:
                return False
            if not ok:
                return False
        return True


def step_events(step: Step, recipe: Any = None) -> list[LineEvent]:
    """The lines of a step (`up --json`, `watch --json --auto-relaunch`): the one event
    language of spark_tui.event_lines. `recipe`: the recipe in use after the step."""
    from spark_tui import event_lines as ev

    if step.kind == "doctor":
        report = step.data.get("report")
        checks = report.checks if report is not None else ()
        return [
            ev.DoctorRan(
                reachable=tuple(report.reachable) if report is not None else (),
                passed=sum(c.status == "pass" for c in checks),
                warnings=sum(c.status == "warn" for c in checks),
                failed=tuple(step.data.get("failed", [])),
            )
        ]
    if step.kind == "fix":
        plan = step.data.get("plan")
        before = plan.recipe if plan is not None else None
        changed = recipe is not None and (
            before is None or (recipe.id, recipe.revision) != (before.id, before.revision)
        )
        return [
            ev.FixApplied(
                wall=step.wall or "",
                fix=step.fix or "",
                risk=plan.fix.risk if plan is not None else "",
                nodes=tuple(plan.nodes) if plan is not None else (),
                ok=step.ok,
                summary=step.detail,
                recipe=recipe.id if changed else None,
                revision=recipe.revision if changed else None,
                switched_from=before.id if changed and before and before.id != recipe.id else None,
            )
        ]
    if step.kind == "launch":
        n = step.launch or 0
        out: list[LineEvent] = [ev.Launched(launch=n, recipe=step.data.get("recipe"))]
        if step.ok:
            out.append(ev.Serving(launch=n, tok_s=step.data.get("tok_s")))
        else:
            out.append(ev.LaunchFailed(launch=n, why=step.detail))
        return out
    if step.kind == "adopt":
        return [ev.Adopted(recipe=step.detail, text=step.data.get("text", ""))]
    if step.kind == "soak":
        if step.ok:
            return []
        return [ev.LaunchFailed(launch=step.launch or 0, why="a request after the first failed")]
    if step.kind == "refused":
        return [ev.Refused(fix=step.fix or "", why=step.detail)]
    if step.kind == "serving":
        return []
    return [ev.Stuck(why=step.detail)]
