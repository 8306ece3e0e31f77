"""The shipped catalogue: every recipe, rendered, keeps every flag and env var of the public
command it was written from (kept here as test data: verbatim excerpts, community recipe
files), and says where it comes from and whether it works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.render import render_plan
from tests.recipe_words import (
    COMMANDS,
    COMMUNITY,
    SEEDS,
    cluster,
    community_items,
    excerpt_items,
    lost_items,
)

FABRIC = "enp1s0f1np1"
IPS = ("10.10.10.1", "10.10.10.2", "10.10.10.3", "10.10.10.4")
# recipe id: (source file, options) — options: ips / fabric_if of the source's own nodes,
# models_dir as its owner's cluster.yaml would name it, --set for what the source leaves
# to the user, fill for the excerpt's shell variables
CASES: dict[str, tuple[Path, dict]] = {
    "minimax-m2.7-nvfp4-vllm-tp2": (
        SEEDS / "000-minimax-m2.7-nvfp4.txt",
        {"ips": ("10.0.0.1", "10.0.0.2"), "fabric_if": "bond0", "models_dir": "/home/milo/models"},
    ),
    "minimax-m2.7-mxfp4-vllm-tp2": (
        SEEDS / "001-minimax-m2.7-mxfp4.txt",
        {"fabric_if": "enP7s7"},
    ),
    "minimax-m3-nvfp4-vllm-tp3": (
        SEEDS / "002-minimax-m3-nvfp4.txt",
        {"fabric_if": "enp1s0f0np0", "sets": ("image=chthonic-vllm:local",)},
    ),
    "minimax-m2.5-nvfp4-vllm-ep": (
        SEEDS / "003-minimax-m2.5-nvfp4-ep.txt",
        {"fabric_if": "enp1s0f0np0"},
    ),
    "minimax-m2.7-fp8-sglang-tp2": (
        SEEDS / "000-minimax-m2.7-fp8-sglang.txt",
        {"fabric_if": "bond0", "sets": ("image=lmsysorg/sglang:v0.5.12",)},
    ),
    "deepseek-v4-flash-sglang-tp2": (
        SEEDS / "004-deepseek-v4-flash-sglang.txt",
        {"fabric_if": "bond0", "sets": ("image=lmsysorg/sglang:v0.5.12",)},
    ),
    "llama-3.3-70b-instruct-vllm-tp2": (
        COMMANDS / "nvidia-vllm-llama-3.3-70b-two-sparks.txt",
        {"fill": True},
    ),
    "llama-3.1-405b-instruct-awq-vllm-tp2": (
        COMMANDS / "nvidia-vllm-llama-3.1-405b-awq-two-sparks.txt",
        {"fill": True},
    ),
    "minimax-m2.7-nvidia-nvfp4-vllm-tp2": (COMMUNITY / "sparkrun/minimax-m2.7-nvfp4-vllm.yaml", {}),
    "minimax-m2.7-awq4-vllm-tp2": (COMMUNITY / "sparkrun/minimax-m2.7-awq4-vllm.yaml", {}),
    "qwen3-coder-next-int4-autoround-vllm": (
        COMMUNITY / "sparkrun/qwen3-coder-next-int4-autoround-vllm.yaml",
        {},
    ),
    "qwen3.6-35b-a3b-fp8-vllm": (COMMUNITY / "sparkrun/qwen3.6-35b-a3b-fp8-vllm.yaml", {}),
    "qwen3.6-27b-fp8-vllm": (COMMUNITY / "sparkrun/qwen3.6-27b-fp8-vllm.yaml", {}),
    "gpt-oss-120b-mxfp4-vllm": (COMMUNITY / "sparkrun/openai-gpt-oss-120b-vllm.yaml", {}),
    "glm-4.7-flash-awq-vllm": (COMMUNITY / "sparkrun/glm-4.7-flash-awq-vllm.yaml", {}),
    "nemotron-3-nano-nvfp4-vllm": (COMMUNITY / "sparkrun/nemotron-3-nano-nvfp4-vllm.yaml", {}),
    "nemotron-3-super-nvfp4-vllm-tp2": (
        COMMUNITY / "sparkrun/nemotron-3-super-nvfp4-vllm.yaml",
        {},
    ),
    "deepseek-v4-flash-fp8-vllm-tp2": (COMMUNITY / "sparkrun/deepseek4-flash-fp8-vllm.yaml", {}),
    "qwen3.5-397b-a17b-int4-autoround-vllm-tp2": (
        COMMUNITY / "sparkrun/qwen3.5-397b-a17b-int4-autoround-2x-vllm.yaml",
        {},
    ),
    "minimax-m2.5-awq-vllm-tp2": (COMMUNITY / "sparkrun/minimax-m2.5-awq-vllm.yaml", {}),
    "qwen3-coder-next-fp8-vllm": (COMMUNITY / "sparkrun/qwen3-coder-next-fp8-vllm.yaml", {}),
    "minimax-m3-v0-nvfp4-sglang-tp4": (COMMUNITY / "sparkrun/minimax-m3-v0-nvfp4-4x.yaml", {}),
    "minimax-m2.7-nvfp4-gb10-vllm-tp2": (COMMUNITY / "eugr/minimax-m2.7-nvfp4.yaml", {}),
    "tiny-llama-cpu-vllm": (
        COMMANDS / "vllm-cpu-tiny-llama-by-hand.txt",
        {"models_dir": "/root/models"},
    ),
    "tiny-llama-cpu-vllm-2node": (
        COMMANDS / "vllm-cpu-tiny-llama-by-hand.txt",
        {"models_dir": "/root/models"},
    ),
}


def test_the_catalogue_is_whole_and_every_recipe_is_checked() -> None:
    book = load_recipes(use_user=False, use_revisions=False)
    assert not book.errors
    assert len(book) >= 20
    assert set(book.recipes) == set(CASES), "a shipped recipe without its source command here"
    models = " ".join(r.model.id.lower() for r in book)
    for family in (
        "minimax",
        "qwen3",
        "qwen3-coder-next",
        "glm",
        "gpt-oss",
        "deepseek",
        "llama",
        "nemotron",
    ):
        assert family in models, family
    assert {r.nodes for r in book} >= {1, 2, 3, 4}


@pytest.mark.parametrize("recipe_id", sorted(CASES))
def test_source_command_survives_rendering(recipe_id: str) -> None:
    source, opt = CASES[recipe_id]
    recipe = load_recipes(use_user=False, use_revisions=False).get(recipe_id)
    fabric_if = opt.get("fabric_if", FABRIC)
    ips = opt.get("ips", IPS[: recipe.nodes])
    plan = render_plan(
        recipe,
        cluster(ips, fabric_if, opt.get("models_dir", "~/.cache/huggingface")),
        sets=opt.get("sets", ()),
        stamp="T",
    )
    if source.suffix == ".yaml":
        env, flags, model = community_items(source)
        volumes: set[str] = set()
    else:
        fill = (
            {
                "$MN_IF_NAME": fabric_if,
                "$VLLM_HOST_IP": ips[0],
                "$HEAD_NODE_IP": ips[0],
                "$VLLM_IMAGE": recipe.image or "",
            }
            if opt.get("fill")
            else None
        )
        env, flags, volumes = excerpt_items(source.read_text(), fill)
        flags = {f: v.replace("<spark1-ip>", ips[0]) if v else v for f, v in flags.items()}
        model = ""
    assert env or flags
    lost = lost_items(plan, env, flags, volumes, model)
    assert not lost, f"{recipe_id} lost from {source.name}: {lost}"


def test_every_recipe_says_where_it_comes_from_and_how_it_stands() -> None:
    for r in load_recipes(use_user=False, use_revisions=False):
        assert r.sources and all(s.url.startswith("https://") for s in r.sources), r.id
        assert r.status in ("works", "broken", "untested")
        if r.status == "broken":
            assert r.blocked_by and (r.instead or r.instead_note), r.id
        # the image it was reported on, or why none is named
        assert r.image or r.image_note, r.id
        if r.measured.tok_s is not None:
            assert r.measured.source or r.measured.notes, r.id
        # no personal paths: the models directory is cluster.yaml's models_dir
        assert all(v.startswith("{cluster.models_dir}") for v in r.volumes), r.id
        text = Path(r.source).read_text()
        assert "/home/" not in text and "seeds/" not in text, r.id


def test_recipes_list_json_gives_the_catalogue_as_objects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["recipes", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in rows} == set(CASES)
    for row in rows:
        assert {"id", "model", "engine", "nodes", "status"} <= set(row)
        assert row["engine"] in ("vllm", "sglang") and row["nodes"] >= 1
    by_id = {r["id"]: r for r in rows}
    assert by_id["llama-3.3-70b-instruct-vllm-tp2"]["model"] == "meta-llama/Llama-3.3-70B-Instruct"
    assert by_id["gpt-oss-120b-mxfp4-vllm"]["tok_s"] == 58.82
