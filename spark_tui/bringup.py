"""The guided bring-up over a session: cluster → recipe → doctor → fixes → Ray → launch →
smoke. The TUI's bring-up screen shows these steps; `spark-tui up` runs them headless
(spark_tui.up). Steps 1-3 are the session's (cluster.yaml, the recipe, the read-only
doctor); steps 4-7 run the resumable engine (spark_tui.remedy.bringup.BringUp).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_tui import policy
from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.remedy.actions import kind

if TYPE_CHECKING:
    from spark_tui.nodes.doctor import DoctorReport
    from spark_tui.remedy.bringup import BringUp
    from spark_tui.remedy.fixes import FixPlan
    from spark_tui.session import Session

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
    report: Any = None  # the doctor's DoctorReport


class GuidedBringUp:
    """The seven steps over one session (it resumes where the last bring-up stopped)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        recipe = session.recipe()
        self._status = {
            "cluster": "ok",
            "recipe": "ok" if recipe else "pending",
            "doctor": "pending",
        }
        self._running: str | None = None
        self._engine: BringUp | None = None
        self._doctor_failed: list[str] = []
        self._progress: Progress = lambda _p: None
        self.confirm: Confirm = lambda _prompt, _nodes: False  # the front end sets a real one
        if recipe is not None and session.state.bringup_path(recipe.id).is_file():
            self.engine()  # resume where the last bring-up of this recipe stopped

    # --- state ------------------------------------------------------------------
    @property
    def recipe_id(self) -> str | None:
        """The session's recipe (a fix that switches it takes the bring-up along)."""
        recipe = self.session.recipe()
        return recipe.id if recipe is not None else None

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
        self.session.use_recipe(recipe_id)
        self._engine = None  # a new recipe is a new bring-up
        self._status["recipe"] = "ok"

    def write_cluster(self, hosts: list[str], user: str | None, fabric_if: str | None) -> str:
        """Write cluster.yaml (the head first), read back through the validating loader."""
        import yaml

        from spark_tui import paths
        from spark_tui.nodes.config import load_cluster

        policy.refuse_if_read_only("write cluster.yaml")
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
        from pathlib import Path

        source = self.session.config.source
        path = Path(source) if source.endswith(".yaml") else paths.config_dir() / "cluster.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        load_cluster(path)  # bad input names file:line here, before the next step
        self._status["cluster"] = "ok"
        return str(path)

    def detect_interfaces(
        self, hosts: list[str], user: str | None
    ) -> tuple[list[str], str | None, str]:
        """Probe hosts (one sampling round each): interface names, the fabric one, a note."""
        from spark_tui.nodes.sampler import detect_fabric, sample
        from spark_tui.nodes.transports import open_transport

        session = self.session
        names: list[str] = []
        found: list[str] = []
        notes: list[str] = []
        known = {n.host: n for n in session.config.nodes}
        for i, host in enumerate(hosts, start=1):
            node = known.get(host) or NodeConfig(
                f"spark{i}", host, "head" if i == 1 else "worker", user=user
            )
            transport = session.transports.get(node.name) if host in known else None
            opened = transport is None
            if transport is None:
                transport = open_transport(node)
            try:
                state = sample(transport, node, session.clock)
            finally:
                if opened:
                    transport.close()
            if not state.reachable:
                notes.append(f"{host}: unreachable ({state.unavailable.get('node', '')})")
                continue
            names += [i.name for i in state.interfaces if i.name not in names and i.name != "lo"]
            fab = detect_fabric(state.interfaces)
            if fab:
                found.append(fab)
        preferred = max(set(found), key=found.count) if found else None
        note = (
            f"Fabric interface detected: {preferred}"
            if preferred
            else "No fabric interface detected."
        )
        return names, preferred, "; ".join([note, *notes])

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
    def fix_plans(self) -> list[FixPlan]:
        """The first fix that changes something of every active error or warning (evidence
        is gathered as a wall is raised; not relaunches nor recipe switches: the bring-up
        launches by itself)."""
        from spark_tui.remedy.evidence import evidence_only

        plans, seen = [], set()
        for d in self.session.diagnoses():
            by_id = {f.id: f for f in d.wall.fixes}
            fixes = [by_id[i] for i in d.fixes() if i in by_id and not evidence_only(by_id[i])]
            if d.severity == "info" or not fixes or d.wall.id in seen:
                continue
            fix = fixes[0]
            kinds = [kind(a.type) for a in fix.actions]
            if any(k.relaunches or k.replaces_recipe for k in kinds):
                continue
            # a log wall's destructive fix is never queued from an old line
            if d.wall.kind == "log" and fix.risk == "destructive":
                continue
            seen.add(d.wall.id)
            plans.append(self.session.plan_fix(d, fix))
        return plans

    def _new_engine(self, with_fixes: bool) -> BringUp:
        from spark_tui.remedy.bringup import BringUp

        recipe = self.session.recipe()
        if recipe is None:
            raise SparkTuiError("choose a recipe first (step 2)")
        return BringUp(
            recipe,
            self.session.config,
            self.session.environment(),
            fixes=self.fix_plans() if with_fixes else (),
            emit=lambda p: self._progress(p),
            confirm=lambda prompt, nodes: self.confirm(prompt, nodes),
        )

    def engine(self) -> BringUp:
        if self._engine is not None and self._engine.recipe.id != self.recipe_id:
            self._engine = None  # the recipe was switched: a new recipe is a new bring-up
        if self._engine is None:
            self._engine = self._new_engine(with_fixes=True)
        return self._engine

    def run(self, sid: str, progress: Progress) -> StepOutcome:
        """Run one step to its end or its first failure (running it again resumes there)."""
        if sid == "doctor":
            return self.doctor()
        policy.refuse_if_read_only(f"run the {sid} step of the bring-up")
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

    def _rewind_crashed_launch(self, b: BringUp) -> None:
        """A launch that failed waiting for the engine is retried from its first step:
        waiting again for a server that crashed would only time out again."""
        units = b.units()
        i = b.state.next_unit
        if b.state.status != "failed" or i >= len(units) or units[i].stage != "launch":
            return
        b.state.next_unit = next(n for n, u in enumerate(units) if u.stage == "launch")

    def doctor(self) -> StepOutcome:
        """Read-only preflight; it fails on a check that names a wall with a fix (the fix
        is then ready), other failed checks are reported and do not block."""
        report = self.session.doctor()
        self._doctor_failed = [c.id for c in report.checks if c.status == "fail"]
        summary = doctor_summary(report)
        fixable = [w for w in self._doctor_failed if self._has_fix(w)]
        self._status["doctor"] = "failed" if fixable else "ok"
        if not fixable:
            return StepOutcome("doctor", True, summary, report=report)
        return StepOutcome("doctor", False, summary, self._diagnosis_of(fixable[0]), report)

    def _has_fix(self, wall_id: str) -> bool:
        try:
            return bool(self.session.kb.get(wall_id).fixes)
        except SparkTuiError:
            return False

    def _diagnosis_of(self, wall_id: str) -> Diagnosis | None:
        return next((d for d in self.session.diagnoses() if d.wall.id == wall_id), None)

    def _newest_error(self, since: float | None) -> Diagnosis | None:
        for d in self.session.diagnoses():
            if d.severity != "info" and (since is None or d.last_seen >= since) and d.wall.fixes:
                return d
        return None


def doctor_summary(report: DoctorReport) -> str:
    """'26 passed, 2 warnings, 1 failed — reachable on spark2: …' (no 'doctor:' prefix)."""
    counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
    for c in report.checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    words = {"pass": "passed", "warn": "warnings", "fail": "failed", "skip": "skipped"}
    summary = ", ".join(f"{n} {words[k]}" for k, n in counts.items() if n)
    failed = [
        f"{c.id}{' on ' + c.node if c.node else ''}: {c.detail}"
        for c in report.checks
        if c.status == "fail"
    ]
    return summary + (" — " + "; ".join(failed) if failed else "")
