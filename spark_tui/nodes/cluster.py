"""The cluster: which nodes, how to reach them, which is the head (DESIGN.md's cluster.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["head", "worker"]


@dataclass(frozen=True)
class NodeConfig:
    name: str  # shown in the UI; unique
    host: str  # address, a Host alias from ~/.ssh/config, or "local"
    role: Role = "worker"
    user: str | None = None
    port: int | None = None
    fabric_if: str | None = None  # the 200G interface (else detected)
    fabric_ip: str | None = None

    @property
    def is_local(self) -> bool:
        return self.host == "local"

    def placeholder_values(self, head: NodeConfig | None = None) -> dict[str, object]:
        """Values for command templates ({node.fabric_if}, {head.fabric_ip}, …)."""
        values: dict[str, object] = {
            "node.name": self.name,
            "node.host": self.host,
            "node.fabric_if": self.fabric_if,
            "node.fabric_ip": self.fabric_ip,
        }
        if head is not None:
            values.update(
                {
                    "head.name": head.name,
                    "head.fabric_ip": head.fabric_ip or head.host,
                    "head.host": head.host,
                }
            )
        return values


@dataclass(frozen=True)
class ClusterConfig:
    nodes: tuple[NodeConfig, ...]
    recipe: str | None = None
    source: str = "<built-in>"  # the file it came from, or "<simulated>"
    simulated: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def head(self) -> NodeConfig:
        return next(n for n in self.nodes if n.role == "head")

    @property
    def workers(self) -> tuple[NodeConfig, ...]:
        return tuple(n for n in self.nodes if n.role != "head")

    def node(self, name: str) -> NodeConfig:
        for n in self.nodes:
            if n.name == name:
                return n
        from spark_tui.errors import InputError

        raise InputError(
            f"no node named {name!r} in the cluster ({', '.join(n.name for n in self.nodes)})"
        )

    def select(self, target: str, seen: str | None = None) -> tuple[NodeConfig, ...]:
        """Nodes for an action's `on`: all | head | workers | seen."""
        if target == "all":
            return self.nodes
        if target == "head":
            return (self.head,)
        if target == "workers":
            return self.workers
        if target == "seen":
            return (self.node(seen),) if seen else self.nodes
        raise ValueError(f"unknown target {target!r}")
