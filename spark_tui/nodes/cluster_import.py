"""The clusters other launchers already know, read for `spark-tui discover --from FILE`.

- eugr/spark-vllm-docker's `.env` (written by its autodiscover.sh, read by run-recipe.sh and
  launch-cluster.sh; https://github.com/eugr/spark-vllm-docker): `CLUSTER_NODES` (the node
  addresses, the first is the head), `ETH_IF` (the interface those addresses are on: NCCL
  and Gloo use it), `IB_IF` (the RoCE devices, NCCL_IB_HCA), `LOCAL_IP`, `COPY_HOSTS`, and in
  mesh mode `CONTAINER_NCCL_*` settings. In mesh mode (4 CX7 ports up) `ETH_IF` is the
  management port (enP7s7 or wlP9s9), so the addresses are not fabric addresses.
- a sparkrun cluster definition (`~/.config/sparkrun/clusters/NAME.yaml`, written by
  `sparkrun cluster create`; https://github.com/spark-arena/sparkrun): `name`, `hosts` (the
  first is the head), `user`, `cache_dir` (the Hugging Face cache: models_dir), `topology`.

Each becomes candidates for the usual SSH probe, and the file's own view of every node
(used when a node does not answer). What cluster.yaml has no field for is kept as notes.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from spark_tui.errors import InputError
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.config import _HCA, _MODELS_DIR, _USER
from spark_tui.nodes.discover import Candidate, Probe, Proposal
from spark_tui.redact import secret_name
from spark_tui.yamlfile import LDict, line_of, parse_yaml, read_text

# KEY=VALUE; the value is taken as the rest of the line and stripped after the match (a
# lazy `(.*?)\s*` here was quadratic on a long line of spaces)
_ENV_LINE = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(.*)")
MAX_FILE = 256 * 1024  # an eugr .env is a dozen lines; a sparkrun cluster file, a few more
_HOST = re.compile(r"[A-Za-z0-9_.:%-]+")
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
MESH_MANAGEMENT_IFS = ("enP7s7", "wlP9s9")  # autodiscover.sh's ETH_IF in mesh mode


@dataclass
class ImportedCluster:
    """What a launcher's cluster file says: the nodes in order (head first), and notes."""

    kind: str  # "eugr .env" | "sparkrun cluster"
    source: str
    nodes: list[NodeConfig] = field(default_factory=list)
    models_dir: str | None = None
    notes: list[str] = field(default_factory=list)

    def candidates(self) -> list[Candidate]:
        """The nodes as discover candidates (probed over SSH like any other)."""
        return [Candidate(n.host, f"from {self.kind}", user=n.user) for n in self.nodes]


def read_cluster_file(path: Path) -> ImportedCluster:
    """An eugr `.env` or a sparkrun cluster YAML; InputError naming file and line."""
    text = read_text(path, MAX_FILE)  # a regular file, at most MAX_FILE: InputError else
    if re.search(r"^[ \t]*(?:export[ \t]+)?CLUSTER_NODES[ \t]*=", text, re.M):
        return read_eugr_env(text, str(path))
    data = parse_yaml(text, str(path))
    if isinstance(data, LDict) and "hosts" in data:
        return read_sparkrun_cluster(data, str(path))
    raise InputError(
        "neither an eugr/spark-vllm-docker .env (CLUSTER_NODES=…) nor a sparkrun cluster "
        "definition (hosts: […])",
        str(path),
        1,
    )


def _check_host(host: str, file: str, line: int | None) -> str:
    if not _HOST.fullmatch(host) or host.startswith("-"):
        raise InputError(f"{host!r} is not a host name or address", file, line)
    return host


def _ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def read_eugr_env(text: str, file: str) -> ImportedCluster:
    """eugr's .env: KEY=VALUE lines (quotes removed, # comments), as run-recipe.py reads it."""
    values: dict[str, tuple[str, int]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        m = _ENV_LINE.fullmatch(raw)
        if not m:
            raise InputError(f"not a KEY=VALUE line: {raw.strip()!r}", file, number)
        values[m[1]] = (m[2].strip().strip('"').strip("'"), number)
    out = ImportedCluster("eugr .env", file)
    nodes_text, nodes_line = values["CLUSTER_NODES"]
    hosts = [h.strip() for h in nodes_text.split(",") if h.strip()]
    if not hosts:
        raise InputError("CLUSTER_NODES names no node", file, nodes_line)
    eth_if, eth_line = values.get("ETH_IF", ("", None))
    if eth_if and not _IFNAME.fullmatch(eth_if):
        raise InputError(f"ETH_IF {eth_if!r} is not an interface name", file, eth_line)
    mesh = eth_if in MESH_MANAGEMENT_IFS or "CONTAINER_NCCL_IB_SUBNET_AWARE_ROUTING" in values
    local = values.get("LOCAL_IP", ("", 0))[0]
    ib_if, ib_line = values.get("IB_IF", ("", None))
    if ib_if and not _HCA.fullmatch(ib_if):
        raise InputError(f"IB_IF {ib_if!r} is not a list of RDMA device names", file, ib_line)
    for i, host in enumerate(hosts):
        _check_host(host, file, nodes_line)
        fabric = None if mesh else _ip(host)
        out.nodes.append(
            NodeConfig(
                name=f"spark{i + 1}",
                host=host,
                role="head" if i == 0 else "worker",
                fabric_if=(eth_if or None) if not mesh else None,
                fabric_ip=fabric,
                fabric_hca=ib_if or None,  # launch-cluster.sh: NCCL_IB_HCA=$IB_IF on every node
            )
        )
    if local and local in hosts:
        out.notes.append(f"LOCAL_IP={local}: that node is the machine the .env was written on")
    if mesh:
        out.notes.append(
            f"mesh mode (ETH_IF={eth_if or '?'}): CLUSTER_NODES are management addresses; "
            "each node's fabric_if/fabric_ip are read over SSH, or set them by hand"
        )
    if "COPY_HOSTS" in values:
        out.notes.append(
            f"COPY_HOSTS={values['COPY_HOSTS'][0]}: where eugr copies images and models; "
            "spark-tui does not copy them"
        )
    if "CONTAINER_NAME" in values:  # launch-cluster.sh's container name, not a variable
        out.notes.append(
            f"CONTAINER_NAME={values['CONTAINER_NAME'][0]}: the name eugr's launch-cluster.sh "
            "gives its containers; spark-tui's launch of an eugr recipe names them vllm_node"
        )
    container_env = [
        f"{name}=" + ("${" + name + "}" if secret_name(name) else v)
        for k, (v, _) in values.items()
        if k.startswith("CONTAINER_") and k != "CONTAINER_NAME"
        for name in [k[len("CONTAINER_") :]]
    ]
    if container_env:
        out.notes.append(
            "container environment from the .env (add to the recipe's docker.env; a secret "
            "as a ${NAME} reference, its value in spark-tui's environment): "
            + " ".join(container_env)
        )
    secrets = [k for k in values if secret_name(k) and not k.startswith("CONTAINER_")]
    if secrets:
        out.notes.append(
            "secrets in the .env, not copied (set them in the environment spark-tui runs in): "
            + ", ".join(f"{k}=${{{k}}}" for k in secrets)
        )
    known = {"CLUSTER_NODES", "ETH_IF", "IB_IF", "LOCAL_IP", "COPY_HOSTS"}
    other = [
        k for k in values if k not in known and not k.startswith("CONTAINER_") and k not in secrets
    ]
    if other:
        out.notes.append("not used: " + ", ".join(other))
    return out


def read_sparkrun_cluster(data: LDict, file: str) -> ImportedCluster:
    """A sparkrun cluster definition: name, hosts (head first), user, cache_dir, topology."""
    out = ImportedCluster("sparkrun cluster", file)
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        raise InputError("'hosts' must list the cluster's hosts", file, line_of(data, "hosts"))
    user = data.get("user")
    if user is not None and (
        not isinstance(user, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}", user)
    ):
        raise InputError(f"'user' is {user!r}, not a user name", file, line_of(data, "user"))
    for i, raw in enumerate(hosts):
        line = line_of(hosts, i)
        if not isinstance(raw, str):
            raise InputError(f"host {i + 1} must be a host name or address", file, line)
        host_user, _, host = raw.rpartition("@")
        host = _check_host(host, file, line)
        if host_user and not _USER.fullmatch(host_user):
            raise InputError(f"{host_user!r} (before @) is not a user name", file, line)
        name = f"spark{i + 1}" if _ip(host) else re.sub(r"[^A-Za-z0-9._-]", "-", host)
        out.nodes.append(
            NodeConfig(
                name=name,
                host=host,
                role="head" if i == 0 else "worker",
                user=host_user or user,  # sparkrun's hosts are SSH addresses: the
            )  # fabric interface and address are read over SSH
        )
    cache = data.get("cache_dir")
    if isinstance(cache, str) and cache.strip():
        if not _MODELS_DIR.fullmatch(cache.strip()):
            raise InputError(
                f"'cache_dir' is {cache!r}, not a directory (absolute, or under ~/)",
                file,
                line_of(data, "cache_dir"),
            )
        out.models_dir = cache.strip()
    cluster_name = data.get("name")
    if cluster_name:
        out.notes.append(f"sparkrun cluster {cluster_name!r}")
    if data.get("topology"):
        out.notes.append(f"sparkrun topology: {data['topology']} (CX7 cabling)")
    for key in ("transfer_mode", "transfer_interface"):
        if data.get(key):
            out.notes.append(f"{key}: {data[key]} — how sparkrun copies models; not used")
    fabric = data.get("fabric_interfaces")
    if isinstance(fabric, list) and len(fabric) == 1 and _IFNAME.fullmatch(str(fabric[0])):
        out.nodes = [replace(n, fabric_if=str(fabric[0])) for n in out.nodes]
        out.notes.append(f"fabric_interfaces: [{fabric[0]}] — every node's fabric_if")
    elif fabric:
        out.notes.append(
            f"fabric_interfaces: {fabric} — patterns, not one interface: each node's "
            "fabric_if is read over SSH (or set it by hand)"
        )
    if data.get("mgmt_interface"):
        out.notes.append(
            f"mgmt_interface: {data['mgmt_interface']} — sparkrun's control interface; "
            "spark-tui reaches each node at its host and runs NCCL/Gloo on fabric_if"
        )
    handled = {
        "name", "hosts", "user", "cache_dir", "topology", "transfer_mode",
        "transfer_interface", "fabric_interfaces", "mgmt_interface",
    }  # fmt: skip
    other = [str(k) for k, v in data.items() if k not in handled and v not in (None, "", [], {})]
    if other:
        out.notes.append("not used (no cluster.yaml field): " + ", ".join(other))
    return out


def import_proposal(imported: ImportedCluster, found: Proposal) -> Proposal:
    """The file's nodes in the file's order (its first is the head): what SSH found for the
    nodes that answered, the file's own values for those that did not (marked so)."""
    reached = {p.candidate.host: (n, p) for n, p in found.nodes}
    out = Proposal(
        left_out=[
            p for p in found.left_out if p.candidate.host not in {n.host for n in imported.nodes}
        ],
        swept=found.swept,
        local=found.local,
        origin=f"{imported.kind} {imported.source}",
        models_dir=imported.models_dir,
        notes=list(imported.notes),
    )
    missing = {p.candidate.host: p for p in found.left_out}
    for i, node in enumerate(imported.nodes):
        role = "head" if i == 0 else "worker"
        if node.host in reached:
            n, p = reached[node.host]
            found_node = replace(
                n,
                role=role,  # type: ignore[arg-type]  # head or worker, chosen above
                user=n.user or node.user,
                fabric_hca=n.fabric_hca or node.fabric_hca,
                fabric_if=n.fabric_if or node.fabric_if,
            )
            out.nodes.append((found_node, p))
        else:
            p = missing.get(node.host) or Probe(
                Candidate(node.host, f"from {imported.kind}", user=node.user),
                reason="not probed (--no-probe)",
            )
            out.nodes.append((replace(node, role=role), p))  # type: ignore[arg-type]  # head or worker, chosen above
    return out
