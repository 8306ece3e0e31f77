"""Weights where users have them (issue 21): a Hugging Face id's weights in the hub cache
layout (`huggingface-cli download`: hub/models--ORG--NAME/snapshots/REV/) are loaded by the id;
in a plain directory ORG/NAME under the cache (`--local-dir`, a copy) the engine would not
find them by the id, so the launch loads that directory (its path in the container, mounted
through `{cluster.models_dir}`) and serves it under the id. Checked on the simulated cluster
(its nodes hold every built-in recipe's checkpoint in both places until one is removed with
`rm -rf`, as on a node) and on this machine's files laid out as users have them."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.recipes.model import Recipe
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.session import Session

RECIPE = "minimax-m2.5-nvfp4-vllm-ep"  # a Hugging Face id, both layouts on the simulated nodes
MODEL = "lukealonso/MiniMax-M2.5-NVFP4"


def _launch_plan(session: Session) -> LaunchPlan:
    plan = session.plan_launch()
    launches = [a.launch for a in plan.actions if a.launch is not None]
    assert len(launches) == 1
    return launches[0]


def _serve_text(plan: LaunchPlan) -> str:
    return "\n".join(s.command for s in plan.steps if s.id == "serve")


def test_a_plain_directory_is_loaded_on_the_simulated_cluster() -> None:
    with Session.open(None, scenario="healthy", speed=600) as session:
        recipe = session.use_recipe(RECIPE)
        assert recipe.model.path == MODEL
        for node in session.config.nodes:  # the hub copy removed, the plain one kept
            res = session.transports[node.name].run(
                "rm -rf .cache/huggingface/hub/models--lukealonso--MiniMax-M2.5-NVFP4", timeout=30
            )
            assert res.ok, res
        plan = _launch_plan(session)
        serve = _serve_text(plan)
        assert f"vllm serve /root/.cache/huggingface/{MODEL} " in serve, serve
        assert f"--served-model-name {MODEL}" in serve, serve
        assert any("plain directory" in w for w in plan.warnings), plan.warnings
        assert plan.recipe.served_name == MODEL  # the smoke request asks for the id
        result = session.apply(session.plan_launch(), yes=True)
        assert result.ok, result.summary()


def test_the_hub_layout_is_loaded_by_its_id_on_the_simulated_cluster() -> None:
    with Session.open(None, scenario="healthy", speed=600) as session:
        session.use_recipe(RECIPE)
        plan = _launch_plan(session)
        serve = _serve_text(plan)
        assert f"vllm serve {MODEL} " in serve and "--served-model-name" not in serve, serve
        assert not any("plain directory" in w for w in plan.warnings)


@pytest.mark.parametrize("layout", ["hub", "plain", "none"])
def test_weights_laid_out_as_users_have_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """A node on this machine (`host: local`) with models_dir holding the weights as
    `huggingface-cli download` writes them, as `--local-dir` writes them, or not at all."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    models = tmp_path / "models"
    model = "cyankiwi/GLM-4.7-Flash-AWQ-4bit"
    if layout == "hub":
        repo = models / "hub" / "models--cyankiwi--GLM-4.7-Flash-AWQ-4bit"
        (repo / "blobs").mkdir(parents=True)
        (repo / "blobs" / "abc123").write_bytes(b"\0" * 4096)
        snap = repo / "snapshots" / "0123abcd"
        snap.mkdir(parents=True)
        (snap / "model.safetensors").symlink_to("../../blobs/abc123")
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0123abcd")
    elif layout == "plain":
        plain = models / model
        plain.mkdir(parents=True)
        (plain / "model.safetensors").write_bytes(b"\0" * 4096)
        (plain / "config.json").write_text("{}")
    else:
        models.mkdir()
    config = tmp_path / "cluster.yaml"
    config.write_text(
        f"recipe: glm-4.7-flash-awq-vllm\nmodels_dir: {models}\n"
        "nodes:\n  - {name: spark1, host: local, role: head}\n"
    )
    with Session.open(config) as session:
        recipe = session.recipe()
        assert isinstance(recipe, Recipe) and recipe.model.path == model
        plan = _launch_plan(session)
    serve = _serve_text(plan)
    assert f"{models}:/root/.cache/huggingface" in serve  # the cache is mounted either way
    if layout == "plain":
        assert f"vllm serve /root/.cache/huggingface/{model} " in serve, serve
        assert f"--served-model-name {model}" in serve
    else:  # found by its id in the hub layout, or downloaded by the engine under it
        assert f"vllm serve {model} " in serve and "--served-model-name" not in serve, serve
