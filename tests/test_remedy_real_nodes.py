"""Plans and fixes over the other real back ends: the simulated GB10 cluster
(spark_tui.sim) and real OpenSSH sshd nodes (tests/sshd_nodes.py)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from spark_tui.nodes.sampler import sample
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.bringup import BringUp
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.journal import Journal
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.sim import build_sim_cluster
from tests.remedy_shims import SHIMS
from tests.sshd_nodes import sshd_cluster  # noqa: F401  (the fixture)
from tests.test_remedy_fixes import fix_from
from tests.test_remedy_launch import StepClock

SPEED = 4000.0


def test_bringup_over_the_simulator_serves_and_measures() -> None:
    with build_sim_cluster("healthy", speed=SPEED) as c:
        events = []
        b = BringUp(c.recipe, c.config, c.transports, clock=c.clock, emit=events.append)
        state = b.run()
        assert state.status == "done", state.message
        assert state.tok_s is not None and state.tok_s > 5
        assert [u.stage for u in b.units()][-1] == "smoke"
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
    with build_sim_cluster("page-cache-hog", speed=SPEED) as c:

        def fresh(node: str | None) -> dict[str, object]:
            assert node is not None
            return sample(c.transports[node], c.config.node(node), c.clock).facts()

        before = [fresh(n.name)["memory.cached_gib"] for n in c.config.nodes]
        assert max(before) >= 5  # the scenario's hog
        result = run_fix(plan_fix(fix, c.config), c.transports, yes=True, verify_facts=fresh)
        assert result.ok and result.verified is True, [v for v in result.verify]
        assert [e["exit_code"] for e in Journal().entries() if e["event"] == "command"] == [0] * 4


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
        result = LaunchRunner(transports, StepClock(), journal=Journal()).run_steps(plan.steps)
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
def test_an_unreachable_node_fails_the_fix_with_its_name(sshd_cluster) -> None:  # noqa: F811
    sshd_cluster.node("spark2").stop()
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    fix = fix_from(
        """
        - id: hello
          title: Say hello on every node
          risk: safe
          root: false
          actions:
            - type: run
              on: all
              command: echo hello {node.name}
        """
    )
    try:
        result = run_fix(plan_fix(fix, cluster), transports, yes=True)
    finally:
        for t in transports.values():
            t.close()
    assert not result.ok and result.failed_node == "spark2"
    assert "unreachable" in result.message and result.done == {"spark1": ["run"]}
    entries = Journal().entries()
    assert [e["event"] for e in entries] == ["fix-start", "command", "command", "fix-end"]
    assert entries[2]["node"] == "spark2" and entries[2]["exit_code"] is None
