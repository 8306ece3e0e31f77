"""The guided bring-up as the screen sees it: seven steps over the recipes helper's
resumable state machine (spark_tui.remedy.bringup.BringUp). Plain Python."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.diagnosis import Diagnosis

if TYPE_CHECKING:
    from spark_tui.tui.session import ClusterSession

Progress = Callable[[ActionProgress], None]
Confirm = Callable[[str, tuple[str, ...]], bool]

BRINGUP_STEPS: tuple[tuple[str, str], ...] = (
    ("cluster", "Cluster"),
    ("recipe", "Recipe"),
    ("doctor", "Doctor"),
    ("fixes", "Clean up, fix what fails"),
    ("ray", "Start Ray, every GPU"),
    ("launch", "Launch"),
    ("smoke", "Smoke request, tok/s"),
)
STAGE_ORDER = ("preflight", "fixes", "ray", "launch", "smoke")  # the engine's, in order
# the engine's stages behind each of our steps
ENGINE_STAGES = {
    "fixes": ("preflight", "fixes"),
    "ray": ("ray",),
    "launch": ("launch",),
    "smoke": ("smoke",),
}


@dataclass(frozen=True)
class StepOutcome:
    """How a bring-up step ended; a failure carries the diagnosis that explains it."""

    step: str
    ok: bool
    summary: str
    diagnosis: Diagnosis | None = None


class BringUpDriver:
    """Steps 1-3 are the screen's (form, recipe, read-only doctor); 4-7 run the engine."""

    def __init__(self, session: ClusterSession) -> None:
        self.session = session
        recipe = session.current_recipe()
        self.recipe_id: str | None = recipe.id if recipe is not None else None
        self._status = {
            "cluster": "ok",
            "recipe": "ok" if recipe else "pending",
            "doctor": "pending",
        }
        self._running: str | None = None
        self._engine: Any = None
        self._progress: Progress = lambda _p: None
        self.confirm: Confirm = lambda _prompt, _nodes: False  # the screen sets a real one
        if recipe is not None and self._saved_state_exists():
            self.engine()  # resume where the last bring-up of this recipe stopped

    # --- state ------------------------------------------------------------------
    def _saved_state_exists(self) -> bool:
        from spark_tui import paths

        return (paths.state_dir() / "bringup" / f"{self.recipe_id}.json").is_file()

    def recipes(self) -> list[Any]:
        try:
            return list(self.session.recipes())
        except SparkTuiError:
            return []

    def status(self, sid: str) -> str:
        if self._running == sid:
            return "running"
        if sid in self._status:
            return self._status[sid]
        b = self._engine
        if b is None:
            return "pending"
        units = b.units()
        mine = [i for i, u in enumerate(units) if u.stage in ENGINE_STAGES[sid]]
        here = b.state.next_unit
        if all(i < here for i in mine):
            return "ok"
        if b.state.status == "failed" and here in mine:
            return "failed"
        return "pending"

    def mark(self, sid: str, status: str) -> None:
        if status == "running":
            self._running = sid
            return
        if self._running == sid:
            self._running = None
        if sid in self._status:
            self._status[sid] = status

    def resume_step(self) -> str:
        """The first step not done: where the bring-up goes on."""
        return next((sid for sid, _t in BRINGUP_STEPS if self.status(sid) != "ok"), "smoke")

    # --- steps 1 and 2 -------------------------------------------------------------
    def choose_recipe(self, recipe_id: str) -> None:
        self.session.set_recipe(self.session.recipes().get(recipe_id))
        self.recipe_id = recipe_id
        self._engine = None  # a new recipe is a new bring-up
        self._status["recipe"] = "ok"

    def write_cluster(self, hosts: list[str], user: str | None, fabric_if: str | None) -> str:
        """Write cluster.yaml (the head first), read back through the validating loader."""
        import yaml

        from spark_tui import paths
        from spark_tui.nodes.config import load_cluster

        nodes = []
        for i, host in enumerate(hosts, start=1):
            node: dict[str, object] = {"name": f"spark{i}", "host": host}
            if user:
                node["user"] = user
            if fabric_if:
                node["fabric_if"] = fabric_if
            node["role"] = "head" if i == 1 else "worker"
            nodes.append(node)
        data: dict[str, object] = {"nodes": nodes}
        if self.recipe_id:
            data = {"recipe": self.recipe_id, **data}
        source = self.session.config.source
        path = _path(source) if source.endswith(".yaml") else paths.config_dir() / "cluster.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        load_cluster(path)  # bad input names file:line here, before the next step
        self._status["cluster"] = "ok"
        return str(path)

    # --- what each step runs ----------------------------------------------------------
    def commands(self, sid: str) -> list[str]:
        if sid == "cluster":
            return ["# writes cluster.yaml: name, host, user, role, fabric_if per node"]
        if sid == "recipe":
            return ["# chooses the launch recipe (a known-broken one names the working one)"]
        if sid == "doctor":
            return ["# read-only probes on every node: memory, GPU, containers, Ray, fabric, files"]
        try:
            b = self._engine or self._new_engine(with_fixes=sid == "fixes")
        except SparkTuiError as exc:
            return [f"# cannot plan: {exc}"]
        lines: list[str] = []
        for u in b.units():
            if u.stage not in ENGINE_STAGES[sid]:
                continue
            if u.fix is not None:
                lines += u.fix.preview_lines()
            else:
                lines += b.plan.steps[u.step_index or 0].paste_lines()
        return lines or ["# nothing to do here"]

    # --- steps 3 to 7 ------------------------------------------------------------------
    def _fix_plans(self) -> list[Any]:
        """The first fix of every error or warning the monitor has seen (not relaunches:
        the bring-up launches by itself)."""
        from spark_tui.remedy.fixes import plan_fix

        monitor = self.session.monitor
        if monitor is None:
            return []
        plans, seen = [], set()
        for d in monitor.diagnoses().newest_first():
            fixes = [f for f in d.wall.fixes if f.id in d.fixes()]
            if d.severity == "info" or not fixes or d.wall.id in seen:
                continue
            fix = fixes[0]
            if any(a.type in ("relaunch", "switch-recipe") for a in fix.actions):
                continue
            # readings walls only while their readings still hold (a fixed wall stays in the
            # book); a log wall's destructive fix is never queued from an old line
            if d.wall.kind != "log" and not _holds_now(d, monitor.facts(d.node)):
                continue
            if d.wall.kind == "log" and fix.risk == "destructive":
                continue
            seen.add(d.wall.id)
            names = {n.name for n in self.session.config.nodes}
            plans.append(
                plan_fix(
                    fix,
                    self.session.config,
                    recipe=self.session.current_recipe(),
                    seen=d.target_node if d.target_node in names else None,
                    wall=d.wall.id,
                )
            )
        return plans

    def _new_engine(self, with_fixes: bool) -> Any:
        from spark_tui.remedy.bringup import BringUp

        recipe = self.session.current_recipe()
        if recipe is None:
            raise SparkTuiError("choose a recipe first (step 2)")
        return BringUp(
            recipe,
            self.session.config,
            self.session.transports,
            fixes=self._fix_plans() if with_fixes else (),
            clock=self.session.clock,
            emit=lambda p: self._progress(p),
            confirm=lambda prompt, nodes: self.confirm(prompt, nodes),
        )

    def engine(self) -> Any:
        if self._engine is None:
            self._engine = self._new_engine(with_fixes=True)
        return self._engine

    def run(self, sid: str, progress: Progress) -> StepOutcome:
        """Run one step to its end or its first failure (running it again resumes there)."""
        if sid == "doctor":
            return self._doctor(progress)
        if self.session.read_only:
            raise SparkTuiError(
                f"read-only: refused to run the {sid} step (started with --read-only)"
            )
        self._progress = progress
        started = self.session.clock.now()
        b = self.engine()
        self._rewind_crashed_launch(b)
        last = STAGE_ORDER.index(ENGINE_STAGES[sid][-1])
        while True:
            units = b.units()
            i = b.state.next_unit
            # the engine is sequential: a later step first runs what is still pending before it
            if i >= len(units) or STAGE_ORDER.index(units[i].stage) > last:
                break
            b.step()
            if b.state.status == "failed":
                return StepOutcome(sid, False, b.state.message, self._newest_error(started))
        if sid == "smoke" and b.state.tok_s is not None:
            return StepOutcome(
                sid, True, f"serving: smoke request answered at {b.state.tok_s:.1f} tok/s"
            )
        return StepOutcome(sid, True, b.state.message or "done")

    def _rewind_crashed_launch(self, b: Any) -> None:
        """A launch that failed waiting for the engine is retried from its first step:
        waiting again for a server that crashed would only time out again."""
        units = b.units()
        i = b.state.next_unit
        if b.state.status != "failed" or i >= len(units) or units[i].stage != "launch":
            return
        b.state.next_unit = next(n for n, u in enumerate(units) if u.stage == "launch")

    def _doctor(self, progress: Progress) -> StepOutcome:
        """Read-only preflight; it fails on a check that names a wall with a fix (the fix
        is then ready), other failed checks are reported and do not block."""
        _ok, summary = self.session.doctor(progress)
        fixable = [w for w in self.session.doctor_failures() if self._has_fix(w)]
        self._status["doctor"] = "failed" if fixable else "ok"
        if not fixable:
            return StepOutcome("doctor", True, summary)
        return StepOutcome("doctor", False, summary, self._diagnosis_of(fixable[0]))

    def _has_fix(self, wall_id: str) -> bool:
        try:
            return bool(self.session.kb.get(wall_id).fixes)
        except SparkTuiError:
            return False

    def _diagnosis_of(self, wall_id: str) -> Diagnosis | None:
        monitor = self.session.monitor
        if monitor is None:
            return None
        return next((d for d in monitor.diagnoses().newest_first() if d.wall.id == wall_id), None)

    def _newest_error(self, since: float | None) -> Diagnosis | None:
        monitor = self.session.monitor
        if monitor is None:
            return None
        for d in monitor.diagnoses().newest_first():
            if d.severity != "info" and (since is None or d.last_seen >= since) and d.wall.fixes:
                return d
        return None


def _holds_now(d: Diagnosis, facts: dict[str, object]) -> bool:
    """Whether one of the wall's reading rules holds on the facts now (durations aside)."""
    return any(all(c.holds(facts) for c in rule.when) for rule in d.wall.rules)


def _path(source: str):
    from pathlib import Path

    return Path(source)
