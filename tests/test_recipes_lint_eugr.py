"""`spark-tui recipes lint` says, one line each with file:line, what reading an eugr file as
eugr reads it changed and what would not launch as its author meant (issue 21): braces
str.format leaves, the format told by keys, solo_only with TP > 1, a flag only a mod adds
without the mod, a key given twice, the executor. On eugr's own files (358bf26,
tests/data/eugr-358bf26, and tests/data/community), and on a recipe `recipes import` wrote."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spark_tui.entry import main
from tests.recipe_words import COMMUNITY

EUGR = Path(__file__).parent / "data" / "eugr-358bf26"
RECIPES = EUGR / "recipes"


def lint(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["recipes", "lint", *map(str, paths)])
    out = capsys.readouterr()
    return code, (out.out + out.err).splitlines()


def line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def one(lines: list[str], start: str, *words: str) -> str:
    found = [ln for ln in lines if ln.startswith(start) and all(w in ln for w in words)]
    assert len(found) == 1, (start, words, lines)
    return found[0]


def test_eugr_s_own_files(capsys: pytest.CaptureFixture[str]) -> None:
    upper = RECIPES / "4x-spark-cluster" / "qwen3.5-397b-a17B-fp8.yaml"
    code, lines = lint(capsys, RECIPES, upper)
    assert code == 0
    # a key given twice: eugr's yaml.safe_load keeps the last
    dup = RECIPES / "nemotron-3-super-nvfp4.yaml"
    second = [
        i for i, ln in enumerate(dup.read_text().splitlines(), 1) if ln.startswith("container:")
    ]
    assert len(second) == 2
    one(lines, f"{dup}:{second[1]}: warning: container:", "given twice", "keeps the last")
    # an upper-case letter in the file name: eugr runs it, its id is lower-case
    one(
        lines,
        f"{upper}:",
        "warning: file name:",
        "its id is '4x-spark-cluster-qwen3.5-397b-a17b-fp8'",
    )
    one(lines, f"{upper}:", "note: file name:", "in recipes/4x-spark-cluster/")
    # solo_only with a default tensor_parallel of 2: TP 1, as eugr's solo mode
    solo = RECIPES / "gemma4-26b-a4b-nvfp4.yaml"
    one(
        lines,
        f"{solo}:{line_of(solo, 'solo_only')}: read as eugr runs it: solo_only:",
        "tensor_parallel is 2",
        "tensor_parallel 1",
    )
    # multi-node: no Ray, eugr's default; the Ray profile is eugr's --ray
    ds = RECIPES / "deepseek-v4-flash.yaml"
    one(
        lines,
        f"{ds}:{line_of(ds, '--distributed-executor-backend')}: read as eugr runs it: command:",
        "stripped",
        "--profile ray",
    )
    # str.format's doubled braces make valid JSON in eugr's files: nothing to warn about
    assert not [ln for ln in lines if "is left as written" in ln or "not valid JSON" in ln]
    # both recipes passing --gpu-memory-utilization-gb apply the mod that adds it
    assert not [ln for ln in lines if "only the mod" in ln]


def test_recipe_version_2_is_read_by_its_keys(capsys: pytest.CaptureFixture[str]) -> None:
    """The dual-Spark nemotron-3-super file carried recipe_version "2" (sparkrun's number)."""
    v2 = COMMUNITY / "eugr/nemotron-3-super-nvfp4-v2.yaml"
    code, lines = lint(capsys, v2)
    assert code == 0
    one(
        lines,
        f"{v2}:{line_of(v2, 'recipe_version')}: read as eugr runs it: recipe_version:",
        "keys make it eugr's format",
    )


def test_a_flag_only_a_mod_adds_without_the_mod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """step-3.7-flash-fp8.yaml with its `mods/gpu-mem-util-gb` line taken out, in an eugr tree
    (the mods are eugr's own, whose patch adds --gpu-memory-utilization-gb)."""
    tree = tmp_path / "spark-vllm-docker"
    (tree / "recipes").mkdir(parents=True)
    shutil.copy(EUGR / "run-recipe.py", tree)
    os.symlink(EUGR / "mods", tree / "mods")
    text = (RECIPES / "step-3.7-flash-fp8.yaml").read_text()
    assert "  - mods/gpu-mem-util-gb\n" in text
    f = tree / "recipes" / "step-3.7-flash-fp8.yaml"
    f.write_text(text.replace("  - mods/gpu-mem-util-gb\n", ""))
    code, lines = lint(capsys, f)
    assert code == 0
    one(
        lines,
        f"{f}:{line_of(f, '--gpu-memory-utilization-gb')}: warning: --gpu-memory-utilization-gb:",
        "mods/gpu-mem-util-gb",
        "stock vLLM rejects it",
    )
    # the real file, with the mod: no warning
    _, lines = lint(capsys, RECIPES / "step-3.7-flash-fp8.yaml")
    assert not [ln for ln in lines if "only the mod" in ln]


LITERAL = """\
recipe_version: "1"
name: Literal braces
container: vllm-node
defaults:
  port: 8000
  num_speculative_tokens: 3
command: |
  vllm serve org/model \\
    --port {port} \\
    --speculative-config '{{"method":"mtp","num_speculative_tokens":{{num_speculative_tokens}}}}'
"""


def test_braces_str_format_leaves_in_an_eugr_file_and_its_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "literal.yaml"
    f.write_text(LITERAL)
    code, lines = lint(capsys, f)
    assert code == 0
    line = line_of(f, "--speculative-config")
    one(lines, f"{f}:{line}: warning: --speculative-config:", "{num_speculative_tokens} is left")
    one(lines, f"{f}:{line}: warning: --speculative-config:", "not valid JSON")
    # the same said of the spark-tui recipe `recipes import` wrote from it
    out = tmp_path / "imported"
    assert main(["recipes", "import", str(f), "--to", str(out)]) == 0
    imported = out / "literal.yaml"
    code, lines = lint(capsys, imported)
    assert code == 0
    one(lines, f"{imported}:", "warning: --speculative-config:", "{num_speculative_tokens} is left")
    one(lines, f"{imported}:", "warning: --speculative-config:", "not valid JSON")


def test_tensor_parallel_above_1_on_one_node_in_any_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = Path(__file__).resolve().parents[1] / "recipes" / "qwen3.6-35b-a3b-fp8-vllm.yaml"
    f = tmp_path / "qwen-tp2-one-node.yaml"
    text = src.read_text().replace("--tensor-parallel-size: 1", "--tensor-parallel-size: 2")
    f.write_text(text.replace("id: qwen3.6-35b-a3b-fp8-vllm", "id: qwen-tp2-one-node"))
    code, lines = lint(capsys, f)
    assert code == 0
    one(
        lines,
        f"{f}:{line_of(f, '--tensor-parallel-size')}: warning: --tensor-parallel-size:",
        "tensor parallel 2 on one node",
    )
