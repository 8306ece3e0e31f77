"""verify-model-copies: listing, comparison and the copy command, run by a real shell."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.loader import load_recipes
from spark_tui.remedy.actions import kind
from spark_tui.remedy.actions.model_copies import compare, list_command, model_dirs, parse_listing


def _sh(cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=cwd)


def _model(root: Path, shards: dict[str, bytes]) -> Path:
    root.mkdir(parents=True)
    for name, data in shards.items():
        (root / name).write_bytes(data)
    return root


def test_listing_gives_size_and_sha256_per_shard(tmp_path: Path) -> None:
    d = _model(tmp_path / "m", {"a.safetensors": b"x" * 10, "sub dir": b""})
    (d / "sub dir").unlink()
    (d / "b c.safetensors").write_bytes(b"yz")
    res = _sh(list_command([str(tmp_path / "absent"), str(d)]))
    assert res.returncode == 0, res.stderr
    got = parse_listing(res.stdout)
    assert got == {
        "a.safetensors": (10, hashlib.sha256(b"x" * 10).hexdigest()),
        "b c.safetensors": (2, hashlib.sha256(b"yz").hexdigest()),
    }


def test_compare_names_the_damaged_copy_and_its_source() -> None:
    good, bad = (100, "a" * 64), (40, "b" * 64)
    listings = {
        "spark1": {"m-1.safetensors": good, "m-2.safetensors": good},
        "spark2": {"m-1.safetensors": bad, "m-2.safetensors": good},
        "spark3": {"m-1.safetensors": good},
    }
    repairs, unsure = compare(listings)
    assert unsure == []
    assert [(r.node, r.file, r.source, r.had) for r in repairs] == [
        ("spark2", "m-1.safetensors", "spark1", bad),
        ("spark3", "m-2.safetensors", "spark1", None),
    ]
    # two nodes that disagree: the node listed first wins (the one where the wall was seen is last)
    repairs, _ = compare({"spark1": {"f": good}, "spark2": {"f": bad}})
    assert [(r.node, r.source) for r in repairs] == [("spark2", "spark1")]
    # three nodes, no two agree: nothing is trusted
    _, unsure = compare({"a": {"f": good}, "b": {"f": bad}, "c": {"f": (1, "c" * 64)}})
    assert unsure == ["f"]


def test_model_dir_follows_the_recipe_volume() -> None:
    book = load_recipes(use_user=False, use_revisions=False)
    nodes = (NodeConfig(name="a", host="a", role="head"), NodeConfig(name="b", host="b"))
    cluster = ClusterConfig(nodes=nodes, models_dir="/root/models")
    assert model_dirs(book.get("tiny-llama-cpu-vllm"), cluster) == ["/root/models/tiny-llama"]
    # a Hugging Face id: the hub cache layout first, then a plain directory
    qwen = book.get("qwen3.6-27b-fp8-vllm")
    assert model_dirs(qwen, cluster) == [
        "/root/models/hub/models--Qwen--Qwen3.6-27B-FP8",
        "/root/models/Qwen/Qwen3.6-27B-FP8",
    ]


def test_the_action_is_in_the_registry_and_previews_its_commands() -> None:
    k = kind("verify-model-copies")
    assert k.schema.min_risk == "disruptive" and k.schema.validate({"dir": "relative"})
    assert any("sha256sum" in line for line in k.generic_lines({}))
