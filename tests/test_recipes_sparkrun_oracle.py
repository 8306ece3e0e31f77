"""sparkrun 0.4.2's own dry run is the oracle for every sparkrun recipe spark-tui imports: per
node, the image, the model, every engine flag and value, every container environment variable
and the executor of `spark-tui recipes render --json` match what sparkrun launches, except the
differences docs/recipes.md lists as deliberate, each with its reason.

The recipes are sparkrun's registries' own files (tests/data/sparkrun-registries/SOURCES.md);
sparkrun's launches were captured by running sparkrun 0.4.2 itself (tools/sparkrun_dryrun.py,
the command in SOURCES.md), so the test needs neither the network nor sparkrun."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.recipes import sparkrun_keys
from tests.sparkrun_oracle import (
    DRYRUN,
    REGISTRIES,
    deliberate,
    differences,
    explained,
    our_nodes,
    sparkrun_nodes,
)

LAUNCHES = json.loads(DRYRUN.read_text())
RECIPES = sorted(LAUNCHES["recipes"])


def included(path: Path) -> list[Path]:
    """The files a recipe's `include:` chain names, beside it (sparkrun 0.4)."""
    out: list[Path] = []
    while True:
        ref = (yaml.safe_load(path.read_text()) or {}).get("include")
        if not isinstance(ref, str):
            return out
        found = [path.parent / n for n in (ref, f"{ref}.yaml", f"{ref}.yml")]
        nxt = next((f for f in found if f.is_file()), None)
        if nxt is None or nxt in out:
            return out
        out.append(nxt)
        path = nxt


def render(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    user = paths.user_recipes_dir()
    user.mkdir(parents=True, exist_ok=True)
    for f in [path, *included(path)]:  # a recipe built with include: keeps its bases beside it
        shutil.copy(f, user / f.name)
    capsys.readouterr()
    code = main(["recipes", "render", path.stem, "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if code == 0 else {})


def test_the_captured_launches_are_sparkrun_0_4_2s_and_the_key_maps_are_the_same_version() -> None:
    assert LAUNCHES["sparkrun"] == "0.4.2" == sparkrun_keys.version()
    # sparkrun 0.4.2 maps 76 vLLM and 47 SGLang recipe keys to flags (its SGLang table lists
    # data_parallel too, which its runtime writes itself)
    assert len(sparkrun_keys.all_keys("vllm")) == 76
    assert len(sparkrun_keys.flag_map("sglang")) == 47 - 1  # tensor_parallel comes first


@pytest.mark.parametrize("key", RECIPES)
def test_a_sparkrun_recipe_launches_as_sparkrun_launches_it(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = LAUNCHES["recipes"][key]
    code, plan = render(REGISTRIES / key, capsys)
    if entry["exit"] != 0:  # sparkrun refuses it: so does spark-tui, in one line
        assert code != 0, (
            f"{key}: sparkrun refused it ({entry['error'][-1]}), spark-tui rendered it"
        )
        return
    assert code == 0, f"{key}: sparkrun launches it, spark-tui did not render it"
    found = differences(sparkrun_nodes(entry), our_nodes(plan))
    allowed = deliberate()
    unexplained = {d for d in found if not explained(d, allowed)}
    assert not unexplained, f"{key}: {sorted(unexplained)}"


def test_every_listed_difference_still_occurs(capsys: pytest.CaptureFixture[str]) -> None:
    """A deliberate difference that no recipe shows any more is a stale entry."""
    seen: set[tuple[str, str]] = set()
    for key in RECIPES:
        entry = LAUNCHES["recipes"][key]
        if entry["exit"] != 0:
            continue
        code, plan = render(REGISTRIES / key, capsys)
        if code == 0:
            seen |= differences(sparkrun_nodes(entry), our_nodes(plan))
    listed = deliberate()
    assert listed, "docs/recipes.md lists no deliberate differences"
    stale = {item for item in listed if not any(explained(d, {item: ""}) for d in seen)}
    assert not stale, sorted(stale)
    assert all(len(reason) > 20 for reason in listed.values())


def test_deepseek_v4_1_sglang_defaults_become_sparkrun_0_4_2s_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The DeepSeek V4.1 SGLang recipe without a command template: every key of its
    defaults that sparkrun 0.4.2 maps is a flag (the old 16-key copy lost the speculative,
    CUDA-graph and load-format ones), none is reported unmapped."""
    key = "derived/deepseek-v4.1-flash-mxfp4-tp4-sglang-no-command.yaml"
    code, plan = render(REGISTRIES / key, capsys)
    assert code == 0
    ours = our_nodes(plan)
    theirs = sparkrun_nodes(LAUNCHES["recipes"][key])
    for flag in (
        "--speculative-algorithm",
        "--speculative-dspark-block-size",
        "--cuda-graph-max-bs-decode",
        "--load-format",
        "--mem-fraction-static",
        "--context-length",
        "--max-running-requests",
        "--tp-size",
    ):
        assert ours[0].flags[flag] == theirs[0].flags[flag], flag
    assert ours[0].model == theirs[0].model == "deepseek-ai/DeepSeek-V4.1-Flash"
    show = main(["recipes", "show", Path(key).stem])
    out = capsys.readouterr().out
    assert show == 0 and "chunked_prefill_size" in out  # the one key sparkrun has no flag for
    assert "speculative_algorithm" not in out.split("not mapped", 1)[-1]


DEEPSEEK_V41 = (
    "littlecedar-sparkrun-recipe-registry/recipes/ds4/deepseek-v4.1-flash-mxfp4-tp4-sglang.yaml",
    "derived/deepseek-v4.1-flash-mxfp4-tp4-sglang-no-command.yaml",
)


@pytest.mark.parametrize("key", DEEPSEEK_V41)
def test_the_deepseek_v4_1_sglang_recipe_keeps_every_flag(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recipe that lost 14 flags with the old key maps (littlecedar's registry, address in
    SOURCES.md), with its command template and without: on every node, every flag sparkrun
    0.4.2's dry run passes is in spark-tui's launch with the same value, none excused."""
    code, plan = render(REGISTRIES / key, capsys)
    assert code == 0
    theirs = sparkrun_nodes(LAUNCHES["recipes"][key])
    ours = our_nodes(plan)
    assert len(ours) == len(theirs) == 4
    distributed = {"--dist-init-addr", "--nnodes", "--node-rank"}
    for rank, (mine, sparkrun) in enumerate(zip(ours, theirs, strict=True)):
        lost = {f: v for f, v in sparkrun.flags.items() if f not in mine.flags}
        assert not lost, f"rank {rank} loses {sorted(lost)}"
        changed = {
            f: (v, mine.flags[f])
            for f, v in sparkrun.flags.items()
            if f not in ("--dist-init-addr",) and mine.flags[f] != v
        }
        assert not changed, f"rank {rank}: {changed}"
        assert mine.flags["--node-rank"] == (str(rank),)
    # the 14 flags of its command template (the derived file: the 10 its defaults map to)
    engine_flags = set(theirs[0].flags) - distributed
    assert len(engine_flags) == (10 if key.startswith("derived/") else 14), sorted(engine_flags)


def test_env_templates_and_sparkrun_always_set_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "templated.yaml"
    f.write_text(
        'recipe_version: "2"\nmodel: org/m\nruntime: vllm\ncontainer: img:1\nmin_nodes: 2\n'
        "defaults: {tensor_parallel: 2, port: 8000}\n"
        "env:\n"
        "  OMP_NUM_THREADS: '{config.tensor_parallel}'\n"
        "  RANK_INFO: 'rank {launch.node_rank} of {launch.num_nodes}'\n"
        "  LITERAL: '{{config.port}}'\n"
        "  SHELL_VAR: '${HOME}/x'\n"
    )
    code, plan = render(f, capsys)
    assert code == 0
    nodes = our_nodes(plan)
    assert [n.env["RANK_INFO"] for n in nodes] == ["rank 0 of 2", "rank 1 of 2"]
    assert nodes[0].env["OMP_NUM_THREADS"] == "2"
    assert nodes[0].env["LITERAL"] == "{config.port}"
    assert nodes[0].env["SHELL_VAR"] == "${HOME}/x"
    for var, value in {
        "NCCL_CUMEM_ENABLE": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "CUTE_DSL_ARCH": "sm_121a",
        "HF_HUB_OFFLINE": "1",
    }.items():
        assert all(n.env[var] == value for n in nodes), var
