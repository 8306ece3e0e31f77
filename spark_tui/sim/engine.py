"""A serving engine (vLLM or SGLang) whose fate follows its launch command and the nodes.

At start the engine lays out its timeline (vllm_timeline.py, sglang_timeline.py, the
shared weight load in weight_load.py) from the command line, its environment, the Ray
cluster, each node's memory and the scenario's faults: log lines scheduled at simulated
times, the phase at each moment, the memory it holds on every node. Requests (over real
HTTP, see spark_tui.sim.openai_server), a client's steady load (client_load.py) and kills
change what follows. Every line it prints is real engine output from
spark_tui/sim/logtext/.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.sim import logs, models
from spark_tui.sim.client_load import ClientLoad
from spark_tui.sim.node import GIB, MEM_TOTAL_GIB, OS_GIB
from spark_tui.sim.serve_spec import ServeSpec
from spark_tui.sim.sglang_timeline import plan_sglang
from spark_tui.sim.vllm_timeline import plan_vllm

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.timedlog import TimedLog
    from spark_tui.sim.world import SimWorld

# CPU-side memory of a running engine (API server, driver, Ray workers, pinned buffers):
# ~9 GiB system-used during a run (public GB10 reports); the head carries the API server too.
CPU_OVERHEAD_HEAD_GIB = 9.0
CPU_OVERHEAD_WORKER_GIB = 7.0
LEAK_GIB = 33.0  # "each failed container run … leaked ~33 GB" (a Spark write-up)


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
    """One launched engine across its member nodes: its timeline, state and readings."""

    world: SimWorld
    spec: ServeSpec
    node: SimNode  # where the driver / rank 0 runs
    container: SimContainer
    start: float
    sink: TimedLog | None
    rank_containers: list[SimContainer] = field(default_factory=list)
    argv_in: dict[str, list[str]] = field(default_factory=dict)  # container id -> its command
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

    def emit(self, sink: TimedLog | None, t: float, lines: list[str], step: float = 0.0) -> float:
        if sink is None:
            return t + max(0, len(lines) - 1) * step
        return sink.add_many(t, lines, step)

    def plan(self) -> None:
        """Lay out what happens, from the command, the cluster and the nodes' memory."""
        if self.spec.kind == "vllm":
            plan_vllm(self)
        else:
            plan_sglang(self)
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

    # -- SGLang --------------------------------------------------------------------------

    # -- shared: weights ------------------------------------------------------------------

    def member(self, node: SimNode, rank: int, sink: TimedLog | None, is_head: bool) -> Member:
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

    def steady_fraction(self, node: SimNode) -> float:
        m = self.members[node.name]
        held = OS_GIB + node.services_gib + node.leaked_gib + 0.6 + m.budget_gib + m.overhead_gib
        return min(0.999, held / MEM_TOTAL_GIB)

    # ---------------------------------------------------------------- state --

    def die(self, t: float, reason: str) -> None:
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
                held = self.process_gib(m, t)
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

    def process_gib(self, m: Member, now: float) -> float:
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
        proc = self.process_gib(m, now)
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
            "ts": logs.sglang_ts(t),
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
            self.emit(self.sink, now, logs.render("sglang", "flashmla-sparse-decode"))
            self.die(now + 0.5, "FlashMLA unsupported architecture")
            return "flashmla"
        if self.fail_on_request is not None and self.requests_total >= self.fail_on_request:
            self.wedged_since = now
            t = now + 10.0
            self.emit(
                self.sink,
                t,
                logs.render(
                    "vllm",
                    "ray-channel-timeout",
                    ts=logs.vllm_ts(t),
                    pid=self.pid,
                    object_id=hashlib.sha1(str(now).encode()).hexdigest()[:40] + "0100000004e1f505",
                ),
            )
            self.die(t + 1, "RayChannelTimeoutError")
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
