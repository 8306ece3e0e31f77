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
DEFAULT_SCENARIO = "page-cache-hog"

# actions that run commands on nodes (the others change the recipe or are plans)
_NODE_ACTIONS = {"run", "reboot", "move-aside", "restart-ray", "stop-stack"}


class EngineMissing(SparkTuiError):
    """An engine the TUI drives is not installed in this build."""


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
        self._closer = closer

    # --- opening ------------------------------------------------------------
    @classmethod
    def open(
        cls, config_path: str | None, read_only: bool, scenario: str | None, speed: float = 20.0
    ) -> ClusterSession:
        """The cluster of cluster.yaml; with none (or a scenario), the simulated cluster."""
        from spark_tui.kb.loader import load_knowledge

        kb = load_knowledge()
        if scenario is None:
            find = _engine("spark_tui.nodes.config", "find_cluster_config", "cluster.yaml lookup")
            path = find(config_path)
            if path is not None:
                load = _engine("spark_tui.nodes.config", "load_cluster", "cluster.yaml loader")
                make = _engine("spark_tui.nodes.ssh", "make_transport", "the SSH transport")
                from spark_tui.clock import RealClock

                config = load(path)
                transports = {n.name: make(n) for n in config.nodes}
                return cls(config, transports, RealClock(), kb, read_only=read_only)
        build = _engine("spark_tui.sim", "build_sim_cluster", "the simulated cluster")
        sim = build(scenario or DEFAULT_SCENARIO, nodes=None, speed=speed)
        return cls(
            sim.config,
            dict(sim.transports),
            sim.clock,
            kb,
            read_only=read_only,
            scenario=scenario or DEFAULT_SCENARIO,
            closer=sim.close,
        )

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
        self.monitor = monitor_cls(self.config, self.transports, self.kb, self.clock, emit)
        self.monitor.start()

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

    def _refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise SparkTuiError(f"read-only: refused to {what} (started with --read-only)")
