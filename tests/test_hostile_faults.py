"""Faults a user meets, through the real CLI in a subprocess: a node that accepts TCP but
never speaks SSH, a paused sshd, a read-only state directory, an unreadable knowledge
directory. Each ends in the node (or file) and what failed, the README's exit code,
and no traceback; nothing waits past its timeout (the subprocess timeout is the guard)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from tests.conftest import require_tool
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401

HANDSHAKE = (
    "accepts connections but did not complete the SSH handshake within 10 s "
    "(not an SSH server, or the node is hung)"
)


def cli(
    *args: str, unprivileged: bool = False, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`spark-tui ARGS` in a subprocess. `unprivileged`: without root's bypass of file
    permissions (a root test run would read an unreadable directory anyway)."""
    cmd = [sys.executable, "-m", "spark_tui.entry", *args]
    if unprivileged and os.geteuid() == 0:
        setpriv = require_tool("setpriv")
        cmd = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *cmd]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    for stream in (proc.stdout, proc.stderr):
        assert "Traceback" not in stream and 'File "' not in stream, stream


@pytest.fixture
def silent_port() -> Iterator[tuple[str, int]]:
    """A port that accepts TCP (the kernel completes the handshake) and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.8", 0))
    srv.listen(16)
    try:
        yield srv.getsockname()
    finally:
        srv.close()


def with_silent_node(cluster: SshdCluster, address: str, port: int) -> Path:
    """cluster.yaml: spark1 (a real sshd) as head, `silent` (the silent port) as worker."""
    with cluster.ssh_config.open("a") as fh:
        fh.write(
            f"\nHost silent\n  HostName {address}\n  Port {port}\n"
            f"  IdentityFile {cluster.identity}\n  UserKnownHostsFile {cluster.known_hosts}\n"
        )
    path = cluster.base / "silent.yaml"
    path.write_text(
        "nodes:\n  - {name: spark1, host: spark1, role: head}\n"
        "  - {name: silent, host: silent, role: worker}\n"
    )
    return path


def checks(proc: subprocess.CompletedProcess[str]) -> dict[tuple[str, str | None], dict]:
    return {(c["id"], c["node"]): c for c in json.loads(proc.stdout)["checks"]}


# ---------------------------------------------------------------- a node that never speaks


@pytest.mark.sshd
def test_doctor_on_a_silent_port(sshd_cluster: SshdCluster, silent_port) -> None:  # noqa: F811
    address, port = silent_port
    config = with_silent_node(sshd_cluster, address, port)
    proc = cli("doctor", "--json", "--config", str(config))
    no_traceback(proc)
    assert proc.returncode == 0 and proc.stderr == ""  # one node answered
    c = checks(proc)
    assert c[("reachable", "spark1")]["status"] == "pass"
    assert c[("reachable", "silent")] == {
        "id": "reachable",
        "node": "silent",
        "status": "fail",
        "detail": f"{address}:{port} {HANDSHAKE}, retrying",
    }
    assert c[("ssh-from-head", "silent")]["detail"] == "silent is unreachable"


@pytest.mark.sshd
def test_watch_and_fix_and_trust_on_a_silent_port(
    sshd_cluster: SshdCluster,  # noqa: F811
    silent_port,
) -> None:
    address, port = silent_port
    config = with_silent_node(sshd_cluster, address, port)
    watch = cli("watch", "--json", "--config", str(config), "--duration", "2")
    no_traceback(watch)
    assert watch.returncode == 0
    silent = f"spark-tui: silent: unreachable ({address}:{port} {HANDSHAKE}), retrying"
    lines = watch.stderr.splitlines()
    assert silent in lines and set(lines) <= {silent, "spark-tui: spark1: reachable again"}
    events = [json.loads(line) for line in watch.stdout.splitlines()]
    unreachable = [e for e in events if e["event"] == "unreachable" and e["node"] == "silent"]
    assert unreachable and all(
        e["reason"] == f"{address}:{port} {HANDSHAKE}" and e["reachable"] is False and e["time"]
        for e in unreachable
    )

    dry = cli(
        "--config", str(config), "fix", "restart-loop", "--fix", "restart-policy-no", "--dry-run"
    )
    assert dry.returncode == 0 and dry.stderr == "" and "# on silent:" in dry.stdout

    fix = cli("--config", str(config), "fix", "restart-loop", "--fix", "restart-policy-no", "--yes")
    no_traceback(fix)
    assert fix.returncode == 1
    assert fix.stderr.splitlines()[-1] == (
        f"spark-tui: silent: {address}:{port} {HANDSHAKE}, retrying; nothing ran on any node"
    )

    trust = cli("trust", "silent", "--config", str(config), "--yes")
    no_traceback(trust)
    assert (trust.returncode, trust.stderr) == (
        1,
        f"spark-tui: silent: {address}:{port} {HANDSHAKE}\n",
    )


@pytest.mark.sshd
def test_the_handshake_failure_goes_to_the_debug_log_only(
    sshd_cluster: SshdCluster,  # noqa: F811
    silent_port,
    tmp_path: Path,
) -> None:
    address, port = silent_port
    config = with_silent_node(sshd_cluster, address, port)
    log = tmp_path / "debug.log"
    proc = cli("--debug-log", str(log), "doctor", "--config", str(config))
    assert proc.returncode == 0 and proc.stderr == ""
    text = log.read_text()
    # paramiko's own account, traceback and all, is kept for whoever asked for it
    assert "paramiko.transport" in text and "Traceback (most recent call last)" in text
    assert "Error reading SSH protocol banner" in text or "EOFError" in text


# ---------------------------------------------------------------- a paused sshd


@pytest.mark.sshd
def test_doctor_and_fix_with_a_paused_sshd(sshd_cluster: SshdCluster) -> None:  # noqa: F811
    config = sshd_cluster.write_cluster_yaml()
    spark2 = sshd_cluster.node("spark2")
    spark2.pause()
    try:
        doctor = cli("doctor", "--json", "--config", str(config))
        fix = cli(
            "--config", str(config), "fix", "restart-loop", "--fix", "restart-policy-no", "--yes"
        )
    finally:
        spark2.resume()
    no_traceback(doctor)
    assert doctor.returncode == 0 and doctor.stderr == ""
    where = f"{spark2.address}:{spark2.port}"
    assert checks(doctor)[("reachable", "spark2")]["detail"] == f"{where} {HANDSHAKE}, retrying"
    no_traceback(fix)
    assert fix.returncode == 1
    assert fix.stderr.splitlines()[-1] == (
        f"spark-tui: spark2: {where} {HANDSHAKE}, retrying; nothing ran on any node"
    )
    # every node of the fix answers before anything runs: neither got it
    for node in ("spark1", "spark2"):
        assert not any("docker update" in c for c in sshd_cluster.node(node).commands())


# ---------------------------------------------------------------- host keys of two types


@pytest.mark.sshd
def test_trust_compares_the_key_type_known_hosts_holds(sshd_cluster: SshdCluster) -> None:  # noqa: F811
    """known_hosts holds the node's RSA key; the node also offers Ed25519 (which paramiko
    prefers): trust must compare RSA with RSA, as ssh and doctor do, not call it changed."""
    node = sshd_cluster.node("spark1")
    rsa = node.dir / "ssh_host_rsa_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(rsa)], check=True
    )
    config = node.dir / "sshd_config"
    config.write_text(config.read_text() + f"HostKey {rsa}\n")
    node.restart()
    rsa_line = " ".join(Path(f"{rsa}.pub").read_text().split()[:2])
    name = f"[{node.address}]:{node.port}"
    sshd_cluster.forget_host_key("spark1")
    with sshd_cluster.known_hosts.open("a") as fh:
        fh.write(f"{name} {rsa_line}\n")
    cluster_yaml = sshd_cluster.write_cluster_yaml()

    proc = cli("trust", "spark1", "--config", str(cluster_yaml))
    no_traceback(proc)
    fingerprint = paramiko.RSAKey(filename=str(rsa)).fingerprint
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout
        == f"spark1 ({node.address}:{node.port}) is already trusted: ssh-rsa {fingerprint}\n"
    )
    doctor = cli("doctor", "--json", "--config", str(cluster_yaml))
    assert checks(doctor)[("reachable", "spark1")]["status"] == "pass"

    # a key of the known type that differs IS a changed key
    other = node.dir / "other_rsa"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(other)], check=True
    )
    other_line = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    sshd_cluster.forget_host_key("spark1")
    with sshd_cluster.known_hosts.open("a") as fh:
        fh.write(f"{name} {other_line}\n")
    changed = cli("trust", "spark1", "--config", str(cluster_yaml))
    no_traceback(changed)
    assert changed.returncode == 1 and "the key CHANGED" in changed.stderr
    assert f"presents ssh-rsa {fingerprint}" in changed.stderr


# ---------------------------------------------------------------- directories


@pytest.mark.sshd
def test_a_read_only_state_directory_stops_a_fix_before_any_node(
    sshd_cluster: SshdCluster,  # noqa: F811
) -> None:
    config = sshd_cluster.write_cluster_yaml()
    state_home = Path(os.environ["XDG_STATE_HOME"])
    state_home.mkdir(parents=True, exist_ok=True)
    state_home.chmod(0o555)
    try:
        fix = cli(
            "--config", str(config), "fix", "restart-loop", "--fix", "restart-policy-no", "--yes",
            unprivileged=True,
        )  # fmt: skip
        recipes = cli("recipes", "list", unprivileged=True)
    finally:
        state_home.chmod(0o755)
    no_traceback(fix)
    assert fix.returncode == 1
    assert fix.stderr == (
        f"spark-tui: cannot open the lock {state_home / 'spark-tui' / 'fix.lock'}: "
        "Permission denied; nothing was run\n"
    )
    assert sshd_cluster.node("spark1").commands() == []  # nothing ran without its journal
    assert recipes.returncode == 0 and recipes.stderr == ""  # reading needs no state


def test_an_unreadable_state_directory_is_one_line(tmp_path: Path) -> None:
    state = Path(os.environ["XDG_STATE_HOME"]) / "spark-tui"
    state.mkdir(parents=True)
    (state / "journal.jsonl").write_text("")
    state.chmod(0)
    try:
        proc = cli("report", unprivileged=True)
    finally:
        state.chmod(0o755)
    no_traceback(proc)
    assert proc.returncode == 1
    assert proc.stderr == (
        f"spark-tui: cannot read the journal {state / 'journal.jsonl'}: Permission denied\n"
    )


def test_an_unreadable_knowledge_directory_is_exit_2(tmp_path: Path) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui"
    knowledge = config / "knowledge"
    knowledge.mkdir(parents=True)
    knowledge.chmod(0)
    try:
        runs = [
            cli(*a, unprivileged=True) for a in (["kb", "list"], ["kb", "lint"], ["triage", "-"])
        ]
    finally:
        knowledge.chmod(0o755)
    for proc in runs:
        no_traceback(proc)
        assert (proc.returncode, proc.stderr) == (
            2,
            f"spark-tui: {knowledge}: cannot list: Permission denied\n",
        )

    wall = knowledge / "my-wall.yaml"
    wall.write_text("id: my-wall\n")
    wall.chmod(0)
    try:
        proc = cli("kb", "list", unprivileged=True)
    finally:
        wall.chmod(0o644)
    assert (proc.returncode, proc.stderr) == (
        2,
        f"spark-tui: {wall}: cannot read: Permission denied\n",
    )

    config.chmod(0)  # not even searchable: what is in it cannot be looked at
    try:
        kb = cli("kb", "list", unprivileged=True)
        recipes = cli("recipes", "list", unprivileged=True)
        doctor = cli("doctor", unprivileged=True)
    finally:
        config.chmod(0o755)
    assert (kb.returncode, kb.stderr) == (
        2,
        f"spark-tui: {knowledge}: cannot read: Permission denied\n",
    )
    assert (recipes.returncode, recipes.stderr) == (
        2,
        f"spark-tui: {config / 'recipes'}: cannot read: Permission denied\n",
    )
    assert (doctor.returncode, doctor.stderr) == (
        2,
        f"spark-tui: {knowledge}: cannot read: Permission denied\n",
    )


@pytest.mark.sshd
def test_trust_under_read_only_writes_no_known_hosts(sshd_cluster: SshdCluster) -> None:  # noqa: F811
    """A variant of `recipes import` writing under --read-only: `trust --yes` (the one way
    spark-tui writes known_hosts) is refused the same way, the file unchanged."""
    sshd_cluster.forget_host_key("spark1")
    before = sshd_cluster.known_hosts.read_bytes()
    cluster_yaml = sshd_cluster.write_cluster_yaml()
    proc = cli("--read-only", "trust", "spark1", "--config", str(cluster_yaml), "--yes")
    no_traceback(proc)
    assert proc.returncode != 0, proc.stdout
    assert "read-only: refused to trust the host key of spark1" in proc.stderr, proc.stderr
    assert sshd_cluster.known_hosts.read_bytes() == before
    # the fingerprint is still shown: reading is what --read-only allows
    assert "presents this host key" in proc.stdout


@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_a_planted_debug_log_neither_hangs_nor_is_written_through(
    tmp_path: Path, planted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--debug-log FILE` (or SPARK_TUI_DEBUG_LOG) where FILE is a FIFO hung every command
    (opening it for writing waits for a reader); a symlink there was written through. Both
    are refused in one line, exit 2, the symlink's target untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    log = tmp_path / "debug.log"
    if planted == "fifo":
        os.mkfifo(log)
    else:
        log.symlink_to(victim)
    for how in (["--debug-log", str(log)], []):
        if not how:
            monkeypatch.setenv("SPARK_TUI_DEBUG_LOG", str(log))
        proc = cli(*how, "kb", "list", timeout=30)
        no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"spark-tui: {log}: cannot write the debug log: "), proc
        assert "refused" in proc.stderr
    assert victim.read_text() == "untouched\n"
    monkeypatch.delenv("SPARK_TUI_DEBUG_LOG")
    good = tmp_path / "good.log"
    assert cli("--debug-log", str(good), "kb", "list", timeout=30).returncode == 0
    assert good.exists() and good.stat().st_mode & 0o077 == 0
