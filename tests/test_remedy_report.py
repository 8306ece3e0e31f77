"""`spark-tui report`: Markdown with nodes, recipe revisions and diffs, diagnoses, journal.
And the CLI's own confirmation: anything but 'yes' runs nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.recipes.loader import load_recipes
from tests.remedy_shims import journal, make_world, revisions
from tests.test_remedy_fixes import CLUSTER, RUN_FIX, _cluster_file, _user_wall

CHECK_WALL = """\
id: test-object-store
title: ray start without --num-cpus (a user's own check wall)
severity: warning
kind: check
engines: [ray]
summary: Ray reserves ~30 % of unified memory. Cap it.
signatures:
  - when: ["recipe.ray.args.--num-cpus is unset"]
    scope: recipe
references: [seeds/002_17709da065758170.txt]
fixes:
  - id: cap
    title: Cap the object store
    risk: disruptive
    root: false
    actions:
      - type: restart-ray
        args: {--object-store-memory: 1073741824}
"""


def test_report_has_nodes_recipe_revisions_diagnoses_and_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kdir = paths.user_knowledge_dir()
    kdir.mkdir(parents=True)
    (kdir / "test-object-store.yaml").write_text(CHECK_WALL)
    recipe = load_recipes().get("minimax-m2.7-nvfp4-vllm-tp2")
    revisions().patch(recipe, note="fix lower-util", set_args={"--gpu-memory-utilization": 0.78})
    j = journal()
    j.append(event="fix-start", run="r1", fix="drop-page-caches", nodes=["spark2"], pid=None)
    drop = "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"
    with j.command("r1", "drop-page-caches", "spark2", "run", drop) as rec:
        rec.finish(1, "sudo: a password is required")
    j.append(event="fix-end", run="r1", fix="drop-page-caches", status="failed", message="x")
    # a run killed mid-command: its command started and has no end
    j.append(event="fix-start", run="r2", fix="reboot-leaking-node", nodes=["spark2"], pid=None)
    j.append(
        event="started",
        cmd="c2",
        run="r2",
        fix="reboot-leaking-node",
        node="spark2",
        action="reboot",
        command="sudo -n sh -c reboot",
    )
    log = tmp_path / "serve.log"
    log.write_text(
        "INFO x\nWARNING Your GPU does not have native support for FP4 computation but "
        "FP4 quantization is being used.\n"
    )
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(
        "recipe: minimax-m2.7-nvfp4-vllm-tp2\nnodes:\n"
        "  - {name: spark1, host: 10.0.0.1, role: head, fabric_if: bond0, fabric_ip: 10.0.0.1}\n"
        "  - {name: spark2, host: 10.0.0.2, role: worker, fabric_if: bond0, fabric_ip: 10.0.0.2}\n"
    )
    out_file = tmp_path / "report.md"
    assert main(["report", str(log), "--config", str(cfg), "--offline", "-o", str(out_file)]) == 0
    err = capsys.readouterr().err
    assert "reboot-leaking-node (run r2) was interrupted" in err and "spark2: sudo" in err
    md = out_file.read_text()
    assert "| spark2 | worker | 10.0.0.2 | bond0 10.0.0.2 |" in md
    assert "`minimax-m2.7-nvfp4-vllm-tp2`" in md and "revision in use: 1" in md
    assert "**revision 1**" in md and "+    --gpu-memory-utilization: 0.78" in md
    assert "### fp4-marlin-fallback-notice (info)" in md and f"`{log}:2`" in md
    assert "### test-object-store (warning)" in md
    assert "recipe.ray.args.--num-cpus is unset" in md
    assert (
        "| spark2 | run | `sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'` | exit 1 |"
        in md
    )
    assert "sudo: a password is required" in md  # the failed command's output
    assert (
        "| spark2 | reboot | `sudo -n sh -c reboot` "
        "| **started, no end recorded: it may have half-run** |" in md
    )
    assert md.count("```") % 2 == 0


class Terminal(io.StringIO):
    """Typed answers on a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("risk", ["safe", "disruptive"])
def test_cli_confirmation_no_runs_nothing(
    risk: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --yes the CLI asks before any fix ('do not ask (disruptive fixes included)')."""
    world = make_world(tmp_path / "w", CLUSTER)
    _user_wall(RUN_FIX.replace("risk: safe", f"risk: {risk}"))
    env = world.env("spark1")
    for key in ("PATH", "NODE", "NODE_STATE", "SHIM_SHARED", "SHIM_LOG"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["fix", "test-wall", "--config", str(_cluster_file(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert "  - spark1" in err and "not confirmed: nothing ran" in err
    assert world.calls() == [] and journal().entries() == []
    # off a terminal nothing is asked, and nothing runs
    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))
    assert main(["fix", "test-wall", "--config", str(_cluster_file(tmp_path))]) == 1
    assert "stdin is not a terminal" in capsys.readouterr().err
    assert world.calls() == [] and journal().entries() == []
    # --read-only refuses even with --yes
    assert (
        main(["--read-only", "fix", "test-wall", "--yes", "--config", str(_cluster_file(tmp_path))])
        == 1
    )
    assert "read-only" in capsys.readouterr().err
    assert world.calls() == [] and journal().entries() == []


def test_the_report_names_each_nodes_docker_engine_not_the_client() -> None:
    """On the real tier a node's daemon is Docker 20.10 while its `docker` binary is 28.2:
    the report's docker version is the daemon's (`docker version` Server), per node."""
    from spark_tui.cli.report import _versions
    from spark_tui.session import open_cluster

    with open_cluster(None, sim_nodes=2) as session:
        assert session.sim is not None
        session.sim.nodes["spark2"].docker_version = "20.10.24+dfsg1"
        versions = _versions(session)
    assert versions["spark1"]["docker"] == "28.3.3"
    assert versions["spark2"]["docker"] == "20.10.24+dfsg1"
