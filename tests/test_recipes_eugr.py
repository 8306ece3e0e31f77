"""eugr's recipes mean what eugr's launcher makes of them: each defect of issue 21 on the real
upstream file that showed it (tests/data/eugr-358bf26 and tests/data/community, README.md and
SOURCES.md there). The whole launch, per node, is compared with eugr's own scripts in
tests/test_recipes_eugr_oracle.py."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.nodes.local import LocalTransport
from spark_tui.recipes.eugr import adopted_recipe
from spark_tui.recipes.loader import load_file, load_recipes
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.launch import LaunchRunner
from tests.recipe_words import COMMUNITY, cluster

EUGR = Path(__file__).parent / "data" / "eugr-358bf26"
RECIPES = EUGR / "recipes"
IPS = ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")


def serve_words(plan, node: str = "spark1") -> list[str]:
    step = next(s for s in plan.steps if s.id == "serve" and s.node == node)
    script = shlex.split(step.command)[-1]
    words = shlex.split(script)
    start = words.index("vllm")
    return words[start : words.index(">")]


@pytest.mark.parametrize(
    "name", ["inkling-small-nvfp4.yaml", "deepseek-v4-flash.yaml", "deepseek-v4-flash-0731.yaml"]
)
def test_doubled_braces_are_literal_and_placeholders_inside_them_filled(name: str) -> None:
    """str.format: '{{"method":"mtp","num_speculative_tokens":{num_speculative_tokens}}}'
    is JSON with the number in it (it stayed `{num_speculative_tokens}`: vLLM exited)."""
    r = load_file(RECIPES / name)
    plan = render_plan(r, cluster(IPS[: r.nodes], "enp1s0f1np1"), stamp="T")
    words = serve_words(plan)
    spec = json.loads(words[words.index("--speculative-config") + 1])
    wanted = yaml.safe_load((RECIPES / name).read_text())["defaults"]["num_speculative_tokens"]
    assert spec["num_speculative_tokens"] == wanted


def test_an_eugr_file_with_recipe_version_2_is_read_as_eugr() -> None:
    """The first nemotron-3-super recipe carried recipe_version "2": eugr runs it (with a
    warning), its keys say eugr's, and it is read so."""
    r = load_file(COMMUNITY / "eugr/nemotron-3-super-nvfp4-v2.yaml")
    assert r.origin == "eugr" and r.head_container == "vllm_node"
    assert r.serve.env["VLLM_NVFP4_GEMM_BACKEND"] == "marlin"  # exported, as eugr's script does


def test_solo_forces_tensor_parallel_1() -> None:
    """gemma4-26b-a4b-nvfp4: solo_only with a default tensor_parallel of 2 is TP 1 on one
    node, as eugr's solo mode forces it."""
    r = load_file(RECIPES / "gemma4-26b-a4b-nvfp4.yaml")
    assert yaml.safe_load((RECIPES / "gemma4-26b-a4b-nvfp4.yaml").read_text())["solo_only"]
    assert (r.nodes, r.tp, r.executor) == (1, 1, "mp") and not r.profiles


def test_multi_node_is_no_ray_by_default_with_ray_and_solo_profiles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = RECIPES / "qwen3.6-35b-a3b-fp8.yaml"
    r = load_file(src)
    plan = render_plan(r, cluster(IPS[:2], "enp1s0f1np1"), stamp="T")
    head, worker = serve_words(plan, "spark1"), serve_words(plan, "spark2")
    assert "--distributed-executor-backend" not in head
    assert head[head.index("--nnodes") :] == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "29501"
    ]  # fmt: skip
    assert worker[-1] == "--headless" and worker[worker.index("--node-rank") + 1] == "1"
    # the imported file renders both other ways, by name
    assert main(["recipes", "import", str(src)]) == 0
    config = tmp_path / "cluster.yaml"
    nodes = [
        {"name": f"spark{i + 1}", "host": f"spark{i + 1}", "role": "head" if i == 0 else "worker"}
        | {"fabric_if": "enp1s0f1np1", "fabric_ip": ip}
        for i, ip in enumerate(IPS[:2])
    ]
    config.write_text(yaml.safe_dump({"nodes": nodes}))
    capsys.readouterr()
    base = ["recipes", "render", "qwen3.6-35b-a3b-fp8", "--config", str(config), "--json"]
    assert main([*base, "--profile", "ray"]) == 0
    ray = json.loads(capsys.readouterr().out)
    ids = [s["id"] for s in ray["steps"]]
    assert "ray-head" in ids and "ray-worker" in ids
    serve = next(s for s in ray["steps"] if s["id"] == "serve")["command"]
    assert "--distributed-executor-backend ray" in serve and "--nnodes" not in serve
    assert main([*base, "--profile", "solo"]) == 0
    solo = json.loads(capsys.readouterr().out)
    assert {s["node"] for s in solo["steps"]} == {"spark1"}
    serve = next(s for s in solo["steps"] if s["id"] == "serve")["command"]
    assert "-tensor-parallel-size 1 " in serve and "--nnodes" not in serve


def test_adopt_keeps_the_executor_it_found() -> None:
    """eugr's no-Ray head command (as launch-cluster.sh writes it) stays no-Ray; a Ray launch
    stays Ray."""
    text = yaml.safe_load((RECIPES / "qwen3.6-35b-a3b-fp8.yaml").read_text())["command"]
    no_ray = text.format(
        **yaml.safe_load((RECIPES / "qwen3.6-35b-a3b-fp8.yaml").read_text())["defaults"]
    )
    words = shlex.split(no_ray.replace("\\\n", " "))
    words = [w for w in words if w not in ("--distributed-executor-backend", "ray")]
    head = [*words, "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1"]
    head += ["--master-port", "29501"]
    mp = adopted_recipe(head, "Qwen/Qwen3.6-35B-A3B-FP8", "vllm-node", "adopted-x", "spark1")
    assert (mp.executor, mp.nodes) == ("mp", 2)
    assert mp.serve.node_args["--nnodes"] == "{cluster.size}"
    ray = adopted_recipe(
        [*words, "--distributed-executor-backend", "ray"], None, "vllm-node", "adopted-y", "spark1"
    )
    assert ray.executor == "ray" and ray.serve.args["--distributed-executor-backend"] == "ray"
    assert not ray.serve.node_args and "ray" not in ray.profiles


def test_mods_are_copied_and_applied_before_the_engine_starts(tmp_path: Path) -> None:
    """step-3.7-flash-fp8 passes --gpu-memory-utilization-gb, which only its gpu-mem-util-gb
    mod adds to vLLM: the mods go to every node and run, in order, before `vllm serve`."""
    r = load_file(RECIPES / "step-3.7-flash-fp8.yaml")
    assert [Path(m).name for m in r.mods] == ["step-3.7-flash", "gpu-mem-util-gb"]
    plan = render_plan(r, cluster(IPS[:2], "enp1s0f1np1"), stamp="T")
    for node in ("spark1", "spark2"):
        copies = [s for s in plan.steps if s.node == node and s.kind == "copy"]
        assert [Path(s.source).name for s in copies] == ["step-3.7-flash", "gpu-mem-util-gb"]
        serve = next(s for s in plan.steps if s.node == node and s.id == "serve").command
        script = shlex.split(serve)[-1]
        runs = [i for i in range(len(script)) if script.startswith("./run.sh", i)]
        assert len(runs) == 2 and runs[-1] < script.index("vllm serve")
        assert script.index("cd /workspace/mods/step-3.7-flash") < runs[0]
        assert runs[0] < script.index("cd /workspace/mods/gpu-mem-util-gb") < runs[1]
        assert "--gpu-memory-utilization-gb" in script
    # the copy step really ships the directory (a tar on the node's stdin)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    runner = LaunchRunner({"spark1": LocalTransport("spark1", env=env)})
    step = next(s for s in plan.steps if s.node == "spark1" and s.kind == "copy")
    assert runner.run_step(step).ok
    copied = home / ".cache/spark-tui/mods/step-3.7-flash-fp8/step-3.7-flash"
    assert (copied / "run.sh").read_bytes() == (Path(step.source) / "run.sh").read_bytes()


def test_a_repeated_key_and_an_upper_case_name_load_as_eugr_loads_them() -> None:
    """nemotron-3-super-nvfp4.yaml gives `container` twice (eugr's yaml.safe_load keeps the
    last); qwen3.5-397b-a17B-fp8.yaml has an upper-case letter. Both load, with a note."""
    r = load_file(RECIPES / "nemotron-3-super-nvfp4.yaml")
    assert (
        r.image
        == yaml.safe_load((RECIPES / "nemotron-3-super-nvfp4.yaml").read_text())["container"]
    )
    assert any(u.field == "container" and "twice" in u.reason for u in r.unmapped)
    upper = RECIPES / "4x-spark-cluster" / "qwen3.5-397b-a17B-fp8.yaml"
    user = paths.user_recipes_dir()
    user.mkdir(parents=True, exist_ok=True)
    shutil.copy(upper, user)
    shutil.copy(RECIPES / "nemotron-3-super-nvfp4.yaml", user)
    book = load_recipes()
    assert not book.errors
    assert book.get("qwen3.5-397b-a17b-fp8").nodes == 4
    assert "nemotron-3-super-nvfp4" in book


def test_launch_cluster_stop_and_ours_name_the_same_container(tmp_path: Path) -> None:
    """eugr's `launch-cluster.sh stop` stops `vllm_node` on every node, the name our launch of
    an eugr recipe gives its containers (and our stop-stack stops eugr's vllm_node)."""
    stubs = Path(__file__).parent / "eugr_stubs"
    env_file = tmp_path / "env"
    env_file.write_text("CLUSTER_NODES=10.0.0.1,10.0.0.2\nETH_IF=e\nIB_IF=i\nLOCAL_IP=10.0.0.1\n")
    log = tmp_path / "log"
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "HOME": str(tmp_path), "STUB_LOG": str(log)}
    res = subprocess.run(
        ["bash", str(EUGR / "launch-cluster.sh"), "--config", str(env_file), "stop"],
        env={**env, "STUB_NODE": "10.0.0.1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    stops = [ln.split("\t") for ln in log.read_text().splitlines() if "\tdocker\tstop" in ln]
    assert [(n, shlex.split(w)) for n, _, w in stops] == [
        ("10.0.0.1", ["stop", "vllm_node"]),
        ("10.0.0.2", ["stop", "vllm_node"]),
    ]
    r = load_file(RECIPES / "qwen3.6-35b-a3b-fp8.yaml")
    plan = render_plan(r, cluster(IPS[:2], "enp1s0f1np1"), stamp="T")
    for step in (s for s in plan.steps if s.id == "serve"):
        words = shlex.split(step.command)
        assert words[words.index("--name") + 1] == "vllm_node"
    from spark_tui.remedy.render import GENERIC_STOP_STACK

    assert "--filter name=vllm" in GENERIC_STOP_STACK
