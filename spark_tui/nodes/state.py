"""What spark-tui knows about a node at one moment: readings from one sampling
round, each optional (a missing tool or an unparseable output is None plus a
note in `unavailable`, never an exception). `facts()` flattens them into the
fact names of spark_tui/facts.py for the conditions of the knowledge base.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_tui.facts import GIB
from spark_tui.nodes.parsers.processes import EngineProcess


@dataclass(frozen=True)
class MemoryReading:
    total_bytes: int
    available_bytes: int
    free_bytes: int
    cached_bytes: int  # Cached + Buffers (page cache)
    swap_total_bytes: int = 0
    swap_free_bytes: int = 0
    shmem_bytes: int = 0


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_bytes: int | None


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str
    uuid: str = ""
    sm_pct: float | None = None
    mem_bw_pct: float | None = None  # 0 on GB10 whatever the load
    memory_used_bytes: int | None = None  # None on GB10 ([N/A])
    memory_total_bytes: int | None = None  # None on GB10 ([N/A])
    temp_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None


@dataclass(frozen=True)
class Container:
    id: str
    name: str
    image: str
    state: str  # running | exited | restarting | created | …
    status: str = ""  # "Up 3 minutes", "Exited (1) 2 minutes ago"
    restart_count: int | None = None
    restart_policy: str | None = None


@dataclass(frozen=True)
class Interface:
    name: str
    state: str  # UP | DOWN | UNKNOWN
    addresses: tuple[str, ...] = ()  # CIDR
    mtu: int | None = None
    speed_mbps: int | None = None
    roce_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class RayStatus:
    nodes_alive: int
    gpus_used: float
    gpus_total: float
    object_store_total_bytes: int | None = None


@dataclass(frozen=True)
class EngineMetrics:
    """The serving engine's Prometheus counters (read on the head over its loopback)."""

    requests_running: float | None = None
    requests_waiting: float | None = None
    generation_tokens_total: float | None = None
    tokens_moved_at: float | None = None  # clock time the token counter last changed


@dataclass(frozen=True)
class NcclLibrary:
    """One libnccl.so.2* file inside the serving container."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ServingState:
    """The engine's progress as read from its log (and /metrics)."""

    phase: str = "stopped"  # stopped | starting | loading | capturing | serving | crashed
    load_pct: float | None = None
    capture_done: int | None = None
    capture_total: int | None = None
    tok_s: float | None = None
    requests_running: float | None = None
    generation_tokens_total: float | None = None
    progress_at: float | None = None  # clock time progress last moved
    last_log_at: float | None = None  # clock time of the last serving log line
    tokens_moved_at: float | None = None


@dataclass
class NodeState:
    """One sampling round of one node (plus the live serving state)."""

    name: str
    time: float  # clock seconds
    reachable: bool = True
    memory: MemoryReading | None = None
    gpus: tuple[GpuReading, ...] = ()
    gpu_processes: tuple[GpuProcess, ...] = ()
    containers: tuple[Container, ...] = ()
    ray: RayStatus | None = None
    interfaces: tuple[Interface, ...] = ()
    fabric_if: str | None = None
    drm_override: bool | None = None
    boot_id: str | None = None
    uptime_s: float | None = None
    nvrm_lines: tuple[str, ...] = ()
    listening_ports: tuple[int, ...] = ()
    serving: ServingState = field(default_factory=ServingState)
    metrics: EngineMetrics | None = None  # the head's /metrics, when the engine answers
    roce_up: tuple[str, ...] | None = None  # RoCE devices ibdev2netdev shows (Up); None: not read
    default_route_if: str | None = None
    ray_head: bool = False  # Ray's gcs_server runs here (ps)
    ray_member: bool = False  # a raylet runs here: the node is in a Ray cluster
    engine: EngineProcess | None = None  # the serving engine's API process, from its command line
    unavailable: dict[str, str] = field(
        default_factory=dict
    )  # reading -> why ("nvidia-smi: not installed")
    extra_facts: dict[str, object] = field(default_factory=dict)

    @property
    def stack_up(self) -> bool:
        """A container of the serving stack runs here, or an engine process."""
        return self.engine is not None or any(
            c.state == "running" and is_stack_container(c) for c in self.containers
        )

    def fabric(self) -> Interface | None:
        return next((i for i in self.interfaces if i.name == self.fabric_if), None)

    def facts(self) -> dict[str, object]:
        """Flatten into the fact names of spark_tui/facts.py (absent when unknown)."""
        f: dict[str, object] = {}
        m = self.memory
        if m is not None:
            gpu_proc = sum(p.used_bytes or 0 for p in self.gpu_processes)
            used = m.total_bytes - m.available_bytes
            f.update(
                {
                    "memory.total_gib": m.total_bytes / GIB,
                    "memory.available_gib": m.available_bytes / GIB,
                    "memory.free_gib": m.free_bytes / GIB,
                    "memory.cached_gib": m.cached_bytes / GIB,
                    "memory.after_drop_gib": (m.free_bytes + m.cached_bytes - m.shmem_bytes) / GIB,
                    "memory.used_gib": used / GIB,
                    "memory.swap_used_gib": (m.swap_total_bytes - m.swap_free_bytes) / GIB,
                    "memory.gpu_process_gib": gpu_proc / GIB,
                    # OS and services take ~8 GiB of a GB10; more than that with no
                    # GPU process and no serving container is memory nobody owns
                    "memory.unexplained_gib": max(0.0, (used - gpu_proc) / GIB - OS_BASELINE_GIB)
                    if not any(c.state == "running" for c in self.containers)
                    else 0.0,
                }
            )
        if self.gpus:
            g = self.gpus[0]
            f["gpu.present"] = True
            f["gpu.name"] = g.name
            for key, value in (
                ("gpu.sm_pct", g.sm_pct),
                ("gpu.mem_bw_pct", g.mem_bw_pct),
                ("gpu.power_w", g.power_w),
                ("gpu.temp_c", g.temp_c),
                ("gpu.sm_clock_mhz", g.sm_clock_mhz),
            ):
                if value is not None:
                    f[key] = float(value)
            if g.memory_total_bytes is not None:
                f["gpu.cuda_total_gib"] = g.memory_total_bytes / GIB
            f["gpu.process_count"] = len(self.gpu_processes)
        elif "gpu" not in self.unavailable:
            f["gpu.present"] = False
        if self.drm_override is not None:
            f["files.drm_override"] = self.drm_override
        f["kernel.nvrm_oom_count"] = sum(1 for line in self.nvrm_lines if "Out of memory" in line)
        if self.boot_id is not None:
            f["boot.id"] = self.boot_id
        if self.uptime_s is not None:
            f["boot.uptime_s"] = self.uptime_s
        if "containers" not in self.unavailable:
            running = [c for c in self.containers if c.state == "running"]
            f["containers.running"] = len(running)
            serving = [c for c in self.containers if is_stack_container(c)]
            f["containers.serving"] = any(c.state == "running" for c in serving)
            # a stopped container's count is history: only one that is up can be looping
            up = [c for c in serving if c.state in ("running", "restarting")]
            counts = [c.restart_count for c in up if c.restart_count is not None]
            if counts:
                f["containers.restart_count"] = max(counts)
            policies = [c.restart_policy for c in up if c.restart_policy]
            if policies:
                f["containers.restart_policy"] = policies[0]
        if "procs" not in self.unavailable:
            f["ray.member"] = self.ray_member
            f["engine.running"] = self.engine is not None
        if self.engine is not None:
            f["engine.port"] = self.engine.port
            if self.engine.model:
                f["engine.model"] = self.engine.model
        if self.ray is not None:
            f["ray.running"] = True
            f["ray.gpus_total"] = self.ray.gpus_total
            f["ray.nodes"] = self.ray.nodes_alive
        fab = self.fabric()
        if fab is not None:
            f["net.fabric_if"] = fab.name
            f["net.fabric_up"] = fab.state == "UP"
            if fab.mtu is not None:
                f["net.fabric_mtu"] = fab.mtu
            if fab.speed_mbps is not None:
                f["net.fabric_speed_mbps"] = fab.speed_mbps
            f["net.roce_devices"] = len(fab.roce_devices)
        s = self.serving
        f["serving.phase"] = s.phase
        for key, value in (
            ("serving.load_pct", s.load_pct),
            ("serving.capture_done", s.capture_done),
            ("serving.capture_total", s.capture_total),
            ("serving.tok_s", s.tok_s),
            ("serving.requests_running", s.requests_running),
        ):
            if value is not None:
                f[key] = float(value)
        if s.progress_at is not None:
            f["serving.progress_age_s"] = self.time - s.progress_at
        if s.last_log_at is not None:
            f["log.silent_s"] = self.time - s.last_log_at
        if s.tokens_moved_at is not None:
            f["serving.tokens_age_s"] = self.time - s.tokens_moved_at
        em = self.metrics
        if em is not None:  # the engine's own counters outrank what its log said
            for key, value in (
                ("serving.requests_running", em.requests_running),
                ("serving.requests_waiting", em.requests_waiting),
                ("serving.generation_tokens_total", em.generation_tokens_total),
            ):
                if value is not None:
                    f[key] = float(value)
            if em.tokens_moved_at is not None:
                f["serving.tokens_age_s"] = self.time - em.tokens_moved_at
        if self.roce_up is not None:
            f["net.roce_devices_up"] = len(self.roce_up)
        if self.default_route_if is not None:
            f["net.default_route_if"] = self.default_route_if
        f.update(self.extra_facts)
        return f


OS_BASELINE_GIB = 8.0
STACK_WORDS = ("vllm", "sglang", "ray")


def is_stack_container(c: Container) -> bool:
    """A container of the serving stack (the engine's or Ray's), by its name or image."""
    text = f"{c.name} {c.image}".lower()
    return any(w in text for w in STACK_WORDS)
