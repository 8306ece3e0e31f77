"""Which cluster a recipe renders for: cluster.yaml (DESIGN.md) or a simulated one.

`find_cluster(config)` is what `recipes render` and `fix` use: --config FILE,
else ./cluster.yaml, else ~/.config/spark-tui/cluster.yaml, else a simulated
cluster of spark1..N with fabric IPs 10.10.10.1..N (said so in the output).
"""

from __future__ import annotations

import re
from pathlib import Path

from spark_tui import paths
from spark_tui.errors import InputError, InputErrors
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.yamlfile import line_of, load_yaml

NODE_FIELDS = {"name", "host", "user", "port", "fabric_if", "fabric_ip", "role"}
SIM_FABRIC_IF = "enp1s0f0np0"


def simulated_cluster(n: int = 2) -> ClusterConfig:
    """spark1..N on 10.10.10.1..N (fabric enp1s0f0np0), spark1 the head."""
    nodes = tuple(
        NodeConfig(
            name=f"spark{i}",
            host=f"spark{i}",
            role="head" if i == 1 else "worker",
            fabric_if=SIM_FABRIC_IF,
            fabric_ip=f"10.10.10.{i}",
        )
        for i in range(1, n + 1)
    )
    return ClusterConfig(nodes=nodes, source="<simulated>", simulated=True)


def load_cluster(path: Path) -> ClusterConfig:
    """Read and validate one cluster.yaml; every error names file and line."""
    file = str(path)
    data = load_yaml(path)
    errors: list[InputError] = []
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise InputError("a cluster file needs 'nodes:', a list of nodes", file, 1)
    for key in data:
        if key not in ("recipe", "nodes"):
            errors.append(InputError(f"unknown field {key!r}", file, line_of(data, key)))
    nodes: list[NodeConfig] = []
    for i, raw in enumerate(data["nodes"]):
        line = line_of(data["nodes"], i)
        if not isinstance(raw, dict):
            errors.append(InputError("a node is a mapping (name, host, …)", file, line))
            continue
        for key in raw:
            if key not in NODE_FIELDS:
                errors.append(InputError(f"unknown node field {key!r}", file, line_of(raw, key)))
        name, host = raw.get("name"), raw.get("host")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
            errors.append(InputError("node needs a name (letters, digits, . _ -)", file, line))
            continue
        if not isinstance(host, str) or not host:
            errors.append(InputError(f"node {name!r} needs a host", file, line))
            continue
        role = raw.get("role", "worker")
        if role not in ("head", "worker"):
            errors.append(InputError("role is head or worker", file, line_of(raw, "role")))
            continue
        port = raw.get("port")
        if port is not None and (not isinstance(port, int) or isinstance(port, bool)):
            errors.append(InputError("port is a number", file, line_of(raw, "port")))
            continue
        nodes.append(
            NodeConfig(
                name=name,
                host=host,
                role=role,
                user=raw.get("user"),
                port=port,
                fabric_if=raw.get("fabric_if"),
                fabric_ip=raw.get("fabric_ip"),
            )
        )
    names = [n.name for n in nodes]
    for name in {n for n in names if names.count(n) > 1}:
        errors.append(InputError(f"two nodes are named {name!r}", file, 1))
    heads = [n for n in nodes if n.role == "head"]
    if nodes and len(heads) != 1:
        errors.append(InputError(f"exactly one node has role: head (found {len(heads)})", file, 1))
    if errors:
        raise InputErrors(errors)
    recipe = data.get("recipe")
    return ClusterConfig(nodes=tuple(nodes), recipe=recipe, source=file)


def find_cluster(config: str | None, simulated_nodes: int = 2) -> ClusterConfig:
    """--config FILE, else ./cluster.yaml, else the user's, else a simulated cluster."""
    if config:
        path = Path(config)
        if not path.exists():
            raise InputError("no such cluster file", config)
        return load_cluster(path)
    for path in (Path("cluster.yaml"), paths.config_dir() / "cluster.yaml"):
        if path.exists():
            return load_cluster(path)
    return simulated_cluster(simulated_nodes)
