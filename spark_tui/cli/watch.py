"""`spark-tui watch --json [--config FILE | --demo SCENARIO]`: headless, stream diagnoses as
JSON lines while the nodes run, through the same session as the TUI. Each line is an object
with an "event": `diagnosis` (`triage --json`'s entry plus "node", "time", "cause"),
`resolved` (a wall that cleared, and how), `unreachable` / `reachable` (a node dropped or
came back), `relaunch` (with --auto-relaunch). With --demo the scenario's recipe is launched
first (as the TUI demo does). Runs until interrupted, or for --duration seconds (a demo:
DEMO_DURATION_S unless --duration says otherwise; it says so when it stops)."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

from spark_tui.cli.options import add_cluster_source, add_demo_options, config_of
from spark_tui.event_lines import (
    DiagnosisSeen,
    LineEvent,
    NodeReach,
    RelaunchDecided,
    WallFixed,
    WallResolved,
    dumps,
)

DEMO_DURATION_S = 20.0  # how long `watch --demo` runs when --duration does not say


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="headless: stream diagnoses as JSON lines while the nodes run")
    p.add_argument("--json", action="store_true", help="one JSON object per event")
    add_cluster_source(p, "watch a simulated scenario instead")
    p.add_argument("--period", type=float, metavar="S", help="seconds between rounds of a node")
    p.add_argument(
        "--duration",
        type=float,
        metavar="S",
        help=f"stop after S seconds (default: until interrupted; with --demo, {DEMO_DURATION_S:g})",
    )
    add_demo_options(p)
    p.add_argument(
        "--auto-relaunch",
        action="store_true",
        help="after a crash with a diagnosis, relaunch once with the fix that relaunches "
        "(at most once per diagnosis; never blindly)",
    )


class EventPrinter:
    """A session listener: prints the lines of the journal of events (spark_tui.event_journal:
    new diagnoses and readings walls raised again, walls that resolved, nodes that dropped or
    came back), as JSON or as text."""

    def __init__(self, as_json: bool, out=None, now: Callable[[], float] = time.time) -> None:
        from spark_tui.event_journal import EventJournal

        self.as_json = as_json
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self.crashed = threading.Event()
        # the clock that stamps the lines the monitor's events do not (set by run())
        self.journal = EventJournal(now)

    _phase: dict[str, str]
    crashed_on: str | None = None

    @property
    def now(self) -> Callable[[], float]:
        return self.journal.now

    @now.setter
    def now(self, clock: Callable[[], float]) -> None:
        self.journal.now = clock

    def write(self, event: LineEvent, text: str) -> None:
        with self._lock:
            self.out.write((dumps(event) if self.as_json else text) + "\n")
            self.out.flush()

    def __call__(self, event) -> None:
        from spark_tui.events import NodeSampled

        if isinstance(event, NodeSampled):
            phase = event.state.serving.phase
            if phase == "crashed" and self._phase.get(event.node) != "crashed":
                self.crashed_on = event.node  # a crash is a change into "crashed"
                self.crashed.set()
            self._phase[event.node] = phase
            return
        said = self.journal.said(event)
        if isinstance(said, NodeReach):
            text = f"spark-tui: {said.node}: " + (
                "reachable again" if said.reachable else f"unreachable ({said.reason}), retrying"
            )
            if self.as_json:
                self.write(said, "")
            print(text, file=sys.stderr)
        elif isinstance(said, WallResolved | WallFixed):
            where = said.node or "cluster"
            self.write(said, f"{said.EVENT:7} {where:10} {said.wall}: {said.how}")
        elif isinstance(said, DiagnosisSeen):
            d = said.diagnosis
            where = d.node or "cluster"
            self.write(said, f"{d.severity:7} {where:10} {d.wall.id}: {d.evidence}")


def run(args: argparse.Namespace) -> int:
    from spark_tui.driver import Driver
    from spark_tui.session import open_cluster

    printer = EventPrinter(args.json)
    printer._phase = {}
    stop = threading.Event()
    with open_cluster(
        config_of(args),
        scenario=args.demo,
        speed=args.speed if args.demo else None,
        keep_state=args.keep_state,
        no_config="refuse",
    ) as session:
        printer.now = session.clock.now
        session.start(printer, period_s=args.period)
        driver = Driver(session)
        if args.auto_relaunch:  # the driver's steps, as `up --json` prints them

            def stepped(step) -> None:
                for event in printer.journal.stepped(step, session.recipe()):
                    text = f"step {step.kind}: {'ok' if step.ok else 'failed'} {step.detail[:120]}"
                    printer.write(event, text)

            driver.subscribe(stepped)
        try:
            if session.sim is not None and args.auto_relaunch:
                # a simulated story, brought up as `up --yes` brings it up (the driver's steps)
                driver.run(yes=True)
                driver.end()
            elif session.plays_launch:  # a scenario plays as its story did: its recipe launched
                result = session.apply(session.plan_launch(), yes=True)
                if not args.json:
                    how = "served" if result.ok else f"failed: {result.message}"
                    print(f"spark-tui: {args.demo}: the launch {how}", file=sys.stderr)
            duration = DEMO_DURATION_S if args.demo and args.duration is None else args.duration
            ran_out = _watch(session, driver, printer, stop, duration, args.auto_relaunch)
            if ran_out and args.duration is None:  # the demo's own limit: say it was reached
                print(
                    f"spark-tui: stopped after {duration:g} s (--duration S to watch longer)",
                    file=sys.stderr,
                )
        except KeyboardInterrupt:
            pass
    return 0


def _watch(
    session, driver, printer: EventPrinter, stop: threading.Event, duration, auto: bool
) -> bool:
    """Wait for the duration (or forever); with `auto`, one relaunch per diagnosis after a
    crash (the driver's rule): one line per decision. True when the duration ran out."""
    from spark_tui.driver import decide_after_crash

    end = None if duration is None else time.monotonic() + duration
    said: tuple | None = None
    while not stop.is_set():
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return True
        if not printer.crashed.wait(min(left, 1.0) if left is not None else 1.0):
            continue
        printer.crashed.clear()  # seen: without this the wait returns at once, for ever
        if auto:
            if session.monitor is not None:
                session.monitor.wait_rounds(1)  # the crash's walls, matched
            decision = decide_after_crash(
                session.diagnoses(), session.guard, session.clock.now(), driver.changes
            )
            key = (decision.relaunch, decision.wall, decision.reason)
            if key == said and not decision.relaunch:
                continue  # the same answer to the same crash: said once
            said = key
            printer.write(
                RelaunchDecided(
                    relaunch=decision.relaunch,
                    why=decision.reason,
                    wall=decision.wall,
                    fix=decision.fix,
                    node=decision.node or printer.crashed_on,
                    time=session.clock.now(),
                ),
                f"after the crash on {printer.crashed_on}: {decision.reason}",
            )
            if decision.relaunch and decision.wall and decision.fix:
                d = next(x for x in session.diagnoses() if x.wall.id == decision.wall)
                fix = d.wall.fix(decision.fix)
                if fix is not None:
                    session.apply(session.plan_fix(d, fix), yes=True)
    return False
