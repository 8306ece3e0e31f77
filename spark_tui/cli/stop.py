"""`spark-tui stop [--config FILE] [--yes] [--json]`: stop the serving stack and Ray on every
node — previewed, confirmed (it stops serving), journaled; containers are renamed aside so
their logs stay readable."""

from __future__ import annotations

import argparse
import json
import sys

from spark_tui.cli.options import add_cluster_source, config_of


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stop",
        help="stop serving and Ray on every node (previewed, confirmed, journaled)",
        description="Stop the serving stack and Ray on every node; logs are kept.",
    )
    add_cluster_source(p)
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON object")


def run(args: argparse.Namespace) -> int:
    from spark_tui.cli.present import ask_terminal, print_progress
    from spark_tui.session import open_cluster

    with open_cluster(config_of(args), scenario=args.demo, no_config="refuse") as session:
        plan = session.plan_stop()
        if not args.json:
            print("\n".join(plan.preview_lines()))
        if args.dry_run:
            if not args.json:
                print("# dry run: nothing was executed or journaled")
            return 0
        result = session.apply(
            plan,
            None if args.yes else ask_terminal,
            None if args.json else print_progress,
            yes=args.yes,
        )
    if args.json:
        out = {
            "ok": result.ok,
            "nodes": list(plan.nodes),
            "done": result.done,
            "message": result.summary(),
        }
        json.dump(out, sys.stdout)
        print()
    elif result.ok:
        print(f"stopped on {', '.join(result.done) or 'no node'}")
    else:
        print(f"spark-tui: {result.message}", file=sys.stderr)
    return 0 if result.ok else 1
