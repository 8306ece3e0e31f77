"""`spark-tui up`: the guided bring-up, headless, through one session.

doctor → the fixes its findings call for → launch → watch the startup and a short soak of
requests → on a wall, the fix its cause calls for and one relaunch per diagnosis → smoke
request and tok/s. Every step reports an event (a dict with "event"); the last one is

    {"event": "done", "serving": true|false, "launches": N, "recipe": ID,
     "active": [{"wall": ID, "severity": S, "node": N}, …]}

Nothing restarts blindly: a relaunch needs a diagnosis, and each diagnosis gets one
(the session's auto-relaunch guard). A disruptive or destructive step is confirmed by the
caller's `confirm` (the CLI asks on a terminal, or takes --yes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from spark_tui.errors import SparkTuiError
from spark_tui.event_lines import (
    ActiveWall,
    Adopted,
    AppliedFix,
    DiagnosisSeen,
    DoctorRan,
    Done,
    FixApplied,
    Launched,
    LaunchFailed,
    LineEvent,
    RecipeChosen,
    Refused,
    Serving,
    Stuck,
    WallResolved,
    diagnosis_seen,
    line,
    wall_resolved,
)
from spark_tui.events import ActionProgress, DiagnosisRaised, DiagnosisResolved, Event
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.schema import SEVERITY_RANK, Fix
from spark_tui.kb.source import READINGS
from spark_tui.remedy.evidence import evidence_only
from spark_tui.remedy.fixes import Confirm, FixPlan, FixResult
from spark_tui.session import Session

EmitEvent = Callable[[dict[str, Any]], None]  # receives each event's line (event_lines.line)
Say = Callable[[LineEvent], dict[str, Any]]  # says an event; returns its line
SOAK_REQUESTS = 8  # requests after the first answer: some walls show after a few (seed 003)
SETTLE_ROUNDS = 3  # monitor rounds watched after the soak before calling it serving
MAX_LAUNCHES = 4


@dataclass
class UpRun:
    """What `up` did so far."""

    launches: int = 0
    serving: bool = False
    tok_s: float | None = None
    fixes: list[tuple[str, str]] = field(default_factory=list)  # (wall, fix)
    announced: set[tuple[str, str]] = field(default_factory=set)  # (wall, source) said


def bring_up(
    session: Session,
    emit: EmitEvent,
    confirm: Confirm | None,
    *,
    yes: bool = False,
    progress: Callable[[ActionProgress], None] | None = None,
    soak: int = SOAK_REQUESTS,
    max_launches: int = MAX_LAUNCHES,
) -> dict[str, Any]:
    """Bring the session's recipe up (see the module docstring); the `done` event."""
    run = UpRun()
    step = progress or (lambda _p: None)
    lock = threading.Lock()

    def say(event: LineEvent) -> dict[str, Any]:
        """Say an event, stamped with the session's clock (the monitor's stamps too)."""
        if not isinstance(event, DiagnosisSeen | WallResolved):
            event = replace(event, time=session.clock.now())
        said = line(event)
        with lock:  # events come from the monitor's threads too
            emit(said)
        return said

    def watch(event: Event) -> None:
        """Walls as they are raised (new, or again after they cleared) and as they clear."""
        if isinstance(event, DiagnosisRaised) and event.new:
            d = event.diagnosis
            run.announced.add((d.wall.id, d.source))
            say(diagnosis_seen(d, event.time))
        elif isinstance(event, DiagnosisResolved):
            d = event.diagnosis
            if (d.wall.id, d.source) in run.announced:
                say(wall_resolved(d, event.time))

    session.start(watch)
    monitor = session.monitor
    assert monitor is not None
    _rounds(session, 1)
    recipe = session.recipe() or _adopt(session, say, confirm, yes)
    if recipe is None:
        return _done(session, run, say)
    say(RecipeChosen(recipe=recipe.id, revision=recipe.revision))

    # 1. doctor, and the fixes its findings call for
    outcome = session.bringup().doctor()
    report = outcome.report
    failed = tuple(c.to_json() for c in report.checks if c.status == "fail")
    say(
        DoctorRan(
            reachable=tuple(report.reachable),
            passed=sum(c.status == "pass" for c in report.checks),
            warnings=sum(c.status == "warn" for c in report.checks),
            failed=failed,
        )
    )
    if not report.reachable:
        return _done(session, run, say)
    for plan in session.bringup().fix_plans():
        if not _apply(session, run, say, plan, confirm, yes, step):
            return _done(session, run, say)
    _rounds(session, 1)

    # 2. launch; on a wall, the fix its cause calls for, one relaunch per diagnosis
    launched_by: FixResult | None = None
    while run.launches < max_launches:
        if launched_by is None:
            plan = session.plan_launch()
            r = session.recipe()
            say(Launched(launch=run.launches + 1, recipe=r.id if r else None))
            result = _run(session, plan, confirm, yes, step)
            if result is None:
                say(Refused(fix=plan.fix.id, why="not confirmed: nothing ran"))
                break
            run.launches += 1
        else:
            result = launched_by
        ok = result.ok
        if ok:
            run.tok_s = result.tok_s
            say(Serving(launch=run.launches, tok_s=result.tok_s))
            ok = _soak(session, soak)
        else:
            say(LaunchFailed(launch=run.launches, why=result.message))
        _rounds(session, SETTLE_ROUNDS)
        errors = _active_errors(session)
        if ok and not errors:
            run.serving = True
            break
        d, fix = _next_fix(session, errors)
        if d is None or fix is None:
            say(Stuck(why="no diagnosis with a fix: nothing restarts blindly"))
            break
        key = f"{d.wall.id}@{d.node or d.source}#{int(d.first_seen)}"
        if not session.guard.claim(key, session.clock.now()):
            say(Stuck(why=f"{d.wall.id}: already relaunched once for it"))
            break
        plan = session.plan_fix(d, fix)
        launched_by = None
        if plan.relaunches:
            r = plan.recipe_after
            say(Launched(launch=run.launches + 1, recipe=r.id if r else None))
        result = _apply(session, run, say, plan, confirm, yes, step)
        if result is None:
            break
        if plan.relaunches:
            run.launches += 1
            launched_by = result
    return _done(session, run, say)


def _adopt(session: Session, emit: Say, confirm: Confirm | None, yes: bool) -> Any:
    """No recipe named: the deployment running now becomes one, once confirmed."""
    if session.running_engine() is None:
        raise SparkTuiError(
            "no recipe to bring up and no engine running to adopt: name one in cluster.yaml "
            "(recipe: ID) or with --recipe (spark-tui recipes list)"
        )
    recipe, text = session.adopt_running()
    emit(Adopted(recipe=recipe.id, text=text))
    question = f"Adopt the deployment running now as recipe {recipe.id} and use it?"
    if not yes and (confirm is None or not confirm(question, ())):
        emit(Refused(fix="adopt", why="not confirmed: nothing saved"))
        return None
    session.save_adopted(recipe, text)
    return session.recipe()


def _run(
    session: Session, plan: FixPlan, confirm: Confirm | None, yes: bool, step: Callable
) -> FixResult | None:
    result = session.apply(plan, confirm, step, yes=yes)
    if result.message == "not confirmed: nothing ran":
        return None
    return result


def _apply(
    session: Session,
    run: UpRun,
    emit: Say,
    plan: FixPlan,
    confirm: Confirm | None,
    yes: bool,
    step: Callable,
) -> FixResult | None:
    """Apply a fix and say so; None when it was not confirmed (the run stops there)."""
    before = session.recipe()
    result = _run(session, plan, confirm, yes, step)
    if result is None:
        emit(Refused(fix=plan.fix.id, why="not confirmed: nothing ran"))
        return None
    run.fixes.append((plan.wall, plan.fix.id))
    after = session.recipe()
    changed = after is not None and (
        before is None or (after.id, after.revision) != (before.id, before.revision)
    )
    emit(
        FixApplied(
            wall=plan.wall,
            fix=plan.fix.id,
            risk=plan.fix.risk,
            nodes=tuple(plan.nodes),
            ok=result.ok,
            summary=result.summary(),
            recipe=after.id if changed and after else None,
            revision=after.revision if changed and after else None,
            switched_from=before.id
            if changed and before is not None and after is not None and after.id != before.id
            else None,
        )
    )
    return result


def _soak(session: Session, requests: int) -> bool:
    """A few more requests after the first answer: every one must answer."""
    from spark_tui.recipes.render import render_plan
    from spark_tui.remedy.launch import LaunchRunner

    recipe = session.recipe()
    if recipe is None or requests <= 0:
        return True
    smoke = [s for s in render_plan(recipe, session.config).steps if s.kind == "smoke"]
    runner = LaunchRunner(session.transports, session.clock, matcher=session.matcher)
    return all(runner.run_step(smoke[-1]).ok for _ in range(requests)) if smoke else True


def _rounds(session: Session, n: int) -> None:
    """Wait for n more rounds of every node (and the lines received so far)."""
    if session.monitor is not None:
        session.monitor.wait_rounds(n)


def _active_errors(session: Session) -> list[Diagnosis]:
    return [d for d in session.diagnoses() if d.severity == "error"]


def _next_fix(session: Session, errors: list[Diagnosis]) -> tuple[Diagnosis | None, Fix | None]:
    """The diagnosis to fix first — readings before log lines (a log line's cause is chosen
    where it holds), then the earliest — and the first fix for its cause that changes
    something (evidence was gathered as the wall was raised)."""
    errors = sorted(
        errors,
        key=lambda d: (
            SEVERITY_RANK[d.severity],
            d.source.kind != READINGS,
            d.first_seen,
        ),
    )
    for d in errors:
        for fid in d.fixes():
            fix = d.wall.fix(fid)
            if fix is not None and not evidence_only(fix):
                return d, fix
    return None, None


def _done(session: Session, run: UpRun, emit: Say) -> dict[str, Any]:
    recipe = session.recipe()
    done = Done(
        serving=run.serving,
        launches=run.launches,
        recipe=recipe.id if recipe else None,
        tok_s=run.tok_s,
        fixes=tuple(AppliedFix(wall=w, fix=f) for w, f in run.fixes),
        active=tuple(
            ActiveWall(wall=d.wall.id, severity=d.severity, node=d.node)
            for d in session.diagnoses()
            if d.severity != "info"
        ),
    )
    return emit(done)
