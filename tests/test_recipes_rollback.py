"""Roll back to the last image + recipe revision that served (eugr #393, #296, #226): a launch
whose smoke request answered records what it ran; `recipes rollback ID` and the TUI's key
preview the change back to it, ask, and apply it as a new revision, journaled."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spark_tui.errors import InputError
from spark_tui.recipes.revisions import RevisionStore, last_served, mark_served
from spark_tui.session import open_cluster

SPEED = 240.0


def test_a_served_launch_is_recorded_and_rolled_back_to_on_the_simulated_cluster() -> None:
    with open_cluster(scenario="healthy", speed=SPEED) as session:
        result = session.apply(session.plan_launch(), yes=True)
        assert result.ok and result.tok_s
        served = last_served(session.revisions, session.recipe().id)
        assert served is not None and served.tok_s == pytest.approx(result.tok_s)
        good = session.recipe()
        assert served.image == good.image and served.revision == good.revision
        # then an update: a new image and a patched flag (what broke it, say)
        session.revisions.commit(
            good,
            replace(good, image="vllm-node:nightly-broken"),
            "image update",
        )
        session.revisions.patch(
            session.revisions.current(good.id), "a fix", target="serve",
            set_args={"--max-model-len": 4096},
        )  # fmt: skip
        session.use_recipe(good.id)
        current, _served, diff = session.rollback_preview()
        assert current.image == "vllm-node:nightly-broken"
        assert f"-image: vllm-node:nightly-broken\n+image: {good.image}" in diff
        assert "--max-model-len" in diff
        after = session.rollback()
        assert after.image == good.image
        assert after.serve.args == good.serve.args
        assert after.revision > current.revision  # a new revision; the others are kept
        assert session.revisions.current(good.id).revision == after.revision
        records = [e for e in session.journal.entries() if e.get("action") == "recipe-rollback"]
        assert [r["event"] for r in records] == ["started", "finished"]
        assert records[0]["image"] == good.image


def test_never_served_is_one_clear_line() -> None:
    with (
        open_cluster(scenario="healthy", speed=SPEED) as session,
        pytest.raises(InputError, match="never served here"),
    ):
        session.rollback_preview()


def test_a_torn_served_record_is_skipped(tmp_path) -> None:
    from spark_tui.recipes.loader import load_recipes

    store = RevisionStore(tmp_path)
    r = load_recipes(use_user=False).get("qwen3.6-35b-a3b-fp8-vllm")
    mark_served(store, r, 40.0)
    mark_served(store, replace(r, image="other:1"), 41.0)
    path = tmp_path / r.id / "served.jsonl"
    path.write_text(path.read_text() + '{"time": 1, "recipe": "id: [\n')
    s = last_served(store, r.id)
    assert s is not None and s.image == "other:1" and s.tok_s == 41.0


def test_the_cli_previews_asks_and_rolls_back(capsys: pytest.CaptureFixture[str]) -> None:
    from spark_tui.entry import main
    from spark_tui.recipes.loader import load_recipes
    from spark_tui.state import StateDir

    store = RevisionStore(StateDir.real().revisions_dir)
    r = load_recipes(use_user=False).get("qwen3.6-35b-a3b-fp8-vllm")
    mark_served(store, replace(r, image="vllm-node:known-good"), 52.5)
    assert main(["recipes", "rollback", r.id]) == 1  # not a terminal, no --yes: nothing
    out, err = capsys.readouterr()
    assert "last served at" in out and "image vllm-node:known-good, 52.5 tok/s" in out
    assert "+image: vllm-node:known-good" in out and "pass --yes" in err
    assert store.current(r.id) is None
    assert main(["recipes", "rollback", r.id, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "now at revision 1" in out
    assert store.current(r.id).image == "vllm-node:known-good"
    assert main(["recipes", "rollback", r.id, "--yes"]) == 0  # already there
    assert "nothing to do" in capsys.readouterr().out
