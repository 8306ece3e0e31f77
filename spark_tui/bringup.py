"""The guided bring-up screen's model: cluster → recipe → doctor → fixes → launch → serving.

Steps 1-2 are the session's (cluster.yaml, the recipe); steps 3-6 are views of the one
driver (spark_tui.driver): running a step takes the driver's moves that belong to it,
everything through Session.apply, so the TUI's bring-up, `up` and `watch --auto-relaunch`
take the same steps and reach the same verdicts. A wall that stops a launch ends the
step on its diagnosis with the driver's fix ready (`a`); running the step again goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_tui import policy
from spark_tui.driver import END, Driver, Move
from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.diagnosis import DiagnosisSnapshot
from spark_tui.nodes.cluster import NodeConfig

if TYPE_CHECKING:
    from spark_tui.session import Session

Progress = Callable[[ActionProgress], None]
Confirm = Callable[[str, tuple[str, ...]], bool]

BRINGUP_STEPS: tuple[tuple[str, str], ...] = (
    ("cluster", "Cluster"),
    ("recipe", "Recipe"),
    ("doctor", "Doctor"),
    ("fixes", "Fix findings"),
    ("launch", "Launch"),
    ("serving", "Soak and serve"),
)
ORDER = [sid for sid, _t in BRINGUP_STEPS]


@dataclass(frozen=True)
class StepOutcome:
    """How a bring-up step ended; a failure carries the diagnosis that explains it."""

    step: str
    ok: bool
    summary: str
    diagnosis: DiagnosisSnapshot | None = None
    report: Any = None  # the doctor's DoctorReport


class GuidedBringUp:
    """The bring-up's steps over one driver (one per session: it goes on where it stopped)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.session: Session = driver.session
        self._status = {"cluster": "ok"}
        self._running: str | None = None
        self.confirm: Confirm = lambda _prompt, _nodes: False  # the front end sets a real one

    def phase(self, move: Move) -> str:
        """The step a driver move belongs to."""
        if move.kind == "adopt":
            return "recipe"
        if move.kind == "fix":
            return "fixes" if self.driver.launches == 0 else "launch"
        if move.kind == "soak" or move.kind == "serving":
            return "serving"
        if move.kind == "stuck":
            return "launch" if self.driver.launches else "fixes"
        return move.kind

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
        d = self.driver
        if sid == "recipe":
            return "ok" if self.recipe_id else "pending"
        if sid == "doctor":
            if d.report is None:
                return "pending"
            failed = any(c.status == "fail" for c in d.report.checks) or not d.report.reachable
            return "failed" if failed else "ok"
        nxt = self.phase(d.next_move())
        done = ORDER.index(nxt) > ORDER.index(sid)
        if sid == "fixes":
            failed = d.launches == 0 and any(s.kind == "fix" and not s.ok for s in d.steps)
            return "ok" if done else ("failed" if failed else "pending")
        if sid == "launch":
            if (d.launches and d.launch_ok is False) or (
                d.next_move().kind == "fix" and d.launches
            ):
                return "failed"
            return "ok" if done else "pending"
        move = d.next_move()
        if move.kind == "serving":
            return "ok"
        return "failed" if d.soaked and move.kind == "stuck" else "pending"

    def mark(self, sid: str, status: str) -> None:
        if status == "running":
            self._running = sid
        elif self._running == sid:
            self._running = None
        if sid == "cluster":
            self._status[sid] = status if status != "running" else self._status[sid]

    def resume_step(self) -> str:
        """The first step not done: where the bring-up goes on."""
        return next((sid for sid in ORDER if self.status(sid) != "ok"), "serving")

    # --- steps 1 and 2 -------------------------------------------------------------
    def choose_recipe(self, recipe_id: str) -> None:
        if recipe_id != self.recipe_id:
            self.session.use_recipe(recipe_id)
            self.driver.reset()  # a new recipe is a new bring-up

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
        if sid == "serving":
            return ["# a few chat requests to the engine on the head, then the walls watched"]
        move = self.driver.next_move()
        try:
            if sid == "fixes":
                if self.phase(move) != "fixes" or move.diagnosis is None or move.fix is None:
                    return ["# nothing to fix before the launch"]
                return self.session.plan_fix(move.diagnosis, move.fix).preview_lines()
            return self.session.plan_launch().preview_lines()
        except SparkTuiError as exc:
            return [f"# cannot plan: {exc}"]

    # --- steps 3 to 6 ------------------------------------------------------------------
    def run(self, sid: str, progress: Progress) -> StepOutcome:
        """Take the driver's moves of this step (and any still pending before it) to the
        step's end or its first failure; running it again goes on from there."""
        d = self.driver
        if sid == "doctor":
            return self.doctor()
        policy.refuse_if_read_only(f"run the {sid} step of the bring-up")
        last = ORDER.index(sid)
        before = len(d.steps)

        def stop(move: Move) -> bool:
            if move.kind in END or ORDER.index(self.phase(move)) > last:
                return True
            return move.kind == "fix" and d.launches > 0  # a wall: shown, `a` applies it

        move = d.run(self.confirm, progress, until=stop)
        taken = d.steps[before:]
        failed = next((s for s in taken if not s.ok), None)
        if move.kind == "fix" and d.launches > 0 and move.diagnosis is not None:
            why = failed.detail if failed is not None else f"{move.wall} is active"
            return StepOutcome(sid, False, why, move.diagnosis)
        if move.kind == "stuck" and self.phase(move) == sid:
            return StepOutcome(sid, False, move.why)
        if failed is not None:
            return StepOutcome(sid, False, failed.detail or failed.kind)
        if sid == "serving" and move.kind == "serving":
            rate = f" at {d.tok_s:.1f} tok/s" if d.tok_s is not None else ""
            return StepOutcome(sid, True, f"serving: the requests answered{rate}")
        if sid == "launch" and d.launch_ok:
            rate = f" at {d.tok_s:.1f} tok/s" if d.tok_s is not None else ""
            return StepOutcome(sid, True, f"launched: the first request answered{rate}")
        return StepOutcome(sid, True, taken[-1].detail if taken else "nothing to do here")

    def doctor(self) -> StepOutcome:
        """Read-only preflight. A failed check is a failed step (never green); with a
        finding the driver fixes before the launch, its diagnosis and fix are ready."""
        step = self.driver.take(Move("doctor", "read-only preflight of every node"))
        assert step is not None
        report = step.data.get("report")
        move = self.driver.next_move()
        ready = move.diagnosis if move.kind == "fix" else None
        return StepOutcome("doctor", step.ok, step.detail, ready, report)
