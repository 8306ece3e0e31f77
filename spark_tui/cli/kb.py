"""`spark-tui kb list | show ID | lint [DIR]`: the knowledge base."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kb", help="list, show and lint the knowledge base of walls")
    kb_sub = p.add_subparsers(dest="kb_command", metavar="SUBCOMMAND", required=True)
    ls = kb_sub.add_parser("list", help="every wall: id, severity, kind, title")
    ls.add_argument("--json", action="store_true")
    show = kb_sub.add_parser("show", help="one wall in full: summary, signatures, causes, fixes")
    show.add_argument("id")
    lint = kb_sub.add_parser("lint", help="validate wall YAML files (file:line errors, exit 2)")
    lint.add_argument(
        "dir",
        nargs="?",
        help="a directory of wall files (default: built-in + ~/.config/spark-tui/knowledge)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from spark_tui.kb.loader import load_dir, load_knowledge

    if args.kb_command == "lint":
        walls = load_dir(Path(args.dir)) if args.dir else load_knowledge().walls
        print(f"{len(walls)} walls, all valid.")
        return 0
    kb = load_knowledge()
    if args.kb_command == "list":
        if args.json:
            import json

            json.dump(
                [
                    {"id": w.id, "severity": w.severity, "kind": w.kind, "title": w.title}
                    for w in kb
                ],
                sys.stdout,
            )
            print()
            return 0
        from rich.table import Table

        from spark_tui.cli.present import SEVERITY_STYLE, console

        table = Table(box=None, pad_edge=False)
        for col in ("id", "severity", "kind", "title"):
            table.add_column(col)
        for w in kb:
            table.add_row(w.id, f"[{SEVERITY_STYLE[w.severity]}]{w.severity}", w.kind, w.title)
        console().print(table)
        return 0
    wall = kb.get(args.id)
    from rich.text import Text

    from spark_tui.cli.present import SEVERITY_STYLE, console, fix_block

    out = console()
    out.print(
        Text(f"{wall.id}  ", style="bold")
        + Text(wall.severity, style=SEVERITY_STYLE[wall.severity])
        + Text(f"  {wall.kind}  engines: {', '.join(wall.engines)}")
    )
    out.print(Text(wall.title, style="bold"))
    out.print(wall.summary, markup=False)
    if wall.explain:
        out.print(Text(wall.explain, style="italic"))
    if wall.signatures:
        out.print(Text("Log signatures:", style="bold"))
        for s in wall.signatures:
            out.print(
                f"  /{s.pattern}/"
                + (f" then /{s.then}/ within {s.within} lines" if s.then else "")
                + (f" only when {' and '.join(map(str, s.only_when))}" if s.only_when else ""),
                markup=False,
            )
    if wall.sources:
        out.print(Text("Messages it is named from (upstream source):", style="bold"))
        for src in wall.sources:
            first, _, more = src.message.partition("\n")
            out.print(f"  {first}" + (" …" if more else ""), markup=False)
            out.print(f"    {src.project}, {src.versions} — {src.at}", markup=False, style="dim")
    if wall.rules:
        out.print(Text("Reading rules:", style="bold"))
        for r in wall.rules:
            dur = f" for {r.for_s:g} s" if r.for_s else ""
            out.print(f"  [{r.scope}] " + " and ".join(str(c) for c in r.when) + dur, markup=False)
    if wall.causes:
        out.print(Text("Causes:", style="bold"))
        for c in wall.causes:
            cond = " and ".join(str(x) for x in c.when) or "otherwise"
            out.print(f"  {c.id}: {c.title} (when {cond}) → {', '.join(c.fixes)}", markup=False)
    if wall.fixes:
        out.print(Text("Fixes, in order:", style="bold"))
        for i, f in enumerate(wall.fixes, 1):
            out.print(fix_block(f, i))
    out.print(Text("References: ", style="bold") + Text(", ".join(wall.references)))
    out.print(Text(f"Defined in {wall.source}", style="dim"))
    return 0
