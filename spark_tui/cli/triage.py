"""`spark-tui triage [--json] FILE...`: diagnoses from log files (`-` reads stdin)."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("triage", help="diagnose log files against the knowledge base")
    p.add_argument("files", nargs="+", metavar="FILE", help="log files; '-' reads standard input")
    from spark_tui import paths

    p.add_argument(
        "--json", action="store_true", help=f"print one JSON object ({paths.doc('json.md')})"
    )
    p.add_argument(
        "--knowledge",
        metavar="DIR",
        help="use this knowledge directory instead of the built-in one",
    )
    p.add_argument("--engine", choices=("hyperscan", "re2", "re"), help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from spark_tui.kb.loader import load_knowledge
    from spark_tui.kb.matcher import Matcher
    from spark_tui.kb.triage import source_name, triage_files

    kb = load_knowledge(Path(args.knowledge) if args.knowledge else None)
    diagnoses = triage_files(Matcher(kb, engine=args.engine), args.files)
    if args.json:
        json.dump({"diagnoses": [d.to_json() for d in diagnoses]}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    from spark_tui.cli.present import print_diagnoses

    print_diagnoses(diagnoses, files=[source_name(f) for f in args.files])
    return 0
