"""Find the DGX Sparks reachable over SSH and propose a cluster.yaml (`spark-tui discover`).

Candidates: Host aliases of ~/.ssh/config, hosts of ~/.ssh/known_hosts, this machine's
neighbour (ARP) table on its fabric and management interfaces, or the hosts and subnets the
user gives (a subnet is expanded, at most a /24). A candidate is kept when it answers over
SSH and nvidia-smi names an `NVIDIA GB10`. Host keys are checked as everywhere (known_hosts,
RejectPolicy): an unknown key is shown with its SHA256 fingerprint and asked about through
`ask`; only an explicit yes appends it to known_hosts. Without `ask` (scripts, --yes) an
unknown key is refused and reported, never accepted. Nothing here writes cluster.yaml:
`Proposal.cluster_yaml()` is the text, the CLI writes it once the user confirms.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from spark_tui import paths
from spark_tui.clock import RealClock
from spark_tui.errors import InputError, SparkTuiError
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.sampler import read_sections
from spark_tui.nodes.state import Interface
from spark_tui.nodes.transport import NodeUnreachable, Transport
from spark_tui.untrusted import escaped

GB10 = "NVIDIA GB10"
MAX_SUBNET_HOSTS = 256  # a /24: discover never sweeps more than that
PORT_PROBE_S = 1.0
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# ip neigh: "10.10.10.2 dev enp1s0f0np0 lladdr 4c:bb:47:2a:20:02 REACHABLE"
_NEIGH = re.compile(
    r"^(?P<ip>\S+)\s+dev\s+(?P<dev>\S+)(?:\s+lladdr\s+\S+)?.*?(?P<state>[A-Z]+)\s*$"
)

# Ask about an unknown host key: (where, key type, "SHA256:…") -> trust it?
AskKey = Callable[[str, str, str], bool]


@dataclass(frozen=True)
class Candidate:
    """A place a Spark may answer: an ssh_config alias, an address, with where it came from."""

    host: str
    source: str  # ssh-config | known_hosts | neighbour:<if> | argument | subnet:<cidr>
    port: int | None = None
    user: str | None = None


@dataclass
class Probe:
    """What one candidate turned out to be."""

    candidate: Candidate
    where: str = ""  # user@host:port actually reached
    reachable: bool = False
    reason: str = ""  # why it is not kept
    key: str = ""  # "ssh-ed25519 SHA256:…"
    key_status: str = ""  # known | trusted-now | unknown-refused | changed-refused
    hostname: str = ""
    gpus: tuple[str, ...] = ()
    interfaces: tuple[Interface, ...] = ()
    fabric_if: str | None = None
    fabric_ip: str | None = None
    fabric_ports_up: int = 0

    @property
    def is_spark(self) -> bool:
        return self.reachable and any(GB10 in g for g in self.gpus)

    def addresses(self) -> set[str]:
        """Every IPv4 address on a non-loopback, non-docker interface (identity of a box)."""
        out = set()
        for i in self.interfaces:
            if i.name == "lo" or i.name.startswith(("docker", "br-", "veth")):
                continue
            for cidr in i.addresses:
                with contextlib.suppress(ValueError):
                    ip = ipaddress.ip_interface(cidr).ip
                    if ip.version == 4:
                        out.add(str(ip))
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.candidate.host,
            "source": self.candidate.source,
            "where": self.where,
            "reachable": self.reachable,
            "spark": self.is_spark,
            "reason": self.reason,
            "host_key": self.key,
            "host_key_status": self.key_status,
            "hostname": self.hostname,
            "gpus": list(self.gpus),
            "fabric_if": self.fabric_if,
            "fabric_ip": self.fabric_ip,
            "fabric_ports_up": self.fabric_ports_up,
        }


# ------------------------------------------------------------------ candidates


MAX_SSH_FILE = 4 << 20  # an ssh_config or known_hosts of a few thousand hosts


def _lines_of(path: Path) -> list[str]:
    """The lines of an ssh_config or known_hosts (none when it is missing, not a regular
    file, or larger than MAX_SSH_FILE: a FIFO there must not hang discover)."""
    from spark_tui.safefile import read_capped

    try:
        return read_capped(path, MAX_SSH_FILE).decode("utf-8", "replace").splitlines()
    except (OSError, ValueError):
        return []


def ssh_config_hosts(path: Path) -> list[Candidate]:
    """Host aliases of an ssh_config (patterns with *, ? or ! are not hosts)."""
    out: list[Candidate] = []
    for line in _lines_of(path):
        words = line.strip().split()
        if len(words) < 2 or words[0].lower() != "host":
            continue
        for alias in words[1:]:
            if not any(c in alias for c in "*?!"):
                out.append(Candidate(alias, "ssh-config"))
    return out


def known_hosts_hosts(path: Path) -> list[Candidate]:
    """Hosts of a known_hosts file; hashed entries (|1|…) cannot be read back and are skipped."""
    out: list[Candidate] = []
    for line in _lines_of(path):
        line = line.strip()
        if not line or line.startswith(("#", "|", "@")):
            continue
        for name in line.split()[0].split(","):
            m = re.fullmatch(r"\[(.+)\]:(\d+)", name)
            if m:
                out.append(Candidate(m.group(1), "known_hosts", port=int(m.group(2))))
            elif not any(c in name for c in "*?!"):
                out.append(Candidate(name, "known_hosts"))
    return out


def neighbours(text: str, interfaces: Iterable[str]) -> list[Candidate]:
    """Addresses of `ip neigh show` on the given interfaces (failed entries left out)."""
    wanted = set(interfaces)
    out: list[Candidate] = []
    for line in text.splitlines():
        m = _NEIGH.match(line.strip())
        if not m or m.group("dev") not in wanted or m.group("state") in ("FAILED", "INCOMPLETE"):
            continue
        with contextlib.suppress(ValueError):
            ip = ipaddress.ip_address(m.group("ip"))
            if ip.version == 4 and not ip.is_loopback:
                out.append(Candidate(str(ip), f"neighbour:{m.group('dev')}"))
    return out


def expand_targets(targets: Iterable[str]) -> list[Candidate]:
    """HOST, USER@HOST, HOST:PORT or a subnet (at most a /24); InputError for a bigger one."""
    out: list[Candidate] = []
    for raw in targets:
        user, _, rest = raw.rpartition("@")
        if "/" in rest:
            try:
                net = ipaddress.ip_network(rest, strict=False)
            except ValueError:
                raise InputError(
                    f"{raw!r} is neither a host nor a subnet (e.g. 10.10.10.0/24)"
                ) from None
            if net.num_addresses > MAX_SUBNET_HOSTS:
                raise InputError(
                    f"subnet {rest} has {net.num_addresses} addresses; discover sweeps at most "
                    f"a /24 ({MAX_SUBNET_HOSTS})"
                )
            hosts = list(net.hosts()) or [net.network_address]
            out += [Candidate(str(h), f"subnet:{net}", user=user or None) for h in hosts]
            continue
        host, port = rest, None
        m = re.fullmatch(r"\[(.+)\]:(\d+)|([^:\[\]]+):(\d+)", rest)
        if m:
            host = m.group(1) or m.group(3)
            port = int(m.group(2) or m.group(4))
        if not re.fullmatch(r"[A-Za-z0-9_.:%-]+", host) or host.startswith("-"):
            raise InputError(f"{raw!r} is not a host name or address")
        out.append(Candidate(host, "argument", port=port, user=user or None))
    return out


# ------------------------------------------------------------------ probing


def _port_open(host: str, port: int, timeout: float = PORT_PROBE_S) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def probe(
    candidate: Candidate,
    *,
    ask: AskKey | None,
    ssh_config: Path | None = None,
    known_hosts: Path | None = None,
    connect_timeout: float = 5.0,
) -> Probe:
    """Check the host key (ask about an unknown one), then read the node over SSH once."""
    from spark_tui.nodes.ssh import (
        append_known_host,
        fetch_host_key,
        fingerprint_sha256,
        known_key,
        resolve_target,
    )
    from spark_tui.nodes.transports import open_transport

    result = Probe(candidate)
    try:
        target = resolve_target(
            candidate.host,
            user=candidate.user,
            port=candidate.port,
            ssh_config=ssh_config,
            known_hosts=known_hosts,
        )
    except SparkTuiError as exc:
        result.reason = str(exc)
        return result
    where = f"{target.hostname}:{target.port}"
    result.where = f"{target.user}@{where}"
    if not target.proxy_jump and not _port_open(target.hostname, target.port):
        result.reason = f"nothing answers on {where}"
        return result
    try:
        key = fetch_host_key(target, timeout=connect_timeout)
    except SparkTuiError as exc:
        result.reason = str(exc)
        return result
    fp = fingerprint_sha256(key)
    result.key = f"{key.get_name()} {fp}"
    known = known_key(target)
    if known is not None and known.asbytes() != key.asbytes():
        result.key_status = "changed-refused"
        result.reason = (
            f"the host key of {where} CHANGED (known_hosts holds {fingerprint_sha256(known)}, "
            f"the host presents {fp}); refused"
        )
        return result
    if known is None:
        if ask is None or not ask(f"{candidate.host} ({where})", key.get_name(), fp):
            result.key_status = "unknown-refused"
            result.reason = (
                f"unknown host key {key.get_name()} {fp}: not trusted (answer yes when asked, "
                f"without --yes, or add it with ssh-keyscan after checking it on the node)"
            )
            return result
        append_known_host(target, key)
        result.key_status = "trusted-now"
    else:
        result.key_status = "known"
    node = NodeConfig(candidate.host, candidate.host, user=candidate.user, port=candidate.port)
    t = open_transport(
        node,
        ssh_config=ssh_config,
        known_hosts=known_hosts,
        connect_timeout=connect_timeout,
        backoff_s=(60.0,),
    )
    try:
        read_node(t, node, result)
    finally:
        t.close()
    return result


def read_node(t: Transport, node: NodeConfig, result: Probe) -> Probe:
    """One read-only round: GPUs, interfaces, RoCE devices, host name."""
    try:
        res = t.run(commands.sample_script(commands.DISCOVER), timeout=20.0)
    except NodeUnreachable as exc:
        result.reason = exc.reason
        return result
    outputs = commands.split_sections(res.stdout)
    state = read_sections(node, RealClock().now(), outputs, expected=tuple(commands.DISCOVER))
    result.reachable = True
    result.gpus = tuple(g.name for g in state.gpus)
    result.interfaces = state.interfaces
    result.fabric_if = state.fabric_if
    fab = state.fabric()
    if fab is not None:
        for cidr in fab.addresses:
            with contextlib.suppress(ValueError):
                ip = ipaddress.ip_interface(cidr).ip
                if ip.version == 4:
                    result.fabric_ip = str(ip)
                    break
    result.fabric_ports_up = sum(1 for i in state.interfaces if i.roce_devices and i.state == "UP")
    rc, text = outputs.get("hostname", (1, ""))
    result.hostname = text.strip().splitlines()[0] if rc == 0 and text.strip() else ""
    if not result.gpus:
        result.reason = state.unavailable.get("gpu", "nvidia-smi shows no GPU")
    elif not result.is_spark:
        result.reason = f"not a DGX Spark: {', '.join(sorted(set(result.gpus)))}"
    return result


# ------------------------------------------------------------------ the proposal


def topology(ports_up: Iterable[int]) -> str:
    """Each node's cabled fabric ports (RoCE netdevs UP): one QSFP cable shows as at most 2
    (its two netdevs) — a 2-port link between two boxes; both QSFP ports cabled show 4 — a
    4-port mesh (ring) of three or more."""
    counts = [p for p in ports_up]
    if not counts or max(counts) == 0:
        return "no fabric link up"
    if max(counts) <= 2:
        return "2-port link"
    if min(counts) >= 3:
        return "4-port mesh"
    return "mixed: " + ", ".join(str(c) for c in counts) + " fabric ports up"


@dataclass
class Proposal:
    """The Sparks found, the head, and what was left out (unreachable, refused, not a Spark)."""

    nodes: list[tuple[NodeConfig, Probe]] = field(default_factory=list)
    left_out: list[Probe] = field(default_factory=list)
    swept: int = 0  # subnet addresses that did not answer on the SSH port
    local: Probe | None = None
    origin: str | None = None  # the launcher's cluster file it was read from (--from)
    models_dir: str | None = None
    notes: list[str] = field(default_factory=list)  # what cluster.yaml has no field for

    @property
    def topology(self) -> str:
        return topology(p.fabric_ports_up for _, p in self.nodes if p.reachable)

    def cluster_yaml(self) -> str:
        count = f"{len(self.nodes)} DGX Spark{'s' if len(self.nodes) != 1 else ''}"
        lines = [
            f"# written by `spark-tui discover` from {escaped(self.origin)} — {count}"
            if self.origin
            else f"# written by `spark-tui discover` — {count}, {self.topology}"
        ]
        lines += [f"# {escaped(note)}" for note in self.notes]
        if self.models_dir:
            lines.append(f"models_dir: {_yaml_text(self.models_dir)}")
        lines.append("nodes:")
        for n, probe in self.nodes:
            if not probe.reachable:
                lines.append(
                    f"  # {n.host} was not reached over SSH ({probe.reason or 'no answer'}): "
                    "from the file; fabric_if/fabric_ip as the file gives them"
                )
            lines.append(f"  - name: {n.name}")
            lines.append(f"    host: {n.host}")
            if n.user:
                lines.append(f"    user: {n.user}")
            if n.port:
                lines.append(f"    port: {n.port}")
            if n.fabric_if:
                lines.append(f"    fabric_if: {n.fabric_if}")
            if n.fabric_ip:
                lines.append(f"    fabric_ip: {n.fabric_ip}")
            if n.fabric_hca:
                lines.append(f"    fabric_hca: {_yaml_text(n.fabric_hca)}")
            lines.append(f"    role: {n.role}" + ("   # this machine" if n.is_local else ""))
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, object]:
        return {
            "nodes": [
                {
                    "name": n.name,
                    "host": n.host,
                    "user": n.user,
                    "port": n.port,
                    "role": n.role,
                    "fabric_if": n.fabric_if,
                    "fabric_ip": n.fabric_ip,
                    "fabric_hca": n.fabric_hca,
                    "fabric_ports_up": p.fabric_ports_up,
                    "gpus": list(p.gpus),
                    "source": p.candidate.source,
                    "host_key": p.key,
                    "reached": p.reachable,
                }
                for n, p in self.nodes
            ],
            "from": self.origin,
            "models_dir": self.models_dir,
            "notes": list(self.notes),
            "head": next((n.name for n, _ in self.nodes if n.role == "head"), None),
            "topology": self.topology if self.nodes else None,
            "left_out": [p.to_json() for p in self.left_out],
            "subnet_addresses_silent": self.swept,
            "cluster_yaml": self.cluster_yaml() if self.nodes else None,
        }


def _yaml_text(text: str) -> str:
    """A value as a YAML scalar that reads back as the same text."""
    import json

    return (
        text
        if re.fullmatch(r"[A-Za-z0-9_./~$-][A-Za-z0-9_./~$ -]*", text) and ": " not in text
        else json.dumps(text)
    )


# printed by `spark-tui discover` when no Spark answered: every field, commented out
CLUSTER_YAML_TEMPLATE = f"""\
# cluster.yaml: the nodes spark-tui watches and launches on
# (every field: {paths.doc("cluster-yaml.md")}).
# Save it as ./cluster.yaml or ~/.config/spark-tui/cluster.yaml, then remove the '# '
# in front of each line and fill in your nodes.
#
# recipe: minimax-m2.7-nvfp4-vllm-tp2  # what `r` relaunches (spark-tui recipes list)
# models_dir: ~/.cache/huggingface     # the model weights' directory on every node
# nodes:
#   - name: spark1                     # shown in the panes; letters, digits, . _ -
#     host: 192.168.1.10               # an address, a ~/.ssh/config Host alias, or local
#     user: me                         # the SSH user (default: ~/.ssh/config's, or yours)
#     fabric_if: enp1s0f1np1           # the ConnectX-7 port that is Up (ibdev2netdev)
#     fabric_ip: 10.10.10.1            # its address: NCCL, Gloo and Ray bind it
#     role: head                       # exactly one head; the others are workers
#   - name: spark2
#     host: 192.168.1.11
#     fabric_if: enp1s0f1np1
#     fabric_ip: 10.10.10.2
#     role: worker
"""


def _unique_name(base: str, taken: set[str]) -> str:
    name = _NAME.sub("-", base).strip("-.")[:50] or "spark"
    if not name[0].isalnum():
        name = "n" + name
    out, i = name, 2
    while out in taken:
        out, i = f"{name}-{i}", i + 1
    taken.add(out)
    return out


def discover(
    candidates: list[Candidate],
    *,
    ask: AskKey | None,
    ssh_config: Path | None = None,
    known_hosts: Path | None = None,
    local: Transport | None = None,
    connect_timeout: float = 5.0,
    workers: int = 16,
) -> Proposal:
    """Probe every candidate (in parallel; host-key questions one at a time) and propose."""
    import threading

    from spark_tui.nodes.ssh import resolve_target

    # the same box under an alias and an address: probe it once
    seen: dict[tuple[str, int], Candidate] = {}
    for c in candidates:
        try:
            t = resolve_target(
                c.host, user=c.user, port=c.port, ssh_config=ssh_config, known_hosts=known_hosts
            )
            key = (t.hostname, t.port)
        except SparkTuiError:
            key = (c.host, c.port or 22)
        # an alias beats an address (its ssh_config user/port/key apply)
        if key not in seen or (c.source == "ssh-config" and seen[key].source != "ssh-config"):
            seen[key] = c
    lock = threading.Lock()

    def one_at_a_time(where: str, kind: str, fp: str) -> bool:
        with lock:
            return ask(where, kind, fp) if ask else False

    proposal = Proposal()
    if local is not None:
        me = read_node(local, NodeConfig("local", "local"), Probe(Candidate("local", "local")))
        proposal.local = me if me.is_spark else None
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(seen) or 1))) as pool:
        probes = list(
            pool.map(
                lambda c: probe(
                    c,
                    ask=one_at_a_time if ask else None,
                    ssh_config=ssh_config,
                    known_hosts=known_hosts,
                    connect_timeout=connect_timeout,
                ),
                list(seen.values()),
            )
        )
    mine = proposal.local.addresses() if proposal.local else set()
    taken: set[str] = set()
    boxes: set[frozenset[str]] = set()
    sparks: list[Probe] = []
    for p in probes:
        if p.is_spark:
            ident = frozenset({p.fabric_ip} if p.fabric_ip else p.addresses())
            if ident and (ident in boxes or (p.fabric_ip and p.fabric_ip in mine)):
                continue  # this machine, or a box already found under another name
            boxes.add(ident)
            sparks.append(p)
        elif p.candidate.source.startswith("subnet:") and not p.reachable and not p.key:
            proposal.swept += 1
        else:
            proposal.left_out.append(p)
    if proposal.local is not None:
        me = proposal.local
        proposal.nodes.append(
            (
                NodeConfig(
                    _unique_name(me.hostname or "spark-local", taken),
                    "local",
                    "head",
                    fabric_if=me.fabric_if,
                    fabric_ip=me.fabric_ip,
                ),
                me,
            )
        )
    # without this machine, the head is the Spark with the lowest fabric address
    sparks.sort(key=lambda p: _ip_key(p.fabric_ip) or _ip_key(p.candidate.host) or (9, p.where))
    for p in sparks:
        c = p.candidate
        # a name the user gave (an alias) names the node; an address is named by its host name
        base = (p.hostname or c.host) if _ip_key(c.host) else c.host
        role = "worker" if proposal.nodes else "head"
        proposal.nodes.append(
            (
                NodeConfig(
                    _unique_name(base, taken),
                    c.host,
                    role,  # type: ignore[arg-type]  # head or worker, chosen above
                    user=c.user,
                    port=c.port if c.source != "ssh-config" else None,
                    fabric_if=p.fabric_if,
                    fabric_ip=p.fabric_ip,
                ),
                p,
            )
        )
    return proposal


def _ip_key(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        return (0, int(ipaddress.ip_address(text)))
    except ValueError:
        return None


def neighbour_interfaces(local: Probe | None) -> list[str]:
    """This machine's fabric and management interfaces: UP, wired, not loopback/bridges."""
    if local is None:
        return []
    skip = ("lo", "docker", "br-", "veth", "wl", "virbr", "tailscale")
    return [i.name for i in local.interfaces if i.state == "UP" and not i.name.startswith(skip)]


def default_candidates(
    ssh_config: Path, known_hosts: Path, neigh_text: str, neigh_interfaces: Iterable[str]
) -> list[Candidate]:
    """Hosts of ~/.ssh/config and known_hosts, and neighbours on the given interfaces."""
    return (
        ssh_config_hosts(ssh_config)
        + known_hosts_hosts(known_hosts)
        + neighbours(neigh_text, neigh_interfaces)
    )
