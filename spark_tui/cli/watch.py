"""`spark-tui watch --json [--config FILE | --demo SCENARIO]`: headless, stream diagnoses
as JSON lines while the nodes run (each line: `triage --json`'s entry plus "node" and
"time"). Runs until interrupted, or for --duration seconds."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from datetime import datetime, timezone


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="headless: stream diagnoses as JSON lines while the nodes run")
    p.add_argument("--json", action="store_true", help="one JSON object per diagnosis")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", dest="sub_config", metavar="FILE", help="cluster.yaml to use")
    src.add_argument("--demo", metavar="SCENARIO", help="watch a simulated scenario instead")
    p.add_argument("--period", type=float, default=2.0, metavar="S", help="seconds between rounds")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--speed",
        type=float,
        default=60.0,
        metavar="X",
        help="with --demo: simulated seconds per real second (default 60)",
    )


def diagnosis_line(diagnosis, time: float) -> dict[str, object]:
    """triage --json's entry plus the node and the time (ISO 8601, UTC)."""
    entry = diagnosis.to_json()
    entry["node"] = diagnosis.node
    entry["time"] = datetime.fromtimestamp(time, tz=timezone.utc).isoformat(timespec="seconds")
    if diagnosis.cause:
        entry["cause"] = diagnosis.cause
    return entry


class DiagnosisPrinter:
    """The monitor's `emit`: prints diagnoses (new ones, and readings walls raised again)."""

    def __init__(self, as_json: bool, out=None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self._lock = threading.Lock()

    def __call__(self, event) -> None:
        from spark_tui.events import DiagnosisRaised, ReachabilityChanged

        if isinstance(event, ReachabilityChanged):
            r = event.reachability
            if not r.reachable:
                print(
                    f"spark-tui: {event.node}: unreachable ({r.reason}), retrying", file=sys.stderr
                )
            return
        if not isinstance(event, DiagnosisRaised):
            return
        d = event.diagnosis
        episode = d.source.endswith(":readings") or d.source == "recipe:checks"
        if not event.new and not episode:
            return
        with self._lock:
            if self.as_json:
                self.out.write(json.dumps(diagnosis_line(d, event.time), ensure_ascii=False) + "\n")
            else:
                where = d.node or "cluster"
                self.out.write(f"{d.severity:7} {where:10} {d.wall.id}: {d.evidence}\n")
            self.out.flush()


def run(args: argparse.Namespace) -> int:
    if args.demo:
        return run_demo(args)
    from pathlib import Path

    from spark_tui.clock import RealClock
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.monitor import ClusterMonitor
    from spark_tui.nodes.config import load_cluster
    from spark_tui.nodes.transports import open_transport as make_transport

    config = getattr(args, "sub_config", None) or getattr(args, "config", None)
    cluster = load_cluster(Path(config) if config else None)
    kb = load_knowledge()
    from spark_tui.remedy.evidence import AutoEvidence

    recipe_facts = None
    recipe = None
    if cluster.recipe:
        from spark_tui.recipes.loader import load_recipes

        recipe = load_recipes().get(cluster.recipe)
        recipe_facts = recipe.facts
    transports = {n.name: make_transport(n) for n in cluster.nodes}
    # a wall whose first fix only gathers evidence (a stall, a reboot) has it gathered at once
    auto = AutoEvidence(DiagnosisPrinter(args.json), cluster, transports, recipe=lambda: recipe)
    monitor = ClusterMonitor(
        cluster,
        transports,
        kb,
        RealClock(),
        auto,
        recipe_facts=recipe_facts,
        period_s=args.period,
    )
    auto.readings = monitor
    monitor.start()
    try:
        threading.Event().wait(args.duration) if args.duration else threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        monitor.stop()
    return 0


# ---------------------------------------------------------------- --demo SCENARIO
def run_demo(args: argparse.Namespace) -> int:
    """The same ClusterMonitor over a simulated cluster playing a scenario: its recipe is
    launched once (as `r` would in the TUI) and the diagnoses stream while it runs, then
    for --duration more real seconds (default 20)."""
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.monitor import ClusterMonitor
    from spark_tui.recipes.render import render_plan
    from spark_tui.remedy.launch import LaunchRunner
    from spark_tui.sim import build_sim_cluster

    sim = build_sim_cluster(args.demo, speed=args.speed)  # unknown name: InputError, exit 2
    recipe = sim.recipe
    printer = DiagnosisPrinter(args.json)
    monitor = ClusterMonitor(
        sim.config,
        sim.transports,
        load_knowledge(),
        sim.clock,
        printer,
        recipe_facts=recipe.facts,
        period_s=max(2.0, args.speed),  # one round per real second
    )
    try:
        monitor.start()
        plan = render_plan(recipe, sim.config)
        for node, sources in plan.log_sources.items():
            for i, command in enumerate(sources):
                monitor.tail(node, f"log{i}", command)
        result = LaunchRunner(sim.transports, sim.clock).run_steps(plan.steps)
        if not args.json:
            how = "served" if result.ok else f"stopped at {result.failed.step.id}"
            print(f"spark-tui: {args.demo}: the launch {how}", file=sys.stderr)
        threading.Event().wait(20.0 if args.duration is None else args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        monitor.stop(close_transports=False)
        sim.close()
    return 0
