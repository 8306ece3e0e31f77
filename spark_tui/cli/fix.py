"""`spark-tui fix WALL [--node NAME] [--fix ID] [--recipe ID] [--dry-run] [--yes] [--config FILE]`

Previews the exact commands per node, asks (naming every node) unless --yes, runs them
with a journal, then checks the fix's verify conditions on fresh readings. --dry-run prints
the preview and executes and journals nothing. Runs through the same session as the TUI.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fix", help="apply a wall's fix without the TUI (preview, ask, run, verify)")
    p.add_argument("wall", help="the wall id (see 'spark-tui kb list')")
    p.add_argument("--node", metavar="NAME", help="the node where the wall was seen")
    p.add_argument(
        "--fix", metavar="ID", dest="fix_id", help="which of the wall's fixes (default: the first)"
    )
    p.add_argument("--recipe", metavar="ID", help="the recipe in use (default: cluster.yaml's)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the commands; run and journal nothing"
    )
    p.add_argument("--yes", action="store_true", help="do not ask (disruptive fixes included)")
    p.add_argument("--config", metavar="FILE", dest="fix_config", help="cluster.yaml")


def run(args: argparse.Namespace) -> int:
    from spark_tui.cli.present import ask_terminal, print_progress
    from spark_tui.errors import InputError
    from spark_tui.kb.diagnosis import Diagnosis
    from spark_tui.kb.source import LOG, Source
    from spark_tui.session import open_cluster

    config = args.fix_config or getattr(args, "config", None)
    # a dry run may render for the simulated cluster; running needs real nodes
    with open_cluster(
        config,
        recipe=args.recipe,
        no_config="simulate" if args.dry_run else "refuse",
        demo_flag=False,
    ) as session:
        wall = session.kb.get(args.wall)
        if not wall.fixes:
            print(f"{wall.id}: no fix is known. {wall.explain}".strip())
            return 0
        fix = wall.fix(args.fix_id) if args.fix_id else wall.fixes[0]
        if fix is None:
            known = ", ".join(f.id for f in wall.fixes)
            raise InputError(f"wall {wall.id!r} has no fix {args.fix_id!r} (fixes: {known})")
        if args.node:
            session.config.node(args.node)  # an unknown node is bad input
        seen = Diagnosis(
            wall,
            Source(LOG, args.node, "command-line"),
            0,
            "named on the command line",
            node=args.node,
        )
        plan = session.plan_fix(seen, fix)
        for broken in session.unfinished():
            print(f"spark-tui: note: {broken.describe()}", file=sys.stderr)
        for skipped in session.journal.skipped:
            print(f"spark-tui: note: {skipped}", file=sys.stderr)
        print("\n".join(plan.preview_lines()))
        if args.dry_run:
            print("# dry run: nothing was executed or journaled")
            return 0
        # the command line asks before any fix, safe ones too (the preview is above)
        if not args.yes and not ask_terminal(plan.confirmation_prompt(), plan.nodes):
            print("not confirmed: nothing ran", file=sys.stderr)
            return 1
        result = session.apply(plan, None, print_progress, yes=True)
    for v in result.verify:
        print(
            f"verify [{v.node or 'recipe'}] {v.condition}: {'holds' if v.holds else 'does NOT hold'}"
        )
    if not result.ok:
        print(f"spark-tui: {result.message}", file=sys.stderr)
        return 1
    print(f"fix {fix.id}: {result.summary()}")
    return 0 if result.verified is not False else 1
