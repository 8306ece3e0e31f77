"""`spark-tui report [LOG...] [--config FILE] [--recipe ID] [--offline] [-o FILE]`

A Markdown incident report — nodes and versions, the recipe and its revisions
with diffs, diagnoses with evidence (the given logs triaged, the recipe's
checks), the journal (what started and never finished included) — to paste into
a forum post or a GitHub issue.
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

    from spark_tui.kb.triage import triage_files
    from spark_tui.remedy.report import recipe_checks
    from spark_tui.session import open_cluster

    config = args.report_config or getattr(args, "config", None)
    with open_cluster(config, recipe=args.recipe, no_config="offline") as session:
        recipe = session.recipe()  # the logs are this recipe's: its facts judge `only_when`
        facts = recipe.facts() if recipe is not None else None
        diagnoses = triage_files(session.matcher, args.logs, facts) if args.logs else []
        if recipe is not None:
            diagnoses += recipe_checks(session.kb, recipe)
        versions = {} if args.offline else _versions(session)
        text = session.report(diagnoses, versions=versions)
        for broken in session.unfinished():
            print(f"spark-tui: note: {broken.describe()}", file=sys.stderr)
        for skipped in session.journal.skipped:
            print(f"spark-tui: note: {skipped}", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _versions(session) -> dict[str, dict[str, str]]:
    from spark_tui.nodes.commands import VERSIONS, sample_script, split_sections
    from spark_tui.nodes.transport import NodeUnreachable
    from spark_tui.remedy.report import versions_from_sections

    out: dict[str, dict[str, str]] = {}
    for name, t in session.transports.items():
        try:
            res = t.run(sample_script(VERSIONS), timeout=20.0)
        except NodeUnreachable as exc:
            out[name] = {"os": f"unreachable ({exc.reason})"}
            continue
        out[name] = versions_from_sections(split_sections(res.stdout))
    return out
