"""Which cluster a recipe renders for: cluster.yaml (spark_tui.nodes.config) or a simulated one.

`find_cluster(config)` is what `recipes render`, `fix` and `report` use:
--config FILE, else ./cluster.yaml, else ~/.config/spark-tui/cluster.yaml,
else a simulated cluster of spark1..N with fabric IPs 10.10.10.1..N (the
plan says so in its header).
"""

from __future__ import annotations

from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.config import cluster_config_path, load_cluster

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


def find_cluster(config: str | None, simulated_nodes: int = 2) -> ClusterConfig:
    """The cluster.yaml every command finds (cluster_config_path), else a simulated cluster."""
    found = cluster_config_path(config)
    return load_cluster(found) if found else simulated_cluster(simulated_nodes)
