"""`--read-only` is kept by the engine, whichever front end asks: every change is refused at
its entry point with one line (exit 1) and nothing is written or run."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_tui import policy
from spark_tui.entry import main
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.revisions import RevisionStore
from spark_tui.state import StateDir
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401

RID = "minimax-m2.7-nvfp4-vllm-tp2"


def state_files() -> list[Path]:
    root = Path(os.environ["XDG_STATE_HOME"]) / "spark-tui"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_recipes_undo_is_refused_and_the_revision_stays(capsys) -> None:
    store = RevisionStore(StateDir.real().revisions_dir)
    store.patch(load_recipes().get(RID), note="test", set_args={"--max-num-seqs": 8})
    assert store.current_number(RID) == 1
    assert main(["--read-only", "recipes", "undo", RID]) == 1
    assert "read-only: refused to undo" in capsys.readouterr().err
    assert store.current_number(RID) == 1


def test_a_patch_is_refused_by_the_store_itself() -> None:
    policy.set_read_only(True)
    store = RevisionStore(StateDir.real().revisions_dir)
    with pytest.raises(policy.ReadOnlyRefused):
        store.patch(load_recipes().get(RID), note="test", set_args={"--max-num-seqs": 8})
    assert store.current_number(RID) is None


def test_read_only_never_loosens() -> None:
    policy.set_read_only(True)
    policy.set_read_only(False)
    assert policy.read_only()


@pytest.mark.parametrize(
    "argv",
    [
        ["stop", "--demo", "healthy", "--yes"],
        ["up", "--demo", "healthy", "--yes"],
        ["fix", "page-cache-hog", "--yes", "--config", "CONFIG"],
    ],
)
def test_changes_through_the_session_are_refused_and_journal_nothing(
    argv: list[str], sshd_cluster: SshdCluster, capsys
) -> None:
    config = str(sshd_cluster.write_cluster_yaml())
    argv = [config if a == "CONFIG" else a for a in argv]
    code = main(["--read-only", *argv])
    out = capsys.readouterr()
    assert code == 1, out
    assert "read-only: refused to" in out.err + out.out
    assert state_files() == []  # no journal, no revision, no lock written
    for name in ("spark1", "spark2"):
        assert sshd_cluster.node(name).commands() == []  # nothing ran on a node


def test_trust_does_not_write_known_hosts(sshd_cluster: SshdCluster, capsys) -> None:
    sshd_cluster.forget_host_key("spark2")
    config = sshd_cluster.write_cluster_yaml()
    before = sshd_cluster.known_hosts.read_text()
    assert main(["--read-only", "trust", "spark2", "--yes", "--config", str(config)]) == 1
    assert "read-only: refused to trust the host key" in capsys.readouterr().err
    assert sshd_cluster.known_hosts.read_text() == before


def test_discover_does_not_write_cluster_yaml(
    sshd_cluster: SshdCluster, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "cluster.yaml"
    code = main(["--read-only", "discover", "--yes", "--output", str(out), "spark1", "spark2"])
    err = capsys.readouterr().err
    assert code == 1 and "read-only: refused to write" in err, err
    assert not out.exists()
