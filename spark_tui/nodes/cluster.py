"""The cluster: which nodes, how to reach them, which is the head (cluster.yaml, docs/cluster-yaml.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["head", "worker"]
DEFAULT_MODELS_DIR = "~/.cache/huggingface"  # cluster.yaml's models_dir when it names none


LOG_KINDS = ("file", "unit", "container", "command")


@dataclass(frozen=True)
class LogSource:
    """An extra log of a node (cluster.yaml `logs:`): a file, a journald unit, a container's
    output, or a command whose output is the log."""

    kind: str  # file | unit | container | command
    value: str

    @property
    def name(self) -> str:
        """The source's name in diagnoses ('log:file:/var/log/vllm.log')."""
        return f"log:{self.kind}:{self.value}"


@dataclass(frozen=True)
class NodeConfig:
    name: str  # shown in the UI; unique
    host: str  # address, a Host alias from ~/.ssh/config, or "local"
    role: Role = "worker"
    user: str | None = None
    port: int | None = None
    fabric_if: str | None = None  # the 200G interface (else detected)
    fabric_ip: str | None = None
    logs: tuple[LogSource, ...] = ()
    # the RDMA devices of the fabric (eugr's IB_IF, e.g. rocep1s0f1,roceP2p1s0f1): NCCL_IB_HCA
    fabric_hca: str | None = None  # extra logs to tail, beyond what is found running

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


class RecipeRef(str):
    """cluster.yaml's `recipe:` id, remembering its file and line so that an unknown id is
    reported where it was written (RecipeBook.get reads them)."""

    file: str | None = None
    line: int | None = None

    def __new__(cls, value: str, file: str | None = None, line: int | None = None) -> RecipeRef:
        ref = super().__new__(cls, value)
        ref.file, ref.line = file, line
        return ref


@dataclass(frozen=True)
class ClusterConfig:
    nodes: tuple[NodeConfig, ...]
    recipe: str | None = None
    source: str = "<built-in>"  # the file it came from, or "<simulated>"
    simulated: bool = False
    extra: dict[str, object] = field(default_factory=dict)
    # where the model weights live on every node (a recipe mounts {cluster.models_dir})
    models_dir: str = DEFAULT_MODELS_DIR
    # a model id -> the path in the container of the plain directory the nodes hold it in
    # (found on the head before a launch: nodes/model_paths.plain_model_dir), not written
    weights_at: dict[str, str] = field(default_factory=dict)

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
