"""The guided bring-up: a resumable state machine over preflight → fixes → ray → launch → smoke.

The guided bring-up (spark_tui.bringup, for the TUI and `up`) drives `BringUp`:
`step()` runs the next unit (one launch step or one fix) and saves the state under
the session's state directory (bringup/<recipe>.json) before returning, so a new
process resumes where the last one stopped. A failed unit stays next: it runs
again only when the caller asks (never blindly). Every command is journaled
before it runs (the launch steps through LaunchRunner, fixes through run_fix).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from spark_tui import policy
from spark_tui.events import ActionProgress
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.recipes.render import render_plan, stamp_now
from spark_tui.remedy.fixes import Confirm, FixPlan, RunEnvironment, run_fix
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.safefile import read_state_text, write_atomic

STAGES = ("preflight", "fixes", "ray", "launch", "smoke")
Emit = Callable[[ActionProgress], None]


@dataclass
class BringUpState:
    """What is saved between processes."""

    recipe: str
    revision: int
    profile: str | None
    sets: list[str]
    stamp: str
    plan_hash: str
    next_unit: int = 0  # index into BringUp.units()
    status: str = "new"  # new | running | failed | done
    stage: str = "preflight"
    message: str = ""
    tok_s: float | None = None
    done: list[str] = field(default_factory=list)  # unit labels done, in order


@dataclass(frozen=True)
class Unit:
    """One thing the bring-up does: a launch step, or a fix."""

    stage: str
    label: str
    step_index: int | None = None  # into plan.steps
    fix: FixPlan | None = None


def _hash(plan: LaunchPlan) -> str:
    return hashlib.sha256("\n".join(s.command for s in plan.steps).encode()).hexdigest()[:16]


class BringUp:
    """Drive a recipe from nothing to a smoke-tested server, one unit at a time."""

    def __init__(
        self,
        recipe: Recipe,
        cluster: ClusterConfig,
        env: RunEnvironment,
        profile: str | None = None,
        sets: Sequence[str] = (),
        fixes: Sequence[FixPlan] = (),
        emit: Emit | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        self.recipe = recipe
        self.cluster = cluster
        self.env = env
        self.transports = env.transports
        self.fixes = tuple(fixes)
        self.clock = env.clock
        self.emit = emit or (lambda _e: None)
        self.journal = env.journal
        self.confirm = confirm
        self.path = env.state.bringup_path(recipe.id)
        self.run_id = f"bringup-{uuid.uuid4().hex[:8]}"  # this process's steps, in the journal
        saved = self._load()
        stamp = saved.stamp if saved else stamp_now()
        self.plan = render_plan(recipe, cluster, profile=profile, sets=tuple(sets), stamp=stamp)
        fresh = BringUpState(
            recipe.id, recipe.revision, profile, list(sets), stamp, _hash(self.plan)
        )
        same = saved is not None and (
            saved.recipe,
            saved.revision,
            saved.profile,
            saved.sets,
            saved.plan_hash,
        ) == (fresh.recipe, fresh.revision, fresh.profile, fresh.sets, fresh.plan_hash)
        self.resumed = bool(same and saved and saved.status != "done" and saved.next_unit > 0)
        self.state = saved if same and saved else fresh

    # ---- persistence --------------------------------------------------------
    def _load(self) -> BringUpState | None:
        try:
            data = json.loads(read_state_text(self.path))
            return BringUpState(**data)
        except (OSError, ValueError, TypeError):
            return None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(asdict(self.state), indent=1))

    def reset(self) -> None:
        """Start over (a new stamp: leftovers of this run are renamed aside too)."""
        self.path.unlink(missing_ok=True)
        self.state.next_unit, self.state.status, self.state.done = 0, "new", []

    # ---- the machine --------------------------------------------------------
    def units(self) -> list[Unit]:
        steps = list(enumerate(self.plan.steps))
        out = [Unit("preflight", f"{s.id}@{s.node}", i) for i, s in steps if s.phase == "preflight"]
        out += [Unit("fixes", f"fix:{f.fix.id}", fix=f) for f in self.fixes]
        for stage in ("ray", "launch", "smoke"):
            out += [Unit(stage, f"{s.id}@{s.node}", i) for i, s in steps if s.phase == stage]
        return out

    @property
    def finished(self) -> bool:
        return self.state.status == "done"

    def step(self) -> Unit | None:
        """Run the next unit and save; None when everything is done."""
        units = self.units()
        if self.state.next_unit >= len(units):
            self.state.status = "done"
            self.save()
            return None
        unit = units[self.state.next_unit]
        if unit.fix is None:  # a fix checks the policy itself
            policy.refuse_if_read_only(f"run the bring-up step {unit.label}")
        self.state.stage = unit.stage
        self.state.status = "running"
        self.save()
        if unit.fix is not None:
            result = run_fix(unit.fix, self.env, confirm=self.confirm, emit=self.emit)
            ok, message = result.ok, result.summary() if result.ok else result.message
        else:
            if unit.stage != "preflight" and self._first_of_launch(units):
                self.env.hooks.launching(self.plan)  # a new launch attempt begins
            runner = LaunchRunner(
                self.transports,
                self.clock,
                self.emit,
                self.journal,
                self.run_id,
                "bring-up",
                matcher=self.env.matcher,
                stop=self.env.stop,
            )
            r = runner.run_step(self.plan.steps[unit.step_index or 0])
            ok, message = r.ok, r.detail
            if r.tok_s is not None:
                self.state.tok_s = r.tok_s
        if ok:
            self.state.done.append(unit.label)
            self.state.next_unit += 1
            self.state.message = message
            self.state.status = "done" if self.state.next_unit >= len(units) else "running"
        else:
            self.state.status = "failed"
            self.state.message = f"{unit.label}: {message}"
        self.save()
        if self.state.status == "done":
            self.env.revisions.mark_launched(self.recipe)
            if any(s.kind == "smoke" for s in self.plan.steps):
                from spark_tui.recipes.revisions import mark_served

                mark_served(self.env.revisions, self.recipe, self.state.tok_s)
        return unit

    def _first_of_launch(self, units: list[Unit]) -> bool:
        """Whether the next unit is the first one after the preflight and the fixes."""
        i = self.state.next_unit
        return all(u.stage in ("preflight", "fixes") for u in units[:i])

    def run(self) -> BringUpState:
        """Units until done or the first failure (call again to retry it)."""
        if self.state.status == "failed":
            self.state.status = "running"
        while self.state.status != "failed":
            if self.step() is None or self.state.status == "done":
                break
        return self.state
