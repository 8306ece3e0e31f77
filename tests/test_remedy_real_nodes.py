"""Plans and fixes over the other real back ends: the simulated GB10 cluster
(spark_tui.sim) and real OpenSSH sshd nodes (tests/sshd_nodes.py)."""

from __future__ import annotations

import dataclasses
import textwrap
import threading
import time
from pathlib import Path

import pytest

from spark_tui.driver import Driver
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.fixes import FixResult, plan_fix, run_fix
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.session import open_cluster
from spark_tui.state import StateDir
from tests.remedy_shims import SHIMS, StepClock, journal, run_env
from tests.sshd_nodes import sshd_cluster  # noqa: F401  (the fixture)
from tests.test_remedy_fixes import fix_from

SPEED = 4000.0


def test_bringup_over_the_simulator_serves_and_measures() -> None:
    with open_cluster(scenario="healthy", speed=SPEED) as session:
        events: list = []
        session.start()
        driver = Driver(session)
        end = driver.run(progress=events.append, yes=True)
        assert end.kind == "serving", (end, driver.steps)
        assert driver.tok_s is not None and driver.tok_s > 0
        assert [s.kind for s in driver.steps][-2:] == ["launch", "soak"]
        details = [e.detail for e in events if e.status == "ok"]
        assert "Ray shows 2 GPUs" in details and "Application startup complete" in details


def test_drop_caches_fix_over_the_simulator_verifies_on_fresh_readings() -> None:
    fix = fix_from(
        """
        - id: drop-page-caches
          title: Drop the page cache on every node
          risk: safe
          root: true
          actions:
            - type: run
              on: all
              command: sync
            - type: run
              on: all
              command: sysctl -w vm.drop_caches=3
              root: true
          verify: [memory.cached_gib < 5]
        """
    )
    with open_cluster(scenario="page-cache-hog", speed=SPEED) as session:
        fresh = session.fresh_facts
        before = [fresh(n.name)["memory.cached_gib"] for n in session.config.nodes]
        assert max(before) >= 5  # the scenario's hog
        result = run_fix(
            plan_fix(fix, session.config), session.environment(), yes=True, verify_facts=fresh
        )
        assert result.ok and result.verified is True, [v for v in result.verify]
        entries = session.journal.entries()
        finished = [e for e in entries if e["event"] == "finished"]
        # `sync` on each node, then the drop as root on each node
        assert [(e["node"], e["exit_code"]) for e in finished] == [("spark1", 0), ("spark2", 0)] * 2
        assert all(e.get("simulated") for e in entries)  # a demo's journal says so
        scratch = session.state.root
        assert scratch != StateDir.real().root
    # the simulated cluster's state is its own: the real journal never saw it
    assert not scratch.exists() and not StateDir.real().journal_path.exists()


@pytest.mark.sshd
def test_launch_plan_runs_over_real_sshd_nodes(sshd_cluster, tmp_path: Path) -> None:  # noqa: F811
    shared = tmp_path / "shared"
    shared.mkdir()
    log = tmp_path / "calls.log"
    nodes = []
    for i, (name, node) in enumerate(sshd_cluster.nodes.items()):
        state = tmp_path / "state" / name
        state.mkdir(parents=True)
        # sshd passes no environment of ours: bake it into each node's shims
        header = textwrap.dedent(
            f"""\
            #!/bin/sh
            NODE={name}; NODE_STATE={state}; SHIM_SHARED={shared}; SHIM_LOG={log}
            export NODE NODE_STATE SHIM_SHARED SHIM_LOG
            """
        )
        for tool, body in SHIMS.items():
            path = node.bin_dir / tool
            path.write_text(header + body.lstrip("\n"))
            path.chmod(0o755)
        nodes.append(
            dataclasses.replace(
                node.node_config("head" if i == 0 else "worker"),
                fabric_if="enp1s0f0np0",
                fabric_ip=f"10.10.10.{i + 1}",
            )
        )
    cluster = dataclasses.replace(sshd_cluster.cluster_config(), nodes=tuple(nodes))
    from spark_tui.recipes.loader import load_recipes

    recipe = load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2")
    plan = render_plan(recipe, cluster, sets=(f"serve.log={tmp_path / 'serve.log'}",))
    transports = {n.name: sshd_cluster.transport(n.name) for n in nodes}
    try:
        result = LaunchRunner(transports, StepClock(), journal=journal()).run_steps(plan.steps)
    finally:
        for t in transports.values():
            t.close()
    assert result.ok, result.describe()
    assert result.tok_s == pytest.approx(32.0)
    calls = log.read_text().splitlines()
    assert any(c.startswith("spark2\tdocker run -d --name ray-worker") for c in calls)
    assert "spark1\tsudo -n sysctl -w vm.drop_caches=3" in calls
    argv = (shared / "vllm-argv").read_text().splitlines()
    assert argv[argv.index("--reasoning-parser") + 1] == "minimax_m2_append_think"


@pytest.mark.sshd
def test_an_unreachable_node_fails_the_fix_with_its_name_and_nothing_runs_anywhere(
    sshd_cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    sshd_cluster.node("spark2").stop()
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    fix = fix_from(
        f"""
        - id: hello
          title: Say hello on every node
          risk: disruptive
          root: false
          actions:
            - type: run
              on: all
              command: 'touch {tmp_path}/hello-{{node.name}}'
        """
    )
    try:
        result = run_fix(plan_fix(fix, cluster), run_env(transports), yes=True)
    finally:
        for t in transports.values():
            t.close()
    # every node is connected before the first command: a fix never half-applies
    assert not result.ok and result.failed_node == "spark2"
    assert "nothing ran on any node" in result.message and result.done == {}
    assert not list(tmp_path.glob("hello-*"))  # not even on spark1, which answered
    entries = journal().entries()
    assert [e["event"] for e in entries] == ["fix-start", "preflight", "fix-end"]
    assert entries[1]["node"] == "spark2" and entries[1]["reason"]
    assert entries[2]["status"] == "failed"


@pytest.mark.sshd
def test_a_node_that_drops_mid_command_is_journaled_as_connection_lost(
    sshd_cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    started = tmp_path / "started"
    fix = fix_from(
        f"""
        - id: slow
          title: A long command on the node where it was seen
          risk: disruptive
          root: false
          actions:
            - type: run
              on: seen
              command: 'touch {started}; sleep 120'
        """
    )
    got: list[FixResult | BaseException] = []

    def work() -> None:
        try:
            got.append(
                run_fix(plan_fix(fix, cluster, seen="spark2"), run_env(transports), yes=True)
            )
        except BaseException as exc:  # the test reports it
            got.append(exc)

    th = threading.Thread(target=work, daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert th.is_alive() and time.monotonic() < deadline, got
            time.sleep(0.05)
        sshd_cluster.node("spark2").stop()  # sshd and its sessions die mid-command
        th.join(90)
        assert not th.is_alive(), "the fix still waits on a dead node"
    finally:
        for t in transports.values():
            t.close()
    (result,) = got
    assert isinstance(result, FixResult), result
    assert not result.ok and result.failed_node == "spark2"
    assert "connection lost" in result.message and result.done == {}
    entries = journal().entries()
    assert [e["event"] for e in entries] == ["fix-start", "started", "finished", "fix-end"]
    started_rec, finished = entries[1], entries[2]
    assert started_rec["cmd"] == finished["cmd"] and finished["node"] == "spark2"
    assert finished["outcome"] == "connection lost" and finished["exit_code"] is None
