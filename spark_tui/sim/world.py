"""What spans the simulated nodes: time, the Ray cluster, the serving engines, ports."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.clock import ScaledClock
from spark_tui.sim.faults import Faults

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.engine import Engine
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.openai_server import EngineServer
    from spark_tui.sim.ray import RayDaemon


@dataclass
class Usage:
    """Memory a node's workloads hold (GiB): processes, shared memory, page cache they filled."""

    process_gib: float = 0.0
    shm_gib: float = 0.0
    cache_gib: float = 0.0


@dataclass
class SglangRank:
    node: SimNode
    container: SimContainer
    argv: list[str]
    env: dict[str, str]
    start: float
    sink: object  # the LogSink this rank writes to


@dataclass
class SimWorld:
    clock: ScaledClock
    seed: int = 0
    faults: Faults = field(default_factory=Faults)
    nodes: dict[str, SimNode] = field(default_factory=dict)
    engines: list[Engine] = field(default_factory=list)
    sglang_waiting: dict[str, list[SglangRank]] = field(default_factory=dict)
    servers: dict[tuple[str, int], EngineServer] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    # ---- Ray --------------------------------------------------------------------------

    def ray_daemons(self) -> list[tuple[SimNode, SimContainer, RayDaemon]]:
        out = []
        for node in self.nodes.values():
            if not node.is_up():
                continue
            for c in node.containers.values():
                if c.running and c.ray is not None:
                    out.append((node, c, c.ray))
        return out

    def ray_head(self) -> tuple[SimNode, SimContainer, RayDaemon] | None:
        return next((d for d in self.ray_daemons() if d[2].head), None)

    def ray_members(self) -> list[tuple[SimNode, SimContainer, RayDaemon]]:
        """Daemons in the head's cluster (head first)."""
        head = self.ray_head()
        if head is None:
            return []
        out = [head]
        head_ips = head[0].all_ips()
        for d in self.ray_daemons():
            if d[2].head:
                continue
            if d[2].address_host in head_ips:
                out.append(d)
        return out

    # ---- memory -----------------------------------------------------------------------

    def usage_on(self, node: str, now: float) -> Usage:
        u = Usage()
        for n, _c, _ray in self.ray_daemons():
            if n.name == node:
                u.process_gib += 0.6  # raylet, GCS, dashboard
        for e in self.engines:
            p, s, c = e.usage_on(node, now)
            u.process_gib += p
            u.shm_gib += s
            u.cache_gib += c
        return u

    def forget_cache(self, node: str, now: float) -> None:
        for e in self.engines:
            e.drop_cache(node, now)

    def on_node_reboot(self, node: SimNode) -> None:
        at = node.up_at or self.clock.now()
        for e in self.engines:
            if node.name in e.members:
                e.kill(node.down_from or at, hard=False, reason="reboot")
            e.drop_cache(node.name, at)
        for key in [k for k in self.servers if k[0] == node.name]:
            self.servers.pop(key).close()

    # ---- engines ----------------------------------------------------------------------

    def engines_in(self, container: SimContainer) -> list[Engine]:
        return [
            e for e in self.engines if e.container is container or container in e.rank_containers
        ]

    def live_engine(self) -> Engine | None:
        now = self.clock.now()
        live = [e for e in self.engines if e.alive(now)]
        return live[-1] if live else None

    def http_endpoint(self, node: str, port: int) -> str | None:
        server = self.servers.get((node, port))
        return server.url if server is not None else None

    def close(self) -> None:
        for server in list(self.servers.values()):
            server.close()
        self.servers.clear()
