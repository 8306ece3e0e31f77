"""Every scenario starts in the state its story says, read the way spark-tui reads a node
(spark_tui.nodes.sampler over the SimTransport); the scenario data is checked like any input."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_tui.errors import InputError
from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes.sampler import sample
from spark_tui.sim import build_sim_cluster, scenario_names
from spark_tui.sim import scenarios as sc


def _facts(c, node: str) -> dict:
    cfg = c.config.node(node)
    return sample(c.transports[node], cfg, c.clock).facts()


@pytest.mark.parametrize("name", scenario_names())
def test_scenario_loads_with_its_recipe_and_known_walls(name: str) -> None:
    s = sc.get(name)
    kb_ids = {w.id for w in load_knowledge()}
    assert set(s.walls) <= kb_ids
    with build_sim_cluster(name) as c:
        assert c.config.simulated and c.config.recipe == s.recipe
        assert [n.name for n in c.config.nodes] == [
            f"spark{i}" for i in range(1, s.nodes_count + 1)
        ]
        assert [n.fabric_ip for n in c.config.nodes] == [
            f"10.10.10.{i}" for i in range(1, s.nodes_count + 1)
        ]
        assert c.config.head.name == "spark1"
        if not s.launch:  # a deployment another launcher started: it runs, no recipe of ours
            assert s.recipe is None and c.recipe is None
            assert sum(_facts(c, n)["containers.running"] for n in c.transports) >= 1
            return
        assert c.recipe.id == s.recipe
        for node in c.transports:
            f = _facts(c, node)
            assert f["gpu.name"] == "NVIDIA GB10" and f["containers.running"] == 0  # cold


def test_initial_states_follow_the_stories() -> None:
    with build_sim_cluster("healthy") as c:
        for node in ("spark1", "spark2"):
            f = _facts(c, node)
            assert f["memory.cached_gib"] < 1 and f["memory.unexplained_gib"] == 0
            assert f["files.drm_override"] is False
    with build_sim_cluster("page-cache-hog") as c:
        for node in ("spark1", "spark2"):
            f = _facts(c, node)
            assert f["memory.cached_gib"] > 90 and f["memory.free_gib"] < 15  # seed 001: ~11 GiB
    with build_sim_cluster("leaked-memory-unbalanced") as c:
        one, two = _facts(c, "spark1"), _facts(c, "spark2")
        assert two["memory.unexplained_gib"] > 25 and one["memory.unexplained_gib"] == 0
        assert two["gpu.process_count"] == 0  # nvidia-smi shows nothing (seed 000)
    with build_sim_cluster("drm-override") as c:
        assert all(_facts(c, n)["files.drm_override"] for n in ("spark1", "spark2"))
    with build_sim_cluster("head-nvrm-oom") as c:
        assert len(c.transports) == 3 and "--object-store-memory" not in c.recipe.ray.args
    assert "--disable-cuda-graph" not in sc.recipe_for(sc.get("cuda-graph-deadlock")).serve.args
    assert "--enforce-eager" not in sc.recipe_for(sc.get("ray-channel-timeout")).serve.args
    assert "VLLM_HOST_IP" not in sc.recipe_for(sc.get("host-ip-mismatch")).ray.env
    assert (
        sc.recipe_for(sc.get("ray-client-single-gpu")).serve.env["RAY_ADDRESS"].startswith("ray://")
    )
    flash = sc.recipe_for(sc.get("flashmla-sglang"))
    assert flash.engine == "sglang" and "DeepSeek-V4" in flash.model.id


def test_bad_scenario_data_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(
        "ok:\n  description: x\n  recipe: r\nbad:\n  description: y\n  recipe: r\n  colour: red\n"
    )
    with pytest.raises(InputError) as e:
        sc.scenarios.__wrapped__(p)
    assert f"{p}:7" in str(e.value) and "colour" in str(e.value)


def test_demo_list_names_every_scenario_one_line_each() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spark_tui", "demo", "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert [line.split()[0] for line in out] == scenario_names()
    bad = subprocess.run(
        [sys.executable, "-m", "spark_tui", "demo", "no-such"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown scenario" in bad.stderr


def test_streams_follow_simulated_time() -> None:
    with build_sim_cluster("healthy", speed=2000.0) as c:
        t = c.transports["spark1"]
        t.run("docker run -d --name e img sh -c 'vllm serve /m > /tmp/serve.log 2>&1'")
        with t.stream("docker exec e tail -n 5 -F /tmp/serve.log") as s:
            seen = []
            deadline = time.monotonic() + 30
            for line in s:
                seen.append(line)
                if "Application startup complete" in line or time.monotonic() > deadline:
                    break
        assert any("Loading safetensors checkpoint shards" in x for x in seen)
        assert "Application startup complete" in seen[-1]
        with t.stream("nvidia-smi dmon -s pu") as s:
            it = iter(s)
            lines = [next(it) for _ in range(4)]
        assert lines[0].startswith("# gpu") and lines[2].split()[0] == "0"
        t.run("docker run -d --name l img sh -c 'echo one; echo two'")
        with t.stream("docker logs -f --tail 200 l") as s:
            assert list(s) == ["one", "two"]  # the container ended: so does the stream
