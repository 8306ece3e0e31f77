"""`spark-tui up [--config FILE | --demo SCENARIO] [--recipe ID] [--yes] [--json]`: the guided
bring-up, headless — doctor, the fixes it calls for, launch, watch the startup, on a wall the
fix its cause calls for and one relaunch per diagnosis, then a smoke request and tok/s.

Without --yes it asks before each disruptive or destructive step (and refuses off a
terminal). With --json: one object per line, each with an "event"; the last is "done".
Exit 0 when it serves, 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import sys

from spark_tui.cli.options import add_cluster_source, add_demo_options, config_of


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "up",
        help="the guided bring-up, headless: doctor, fixes, launch, fix and relaunch, smoke",
        description=(
            "Take the cluster from nothing to serving: doctor, the fixes it calls for, launch, "
            "watch the startup, on a wall its fix and one relaunch per diagnosis, smoke, tok/s."
        ),
    )
    add_cluster_source(p, "bring up a simulated scenario instead")
    p.add_argument("--recipe", metavar="ID", help="the recipe to launch (default: cluster.yaml's)")
    p.add_argument("--yes", action="store_true", help="run disruptive steps without asking")
    p.add_argument("--json", action="store_true", help="one JSON object per event")
    add_demo_options(p)


def _human(event: dict) -> str:
    """One line of text per event of the event language (the --json line, said in words)."""
    kind = event["event"]
    where = f" on {event['node']}" if event.get("node") else ""
    if kind == "doctor":
        failed = "; ".join(
            f"{c['id']}{' on ' + c['node'] if c['node'] else ''}" for c in event["failed"]
        )
        return f"doctor: {event['passed']} passed, {event['warnings']} warnings" + (
            f", failed: {failed}" if failed else ""
        )
    if kind in ("resolved", "fixed"):
        return f"{kind}: {event['wall']}{where} ({event['how']})"
    if kind == "diagnosis":
        return f"{event['severity']}: {event['wall']}{where}: {event['evidence'][:160]}"
    if kind in ("unreachable", "reachable"):
        why = f" ({event['reason']})" if event.get("reason") else ""
        return f"{event['node']}: {kind}{why}"
    if kind == "recipe":
        return f"recipe: {event['recipe']} (revision {event['revision']})"
    if kind == "adopt":
        return f"adopted the running deployment as recipe {event['recipe']}"
    if kind == "fix":
        extra = f" → recipe {event['recipe']} rev {event['revision']}" if "recipe" in event else ""
        return f"fix {event['fix']} for {event['wall']}: {'ok' if event['ok'] else 'FAILED'} — {event['summary']}{extra}"
    if kind == "launch":  # how it ended follows: serving (tok/s) or launch-failed (why)
        return f"launch {event['launch']} of {event.get('recipe')}"
    if kind == "launch-failed":
        return f"launch {event['launch']}: FAILED — {event['why']}"
    if kind == "soak":
        return f"soak: {'every request answered' if event['ok'] else 'a request FAILED'}"
    if kind == "serving":
        tok = event.get("tok_s")
        return "serving" + (f": the first request answered at {tok:.1f} tok/s" if tok else "")
    if kind == "refused":
        return f"not run: {event['fix']} ({event['why']})"
    if kind == "stuck":
        return f"stopped here: {event['why']}"
    if kind == "done":
        state = "serving" if event["serving"] else "NOT serving"
        active = ", ".join(
            f"{a['wall']}" + (f"@{a['node']}" if a["node"] else "") for a in event["active"]
        )
        tok = f" at {event['tok_s']:.1f} tok/s" if event.get("tok_s") else ""
        return f"done: {state}{tok}, {event['launches']} launch(es), recipe {event['recipe']}" + (
            f"; still active: {active}" if active else ""
        )
    rest = ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "time"))
    return f"{kind}: {rest}"


def run(args: argparse.Namespace) -> int:
    from spark_tui.cli.present import ask_terminal, print_progress
    from spark_tui.session import open_cluster
    from spark_tui.up import bring_up

    def emit(event: dict) -> None:
        line = json.dumps(event, ensure_ascii=False, default=str) if args.json else _human(event)
        print(line, flush=True)

    with open_cluster(
        config_of(args),
        scenario=args.demo,
        recipe=args.recipe,
        speed=args.speed if args.demo else None,
        keep_state=args.keep_state,
        no_config="refuse",
    ) as session:
        done = bring_up(
            session,
            emit,
            None if args.yes else ask_terminal,
            yes=args.yes,
            progress=None if args.json else print_progress,
        )
    if not args.json and not done["serving"]:
        print("spark-tui: the cluster is not serving (see the events above)", file=sys.stderr)
    return 0 if done["serving"] else 1
