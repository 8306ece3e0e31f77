"""The weight load both engines share: its duration, progress lines, and the ways it dies —
CUDA out of memory over the budget, NVRM out of memory when the node overcommits, a corrupt
shard (scenario faults)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING

from spark_tui.sim import logs, models
from spark_tui.sim.node import GIB, MEM_TOTAL_GIB, RESERVE_GIB

if TYPE_CHECKING:
    from spark_tui.sim.engine import Engine
    from spark_tui.sim.node import SimNode


def _short_copies(e: Engine) -> list[SimNode]:
    """The member nodes whose copy of the engine's checkpoint has a truncated shard: the copy
    under the user's home, which the serving container mounts."""
    from spark_tui.sim.shell.context import Ctx
    from spark_tui.sim.shell.files import truncated_shards
    from spark_tui.sim.transport import BASE_ENV

    name = "/" + e.spec.model.rstrip("/").rsplit("/", 1)[-1].replace("/", "--")
    home = BASE_ENV["HOME"] + "/"
    return [
        m.node
        for m in e.members.values()
        if any(
            p.startswith(home) and name in p.replace("models--", "/").replace("--", "/")
            for p in truncated_shards(Ctx(e.world, m.node, env=dict(BASE_ENV)))
        )
    ]


def plan_load(e: Engine, t: float, kind: str, v: Mapping[str, object]) -> float:
    """Schedule the weight load; returns the time it ends, or -1 when the engine dies in it."""
    weights = max(m.weights_gib for m in e.members.values())
    duration = weights * GIB / 1e9 / models.LOAD_GB_PER_S
    e.load_start, e.load_end = t, t + duration
    # the Ray object store of the head fills while the driver loads (a Spark write-up)
    if e.uses_ray:
        head = e.world.ray_head()
        if head is not None and head[0].name in e.members:
            e.members[head[0].name].object_store_gib = head[2].object_store_gib
    fail_p: float | None = None
    fail_kind = ""
    fail_node: SimNode | None = None
    for m in e.members.values():
        # memory a node can give: what is free of others' use now
        mem = m.node.memory(t)
        base = mem.anon  # os, services, leaks, ray daemons
        room = MEM_TOTAL_GIB - RESERVE_GIB - base
        need = m.weights_gib + m.overhead_gib + m.object_store_gib
        if m.weights_gib + 1.0 > m.budget_gib:
            p = max(0.05, (m.budget_gib - 1.0) / m.weights_gib)
            if fail_p is None or p < fail_p:
                fail_p, fail_kind, fail_node = p, "cuda-oom", m.node
        if need > room:
            p = max(0.05, room / need)
            if fail_p is None or p < fail_p:
                fail_p, fail_kind, fail_node = p, "nvrm", m.node
    corrupt = e.world.faults.corrupt_shard
    short = _short_copies(e)
    if corrupt is not None and short:
        # a truncated shard on a node's disk: the load dies there every time, until that
        # node's copy is whole again (safetensors-corrupt-shard)
        p = corrupt[0] / corrupt[1]
        if fail_p is None or p < fail_p:
            fail_p, fail_kind, fail_node = p, "corrupt-shard", e.node
    shards = e.minfo.shards
    stop_at = shards if fail_p is None else max(1, int(fail_p * shards))
    for k in range(1, stop_at + 1):
        tk = t + duration * k / shards
        e.emit(
            e.sink,
            tk,
            logs.render(
                kind,
                "load-progress",
                pct=f"{100 * k // shards:3d}",
                done=k,
                total=shards,
                elapsed=logs.mmss(tk - t),
                eta=logs.mmss(duration - (tk - t)),
                rate=f"{duration / shards:.2f}",
            ),
        )
    if fail_p is not None:
        tf = t + duration * fail_p
        e.fail_load_at = tf
        assert fail_node is not None
        if fail_kind == "nvrm":
            stamp = dt.datetime.fromtimestamp(tf, dt.timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
            for i in range(3):
                fail_node.dmesg.append(
                    (tf + i * 0.01, f"[{stamp}] " + logs.render("nvrm", "out-of-memory")[0])
                )
            # the rank stops answering; the engine goes silent and dies
            e.die(tf + 30, "NVRM: out of memory")
        elif fail_kind == "corrupt-shard":
            e.emit(
                e.sink,
                tf,
                logs.render("vllm", "safetensors-corrupt", ts=logs.vllm_ts(tf), pid=e.pid),
                0.01,
            )
            e.die(tf + 1.0, "SafetensorError")
        else:
            free_mib = max(1.0, (fail_node.cuda_total_gib * 0.015) * 1024)
            e.emit(
                e.sink,
                tf,
                logs.render(
                    "vllm",
                    "cuda-oom",
                    ts=logs.vllm_ts(tf),
                    pid=e.pid,
                    alloc="896.00",
                    total=f"{fail_node.cuda_total_gib:.2f}",
                    free=f"{free_mib:.2f}",
                    used=f"{e.members[fail_node.name].budget_gib:.2f}",
                ),
            )
            e.die(tf + 0.5, "CUDA out of memory")
        return -1
    t = t + duration + 0.5
    if kind == "vllm":
        e.emit(
            e.sink,
            t,
            logs.render(
                "vllm", "load-done", ts=logs.vllm_ts(t), pid=e.pid, gb=f"{weights * GIB / 1e9:.4f}"
            ),
        )
    return t
