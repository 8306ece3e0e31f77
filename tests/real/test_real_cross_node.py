"""Cross-node walls from real torch.distributed jobs across the two nodes.

vLLM's CPU build does not serve across two nodes (its follower asserts "collective_rpc should
not be called on follower node" without Ray, Ray is refused on the CPU platform, and the
data-parallel handshake never completed), so the two-node recipe runs one engine per node and
the walls of a cross-node start are made here the way an engine starts its CPU-side group:
tests/real/gloo_job.py (torch's Gloo over env://, one all_reduce) in the engine image on each
node, `docker run --network host`. What torch prints is read back with `docker logs` and given
to `spark-tui triage`, as a user pastes it; the same runs made the corpus files
tests/sample-logs/walls/*/gloo-torch-2.13-*.log.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.real.conftest import BRIDGE, NET, VETH_PREFIX, RealCluster, spark_tui

pytestmark = pytest.mark.real

IMAGE = "vllm-cpu:0.32.0"
FABRIC_IF = "enp1s0f1np1"
HEAD_IP = f"{NET}.1"
NOBODY_IP = f"{NET}.9"  # an address of the fabric's subnet no node has
JOB_TIMEOUT_S = 20


@dataclass
class Rank:
    node: str
    rank: int
    args: str = ""  # more `docker run` arguments (-e VAR=…, -v …)
    master: str = HEAD_IP
    world: int = 2


@pytest.fixture(scope="module")
def job_cluster(real_cluster: RealCluster) -> Iterator[RealCluster]:
    c = real_cluster
    job = (ROOT / "tests" / "real" / "gloo_job.py").read_text()
    for node in c.nodes:
        c.exec(node, f"cat > /root/gloo_job.py <<'EOF'\n{job}EOF")
    # the wrong host IP: a hosts file that gives the node's own hostname an address it does
    # not have (as after re-addressing a node and leaving /etc/hosts behind)
    c.exec(
        "spark1",
        f"printf '127.0.0.1 localhost\\n{NOBODY_IP} spark1\\n{NET}.2 spark2\\n' > /root/hosts-stale",
    )
    c.exec(
        "spark2",
        f"printf '127.0.0.1 localhost\\n{NET}.1 spark1\\n{NOBODY_IP} spark2\\n' > /root/hosts-stale",
    )
    yield c
    for node in c.nodes:
        c.exec(node, "docker rm -f gloo_rank0 gloo_rank1 >/dev/null 2>&1", check=False)


def _start(c: RealCluster, r: Rank) -> None:
    c.exec(
        r.node,
        f"docker run -d --name gloo_rank{r.rank} --network host -e MASTER_ADDR={r.master} "
        f"-e MASTER_PORT=29500 -e RANK={r.rank} -e WORLD_SIZE={r.world} "
        f"-e GLOO_JOB_TIMEOUT_S={JOB_TIMEOUT_S} {r.args} "
        f"-v /root/gloo_job.py:/gloo_job.py {IMAGE} python /gloo_job.py >/dev/null",
    )


def _run(c: RealCluster, ranks: list[Rank], read: int | None = None) -> str:
    """Start every rank's container, wait for rank `read` to end (None: whichever ends first),
    remove them all; its log."""
    for r in ranks:
        c.exec(r.node, f"docker rm -f gloo_rank{r.rank} >/dev/null 2>&1", check=False)
    for r in ranks:
        _start(c, r)
    watched = [r for r in ranks if read is None or r.rank == read]
    t0 = time.monotonic()
    ended: Rank | None = None
    while ended is None:
        assert time.monotonic() - t0 < 180, "no rank ended within 180 s"
        for r in watched:
            running = c.exec(
                r.node, f"docker inspect -f '{{{{.State.Running}}}}' gloo_rank{r.rank}"
            )
            if running.strip() == "false":
                ended = r
                break
        else:
            time.sleep(2)
    log = c.exec(ended.node, f"docker logs gloo_rank{ended.rank} 2>&1")
    print(f"rank {ended.rank} ended after {time.monotonic() - t0:.0f} s")
    # a peer left waiting (Gloo's own connect timeout is ~100 s; which rank of a loopback pair
    # is refused at once and which waits varies from run to run): not kept
    for r in ranks:
        c.exec(r.node, f"docker rm -f gloo_rank{r.rank} >/dev/null 2>&1", check=False)
    return log


def _run_all(c: RealCluster, ranks: list[Rank]) -> dict[int, str]:
    """Start every rank, wait for all of them to end (each within its own timeout); their logs."""
    logs: dict[int, str] = {}
    for r in ranks:
        c.exec(r.node, f"docker rm -f gloo_rank{r.rank} >/dev/null 2>&1", check=False)
    for r in ranks:
        _start(c, r)
    for r in ranks:
        c.exec(r.node, f"timeout 180 docker wait gloo_rank{r.rank}", timeout=200)
        logs[r.rank] = c.exec(r.node, f"docker logs gloo_rank{r.rank} 2>&1")
        c.exec(r.node, f"docker rm -f gloo_rank{r.rank} >/dev/null 2>&1", check=False)
    return logs


def _walls(log: str) -> list[str]:
    res = spark_tui("triage", "--json", "-", stdin=log, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    return [d["wall"] for d in json.loads(res.stdout)["diagnoses"]]


def test_a_one_rank_job_on_loopback_names_nothing(job_cluster: RealCluster) -> None:
    """One rank whose hostname does not resolve: torch falls back to loopback and warns, and
    the job runs (there is no peer to reach): not gloo-interface."""
    c = job_cluster
    one = Rank("spark2", 0, "-v /root/hosts-stale:/etc/hosts:ro", master="127.0.0.1", world=1)
    log = _run(c, [one], read=0)
    assert "Using the loopback address as fallback" in log, log
    assert "rank 0: all_reduce [1.0, 1.0, 1.0, 1.0]" in log, log
    assert _walls(log) == []


@pytest.mark.parametrize(
    ("case", "args", "words"),
    [
        # GLOO_SOCKET_IFNAME naming an interface the nodes do not have (a Spark has no eth0)
        ("ifname-missing", "-e GLOO_SOCKET_IFNAME=eth0", "Unable to find address for: eth0"),
        # GLOO_SOCKET_IFNAME=lo: every rank advertises 127.0.0.1 and reaches its own loopback
        ("ifname-lo", "-e GLOO_SOCKET_IFNAME=lo", "Gloo connectFullMesh failed"),
        # the wrong host IP: each node's hostname resolves to an address it does not have,
        # torch falls back to loopback, the peers cannot reach each other
        (
            "host-ip-wrong",
            "-v /root/hosts-stale:/etc/hosts:ro",
            "Using the loopback address as fallback",
        ),
    ],
)
def test_a_wrong_gloo_interface_or_host_address_is_named_gloo_interface(
    job_cluster: RealCluster, case: str, args: str, words: str
) -> None:
    c = job_cluster
    log = _run(c, [Rank("spark1", 0, args), Rank("spark2", 1, args)])
    assert words in log, log
    assert "connectFullMesh failed" in log or "Unable to find address" in log, log
    assert _walls(log) == ["gloo-interface"], (case, log)


def test_a_wrong_master_address_and_a_peer_that_never_joins_are_named_dist_init_timeout(
    job_cluster: RealCluster,
) -> None:
    """rank 1 is given MASTER_ADDR=an address no node has: it never reaches the store and
    times out; rank 0, in the same run, waits for a peer that never joins (the rendezvous
    timeout)."""
    c = job_cluster
    pin = f"-e GLOO_SOCKET_IFNAME={FABRIC_IF}"
    ranks = [Rank("spark1", 0, pin), Rank("spark2", 1, pin, master=NOBODY_IP)]
    logs = _run_all(c, ranks)
    follower, alone = logs[1], logs[0]
    assert f"failed to connect to any network address of ({NOBODY_IP}, 29500)" in follower
    assert _walls(follower) == ["dist-init-timeout"], follower
    assert "waiting for clients. 1/2 clients joined" in alone, alone
    assert _walls(alone) == ["dist-init-timeout"], alone


def _host_mtu(dev: str) -> int:
    return int(Path(f"/sys/class/net/{dev}/mtu").read_text().strip())


def _mtus(c: RealCluster) -> dict[str, int]:
    return {n: int(c.exec(n, f"cat /sys/class/net/{FABRIC_IF}/mtu").strip()) for n in c.nodes}


def test_mtu_9000_is_checked_with_a_large_ping_across_the_fabric(
    job_cluster: RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fabric-slow's fabric-mtu-9000 on the real nodes: with the bridge (the switch) taking
    9000 it sets 9000 and each node's 9000-byte ping to its peer gets through; with one side
    of the path left at 1500 (spark2's port on the bridge) the ping fails and the fix stops,
    failed, naming the node, and sets every node back to the MTU it had before (each its
    own: spark1 1500, spark2 1480), so no node is left cut off for large packets."""
    c = job_cluster
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ports = [f"{VETH_PREFIX}{n}" for n in c.nodes]

    def host(*cmd: str) -> None:
        subprocess.run(["ip", "link", "set", *cmd], check=True)

    fix = ("fix", "fabric-slow", "--fix", "fabric-mtu-9000", "--node", "spark2", "--yes")
    # put back what the harness made (cluster.sh: the bridge and its ports at 9000, the nodes
    # at 1500): a port left at 1500 cuts every later test's large packets (ssh between nodes)
    nodes_before = _mtus(c)
    host_before = {dev: _host_mtu(dev) for dev in (*ports, BRIDGE)}
    try:
        for port in ports:
            host("dev", port, "mtu", "9000")
        host("dev", BRIDGE, "mtu", "9000")
        assert set(_mtus(c).values()) == {1500}
        res = spark_tui(*fix, "--config", str(c.config), timeout=300)
        assert res.returncode == 0, (res.stdout, res.stderr)
        assert _mtus(c) == {"spark1": 9000, "spark2": 9000}
        assert "ping -M do -s 8972 -c 1 -W 3" in res.stdout, res.stdout

        # the nodes back below 9000, each at its own MTU; spark2's port on the bridge at 1500
        previous = {"spark1": 1500, "spark2": 1480}
        for node, mtu in previous.items():
            c.exec(node, f"ip link set dev {FABRIC_IF} mtu {mtu}")
        host("dev", ports[1], "mtu", "1500")
        res = spark_tui(*fix, "--config", str(c.config), timeout=300)
        out = res.stdout + res.stderr
        assert res.returncode != 0, out
        assert "100% packet loss" in out and "spark1" in out, out
        # the preview said what would set each node back; the result says it was done
        assert f"ip link set dev {FABRIC_IF} mtu <net.fabric_mtu before>" in res.stdout or (
            f"ip link set dev {FABRIC_IF} mtu 1480" in res.stdout
        ), res.stdout
        assert _mtus(c) == previous, out
        assert "spark1 set back to MTU 1500" in out and "spark2 set back to MTU 1480" in out, out
    finally:
        for node, mtu in nodes_before.items():
            c.exec(node, f"ip link set dev {FABRIC_IF} mtu {mtu}", check=False)
        for dev, mtu in host_before.items():
            subprocess.run(["ip", "link", "set", "dev", dev, "mtu", str(mtu)], check=False)
    assert _mtus(c) == nodes_before
    assert {dev: _host_mtu(dev) for dev in host_before} == host_before
