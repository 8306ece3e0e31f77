"""A serving engine (vLLM or SGLang) whose fate follows its launch command and the nodes.

At start the engine lays out its timeline from the command line, its environment,
the Ray cluster and each node's memory: log lines scheduled at simulated times,
the phase at each moment, the memory it holds on every node. Requests (over real
HTTP, see spark_tui.sim.http) and kills change what follows. Every line it prints
is real engine output from spark_tui/sim/logtext/.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.sim import logs, models
from spark_tui.sim.client_load import ClientLoad
from spark_tui.sim.node import GIB, MEM_TOTAL_GIB, OS_GIB, RESERVE_GIB

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.timedlog import TimedLog
    from spark_tui.sim.world import SimWorld

# CPU-side memory of a running engine (API server, driver, Ray workers, pinned buffers):
# GB10-FACTS.md: ~9 GiB system-used during a run; the head carries the API server too.
CPU_OVERHEAD_HEAD_GIB = 9.0
CPU_OVERHEAD_WORKER_GIB = 7.0
LEAK_GIB = 33.0  # "each failed container run … leaked ~33 GB" (seed 000)


@dataclass
class ServeSpec:
    """A parsed `vllm serve …` / `python -m sglang.launch_server …` command."""

    kind: str  # vllm | sglang
    model: str
    args: dict[str, object]
    env: dict[str, str]

    def arg(self, *names: str, default: object = None) -> object:
        for n in names:
            if n in self.args:
                return self.args[n]
        return default

    def num(self, *names: str, default: float) -> float:
        v = self.arg(*names)
        try:
            return float(str(v)) if v is not None and v is not True else default
        except ValueError:
            return default

    @property
    def tp(self) -> int:
        return int(self.num("--tensor-parallel-size", "-tp", "--tp", "--tp-size", default=1))

    @property
    def port(self) -> int:
        return int(self.num("--port", default=8000 if self.kind == "vllm" else 30000))

    @property
    def cuda_graphs(self) -> bool:
        if self.kind == "sglang":
            return "--disable-cuda-graph" not in self.args
        if "--enforce-eager" in self.args:
            return False
        text = " ".join(f"{k} {v}" for k, v in self.args.items()).lower().replace('"', "")
        compact = text.replace(" ", "")
        return not any(
            w in compact
            for w in ("cudagraph_mode:none", "cudagraph_mode=none", "cudagraph_mode':'none")
        )


def parse_serve(argv: list[str], env: dict[str, str]) -> ServeSpec | None:
    """The engine command in argv, or None when argv is not one."""
    if not argv:
        return None
    kind = None
    rest: list[str] = []
    if argv[0] == "vllm" and len(argv) > 1 and argv[1] == "serve":
        kind, rest = "vllm", argv[2:]
    elif argv[0].startswith("python") and len(argv) > 2 and argv[1] == "-m":
        mod = argv[2]
        if mod == "sglang.launch_server":
            kind, rest = "sglang", argv[3:]
        elif mod == "vllm.entrypoints.openai.api_server":
            kind, rest = "vllm", argv[3:]
    if kind is None:
        return None
    args: dict[str, object] = {}
    model = ""
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("-") and len(a) > 1:
            if "=" in a and a.startswith("--"):
                k, v = a.split("=", 1)
                args[k] = v
            elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
                args[a] = rest[i + 1]
                i += 1
            else:
                args[a] = True
        elif not model:
            model = a
        i += 1
    model = str(args.get("--model") or args.get("--model-path") or model)
    return ServeSpec(kind, model, args, dict(env))


def _ts(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%m-%d %H:%M:%S")


def _ts_sglang(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _mmss(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 60:02d}:{s % 60:02d}"


@dataclass
class Member:
    """The engine's share of one node."""

    node: SimNode
    rank: int
    sink: TimedLog | None
    weights_gib: float
    budget_gib: float  # what the engine may hold on the device (utilisation x CUDA total)
    overhead_gib: float
    object_store_gib: float = 0.0  # filled during the load on the Ray head when unbounded


@dataclass
class Engine:
    world: SimWorld
    spec: ServeSpec
    node: SimNode  # where the driver / rank 0 runs
    container: SimContainer
    start: float
    sink: TimedLog | None
    rank_containers: list[SimContainer] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)
    pid: int = 0
    api_pid: int = 0
    # timeline
    load_start: float | None = None
    load_end: float | None = None
    fail_load_at: float | None = None  # dies partway through the load (p reached)
    capture_start: float | None = None
    capture_hang: bool = False
    serving_from: float | None = None
    dead_at: float | None = None
    dead_reason: str = ""
    placement_at: float | None = None
    waiting_placement: bool = False
    # serving
    requests_total: int = 0
    requests_running: int = 0
    tokens_total: float = 0.0
    fail_on_request: int | None = None  # the n-th request wedges (RayChannelTimeoutError)
    fail_first_request: bool = False  # FlashMLA on sm_121
    wedged_since: float | None = None  # a request hangs in the compiled DAG from here
    local_port: int | None = None
    cache_base: dict[str, float] = field(default_factory=dict)
    tok_s: float = 20.0
    uses_ray: bool = False
    load: ClientLoad | None = None  # a client's steady requests (serving-stall)

    # ---------------------------------------------------------------- set-up --

    def __post_init__(self) -> None:
        self.pid = self.node.new_pid()
        self.api_pid = self.pid - 200
        mi = models.info(self.spec.model)
        self.tok_s = mi.tok_s
        self.minfo = mi
        digest = hashlib.sha256(
            f"{self.world.seed}:{self.start}:{self.spec.model}".encode()
        ).digest()
        self.rng = random.Random(digest)

    @property
    def tp(self) -> int:
        return self.spec.tp

    def _emit(self, sink: TimedLog | None, t: float, lines: list[str], step: float = 0.0) -> float:
        if sink is None:
            return t + max(0, len(lines) - 1) * step
        return sink.add_many(t, lines, step)

    def plan(self) -> None:
        """Lay out what happens, from the command, the cluster and the nodes' memory."""
        if self.spec.kind == "vllm":
            self._plan_vllm()
        else:
            self._plan_sglang()
        self._plan_client_load()

    def _plan_client_load(self) -> None:
        """Under the serving-stall fault a client keeps requests running once the engine
        serves (and the engine wedges, unless its process has one NCCL build)."""
        faults = self.world.faults
        if not faults.wedge_after_s or self.serving_from is None or self.dead_at is not None:
            return
        wedge_at = faults.wedge_at(self.serving_from, self.spec.env)
        self.load = ClientLoad(self.serving_from, wedge_at, self.tok_s)
        if self.sink is not None:
            self.load.write_log(self.sink, self.pid, self.api_pid)

    # -- vLLM ----------------------------------------------------------------------------

    def _plan_vllm(self) -> None:
        spec, w = self.spec, self.world
        t = self.start
        v = {"pid": self.pid, "api_pid": self.api_pid}
        t = self._emit(self.sink, t + 1, logs.render("vllm", "init", ts=_ts(t + 1), **v), 0.2)
        backend = str(
            spec.arg("--distributed-executor-backend", default="ray" if spec.tp > 1 else "mp")
        )
        self.uses_ray = backend == "ray"
        head_member = self._member(self.node, 0, self.sink, is_head=True)
        # mp across nodes (--nnodes): the shell's join already made one member per rank
        joined = dict(self.members) if not self.uses_ray and len(self.members) > 1 else {}
        self.members = joined or {self.node.name: head_member}
        for m in joined.values():
            self._emit(
                m.sink,
                t + 1,
                logs.render(
                    "vllm",
                    "rank-assigned",
                    ts=_ts(t + 1),
                    pid=self.pid + m.rank,
                    rank=m.rank,
                    world=len(joined),
                ),
            )
        ray_members = w.ray_members() if self.uses_ray else []
        client_mode = spec.env.get("RAY_ADDRESS", "").startswith("ray://")
        gpus = 1 if client_mode or not ray_members else len(ray_members)
        if self.uses_ray and spec.tp > gpus:
            t += 2
            ip = self.node.mgmt_ip if client_mode else self.node.fabric_ip
            if client_mode or not ray_members:
                self._emit(
                    self.sink,
                    t,
                    logs.render(
                        "vllm", "ray-client-single-gpu", pid=self.pid, tp=spec.tp, gpus=gpus, ip=ip
                    ),
                )
            self.waiting_placement = True
            specs = (
                "["
                + ", ".join(
                    [f"{{'GPU': 1.0, 'node:{ip}': 0.001}}"] + ["{'GPU': 1.0}"] * (spec.tp - 1)
                )
                + "]"
            )
            wait = 10
            for _ in range(14):  # vLLM keeps waiting, doubling the interval
                self._emit(
                    self.sink,
                    t + wait,
                    logs.render(
                        "vllm", "placement-group-wait", ts=_ts(t + wait), secs=wait, specs=specs
                    ),
                )
                wait *= 2
            return
        # the members: one rank per Ray node (head first), up to TP
        if self.uses_ray and ray_members:
            for rank, (n, _c, _d) in enumerate(ray_members[: spec.tp]):
                if n.name not in self.members:
                    self.members[n.name] = self._member(n, rank, None, is_head=False)
        self.placement_at = t + 2
        t += 3
        # vLLM's unique-IP check: driver IP and each worker's IP (VLLM_HOST_IP or the default route)
        if self.uses_ray and len(self.members) > 1:
            driver_ip = spec.env.get("VLLM_HOST_IP") or self.node.mgmt_ip
            ips = {driver_ip}
            for n, _c, d in ray_members[: spec.tp]:
                ips.add(d.env.get("VLLM_HOST_IP") or n.mgmt_ip)
            if len(ips) != len(self.members):
                shown = "{" + ", ".join(repr(i) for i in sorted(ips)) + "}"
                self._emit(
                    self.sink,
                    t,
                    logs.render(
                        "vllm",
                        "unique-ip",
                        ts=_ts(t),
                        n=len(self.members),
                        m=len(ips),
                        ips=shown,
                        **v,
                    ),
                )
                self._die(t + 0.5, "unique IP check")
                return
        if "nvfp4" in spec.model.lower() or "fp4" in spec.model.lower():
            self._emit(self.sink, t, logs.render("vllm", "fp4-marlin", ts=_ts(t), **v))
        # free-memory check on every rank, at start
        util = spec.num("--gpu-memory-utilization", default=0.9)
        t += 1
        for m in self.members.values():
            free = m.node.cuda_free_gib(t)
            total = m.node.cuda_total_gib
            if free < util * total:
                self._emit(
                    self.sink,
                    t,
                    logs.render(
                        "vllm",
                        "free-memory-low",
                        ts=_ts(t),
                        free=f"{free:.2f}",
                        total=f"{total:.2f}",
                        util=util,
                        need=f"{util * total:.2f}",
                        **v,
                    ),
                )
                self._die(t + 0.5, "free memory check")
                return
        t = self._plan_load(t + 1, "vllm", v)
        if t < 0:
            return
        # KV cache, graphs, API server
        kv = max(0.5, util * head_member.node.cuda_total_gib - head_member.weights_gib - 1.5)
        max_len = int(spec.num("--max-model-len", default=131072))
        tokens = int(kv * GIB / (2 * 61 * 8 * 128))
        t += 4
        self._emit(
            self.sink,
            t,
            logs.render(
                "vllm",
                "kv-cache",
                ts=_ts(t),
                kv_gib=f"{kv:.2f}",
                kv_tokens=f"{tokens:,}",
                max_len=f"{max_len:,}",
                conc=f"{tokens / max_len:.2f}",
                **v,
            ),
        )
        if spec.cuda_graphs:
            t += 2
            self.capture_start = t
            self._emit(self.sink, t, logs.render("vllm", "capture-begin", ts=_ts(t)))
            shapes = 35
            for i in range(1, shapes + 1):
                self._emit(
                    self.sink,
                    t + i * 0.4,
                    logs.render(
                        "vllm",
                        "capture-progress",
                        pct=f"{100 * i // shapes:3d}",
                        bar="█" * (10 * i // shapes) + " " * (10 - 10 * i // shapes),
                        done=i,
                        total=shapes,
                        elapsed=_mmss(i * 0.4),
                        eta=_mmss((shapes - i) * 0.4),
                        rate="0.40",
                    ),
                )
            t += shapes * 0.4 + 0.5
            self._emit(
                self.sink, t, logs.render("vllm", "capture-end", ts=_ts(t), secs=14, gib="0.52")
            )
            # graphs replayed over NCCL across nodes wedge the compiled DAG after 2-8 requests:
            # seed 003 (expert parallel over Ray, and PP=2); seed 001's TP=2 with graphs served
            ep_or_pp = (
                "--enable-expert-parallel" in spec.args
                or spec.num("--pipeline-parallel-size", "-pp", default=1) > 1
            )
            if self.uses_ray and len(self.members) > 1 and ep_or_pp:
                self.fail_on_request = self.rng.randint(2, 8)
        else:
            t += 1
            self._emit(self.sink, t, logs.render("vllm", "eager", ts=_ts(t), **v))
        t += 3
        host = str(spec.arg("--host", default="0.0.0.0"))
        self._emit(
            self.sink,
            t,
            logs.render(
                "vllm",
                "engine-ready",
                ts=_ts(t),
                secs=f"{t - self.start:.2f}",
                host=host,
                port=spec.port,
                **v,
            ),
            0.05,
        )
        self.serving_from = t + 0.5
        # Ray's memory monitor on the head: unified memory sits at ~96 % after warm-up (seed 002)
        head_ray = next((d for n, _c, d in ray_members if n is self.node), None)
        if self.uses_ray and head_ray is not None:
            threshold = head_ray.monitor_threshold
            frac = self._steady_fraction(self.node)
            if threshold is not None and frac > threshold:
                kill = self.serving_from + 15
                total = MEM_TOTAL_GIB * GIB / 1e9
                self._emit(
                    self.sink,
                    kill,
                    logs.render(
                        "vllm",
                        "memory-monitor-kill",
                        ray_ts=dt.datetime.fromtimestamp(kill, dt.timezone.utc).strftime(
                            "%Y-%m-%d %H:%M:%S,%f"
                        )[:-3],
                        raylet_pid=self.pid - 900,
                        node_id=head_ray.node_id,
                        ip=head_ray.node_ip,
                        actor_id=hashlib.md5(str(kill).encode()).hexdigest()[:32],
                        pid=self.pid + 11,
                        proc_gb=f"{head_member.budget_gib * GIB / 1e9:.2f}",
                        used_gb=f"{frac * total:.2f}",
                        total_gb=f"{total:.2f}",
                        frac=f"{frac:.6f}",
                        threshold=threshold,
                        worker_id=hashlib.sha1(str(kill).encode()).hexdigest()[:56],
                    )
                    + logs.render("vllm", "worker-exit-oom"),
                )
                self._die(kill + 1, "Ray memory monitor")

    # -- SGLang --------------------------------------------------------------------------

    def _plan_sglang(self) -> None:
        spec = self.spec
        t = self.start
        for m in self.members.values():
            self._emit(
                m.sink,
                t + 2,
                logs.render("sglang", "dist-init", ts=_ts_sglang(t + 2), rank=m.rank, gb="1.77"),
            )
        t += 3
        frees = {name: m.node.cuda_free_gib(t) for name, m in self.members.items()}
        lowest = min(frees.values())
        for m in sorted(self.members.values(), key=lambda m: m.rank):
            local = frees[m.node.name]
            if lowest < local * 0.9:
                self._emit(
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
                self._die(t + 0.5, "memory capacity unbalanced")
                return
        for m in self.members.values():
            self._emit(
                m.sink,
                t,
                logs.render(
                    "sglang",
                    "load-begin",
                    ts=_ts_sglang(t),
                    rank=m.rank,
                    gb=f"{frees[m.node.name]:.2f}",
                ),
            )
        t = self._plan_load(t + 0.5, "sglang", {})
        if t < 0:
            return
        frac = spec.num("--mem-fraction-static", default=0.88)
        for m in self.members.values():
            avail = max(1.0, m.node.cuda_total_gib - OS_GIB - m.weights_gib)
            kv = max(0.5, frac * m.node.cuda_total_gib - m.weights_gib)
            self._emit(
                m.sink,
                t,
                logs.render(
                    "sglang",
                    "load-end",
                    ts=_ts_sglang(t),
                    rank=m.rank,
                    secs=f"{(self.load_end or t) - (self.load_start or t):.2f}",
                    arch=self.minfo.arch,
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
            self.capture_start = t
            for m in self.members.values():
                self._emit(
                    m.sink,
                    t,
                    logs.render(
                        "sglang", "capture-begin", ts=_ts_sglang(t), rank=m.rank, gb="4.02"
                    ),
                )
            if len(self.members) > 1:
                # NCCL inside the graph across nodes: every rank spins, nothing more is printed (seed 000)
                self.capture_hang = True
                return
            t += 20
        self.fail_first_request = "deepseek-v4" in spec.model.lower()
        t += 1
        host = str(spec.arg("--host", default="127.0.0.1"))
        self._emit(
            self.sink,
            t,
            logs.render(
                "sglang",
                "ready",
                ts=_ts_sglang(t),
                tokens=580364,
                running=int(spec.num("--max-running-requests", default=64)),
                ctx=int(spec.num("--context-length", default=131072)),
                gb="3.63",
                pid=self.api_pid,
                host=host,
                port=spec.port,
            ),
            0.05,
        )
        self.serving_from = t + 0.3

    # -- shared: weights ------------------------------------------------------------------

    def _member(self, node: SimNode, rank: int, sink: TimedLog | None, is_head: bool) -> Member:
        total_gib = self.minfo.total_gb * 1e9 / GIB
        ranks = (
            max(1, self.spec.tp)
            if self.spec.kind == "vllm"
            else max(1, int(self.spec.num("--nnodes", default=1)))
        )
        if self.spec.kind == "sglang":
            ranks = max(ranks, self.spec.tp)
        weights = total_gib / ranks
        frac = (
            self.spec.num("--gpu-memory-utilization", default=0.9)
            if self.spec.kind == "vllm"
            else self.spec.num("--mem-fraction-static", default=0.88)
        )
        return Member(
            node=node,
            rank=rank,
            sink=sink,
            weights_gib=weights,
            budget_gib=frac * node.cuda_total_gib,
            overhead_gib=CPU_OVERHEAD_HEAD_GIB if is_head else CPU_OVERHEAD_WORKER_GIB,
        )

    def _plan_load(self, t: float, kind: str, v: dict[str, object]) -> float:
        """Schedule the weight load; returns the time it ends, or -1 when the engine dies in it."""
        weights = max(m.weights_gib for m in self.members.values())
        duration = weights * GIB / 1e9 / models.LOAD_GB_PER_S
        self.load_start, self.load_end = t, t + duration
        # the Ray object store of the head fills while the driver loads (seed 002)
        if self.uses_ray:
            head = self.world.ray_head()
            if head is not None and head[0].name in self.members:
                self.members[head[0].name].object_store_gib = head[2].object_store_gib
        fail_p: float | None = None
        fail_kind = ""
        fail_node: SimNode | None = None
        for m in self.members.values():
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
        corrupt = self.world.faults.corrupt_shard
        if corrupt is not None:
            # a truncated shard: the load dies there every time (safetensors-corrupt-shard)
            p = corrupt[0] / corrupt[1]
            if fail_p is None or p < fail_p:
                fail_p, fail_kind, fail_node = p, "corrupt-shard", self.node
        shards = self.minfo.shards
        stop_at = shards if fail_p is None else max(1, int(fail_p * shards))
        for k in range(1, stop_at + 1):
            tk = t + duration * k / shards
            self._emit(
                self.sink,
                tk,
                logs.render(
                    kind,
                    "load-progress",
                    pct=f"{100 * k // shards:3d}",
                    done=k,
                    total=shards,
                    elapsed=_mmss(tk - t),
                    eta=_mmss(duration - (tk - t)),
                    rate=f"{duration / shards:.2f}",
                ),
            )
        if fail_p is not None:
            tf = t + duration * fail_p
            self.fail_load_at = tf
            assert fail_node is not None
            if fail_kind == "nvrm":
                stamp = dt.datetime.fromtimestamp(tf, dt.timezone.utc).strftime(
                    "%a %b %d %H:%M:%S %Y"
                )
                for i in range(3):
                    fail_node.dmesg.append(
                        (tf + i * 0.01, f"[{stamp}] " + logs.render("nvrm", "out-of-memory")[0])
                    )
                # the rank stops answering; the engine goes silent and dies
                self._die(tf + 30, "NVRM: out of memory")
            elif fail_kind == "corrupt-shard":
                self._emit(
                    self.sink,
                    tf,
                    logs.render("vllm", "safetensors-corrupt", ts=_ts(tf), pid=self.pid),
                    0.01,
                )
                self._die(tf + 1.0, "SafetensorError")
            else:
                free_mib = max(1.0, (fail_node.cuda_total_gib * 0.015) * 1024)
                self._emit(
                    self.sink,
                    tf,
                    logs.render(
                        "vllm",
                        "cuda-oom",
                        ts=_ts(tf),
                        pid=self.pid,
                        alloc="896.00",
                        total=f"{fail_node.cuda_total_gib:.2f}",
                        free=f"{free_mib:.2f}",
                        used=f"{self.members[fail_node.name].budget_gib:.2f}",
                    ),
                )
                self._die(tf + 0.5, "CUDA out of memory")
            return -1
        t = t + duration + 0.5
        if kind == "vllm":
            self._emit(
                self.sink,
                t,
                logs.render(
                    "vllm", "load-done", ts=_ts(t), pid=self.pid, gb=f"{weights * GIB / 1e9:.4f}"
                ),
            )
        return t

    def _steady_fraction(self, node: SimNode) -> float:
        m = self.members[node.name]
        held = OS_GIB + node.services_gib + node.leaked_gib + 0.6 + m.budget_gib + m.overhead_gib
        return min(0.999, held / MEM_TOTAL_GIB)

    # ---------------------------------------------------------------- state --

    def _die(self, t: float, reason: str) -> None:
        if self.dead_at is None or t < self.dead_at:
            self.dead_at = t
            self.dead_reason = reason

    def alive(self, now: float) -> bool:
        return self.dead_at is None or now < self.dead_at

    def kill(self, t: float, hard: bool, reason: str) -> None:
        """Stopped from outside (docker stop/kill, ray stop, reboot)."""
        if not self.alive(t):
            return
        for sink in {
            id(m.sink): m.sink for m in self.members.values() if m.sink is not None
        }.values():
            sink.cut_after(t)
        if self.sink is not None:
            self.sink.cut_after(t)
        for nd in list(self.members.values()):
            n = nd.node
            if n.dmesg:
                n.dmesg = [(ts, line) for ts, line in n.dmesg if ts <= t]
        if hard:
            for m in self.members.values():
                held = self._process_gib(m, t)
                if held > 4.0:
                    m.node.leaked_gib += min(LEAK_GIB, held * 0.5)
        self.dead_at = t
        self.dead_reason = reason
        self.fail_load_at = (
            self.fail_load_at if self.fail_load_at and self.fail_load_at <= t else None
        )

    def placement_done(self, now: float) -> bool:
        return self.placement_at is not None and now >= self.placement_at and self.alive(now)

    def load_fraction(self, now: float) -> float:
        if self.load_start is None or self.load_end is None or now < self.load_start:
            return 0.0
        end = self.load_end
        if self.fail_load_at is not None:
            end = self.load_start + (
                self.load_end - self.load_start
            )  # progress stops at the failure
            now = min(now, self.fail_load_at)
        if self.dead_at is not None:
            now = min(now, self.dead_at)
        return min(1.0, (now - self.load_start) / max(1e-6, end - self.load_start))

    def phase(self, now: float) -> str:
        if now < self.start:
            return "stopped"
        if not self.alive(now):
            return "crashed"
        if self.serving_from is not None and now >= self.serving_from:
            return "serving"  # also when wedged: /health still answers (serving-stall)
        if self.capture_start is not None and now >= self.capture_start:
            return "capturing"
        if self.load_start is not None and now >= self.load_start:
            return "loading"
        return "starting"

    def _process_gib(self, m: Member, now: float) -> float:
        if now < self.start or (self.dead_at is not None and now >= self.dead_at):
            return 0.0
        p = self.load_fraction(now)
        held = 1.0 + m.weights_gib * p + m.overhead_gib * max(p, 0.2)
        loaded = self.load_end is not None and now >= self.load_end and self.fail_load_at is None
        if loaded:
            held = max(held, m.budget_gib + m.overhead_gib)
        return held

    def usage_on(self, node: str, now: float) -> tuple[float, float, float]:
        """(process GiB, shared-memory GiB, page cache GiB) this engine accounts for on a node."""
        m = self.members.get(node)
        if m is None:
            return 0.0, 0.0, 0.0
        proc = self._process_gib(m, now)
        p = self.load_fraction(now)
        shm = 0.0
        loading = self.alive(now) and self.load_end is not None and now < self.load_end
        if loading and m.object_store_gib:
            shm = m.object_store_gib * p
        cache = m.weights_gib * p - self.cache_base.get(node, 0.0)
        return proc, shm, max(0.0, cache)

    def drop_cache(self, node: str, now: float) -> None:
        m = self.members.get(node)
        if m is not None:
            self.cache_base[node] = m.weights_gib * self.load_fraction(now)

    def sm_pct(self, node: str, now: float) -> float:
        if node not in self.members or not self.alive(now) or now < self.start:
            return 0.0
        ph = self.phase(now)
        jitter = self.rng.random() * 2
        if self.is_wedged(now):
            return 95.0 + jitter
        if ph == "capturing":
            return 95.0 + jitter if self.capture_hang else 80.0 + jitter
        if ph == "loading":
            return 34.0 + jitter * 2
        if ph == "serving":
            return 92.0 + jitter if self.running_at(now) > 0 else 0.0
        return 2.0

    def power_w(self, node: str, now: float) -> float:
        if node not in self.members or not self.alive(now) or now < self.start:
            return 11.2
        ph = self.phase(now)
        if self.is_wedged(now):
            return 22.0 + self.rng.random() * 3  # wedged: SM busy, power low (serving-stall)
        if ph == "capturing" and self.capture_hang:
            return 24.0 + self.rng.random() * 3
        if ph == "serving":
            return 45.0 + self.rng.random() * 2 if self.running_at(now) > 0 else 16.5
        if ph == "loading":
            return 31.0 + self.rng.random() * 2
        return 14.0

    def log_line_request(self, t: float, method: str, path: str, status: str) -> None:
        if self.sink is None:
            return
        kind = self.spec.kind
        v = {
            "ts": _ts_sglang(t),
            "api_pid": self.api_pid,
            "client": "127.0.0.1:40418",
            "method": method,
            "path": path,
            "status": status,
        }
        self.sink.add(t, logs.render(kind, "request", **v)[0])

    # ---------------------------------------------------------------- serving --

    def begin_request(self, now: float) -> str | None:
        """A chat request arrives; returns None to serve it, or why it fails."""
        if not self.alive(now) or self.serving_from is None or now < self.serving_from:
            return "not ready"
        if self.is_wedged(now):
            return "wedged"
        self.requests_total += 1
        if self.fail_first_request and self.spec.kind == "sglang":
            self._emit(self.sink, now, logs.render("sglang", "flashmla-sparse-decode"))
            self._die(now + 0.5, "FlashMLA unsupported architecture")
            return "flashmla"
        if self.fail_on_request is not None and self.requests_total >= self.fail_on_request:
            self.wedged_since = now
            t = now + 10.0
            self._emit(
                self.sink,
                t,
                logs.render(
                    "vllm",
                    "ray-channel-timeout",
                    ts=_ts(t),
                    pid=self.pid,
                    object_id=hashlib.sha1(str(now).encode()).hexdigest()[:40] + "0100000004e1f505",
                ),
            )
            self._die(t + 1, "RayChannelTimeoutError")
            return "wedged"
        self.requests_running += 1
        return None

    def end_request(self) -> None:
        self.requests_running = max(0, self.requests_running - 1)

    def add_tokens(self, n: float) -> None:
        self.tokens_total += n

    # what a client sees: the requests over HTTP plus a client's steady load

    def running_at(self, now: float) -> int:
        """Requests running at `now` (vllm:num_requests_running)."""
        steady = self.load.running(now) if self.load is not None and self.alive(now) else 0
        return self.requests_running + steady

    def tokens_at(self, now: float) -> float:
        """Tokens generated by `now` (vllm:generation_tokens_total)."""
        steady = self.load.tokens(now) if self.load is not None and self.alive(now) else 0.0
        return self.tokens_total + steady

    def is_wedged(self, now: float) -> bool:
        """A request hangs in the engine at `now`: nothing more comes out."""
        if self.wedged_since is not None:
            return now >= self.wedged_since
        return self.load is not None and self.load.wedged(now)
