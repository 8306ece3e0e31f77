"""What the seed recipes render beyond their flags: the launcher's words mapped, caches
dropped, serve inside the Ray head, the profiles' figures. (Every flag and env var of
every catalogue recipe's source is checked in test_recipes_catalogue.py.)"""

from __future__ import annotations

import shlex

from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.render import render_plan
from tests.recipe_words import cluster, rendered_items


def test_seed_000_launcher_words_are_mapped() -> None:
    """launch-cluster.sh's --eth-if/--ib-if/-n become the fabric env of every node."""
    plan = render_plan(
        load_recipes().get("minimax-m2.7-nvfp4-vllm-tp2"),
        cluster(("10.0.0.1", "10.0.0.2"), "bond0"),
        stamp="T",
    )
    env, flags, _ = rendered_items(plan)
    assert {("NCCL_SOCKET_IFNAME", "bond0"), ("GLOO_SOCKET_IFNAME", "bond0")} <= env
    assert ("NCCL_IB_HCA", "rocep1s0f0,roceP2p1s0f0") in env
    assert {("VLLM_HOST_IP", "10.0.0.1"), ("VLLM_HOST_IP", "10.0.0.2")} <= env
    # cudagraph_mode:none of run_vllm.sh
    assert '{"cudagraph_mode":"NONE"}' in flags["--compilation-config"]


def test_seed_001_drops_caches_and_serves_inside_ray_head() -> None:
    plan = render_plan(
        load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2"),
        cluster(("10.10.10.1", "10.10.10.2"), "enP7s7"),
        stamp="T",
    )
    drops = [s for s in plan.steps if s.id == "drop-caches"]
    assert [s.node for s in drops] == ["spark1", "spark2"]
    assert all(s.command == "sync; sudo -n sysctl -w vm.drop_caches=3" for s in drops)
    serve = next(s for s in plan.steps if s.id == "serve")
    assert shlex.split(serve.command)[:5] == ["docker", "exec", "-d", "ray-head", "sh"]
    assert "ray://" not in plan.to_text()


def test_profiles_carry_the_seeds_figures() -> None:
    book = load_recipes()
    agentic = book.get("minimax-m2.7-nvfp4-vllm-tp2").with_profile("agentic")
    spec = agentic.serve.args["--speculative-config"]
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 5
    assert agentic.measured.tok_s == 48.3
    ep = book.get("minimax-m2.5-nvfp4-vllm-ep")
    graphs = ep.with_profile("cuda-graph")
    assert "--enforce-eager" not in graphs.serve.args and graphs.cuda_graphs
    assert "8 req" in ep.profiles["cuda-graph"].stability
    assert ep.profiles["cutlass"].measured.tok_s == 13.7
    assert ep.with_profile("cutlass").serve.env["VLLM_USE_FLASHINFER_MOE_FP4"] == "1"
