"""A multi-node launch without Ray waits for every node's own ready evidence, not only the
head's ready line: each follower's line in its own log (vLLM's 'Loading weights took' on a
--headless follower, its own ready line for one engine per node, SGLang's dummy health check
server on a node of rank >= 1), waited for together with the head's; a follower whose container
stops fails the launch at once, naming it.

On the simulator (SteppedClock: time passes only with the waits, so 'at once' is measured in
simulated seconds, whatever the machine's load) and once over real sshd."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.events import ActionProgress
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.render import READY_GROUP, render_plan
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.sim import SteppedClock, build_sim_cluster

REPO = Path(__file__).resolve().parents[1]  # the tree under test, for the nodes' shell
VLLM_TP2 = "minimax-m2.7-nvfp4-vllm-tp2"  # its no-ray profile: eugr's no-Ray launch
SGLANG_TP2 = "minimax-m2.7-fp8-sglang-tp2"


def recipes():
    return load_recipes(use_user=False, use_revisions=False)


def cluster_of(n: int) -> ClusterConfig:
    return ClusterConfig(
        nodes=tuple(
            NodeConfig(
                f"spark{i}",
                f"10.0.0.{i}",
                "head" if i == 1 else "worker",
                fabric_if="enp1s0f0np0",
                fabric_ip=f"10.10.10.{i}",
            )
            for i in range(1, n + 1)
        ),
        source="test-cluster.yaml",
    )


def ready_waits(plan):
    return [s for s in plan.steps if s.group == READY_GROUP]


@pytest.mark.parametrize("n", [2, 3])
def test_every_follower_gets_its_own_ready_wait_grouped_with_the_heads(n):
    r = recipes().get(VLLM_TP2)
    plan = render_plan(
        r,
        cluster_of(n),
        profile="no-ray",
        sets=[f"nodes={n}", f"serve.--tensor-parallel-size={n}"],
    )
    waits = ready_waits(plan)
    assert [(s.id, s.node) for s in waits] == [
        *(("wait-node-ready", f"spark{i}") for i in range(2, n + 1)),
        ("wait-ready", "spark1"),
    ]
    ids = [s.id for s in plan.steps]
    # after every rank joined, right before the smoke request; every wait as long as start-up
    assert max(i for i, s in enumerate(ids) if s == "wait-join") < ids.index("wait-node-ready")
    assert ids.index("wait-ready") + 1 == ids.index("smoke")
    assert all(s.timeout_s == r.serve.startup_timeout_s for s in waits)
    for s in waits[:-1]:
        assert s.expect == "Loading weights took"
        assert s.command.startswith(f"docker exec {r.worker_container} tail -n 200 ")
        assert s.log_sources and "-F" in s.log_sources[0]


def test_one_engine_per_node_waits_for_each_nodes_own_ready_line():
    r = recipes().get("tiny-llama-cpu-vllm-2node")
    (follower, head) = ready_waits(render_plan(r, cluster_of(2)))
    assert (follower.node, follower.expect) == ("spark2", r.serve.ready_line)
    assert (head.node, head.expect) == ("spark1", r.serve.ready_line)


def test_sglang_followers_wait_for_their_health_server_line():
    r = recipes().get(SGLANG_TP2)
    (follower, head) = ready_waits(render_plan(r, cluster_of(2), sets=["image=sglang:test"]))
    assert (follower.node, follower.expect) == ("spark2", "health check server")
    assert head.expect == "The server is fired up and ready to roll"


def test_a_ray_follower_waits_for_its_own_workers_line_in_rays_worker_logs():
    """Ray: the worker on a Ray node writes its stdout to Ray's log directory on that node
    (worker-*.out under /tmp/ray/session_latest/logs); the follower's wait reads it there."""
    r = recipes().get(VLLM_TP2)
    (follower, head) = ready_waits(render_plan(r, cluster_of(2)))
    assert (follower.id, follower.node, follower.expect) == (
        "wait-node-ready",
        "spark2",
        "Loading weights took",
    )
    assert follower.command == (
        f"docker exec {r.worker_container} sh -c "
        "'tail -q -n 200 /tmp/ray/session_latest/logs/worker-*.out'"
    )
    assert (head.id, head.node) == ("wait-ready", "spark1")


def test_one_node_plans_have_no_grouped_wait():
    r = recipes().get(VLLM_TP2)
    solo = render_plan(r, cluster_of(2), profile="no-ray", sets=["nodes=1"])
    assert ready_waits(solo) == []
    assert [s.group for s in solo.steps if s.id == "wait-ready"] == [""]


def test_render_shows_the_per_node_waits_in_text_and_json(capsys, tmp_path):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(
        "nodes:\n"
        "  - {name: spark1, host: 10.0.0.1, role: head, fabric_ip: 10.10.10.1, fabric_if: e1}\n"
        "  - {name: spark2, host: 10.0.0.2, role: worker, fabric_ip: 10.10.10.2, fabric_if: e1}\n"
    )
    args = ["recipes", "render", VLLM_TP2, "--profile", "no-ray", "--config", str(cfg)]
    assert main(args) == 0
    text = capsys.readouterr().out
    node_wait = text.index("wait for spark2's own engine to be up")
    assert "'Loading weights took'" in text[node_wait : node_wait + 200]
    assert "waited for with every node's ready wait" in text
    assert "grep -qF -- 'Loading weights took'" in text
    assert main([*args, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    grouped = [(s["id"], s["node"]) for s in steps if s["group"] == "ready"]
    assert grouped == [("wait-node-ready", "spark2"), ("wait-ready", "spark1")]
    joins = [(s["node"], s["group"]) for s in steps if s["id"] == "wait-join"]
    assert joins == [("spark1", "join"), ("spark2", "join")]
    assert all(
        s["group"] == ""
        for s in steps
        if s["id"] not in ("wait-join", "wait-node-ready", "wait-ready")
    )


def _kill_follower_when(
    transports, clock, plan, when, follower: str = "spark2"
) -> tuple[list[float], object]:
    """An emit that stops the follower's container (`docker kill`, a command the node gets)
    the first time `when(progress)` holds; the clock time it did so goes in the list."""
    killed: list[float] = []
    container = plan.recipe.worker_container

    def emit(p: ActionProgress) -> None:
        if not killed and when(p):
            res = transports[follower].run(f"docker kill {container}")
            assert res.ok, res.stderr
            killed.append(clock.now())

    return killed, emit


@pytest.mark.parametrize("profile", [None, "no-ray"], ids=["ray", "no-ray"])
def test_a_follower_that_dies_during_the_load_fails_the_launch_at_once_naming_it(profile):
    r = recipes().get(VLLM_TP2)
    with build_sim_cluster("healthy", clock=SteppedClock()) as c:
        plan = render_plan(r, c.config, profile=profile)
        # the head shows the weight load under way: the follower's container is stopped then
        killed, emit = _kill_follower_when(
            c.transports,
            c.clock,
            plan,
            lambda p: p.step == "wait-ready" and "Loading safetensors" in (p.detail or ""),
        )
        result = LaunchRunner(c.transports, c.clock, emit=emit).run_steps(plan.steps)
        assert killed, "the load was never seen under way"
        assert not result.ok
        failed = result.failed
        assert failed is not None and (failed.step.id, failed.step.node) == (
            "wait-node-ready",
            "spark2",
        )
        assert "the container stopped" in failed.detail, failed.detail
        assert "on spark2" in result.describe()
        # at once: at the next poll (10 s), not at the end of the 2400 s start-up timeout
        assert c.clock.now() - killed[0] <= plan.steps[-2].interval_s + 1
        head = next(s for s in result.steps if s.step.id == "wait-ready")
        assert not head.ok and not head.cause
        assert head.detail.startswith("stopped waiting: spark2 failed")
        assert not any(s.step.id == "smoke" for s in result.steps)


@pytest.mark.parametrize("profile", [None, "no-ray"], ids=["ray", "no-ray"])
def test_every_follower_ready_then_the_launch_serves(profile):
    r = recipes().get(VLLM_TP2)
    with build_sim_cluster("healthy", clock=SteppedClock()) as c:
        plan = render_plan(r, c.config, profile=profile)
        result = LaunchRunner(c.transports, c.clock).run_steps(plan.steps)
        assert result.ok, result.describe()
        assert result.tok_s and result.tok_s > 0
        by_id = {(s.step.id, s.step.node): s for s in result.steps}
        follower = by_id[("wait-node-ready", "spark2")]
        assert follower.ok and follower.detail == "Loading weights took"
        # the follower's own log holds the line, in vLLM's words: its serve log (mp, with the
        # multiprocessing worker's prefix) or Ray's worker log on that node
        log = c.transports["spark2"].run(follower.step.command).stdout
        line = next(ln for ln in log.splitlines() if "Loading weights took" in ln)
        assert "[default_loader.py:501] Loading weights took " in line
        assert line.startswith("(Worker_TP1 pid=" if profile else "INFO ")
        assert by_id[("wait-ready", "spark1")].ok


def test_sglang_followers_show_their_health_server_and_the_launch_serves():
    from spark_tui.recipes.loader import load_dir
    from spark_tui.sim.scenarios import variant_recipe_dir

    r = dict(load_dir(variant_recipe_dir()))["sim-minimax-m2.7-nvfp4-sglang-tp2"]
    with build_sim_cluster("healthy", clock=SteppedClock()) as c:
        plan = render_plan(r, c.config)
        result = LaunchRunner(c.transports, c.clock).run_steps(plan.steps)
        assert result.ok, result.describe()
        follower = next(s for s in result.steps if s.step.id == "wait-node-ready")
        assert follower.ok and follower.step.node == "spark2"
        log = (
            c.transports["spark2"]
            .run(f"docker exec {r.worker_container} tail -n 200 {r.serve.log}")
            .stdout
        )
        assert "Dummy health check server started in background thread at 0.0.0.0:" in log


@pytest.mark.sshd
@pytest.mark.slow
def test_a_follower_stopped_over_real_sshd_fails_the_launch_naming_it(tmp_path: Path) -> None:
    """paramiko → sshd → ForceCommand → the simulated node: the follower's container is
    stopped over its own SSH connection while the head loads; the launch fails on it."""
    from spark_tui.sim.server import SimServer
    from tests.sshd_nodes import start_sshd_cluster

    sim = build_sim_cluster("healthy", clock=SteppedClock())
    sock = str(tmp_path / "sim.sock")
    server = SimServer(sim, sock).start()
    names = tuple(n.name for n in sim.config.nodes)
    sshd = start_sshd_cluster(tmp_path / "sshd", names=names)
    transports = {}
    try:
        for name in names:
            node = sshd.node(name)
            with (node.dir / "sshd_config").open("a") as fh:
                fh.write(
                    f"ForceCommand env PYTHONPATH={REPO} {sys.executable} "
                    "-m spark_tui.sim.remote_shell "
                    f"--socket {sock} --node {name}\n"
                )
            node.restart()
            transports[name] = sshd.transport(name)
        plan = render_plan(recipes().get(VLLM_TP2), sim.config, profile="no-ray")
        killed, emit = _kill_follower_when(
            transports,
            sim.clock,
            plan,
            lambda p: p.step == "wait-ready" and "Loading safetensors" in (p.detail or ""),
        )
        result = LaunchRunner(transports, sim.clock, emit=emit).run_steps(plan.steps)
        assert killed and not result.ok, result.describe()
        assert result.failed is not None
        assert (result.failed.step.id, result.failed.step.node) == ("wait-node-ready", "spark2")
        assert "the container stopped" in result.failed.detail
        assert sim.clock.now() - killed[0] <= 11
    finally:
        for t in transports.values():
            t.close()
        sshd.stop()
        server.close()
        sim.close()


def test_an_error_wall_on_a_follower_ends_the_join_waits_naming_that_follower():
    """The session's word that an error wall showed on spark2 (its launch_blocker) ends every
    node's join wait at once; the failed wait is spark2's, not the head's it happened to poll."""
    r = recipes().get(VLLM_TP2)
    blocker = "safetensors-corrupt-shard on spark2: SafetensorError: Error while deserializing"
    with build_sim_cluster("healthy", clock=SteppedClock()) as c:
        plan = render_plan(r, c.config, profile="no-ray")
        runner = LaunchRunner(c.transports, c.clock, abort=lambda: blocker)
        result = runner.run_steps(plan.steps)
        assert not result.ok and result.failed is not None
        assert (result.failed.step.id, result.failed.step.node) == ("wait-join", "spark2")
        assert result.failed.detail == f"stopped waiting: {blocker}"
        head = next(s for s in result.steps if s.step.id == "wait-join" and s.step.node == "spark1")
        assert not head.cause
