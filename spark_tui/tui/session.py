"""The engines the TUI drives, behind one object: cluster, transports, monitor, fixes,
relaunch, doctor, bring-up. Plain Python (called from worker threads); the TUI adds
nothing to the domain here, it only calls the other packages' APIs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress, Event
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.remedy import render

Progress = Callable[[ActionProgress], None]
Confirm = Callable[[str], bool]

REAL_PERIOD_S = 0.5  # real seconds between two sampling rounds of a node, at most
# actions that run commands on nodes (the others change the recipe or are plans)
_NODE_ACTIONS = {"run", "reboot", "move-aside", "restart-ray", "stop-stack"}


class EngineMissing(SparkTuiError):
    """An engine the TUI drives is not installed in this build."""


def _real_clock() -> Any:
    from spark_tui.clock import RealClock

    return RealClock()


def _engine(module: str, name: str, what: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise EngineMissing(f"{what} is not available in this build ({module}.{name})") from exc


@dataclass(frozen=True)
class NodeCommands:
    """What a fix runs on one node, exactly as the engine renders it."""

    node: str
    commands: tuple[str, ...]


@dataclass(frozen=True)
class FixPreview:
    """A fix rendered for this cluster: per-node commands and recipe changes."""

    wall: str
    fix: Fix
    per_node: tuple[NodeCommands, ...]
    recipe_changes: tuple[str, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n.node for n in self.per_node)

    @property
    def needs_confirmation(self) -> bool:
        return self.fix.risk in ("disruptive", "destructive")


class ClusterSession:
    """One cluster, live: built from cluster.yaml or the simulator, then driven by the TUI."""

    def __init__(
        self,
        config: ClusterConfig,
        transports: dict[str, Any],
        clock: Any,
        kb: Any,
        *,
        read_only: bool = False,
        scenario: str | None = None,
        closer: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.transports = transports
        self.clock = clock
        self.kb = kb
        self.read_only = read_only
        self.scenario = scenario
        self.monitor: Any = None
        self.sim: Any = None  # the SimCluster when simulated (tests reach its world)
        self._closer = closer

    # --- opening ------------------------------------------------------------
    @classmethod
    def open(
        cls,
        config_path: str | None,
        read_only: bool,
        scenario: str | None,
        speed: float | None = None,
    ) -> ClusterSession:
        """The cluster of cluster.yaml; with none (or a scenario), the simulated cluster."""
        from spark_tui.kb.loader import load_knowledge

        kb = load_knowledge()
        if scenario is None:
            from pathlib import Path

            from spark_tui.nodes.config import find_cluster_config

            path = Path(config_path) if config_path else find_cluster_config()
            if path is not None:
                load = _engine("spark_tui.nodes.config", "load_cluster", "cluster.yaml loader")
                make = _engine("spark_tui.nodes.ssh", "make_transport", "the SSH transport")
                from spark_tui.clock import RealClock

                config = load(path)
                transports = {n.name: make(n) for n in config.nodes}
                return cls(config, transports, RealClock(), kb, read_only=read_only)
        build = _engine("spark_tui.sim", "build_sim_cluster", "the simulated cluster")
        default = _engine("spark_tui.sim", "DEFAULT_SCENARIO", "the simulated cluster")
        name = scenario or default
        sim = build(name, speed=speed) if speed else build(name)
        session = cls(
            sim.config,
            dict(sim.transports),
            sim.clock,
            kb,
            read_only=read_only,
            scenario=name,
            closer=sim.close,
        )
        session.sim = sim
        return session

    @property
    def simulated(self) -> bool:
        return self.config.simulated

    def describe(self) -> str:
        """For the status line and the title: which cluster this is."""
        if self.simulated:
            return f"simulated cluster ({len(self.config.nodes)} nodes, scenario {self.scenario})"
        return f"{self.config.source} ({len(self.config.nodes)} nodes)"

    # --- live monitor ---------------------------------------------------------
    def start(self, emit: Callable[[Event], None]) -> None:
        """Start watching every node; events go to `emit` from the monitor's threads."""
        monitor_cls = _engine("spark_tui.monitor", "ClusterMonitor", "the live monitor")
        # period in clock seconds: a fast simulated clock must not mean 30 rounds a second
        speed = float(getattr(self.clock, "speed", 1.0) or 1.0)
        self.monitor = monitor_cls(
            self.config,
            self.transports,
            self.kb,
            self.clock,
            emit,
            recipe_facts=self._recipe_facts,
            period_s=max(2.0, REAL_PERIOD_S * speed),
        )
        self.monitor.start()

    def _recipe_facts(self) -> dict:
        """The current recipe's facts for the recipe-scope rules ({} without one)."""
        recipe = self.current_recipe()
        return recipe.facts() if recipe is not None else {}

    def current_recipe(self) -> Any:
        """The cluster's recipe (its newest revision), or None."""
        if self.sim is not None:
            return self.sim.recipe
        if not self.config.recipe:
            return None
        from spark_tui.recipes.loader import load_recipes

        return load_recipes().get(self.config.recipe)

    def stop(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        if self._closer is not None:
            self._closer()
            self._closer = None
        else:
            for t in self.transports.values():
                t.close()

    # --- fixes ------------------------------------------------------------------
    def preview_fix(self, diagnosis: Diagnosis, fix: Fix) -> FixPreview:
        """Per-node exact commands of a fix (the same rendering the run uses)."""
        head = self.config.head
        per_node: dict[str, list[str]] = {}
        recipe_changes: list[str] = []
        for action in fix.actions:
            if action.type not in _NODE_ACTIONS:
                recipe_changes.extend(render.render_action(action))
                continue
            for node in self._targets(action.on, diagnosis):
                per_node.setdefault(node.name, []).extend(
                    render.render_action(action, node.placeholder_values(head))
                )
        return FixPreview(
            diagnosis.wall.id,
            fix,
            tuple(NodeCommands(n, tuple(c)) for n, c in per_node.items()),
            tuple(recipe_changes),
        )

    def fix_lines(self, diagnosis: Diagnosis, fix: Fix) -> list[str]:
        """The preview as text lines, for the diagnosis pane."""
        p = self.preview_fix(diagnosis, fix)
        lines: list[str] = []
        for nc in p.per_node:
            lines.append(f"# on {nc.node}:")
            lines.extend(nc.commands)
        lines.extend(p.recipe_changes)
        return lines

    def _targets(self, on: str, diagnosis: Diagnosis) -> tuple[NodeConfig, ...]:
        seen = diagnosis.node if diagnosis.node in {n.name for n in self.config.nodes} else None
        return self.config.select(on, seen=seen)

    def apply_fix(
        self, diagnosis: Diagnosis, fix: Fix, confirm: Confirm, progress: Progress
    ) -> tuple[bool, str]:
        """Run a fix through the remediation engine, then its verify step."""
        self._refuse_if_read_only(f"apply {fix.id}")
        apply = _engine("spark_tui.remedy.engine", "apply_fix", "the remediation engine")
        outcome = apply(
            self.config,
            self.transports,
            diagnosis,
            fix,
            confirm=confirm,
            progress=progress,
            clock=self.clock,
            read_only=self.read_only,
        )
        return bool(getattr(outcome, "ok", outcome)), str(getattr(outcome, "summary", outcome))

    def relaunch(self, progress: Progress) -> tuple[bool, str]:
        self._refuse_if_read_only("relaunch")
        relaunch = _engine("spark_tui.remedy.relaunch", "relaunch", "the relaunch engine")
        outcome = relaunch(self.config, self.transports, progress=progress, clock=self.clock)
        return bool(getattr(outcome, "ok", outcome)), str(getattr(outcome, "summary", outcome))

    def undo_patch(self) -> tuple[bool, str]:
        self._refuse_if_read_only("undo the last recipe patch")
        undo = _engine("spark_tui.recipes.revisions", "undo_last", "recipe revisions")
        return True, str(undo(self.config.recipe))

    def doctor(self, progress: Progress) -> tuple[bool, str]:
        """Read-only preflight (allowed in --read-only: it changes nothing)."""
        run = _engine("spark_tui.nodes.doctor", "run_doctor", "the doctor")
        report = run(self.config, self.transports)
        return True, str(getattr(report, "summary", report))

    def export_report(self, diagnoses: list[Diagnosis]) -> tuple[bool, str]:
        write = _engine("spark_tui.remedy.report", "write_report", "the incident report")
        return True, f"report written to {write(self.config, diagnoses)}"

    def bringup(self) -> BringUpDriver:
        """The guided bring-up over this cluster (one per session: it resumes)."""
        if getattr(self, "_bringup", None) is None:
            self._bringup = BringUpDriver(self)
        return self._bringup

    def detect_interfaces(
        self, hosts: list[str], user: str | None
    ) -> tuple[list[str], str | None, str]:
        """Probe hosts (one sampling round each): interface names, the detected fabric one, a note."""
        from spark_tui.nodes.sampler import detect_fabric, sample

        names: list[str] = []
        found: list[str] = []
        notes: list[str] = []
        known = {n.host: n for n in self.config.nodes}
        for i, host in enumerate(hosts, start=1):
            node = known.get(host) or NodeConfig(
                f"spark{i}", host, "head" if i == 1 else "worker", user=user
            )
            transport = self.transports.get(node.name)
            if transport is None:
                make = _engine("spark_tui.nodes.ssh", "make_transport", "the SSH transport")
                transport = make(node)
            state = sample(transport, node, self.clock or _real_clock())
            if not state.reachable:
                notes.append(f"{host}: unreachable ({state.unavailable.get('node', '')})")
                continue
            for itf in state.interfaces:
                if itf.name not in names and itf.name != "lo":
                    names.append(itf.name)
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

    def _refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise SparkTuiError(f"read-only: refused to {what} (started with --read-only)")


BRINGUP_STEPS: tuple[tuple[str, str], ...] = (
    ("cluster", "Cluster"),
    ("recipe", "Recipe"),
    ("doctor", "Doctor"),
    ("fixes", "Fix what fails"),
    ("ray", "Start Ray, every GPU"),
    ("launch", "Launch"),
    ("smoke", "Smoke request, tok/s"),
)
_PLAN_PHASE = {"ray": "ray", "launch": "launch", "smoke": "smoke"}


@dataclass(frozen=True)
class StepOutcome:
    """How a bring-up step ended; a failure carries the diagnosis that explains it."""

    step: str
    ok: bool
    summary: str
    diagnosis: Diagnosis | None = None


class BringUpDriver:
    """The guided bring-up as the screen sees it, over the recipes helper's engine."""

    def __init__(self, session: ClusterSession) -> None:
        self.session = session
        self.recipe_id = session.config.recipe
        self._status = {sid: "pending" for sid, _t in BRINGUP_STEPS}
        if not session.simulated and session.config.source.endswith(".yaml"):
            self._status["cluster"] = "ok"
        if self.recipe_id:
            self._status["recipe"] = "ok"
        self._diagnoses: list[Diagnosis] = []

    def recipes(self) -> list[Any]:
        try:
            from spark_tui.recipes.loader import load_recipes

            return list(load_recipes())
        except (ImportError, SparkTuiError):
            return []

    def status(self, sid: str) -> str:
        return self._status[sid]

    def mark(self, sid: str, status: str) -> None:
        self._status[sid] = status

    def resume_step(self) -> str:
        """The first step not done: where the bring-up goes on."""
        return next((sid for sid, _t in BRINGUP_STEPS if self._status[sid] != "ok"), "smoke")

    def note_diagnosis(self, diagnosis: Diagnosis) -> None:
        self._diagnoses.append(diagnosis)

    def choose_recipe(self, recipe_id: str) -> None:
        self.recipe_id = recipe_id

    def commands(self, sid: str) -> list[str]:
        """What a step runs, as exact commands where the engines can render them."""
        if sid == "cluster":
            return ["# writes cluster.yaml (name, host, user, role, fabric_if per node)"]
        if sid == "recipe":
            return ["# chooses the launch recipe (a known-broken one names the working one)"]
        if sid == "doctor":
            return [
                "# read-only probes on every node (spark-tui doctor): memory, GPU, containers, Ray, fabric"
            ]
        if sid == "fixes":
            lines: list[str] = []
            for d in self._diagnoses:
                fixes = [f for f in d.wall.fixes if f.id in d.fixes()]
                if fixes:
                    lines.append(f"# {d.wall.id} on {d.node or d.source}: {fixes[0].title}")
                    lines.extend(self.session.fix_lines(d, fixes[0]))
            return lines or ["# the fixes of what the doctor and the monitor found (none yet)"]
        try:
            from spark_tui.recipes.loader import load_recipes
            from spark_tui.recipes.render import render_plan

            if not self.recipe_id:
                return ["# choose a recipe first"]
            plan = render_plan(load_recipes().get(self.recipe_id), self.session.config)
            return [line for step in plan.phase(_PLAN_PHASE[sid]) for line in step.paste_lines()]
        except (ImportError, SparkTuiError) as exc:
            return [f"# cannot render the plan: {exc}"]

    def write_cluster(self, hosts: list[str], user: str | None, fabric_if: str | None) -> str:
        """Write cluster.yaml (the head first) and read it back through the validating loader."""
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
        path = (
            paths.config_dir() / "cluster.yaml" if not source.endswith(".yaml") else _path(source)
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        load_cluster(path)  # bad input names file:line here, before the next step
        return str(path)

    def run(self, sid: str, progress: Progress) -> StepOutcome:
        """Run one engine step (doctor, fixes, ray, launch, smoke)."""
        before = len(self._diagnoses)
        if sid == "doctor":
            ok, summary = self.session.doctor(progress)
            return StepOutcome(sid, ok, summary)
        engine = _engine("spark_tui.remedy.bringup", "run_step", "the bring-up engine")
        result = engine(
            self.session.config,
            self.session.transports,
            sid,
            recipe=self.recipe_id,
            progress=progress,
            clock=self.session.clock,
            read_only=self.session.read_only,
        )
        ok = bool(getattr(result, "ok", result))
        diagnosis = None
        if not ok:
            seen = self._diagnoses[before:] or self._diagnoses
            diagnosis = seen[-1] if seen else None
        return StepOutcome(sid, ok, str(getattr(result, "summary", result)), diagnosis)


def _path(source: str):
    from pathlib import Path

    return Path(source)
