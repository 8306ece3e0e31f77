"""`spark-tui fix` (not built yet: see the open issues)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fix", help="(not built yet)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from spark_tui.errors import SparkTuiError

    raise SparkTuiError("'spark-tui fix' is not built yet")
