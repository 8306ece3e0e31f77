"""`spark-tui stop` and `spark-tui status`, through the one session, on the simulated cluster
and over real sshd nodes: a stop is previewed, confirmed, journaled and checked; status says
per node what runs there."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import io
import json

from spark_tui.entry import main
from spark_tui.remedy.journal import Journal
from spark_tui.session import open_cluster
from spark_tui.state import StateDir
from spark_tui.up import bring_up
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401

SPEED = 240.0


def test_status_and_stop_on_the_simulated_cluster_follow_what_runs() -> None:
    with open_cluster(scenario="healthy", speed=SPEED) as session:
        before = {n.name: n for n in session.status()}
        assert all(n.reachable and n.phase == "stopped" for n in before.values())
        assert before["spark1"].ray == "not running" and before["spark1"].containers == ()
        done = bring_up(session, lambda _e: None, None, yes=True)
        assert done["serving"]
        up = {n.name: n for n in session.status()}
        head, worker = up["spark1"], up["spark2"]
        assert head.ray.startswith("head of 2 nodes") and worker.ray == "member"
        assert head.model == session.recipe().model.path  # from the engine's command line
        assert head.port == session.recipe().serve.port
        assert head.tok_s and head.tok_s > 10  # the last smoke request's figure
        assert "ray-head" in head.containers and "ray-worker" in worker.containers
        plan = session.plan_stop()
        assert plan.needs_confirmation and set(plan.nodes) == {"spark1", "spark2"}
        refused = session.apply(plan, confirm=lambda _p, _n: False)
        assert not refused.ok and session.status()[0].containers  # nothing stopped
        result = session.apply(plan, confirm=lambda _p, nodes: set(nodes) == {"spark1", "spark2"})
        assert result.ok and result.verified, result.summary()
        after = {n.name: n for n in session.status()}
        assert all(n.containers == () and n.ray == "not running" for n in after.values())
        # the containers were renamed aside, not removed: their logs stay readable
        names = session.transports["spark1"].run("docker ps -a --format '{{.Names}}'").stdout
        assert "ray-head.spark-tui-" in names


def test_status_json_and_stop_json_through_the_cli(capsys) -> None:
    assert main(["status", "--demo", "restart-loop", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    spark1 = next(n for n in status["nodes"] if n["name"] == "spark1")
    assert spark1["containers"] == ["vllm_node (restarting)"] and spark1["reachable"] is True
    assert set(spark1) >= {"name", "reachable", "containers", "ray", "phase", "model", "port"}
    assert main(["stop", "--demo", "restart-loop", "--yes", "--json"]) == 0
    stop = json.loads(capsys.readouterr().out)
    assert stop["ok"] is True and set(stop["nodes"]) == {"spark1", "spark2"}
    assert "no serving container up on spark1: yes" in stop["message"]


def _two_running(sshd_cluster: SshdCluster) -> None:
    for node, name in (("spark1", "ray-head"), ("spark2", "ray-worker")):
        sshd_cluster.node(node).set_file(
            "docker-ps.jsonl",
            json.dumps(
                {
                    "ID": f"{node}c0ffee",
                    "Image": "vllm/vllm-openai:v0.13.0",
                    "Names": name,
                    "State": "running",
                    "Status": "Up 2 hours",
                }
            )
            + "\n",
        )


def test_status_over_real_sshd_nodes_says_what_runs_and_who_is_down(
    sshd_cluster: SshdCluster, capsys
) -> None:
    _two_running(sshd_cluster)
    config = sshd_cluster.write_cluster_yaml()
    assert main(["status", "--config", str(config), "--json"]) == 0
    nodes = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["spark1"]["containers"] == ["ray-head"]
    assert nodes["spark2"]["containers"] == ["ray-worker"]
    sshd_cluster.node("spark2").stop()  # the node drops off the network
    assert main(["status", "--config", str(config), "--json"]) == 1
    nodes = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["spark2"]["reachable"] is False and nodes["spark2"]["reason"]
    assert nodes["spark1"]["reachable"] is True


def test_stop_over_real_sshd_nodes_asks_runs_journals_and_checks(
    sshd_cluster: SshdCluster, monkeypatch, capsys
) -> None:
    _two_running(sshd_cluster)
    config = sshd_cluster.write_cluster_yaml()
    monkeypatch.setattr("sys.stdin", io.StringIO("no\n"))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    assert main(["stop", "--config", str(config)]) == 1  # asked, answered no
    assert not any("docker stop" in c for c in sshd_cluster.node("spark1").commands())
    assert main(["stop", "--config", str(config), "--yes"]) == 0
    out = capsys.readouterr()
    assert "docker stop" in out.out  # the preview: the exact commands per node
    for node, name in (("spark1", "ray-head"), ("spark2", "ray-worker")):
        assert any(c.startswith("docker stop") for c in sshd_cluster.node(node).commands())
        assert name not in (sshd_cluster.node(node).data_dir / "docker-ps.jsonl").read_text()
    entries = Journal(StateDir.real().journal_path).entries()
    started = [e for e in entries if e["event"] == "started"]
    finished = {e["cmd"]: e for e in entries if e["event"] == "finished"}
    assert {e["node"] for e in started} == {"spark1", "spark2"}
    assert all(finished[e["cmd"]]["exit_code"] == 0 for e in started)
    end = next(e for e in entries if e["event"] == "fix-end")
    assert end["status"] == "ok" and end["verified"] is True
