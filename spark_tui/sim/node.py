"""One simulated DGX Spark (GB10): unified memory, page cache, leaks, files, boot.

Memory is computed, never stored as a reading: what the OS reports follows from
what runs (the engine, Ray, other services), what was read (page cache), what
a hard-killed container left behind (a leak that only a reboot clears) and
what the driver was told at boot (the drm override file halves what CUDA sees).
State changes only through commands (spark_tui.sim.shell interprets them).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.world import SimWorld

GIB = float(1 << 30)
KIB = 1024
# What /proc/meminfo reports on a DGX Spark (MemTotal ~127.6 M kB).
MEM_TOTAL_KB = 127_600_000
MEM_TOTAL_GIB = MEM_TOTAL_KB * KIB / GIB  # ≈ 121.7 GiB
CUDA_TOTAL_GIB = 119.67  # what CUDA reports as device memory (a Spark write-up's vLLM line)
DRM_OVERRIDE_CUDA_GIB = (
    62.0  # with /etc/modprobe.d/zz-nvidia-drm-override.conf at boot (a Spark write-up)
)
OS_GIB = 7.3  # OS and services of a fresh boot; MemFree ≈ 114 GiB after a drop (a Spark write-up)
SWAP_TOTAL_GIB = 16.0
REBOOT_S = 120.0  # "Plan for ~2 minutes of downtime per failed attempt" (a Spark write-up)
DRM_OVERRIDE = "/etc/modprobe.d/zz-nvidia-drm-override.conf"
# the kernel keeps a little free memory whatever the pressure (min_free_kbytes and friends)
RESERVE_GIB = 0.4


@dataclass
class Interface:
    name: str
    state: str
    mac: str
    mtu: int = 1500
    addrs: tuple[str, ...] = ()
    roce: str | None = None
    speed_mbps: int | None = None


@dataclass
class MemorySnapshot:
    """Memory of a node at one moment, in GiB (meminfo renders it in kB)."""

    total: float
    free: float
    available: float
    cached: float
    buffers: float
    shmem: float
    swap_total: float
    swap_free: float
    anon: float  # memory in use that the kernel cannot drop

    @property
    def used_fraction(self) -> float:
        """What Ray's memory monitor compares with its threshold."""
        return (self.total - self.available) / self.total


@dataclass
class SimNode:
    """One GB10 box. `world` gives time and what runs across the cluster."""

    world: SimWorld
    name: str
    index: int  # 1-based
    fabric_if: str = "enp1s0f0np0"
    fabric_ip: str = ""
    mgmt_if: str = "enP7s7"
    mgmt_ip: str = ""
    fabric_mtu: int = 9000
    # the MTU of the switch port the fabric interface is cabled to: a frame larger than the
    # sender's or the receiver's port takes is dropped on the way (no node is told)
    switch_port_mtu: int = 9000
    services_gib: float = 0.0  # other services holding memory (ASR, TTS, … a Spark write-up)
    page_cache_gib: float = 0.0  # what the page cache would hold with no pressure
    leaked_gib: float = 0.0  # held by the driver after a hard-killed container
    swap_used_gib: float = 0.0
    files: dict[str, str] = field(default_factory=dict)
    containers: dict[str, SimContainer] = field(default_factory=dict)
    dmesg: list[tuple[float, str]] = field(default_factory=list)
    boot_id: str = ""
    booted_at: float = 0.0
    down_from: float | None = None  # a reboot was asked: unreachable from here …
    up_at: float | None = None  # … until here
    drm_active: bool = False  # the override file was present at the last boot
    reachable: bool = True  # scenario knob: a node off the network
    kernel: str = "6.17.0-1032-nvidia"  # `uname -r` (scenario knob)
    docker_version: str = "28.3.3"  # its Docker Engine (the daemon); the client is DOCKER_CLIENT
    # real host directories visible read-only at the same path (a bind mount; tests use it)
    mounts: list[str] = field(default_factory=list)
    # model checkpoints on the node's disk: host directory -> bytes (`du -sbL` answers them)
    models: dict[str, int] = field(default_factory=dict)
    # checkpoint shards moved away (`mv`): a moved shard's content lives on in `files`
    shards_moved: set[str] = field(default_factory=set)
    # images in its dockerd: reference -> image ID, and every ID it holds (a tag moved to a new
    # image leaves the old one behind, as docker does); a reference first used gets its ID
    images: dict[str, str] = field(default_factory=dict)
    image_ids: set[str] = field(default_factory=set)
    next_pid: int = 4000

    def __post_init__(self) -> None:
        if not self.fabric_ip:
            self.fabric_ip = f"10.10.10.{self.index}"
        if not self.mgmt_ip:
            self.mgmt_ip = f"192.168.1.{100 + self.index}"
        if not self.boot_id:
            self.boot_id = self._new_boot_id(0)
        self.booted_at = self.world.clock.now() - 3 * 86400.0
        self.drm_active = DRM_OVERRIDE in self.files

    # ---- boot -------------------------------------------------------------------------

    def _new_boot_id(self, n: int) -> str:
        seed = hashlib.sha256(f"{self.world.seed}:{self.name}:boot:{n}".encode()).digest()
        return str(uuid.UUID(bytes=seed[:16], version=4))

    def is_up(self, now: float | None = None) -> bool:
        """Answers on the network now (not rebooting, not unplugged)."""
        self.settle(now)
        return self.reachable and self.down_from is None

    def down_reason(self) -> str:
        if not self.reachable:
            return "no route to host"
        return "connection refused (rebooting)" if self.down_from is not None else ""

    def request_reboot(self) -> None:
        """`reboot` as root: the box goes down a moment later and is back REBOOT_S later."""
        now = self.world.clock.now()
        self.down_from = now + 1.0
        self.up_at = now + REBOOT_S

    def settle(self, now: float | None = None) -> None:
        """Apply a reboot whose time has come (lazily, when anyone looks)."""
        now = self.world.clock.now() if now is None else now
        if self.down_from is not None and self.up_at is not None and now >= self.up_at:
            self._boot(self.up_at)

    def _boot(self, at: float) -> None:
        self.world.on_node_reboot(self)
        for c in self.containers.values():
            c.on_host_reboot(at)
        self.leaked_gib = 0.0
        self.page_cache_gib = 0.0
        self.swap_used_gib = 0.0
        self.dmesg = []
        self.drm_active = DRM_OVERRIDE in self.files
        self.boot_count = getattr(self, "boot_count", 0) + 1
        self.boot_id = self._new_boot_id(self.boot_count)
        self.booted_at = at
        self.down_from = None
        self.up_at = None
        # containers with a restart policy come back with the daemon
        for c in list(self.containers.values()):
            if c.restart_policy in ("always", "unless-stopped") and not c.stopped_by_user:
                c.start(at)

    # ---- memory -----------------------------------------------------------------------

    @property
    def cuda_total_gib(self) -> float:
        self.settle()
        return DRM_OVERRIDE_CUDA_GIB if self.drm_active else CUDA_TOTAL_GIB

    def memory(self, now: float | None = None) -> MemorySnapshot:
        now = self.world.clock.now() if now is None else now
        use = self.world.usage_on(self.name, now)  # engine, ray, object store
        anon = OS_GIB + self.services_gib + self.leaked_gib + use.process_gib + use.shm_gib
        room = MEM_TOTAL_GIB - RESERVE_GIB
        swapped = max(0.0, anon - room)
        swap_used = min(SWAP_TOTAL_GIB, self.swap_used_gib + swapped)
        resident = anon - swapped
        target_cache = self.page_cache_gib + use.cache_gib
        cached = max(0.0, min(target_cache, room - resident))
        free = max(RESERVE_GIB, MEM_TOTAL_GIB - resident - cached)
        # the page cache is reclaimable; object-store shm and leaked driver memory are not
        available = free + cached * 0.97
        return MemorySnapshot(
            total=MEM_TOTAL_GIB,
            free=free,
            available=min(MEM_TOTAL_GIB, available),
            cached=cached,
            buffers=0.05,
            shmem=use.shm_gib + 0.1,
            swap_total=SWAP_TOTAL_GIB,
            swap_free=SWAP_TOTAL_GIB - swap_used,
            anon=resident,
        )

    def cuda_free_gib(self, now: float | None = None) -> float:
        """What cudaMemGetInfo says is free: on unified memory the page cache counts as used."""
        return max(0.0, min(self.cuda_total_gib, self.memory(now).free))

    def drop_caches(self) -> None:
        """`echo 3 > /proc/sys/vm/drop_caches` (as root): the page cache empties."""
        now = self.world.clock.now()
        self.page_cache_gib = 0.0
        self.world.forget_cache(self.name, now)

    def meminfo(self, now: float | None = None) -> str:
        m = self.memory(now)

        def kb(gib: float) -> int:
            return round(gib * GIB / KIB)

        rows = [
            ("MemTotal", MEM_TOTAL_KB),
            ("MemFree", kb(m.free)),
            ("MemAvailable", kb(m.available)),
            ("Buffers", kb(m.buffers)),
            ("Cached", kb(m.cached)),
            ("SwapCached", 0),
            ("Active", kb(m.anon * 0.6 + m.cached * 0.3)),
            ("Inactive", kb(m.anon * 0.1 + m.cached * 0.7)),
            ("SwapTotal", kb(m.swap_total)),
            ("SwapFree", kb(m.swap_free)),
            ("Dirty", 1084),
            ("AnonPages", kb(m.anon - m.shmem)),
            ("Mapped", kb(min(m.cached, 2.0))),
            ("Shmem", kb(m.shmem)),
            ("KReclaimable", 26976),
            ("Slab", 92972),
            ("SReclaimable", 26976),
            ("SUnreclaim", 65996),
        ]
        return "".join(f"{k + ':':<16}{v:>10} kB\n" for k, v in rows)

    # ---- network ----------------------------------------------------------------------

    def interfaces(self) -> list[Interface]:
        n = self.index
        return [
            Interface("lo", "UNKNOWN", "00:00:00:00:00:00", 65536, ("127.0.0.1/8",)),
            Interface(
                self.mgmt_if,
                "UP",
                f"4c:bb:47:2e:{n:02x}:01",
                1500,
                (f"{self.mgmt_ip}/24",),
                speed_mbps=10000,
            ),
            Interface(
                self.fabric_if,
                "UP",
                f"4c:bb:47:2e:{n:02x}:10",
                self.fabric_mtu,
                (f"{self.fabric_ip}/24",),
                roce="rocep1s0f0",
                speed_mbps=200000,
            ),
            Interface("enp1s0f1np1", "DOWN", f"4c:bb:47:2e:{n:02x}:11", 1500, roce="rocep1s0f1"),
            Interface(
                "enP2p1s0f0np0",
                "UP",
                f"4c:bb:47:2e:{n:02x}:20",
                self.fabric_mtu,
                roce="roceP2p1s0f0",
                speed_mbps=200000,
            ),
            Interface(
                "enP2p1s0f1np1", "DOWN", f"4c:bb:47:2e:{n:02x}:21", 1500, roce="roceP2p1s0f1"
            ),
            Interface("wlP9s9", "DOWN", f"4c:bb:47:2e:{n:02x}:30", 1500),
        ]

    def all_ips(self) -> set[str]:
        return {self.fabric_ip, self.mgmt_ip, "127.0.0.1"}

    def mounted(self, path: str) -> str | None:
        """The real path behind a simulated one, when it lies under a mount."""
        import os

        real = os.path.realpath(path)
        for m in self.mounts:
            root = os.path.realpath(m)
            if real == root or real.startswith(root + os.sep):
                return real
        return None

    def new_pid(self) -> int:
        self.next_pid += 37
        return self.next_pid
