"""`spark-tui recipes list | show ID | render ID [--profile NAME] [--set KEY=VALUE]...`
| fit ID [--profile NAME] [--set KEY=VALUE]... [--json] [--config FILE]`"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recipes", help="launch recipes: list, show, render the exact commands")
    rs = p.add_subparsers(dest="recipes_command", metavar="SUBCOMMAND", required=True)
    ls = rs.add_parser("list", help="every recipe: id, status, engine, nodes, tok/s")
    ls.add_argument("--json", action="store_true")
    show = rs.add_parser("show", help="one recipe in full: model, flags, env, profiles, notes")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    hist = rs.add_parser("history", help="a recipe's revisions (fixes' patches) with diffs")
    hist.add_argument("id")
    undo = rs.add_parser("undo", help="go back to the revision before the current one")
    undo.add_argument("id")
    render = rs.add_parser(
        "render",
        help="print the shell commands per node, ready to paste",
        description=(
            "Render a recipe for ./cluster.yaml, ~/.config/spark-tui/cluster.yaml or --config "
            "FILE; with none, for a simulated cluster spark1..N (fabric 10.10.10.1..N)."
        ),
    )
    render.add_argument("id")
    render.add_argument("--profile", metavar="NAME")
    render.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="sets",
        help="override for this rendering, e.g. serve.--max-model-len=4096, env.VAR=1, image=NAME",
    )
    render.add_argument("--config", metavar="FILE", dest="render_config", help="cluster.yaml")
    render.add_argument("--json", action="store_true", help="the plan as JSON (steps, waits, logs)")
    fit = rs.add_parser(
        "fit",
        help="does the model fit each node's memory? (before a launch; reads every node)",
        description=(
            "Weights, KV cache, runtime and Ray's object store per node against the memory "
            "each node has now (after dropping caches, minus what other processes hold). "
            "Reads ./cluster.yaml, ~/.config/spark-tui/cluster.yaml or --config FILE; with "
            "none, the built-in simulated cluster."
        ),
    )
    fit.add_argument("id")
    fit.add_argument("--profile", metavar="NAME")
    fit.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="sets",
        help="override for this estimate, e.g. serve.--gpu-memory-utilization=0.82",
    )
    fit.add_argument("--config", metavar="FILE", dest="render_config", help="cluster.yaml")
    fit.add_argument("--json", action="store_true", help="one JSON object (see DESIGN.md)")


def run(args: argparse.Namespace) -> int:
    from spark_tui.recipes.loader import load_recipes

    book = load_recipes()
    if args.recipes_command == "list":
        return _list(book, args.json)
    recipe = book.get(args.id)
    if args.recipes_command in ("history", "undo"):
        return _history(recipe, undo=args.recipes_command == "undo")
    if args.recipes_command == "show":
        return _show(recipe, args.json)
    if args.recipes_command == "fit":
        return _fit(recipe, args)
    from spark_tui.recipes.clusters import find_cluster
    from spark_tui.recipes.render import render_plan

    cluster = find_cluster(
        getattr(args, "render_config", None) or getattr(args, "config", None),
        simulated_nodes=recipe.nodes,
    )
    plan = render_plan(recipe, cluster, profile=args.profile, sets=args.sets)
    if args.json:
        json.dump(plan.to_json(), sys.stdout, indent=2)
        print()
    else:
        sys.stdout.write(plan.to_text())
    return 0


def _list(book, as_json: bool) -> int:
    rows = [
        {
            "id": r.id,
            "status": r.status,
            "engine": r.engine,
            "executor": r.executor,
            "nodes": r.nodes,
            "tok_s": r.measured.tok_s,
            "title": r.title,
            "instead": r.instead,
            "revision": r.revision,
        }
        for r in book
    ]
    if as_json:
        json.dump(rows, sys.stdout)
        print()
        return 0
    import shutil

    width = shutil.get_terminal_size((100, 24)).columns
    idw = max(len(r["id"]) + (7 if r["revision"] else 0) for r in rows)
    print(f"{'id':<{idw}}  {'status':<12}  {'engine':<9}  nodes  tok/s  title"[:width])
    for r in rows:
        rid = r["id"] + (f" (rev {r['revision']})" if r["revision"] else "")
        tok = f"{r['tok_s']:g}" if r["tok_s"] else "—"
        line = (
            f"{rid:<{idw}}  {r['status']:<12}  {r['engine'] + '/' + r['executor']:<9}  "
            f"{r['nodes']:>5}  {tok:>5}  {r['title']}"
        )
        print(line if len(line) <= width else line[: width - 1] + "…")
    return 0


def _show(recipe, as_json: bool) -> int:
    from spark_tui.recipes.revisions import recipe_to_data, recipe_to_yaml

    if as_json:
        json.dump(recipe_to_data(recipe), sys.stdout, indent=2)
        print()
        return 0
    r = recipe
    out = [f"# {r.id}: {r.title}", f"# status: {r.status}"]
    if r.blocked_by:
        out.append(f"# stopped by: {', '.join(r.blocked_by)}")
        out.append(
            f"# instead: {r.instead or '—'}" + (f" ({r.instead_note})" if r.instead_note else "")
        )
    if r.revision:
        out.append(f"# revision {r.revision} (patched; see 'spark-tui report')")
    sys.stdout.write("\n".join(out) + "\n" + recipe_to_yaml(r))
    return 0


def _history(recipe, undo: bool) -> int:
    from spark_tui.recipes.revisions import RevisionStore
    from spark_tui.state import StateDir

    store = RevisionStore(StateDir.real().revisions_dir)
    if undo:
        back = store.undo(recipe.id)
        print(f"{recipe.id}: now at revision {back.revision} (revision {recipe.revision} is kept)")
        return 0
    revs = store.revisions(recipe.id)
    if not revs:
        print(f"{recipe.id}: never patched (revision 0, as shipped)")
        return 0
    current = store.current_number(recipe.id)
    for rev in revs:
        mark = "*" if rev.number == current else " "
        print(f"{mark} revision {rev.number}: {rev.note}")
        if rev.diff:
            print(rev.diff.rstrip("\n"))
    return 0


def _fit(recipe, args: argparse.Namespace) -> int:
    """Read every node once (the simulated cluster when there is no cluster.yaml), then fit."""
    from spark_tui.recipes.overrides import apply_sets
    from spark_tui.session import open_cluster

    r = apply_sets(recipe.with_profile(args.profile), args.sets)
    config = getattr(args, "render_config", None) or getattr(args, "config", None)
    with open_cluster(config, sim_nodes=r.nodes) as session:
        report, unreachable = session.fit(r)
    if args.json:
        json.dump(report.to_json(), sys.stdout)
        print()
    else:
        sys.stdout.write(report.to_text())
    for n, why in unreachable.items():
        print(f"{n}: unreachable ({why})", file=sys.stderr)
    return 1 if unreachable else 0
