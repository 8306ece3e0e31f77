"""The one factory of node connections: a Transport per node of a cluster.

`host: local` gets a LocalTransport (subprocess on this machine); every other node an
SSHTransport (paramiko, host keys checked). A simulated cluster brings its own
SimTransports (spark_tui.sim) and never comes here.
"""

from __future__ import annotations

from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.transport import Transport


def open_transport(node: NodeConfig, **ssh_options: object) -> Transport:
    """The transport for one node (connections are made lazily, on first use)."""
    if node.is_local:
        from spark_tui.nodes.local import LocalTransport

        return LocalTransport(name=node.name)
    from spark_tui.nodes.ssh import SSHTransport

    return SSHTransport(node, **ssh_options)  # type: ignore[arg-type]  # SSHTransport's own keyword options, passed through


def open_transports(cluster: ClusterConfig) -> dict[str, Transport]:
    """One transport per node of a real cluster, by node name."""
    if cluster.simulated:
        from spark_tui.errors import InputError

        raise InputError(
            "no cluster.yaml: this runs on real nodes (write cluster.yaml or pass --config FILE)"
        )
    return {n.name: open_transport(n) for n in cluster.nodes}
