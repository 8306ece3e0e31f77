"""`ray start / status / stop` on a simulated node, in Ray's own output format."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.sim import logs
from spark_tui.sim.node import MEM_TOTAL_GIB
from spark_tui.sim.options import parse_options

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.world import SimWorld

# Ray sizes its object store at 30 % of the memory it sees unless told otherwise
DEFAULT_OBJECT_STORE_FRACTION = 0.30
MEMORY_MONITOR_THRESHOLD = 0.95


@dataclass
class RayDaemon:
    head: bool
    node_ip: str
    address_host: str  # the head's address a worker joined ("" on the head)
    env: dict[str, str]
    object_store_bytes: int
    started_at: float
    node_id: str = ""
    args: dict[str, object] = field(default_factory=dict)

    @property
    def monitor_threshold(self) -> float | None:
        """The memory monitor's kill threshold, or None when it is off."""
        if self.env.get("RAY_memory_monitor_refresh_ms", "").strip() == "0":
            return None
        try:
            return float(self.env.get("RAY_memory_usage_threshold", MEMORY_MONITOR_THRESHOLD))
        except ValueError:
            return MEMORY_MONITOR_THRESHOLD

    @property
    def object_store_gib(self) -> float:
        return self.object_store_bytes / float(1 << 30)


def ray_start(
    world: SimWorld, node: SimNode, container: SimContainer, args: list[str], env: dict[str, str]
) -> tuple[int, str, str, bool]:
    """Returns (exit code, stdout, stderr, blocks) — `--block` keeps the command running."""
    opts, _words = parse_options(args, short=False)
    if container.ray is not None:
        return (
            1,
            "",
            "ConnectionError: Ray is trying to start at an address where a Ray cluster is already running.\n",
            False,
        )
    head = bool(opts.get("--head"))
    ip = str(opts.get("--node-ip-address") or node.mgmt_ip)
    address_host = ""
    if not head:
        addr = str(opts.get("--address", env.get("RAY_ADDRESS", "")))
        address_host = addr.split("://")[-1].rsplit(":", 1)[0].strip("'\"")
        head_d = world.ray_head()
        if not addr or head_d is None or address_host not in head_d[0].all_ips():
            return (
                1,
                "",
                f"ConnectionError: Could not find any running Ray instance at {addr}.\n",
                False,
            )
    try:
        store = int(str(opts.get("--object-store-memory", 0)))
    except ValueError:
        return 2, "", "Error: Invalid value for '--object-store-memory'.\n", False
    if store <= 0:
        store = int(DEFAULT_OBJECT_STORE_FRACTION * MEM_TOTAL_GIB * (1 << 30))
    node_id = hashlib.sha256(
        f"{node.name}:{container.id}:{world.clock.now()}".encode()
    ).hexdigest()[:56]
    container.ray = RayDaemon(
        head=head,
        node_ip=ip,
        address_host=address_host,
        env=dict(env),
        object_store_bytes=store,
        started_at=world.clock.now(),
        node_id=node_id,
        args=opts,
    )
    out = "\n".join(logs.render("ray", "start-head" if head else "start-worker", ip=ip)) + "\n"
    return 0, out, "", bool(opts.get("--block"))


def ray_stop(world: SimWorld, node: SimNode, container: SimContainer) -> tuple[int, str, str]:
    if container.ray is None:
        return 0, "Did not find any active Ray processes.\n", ""
    container.ray = None
    now = world.clock.now()
    for e in world.engines:
        if node.name in e.members and e.alive(now) and e.uses_ray:
            e.kill(now, hard=False, reason="ray stopped")
    return 0, "Stopped all 7 Ray processes.\n", ""


def _gib(x: float) -> str:
    return f"{x:.2f}GiB"


def ray_status(world: SimWorld, container: SimContainer) -> tuple[int, str, str]:
    if container.ray is None and world.ray_head() is None:
        return (
            1,
            "",
            "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable.\n",
        )
    members = world.ray_members()
    if (
        container.ray is not None
        and not container.ray.head
        and all(m[1] is not container for m in members)
    ):
        return 1, "", "ConnectionError: Could not find any running Ray instance.\n"
    now = world.clock.now()
    stamp = _stamp(now)
    lines = logs.render("ray", "status-header", stamp=stamp)
    for _n, _c, d in members:
        lines.append(f" 1 node_{d.node_id}")
    lines += logs.render("ray", "status-middle")
    gpus_used = 0.0
    eng = world.live_engine()
    if eng is not None and eng.uses_ray and eng.placement_done(now):
        gpus_used = float(min(eng.tp, len(members)))
    cpus = 20.0 * len(members)
    mem_total = sum(max(1.0, n.memory(now).available - d.object_store_gib) for n, _c, d in members)
    store = sum(d.object_store_gib for _n, _c, d in members)
    lines += [
        f" 0.0/{cpus:.1f} CPU",
        f" {gpus_used:.1f}/{float(len(members)):.1f} GPU",
        f" 0B/{_gib(mem_total)} memory",
        f" 0B/{_gib(store)} object_store_memory",
    ]
    lines += logs.render("ray", "status-footer")
    return 0, "\n".join(lines) + "\n", ""


def _stamp(now: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
