"""Recipe revisions: a patch makes a new revision with a diff, undo goes back, all stay."""

from __future__ import annotations

import pytest

from spark_tui import paths
from spark_tui.errors import InputError
from spark_tui.recipes.loader import load_recipes, parse_recipe_text
from spark_tui.recipes.revisions import RevisionStore, recipe_to_yaml

RID = "minimax-m2.7-nvfp4-vllm-tp2"


def test_patch_undo_and_history() -> None:
    base = load_recipes().get(RID)
    store = RevisionStore()
    r1 = store.patch(base, note="lower util", set_args={"--gpu-memory-utilization": 0.78})
    r2 = store.patch(
        base,
        note="eager",
        target="serve",
        set_args={"--enforce-eager": True},
        unset_env=["VLLM_MARLIN_USE_ATOMIC_ADD"],
    )
    assert (r1.number, r2.number) == (1, 2) and r2.base == 1
    assert "-    --gpu-memory-utilization: 0.82\n+    --gpu-memory-utilization: 0.78" in r1.diff
    assert (
        "+    --enforce-eager: true" in r2.diff
        and "-    VLLM_MARLIN_USE_ATOMIC_ADD: '1'" in r2.diff
    )
    current = load_recipes().get(RID)
    assert current.revision == 2 and "--enforce-eager" in current.serve.args
    assert current.serve.args["--gpu-memory-utilization"] == 0.78  # patches build on each other
    back = store.undo(RID)
    assert back.revision == 1 and "--enforce-eager" not in back.serve.args
    assert load_recipes().get(RID).revision == 1
    assert [r.number for r in store.revisions(RID)] == [0, 1, 2]  # nothing deleted
    store.undo(RID)
    assert load_recipes().get(RID).revision == 0
    with pytest.raises(InputError, match="no patch to undo"):
        store.undo(RID)
    files = sorted(p.name for p in (paths.state_dir() / "recipes" / RID).iterdir())
    assert {"rev-0000.yaml", "rev-0001.diff", "rev-0002.yaml", "current"} <= set(files)


def test_pending_until_launched() -> None:
    store = RevisionStore()
    base = load_recipes().get(RID)
    assert not store.pending(RID)
    store.patch(base, set_env={"NCCL_NET_GDR_LEVEL": "0"}, target="ray")
    assert store.pending(RID)
    store.mark_launched(load_recipes().get(RID))
    assert not store.pending(RID)


def test_every_recipe_round_trips_through_yaml() -> None:
    for r in load_recipes():
        again = parse_recipe_text(recipe_to_yaml(r), "<roundtrip>")
        assert recipe_to_yaml(again) == recipe_to_yaml(r)
        assert again.facts() == r.facts()


def test_cli_history_and_undo(capsys) -> None:
    from spark_tui.entry import main

    assert main(["recipes", "history", RID]) == 0
    assert "never patched" in capsys.readouterr().out
    RevisionStore().patch(load_recipes().get(RID), note="fix x", set_args={"--max-num-seqs": 8})
    assert main(["recipes", "history", RID]) == 0
    out = capsys.readouterr().out
    assert "* revision 1: fix x" in out and "+    --max-num-seqs: 8" in out
    assert main(["recipes", "undo", RID]) == 0
    assert "now at revision 0" in capsys.readouterr().out
    assert main(["recipes", "undo", RID]) == 2
