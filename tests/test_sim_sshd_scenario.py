"""One scenario end to end with its nodes behind real sshd: paramiko → sshd → ForceCommand →
the simulated node. page-cache-hog: the launch dies on vLLM's free-memory check, the live
monitor names the wall and its cause from the readings, the knowledge base's first fix runs
over SSH, and the relaunch serves."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from spark_tui.kb.loader import load_knowledge
from spark_tui.monitor import ClusterMonitor
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.journal import Journal
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.sim import build_sim_cluster
from spark_tui.sim.server import SimServer
from spark_tui.state import StateDir
from tests.remedy_shims import run_env
from tests.sshd_nodes import start_sshd_cluster


def _launch(plan, transports, clock, monitor):
    for node, sources in plan.log_sources.items():
        for i, command in enumerate(sources):
            monitor.tail(node, f"log{i}", command)
    # the session hands its matcher to a launch: a wall's line ends the wait at once
    return LaunchRunner(transports, clock, matcher=monitor.matcher).run_steps(plan.steps)


def _wait_for(predicate, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.2)
    return None


def _sshd_logs(sshd, names) -> str:
    """What each node's sshd said (a dropped connection's reason is there)."""
    return "\n".join(f"--- sshd of {n}:\n{sshd.node(n).sshd_log()[-3000:]}" for n in names)


@pytest.mark.sshd
@pytest.mark.slow
def test_page_cache_hog_over_real_sshd(tmp_path: Path) -> None:
    sim = build_sim_cluster("page-cache-hog", speed=60.0)
    sock = str(tmp_path / "sim.sock")
    server = SimServer(sim, sock).start()
    names = tuple(n.name for n in sim.config.nodes)
    sshd = start_sshd_cluster(tmp_path / "sshd", names=names)
    transports = {}
    monitor = None
    try:
        for name in names:
            node = sshd.node(name)
            with (node.dir / "sshd_config").open("a") as fh:
                fh.write(
                    f"ForceCommand {sys.executable} -m spark_tui.sim.remote_shell "
                    f"--socket {sock} --node {name}\n"
                )
            node.restart()
            transports[name] = sshd.transport(name)
        recipe = sim.recipe
        kb = load_knowledge()
        monitor = ClusterMonitor(
            sim.config,
            transports,
            kb,
            sim.clock,
            lambda e: None,
            recipe_facts=recipe.facts,
            period_s=60.0,
            dmon=False,
            auto_tail=False,
        )
        monitor.start()
        first = _launch(render_plan(recipe, sim.config), transports, sim.clock, monitor)
        assert not first.ok and "vllm-free-memory-low" in first.failed.detail, (
            f"{first.describe()}\n{_sshd_logs(sshd, names)}"
        )

        def diagnosed():
            return next(
                (d for d in monitor.diagnoses() if d.wall.id == "vllm-free-memory-low"), None
            )

        diag = _wait_for(diagnosed)
        assert diag is not None, [d.wall.id for d in monitor.diagnoses()]
        assert diag.cause == "page-cache" and diag.fixes()[0] == "drop-page-caches"

        fix = diag.wall.fix(diag.fixes()[0])
        plan = plan_fix(fix, sim.config, recipe, seen=diag.target_node, wall=diag.wall.id)
        state = StateDir(tmp_path / "state", simulated=True)
        result = run_fix(plan, run_env(transports, sim.clock, state), yes=True)
        assert result.ok, result.message
        finished = [e for e in Journal(state.journal_path) if e["event"] == "finished"]
        assert {e["node"] for e in finished} == set(names)
        assert all(e["outcome"] == "exit" and e["exit_code"] == 0 for e in finished)
        assert all(n.memory().cached < 1 for n in sim.nodes.values())  # changed through SSH

        second = _launch(render_plan(recipe, sim.config), transports, sim.clock, monitor)
        assert second.ok, f"{second.describe()}\n{_sshd_logs(sshd, names)}"
        assert second.tok_s and second.tok_s > 5
    finally:
        if monitor is not None:
            monitor.stop(close_transports=False)
        for t in transports.values():
            t.close()
        sshd.stop()
        server.close()
        sim.close()
