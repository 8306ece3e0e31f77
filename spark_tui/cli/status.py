"""`spark-tui status [--config FILE] [--json]`: every node now — reachable, containers, Ray
membership, serving phase, model and port (from the engine's command line), tok/s of the
last smoke request. Read-only. Exit 1 when a node cannot be reached."""

from __future__ import annotations

import argparse

from spark_tui.cli.options import add_cluster_source, config_of


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="the state of every node: containers, Ray, serving phase, model, port",
        description="Read every node once and say what runs there (changes nothing).",
    )
    add_cluster_source(p)
    p.add_argument("--json", action="store_true", help='one JSON object: {"nodes": [...]}')


def run(args: argparse.Namespace) -> int:
    from spark_tui.session import open_cluster

    with open_cluster(config_of(args), scenario=args.demo, no_config="refuse") as session:
        nodes = session.status()
        source = session.config.source
        now = session.clock.now()
    if args.json:
        from spark_tui.event_lines import StatusRead, dumps

        print(dumps(StatusRead(cluster=source, nodes=tuple(n.to_json() for n in nodes), time=now)))
    else:
        from rich.table import Table

        from spark_tui.cli.present import console

        table = Table(title=f"spark-tui status — {source}", title_justify="left")
        for col in ("node", "role", "reachable", "containers", "Ray", "serving", "model", "port"):
            table.add_column(col, overflow="fold")
        for n in nodes:
            table.add_row(
                n.name,
                n.role,
                "yes" if n.reachable else f"no: {n.reason}",
                ", ".join(n.containers) or "—",
                n.ray,
                n.phase + (f" ({n.tok_s:.1f} tok/s)" if n.tok_s else ""),
                n.model or "—",
                str(n.port) if n.port else "—",
            )
        console().print(table)
    return 0 if all(n.reachable for n in nodes) else 1
