"""The processes a simulated node's host sees in its running containers: each container's
main command, Ray's raylet (and gcs_server on the head), the engines — what `ps` lists, and
what /proc/PID/{cgroup,fd/1} say of each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.engine import Engine
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.world import SimWorld

RAY_DIR = "/usr/local/lib/python3.12/dist-packages/ray/core/src/ray"


@dataclass(frozen=True)
class SimProcess:
    pid: int
    args: str
    container: SimContainer
    engine: Engine | None = None


def node_processes(world: SimWorld, node: SimNode) -> list[SimProcess]:
    """Every process of the node's running containers, by pid."""
    now = world.clock.now()
    out: list[SimProcess] = []
    for c in node.containers.values():
        if not c.running:
            continue
        base = 1000 + int(c.id[:4], 16) % 50000
        if c.command:
            out.append(SimProcess(base, " ".join(c.command), c))
        if c.ray is not None:
            if c.ray.head:
                out.append(
                    SimProcess(base + 3, f"{RAY_DIR}/gcs/gcs_server --gcs_server_port=6379", c)
                )
            out.append(
                SimProcess(
                    base + 5, f"{RAY_DIR}/raylet/raylet --node_ip_address={c.ray.node_ip}", c
                )
            )
        for e in world.engines_in(c):
            if e.alive(now) and c.id in e.argv_in:
                pid = e.pid if e.container is c else base + 7
                out.append(SimProcess(pid, " ".join(e.argv_in[c.id]), c, e))
    return sorted(out, key=lambda p: p.pid)


def find_process(world: SimWorld, node: SimNode, pid: int) -> SimProcess | None:
    return next((p for p in node_processes(world, node) if p.pid == pid), None)


def stdout_target(p: SimProcess) -> str:
    """What /proc/PID/fd/1 points at: the file an engine's output was redirected to, else
    the pipe to docker's log (a container's main process or a `docker exec -d`)."""
    e = p.engine
    if e is not None and e.sink is not None:
        for path, f in p.container.files.items():
            if f is e.sink:
                return path
    return f"pipe:[{40000 + p.pid}]"


def cgroup(p: SimProcess) -> str:
    """/proc/PID/cgroup of a containerised process (cgroup v2, as on DGX OS)."""
    return f"0::/system.slice/docker-{p.container.id}.scope\n"


def executable(p: SimProcess) -> str:
    """What /proc/PID/exe points at: the interpreter that runs an engine or Ray's daemon's
    binary (the first word of a container's own command otherwise)."""
    first = p.args.split()[0] if p.args.strip() else "/bin/sh"
    if p.engine is not None or first.split("/")[-1] in ("vllm", "sglang", "python3", "python"):
        return "/usr/bin/python3.12"
    return first if first.startswith("/") else f"/usr/bin/{first}"
