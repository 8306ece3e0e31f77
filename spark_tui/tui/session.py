"""The engines the TUI drives, behind one object: cluster, transports, monitor, fixes,
relaunch, doctor, report. Plain Python, called from worker threads; the TUI adds
nothing to the domain here, it only calls the other packages' APIs.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress, Event
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig

Progress = Callable[[ActionProgress], None]
Confirm = Callable[[str, tuple[str, ...]], bool]
REAL_PERIOD_S = 0.5  # real seconds between two sampling rounds of a node, at most


class EngineMissing(SparkTuiError):
    """An engine the TUI drives is not installed in this build."""


def _engine(module: str, name: str, what: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise EngineMissing(f"{what} is not available in this build ({module}.{name})") from exc


@dataclass(frozen=True)
class FixPreview:
    """A fix planned for this cluster by the remediation engine (preview == run)."""

    wall: str
    fix: Fix
    plan: Any  # spark_tui.remedy.fixes.FixPlan
    seen: str | None

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.plan.nodes)

    @property
    def needs_confirmation(self) -> bool:
        return bool(self.plan.needs_confirmation)

    def lines(self) -> list[str]:
        """The engine's own rendering: '# …' notes and the exact commands per node."""
        return list(self.plan.preview_lines())


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
        self.no_cluster_yaml = False  # simulated because no cluster.yaml was found
        self._closer = closer
        self._recipe: Any = None
        self._book: Any = None
        self._bringup: Any = None
        self._doctor_failed: list[str] = []
        self._fix_lines: dict[tuple, list[str]] = {}
        self._lock = threading.Lock()

    # --- opening --------------------------------------------------------------
    @classmethod
    def open(
        cls,
        config_path: str | None,
        read_only: bool,
        scenario: str | None,
        speed: float | None = None,
    ) -> ClusterSession:
        """The cluster of cluster.yaml; with none (or with a scenario), the simulated one."""
        from spark_tui.kb.loader import load_knowledge

        kb = load_knowledge()
        if scenario is None:
            from spark_tui.nodes.config import find_cluster_config, load_cluster

            path = Path(config_path) if config_path else find_cluster_config()
            if path is not None:
                from spark_tui.clock import RealClock
                from spark_tui.nodes.transports import open_transport as make_transport

                config = load_cluster(path)
                transports = {n.name: make_transport(n) for n in config.nodes}
                return cls(config, transports, RealClock(), kb, read_only=read_only)
        from spark_tui.sim import DEFAULT_SCENARIO, build_sim_cluster

        name = scenario or DEFAULT_SCENARIO
        sim = build_sim_cluster(name, speed=speed) if speed else build_sim_cluster(name)
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
        session.no_cluster_yaml = scenario is None
        return session

    @property
    def simulated(self) -> bool:
        return self.config.simulated

    def describe(self) -> str:
        """For the status line and the title: which cluster this is."""
        if self.simulated:
            return f"simulated cluster ({len(self.config.nodes)} nodes, scenario {self.scenario})"
        return f"{self.config.source} ({len(self.config.nodes)} nodes)"

    # --- recipes ----------------------------------------------------------------
    def recipes(self) -> Any:
        """The recipe book (built-in, the user's, newest revisions), loaded once."""
        if self._book is None:
            from spark_tui.recipes.loader import load_recipes

            self._book = load_recipes()
        return self._book

    def current_recipe(self) -> Any:
        """The recipe in use (after fixes that patched or switched it), or None."""
        if self._recipe is None:
            if self.sim is not None:
                self._recipe = self.sim.recipe  # the scenario's variant
            elif self.config.recipe:
                self._recipe = self.recipes().get(self.config.recipe)
        return self._recipe

    def set_recipe(self, recipe: Any) -> None:
        self._recipe = recipe
        self._book = None
        self._fix_lines.clear()
        self.follow_recipe_logs()

    def recipe_label(self) -> str:
        r = self.current_recipe()
        return "no recipe" if r is None else f"{r.id} rev {r.revision}"

    def _recipe_facts(self) -> dict:
        recipe = self.current_recipe()
        return recipe.facts() if recipe is not None else {}

    # --- live monitor -------------------------------------------------------------
    def start(self, emit: Callable[[Event], None]) -> None:
        """Start watching every node; events go to `emit` from the monitor's threads."""
        from spark_tui.monitor import ClusterMonitor

        # period in clock seconds: a fast simulated clock must not mean 30 rounds a second
        speed = float(getattr(self.clock, "speed", 1.0) or 1.0)
        self.monitor = ClusterMonitor(
            self.config,
            self.transports,
            self.kb,
            self.clock,
            emit,
            recipe_facts=self._recipe_facts,
            period_s=max(2.0, REAL_PERIOD_S * speed),
        )
        self.monitor.start()
        self.follow_recipe_logs()

    def follow_recipe_logs(self) -> None:
        """Tail the logs the recipe's launch plan writes (the serve log inside the head
        container, the containers' own logs), so their lines reach the matcher."""
        recipe = self.current_recipe()
        if self.monitor is None or recipe is None:
            return
        from spark_tui.recipes.render import render_plan

        try:
            plan = render_plan(recipe, self.config)
        except SparkTuiError:
            return  # a recipe that cannot render for this cluster has no logs to follow
        for node, commands in plan.log_sources.items():
            for command in commands:
                words = command.split()
                # the monitor's own name for a container log, so the two never double up
                source = f"container:{words[-1]}" if words[:2] == ["docker", "logs"] else "serve"
                # until the launch creates the container, docker's "No such container" is
                # noise, not a log line (the monitor retries the tail by itself)
                self.monitor.tail(node, source, f"{command} 2>/dev/null")

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

    def fresh_facts(self, node: str | None) -> dict[str, object]:
        """Readings taken now (a fix's verify step), or the recipe's facts for node None."""
        if node is None:
            return self._recipe_facts()
        from spark_tui.nodes.sampler import sample

        return {
            **sample(self.transports[node], self.config.node(node), self.clock).facts(),
            **self._recipe_facts(),
        }

    # --- fixes ----------------------------------------------------------------------
    def preview_fix(self, diagnosis: Diagnosis, fix: Fix) -> FixPreview:
        """The remediation engine's plan of a fix for this cluster (what the run runs)."""
        from spark_tui.remedy.fixes import plan_fix

        names = {n.name for n in self.config.nodes}
        seen = diagnosis.target_node if diagnosis.target_node in names else None
        plan = plan_fix(
            fix,
            self.config,
            recipe=self.current_recipe(),
            seen=seen,
            wall=diagnosis.wall.id,
            recipes=self.recipes().recipes,
        )
        return FixPreview(diagnosis.wall.id, fix, plan, seen)

    def fix_lines(self, diagnosis: Diagnosis, fix: Fix) -> list[str]:
        """A fix's commands for the diagnosis pane (the plan without its title line);
        cached per recipe revision: the pane redraws whenever the wall is seen again."""
        recipe = self.current_recipe()
        key = (
            diagnosis.wall.id,
            fix.id,
            diagnosis.target_node,
            recipe and (recipe.id, recipe.revision),
        )
        lines = self._fix_lines.get(key)
        if lines is None:
            lines = self._fix_lines[key] = self.preview_fix(diagnosis, fix).lines()[1:]
        return lines

    def apply_fix(
        self, preview: FixPreview, confirm: Confirm, progress: Progress
    ) -> tuple[bool, str]:
        """Run a planned fix, then its verify step on fresh readings."""
        from spark_tui.remedy.fixes import run_fix

        result = run_fix(
            preview.plan,
            self.transports,
            confirm=confirm,
            emit=progress,
            read_only=self.read_only,
            verify_facts=self.fresh_facts,
            clock=self.clock,
        )
        if result.recipe is not None and result.recipe is not self._recipe:
            self.set_recipe(result.recipe)
        checks = [
            f"{v.condition} on {v.node or 'the recipe'}: {'holds' if v.holds else 'does NOT hold'}"
            for v in result.verify
        ]
        if not result.ok:
            return False, result.message or "the fix failed"
        if result.verified is False:
            return False, "applied, but verify failed: " + "; ".join(checks)
        verdict = "verified: " + "; ".join(checks) if checks else "applied (nothing to verify)"
        return True, verdict + (f"; {result.message}" if result.message else "")

    # --- cluster actions -------------------------------------------------------------
    def relaunch(self, progress: Progress) -> tuple[bool, str]:
        """Stop the stack, run the recipe's launch plan again, smoke request, tok/s."""
        self._refuse_if_read_only("relaunch the recipe")
        from spark_tui.remedy.launch import relaunch

        recipe = self.current_recipe()
        if recipe is None:
            raise SparkTuiError("no recipe to relaunch: choose one in the guided bring-up (b)")
        result = relaunch(
            recipe.id, self.config, self.transports, clock=self.clock, emit=progress, recipe=recipe
        )
        return result.ok, result.describe()

    def undo_patch(self) -> tuple[bool, str]:
        """Back to the recipe revision before the last patch (every revision stays on disk)."""
        self._refuse_if_read_only("undo the last recipe patch")
        from spark_tui.recipes.revisions import RevisionStore

        recipe = self.current_recipe()
        if recipe is None:
            raise SparkTuiError("no recipe in use")
        back = RevisionStore().undo(recipe.id)
        self.set_recipe(back)
        return True, f"recipe {back.id} back to revision {back.revision}"

    def doctor(self, progress: Progress) -> tuple[bool, str]:
        """Read-only preflight of every node (allowed in --read-only: it changes nothing)."""
        from spark_tui.nodes.doctor import recipe_model_paths, run_doctor

        recipe = self.current_recipe()
        report = run_doctor(
            self.config,
            self.transports,
            self.kb,
            self.clock,
            recipe_facts=recipe.facts() if recipe else None,
            image=recipe.image if recipe else None,
            model_paths=recipe_model_paths(recipe.model.path, recipe.volumes) if recipe else (),
        )
        self._doctor_failed = [c.id for c in report.checks if c.status == "fail"]
        counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
        for c in report.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
            status = {"pass": "ok", "fail": "failed", "warn": "info", "skip": "skipped"}[c.status]
            progress(ActionProgress(c.id, c.node, None, status, f"{c.status}: {c.detail}"))
        summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        failed = [
            f"{c.id}{' on ' + c.node if c.node else ''}: {c.detail}"
            for c in report.checks
            if c.status == "fail"
        ]
        if failed:
            summary += " — " + "; ".join(failed)
        return counts["fail"] == 0 and bool(report.reachable), f"doctor: {summary}"

    def doctor_failures(self) -> list[str]:
        """Wall ids of the doctor's last failed checks (to find their diagnoses)."""
        return list(self._doctor_failed)

    def export_report(self, diagnoses: list[Diagnosis]) -> tuple[bool, str]:
        """Write the Markdown incident report under the state directory."""
        import time

        from spark_tui import paths
        from spark_tui.recipes.revisions import RevisionStore
        from spark_tui.remedy.journal import Journal
        from spark_tui.remedy.report import ReportData, build_report

        recipe = self.current_recipe()
        data = ReportData(
            cluster=self.config,
            recipe=recipe,
            revisions=RevisionStore().revisions(recipe.id) if recipe else [],
            diagnoses=diagnoses,
            journal=Journal().entries(),
        )
        out = paths.state_dir() / "reports" / time.strftime("incident-%Y%m%d-%H%M%S.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(build_report(data), encoding="utf-8")
        return True, f"report written to {out}"

    def bringup(self) -> Any:
        """The guided bring-up over this cluster (one per session: it resumes)."""
        if self._bringup is None:
            from spark_tui.tui.bringup_driver import BringUpDriver

            self._bringup = BringUpDriver(self)
        return self._bringup

    def detect_interfaces(
        self, hosts: list[str], user: str | None
    ) -> tuple[list[str], str | None, str]:
        """Probe hosts (one sampling round each): interface names, the fabric one, a note."""
        from spark_tui.clock import RealClock
        from spark_tui.nodes.sampler import detect_fabric, sample

        names: list[str] = []
        found: list[str] = []
        notes: list[str] = []
        known = {n.host: n for n in self.config.nodes}
        for i, host in enumerate(hosts, start=1):
            node = known.get(host) or NodeConfig(
                f"spark{i}", host, "head" if i == 1 else "worker", user=user
            )
            transport = self.transports.get(node.name) if host in known else None
            if transport is None:
                from spark_tui.nodes.transports import open_transport as make_transport

                transport = make_transport(node)
            state = sample(transport, node, self.clock or RealClock())
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

    def _refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise SparkTuiError(f"read-only: refused to {what} (started with --read-only)")
