"""SGLang's timeline: every rank's distributed init, the memory balance check, the weight
load, CUDA graph capture (which hangs across nodes), the server fired up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.sim import logs
from spark_tui.sim.node import GIB, OS_GIB
from spark_tui.sim.weight_load import plan_load

if TYPE_CHECKING:
    from spark_tui.sim.engine import Engine


def plan_sglang(e: Engine) -> None:
    spec = e.spec
    t = e.start
    for m in e.members.values():
        e.emit(
            m.sink,
            t + 2,
            logs.render("sglang", "dist-init", ts=logs.sglang_ts(t + 2), rank=m.rank, gb="1.77"),
        )
    t += 3
    frees = {name: m.node.cuda_free_gib(t) for name, m in e.members.items()}
    lowest = min(frees.values())
    for m in sorted(e.members.values(), key=lambda m: m.rank):
        local = frees[m.node.name]
        if lowest < local * 0.9:
            e.emit(
                m.sink,
                t,
                logs.render(
                    "sglang",
                    "unbalanced",
                    pre=f"{lowest:.2f}",
                    local=f"{local:.2f}",
                    local09=f"{local * 0.9:.2f}",
                ),
            )
            e.die(t + 0.5, "memory capacity unbalanced")
            return
    for m in e.members.values():
        e.emit(
            m.sink,
            t,
            logs.render(
                "sglang",
                "load-begin",
                ts=logs.sglang_ts(t),
                rank=m.rank,
                gb=f"{frees[m.node.name]:.2f}",
            ),
        )
    t = plan_load(e, t + 0.5, "sglang", {})
    if t < 0:
        return
    frac = spec.num("--mem-fraction-static", default=0.88)
    for m in e.members.values():
        avail = max(1.0, m.node.cuda_total_gib - OS_GIB - m.weights_gib)
        kv = max(0.5, frac * m.node.cuda_total_gib - m.weights_gib)
        e.emit(
            m.sink,
            t,
            logs.render(
                "sglang",
                "load-end",
                ts=logs.sglang_ts(t),
                rank=m.rank,
                secs=f"{(e.load_end or t) - (e.load_start or t):.2f}",
                arch=e.minfo.arch,
                avail=f"{avail:.2f}",
                usage=f"{m.weights_gib:.2f}",
                tokens=int(kv * GIB / 70000),
                k=f"{kv / 2:.2f}",
                pool_avail=f"{max(0.5, avail - kv):.2f}",
            ),
            0.2,
        )
    t += 1
    if spec.cuda_graphs:
        e.capture_start = t
        for m in e.members.values():
            e.emit(
                m.sink,
                t,
                logs.render(
                    "sglang", "capture-begin", ts=logs.sglang_ts(t), rank=m.rank, gb="4.02"
                ),
            )
        if len(e.members) > 1:
            # NCCL inside the graph across nodes: every rank spins, nothing more is printed
            e.capture_hang = True
            return
        t += 20
    e.fail_first_request = "deepseek-v4" in spec.model.lower()
    t += 1
    host = str(spec.arg("--host", default="127.0.0.1"))
    # a node of rank >= 1: its schedulers are ready, it starts the dummy health server
    for m in e.members.values():
        if m.node is not e.node:
            e.emit(
                m.sink,
                t - 0.5,
                logs.render(
                    "sglang",
                    "follower-ready",
                    ts=logs.sglang_ts(t - 0.5),
                    host=host,
                    port=spec.port,
                ),
            )
    e.emit(
        e.sink,
        t,
        logs.render(
            "sglang",
            "ready",
            ts=logs.sglang_ts(t),
            tokens=580364,
            running=int(spec.num("--max-running-requests", default=64)),
            ctx=int(spec.num("--context-length", default=131072)),
            gb="3.63",
            pid=e.api_pid,
            host=host,
            port=spec.port,
        ),
        0.05,
    )
    e.serving_from = t + 0.3
