"""End to end on the simulator, no TUI, for the walls beyond the seeds (issue 8): launch the
scenario's recipe, watch with the ClusterMonitor (its head /metrics, the NCCL read once per
launch, the serve logs), take what the knowledge base proposes. Modelled on test_sim_e2e."""

from __future__ import annotations

import time
from pathlib import Path

from spark_tui.events import DiagnosisRaised
from spark_tui.kb.loader import load_knowledge
from spark_tui.monitor import ClusterMonitor
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.evidence import AutoEvidence
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.session import open_cluster
from spark_tui.sim import SteppedClock

from .test_sim_e2e import STEP_S, TAIL_POLL_S, _smoke_ok, _stamp

KB = load_knowledge(use_user=False)


class Watch:
    """A monitor over the simulated cluster whose `emit` records each raised wall's time
    (and collects evidence automatically, as `spark-tui watch` does)."""

    def __init__(self, session, recipe) -> None:
        c = session.sim
        self.c = c
        self.recipe = recipe
        self.raised: dict[tuple[str, str | None], float] = {}
        self.auto = AutoEvidence(
            self._record,
            c.config,
            c.transports,
            recipe=lambda: self.recipe,
            directory=session.state.evidence_dir,
        )
        self.monitor = ClusterMonitor(
            c.config,
            c.transports,
            KB,
            c.clock,
            self.auto,
            recipe_facts=lambda: self.recipe.facts(),
            dmon=False,
            auto_tail=False,
        )
        self.auto.readings = self.monitor

    def _record(self, event) -> None:
        if isinstance(event, DiagnosisRaised):
            key = (event.diagnosis.wall.id, event.diagnosis.node)
            self.raised.setdefault(key, event.time)

    def launch(self) -> bool:
        plan = render_plan(self.recipe, self.c.config, stamp=_stamp(self.c))
        runner = LaunchRunner(self.c.transports, self.c.clock)
        tailing = False
        for step in plan.steps:
            if step.kind != "run" and not tailing:
                for node, sources in plan.log_sources.items():
                    for i, command in enumerate(sources):
                        self.monitor.tail(node, f"log{i}", command)
                tailing = True
            if not runner.run_step(step).ok:
                return False
        return True

    def watch(self, seconds: float, until: str | None = None) -> float | None:
        """Sample every node while simulated time passes; the time `until` was raised."""
        t_end = self.c.clock.now() + seconds
        while self.c.clock.now() < t_end:
            for name in self.c.transports:
                self.monitor.sample_once(name)
            self.monitor.flush()
            hit = next((t for (w, _n), t in self.raised.items() if w == until), None)
            if hit is not None:
                return hit
            self.c.clock.advance(STEP_S)
            time.sleep(TAIL_POLL_S)
        return None

    def stop(self) -> None:
        self.monitor.stop(close_transports=False)
        self.auto.wait()

    def walls(self) -> set[str]:
        return {d.wall.id for d in self.monitor.diagnoses() if d.severity != "info"}


def test_serving_stall_detected_evidence_first_then_the_nccl_fix_holds(tmp_path: Path) -> None:
    with open_cluster(scenario="serving-stall", clock=SteppedClock()) as session:
        c = session.sim
        w = Watch(session, c.recipe)
        assert w.launch() and _smoke_ok(c, w.recipe)
        engine = c.world.engines[-1]
        wedge_at = engine.serving_from + 300.0
        real0 = time.monotonic()
        raised_at = w.watch(15 * 60, until="serving-stall")
        real_s = time.monotonic() - real0
        w.stop()
        assert raised_at is not None, w.walls()
        latency = raised_at - wedge_at
        # 60 s of frozen counter and silence, found within two rounds of 20 s
        assert 60.0 <= latency <= 60.0 + 2 * STEP_S, latency
        stall = next(d for d in w.monitor.diagnoses() if d.wall.id == "serving-stall")
        assert stall.node == "spark1" and stall.cause == "nccl-dual-build"
        assert "nccl-dual-build" in w.walls()
        assert stall.fixes()[:2] == ("capture-stall-evidence", "use-system-nccl")
        # the evidence was taken before anything restarted: readings of the last minutes
        (ev,) = [r for r in w.auto.results if "serving-stall" in r.run_id]
        assert ev.directory.parent == session.state.evidence_dir  # the session's own state
        readings = (ev.directory / "spark1-readings.txt").read_text()
        assert '"gpu.power_w": 2' in readings and '"serving.tokens_age_s"' in readings
        print(f"stall: wedge → diagnosis {latency:.0f} s simulated, {real_s:.2f} s real")

        # the cause's fix: the OS NCCL preloaded, a clean relaunch, and no wedge any more
        fix = stall.wall.fix("use-system-nccl")
        plan = plan_fix(
            fix, c.config, w.recipe, seen=stall.node, wall=stall.wall.id, stamp=_stamp(c)
        )
        result = run_fix(plan, session.environment(), yes=True)
        assert result.ok, result.message
        w2 = Watch(session, result.recipe)
        for node, sources in render_plan(result.recipe, c.config).log_sources.items():
            for i, command in enumerate(sources):
                w2.monitor.tail(node, f"log{i}", command)
        assert _smoke_ok(c, w2.recipe)
        assert w2.watch(15 * 60, until="serving-stall") is None
        w2.stop()
        assert "serving-stall" not in w2.walls() and "nccl-dual-build" not in w2.walls()
        assert w2.monitor.facts("spark1").get("nccl.library_builds") == 1


def test_fabric_slow_names_the_mtu_on_spark2_and_its_fix_verifies() -> None:
    with open_cluster(scenario="fabric-slow", clock=SteppedClock()) as session:
        c = session.sim
        w = Watch(session, c.recipe)
        w.watch(STEP_S * 2)
        w.stop()
        slow = [d for d in w.monitor.diagnoses() if d.wall.id == "fabric-slow"]
        assert [d.node for d in slow] == ["spark2"] and slow[0].cause == "mtu-1500"
        fix = slow[0].wall.fix(slow[0].fixes()[0])
        plan = plan_fix(fix, c.config, c.recipe, seen="spark2", wall="fabric-slow", stamp=_stamp(c))
        assert any("mtu 9000" in cmd.command for cmd in plan.commands())
        result = run_fix(
            plan,
            session.environment(),
            yes=True,
            verify_facts=lambda n: w.monitor.sample_once(n).facts() if n else {},
        )
        assert result.ok and result.verified, result.message


def test_restart_loop_is_reported_and_never_restarted_blindly() -> None:
    with open_cluster(scenario="restart-loop", clock=SteppedClock()) as session:
        c = session.sim
        w = Watch(session, c.recipe)
        w.watch(STEP_S)
        w.stop()
        loop = [d for d in w.monitor.diagnoses() if d.wall.id == "restart-loop"]
        assert [d.node for d in loop] == ["spark1"]
        assert "containers.restart_count >= 1 (is 6)" in loop[0].evidence
        assert w.auto.results == []  # its first fix stops the stack: asked for, never automatic
        # the renderer never gives a serving container a restart policy
        for step in render_plan(c.recipe, c.config).steps:
            assert "--restart" not in step.command


def test_safetensors_corrupt_shard_is_named_from_the_log() -> None:
    with open_cluster(scenario="safetensors-corrupt-shard", clock=SteppedClock()) as session:
        c = session.sim
        w = Watch(session, c.recipe)
        assert not w.launch()  # the load dies: the launch stops
        w.watch(STEP_S * 3)
        w.stop()
        assert "safetensors-corrupt-shard" in w.walls()
        errors = {d.wall.id for d in w.monitor.diagnoses() if d.severity == "error"}
        assert errors <= {"safetensors-corrupt-shard"}, errors


def test_watch_json_demo_streams_the_late_walls() -> None:
    """`spark-tui watch --json --demo SCENARIO` for each late scenario: its walls arrive as
    triage entries plus node and time."""
    import json
    import subprocess
    import sys

    # a demo round is 600 simulated seconds (one per real second): the stall needs the round
    # that sees the counter stop and the one after it
    for scenario, wall, node, seconds in (
        ("serving-stall", "serving-stall", "spark1", "6"),
        ("restart-loop", "restart-loop", "spark1", "1"),
        ("fabric-slow", "fabric-slow", "spark2", "1"),
        ("safetensors-corrupt-shard", "safetensors-corrupt-shard", "spark1", "1"),
    ):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "spark_tui",
                "watch",
                "--json",
                "--demo",
                scenario,
                "--duration",
                seconds,
                "--speed",
                "600",
            ],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert proc.returncode == 0, proc.stderr
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        assert all("event" in d for d in lines)
        found = [d for d in lines if d["event"] == "diagnosis" and d["wall"] == wall]
        assert found, (scenario, proc.stdout[-2000:])
        assert found[0]["node"] == node and found[0]["time"].endswith("+00:00")
