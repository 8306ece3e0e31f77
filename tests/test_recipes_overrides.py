"""An override (`--set`, a fix's patch-recipe change) goes through the validation of a recipe
file: one line naming the override, exit 2; cluster.yaml's models_dir and recipe id."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.errors import InputError, InputErrors
from spark_tui.nodes.config import load_cluster
from spark_tui.recipes.loader import load_dir, load_recipes
from spark_tui.recipes.overrides import apply_sets
from spark_tui.recipes.render import render_plan
from spark_tui.recipes.revisions import RevisionStore, apply_patch
from spark_tui.state import StateDir
from tests.recipe_words import cluster, rendered_items

RID = "minimax-m2.7-mxfp4-vllm-tp2"


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("env.A B=1", "'A B' is not an environment variable name"),
        ("env.X\n=1", "is not an environment variable name"),
        ("image=--rm", "image '--rm' is not a container image name"),
        ("image=img;rm -rf /", "is not a container image name"),
        ("containers.head=h$(x)", "containers.head: 'h$(x)' is not a container name"),
        ("containers.worker=w\n", "is not a container name"),
        ("ray.env.BAD-NAME=1", "is not an environment variable name"),
        ("serve.--a b=1", "is not a command-line flag"),
        ("docker.env.1X=1", "is not an environment variable name"),
    ],
)
def test_a_bad_override_is_refused_with_one_line(
    item: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError) as exc:
        apply_sets(load_recipes().get(RID), [item])
    assert f"--set {item!r}" in str(exc.value) and reason in str(exc.value)
    assert main(["recipes", "render", RID, "--set", item]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and reason in err
    assert "ray start" not in capsys.readouterr().out


def test_good_overrides_still_render() -> None:
    r = apply_sets(load_recipes().get(RID), ["image=ghcr.io/org/img:1.2@sha256:abc", "env.A_B=1"])
    plan = render_plan(r, cluster(("10.0.0.1", "10.0.0.2"), "enp1s0f1np1"), stamp="T")
    env, _, _ = rendered_items(plan)
    assert ("A_B", "1") in env and "ghcr.io/org/img:1.2@sha256:abc" in plan.to_text()


def test_a_patch_recipe_change_is_validated_like_a_file() -> None:
    base = load_recipes().get(RID)
    with pytest.raises(InputError, match=r"patch-recipe.*not an environment variable name"):
        apply_patch(base, target="serve", set_env={"A B": "1"})
    with pytest.raises(InputError, match="not a command-line flag"):
        RevisionStore(StateDir.real().revisions_dir).patch(
            base, note="bad", target="ray", set_args={"--x y": 1}
        )
    assert RevisionStore(StateDir.real().revisions_dir).current(RID) is None  # nothing stored


def test_a_recipe_file_env_key_with_a_newline_is_refused(tmp_path: Path) -> None:
    (tmp_path / "nl.yaml").write_text(
        "id: nl\ntitle: t\nstatus: untested\nmodel: {id: a/b}\nengine: vllm\nexecutor: mp\n"
        'nodes: 1\nserve:\n  args: {--port: 8000}\n  env: {"X\\n": "1"}\n'
        "  log: /tmp/x.log\n  ready_line: ok\n"
    )
    with pytest.raises(InputErrors) as exc:
        load_dir(tmp_path)
    assert (
        f"{tmp_path / 'nl.yaml'}:10: serve.env: 'X\\n' is not an environment variable name"
        in str(exc.value)
    )


def test_cluster_yaml_unknown_recipe_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text("nodes:\n  - {name: a, host: 127.0.0.1, role: head}\n\nrecipe: no-such-recipe\n")
    c = load_cluster(f)
    with pytest.raises(InputError) as exc:
        load_recipes().get(c.recipe)
    assert str(exc.value).startswith(f"{f}:4: unknown recipe id 'no-such-recipe'")
    assert main(["doctor", "--config", str(f)]) == 2
    assert f"{f}:4: unknown recipe id 'no-such-recipe'" in capsys.readouterr().err


def test_models_dir_comes_from_cluster_yaml(tmp_path: Path) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(
        "models_dir: /data/models/\nnodes:\n"
        "  - {name: a, host: 10.0.0.1, role: head, fabric_if: eth1, fabric_ip: 10.0.0.1}\n"
        "  - {name: b, host: 10.0.0.2, role: worker, fabric_if: eth1, fabric_ip: 10.0.0.2}\n"
    )
    c = load_cluster(f)
    assert c.models_dir == "/data/models"
    plan = render_plan(load_recipes().get(RID), c, stamp="T")
    assert "/data/models:/models" in rendered_items(plan)[2]
    default = render_plan(load_recipes().get(RID), cluster(("1.1.1.1", "1.1.1.2"), "e"), stamp="T")
    assert '-v "$HOME"/.cache/huggingface:/models' in default.to_text()
    f.write_text(f.read_text().replace("/data/models/", "'/data:x'"))
    with pytest.raises(InputErrors) as exc:
        load_cluster(f)
    assert f"{f}:1: 'models_dir' is '/data:x', not a directory" in str(exc.value)
