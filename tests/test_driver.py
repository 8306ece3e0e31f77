"""The one driver: `up`, the TUI's bring-up and `watch --auto-relaunch` take the same steps
to the same verdicts on every simulated scenario; the TUI's first offer is the fix `up`
applies first; a verified log-wall fix shows as fixed until the relaunch proves it."""

from __future__ import annotations

import asyncio
import functools
import json

import pytest

from spark_tui.bringup import GuidedBringUp
from spark_tui.driver import Driver, step_events
from spark_tui.event_lines import line
from spark_tui.session import open_cluster
from spark_tui.sim import SteppedClock, scenario_names
from spark_tui.up import bring_up
from tests.test_tui_live import OPENED, wait_for

SPEED = 240.0
STEP_EVENTS = ("adopt", "doctor", "fix", "launch", "serving", "launch-failed", "stuck", "refused")


def verdicts(events: list[dict]) -> list[tuple]:
    """The steps and how they ended (what the front ends must agree on)."""
    return [
        (e["event"], e.get("ok"), e.get("wall"), e.get("fix"))
        for e in events
        if e["event"] in STEP_EVENTS
    ]


def up_steps(name: str, **clock) -> list[tuple]:
    events: list[dict] = []
    with open_cluster(scenario=name, **(clock or {"clock": SteppedClock()})) as session:
        bring_up(session, events.append, None, yes=True)
    return verdicts(events)


def watch_steps(name: str, monkeypatch: pytest.MonkeyPatch, capsys) -> list[tuple]:
    """`spark-tui watch --json --demo NAME --auto-relaunch`, run in this process so that its
    session opens on a stepped clock (the command line and its printer as a user runs them)."""
    import spark_tui.session
    from spark_tui.entry import main

    stepped = functools.partial(spark_tui.session.open_cluster, clock=SteppedClock())
    monkeypatch.setattr(spark_tui.session, "open_cluster", stepped)
    argv = ["watch", "--json", "--demo", name, "--auto-relaunch", "--duration", "1"]
    capsys.readouterr()
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all("time" in e for e in lines if e["event"] in (*STEP_EVENTS, "relaunch"))
    return verdicts(lines)


def tui_steps(name: str) -> list[tuple]:
    """The bring-up screen's steps as its keys run them: g on each step; a failed step's
    diagnosis gets the fix the screen offers (`a`, confirmed), then g again."""
    with open_cluster(scenario=name, clock=SteppedClock()) as session:
        session.start()
        driver = Driver(session)
        driver.settle()  # as `up` and `watch` do before their first decision (Driver.run)
        screen = GuidedBringUp(driver)
        screen.confirm = lambda _prompt, _nodes: True
        for sid in ("recipe", "doctor", "fixes", "launch", "serving"):
            for _ in range(4):
                if sid == "recipe" and driver.next_move().kind != "adopt":
                    break
                outcome = screen.run(sid, lambda _p: None)
                if outcome.ok or outcome.diagnosis is None or sid == "doctor":
                    break
                fix = driver.fix_for(outcome.diagnosis)
                assert fix is not None
                session.apply(session.plan_fix(outcome.diagnosis, fix), yes=True)
        driver.end()
        return verdicts([line(e) for s in driver.steps for e in step_events(s)])


@pytest.mark.slow
@pytest.mark.parametrize("name", scenario_names())
def test_up_the_tui_bringup_and_watch_take_the_same_steps(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    up = up_steps(name)
    assert tui_steps(name) == up
    assert watch_steps(name, monkeypatch, capsys) == up
    assert up[-1][0] == "serving", up  # the last launch served (and its soak answered)


@pytest.mark.slow
@pytest.mark.parametrize("name", scenario_names())
def test_the_tuis_first_offer_is_the_fix_up_applies_first(name: str) -> None:
    """Compared in the same state: where `up` fixes before its first launch, the TUI is
    asked before anything launched (the story not played), once the readings' durations
    have passed (`up`'s doctor predicts without waiting them); where `up`'s first fix
    follows a launch, the TUI plays the story's launch and is asked after it."""
    from spark_tui.session import Session
    from spark_tui.tui.app import SparkTuiApp
    from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail

    steps = up_steps(name, speed=SPEED)  # compared with the app at the same speed
    kinds = [s[0] for s in steps]
    first = next(((w, f) for kind, _ok, w, f in steps if kind == "fix"), None)
    before_launch = first is not None and kinds.index("fix") < (
        kinds.index("launch") if "launch" in kinds else len(kinds)
    )

    async def scenario() -> tuple | None:
        session = Session.open(None, scenario=name, speed=SPEED)
        OPENED.append(session)
        app = SparkTuiApp(session, autoplay=not before_launch)
        async with app.run_test(size=(120, 40)) as pilot:
            detail = app.main_screen.query_one(DiagnosisDetail)

            def offered():
                d = detail.diagnosis
                fix = detail.selected_fix() if d is not None and d.active else None
                return (d.wall.id, fix.id) if fix is not None else None

            await wait_for(pilot, lambda: session.monitor is not None)
            longest = max((r.for_s for w in session.kb for r in w.rules), default=0.0)
            t0 = session.clock.now()
            # as many readings as `up` took before its first fix (a round, the doctor's),
            # and before a launch every reading's duration waited out
            await asyncio.to_thread(session.monitor.wait_rounds, 2)
            if before_launch:
                await wait_for(pilot, lambda: session.clock.now() - t0 > longest, limit_s=60)
                await asyncio.to_thread(session.monitor.wait_rounds, 2)
            await wait_for(pilot, lambda: offered() is not None or first is None, limit_s=60)
            await pilot.pause(0.2)
            return offered()

    assert asyncio.run(scenario()) == first


def test_a_verified_log_wall_fix_shows_fixed_until_the_relaunch_proves_it() -> None:
    with open_cluster(scenario="page-cache-hog", speed=SPEED) as session:
        session.start()
        driver = Driver(session)
        session.apply(session.plan_launch(), yes=True)
        session.monitor.wait_rounds(3)
        low = next(d for d in session.diagnoses() if d.wall.id == "vllm-free-memory-low")
        assert low.state == "active"
        fix = low.wall.fix("drop-page-caches")
        result = session.apply(session.plan_fix(low, fix), yes=True)
        assert result.ok and result.verified is not False, result.summary()

        def now():  # the session hands out snapshots: each read is the diagnosis as it is now
            return next(
                d
                for d in session.diagnoses(True)
                if (d.wall.id, d.source) == (low.wall.id, low.source)
            )

        assert low.state == "active"  # what was handed out before stays as it was
        fixed = now()
        assert fixed.state == "fixed" and not fixed.active
        assert fixed.to_json()["fixed"].startswith("fixed: ")
        # what happens next is the relaunch that proves it
        assert driver.next_move().kind == "launch"
        session.apply(session.plan_launch(), yes=True)
        assert now().state == "resolved", (now().state, now().resolution)


def test_a_fix_that_only_shows_is_never_the_one_relaunched_on() -> None:
    """port-in-use's first fix shows the port's holder (ss -ltnp): a relaunch after it fails
    the same way (measured on the real tier: three launches, three "Address already in use").
    The driver takes the fix that frees the port; dropping the page cache stays a remedy."""
    from spark_tui.driver import _remedial, reads_only
    from spark_tui.kb.diagnosis import Diagnosis, Source
    from spark_tui.kb.loader import load_knowledge

    kb = load_knowledge()
    port = kb.walls["port-in-use"]
    assert reads_only(port.fix("show-port-holder"))
    assert not reads_only(port.fix("stop-stack-and-relaunch"))
    assert not reads_only(kb.walls["page-cache-hog"].fix("drop-page-caches"))
    assert reads_only(kb.walls["engine-process-killed"].fix("show-kernel-log"))
    d = Diagnosis(
        port, Source.log("spark1", "serve"), 41, "OSError: [Errno 98] Address already in use"
    )
    assert [f.id for f in _remedial(d)] == ["stop-stack-and-relaunch"]


def test_a_launch_is_stopped_only_by_evidence_taken_after_it_began() -> None:
    """A launch's fatal-wall check stops it on a wall whose evidence came after the launch
    began: one raised at the launch's own instant (a relaunch right after the failure, no
    time between them) belongs to the attempt before. On a stepped clock every reading
    between two waits is taken at the same instant, so the order is certain."""
    from types import SimpleNamespace

    wall = "cuda-graph-capture-hang"  # a readings wall: the capture spins for 120 s
    with open_cluster(scenario="cuda-graph-deadlock", clock=SteppedClock()) as session:
        session.start()
        assert not session.apply(session.plan_launch(), yes=True).ok  # the capture hangs

        def raised_again() -> float:
            session.monitor.resolve_fixed(wall, "a test", None)  # forgotten: held anew
            session.monitor.wait_rounds(2)
            session.clock.sleep(125)
            session.monitor.wait_rounds(2)
            return max(d.first_seen for d in session.diagnoses() if d.wall.id == wall)

        seen = raised_again()
        assert seen == session.clock.now()
        session.launching(SimpleNamespace(nodes=(), log_sources={}))  # at the same instant
        assert session.launch_blocker() is None, session.launch_blocker()
        session.clock.sleep(1)
        assert raised_again() > seen  # read after the launch began: still capturing
        assert (session.launch_blocker() or "").startswith(wall), session.launch_blocker()
