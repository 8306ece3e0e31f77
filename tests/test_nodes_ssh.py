"""SSHTransport against real sshd: host keys, drops and reconnects, sudo -n, ~/.ssh/config."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.ssh import (
    HostKeyUnknown,
    SSHTransport,
    SudoPasswordRequired,
    resolve_target,
    run_as_root,
)
from spark_tui.nodes.transport import NodeUnreachable
from spark_tui.nodes.transports import open_transport
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401


def wait_for(predicate, what: str, limit_s: float = 30.0) -> None:
    """Poll until predicate() holds (generous limit: this is not a timing test)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for: {what}")


def test_ssh_config_is_honoured(sshd_cluster: SshdCluster) -> None:
    n = sshd_cluster.node("spark2")
    t = resolve_target("spark2")  # HOME points at the test home: its ~/.ssh/config
    assert (t.hostname, t.port) == (n.address, n.port)
    assert t.identity_files == (str(sshd_cluster.identity),)
    assert t.known_hosts == (str(sshd_cluster.known_hosts),)
    assert resolve_target("spark2", user="milo", port=2200).user == "milo"
    tr = open_transport(NodeConfig("spark2", "spark2"))
    try:
        assert isinstance(tr, SSHTransport)
        path = tr.run("echo $PATH").stdout.strip().split(":")
        assert path.index(str(n.bin_dir)) < path.index("/usr/local/bin")  # the node's shims win
    finally:
        tr.close()


def test_one_connection_many_channels(sshd_cluster: SshdCluster) -> None:
    t = sshd_cluster.transport("spark1")
    try:
        for _ in range(5):
            assert t.run("true").ok
        with t.stream("nvidia-smi dmon -s u") as s:
            assert next(iter(s)).startswith("# gpu")
            assert t.run("echo while streaming").stdout == "while streaming\n"
        assert t.connects == 1
        accepted = sshd_cluster.node("spark1").sshd_log().count("Accepted publickey")
        assert accepted == 1
    finally:
        t.close()


def test_unknown_host_key_is_refused_and_nothing_runs(sshd_cluster: SshdCluster) -> None:
    sshd_cluster.forget_host_key("spark2")
    node = sshd_cluster.node("spark2")
    t = sshd_cluster.transport("spark2")
    try:
        with pytest.raises(HostKeyUnknown) as exc:
            t.run("nvidia-smi --query-gpu=index --format=csv")
        assert "spark-tui trust spark2" in str(exc.value)
        assert not t.state.reachable and "known_hosts" in t.state.reason
        assert node.commands() == []
        assert "Accepted" not in node.sshd_log()
    finally:
        t.close()


def test_changed_host_key_is_refused(sshd_cluster: SshdCluster) -> None:
    a, b = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    # spark2's entry now holds spark1's key: what a man in the middle would look like
    text = sshd_cluster.known_hosts.read_text().replace(b.host_key_line, a.host_key_line)
    sshd_cluster.known_hosts.write_text(text)
    t = sshd_cluster.transport("spark2")
    try:
        with pytest.raises(NodeUnreachable, match="CHANGED"):
            t.run("true")
        assert b.commands() == []
    finally:
        t.close()


def test_node_dropped_mid_stream_comes_back_by_itself(sshd_cluster: SshdCluster) -> None:
    node = sshd_cluster.node("spark2")
    t = sshd_cluster.transport("spark2")
    try:
        stream = t.stream("nvidia-smi dmon -s u")
        lines = iter(stream)
        assert next(lines).startswith("# gpu")
        node.stop()
        rest = list(lines)  # the stream ends when the node drops, it does not raise
        assert len(rest) < 1000
        wait_for(lambda: not t.state.reachable, "the drop is seen")
        assert t.state.retrying and t.state.since > 0
        with pytest.raises(NodeUnreachable, match="retrying"):
            t.run("true")
        node.start()
        wait_for(lambda: t.state.reachable, "the transport reconnects by itself")
        assert t.run("echo back").stdout == "back\n"
        assert t.connects == 2
        stream.close()
    finally:
        t.close()


def test_a_silent_node_is_found_out_by_a_timeout(sshd_cluster: SshdCluster) -> None:
    node = sshd_cluster.node("spark2")
    t = sshd_cluster.transport("spark2")
    try:
        assert t.run("true").ok
        node.pause()  # TCP stays up, nothing answers
        with pytest.raises(NodeUnreachable):
            t.run("true", timeout=1.0)
        assert not t.state.reachable
        node.resume()
        wait_for(lambda: t.state.reachable, "back after the node answers again")
        assert t.run("echo ok").stdout == "ok\n"
    finally:
        node.resume()
        t.close()


def test_first_connect_to_a_dead_node_is_a_state(sshd_cluster: SshdCluster) -> None:
    node = sshd_cluster.node("spark2")
    node.stop()
    t = sshd_cluster.transport("spark2")
    try:
        with pytest.raises(NodeUnreachable):
            t.run("true")
        assert not t.state.reachable and "nothing answers" in t.state.reason
        node.start()
        wait_for(lambda: t.state.reachable, "reconnect after the node comes up")
    finally:
        t.close()


def test_sudo_needing_a_password_says_what_to_do(sshd_cluster: SshdCluster) -> None:
    node = sshd_cluster.node("spark1")
    t = sshd_cluster.transport("spark1")
    try:
        assert run_as_root(t, "echo root-ok").stdout == "root-ok\n"
        node.set_file("sudo-needs-password", "")
        with pytest.raises(SudoPasswordRequired) as exc:
            run_as_root(t, "sync; echo 3 > /proc/sys/vm/drop_caches")
        msg = str(exc.value)
        assert "sudo needs a password" in msg and "NOPASSWD" in msg and "/etc/sudoers.d" in msg
        # the shim saw one argument after 'sh -c': the command arrived quoted, whole
        assert "sudo -n sh -c sync; echo 3 > /proc/sys/vm/drop_caches" in node.commands()
    finally:
        t.close()


def test_local_host_gets_the_local_transport(tmp_path: Path) -> None:
    from spark_tui.nodes.local import LocalTransport

    t = open_transport(NodeConfig("box", "local", "head"))
    assert isinstance(t, LocalTransport) and t.name == "box"


def test_proxyjump_through_another_node(sshd_cluster: SshdCluster) -> None:
    spark1, spark2 = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    with sshd_cluster.ssh_config.open("a") as fh:
        fh.write(
            f"\nHost behind-spark1\n  HostName {spark2.address}\n  Port {spark2.port}\n"
            f"  IdentityFile {sshd_cluster.identity}\n  ProxyJump spark1\n"
        )
    target = resolve_target("behind-spark1")
    assert target.proxy_jump == ("spark1",)
    t = open_transport(NodeConfig("hidden", "behind-spark1"))
    try:
        assert t.run("echo through").stdout == "through\n"
        assert t.state.reachable
    finally:
        t.close()
    # nothing else talked to spark1 in this test: it was the jump host
    assert spark1.sshd_log().count("Accepted publickey") == 1
    assert spark2.sshd_log().count("Accepted publickey") == 1
