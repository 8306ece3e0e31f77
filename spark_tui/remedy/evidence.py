"""Evidence into the incident report, read-only, before anything is restarted.

`collect_evidence` runs the read-only command of each evidence item (remedy.render's
`evidence_command`, the same one a fix's `collect-evidence` action previews) on each node
through its Transport and writes one file per node and item under
`<session state>/evidence/<run id>/`, which `spark-tui report` puts in the report. With a
`ReadingsSource` (the live monitor) the `readings` item is the node's last minutes of
readings rather than one fresh round, and every file says when the node's last good
reading was taken (for a node that went silent and came back, the moment before).

`AutoEvidence` wraps a monitor's `emit`: when a wall is first raised and the first fix
for its cause only collects evidence (safe, read-only), that collection runs at once, in
the background — serving-stall's dumps before any relaunch, node-unexpected-reboot's
previous-boot kernel log before it is overwritten. No code here knows a wall by name.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from spark_tui.events import DiagnosisRaised, Event
from spark_tui.kb.diagnosis import DiagnosisSnapshot
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.transport import NodeUnreachable, Transport
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.render import stamp_now
from spark_tui.remedy.render import evidence_command
from spark_tui.safefile import write_atomic

READINGS_WINDOW_S = 600.0
EVIDENCE_TIMEOUT_S = 120.0


class ReadingsSource(Protocol):
    """What the live monitor knows beyond one round (spark_tui.monitor.ClusterMonitor)."""

    def recent_readings(self, node: str, seconds: float = ...) -> list[tuple[float, dict]]: ...

    def last_reading_before_silence(self, node: str) -> float | None: ...


@dataclass
class EvidenceResult:
    """Where the evidence went and what could not be read."""

    run_id: str
    directory: Path
    files: list[Path] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # "node item" -> why


def _when(t: float | None) -> str:
    if t is None:
        return "unknown"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _readings_text(rows: list[tuple[float, dict]]) -> str:
    keep = (
        "gpu.power_w",
        "gpu.sm_pct",
        "gpu.sm_clock_mhz",
        "gpu.temp_c",
        "serving.phase",
        "serving.requests_running",
        "serving.generation_tokens_total",
        "serving.tokens_age_s",
        "log.silent_s",
        "memory.available_gib",
        "containers.restart_count",
        "boot.id",
    )
    lines = []
    for t, facts in rows:
        picked = {k: facts[k] for k in keep if k in facts}
        lines.append(json.dumps({"time": _when(t), **picked}, default=str))
    return "\n".join(lines)


def collect_evidence(
    items: Sequence[str],
    nodes: Sequence[str],
    transports: Mapping[str, Transport],
    recipe: Recipe | None = None,
    *,
    root: Path,
    roles: Mapping[str, str] | None = None,
    run_id: str | None = None,
    reason: str = "",
    readings: ReadingsSource | None = None,
    containers: Mapping[str, str] | None = None,
) -> EvidenceResult:
    """Run each item's read-only command on each node; one file per node and item.
    `containers`: node -> the serving container found running there (used without a recipe:
    a deployment spark-tui attached to)."""
    stamp = stamp_now()
    run_id = run_id or f"evidence-{stamp}"
    directory = root / run_id
    directory.mkdir(parents=True, exist_ok=True)
    result = EvidenceResult(run_id, directory)
    for node in nodes:
        last = readings.last_reading_before_silence(node) if readings is not None else None
        header = [f"# node {node}"]
        if reason:
            header.append(f"# why: {reason}")
        if readings is not None:
            header.append(f"# last reading before the node went silent: {_when(last)}")
        for item in items:
            if item == "readings" and readings is not None:
                rows = readings.recent_readings(node, READINGS_WINDOW_S)
                body = f"$ (the monitor's readings, last {READINGS_WINDOW_S:.0f} s)\n"
                body += _readings_text(rows) or "(no readings yet)"
            else:
                role = (roles or {}).get(node, "head")
                command = evidence_command(item, recipe, stamp, role, (containers or {}).get(node))
                transport = transports.get(node)
                if transport is None:
                    result.failures[f"{node} {item}"] = "no connection"
                    continue
                try:
                    res = transport.run(command, timeout=EVIDENCE_TIMEOUT_S)
                except NodeUnreachable as exc:
                    result.failures[f"{node} {item}"] = f"unreachable: {exc.reason}"
                    body = f"$ {command}\n(unreachable: {exc.reason})"
                else:
                    out = (res.stdout + res.stderr).rstrip("\n")
                    if not res.ok:
                        why = "timed out" if res.timed_out else f"exit {res.exit_code}"
                        result.failures[f"{node} {item}"] = why
                        out += f"\n({why})"
                    body = f"$ {command}\n{out}"
            path = directory / f"{node}-{item}.txt"
            write_atomic(path, "\n".join(header) + "\n" + body + "\n")
            result.files.append(path)
    return result


def evidence_only(fix: Fix) -> bool:
    """A fix that only gathers evidence (read-only) may run without asking."""
    from spark_tui.remedy.actions import kind

    return fix.risk == "safe" and all(kind(a.type).collects_evidence for a in fix.actions)


class AutoEvidence:
    """An `emit` wrapper: a wall first raised whose first fix only collects evidence has
    that evidence collected at once (in a background thread), then the event goes on."""

    def __init__(
        self,
        emit: Callable[[Event], None],
        cluster: ClusterConfig,
        transports: Mapping[str, Transport],
        recipe: Callable[[], Recipe | None] | None = None,
        readings: ReadingsSource | None = None,
        *,
        directory: Path,
        containers: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.containers = containers
        self.emit = emit
        self.directory = directory
        self.cluster = cluster
        self.transports = transports
        self.recipe = recipe
        self.readings = readings
        self.results: list[EvidenceResult] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._done: set[tuple[str, str]] = set()

    def __call__(self, event: Event) -> None:
        if isinstance(event, DiagnosisRaised) and event.new:
            self._maybe_collect(event.diagnosis, event.time)
        self.emit(event)

    def _maybe_collect(self, diag: DiagnosisSnapshot, now: float) -> None:
        fix_ids = diag.fixes()
        first = diag.wall.fix(fix_ids[0]) if fix_ids else None
        if first is None or not evidence_only(first):
            return
        key = (diag.wall.id, diag.node or diag.source)
        with self._lock:
            if key in self._done:
                return
            self._done.add(key)
        items: list[str] = []
        targets: list[str] = []
        for action in first.actions:
            items += [i for i in action.params.get("items", []) if i not in items]
            for n in self.cluster.select(action.on, diag.node):
                if n.name not in targets:
                    targets.append(n.name)
        recipe = self.recipe() if self.recipe is not None else None
        found = self.containers() if self.containers is not None and recipe is None else {}
        reason = f"{diag.wall.id} raised on {diag.node or 'the cluster'}: {diag.evidence}"
        run_id = f"auto-{diag.wall.id}-{diag.node or 'cluster'}-{int(now)}"

        def work() -> None:
            res = collect_evidence(
                items,
                targets,
                self.transports,
                recipe,
                root=self.directory,
                roles={n.name: n.role for n in self.cluster.nodes},
                run_id=run_id,
                reason=reason,
                readings=self.readings,
                containers=found,
            )
            with self._lock:
                self.results.append(res)

        th = threading.Thread(target=work, name=f"evidence:{diag.wall.id}", daemon=True)
        self._threads.append(th)
        th.start()

    def wait(self, timeout: float = 60.0) -> None:
        """Wait for the collections started so far (tests, and before the process exits)."""
        for th in list(self._threads):
            th.join(timeout)
