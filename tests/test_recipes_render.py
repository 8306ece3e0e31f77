"""Rendering: recipe + cluster (+ profile, + --set) → a launch plan, and the CLI around it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.errors import InputError
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.clusters import simulated_cluster
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.plan import ray_gpus
from spark_tui.recipes.render import render_plan

SAMPLES = Path(__file__).parent / "sample-clusters"


def plan(recipe_id: str, cluster: ClusterConfig | None = None, **kw):
    r = load_recipes().get(recipe_id)
    return render_plan(r, cluster or simulated_cluster(r.nodes), stamp="S", **kw)


def test_plan_order_and_what_each_step_waits_for() -> None:
    p = plan("minimax-m2.7-mxfp4-vllm-tp2")
    assert [(s.id, s.node) for s in p.steps] == [
        ("stop-leftovers", "spark1"),
        ("stop-leftovers", "spark2"),
        ("drop-caches", "spark1"),
        ("drop-caches", "spark2"),
        ("ray-head", "spark1"),
        ("ray-worker", "spark2"),
        ("wait-ray", "spark1"),
        ("serve", "spark1"),
        ("wait-node-ready", "spark2"),
        ("wait-ready", "spark1"),
        ("smoke", "spark1"),
    ]
    by = {s.id: s for s in p.steps}
    assert by["wait-node-ready"].group == by["wait-ready"].group == "ready"
    assert by["wait-ray"].kind == "wait-ray" and by["wait-ray"].gpus == 2
    assert by["wait-ray"].command == "docker exec ray-head ray status"
    assert by["wait-ready"].expect == "Application startup complete"
    assert by["wait-ready"].command == "docker exec ray-head tail -n 200 /tmp/vllm-serve.log"
    assert by["wait-ready"].timeout_s == 2400
    assert by["drop-caches"].command == "sync; sudo -n sysctl -w vm.drop_caches=3"
    assert p.log_sources["spark1"] == (
        "docker logs -f --tail 200 ray-head",
        "docker exec ray-head tail -n 200 -F /tmp/vllm-serve.log",
    )
    assert p.log_sources["spark2"] == ("docker logs -f --tail 200 ray-worker",)
    for s in p.steps:
        if s.id.startswith("ray-"):
            argv = shlex.split(s.command)
            assert argv[:3] == ["docker", "run", "-d"]
            assert {"--network", "--gpus", "--ipc=host"} <= set(argv)
            assert argv[argv.index("--network") + 1] == "host"
            assert argv[argv.index("--gpus") + 1] == "all"
            assert "--rm" not in argv and not any(a.startswith("--restart") for a in argv)
            assert argv[-1] == "--block"


@pytest.mark.parametrize("recipe_id", ["minimax-m2.7-mxfp4-vllm-tp2", "tiny-llama-cpu-vllm"])
def test_the_engine_replaces_the_shell_so_docker_stop_signals_it(recipe_id: str) -> None:
    """`sh -c '… exec ENGINE > LOG 2>&1'`: the engine is the process `docker stop` sends
    SIGTERM to (without exec the shell, PID 1 in the container, ignores it and docker kills
    both after 30 s). Run in the simulator, the stop does not wait out the grace period."""
    from spark_tui.sim import build_sim_cluster

    p = plan(recipe_id)
    serve = next(s for s in p.steps if s.id == "serve")
    script = shlex.split(serve.command)[-1]
    engine = shlex.split(script.rsplit("; ", 1)[-1])
    assert engine[0] == "exec" and engine[-3:] == [">", p.recipe.serve.log, "2>&1"], script
    c = build_sim_cluster("healthy", speed=600.0)
    try:
        t = c.transports["spark1"]
        t.run(f"docker rm -f {p.recipe.head_container}")
        if p.recipe.executor == "ray":  # the head container first (its main process: Ray)
            assert t.run(next(s for s in p.steps if s.id == "ray-head").command).exit_code == 0
        assert t.run(serve.command).exit_code == 0
        t0 = c.clock.now()
        assert t.run(f"docker stop -t 30 {p.recipe.head_container}").exit_code == 0
        assert c.clock.now() - t0 < 5
    finally:
        c.close()


def test_docker_rm_and_restart_policies_are_never_rendered() -> None:
    for flag in ("docker.--rm=true", "docker.--restart=unless-stopped"):
        with pytest.raises(InputError, match="never renders it"):
            plan("minimax-m2.7-mxfp4-vllm-tp2", sets=[flag])


def test_three_node_sample_cluster_and_profiles() -> None:
    from spark_tui.nodes.config import load_cluster

    cluster = load_cluster(SAMPLES / "three-sparks.yaml")
    p = plan("minimax-m3-nvfp4-vllm-tp3", cluster, sets=["image=fork:tp3"])
    assert [s.node for s in p.steps if s.id == "ray-worker"] == ["spark2", "spark3"]
    assert next(s for s in p.steps if s.id == "wait-ray").gpus == 3
    with pytest.raises(InputError, match="needs 3 nodes"):
        plan("minimax-m3-nvfp4-vllm-tp3", simulated_cluster(2), sets=["image=x"])
    with pytest.raises(InputError, match="names no container image"):
        plan("minimax-m3-nvfp4-vllm-tp3", cluster)
    agentic = plan("minimax-m2.7-nvfp4-vllm-tp2", profile="agentic")
    serve = next(s for s in agentic.steps if s.id == "serve")
    assert "num_speculative_tokens" in serve.command and agentic.recipe.profile == "agentic"
    with pytest.raises(InputError, match="no profile 'fast'"):
        plan("minimax-m2.7-nvfp4-vllm-tp2", profile="fast")


def test_mp_executor_runs_one_rank_per_node() -> None:
    p = plan("deepseek-v4-flash-sglang-tp2", sets=["image=lmsysorg/sglang:v0.5.12"])
    serves = [s for s in p.steps if s.id == "serve"]
    assert [s.node for s in serves] == ["spark1", "spark2"]
    for rank, s in enumerate(serves):
        script = shlex.split(s.command)[-1]
        words = shlex.split(script.split("; ", 1)[1])
        assert words[words.index("--node-rank") + 1] == str(rank)
        assert words[words.index("--dist-init-addr") + 1] == "10.10.10.1:20000"
    assert p.warnings and "broken" in p.warnings[0]
    assert "WARNING: broken (flashmla-unsupported-arch)" in p.to_text()


def test_a_node_without_fabric_values_is_named() -> None:
    cluster = ClusterConfig(
        nodes=(
            NodeConfig("a", "h1", "head", fabric_if="enP7s7", fabric_ip="10.0.0.1"),
            NodeConfig("b", "h2", "worker"),
        ),
        source="c.yaml",
    )
    with pytest.raises(InputError, match=r"needs node\.fabric_if for b"):
        plan("minimax-m2.7-mxfp4-vllm-tp2", cluster)


def test_sets_override_and_unknown_keys_fail() -> None:
    p = plan(
        "minimax-m2.7-mxfp4-vllm-tp2",
        sets=[
            "serve.--max-model-len=65536",
            "serve.--enforce-eager=true",
            "env.OMP_NUM_THREADS=null",
            "ray.--object-store-memory=1073741824",
            "serve.--port=9001",
        ],
    )
    serve = next(s for s in p.steps if s.id == "serve").command
    assert "--max-model-len 65536" in serve and "--enforce-eager" in serve
    assert "OMP_NUM_THREADS" not in serve
    assert (
        "--object-store-memory=1073741824" in next(s for s in p.steps if s.id == "ray-head").command
    )
    assert "http://127.0.0.1:9001/" in next(s for s in p.steps if s.id == "smoke").command
    with pytest.raises(InputError, match="unknown key 'colour'"):
        plan("minimax-m2.7-mxfp4-vllm-tp2", sets=["colour=red"])
    with pytest.raises(InputError, match="expected KEY=VALUE"):
        plan("minimax-m2.7-mxfp4-vllm-tp2", sets=["serve.--x"])


def test_ray_status_gpu_parsing() -> None:
    text = "Resources\n----\nUsage:\n 0.0/2.0 GPU\n 0B/1.86GiB object_store_memory\n"
    assert ray_gpus(text) == 2.0
    assert ray_gpus("Usage:\n 1.0/3.0 GPU (1.0 used of 1.0 reserved in placement groups)") == 3.0
    assert ray_gpus("ConnectionError") is None


def test_cli_render_prints_paste_ready_commands(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = SAMPLES / "two-sparks-fabric.yaml"
    assert main(["recipes", "render", "minimax-m2.7-mxfp4-vllm-tp2", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert f"# cluster: {cfg}" in out
    assert "# ─── on spark2 (worker, 10.10.10.2) ───" in out
    assert "-e NCCL_SOCKET_IFNAME=enP7s7" in out
    assert "until docker exec ray-head ray status 2>/dev/null | grep -Eq '/2(\\.0)? GPU'" in out
    assert main(["recipes", "render", "minimax-m2.7-mxfp4-vllm-tp2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["simulated"] is True and data["steps"][-1]["kind"] == "smoke"
    assert main(["recipes", "render", "no-such-recipe"]) == 2
    assert "unknown recipe id" in capsys.readouterr().err
    assert main(["recipes", "show", "deepseek-v4-flash-sglang-tp2"]) == 0
    shown = capsys.readouterr().out
    assert (
        "SGLANG_TOPK_TRANSFORM_512_TORCH" in shown
        and "stopped by: flashmla-unsupported-arch" in shown
    )
    assert main(["recipes", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in listed} == set(load_recipes(use_user=False).recipes)


@pytest.mark.parametrize(
    "recipe_id",
    [
        "minimax-m2.7-nvfp4-vllm-tp2",
        "minimax-m2.7-mxfp4-vllm-tp2",
        "minimax-m2.5-nvfp4-vllm-ep",
        "minimax-m3-nvfp4-vllm-tp3",
        "deepseek-v4-flash-sglang-tp2",
    ],
)
def test_rendered_text_is_valid_shell(recipe_id: str, tmp_path: Path) -> None:
    import subprocess

    p = plan(recipe_id, sets=["image=img:1"], profile=None)
    script = tmp_path / "plan.sh"
    script.write_text(p.to_text())
    check = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    for step in p.steps:
        assert step.command in p.to_text()


def test_each_log_is_followed_once_per_node() -> None:
    """An mp recipe's head tails its serve log for its own rank; the plan's sources named it
    a second time, so the monitor read each line twice (`serve` and `serve2`: every wall of
    the head's log diagnosed and printed twice)."""
    checked = 0
    for r in load_recipes().recipes.values():
        if r.image is None:
            continue
        p = plan(r.id)
        for node, commands in p.log_sources.items():
            assert len(commands) == len(set(commands)), (r.id, node, commands)
            checked += 1
    assert checked > 20
