"""`spark-tui doctor [--json] [--config FILE]`: read-only preflight of every node.

Exit 0 when it ran (whatever it found), 1 when no node could be reached, 2 on a
bad config.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="read-only preflight of every node (reachable, SSH, memory, fabric, leftovers, ports)",
        description="Check every node of cluster.yaml before a launch; changes nothing.",
    )
    from spark_tui import paths

    p.add_argument(
        "--json", action="store_true", help=f"print one JSON object ({paths.doc('json.md')})"
    )
    p.add_argument("--config", dest="sub_config", metavar="FILE", help="cluster.yaml to use")


def run(args: argparse.Namespace) -> int:
    from spark_tui.session import open_cluster

    config = getattr(args, "sub_config", None) or getattr(args, "config", None)
    with open_cluster(config, no_config="refuse", demo_flag=False) as session:
        report = session.doctor()
    if args.json:
        json.dump(report.to_json(), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print_report(report)
    return 0 if report.reachable else 1


STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def print_report(report) -> None:
    """A rich table per node, then the checks over the whole cluster."""
    from rich.table import Table

    from spark_tui.cli.present import console

    out = console()
    simulated = " (simulated: no cluster.yaml found)" if report.cluster.simulated else ""
    out.print(f"[bold]spark-tui doctor[/] — {report.cluster.source}{simulated}")
    groups = [(n.name, f"{n.name} ({n.role}, {n.host})") for n in report.cluster.nodes]
    groups.append((None, "the cluster"))
    for key, title in groups:
        checks = [c for c in report.checks if c.node == key]
        if not checks:
            continue
        s = report.states.get(key) if key else None
        if s is not None and s.memory is not None:
            gib = 1 << 30
            title += (
                f" — memory {s.memory.available_bytes / gib:.1f} of "
                f"{s.memory.total_bytes / gib:.1f} GiB available, "
                f"{s.memory.cached_bytes / gib:.1f} GiB page cache"
            )
        table = Table(title=title, title_justify="left", expand=True, show_lines=False)
        table.add_column("check", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("detail", overflow="fold")
        for c in checks:
            table.add_row(c.id, f"[{STYLE[c.status]}]{c.status}[/]", c.detail)
        out.print(table)
    counts = {st: sum(1 for c in report.checks if c.status == st) for st in STYLE}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    reached = len(report.reachable)
    out.print(f"{reached} of {len(report.cluster.nodes)} nodes reached; {summary}.")
