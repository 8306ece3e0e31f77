"""Options several commands share: which cluster (cluster.yaml or a simulated scenario), and
how a simulated one plays."""

from __future__ import annotations

import argparse


def add_cluster_source(
    p: argparse.ArgumentParser, demo: str = "a simulated scenario instead"
) -> None:
    """`--config FILE` or `--demo SCENARIO` (one of them)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", dest="sub_config", metavar="FILE", help="cluster.yaml to use")
    src.add_argument("--demo", metavar="SCENARIO", help=demo)


def add_demo_options(p: argparse.ArgumentParser) -> None:
    """How a simulated scenario plays: its speed, and whether its state outlives it."""
    p.add_argument(
        "--speed",
        type=float,
        default=60.0,
        metavar="X",
        help="with --demo: simulated seconds per real second (default 60)",
    )
    p.add_argument(
        "--keep-state",
        action="store_true",
        help="with --demo: keep its journal and recipe revisions (the state directory's demos/)",
    )


def config_of(args: argparse.Namespace) -> str | None:
    """The cluster.yaml named after the command, else before it (`spark-tui --config F …`)."""
    return getattr(args, "sub_config", None) or getattr(args, "config", None)
