"""vLLM's timeline: from the command, the Ray cluster and the nodes' memory, the lines vLLM
prints and when — start-up checks (placement, unique IPs, free memory), the weight load,
KV cache, CUDA graphs, the API server — and the failures of the Spark write-ups on the way."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import TYPE_CHECKING

from spark_tui.sim import logs
from spark_tui.sim.node import GIB, MEM_TOTAL_GIB
from spark_tui.sim.weight_load import plan_load

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.engine import Engine
    from spark_tui.sim.timedlog import TimedLog


def plan_vllm(e: Engine) -> None:
    spec, w = e.spec, e.world
    t = e.start
    v = {"pid": e.pid, "api_pid": e.api_pid}
    t = e.emit(e.sink, t + 1, logs.render("vllm", "init", ts=logs.vllm_ts(t + 1), **v), 0.2)
    backend = str(
        spec.arg("--distributed-executor-backend", default="ray" if spec.tp > 1 else "mp")
    )
    e.uses_ray = backend == "ray"
    head_member = e.member(e.node, 0, e.sink, is_head=True)
    # mp across nodes (--nnodes): the shell's join already made one member per rank
    joined = dict(e.members) if not e.uses_ray and len(e.members) > 1 else {}
    e.members = joined or {e.node.name: head_member}
    for m in joined.values():
        e.emit(
            m.sink,
            t + 1,
            logs.render(
                "vllm",
                "rank-assigned",
                ts=logs.vllm_ts(t + 1),
                pid=e.pid + m.rank,
                rank=m.rank,
                world=len(joined),
            ),
        )
    ray_members = w.ray_members() if e.uses_ray else []
    client_mode = spec.env.get("RAY_ADDRESS", "").startswith("ray://")
    gpus = 1 if client_mode or not ray_members else len(ray_members)
    if e.uses_ray and spec.tp > gpus:
        t += 2
        ip = e.node.mgmt_ip if client_mode else e.node.fabric_ip
        if client_mode or not ray_members:
            e.emit(
                e.sink,
                t,
                logs.render(
                    "vllm", "ray-client-single-gpu", pid=e.pid, tp=spec.tp, gpus=gpus, ip=ip
                ),
            )
        e.waiting_placement = True
        specs = (
            "["
            + ", ".join([f"{{'GPU': 1.0, 'node:{ip}': 0.001}}"] + ["{'GPU': 1.0}"] * (spec.tp - 1))
            + "]"
        )
        wait = 10
        for _ in range(14):  # vLLM keeps waiting, doubling the interval
            e.emit(
                e.sink,
                t + wait,
                logs.render(
                    "vllm",
                    "placement-group-wait",
                    ts=logs.vllm_ts(t + wait),
                    secs=wait,
                    specs=specs,
                ),
            )
            wait *= 2
        return
    # the members: one rank per Ray node (head first), up to TP
    if e.uses_ray and ray_members:
        for rank, (n, c, _d) in enumerate(ray_members[: spec.tp]):
            if n.name not in e.members:
                e.members[n.name] = e.member(n, rank, ray_worker_log(e, c, rank), is_head=False)
    e.placement_at = t + 2
    t += 3
    # vLLM's unique-IP check: driver IP and each worker's IP (VLLM_HOST_IP or the default route)
    if e.uses_ray and len(e.members) > 1:
        driver_ip = spec.env.get("VLLM_HOST_IP") or e.node.mgmt_ip
        ips = {driver_ip}
        for n, _c, d in ray_members[: spec.tp]:
            ips.add(d.env.get("VLLM_HOST_IP") or n.mgmt_ip)
        if len(ips) != len(e.members):
            shown = "{" + ", ".join(repr(i) for i in sorted(ips)) + "}"
            e.emit(
                e.sink,
                t,
                logs.render(
                    "vllm",
                    "unique-ip",
                    ts=logs.vllm_ts(t),
                    n=len(e.members),
                    m=len(ips),
                    ips=shown,
                    **v,
                ),
            )
            e.die(t + 0.5, "unique IP check")
            return
    if "nvfp4" in spec.model.lower() or "fp4" in spec.model.lower():
        e.emit(e.sink, t, logs.render("vllm", "fp4-marlin", ts=logs.vllm_ts(t), **v))
    # free-memory check on every rank, at start
    util = spec.num("--gpu-memory-utilization", default=0.9)
    t += 1
    for m in e.members.values():
        free = m.node.cuda_free_gib(t)
        total = m.node.cuda_total_gib
        if free < util * total:
            e.emit(
                e.sink,
                t,
                logs.render(
                    "vllm",
                    "free-memory-low",
                    ts=logs.vllm_ts(t),
                    free=f"{free:.2f}",
                    total=f"{total:.2f}",
                    util=util,
                    need=f"{util * total:.2f}",
                    **v,
                ),
            )
            e.die(t + 0.5, "free memory check")
            return
    t = plan_load(e, t + 1, "vllm", v)
    if t < 0:
        return
    # each node's first local rank logs its own load: in its own serve log (mp across nodes),
    # or, a Ray worker, in Ray's worker log on its node (without the mp workers' prefix)
    secs = f"{(e.load_end or t) - (e.load_start or t):.2f}"
    for m in joined.values():
        e.emit(
            m.sink,
            t,
            logs.render(
                "vllm",
                "weights-loaded",
                ts=logs.vllm_ts(t),
                pid=e.pid + m.rank,
                rank=m.rank,
                secs=secs,
            ),
        )
    for m in e.members.values() if e.uses_ray else ():
        if m.node is not e.node:
            e.emit(
                m.sink, t, logs.render("vllm", "weights-loaded-ray", ts=logs.vllm_ts(t), secs=secs)
            )
    # KV cache, graphs, API server
    kv = max(0.5, util * head_member.node.cuda_total_gib - head_member.weights_gib - 1.5)
    max_len = int(spec.num("--max-model-len", default=131072))
    tokens = int(kv * GIB / (2 * 61 * 8 * 128))
    t += 4
    e.emit(
        e.sink,
        t,
        logs.render(
            "vllm",
            "kv-cache",
            ts=logs.vllm_ts(t),
            kv_gib=f"{kv:.2f}",
            kv_tokens=f"{tokens:,}",
            max_len=f"{max_len:,}",
            conc=f"{tokens / max_len:.2f}",
            **v,
        ),
    )
    if spec.cuda_graphs:
        t += 2
        e.capture_start = t
        e.emit(e.sink, t, logs.render("vllm", "capture-begin", ts=logs.vllm_ts(t)))
        shapes = 35
        for i in range(1, shapes + 1):
            e.emit(
                e.sink,
                t + i * 0.4,
                logs.render(
                    "vllm",
                    "capture-progress",
                    pct=f"{100 * i // shapes:3d}",
                    bar="█" * (10 * i // shapes) + " " * (10 - 10 * i // shapes),
                    done=i,
                    total=shapes,
                    elapsed=logs.mmss(i * 0.4),
                    eta=logs.mmss((shapes - i) * 0.4),
                    rate="0.40",
                ),
            )
        t += shapes * 0.4 + 0.5
        e.emit(
            e.sink, t, logs.render("vllm", "capture-end", ts=logs.vllm_ts(t), secs=14, gib="0.52")
        )
        # graphs replayed over NCCL across nodes wedge the compiled DAG after 2-8 requests:
        # a Spark write-up (expert parallel over Ray, and PP=2); a Spark write-up's TP=2 with graphs served
        ep_or_pp = (
            "--enable-expert-parallel" in spec.args
            or spec.num("--pipeline-parallel-size", "-pp", default=1) > 1
        )
        if e.uses_ray and len(e.members) > 1 and ep_or_pp:
            e.fail_on_request = e.rng.randint(2, 8)
    else:
        t += 1
        e.emit(e.sink, t, logs.render("vllm", "eager", ts=logs.vllm_ts(t), **v))
    t += 3
    host = str(spec.arg("--host", default="0.0.0.0"))
    e.emit(
        e.sink,
        t,
        logs.render(
            "vllm",
            "engine-ready",
            ts=logs.vllm_ts(t),
            secs=f"{t - e.start:.2f}",
            host=host,
            port=spec.port,
            **v,
        ),
        0.05,
    )
    e.serving_from = t + 0.5
    # Ray's memory monitor on the head: unified memory sits at ~96 % after warm-up (a Spark write-up)
    head_ray = next((d for n, _c, d in ray_members if n is e.node), None)
    if e.uses_ray and head_ray is not None:
        threshold = head_ray.monitor_threshold
        frac = e.steady_fraction(e.node)
        if threshold is not None and frac > threshold:
            kill = e.serving_from + 15
            total = MEM_TOTAL_GIB * GIB / 1e9
            e.emit(
                e.sink,
                kill,
                logs.render(
                    "vllm",
                    "memory-monitor-kill",
                    ray_ts=dt.datetime.fromtimestamp(kill, dt.timezone.utc).strftime(
                        "%Y-%m-%d %H:%M:%S,%f"
                    )[:-3],
                    raylet_pid=e.pid - 900,
                    node_id=head_ray.node_id,
                    ip=head_ray.node_ip,
                    actor_id=hashlib.md5(str(kill).encode()).hexdigest()[:32],
                    pid=e.pid + 11,
                    proc_gb=f"{head_member.budget_gib * GIB / 1e9:.2f}",
                    used_gb=f"{frac * total:.2f}",
                    total_gb=f"{total:.2f}",
                    frac=f"{frac:.6f}",
                    threshold=threshold,
                    worker_id=hashlib.sha1(str(kill).encode()).hexdigest()[:56],
                )
                + logs.render("vllm", "worker-exit-oom"),
            )
            e.die(kill + 1, "Ray memory monitor")


def ray_worker_log(e: Engine, container: SimContainer, rank: int) -> TimedLog:
    """The log file Ray keeps for a worker's stdout on its own node:
    /tmp/ray/session_latest/logs/worker-<worker id>-<job id>-<pid>.out (a new file per worker
    process: Ray's logging directory)."""
    from spark_tui.sim.timedlog import TimedLog

    pid = e.pid + 300 + rank
    worker_id = hashlib.sha1(f"{e.start}:{rank}".encode()).hexdigest() * 2
    path = f"/tmp/ray/session_latest/logs/worker-{worker_id[:56]}-01000000-{pid}.out"
    log = TimedLog()
    container.files[path] = log
    return log
