"""Recipe ids when one checkout holds files of the same name in different folders.

eugr/spark-vllm-docker keeps `qwen3.5-397b-int4-autoround.yaml` in `recipes/`,
`recipes/3x-spark-cluster/` and `recipes/4x-spark-cluster/` (tests/data/eugr-358bf26, the
newest commit of eugr's own, README.md there): the folder goes into the id, and importing the
whole checkout writes every recipe. sparkrun's registry has
`qwen3-coder-next-int4-autoround-vllm.yaml` in two folders (tests/data/sparkrun-registries):
the second file of an import gets the nearest folder that makes it distinct, never a collision.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.recipes.eugr import recipe_id
from spark_tui.recipes.loader import load_dir, load_file

DATA = Path(__file__).parent / "data"
EUGR = DATA / "eugr-358bf26"
RECIPES = EUGR / "recipes"
REGISTRY = DATA / "sparkrun-registries" / "spark-arena-recipe-registry"


def source_of(imported: Path) -> str:
    """The source file an imported recipe's header names (its second line)."""
    return imported.read_text().splitlines()[1].removeprefix("#").strip()


def test_files_of_the_same_name_in_eugr_s_folders_have_distinct_ids() -> None:
    same = [
        RECIPES / "qwen3.5-397b-int4-autoround.yaml",
        RECIPES / "3x-spark-cluster" / "qwen3.5-397b-int4-autoround.yaml",
        RECIPES / "4x-spark-cluster" / "qwen3.5-397b-int4-autoround.yaml",
    ]
    loaded = [load_file(p) for p in same]
    assert [r.id for r in loaded] == [
        "qwen3.5-397b-int4-autoround",
        "3x-spark-cluster-qwen3.5-397b-int4-autoround",
        "4x-spark-cluster-qwen3.5-397b-int4-autoround",
    ]
    assert [r.nodes for r in loaded] == [2, 3, 4]  # three different launches, all kept
    upper = load_file(RECIPES / "4x-spark-cluster" / "qwen3.5-397b-a17B-fp8.yaml")
    assert upper.id == "4x-spark-cluster-qwen3.5-397b-a17b-fp8"
    notes = [u for u in upper.unmapped if u.field == "file name"]
    assert {u.kind for u in notes} == {"warning", "note"}
    assert any("recipes/4x-spark-cluster/" in u.reason for u in notes)


def test_outside_a_checkout_the_id_is_the_file_name(tmp_path: Path) -> None:
    copy = tmp_path / "4x-spark-cluster" / "qwen3.5-397b-int4-autoround.yaml"
    copy.parent.mkdir()
    copy.write_bytes((RECIPES / "4x-spark-cluster" / copy.name).read_bytes())
    assert recipe_id(str(copy)) == "qwen3.5-397b-int4-autoround"
    assert load_file(copy).id == "qwen3.5-397b-int4-autoround"


def test_importing_eugr_s_whole_checkout_writes_every_recipe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["recipes", "import", str(EUGR)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "exists" not in err and "duplicate" not in err
    files = sorted(RECIPES.rglob("*.yaml"))
    written = load_dir(paths.user_recipes_dir())  # every file loads back, no duplicate id
    assert len(written) == len(files) == 35
    assert {recipe_id(str(f)) for f in files} == set(written)
    for f in files:  # each written from its own file
        assert f"{f} -> " in out
        assert source_of(paths.user_recipes_dir() / f"{recipe_id(str(f))}.yaml") == str(f)
    assert written["3x-spark-cluster-qwen3.5-397b-int4-autoround"].nodes == 3
    assert written["4x-spark-cluster-qwen3.5-397b-int4-autoround"].nodes == 4
    assert written["qwen3.5-397b-int4-autoround"].nodes == 2


def test_importing_a_registry_with_a_name_in_two_folders_keeps_both(
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = "qwen3-coder-next-int4-autoround-vllm.yaml"
    both = sorted(REGISTRY.rglob(name))
    assert len(both) == 2
    code = main(["recipes", "import", str(REGISTRY)])
    out, err = capsys.readouterr()
    assert "exists" not in err
    assert code == 0, err
    user = paths.user_recipes_dir()
    first = load_file(user / name)
    second = load_file(user / f"vllm-{name}")
    assert {first.model.id, second.model.id} == {"Intel/Qwen3-Coder-Next-int4-AutoRound"}
    assert "imported as 'vllm-qwen3-coder-next-int4-autoround-vllm'" in out
    assert {source_of(user / name), source_of(user / f"vllm-{name}")} == {str(p) for p in both}
