"""Recipes load, validate with file:line errors, and give the recipe.* facts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.errors import InputErrors
from spark_tui.facts import is_known_fact
from spark_tui.kb.conditions import parse_condition
from spark_tui.recipes.loader import load_dir, load_recipes
from spark_tui.recipes.overrides import apply_sets

SIX = {
    "minimax-m2.7-nvfp4-vllm-tp2",
    "minimax-m2.7-mxfp4-vllm-tp2",
    "minimax-m3-nvfp4-vllm-tp3",
    "minimax-m2.5-nvfp4-vllm-ep",
    "minimax-m2.7-fp8-sglang-tp2",
    "deepseek-v4-flash-sglang-tp2",
}
# wall ids of /work/shared/WALLS.md (a contract)
WALL_IDS = {
    "deepgemm-unsupported-arch",
    "flashmla-unsupported-arch",
    "ray-object-store-oversized",
    "docker-rm-loses-logs",
    "ray-prestart-race",
}

MINIMAL = """\
id: tiny
title: tiny
status: works
model: {id: org/tiny}
engine: vllm
executor: ray
image: img:1
nodes: 2
serve:
  args: {--port: 8000}
  log: /tmp/tiny.log
  ready_line: Application startup complete
"""


def test_the_six_recipes_load() -> None:
    book = load_recipes()
    assert set(book.recipes) >= SIX
    broken = {r.id: r for r in book if r.status == "broken"}
    assert set(broken) == {"minimax-m2.7-fp8-sglang-tp2", "deepseek-v4-flash-sglang-tp2"}
    assert broken["minimax-m2.7-fp8-sglang-tp2"].blocked_by == ("deepgemm-unsupported-arch",)
    assert broken["minimax-m2.7-fp8-sglang-tp2"].instead == "minimax-m2.7-nvfp4-vllm-tp2"
    ds = broken["deepseek-v4-flash-sglang-tp2"]
    assert (
        ds.blocked_by == ("flashmla-unsupported-arch",)
        and ds.instead == "minimax-m2.7-nvfp4-vllm-tp2"
    )
    assert "a different model" in ds.instead_note
    assert "vLLM" in ds.instead_note and len(ds.workarounds) == 6
    assert {f"--{f}" for f in ("nnodes", "dist-init-addr")} <= set(ds.serve.node_args)
    assert ds.serve.args["--kv-cache-dtype"] == "fp8_e4m3"
    for r in book:
        assert set(r.blocked_by) <= WALL_IDS
    for r in (book.get(rid) for rid in SIX):
        assert r.model.checkpoint_bytes and r.model.checkpoint_source
        assert r.sources and all(s.title and s.url.startswith("https://") for s in r.sources)
    m3 = book.get("minimax-m3-nvfp4-vllm-tp3")
    assert m3.image is None and "fb63c9a" in m3.image_note  # the seed names a build, not an image
    assert (m3.model.attention_heads, m3.model.kv_heads) == (64, 4)


def test_recipe_facts_feed_the_check_walls() -> None:
    book = load_recipes()
    mx = book.get("minimax-m2.7-mxfp4-vllm-tp2").facts()
    nv = book.get("minimax-m2.7-nvfp4-vllm-tp2").facts()
    assert all(is_known_fact(k) for k in mx)
    oversized = parse_condition("recipe.ray.args.--object-store-memory is unset")
    assert not oversized.holds(mx) and not oversized.holds(nv)  # both cap it (seed 001; launcher)
    from spark_tui.recipes.revisions import apply_patch

    uncapped = apply_patch(
        book.get("minimax-m2.7-nvfp4-vllm-tp2"), target="ray", unset_args=["--object-store-memory"]
    )
    assert oversized.holds(uncapped.facts())
    prestart = parse_condition("recipe.env.RAY_prestart_worker_first_driver != 0")
    assert not prestart.holds(mx)
    assert parse_condition("recipe.ray.env.RAY_prestart_worker_first_driver == '0'").holds(mx)
    rm = parse_condition("recipe.docker.args contains '--rm'")
    assert not rm.holds(mx)
    with_rm = apply_sets(book.get("minimax-m2.7-mxfp4-vllm-tp2"), ["docker.--rm=true"])
    assert rm.holds(with_rm.facts())
    assert mx["recipe.docker.restart_policy"] == "no"
    assert mx["recipe.serve_args.--enable-prefix-caching"] is True
    assert mx["recipe.cuda_graphs"] is True and nv["recipe.cuda_graphs"] is False
    ep = book.get("minimax-m2.5-nvfp4-vllm-ep").facts()
    assert ep["recipe.cuda_graphs"] is False and ep["recipe.tp"] == 2


def test_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = MINIMAL.replace("nodes: 2", "nodes: 2\nvolumes: [/a:/b]\ncolour: red").replace(
        "args: {--port: 8000}", "args: {--port: 8000, port: 1, --x: false}"
    )
    (tmp_path / "tiny.yaml").write_text(bad)
    broken = MINIMAL.replace("status: works", "status: broken")
    (tmp_path / "other.yaml").write_text(broken.replace("id: tiny", "id: other"))
    with pytest.raises(InputErrors) as exc:
        load_dir(tmp_path)
    text = str(exc.value)
    assert f"{tmp_path / 'tiny.yaml'}:10: unknown field 'colour'" in text
    assert f"{tmp_path / 'tiny.yaml'}:12: serve.args: 'port' is not a command-line flag" in text
    assert "leave the flag out" in text
    assert f"{tmp_path / 'other.yaml'}:3: a broken recipe names the walls" in text


def test_a_broken_user_recipe_is_reported_and_hides_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = paths.user_recipes_dir()
    d.mkdir(parents=True)
    (d / "tiny.yaml").write_text("id: tiny\ntitle: [unclosed\n")
    assert main(["recipes", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "tiny.yaml:3: invalid YAML" in err
    import json

    listed = {r["id"] for r in json.loads(out)}
    assert listed >= SIX and "tiny" not in listed
    assert main(["recipes", "lint"]) == 2
    assert "tiny.yaml:3: invalid YAML" in capsys.readouterr().err
    # asking for it names the file and line
    assert main(["recipes", "show", "tiny"]) == 2
    assert "tiny.yaml:3: recipe 'tiny' did not load: invalid YAML" in capsys.readouterr().err


def test_user_recipes_add_and_override_by_id() -> None:
    d = paths.user_recipes_dir()
    d.mkdir(parents=True)
    (d / "tiny.yaml").write_text(MINIMAL)
    override = textwrap.dedent(
        """\
        id: minimax-m2.7-mxfp4-vllm-tp2
        title: my own
        status: works
        model: {id: me/model}
        engine: vllm
        executor: ray
        image: mine:2
        nodes: 2
        serve:
          args: {--port: 9000}
          log: /tmp/mine.log
          ready_line: Application startup complete
        """
    )
    (d / "minimax-m2.7-mxfp4-vllm-tp2.yaml").write_text(override)
    book = load_recipes()
    assert book.get("tiny").image == "img:1"
    mine = book.get("minimax-m2.7-mxfp4-vllm-tp2")
    assert mine.image == "mine:2" and mine.serve.port == 9000 and str(d) in mine.source
    assert len(book) == len(load_recipes(use_user=False)) + 1
