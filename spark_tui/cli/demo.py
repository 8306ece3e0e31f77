"""`spark-tui demo [SCENARIO]`: the TUI on the simulated cluster replaying a scenario;
`--list` names the scenarios, one line each."""

from __future__ import annotations

import argparse

from spark_tui.cli import OpenTui


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the TUI on a simulated DGX Spark cluster replaying a known bring-up story",
        description="Play a scenario on the built-in simulated cluster (no hardware needed).",
    )
    p.add_argument("scenario", nargs="?", help="scenario name (default: healthy); see --list")
    p.add_argument("--list", action="store_true", help="list the scenarios, one line each")
    p.add_argument(
        "--keep-state",
        action="store_true",
        help="keep the demo's journal and recipe revisions (under the state directory's demos/)",
    )


def run(args: argparse.Namespace) -> int | OpenTui:
    from spark_tui.sim import scenarios as sc

    if args.list:
        all_ = sc.scenarios()
        width = max(len(n) for n in all_)
        for name, s in all_.items():
            launches = f"recipe {s.recipe}" if s.recipe else "a deployment already running"
            print(f"{name:<{width}}  {s.description}  [{launches}]")
        return 0
    name = args.scenario or sc.DEFAULT
    sc.get(name)  # an unknown name is an InputError (exit 2) before any screen opens
    return OpenTui(
        config=None,
        read_only=bool(getattr(args, "read_only", False)),
        scenario=name,
        keep_state=args.keep_state,
    )
