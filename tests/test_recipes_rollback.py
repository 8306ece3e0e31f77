"""Roll back to the last image + recipe revision that served (eugr #393, #296, #226): a launch
whose smoke request answered records what it ran; `recipes rollback ID` and the TUI's key
preview the change back to it, ask, and apply it as a new revision, journaled."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spark_tui.errors import InputError
from spark_tui.recipes.revisions import RevisionStore, last_served, mark_served
from spark_tui.session import open_cluster
from spark_tui.sim.docker import default_image_id, move_tag

SPEED = 240.0


def test_a_served_launch_is_recorded_and_rolled_back_to_on_the_simulated_cluster() -> None:
    with open_cluster(scenario="healthy", speed=SPEED) as session:
        result = session.apply(session.plan_launch(), yes=True)
        assert result.ok and result.tok_s
        served = last_served(session.revisions, session.recipe().id)
        assert served is not None and served.tok_s == pytest.approx(result.tok_s)
        good = session.recipe()
        assert served.image == good.image and served.revision == good.revision
        # the image ID every node's container ran (docker inspect), the head's first
        ids = {n: default_image_id(good.image) for n in ("spark1", "spark2")}
        assert served.image_ids == ids and served.image_id == ids["spark1"]
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
        assert "\n-image: vllm-node:nightly-broken\n" in diff
        assert f"\n+image: {served.image_id}\n" in diff
        assert "--max-model-len" in diff
        after = session.rollback()
        assert after.image == served.image_id  # the image that served, not the tag
        assert good.image in after.image_note and "pinned by a rollback" in after.image_note
        assert after.serve.args == good.serve.args
        assert after.revision > current.revision  # a new revision; the others are kept
        assert session.revisions.current(good.id).revision == after.revision
        records = [e for e in session.journal.entries() if e.get("action") == "recipe-rollback"]
        assert [r["event"] for r in records] == ["started", "finished"]
        assert records[0]["image"] == good.image
        assert records[0]["image_id"] == records[1]["image"] == served.image_id


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
    good = "sha256:" + "a" * 64
    mark_served(store, replace(r, image="vllm-node:known-good"), 52.5, {"spark1": good})
    assert main(["recipes", "rollback", r.id]) == 1  # not a terminal, no --yes: nothing
    out, err = capsys.readouterr()
    assert "last served at" in out and "image vllm-node:known-good, 52.5 tok/s" in out
    assert f"image: pinned to {good} — what vllm-node:known-good was when it served" in out
    assert f"+image: {good}" in out and "pass --yes" in err
    assert store.current(r.id) is None
    assert main(["recipes", "rollback", r.id, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "now at revision 1" in out
    assert store.current(r.id).image == good
    assert main(["recipes", "history", r.id]) == 0
    out = capsys.readouterr().out
    assert f"on vllm-node:known-good = {good}, 52.5 tok/s" in out  # under revision 0
    assert out.index("revision 0") < out.index("served at") < out.index("revision 1")
    assert main(["recipes", "rollback", r.id, "--yes"]) == 0  # already there
    assert "nothing to do" in capsys.readouterr().out


def test_a_rollback_pins_the_image_id_that_served_after_the_tag_moved() -> None:
    """The nightly tag a recipe names is rebuilt (eugr #385, #363: a new nightly breaks a recipe
    that served): the rollback goes back to the image ID that served, not to the tag; its
    preview says what the tag names now on each node and which node no longer holds the
    image; the relaunch runs the old image and serves again."""
    with open_cluster(scenario="healthy", speed=SPEED) as session:
        assert session.apply(session.plan_launch(), yes=True).ok
        good = session.recipe()
        served = last_served(session.revisions, good.id)
        assert served is not None and served.image_id
        nightly = "sha256:" + "e" * 64
        for node in session.sim.nodes.values():  # a new build behind the same tag
            move_tag(node, good.image, nightly)
        _current, _s, diff = session.rollback_preview()
        assert f"\n-image: {good.image}\n" in diff and f"\n+image: {served.image_id}\n" in diff
        lines = session.rollback_image_lines(served)
        assert lines[0].startswith(f"image: pinned to {served.image_id}")
        assert (
            f"  spark2: holds {served.image_id[:19]}; {good.image} is {nightly[:19]} now" in lines
        )
        after = session.rollback()
        assert after.image == served.image_id
        result = session.apply(session.plan_launch(), yes=True)
        assert result.ok
        head = session.sim.nodes["spark1"].containers[after.head_container]
        assert head.image_id == served.image_id != nightly  # what runs is the old image
        again = last_served(session.revisions, good.id)
        assert again is not None and again.image_id == served.image_id
        # a node that lost the image is named before anything is asked
        session.sim.nodes["spark2"].image_ids.discard(served.image_id)
        gone = session.rollback_image_lines(again)
        assert any(ln.startswith("  spark2: does not hold") for ln in gone), gone


def test_a_record_without_image_ids_keeps_the_tag(tmp_path) -> None:
    """A record written before image IDs were kept (or a node that did not answer): the
    rollback keeps the tag, and says so."""
    from spark_tui.recipes.loader import load_recipes
    from spark_tui.recipes.revisions import pinned

    store = RevisionStore(tmp_path)
    r = load_recipes(use_user=False).get("qwen3.6-35b-a3b-fp8-vllm")
    mark_served(store, r, 40.0, {"spark1": "not an id"})
    s = last_served(store, r.id)
    assert s is not None and s.image_id == "" and s.image_ids == {}
    assert pinned(s).image == r.image
