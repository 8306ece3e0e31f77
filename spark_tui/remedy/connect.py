"""Connections for the nodes a fix or launch touches (local subprocess or SSH)."""

from __future__ import annotations

from spark_tui.errors import InputError
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.transport import Transport


def transports_for(cluster: ClusterConfig) -> dict[str, Transport]:
    """One Transport per node: LocalTransport for `host: local`, SSHTransport otherwise.
    A simulated cluster has no nodes to change: the caller passes the simulator's."""
    if cluster.simulated:
        raise InputError(
            "no cluster.yaml: a fix runs on real nodes (write cluster.yaml or pass --config FILE)"
        )
    from spark_tui.nodes.local import LocalTransport

    out: dict[str, Transport] = {}
    for node in cluster.nodes:
        if node.is_local:
            out[node.name] = LocalTransport(node.name)
        else:
            from spark_tui.nodes.ssh import SSHTransport

            out[node.name] = SSHTransport(node)
    return out
