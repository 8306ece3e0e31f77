"""`spark-tui trust` and `spark-tui watch --json` against real sshd nodes."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import io
import json
import subprocess
from datetime import datetime

import pytest

from spark_tui.entry import main
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401
from tests.test_nodes_monitor import FIX, FREE_MEMORY_LINE


def real_fingerprint(sshd_cluster: SshdCluster, name: str) -> str:
    pub = sshd_cluster.node(name).dir / "ssh_host_ed25519_key.pub"
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True).stdout
    return out.split()[1]


def test_trust_shows_the_fingerprint_and_asks(sshd_cluster: SshdCluster, monkeypatch, capsys):
    sshd_cluster.forget_host_key("spark2")
    config = sshd_cluster.write_cluster_yaml()
    before = sshd_cluster.known_hosts.read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["trust", "spark2", "--config", str(config)]) == 1
    out = capsys.readouterr()
    assert real_fingerprint(sshd_cluster, "spark2") in out.out  # what ssh-keygen -lf says
    assert "nothing written" in out.err
    assert sshd_cluster.known_hosts.read_text() == before
    assert sshd_cluster.node("spark2").commands() == []  # fetching the key runs nothing
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["trust", "spark2", "--config", str(config)]) == 0
    assert "Added" in capsys.readouterr().out
    t = sshd_cluster.transport("spark2")
    try:
        assert t.run("echo trusted").stdout == "trusted\n"
    finally:
        t.close()
    assert main(["trust", "spark2", "--config", str(config)]) == 0
    assert "already trusted" in capsys.readouterr().out


def test_trust_yes_for_scripts_and_changed_key_refused(sshd_cluster: SshdCluster, capsys):
    config = sshd_cluster.write_cluster_yaml()
    sshd_cluster.forget_host_key("spark1")
    assert main(["trust", "spark1", "--yes", "--config", str(config)]) == 0
    a, b = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    text = sshd_cluster.known_hosts.read_text().replace(b.host_key_line, a.host_key_line)
    sshd_cluster.known_hosts.write_text(text)
    capsys.readouterr()
    assert main(["trust", "spark2", "--yes", "--config", str(config)]) == 1
    assert "CHANGED" in capsys.readouterr().err
    assert sshd_cluster.known_hosts.read_text() == text


def test_trust_unknown_node_is_bad_usage(sshd_cluster: SshdCluster, capsys) -> None:
    config = sshd_cluster.write_cluster_yaml()
    assert main(["trust", "spark9", "--config", str(config)]) == 2
    assert "no node named 'spark9'" in capsys.readouterr().err


def test_watch_json_streams_diagnoses(sshd_cluster: SshdCluster, capsys) -> None:
    spark1 = sshd_cluster.node("spark1")
    spark1.set_file(
        "docker-ps.jsonl",
        json.dumps(
            {
                "ID": "ab",
                "Image": "vllm/vllm-openai:v0.13.0",
                "Names": "vllm_node",
                "State": "running",
                "Status": "Up 1 minute",
            }
        )
        + "\n",
    )
    spark1.set_file("serve.log", f"INFO loading\n{FREE_MEMORY_LINE}\n")
    spark1.set_file("meminfo.txt", (FIX / "gb10" / "meminfo.txt").read_text())
    config = sshd_cluster.write_cluster_yaml()
    assert (
        main(["watch", "--json", "--config", str(config), "--period", "0.3", "--duration", "4"])
        == 0
    )
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    by_wall = {d["wall"]: d for d in lines if d["event"] == "diagnosis"}
    d = by_wall["vllm-free-memory-low"]
    assert {
        "event",
        "wall",
        "title",
        "severity",
        "file",
        "line",
        "count",
        "evidence",
        "fixes",
        "node",
        "time",
    } <= set(d)
    assert d["node"] == "spark1" and d["file"] == "spark1:container:vllm_node" and d["line"] == 2
    assert d["fixes"][0] == "drop-page-caches"  # spark1's readings: a big page cache
    datetime.fromisoformat(d["time"])
    assert by_wall["page-cache-hog"]["node"] == "spark1"
    # both nodes answered from the start and none dropped: nothing to say about reachability
    assert not [d for d in lines if d["event"] in ("reachable", "unreachable")]


def test_watch_config_and_demo_exclude_each_other(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["watch", "--json", "--config", "c.yaml", "--demo", "seed-000"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["doctor", "watch", "trust"])
def test_help_names_the_command(command: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--config" in capsys.readouterr().out
