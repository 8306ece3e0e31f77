"""`spark-tui fix WALL [--node NAME] [--fix ID] [--dry-run] [--yes] [--config FILE]`

Previews the exact commands per node, asks (naming every node) unless --yes,
runs them with a journal, then checks the fix's verify conditions on fresh
readings. --dry-run prints the preview and executes and journals nothing.
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


def ask_terminal(prompt: str, nodes: tuple[str, ...]) -> bool:
    """The CLI's confirmation: the prompt names every node; anything but y/yes is no."""
    print(prompt, file=sys.stderr)
    for n in nodes:
        print(f"  - {n}", file=sys.stderr)
    try:
        answer = input("Type 'yes' to run it on these nodes: ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _emit(ev) -> None:
    where = f"[{ev.node}] " if ev.node else ""
    if ev.status == "running" and ev.command:
        print(f"{where}$ {ev.command}", file=sys.stderr)
    elif ev.detail or ev.status in ("failed", "skipped"):
        print(f"{where}{ev.step}: {ev.status} {ev.detail}".rstrip(), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from spark_tui.errors import InputError
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.recipes.clusters import find_cluster
    from spark_tui.recipes.loader import load_recipes
    from spark_tui.remedy.fixes import plan_fix, run_fix

    wall = load_knowledge().get(args.wall)
    if not wall.fixes:
        print(f"{wall.id}: no fix is known. {wall.explain}".strip())
        return 0
    fix = wall.fix(args.fix_id) if args.fix_id else wall.fixes[0]
    if fix is None:
        raise InputError(
            f"wall {wall.id!r} has no fix {args.fix_id!r} (fixes: {', '.join(f.id for f in wall.fixes)})"
        )
    cluster = find_cluster(args.fix_config or getattr(args, "config", None))
    if args.node:
        cluster.node(args.node)
    book = load_recipes()
    recipe_id = args.recipe or cluster.recipe
    recipe = book.get(recipe_id) if recipe_id else None
    plan = plan_fix(fix, cluster, recipe=recipe, seen=args.node, wall=wall.id, recipes=book.recipes)
    from spark_tui.remedy.journal import interrupted_fixes

    for broken in interrupted_fixes():
        print(f"spark-tui: note: {broken.describe()}", file=sys.stderr)
    print("\n".join(plan.preview_lines()))
    if args.dry_run:
        print("# dry run: nothing was executed or journaled")
        return 0
    if getattr(args, "read_only", False):
        from spark_tui.remedy.fixes import ReadOnlyRefused

        raise ReadOnlyRefused(f"read-only: refusing fix {fix.id}")
    if not args.yes and not ask_terminal(plan.confirmation_prompt(), plan.nodes):
        print("not confirmed: nothing ran", file=sys.stderr)
        return 1
    from spark_tui import paths
    from spark_tui.clock import RealClock
    from spark_tui.nodes.sampler import sample
    from spark_tui.remedy.connect import transports_for

    paths.writable_state_dir()  # the journal must be writable before a node is touched
    transports = transports_for(cluster)
    clock = RealClock()

    def fresh_facts(node: str | None) -> dict[str, object]:
        if node is None:
            return {}
        return sample(transports[node], cluster.node(node), clock).facts()

    try:
        result = run_fix(
            plan,
            transports,
            emit=_emit,
            yes=True,  # asked above, naming every node
            verify_facts=fresh_facts,
            clock=clock,
        )
    finally:
        for t in transports.values():
            t.close()
    for v in result.verify:
        print(
            f"verify [{v.node or 'recipe'}] {v.condition}: {'holds' if v.holds else 'does NOT hold'}"
        )
    if not result.ok:
        print(f"spark-tui: {result.message}", file=sys.stderr)
        return 1
    print(f"fix {fix.id} done" + (f"; {result.message}" if result.message else ""))
    return 0
