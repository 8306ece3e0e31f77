"""`spark-tui report [LOG...] [--config FILE] [--recipe ID] [--offline] [-o FILE]`

A Markdown incident report — nodes and versions, the recipe and its revisions
with diffs, diagnoses with evidence (the given logs triaged, the recipe's
checks), the journal — to paste into a forum post or a GitHub issue.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="a Markdown incident report to paste into a forum or issue")
    p.add_argument("logs", nargs="*", metavar="LOG", help="log files to triage into the report")
    p.add_argument("--config", metavar="FILE", dest="report_config", help="cluster.yaml")
    p.add_argument("--recipe", metavar="ID", help="the recipe (default: cluster.yaml's)")
    p.add_argument("--offline", action="store_true", help="do not contact the nodes for versions")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from spark_tui import paths
    from spark_tui.errors import InputError
    from spark_tui.kb.diagnosis import DiagnosisBook
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.kb.matcher import Matcher, scan_stream
    from spark_tui.recipes.clusters import find_cluster
    from spark_tui.recipes.loader import load_recipes
    from spark_tui.recipes.revisions import RevisionStore
    from spark_tui.remedy.journal import Journal
    from spark_tui.remedy.report import ReportData, build_report, recipe_checks

    cluster = find_cluster(args.report_config or getattr(args, "config", None))
    book = load_recipes()
    recipe_id = args.recipe or cluster.recipe
    recipe = book.get(recipe_id) if recipe_id else None
    kb = load_knowledge()
    diag = DiagnosisBook()
    if args.logs:
        matcher = Matcher(kb)
        stream = matcher.stream()
        for name in args.logs:
            try:
                with open(name, "rb") as fh:
                    for hit in scan_stream(matcher, name, fh, stream):
                        diag.add(hit.wall, hit.source, hit.line_no, hit.evidence)
            except OSError as exc:
                raise InputError(f"cannot read: {exc.strerror or exc}", name) from None
    diagnoses = diag.by_first_line()
    if recipe is not None:
        diagnoses += recipe_checks(kb, recipe)
    data = ReportData(
        cluster=cluster,
        recipe=recipe,
        revisions=RevisionStore().revisions(recipe.id) if recipe else [],
        diagnoses=diagnoses,
        journal=Journal().entries(),
    )
    ev_dir = paths.state_dir() / "evidence"
    if ev_dir.is_dir():
        for f in sorted(ev_dir.glob("*/*.txt"))[-20:]:
            data.evidence[f"{f.parent.name}/{f.name}"] = f.read_text(errors="replace")
    if not args.offline and not cluster.simulated:
        data.versions = _versions(cluster)
    text = build_report(data)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _versions(cluster) -> dict[str, dict[str, str]]:
    from spark_tui.nodes.commands import VERSIONS, sample_script, split_sections
    from spark_tui.nodes.transport import NodeUnreachable
    from spark_tui.nodes.transports import open_transports as transports_for
    from spark_tui.remedy.report import versions_from_sections

    out: dict[str, dict[str, str]] = {}
    transports = transports_for(cluster)
    try:
        for name, t in transports.items():
            try:
                res = t.run(sample_script(VERSIONS), timeout=20.0)
            except NodeUnreachable as exc:
                out[name] = {"os": f"unreachable ({exc.reason})"}
                continue
            out[name] = versions_from_sections(split_sections(res.stdout))
    finally:
        for t in transports.values():
            t.close()
    return out
