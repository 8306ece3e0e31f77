"""`spark-tui recipes list | show ID | render ID [--profile NAME] [--set KEY=VALUE]...`
| fit ID [--profile NAME] [--set KEY=VALUE]... [--json] [--config FILE]
| check-flags ID [--profile NAME] [--set KEY=VALUE]... [--json] [--config FILE]
| rollback ID [--yes] [--config FILE]
| lint [PATH...] | import FILE|DIR... [--to DIR] [--force]`

A recipe file that does not load is reported (file:line) and left out; the others load.
`lint` exits 2 when one does not load. `import` converts eugr/spark-vllm-docker and sparkrun
recipes into spark-tui's own format, with a comment line per field that had no equivalent."""

from __future__ import annotations

import argparse
import json
import sys

from spark_tui.cli.options import config_of


def add_parser(sub: argparse._SubParsersAction) -> None:
    from spark_tui import paths
    from spark_tui.cli.options import add_cluster_source

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
    rb = rs.add_parser(
        "rollback",
        help="back to the image and recipe revision that last served (preview, then confirm)",
        description=(
            "Show the launch of this recipe that last served (a smoke request answered: when, "
            "revision, image, tok/s) and the change back to it, then ask; the rollback is a new "
            "revision (every revision is kept, `recipes undo` returns) and takes effect at the "
            "next launch. Journaled."
        ),
    )
    rb.add_argument("id")
    rb.add_argument("--yes", action="store_true", help="do not ask")
    rb.add_argument("--config", metavar="FILE", dest="render_config", help="cluster.yaml")
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
    render.add_argument("--config", metavar="FILE", dest="sub_config", help="cluster.yaml")
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
    fit.add_argument("--config", metavar="FILE", dest="sub_config", help="cluster.yaml")
    fit.add_argument(
        "--json", action="store_true", help=f"one JSON object ({paths.doc('json.md')})"
    )
    cf = rs.add_parser(
        "check-flags",
        help="run the image's own --help on a node: flags its engine does not know, renamed ones",
        description=(
            "Before a launch: start a throw-away container of the recipe's image on the node "
            "that starts the serve command (nothing running is stopped), read its engine's "
            "--help and report every flag of the rendered serve command it does not know, with "
            "the new name where a flag was renamed. Exit 1 when a flag is unknown or the check "
            "could not run. Reads ./cluster.yaml, ~/.config/spark-tui/cluster.yaml or --config "
            "FILE; with none, the built-in simulated cluster."
        ),
    )
    cf.add_argument("id")
    cf.add_argument("--profile", metavar="NAME")
    cf.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="sets",
        help="override for this check, e.g. image=NAME",
    )
    cf.add_argument("--config", metavar="FILE", dest="render_config", help="cluster.yaml")
    cf.add_argument("--json", action="store_true", help="one JSON object")
    lint = rs.add_parser(
        "lint",
        help="check recipe files (file:line errors; exit 2 when one does not load)",
        description=(
            "Check recipe files in spark-tui's, eugr/spark-vllm-docker's or sparkrun's format. "
            "With no PATH: the built-in recipes and ~/.config/spark-tui/recipes/. Fields of a "
            "community recipe with no spark-tui equivalent are listed, never fatal."
        ),
    )
    lint.add_argument("paths", nargs="*", metavar="PATH", help="a recipe file or a directory")
    imp = rs.add_parser(
        "import",
        help="convert eugr/spark-vllm-docker or sparkrun recipes into spark-tui's format",
        description=(
            "Write each recipe as a spark-tui recipe file (readable, editable) named after the "
            "source file, with a comment line per field that had no equivalent. A directory is "
            "searched for *.yaml / *.yml, sub-directories included."
        ),
    )
    imp.add_argument("sources", nargs="+", metavar="FILE|DIR")
    imp.add_argument(
        "--to",
        metavar="DIR",
        dest="to_dir",
        help="where to write (default: ~/.config/spark-tui/recipes/)",
    )
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file (it is kept as NAME.yaml.<time>.bak)",
    )

    adopt = rs.add_parser(
        "adopt",
        help="turn the deployment running now (whoever started it) into a recipe",
        description=(
            "Find the serving engine running on the nodes (by its process), derive a recipe "
            "from its command line and its container, show it, and save it among your "
            "recipes once confirmed."
        ),
    )
    add_cluster_source(adopt)
    adopt.add_argument("--yes", action="store_true", help="save without asking")


def run(args: argparse.Namespace) -> int:
    from spark_tui.recipes.loader import load_recipes

    if args.recipes_command == "adopt":
        return _adopt(args)
    if args.recipes_command == "lint":
        return _lint(args.paths)
    if args.recipes_command == "import":
        return _import(args.sources, args.to_dir, args.force)
    book = load_recipes()
    if args.recipes_command == "list":
        code = _list(book, args.json)
        _report_errors(book.errors)
        return code
    recipe = book.get(args.id)
    if args.recipes_command in ("history", "undo"):
        return _history(recipe, undo=args.recipes_command == "undo", config=config_of(args))
    if args.recipes_command == "show":
        return _show(recipe, args.json)
    if args.recipes_command == "fit":
        return _fit(recipe, args)
    if args.recipes_command == "rollback":
        return _rollback(recipe, args)
    if args.recipes_command == "check-flags":
        return _check_flags(recipe, args)
    from spark_tui.recipes.clusters import find_cluster
    from spark_tui.recipes.render import render_plan

    cluster = find_cluster(config_of(args), simulated_nodes=recipe.nodes)
    plan = render_plan(recipe, cluster, profile=args.profile, sets=args.sets)
    if args.json:
        json.dump(plan.to_json(), sys.stdout, indent=2)
        print()
    else:
        sys.stdout.write(plan.to_text())
    return 0


def _adopt(args: argparse.Namespace) -> int:
    """Show the recipe derived from what runs (as a diff: it is all new) and save it."""
    from spark_tui.session import open_cluster

    with open_cluster(config_of(args), scenario=args.demo, no_config="refuse") as session:
        recipe, text = session.adopt_running()
        print(f"--- /dev/null\n+++ {recipe.id}.yaml")
        print("\n".join("+" + line for line in text.splitlines()))
        if not args.yes:
            if not sys.stdin.isatty():
                print("not saved (stdin is not a terminal): pass --yes to save it", file=sys.stderr)
                return 1
            answer = input(f"Save it as recipe {recipe.id}? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("not saved", file=sys.stderr)
                return 1
        path = session.save_adopted(recipe, text)
    print(f"saved: {path}" if path else f"adopted as {recipe.id} for this simulated session")
    return 0


def _list(book, as_json: bool) -> int:
    rows = [
        {
            "id": r.id,
            "model": r.model.id,
            "status": r.status,
            "engine": r.engine,
            "executor": r.executor,
            "nodes": r.nodes,
            "image": r.image,
            "tok_s": r.measured.tok_s,
            "title": r.title,
            "instead": r.instead,
            "sources": [{"title": s.title, "url": s.url} for s in r.sources],
            "format": r.origin,
            "not_mapped": [str(u) for u in r.unmapped if u.kind == "not mapped"],
            "revision": r.revision,
            "file": r.source,
        }
        for r in book
    ]
    if as_json:
        json.dump(rows, sys.stdout)
        print()
        return 0
    import shutil

    width = shutil.get_terminal_size((100, 24)).columns
    if not rows:
        print("no recipe loaded")
        return 0
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
    if r.origin != "spark-tui":
        out.append(f"# read from {r.origin}'s recipe format: {r.source}")
    out += [f"# {u.kind}: {u}" for u in r.unmapped]
    if r.blocked_by:
        out.append(f"# stopped by: {', '.join(r.blocked_by)}")
        out.append(
            f"# instead: {r.instead or '—'}" + (f" ({r.instead_note})" if r.instead_note else "")
        )
    if r.revision:
        out.append(f"# revision {r.revision} (patched; see 'spark-tui report')")
    sys.stdout.write("\n".join(out) + "\n" + recipe_to_yaml(r))
    return 0


def _history(recipe, undo: bool, config: str | None = None) -> int:
    from spark_tui.recipes.revisions import RevisionStore, served_launches, served_line
    from spark_tui.state import StateDir

    if undo:  # through a session: its journal records the undo, as the TUI's does
        from spark_tui.session import open_cluster

        with open_cluster(config, recipe=recipe.id, no_config="offline") as session:
            back = session.undo()
        print(f"{recipe.id}: now at revision {back.revision} (revision {recipe.revision} is kept)")
        return 0
    store = RevisionStore(StateDir.real().revisions_dir)
    revs = store.revisions(recipe.id)
    served = served_launches(store, recipe.id)
    if not revs:
        print(f"{recipe.id}: never patched (revision 0, as shipped)")
        for s in served:
            print(f"  {served_line(s)}")
        return 0
    current = store.current_number(recipe.id)
    for rev in revs:
        mark = "*" if rev.number == current else " "
        print(f"{mark} revision {rev.number}: {rev.note}")
        for s in (s for s in served if s.revision == rev.number):
            print(f"  {served_line(s)}")
        if rev.diff:
            print(rev.diff.rstrip("\n"))
    return 0


def _fit(recipe, args: argparse.Namespace) -> int:
    """Read every node once (the simulated cluster when there is no cluster.yaml), then fit."""
    from spark_tui.recipes.overrides import apply_sets
    from spark_tui.session import open_cluster

    r = apply_sets(recipe.with_profile(args.profile), args.sets)
    with open_cluster(config_of(args), sim_nodes=r.nodes) as session:
        report, unreachable = session.fit(r)
    if args.json:
        json.dump(report.to_json(), sys.stdout)
        print()
    else:
        sys.stdout.write(report.to_text())
    for n, why in unreachable.items():
        print(f"{n}: unreachable ({why})", file=sys.stderr)
    return 1 if unreachable else 0


def _rollback(recipe, args: argparse.Namespace) -> int:
    """Preview the rollback to what last served, confirm, apply through a session."""
    import time

    from spark_tui.session import open_cluster

    config = getattr(args, "render_config", None) or getattr(args, "config", None)
    with open_cluster(config, recipe=recipe.id, no_config="offline") as session:
        current, served, diff = session.rollback_preview(recipe.id)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(served.time))
        tok = f", {served.tok_s:.1f} tok/s" if served.tok_s else ""
        print(
            f"{recipe.id}: last served at {when}: revision {served.revision}, "
            f"image {served.image or '(none)'}{tok}"
        )
        for line in session.rollback_image_lines(served):
            print(line)
        if not diff:
            print(f"{recipe.id}: revision {current.revision} in use is what served: nothing to do")
            return 0
        print(f"the change from revision {current.revision} back to it:")
        print(diff.rstrip("\n"))
        if not args.yes:
            if not sys.stdin.isatty():
                print("not a terminal: pass --yes to roll back", file=sys.stderr)
                return 1
            answer = input(f"Roll {recipe.id} back to what served at {when}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing changed")
                return 1
        after = session.rollback(recipe.id)
    print(
        f"{recipe.id}: now at revision {after.revision} (what served at {when}); "
        f"revision {current.revision} is kept — the next launch uses it"
    )
    return 0


def _check_flags(recipe, args: argparse.Namespace) -> int:
    """The image's own --help on one node against the recipe's serve flags."""
    from spark_tui.recipes.overrides import apply_sets
    from spark_tui.session import open_cluster

    r = apply_sets(recipe.with_profile(args.profile), args.sets)
    config = getattr(args, "render_config", None) or getattr(args, "config", None)
    with open_cluster(config, sim_nodes=r.nodes) as session:
        report = session.check_flags(r)
    if args.json:
        json.dump(report.to_json(), sys.stdout)
        print()
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _report_errors(errors) -> None:
    """The files that did not load, one line each (file:line: reason), on stderr."""
    if not errors:
        return
    print(
        f"{len(errors)} problem(s) in recipe files; those recipes are left out "
        "(spark-tui recipes lint):",
        file=sys.stderr,
    )
    for e in errors:
        print(f"  {e}", file=sys.stderr)


def _lint(paths_: list[str]) -> int:
    """Every given file/directory (default: built-in and user recipes): errors on stderr,
    community fields without equivalent on stdout; 2 when any file does not load."""
    from pathlib import Path

    from spark_tui import paths
    from spark_tui.errors import InputError, InputErrors
    from spark_tui.recipes.loader import load_dir_partial, load_file, load_recipes

    errors: list[InputError] = []
    recipes = []
    if not paths_:
        book = load_recipes(use_revisions=False)
        recipes, errors = list(book), list(book.errors)
        checked = [str(paths.builtin_recipes_dir()), str(paths.user_recipes_dir())]
    else:
        checked = paths_
        for item in paths_:
            p = Path(item)
            if p.is_dir():
                found, errs = load_dir_partial(p)
                recipes += list(found.values())
                errors += errs
            elif p.is_file():
                try:
                    recipes.append(load_file(p))
                except InputErrors as exc:
                    errors += exc.errors
                except InputError as exc:
                    errors.append(exc)
            else:
                errors.append(InputError("no such file or directory", item))
    from spark_tui.recipes.lint import recipe_checks

    warnings = 0
    for r in recipes:
        for u in [*r.unmapped, *recipe_checks(r)]:
            where = f"{r.source}:{u.line}" if u.line else r.source
            print(f"{where}: {u.kind}: {u.field}: {u.reason}")
            warnings += u.kind == "warning"
    for e in errors:
        print(str(e), file=sys.stderr)
    print(
        f"{len(recipes)} recipe(s) load, {len(errors)} problem(s), {warnings} warning(s) in "
        f"{', '.join(checked)}",
        file=sys.stderr if errors else sys.stdout,
    )
    return 2 if errors else 0


def _import(sources: list[str], to_dir: str | None, force: bool) -> int:
    """Convert community recipes into spark-tui files; 2 when one could not be converted."""
    from pathlib import Path

    from spark_tui import paths
    from spark_tui.errors import InputError, InputErrors
    from spark_tui.recipes.community import is_community
    from spark_tui.recipes.importer import write_imported
    from spark_tui.recipes.loader import load_recipe_yaml

    target = Path(to_dir).expanduser() if to_dir else paths.user_recipes_dir()
    files: list[tuple[Path, Path | None]] = []  # (file, the directory named that holds it)
    failed = 0
    for item in sources:
        p = Path(item)
        if p.is_dir():
            files += sorted(
                (q, p) for q in p.rglob("*") if q.suffix in (".yaml", ".yml") and q.is_file()
            )
        elif p.is_file():
            files.append((p, None))
        else:
            print(f"{item}: no such file or directory", file=sys.stderr)
            failed += 1
    taken: set[str] = set()  # ids this import wrote: a later file of the same id gets its own
    for path, root in files:
        try:
            data = load_recipe_yaml(path)
            if not is_community(data):
                print(f"{path}: not an eugr or sparkrun recipe; left as it is")
                continue
            written, recipe, note = write_imported(path, target, force, taken, root)
            taken.add(recipe.id)
        except InputErrors as exc:
            for e in exc.errors:
                print(str(e), file=sys.stderr)
            failed += 1
            continue
        except InputError as exc:
            print(str(exc), file=sys.stderr)
            failed += 1
            continue
        unmapped = sum(u.kind == "not mapped" for u in recipe.unmapped)
        warned = sum(u.kind == "warning" for u in recipe.unmapped)
        print(
            f"{path} -> {written} ({recipe.origin}; {recipe.engine}/{recipe.executor}, "
            f"{recipe.nodes} node{'s' if recipe.nodes != 1 else ''}; "
            f"{unmapped} field{'s' if unmapped != 1 else ''} not mapped"
            + (f", {warned} warning{'s' if warned != 1 else ''} (recipes lint)" if warned else "")
            + f"){note}"
        )
    return 2 if failed else 0
