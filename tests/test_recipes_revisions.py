"""Recipe revisions: a patch makes a new revision with a diff, undo goes back, all stay."""

from __future__ import annotations

import threading

import pytest

from spark_tui import paths, policy
from spark_tui.errors import InputError
from spark_tui.policy import ReadOnlyRefused
from spark_tui.recipes.loader import load_recipes, parse_recipe_text
from spark_tui.recipes.revisions import RevisionStore, recipe_to_yaml
from spark_tui.state import StateDir

RID = "minimax-m2.7-nvfp4-vllm-tp2"


def test_patch_undo_and_history() -> None:
    base = load_recipes().get(RID)
    store = RevisionStore(StateDir.real().revisions_dir)
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
    store = RevisionStore(StateDir.real().revisions_dir)
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
    store = RevisionStore(StateDir.real().revisions_dir)
    store.patch(load_recipes().get(RID), note="fix x", set_args={"--max-num-seqs": 8})
    assert main(["recipes", "history", RID]) == 0
    out = capsys.readouterr().out
    assert "* revision 1: fix x" in out and "+    --max-num-seqs: 8" in out
    assert main(["recipes", "undo", RID]) == 0
    assert "now at revision 0" in capsys.readouterr().out
    assert main(["recipes", "undo", RID]) == 2
    # journaled before it changed anything and after it ended, as every change is
    import json

    journal = StateDir.real().journal_path.read_text().splitlines()
    undos = [e for e in map(json.loads, journal) if e.get("action") == "recipe-undo"]
    assert [(e["event"], e.get("ok")) for e in undos] == [
        ("started", None),
        ("finished", True),
        ("started", None),
        ("finished", False),
    ]
    assert (undos[0]["revision"], undos[1]["revision"]) == (1, 0)


def test_cli_undo_stops_when_the_journal_cannot_be_written(capsys) -> None:
    from spark_tui.entry import main

    store = RevisionStore(StateDir.real().revisions_dir)
    store.patch(load_recipes().get(RID), note="fix x", set_args={"--max-num-seqs": 8})
    path = StateDir.real().journal_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.mkdir()  # a directory where the journal goes: nothing can be appended
    assert main(["recipes", "undo", RID]) != 0
    assert "journal" in capsys.readouterr().err.lower()
    assert store.current_number(RID) == 1  # not undone


def test_a_patch_planned_on_an_old_revision_is_rebased_on_the_one_in_use(tmp_path) -> None:
    """Two sessions plan from the same revision; the second commit keeps the first's change."""
    store = RevisionStore(tmp_path / "recipes")
    base = load_recipes(use_revisions=False).get(RID)
    first, _ = store.commit_patch(
        base, {"target": "serve", "set_args": {"--max-num-seqs": 8}}, "fix a"
    )
    second, recipe = store.commit_patch(
        base, {"target": "serve", "set_args": {"--enforce-eager": True}}, "fix b"
    )
    assert (first.number, second.number, second.base) == (1, 2, 1)
    assert "rebased on revision 1" in second.note
    assert recipe.revision == 2 and recipe.serve.args["--max-num-seqs"] == 8
    assert recipe.serve.args["--enforce-eager"] is True
    changed = [ln for ln in second.diff.splitlines()[2:] if ln[:1] in "+-"]
    assert changed == ["+    --enforce-eager: true"]  # the diff is against revision 1
    # a store is its root: the real state never saw these
    assert RevisionStore(StateDir.real().revisions_dir).revisions(RID) == []


def test_concurrent_commits_lose_no_change(tmp_path) -> None:
    store = RevisionStore(tmp_path / "recipes")
    base = load_recipes(use_revisions=False).get(RID)
    n = 6
    start = threading.Barrier(n)
    errors: list[BaseException] = []

    def commit(i: int) -> None:
        try:
            start.wait()
            store.commit_patch(base, {"target": "serve", "set_env": {f"TEST_{i}": i}}, f"p{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert [r.number for r in store.revisions(RID)] == list(range(n + 1))
    current = store.current(RID)
    assert current is not None and current.revision == n
    assert {f"TEST_{i}": str(i) for i in range(n)}.items() <= dict(current.serve.env).items()


def test_read_only_refuses_every_revision_change() -> None:
    store = RevisionStore(StateDir.real().revisions_dir)
    base = load_recipes().get(RID)
    store.patch(base, note="before", set_args={"--max-num-seqs": 8})
    policy.set_read_only(True)
    with pytest.raises(ReadOnlyRefused, match="read-only"):
        store.patch(base, note="x", set_args={"--max-num-seqs": 4})
    with pytest.raises(ReadOnlyRefused, match="read-only"):
        store.undo(RID)
    assert [r.number for r in store.revisions(RID)] == [0, 1] and store.current_number(RID) == 1
