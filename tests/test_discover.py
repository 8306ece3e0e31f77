"""`spark-tui discover` over real sshd nodes on loopback addresses (tests/sshd_nodes.py).

spark1 and spark2 answer with a shim nvidia-smi printing the GB10 query; `h200` prints the
real H200 capture (not a Spark: left out); `ghost` is an ssh_config alias where nothing
listens (reported, not fatal). Host keys go through known_hosts: an unknown one is refused
unless the question is answered yes, and --yes never trusts one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.errors import InputError
from spark_tui.nodes.config import load_cluster
from spark_tui.nodes.discover import (
    Candidate,
    discover,
    expand_targets,
    known_hosts_hosts,
    neighbours,
    ssh_config_hosts,
    topology,
)
from spark_tui.nodes.local import LocalTransport
from tests.conftest import require_tool
from tests.sshd_nodes import FIX, shim_env, shim_node, start_sshd_cluster

H200_QUERY = FIX / "real" / "h200" / "query-gpu.csv"
ALL_UP = (
    "rocep1s0f0 port 1 ==> enp1s0f0np0 (Up)\n"
    "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n"
    "roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Up)\n"
    "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)\n"
)


def _free_port(address: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@pytest.fixture
def nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """spark1, spark2 (GB10), h200 (another GPU), and `ghost` where nothing answers."""
    require_tool("sshd")
    require_tool("ssh-keygen")
    cluster = start_sshd_cluster(tmp_path / "sshd", names=("spark1", "spark2", "h200"))
    cluster.node("h200").set_file("query-gpu.csv", H200_QUERY.read_text())
    ghost_port = _free_port("127.0.0.5")
    with cluster.ssh_config.open("a") as fh:
        fh.write(f"\nHost ghost\n  HostName 127.0.0.5\n  Port {ghost_port}\n")
    monkeypatch.setenv("HOME", str(cluster.home))
    try:
        yield cluster
    finally:
        cluster.stop()


def run_discover(cluster, ask=None, local=None, targets=None):
    candidates = expand_targets(targets) if targets else ssh_config_hosts(cluster.ssh_config)
    return discover(
        candidates,
        ask=ask,
        ssh_config=cluster.ssh_config,
        known_hosts=cluster.known_hosts,
        local=local,
        connect_timeout=5.0,
    )


def test_finds_the_sparks_and_reports_the_rest(nodes):
    proposal = run_discover(nodes)
    names = [n.name for n, _ in proposal.nodes]
    assert names == ["spark1", "spark2"]
    (head, p1), (worker, p2) = proposal.nodes
    assert (head.role, worker.role) == ("head", "worker")
    assert p1.gpus == ("NVIDIA GB10",) and p2.gpus == ("NVIDIA GB10",)
    # the fabric interface and address each node reports (ip -br addr, ibdev2netdev)
    assert (head.fabric_if, head.fabric_ip) == ("enp1s0f0np0", "10.10.10.1")
    assert (worker.fabric_if, worker.fabric_ip) == ("enp1s0f0np0", "10.10.10.2")
    assert p1.key_status == "known" and p1.key.startswith("ssh-ed25519 SHA256:")
    assert proposal.topology == "2-port link"
    left = {p.candidate.host: p for p in proposal.left_out}
    assert set(left) == {"h200", "ghost"}
    assert left["h200"].reachable and "NVIDIA H200" in left["h200"].reason
    assert not left["ghost"].reachable and "nothing answers" in left["ghost"].reason


def test_written_cluster_yaml_loads(nodes, tmp_path):
    proposal = run_discover(nodes)
    path = tmp_path / "cluster.yaml"
    path.write_text(proposal.cluster_yaml())
    cfg = load_cluster(path)
    assert [(n.name, n.host, n.role) for n in cfg.nodes] == [
        ("spark1", "spark1", "head"),
        ("spark2", "spark2", "worker"),
    ]
    assert [n.fabric_ip for n in cfg.nodes] == ["10.10.10.1", "10.10.10.2"]


def test_an_unknown_host_key_is_asked_about_never_taken_silently(nodes):
    nodes.forget_host_key("spark2")
    before = nodes.known_hosts.read_text()
    asked: list[tuple[str, str, str]] = []

    def no(where, kind, fp):
        asked.append((where, kind, fp))
        return False

    refused = run_discover(nodes, ask=no)
    assert [n.name for n, _ in refused.nodes] == ["spark1"]
    spark2 = next(p for p in refused.left_out if p.candidate.host == "spark2")
    assert spark2.key_status == "unknown-refused"
    fp = spark2.key.split()[1]
    assert fp.startswith("SHA256:") and fp in spark2.reason
    assert [a[0].split()[0] for a in asked] == ["spark2"] and asked[0][2] == fp
    assert nodes.known_hosts.read_text() == before  # nothing written
    # no question at all (scripts, --yes): refused and reported the same way
    silent = run_discover(nodes, ask=None)
    assert "spark2" not in [n.name for n, _ in silent.nodes]
    assert nodes.known_hosts.read_text() == before
    # an explicit yes trusts it: known_hosts gains exactly that key
    yes = run_discover(nodes, ask=lambda *_: True)
    assert [n.name for n, _ in yes.nodes] == ["spark1", "spark2"]
    assert dict((n.name, p) for n, p in yes.nodes)["spark2"].key_status == "trusted-now"
    added = nodes.known_hosts.read_text()[len(before) :]
    assert (
        added.strip()
        == f"[127.0.0.3]:{nodes.node('spark2').port} " + nodes.node("spark2").host_key_line
    )


def test_a_changed_host_key_is_refused(nodes):
    lines = nodes.known_hosts.read_text().splitlines()
    other = next(ln for ln in lines if ln.startswith("[127.0.0.2]"))
    swapped = [
        ln.split()[0] + " " + " ".join(other.split()[1:]) if ln.startswith("[127.0.0.3]") else ln
        for ln in lines
    ]
    nodes.known_hosts.write_text("\n".join(swapped) + "\n")
    proposal = run_discover(nodes, ask=lambda *_: True)
    spark2 = next(p for p in proposal.left_out if p.candidate.host == "spark2")
    assert spark2.key_status == "changed-refused" and "CHANGED" in spark2.reason


def test_four_fabric_ports_up_is_a_mesh(nodes):
    for name, i in (("spark1", 1), ("spark2", 2)):
        n = nodes.node(name)
        n.set_file("ibdev2netdev.txt", ALL_UP)
        n.set_file(
            "ip-br-addr.txt",
            "lo               UNKNOWN        127.0.0.1/8\n"
            f"enP7s7           UP             192.168.1.4{i}/24\n"
            f"enp1s0f0np0      UP             10.10.10.{i}/24\n"
            f"enp1s0f1np1      UP             10.10.11.{i}/24\n"
            f"enP2p1s0f0np0    UP             10.10.12.{i}/24\n"
            f"enP2p1s0f1np1    UP             10.10.13.{i}/24\n",
        )
        n.set_file(
            "ip-o-link.txt",
            "".join(
                f"{k}: {ifname}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP "
                "mode DEFAULT group default qlen 1000\\    link/ether 4c:bb:47:2a:10:0"
                f"{k} brd ff:ff:ff:ff:ff:ff\n"
                for k, ifname in enumerate(
                    ("enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0", "enP2p1s0f1np1"), 2
                )
            ),
        )
    proposal = run_discover(nodes)
    assert [p.fabric_ports_up for _, p in proposal.nodes] == [4, 4]
    assert proposal.topology == "4-port mesh"
    assert topology([1, 1]) == "2-port link" and topology([]) == "no fabric link up"


def test_this_machine_is_the_head_when_it_is_a_spark(nodes, tmp_path):
    me = shim_node(tmp_path / "local", "me")  # shim tools print the GB10 query
    me.set_file(
        "ip-br-addr.txt",
        me.data_dir.joinpath("ip-br-addr.txt")
        .read_text()
        .replace("10.10.10.1/24", "10.10.10.9/24"),
    )
    local = LocalTransport(env=shim_env(me))
    proposal = run_discover(nodes, local=local)
    (head, _), *workers = proposal.nodes
    assert (head.host, head.role, head.fabric_ip) == ("local", "head", "10.10.10.9")
    assert [(n.name, n.role) for n, _ in workers] == [("spark1", "worker"), ("spark2", "worker")]
    assert "host: local" in proposal.cluster_yaml()


def test_an_alias_and_its_address_are_one_node(nodes):
    n1 = nodes.node("spark1")
    candidates = ssh_config_hosts(nodes.ssh_config) + known_hosts_hosts(nodes.known_hosts)
    assert Candidate("127.0.0.2", "known_hosts", port=n1.port) in candidates
    proposal = discover(
        candidates, ask=None, ssh_config=nodes.ssh_config, known_hosts=nodes.known_hosts
    )
    assert [n.name for n, _ in proposal.nodes] == ["spark1", "spark2"]


def test_cli_json_writes_nothing_without_yes(nodes, tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    rc = main(["discover", "--json", "--output", str(out), "spark1", "spark2", "h200", "ghost"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert doc["written"] is None and not out.exists()
    assert [n["name"] for n in doc["nodes"]] == ["spark1", "spark2"] and doc["head"] == "spark1"
    assert {p["host"] for p in doc["left_out"]} == {"h200", "ghost"}
    assert "fabric_ip: 10.10.10.2" in doc["cluster_yaml"]


def test_cli_yes_writes_and_keeps_the_old_file(nodes, tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    out.write_text("nodes: [{name: old, host: old, role: head}]\n")
    rc = main(["discover", "--yes", "--output", str(out), "spark1", "spark2", "ghost"])
    text = capsys.readouterr().out
    assert rc == 0 and f"Written to {out}" in text and "left out ghost" in text
    assert [n.name for n in load_cluster(out).nodes] == ["spark1", "spark2"]
    backups = list(tmp_path.glob("cluster.yaml.*.bak"))
    assert len(backups) == 1 and "name: old" in backups[0].read_text()


def test_cli_no_spark_exits_1_and_bad_subnet_exits_2(nodes, capsys):
    assert main(["discover", "ghost", "h200"]) == 1
    assert "No DGX Spark found" in capsys.readouterr().out
    assert main(["discover", "10.0.0.0/23"]) == 2


def test_candidate_sources():
    assert [c.host for c in expand_targets(["10.10.10.0/30"])] == ["10.10.10.1", "10.10.10.2"]
    assert len(expand_targets(["10.10.10.0/24"])) == 254
    with pytest.raises(InputError):
        expand_targets(["10.10.0.0/23"])
    with pytest.raises(InputError):
        expand_targets(["-oProxyCommand=x"])
    c = expand_targets(["milo@spark9:2222"])[0]
    assert (c.host, c.port, c.user) == ("spark9", 2222, "milo")
    neigh = (
        "10.10.10.2 dev enp1s0f0np0 lladdr 4c:bb:47:2a:20:02 REACHABLE\n"
        "10.10.10.3 dev enp1s0f0np0 FAILED\n"
        "192.168.1.1 dev enP7s7 lladdr 00:11:22:33:44:55 STALE\n"
        "172.17.0.2 dev docker0 lladdr 02:42:ac:11:00:02 REACHABLE\n"
        "fe80::1 dev enP7s7 lladdr 00:11:22:33:44:55 router STALE\n"
    )
    got = neighbours(neigh, ["enp1s0f0np0", "enP7s7"])
    assert [(c.host, c.source) for c in got] == [
        ("10.10.10.2", "neighbour:enp1s0f0np0"),
        ("192.168.1.1", "neighbour:enP7s7"),
    ]


def test_a_sparkrun_cluster_file_is_probed_and_kept_in_its_order(nodes, tmp_path):
    """`discover --from`: the file's hosts are probed like any candidate; its first host is
    the head; a host that does not answer is proposed from the file, marked so."""
    from spark_tui.nodes.cluster_import import import_proposal, read_cluster_file

    f = tmp_path / "lab.yaml"
    f.write_text("name: lab\nhosts: [spark2, spark1, ghost]\ncache_dir: /data/hf\n")
    imported = read_cluster_file(f)
    found = discover(
        imported.candidates(),
        ask=None,
        ssh_config=nodes.ssh_config,
        known_hosts=nodes.known_hosts,
        connect_timeout=5.0,
    )
    proposal = import_proposal(imported, found)
    assert [(n.host, n.role) for n, _ in proposal.nodes] == [
        ("spark2", "head"),
        ("spark1", "worker"),
        ("ghost", "worker"),
    ]
    # what SSH found: each node's own fabric interface and address
    assert [n.fabric_ip for n, _ in proposal.nodes] == ["10.10.10.2", "10.10.10.1", None]
    text = proposal.cluster_yaml()
    assert "# ghost was not reached over SSH (" in text and "models_dir: /data/hf" in text
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    cfg = load_cluster(path)
    assert cfg.models_dir == "/data/hf" and cfg.head.host == "spark2"
