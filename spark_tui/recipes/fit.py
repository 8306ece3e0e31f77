"""Does a recipe fit each node's memory, before a launch? (`spark-tui recipes fit`)

Per node of the cluster, from the recipe (+ profile, + --set) and the node's readings
(spark_tui.nodes.sampler, through its transport):

- weights: the checkpoint's recorded size ÷ (TP × PP). Expert parallelism spreads the
  experts over the same ranks, so a rank still holds about 1/(TP × PP) of the bytes.
- KV cache, per token on one rank: layers/PP × max(1, KV heads/TP) × head dim × 2 (K and V)
  × dtype bytes (fp8 caches 1, `auto` the model's bf16 2), from the model's config.json
  figures recorded in the recipe with their source. The *need* is one sequence of the whole
  context (--max-model-len / --context-length, else the model's max_position_embeddings):
  it is what both engines refuse to start without (vLLM: "max seq len … is larger than the
  maximum number of tokens that can be stored in KV cache"). The upper bound, context ×
  --max-num-seqs (vLLM's default 256), is what full concurrency would hold; vLLM does not
  reserve it (it queues and preempts instead), so it is reported, not required.
- what the engine takes: vLLM pre-allocates KV blocks until the process holds
  --gpu-memory-utilization × device memory (default 0.9, vLLM's CacheConfig) and refuses to
  start when free device memory is below that (vllm-free-memory-low); the KV cache is what
  that budget leaves after the weights and the runtime overhead. SGLang keeps
  (1 - --mem-fraction-static) × device memory free for activations and makes its KV pool of
  the rest (the fraction's default here 0.88, as spark_tui.sim).
- Ray's object store where Ray runs: `ray start` without --object-store-memory reserves 30 %
  of the node's memory (a Spark write-up: "~30 percent of RAM (~36GB/node)"; Ray's
  DEFAULT_OBJECT_STORE_MEMORY_PROPORTION), on every node.
- what the node has: memory available after dropping caches (MemFree + page cache − shmem;
  only MemFree when the recipe does not drop caches: on unified memory CUDA does not count
  the page cache as free — the page-cache-hog wall), capped at the device memory CUDA
  reports. What other processes hold now (OS, co-tenant services, a leak) is the rest of
  MemTotal, shown beside it.

Device memory on GB10: nvidia-smi reports none ([N/A]: Syllo/nvtop#426,
https://github.com/Syllo/nvtop/issues/426); CUDA reports 119.67 GiB (the vLLM line
"11.19/119.67 GiB" of "MiniMax M2.7 MXFP4 on two DGX Sparks", https://al-engr.com/minimax-m2.7-dual-spark.html)
of MemTotal 127,607,176 kB (121.70 GiB, a Spark's /proc/meminfo), so device memory =
MemTotal − 2.03 GiB on a unified node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from spark_tui.clock import Clock
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.state import NodeState
from spark_tui.nodes.transport import Transport
from spark_tui.recipes.model import Recipe

GIB = 1 << 30
# MemTotal 127,607,176 kB (a Spark's /proc/meminfo) − 119.67 GiB CUDA total (a vLLM log line)
UNIFIED_DEVICE_GAP_BYTES = int(127_607_176 * 1024 - 119.67 * GIB)
VLLM_DEFAULT_UTILIZATION = 0.9  # vLLM CacheConfig.gpu_memory_utilization
SGLANG_DEFAULT_FRACTION = 0.88  # spark_tui.sim's default for SGLang (it depends on the GPU)
VLLM_DEFAULT_MAX_NUM_SEQS = 256  # vLLM SchedulerConfig default for the API server
RAY_OBJECT_STORE_FRACTION = 0.30  # Ray's DEFAULT_OBJECT_STORE_MEMORY_PROPORTION
# Runtime memory besides weights and KV (activation peak, NCCL buffers, CUDA graph pools,
# the engine's own CPU side): spark-tui's estimate — the simulator uses the same figure — not
# a measurement; vLLM takes it from its budget before sizing the KV cache.
RUNTIME_OVERHEAD_BYTES = int(1.5 * GIB)
FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
MODEL_DTYPE_BYTES = 2  # bf16: the KV cache's dtype when the serve args say `auto`


@dataclass(frozen=True)
class NodeFit:
    """One node's share of the launch against what the node has."""

    name: str
    role: str
    rank: int
    fits: bool
    weights_bytes: int | None
    kv_cache_bytes: int | None  # what the engine would hold (vLLM: what utilization leaves)
    kv_cache_need_bytes: int | None  # one sequence of the whole context
    kv_cache_upper_bytes: int | None  # context × max-num-seqs (full concurrency)
    overhead_bytes: int
    object_store_bytes: int
    other_processes_bytes: int | None
    available_bytes: int | None
    budget_bytes: int | None  # fraction × device memory (what the engine may take)
    device_bytes: int | None
    wall: str | None = None  # the wall a launch would hit
    reason: str = ""
    largest_fraction: float | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "role": self.role,
            "rank": self.rank,
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_cache_need_bytes": self.kv_cache_need_bytes,
            "kv_cache_upper_bytes": self.kv_cache_upper_bytes,
            "overhead_bytes": self.overhead_bytes,
            "object_store_bytes": self.object_store_bytes,
            "other_processes_bytes": self.other_processes_bytes,
            "available_bytes": self.available_bytes,
            "budget_bytes": self.budget_bytes,
            "device_bytes": self.device_bytes,
            "fits": self.fits,
            "wall": self.wall,
            "reason": self.reason,
            "largest_fraction": self.largest_fraction,
        }


@dataclass(frozen=True)
class FitReport:
    """The whole estimate: per node, and what to change when something does not fit."""

    recipe: Recipe
    cluster: ClusterConfig
    nodes: tuple[NodeFit, ...]
    fraction_flag: str
    fraction: float
    context: int | None
    context_source: str
    kv_bytes_per_token: int | None
    advice: tuple[str, ...] = ()
    cluster_wall: str | None = None  # a wall raised by the nodes together (SGLang balance)
    largest_fraction: float | None = None
    largest_context: int | None = None
    weights_bytes: int | None = None  # the whole checkpoint; None: its size is unknown
    weights_source: str = ""  # the recipe's checkpoint_bytes, or where it was measured

    @property
    def verdict(self) -> str:
        """fits | does not fit | unknown (nothing failed, but the weights' size is unknown,
        so nothing can say they fit)."""
        if not self.nodes or self.cluster_wall or not all(n.fits for n in self.nodes):
            return "does not fit"
        return "fits" if self.weights_bytes is not None else "unknown"

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"

    def to_json(self) -> dict[str, object]:
        r = self.recipe
        return {
            "recipe": r.id,
            "profile": r.profile,
            "engine": r.engine,
            "executor": r.executor,
            "cluster": self.cluster.source,
            "simulated": self.cluster.simulated,
            "fits": self.fits,
            "verdict": self.verdict,
            "weights_bytes": self.weights_bytes,
            "weights_source": self.weights_source,
            "fraction_flag": self.fraction_flag,
            "fraction": self.fraction,
            "context": self.context,
            "context_source": self.context_source,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "largest_fraction": self.largest_fraction,
            "largest_context": self.largest_context,
            "cluster_wall": self.cluster_wall,
            "nodes": [n.to_json() for n in self.nodes],
            "advice": list(self.advice),
        }

    def to_text(self) -> str:
        """A table a person reads in a terminal."""
        r = self.recipe
        lines = [
            f"# spark-tui fit: {r.id}" + (f" (profile {r.profile})" if r.profile else ""),
            f"# cluster: {self.cluster.source}"
            + (" (simulated: no cluster.yaml found)" if self.cluster.simulated else ""),
            f"# {r.engine} over {r.executor}, {self.fraction_flag} {self.fraction:g}, context "
            + (f"{self.context:,} tokens ({self.context_source})" if self.context else "unknown"),
            "",
            f"{'node':<10} {'weights':>8} {'KV':>8} {'KV need':>8} {'runtime':>8} "
            f"{'Ray obj':>8} {'others':>8} {'avail':>8}  verdict",
        ]
        for n in self.nodes:
            lines.append(
                f"{n.name:<10} {_gib(n.weights_bytes):>8} {_gib(n.kv_cache_bytes):>8} "
                f"{_gib(n.kv_cache_need_bytes):>8} {_gib(n.overhead_bytes):>8} "
                f"{_gib(n.object_store_bytes):>8} {_gib(n.other_processes_bytes):>8} "
                f"{_gib(n.available_bytes):>8}  "
                + (
                    ("fits" if self.weights_bytes is not None else "unknown")
                    if n.fits
                    else "DOES NOT FIT" + (f" → {n.wall}" if n.wall else "")
                )
            )
        verdict = {"fits": "FITS", "does not fit": "DOES NOT FIT"}.get(self.verdict)
        lines += [
            "",
            "(GiB) "
            + (
                verdict
                or "UNKNOWN: the weights' size is unknown (no model.checkpoint_bytes in the "
                "recipe, and the model was not found on the head node to measure)"
            ),
        ]
        if self.weights_source:
            lines.append(f"- weights: {_gib(self.weights_bytes)} GiB ({self.weights_source})")
        lines += [f"- {a}" for a in self.advice]
        return "\n".join(lines) + "\n"


def _gib(value: int | None) -> str:
    return "—" if value is None else f"{value / GIB:.1f}"


def _flag(recipe: Recipe, *flags: str) -> str | None:
    for f in flags:
        v = recipe.serve.args.get(f)
        if v not in (None, True):
            return str(v)
    return None


def _number(recipe: Recipe, *flags: str) -> float | None:
    text = _flag(recipe, *flags)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def kv_dtype_bytes(recipe: Recipe) -> int:
    """Bytes per KV element: fp8 caches 1, `auto` (and anything else) the model's bf16 2."""
    dtype = (_flag(recipe, "--kv-cache-dtype") or "auto").lower()
    return 1 if dtype in FP8_KV or dtype.startswith("fp8") else MODEL_DTYPE_BYTES


def kv_bytes_per_token(recipe: Recipe) -> int | None:
    """KV bytes one token costs on one rank; None when the recipe lacks the config figures."""
    m = recipe.model
    if not (m.layers and m.kv_heads and m.head_dim):
        return None
    tp = recipe.tp or 1
    pp = recipe.pp or 1
    layers = math.ceil(m.layers / pp)
    # TP splits KV heads; past the KV head count each rank keeps a replica of one head
    heads = max(1, math.ceil(m.kv_heads / tp))
    return layers * heads * m.head_dim * 2 * kv_dtype_bytes(recipe)


def context_of(recipe: Recipe) -> tuple[int | None, str]:
    """The context the serve args ask for, and where that number came from."""
    flag = "--max-model-len" if recipe.engine == "vllm" else "--context-length"
    v = _number(recipe, flag)
    if v is not None:
        return int(v), flag
    if recipe.model.max_position_embeddings:
        return recipe.model.max_position_embeddings, "the model's max_position_embeddings"
    return None, f"unknown: no {flag} and no max_position_embeddings in the recipe"


def fraction_of(recipe: Recipe) -> tuple[str, float]:
    if recipe.engine == "vllm":
        v = _number(recipe, "--gpu-memory-utilization")
        return "--gpu-memory-utilization", v if v is not None else VLLM_DEFAULT_UTILIZATION
    v = _number(recipe, "--mem-fraction-static")
    return "--mem-fraction-static", v if v is not None else SGLANG_DEFAULT_FRACTION


def object_store_bytes(recipe: Recipe, total_bytes: int) -> int:
    """Ray's plasma reserve on one node: the recipe's cap, else 30 % of the node's memory."""
    if recipe.executor != "ray":
        return 0
    if recipe.ray.head_command and "--object-store-memory" not in recipe.ray.args:
        return 0  # the image's own entrypoint starts Ray: its setting is unknown (see advice)
    cap = recipe.ray.args.get("--object-store-memory")
    if cap not in (None, True):
        try:
            return int(float(str(cap)))
        except ValueError:
            pass
    return int(RAY_OBJECT_STORE_FRACTION * total_bytes)


def _floor2(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


def fit_nodes(
    recipe: Recipe,
    cluster: ClusterConfig,
    states: Mapping[str, NodeState],
    measured: tuple[int, str] | None = None,
) -> FitReport:
    """The estimate for every node the recipe uses (head first), from their readings.
    `measured`: the checkpoint's bytes and where they were measured, when the recipe has no
    checkpoint_bytes (without either, the verdict is `unknown`, never `fits`)."""
    nodes: list[NodeConfig] = [cluster.head, *cluster.workers][: recipe.nodes]
    flag, frac = fraction_of(recipe)
    context, context_source = context_of(recipe)
    per_token = kv_bytes_per_token(recipe)
    ranks = (recipe.tp or 1) * (recipe.pp or 1)
    total, source = recipe.model.checkpoint_bytes, "the recipe's model.checkpoint_bytes"
    if total is None and measured is not None:
        total, source = measured
    if total is None:
        source = ""
    weights = total // ranks if total else None
    need = per_token * context if per_token and context else None
    seqs = _number(recipe, "--max-num-seqs") or (
        VLLM_DEFAULT_MAX_NUM_SEQS if recipe.engine == "vllm" else None
    )
    upper = int(need * seqs) if need and seqs else None
    fits: list[NodeFit] = []
    for rank, n in enumerate(nodes):
        fits.append(
            _fit_node(
                recipe, n, rank, states.get(n.name), flag, frac, weights, per_token, need, upper
            )
        )
    advice: list[str] = []
    cluster_wall = None
    avail = [f.available_bytes for f in fits if f.available_bytes is not None]
    if recipe.engine == "sglang" and len(avail) >= 2 and min(avail) < 0.9 * max(avail):
        # SGLang's pre-load check (model_runner.py): every rank's free memory within 10 % of
        # the others' ("The memory capacity is unbalanced"), as two Spark write-ups report
        cluster_wall = "sglang-memory-unbalanced"
        low = min(fits, key=lambda f: f.available_bytes or 0)
        advice.append(
            f"SGLang refuses unbalanced ranks: {low.name} has {_gib(low.available_bytes)} GiB, "
            f"under 90 % of the best node's {_gib(max(avail))} GiB (sglang-memory-unbalanced: "
            "drop caches there, or reboot a node whose memory leaked)"
        )
    largest_fraction = min(
        (f.largest_fraction for f in fits if f.largest_fraction is not None), default=None
    )
    largest_context = None
    if per_token and largest_fraction is not None and weights is not None:
        rooms = []
        for f in fits:
            if f.device_bytes is None or f.available_bytes is None:
                continue
            if recipe.engine == "vllm":
                rooms.append(largest_fraction * f.device_bytes - weights - RUNTIME_OVERHEAD_BYTES)
            else:
                rooms.append(
                    f.available_bytes
                    - f.object_store_bytes
                    - (1 - largest_fraction) * f.device_bytes
                    - weights
                )
        if rooms and min(rooms) > 0:
            largest_context = int(min(rooms) // per_token)
            if recipe.model.max_position_embeddings:
                largest_context = min(largest_context, recipe.model.max_position_embeddings)
    report_nodes = tuple(fits)
    advice = (
        _advice(recipe, report_nodes, flag, frac, context, largest_fraction, largest_context)
        + advice
    )
    return FitReport(
        recipe=recipe,
        cluster=cluster,
        nodes=report_nodes,
        fraction_flag=flag,
        fraction=frac,
        context=context,
        context_source=context_source,
        kv_bytes_per_token=per_token,
        advice=tuple(advice),
        cluster_wall=cluster_wall,
        largest_fraction=largest_fraction,
        largest_context=largest_context,
        weights_bytes=total,
        weights_source=source,
    )


def _fit_node(
    recipe: Recipe,
    node: NodeConfig,
    rank: int,
    state: NodeState | None,
    flag: str,
    frac: float,
    weights: int | None,
    per_token: int | None,
    need: int | None,
    upper: int | None,
) -> NodeFit:
    overhead = RUNTIME_OVERHEAD_BYTES
    base = dict(
        name=node.name,
        role=node.role,
        rank=rank,
        weights_bytes=weights,
        kv_cache_need_bytes=need,
        kv_cache_upper_bytes=upper,
        overhead_bytes=overhead,
    )
    if state is None or not state.reachable or state.memory is None:
        why = (state.unavailable.get("node") or state.unavailable.get("meminfo")) if state else None
        return NodeFit(
            **base,  # type: ignore[arg-type]  # base: NodeFit's shared fields, each typed where computed
            fits=False,
            kv_cache_bytes=None,
            object_store_bytes=0,
            other_processes_bytes=None,
            available_bytes=None,
            budget_bytes=None,
            device_bytes=None,
            reason=f"no memory reading ({why or 'unreachable'})",
        )
    m = state.memory
    device = _device_bytes(state)
    reclaim = m.cached_bytes - m.shmem_bytes if recipe.drop_caches else 0
    available = max(0, min(device, m.free_bytes + max(0, reclaim)))
    others = max(0, m.total_bytes - (m.free_bytes + max(0, m.cached_bytes - m.shmem_bytes)))
    store = object_store_bytes(recipe, m.total_bytes)
    budget = int(frac * device)
    wall: str | None = None
    reason = ""
    fixed_kv = _number(recipe, "--kv-cache-memory-bytes") if recipe.engine == "vllm" else None
    if fixed_kv is not None:
        # vLLM's CacheConfig: kv_cache_memory_bytes "ignores gpu_memory_utilization", and the
        # worker's free-memory check at start runs only when it is None (v1/worker/*_worker.py)
        kv = int(fixed_kv)
        budget = (weights or 0) + overhead + kv
        hold = budget + store
        if hold > available:
            wall, reason = (
                "nvrm-oom",
                (
                    f"the weights, runtime and --kv-cache-memory-bytes ({_gib(kv)} GiB) + "
                    f"{_gib(store)} GiB Ray object store = {_gib(hold)} GiB > "
                    f"{_gib(available)} GiB available"
                ),
            )
        elif need is not None and kv < need:
            reason = (
                f"--kv-cache-memory-bytes gives {_gib(kv)} GiB for KV; one sequence of the "
                f"context needs {_gib(need)} GiB (vLLM refuses to start)"
            )
        largest = _floor2(min(0.99, (available - store) / device)) if device else None
        kv_bytes = kv
    elif recipe.engine == "vllm":
        kv = budget - (weights or 0) - overhead  # what the utilization leaves for KV
        hold = budget + store
        if weights is not None and weights + overhead > budget:
            wall, reason = (
                "cuda-oom",
                (
                    f"the weights ({_gib(weights)} GiB) and runtime do not fit "
                    f"{flag} {frac:g} × {_gib(device)} GiB = {_gib(budget)} GiB"
                ),
            )
        elif budget > available:
            wall, reason = (
                "vllm-free-memory-low",
                (
                    f"{flag} {frac:g} asks for {_gib(budget)} GiB at start; "
                    f"{_gib(available)} GiB is free"
                ),
            )
        elif hold > available:
            wall, reason = (
                "nvrm-oom",
                (
                    f"{_gib(budget)} GiB for vLLM + {_gib(store)} GiB Ray object store = "
                    f"{_gib(hold)} GiB > {_gib(available)} GiB available"
                ),
            )
        elif need is not None and kv < need:
            reason = (
                f"{flag} {frac:g} leaves {_gib(kv)} GiB for KV; one sequence of the context "
                f"needs {_gib(need)} GiB (vLLM refuses to start)"
            )
        largest = _floor2(min(0.99, (available - store) / device)) if device else None
        kv_bytes = max(kv, 0)
    else:
        # SGLang: the KV pool is what stays free after the weights, minus (1 - fraction)
        reserve = device - budget
        kv = available - store - (weights or 0) - reserve
        hold = (weights or 0) + max(kv, 0) + store
        if weights is not None and weights + overhead + store > available:
            wall, reason = (
                "nvrm-oom",
                (
                    f"the weights ({_gib(weights)} GiB) and runtime do not fit the "
                    f"{_gib(available)} GiB available"
                ),
            )
        elif weights is not None and weights > budget:
            reason = (
                f"the weights ({_gib(weights)} GiB) exceed {flag} {frac:g} × {_gib(device)} GiB "
                f"= {_gib(budget)} GiB"
            )
        elif reserve < overhead:
            wall, reason = (
                "cuda-oom",
                (
                    f"{flag} {frac:g} leaves {_gib(reserve)} GiB for activations "
                    f"(needs ~{_gib(overhead)} GiB)"
                ),
            )
        elif need is not None and kv < need:
            reason = (
                f"{flag} {frac:g} leaves a KV pool of {_gib(max(kv, 0))} GiB; one sequence of "
                f"the context needs {_gib(need)} GiB"
            )
        elif kv <= 0:
            reason = f"{flag} {frac:g} leaves no KV pool"
        largest = _floor2(min(0.99, 1 - overhead / device)) if device else None
        kv_bytes = max(kv, 0)
    fits = not reason
    # the largest fraction is only one if the weights and the runtime fit in it
    if largest is not None and weights is not None:
        room = (
            largest * device - weights - overhead
            if recipe.engine == "vllm"
            else available - store - (1 - largest) * device - weights
        )
        if room <= 0:
            largest = None
    return NodeFit(
        **base,  # type: ignore[arg-type]  # base: NodeFit's shared fields, each typed where computed
        fits=fits,
        kv_cache_bytes=int(kv_bytes),
        object_store_bytes=store,
        other_processes_bytes=others,
        available_bytes=available,
        budget_bytes=budget,
        device_bytes=device,
        wall=wall,
        reason=reason,
        largest_fraction=largest,
    )


def _device_bytes(state: NodeState) -> int:
    """What CUDA reports as device memory: nvidia-smi's total where it has one, else (unified
    memory, GB10) MemTotal minus the 2.03 GiB CUDA does not see."""
    totals = [g.memory_total_bytes for g in state.gpus if g.memory_total_bytes]
    if totals:
        return min(totals)
    assert state.memory is not None
    return max(0, state.memory.total_bytes - UNIFIED_DEVICE_GAP_BYTES)


def _advice(
    recipe: Recipe,
    nodes: tuple[NodeFit, ...],
    flag: str,
    frac: float,
    context: int | None,
    largest_fraction: float | None,
    largest_context: int | None,
) -> list[str]:
    out: list[str] = []
    for n in nodes:
        if not n.fits:
            out.append(
                f"{n.name} does not fit: {n.reason}"
                + (f"; a launch would hit {n.wall}" if n.wall else "")
            )
    if (
        recipe.executor == "ray"
        and recipe.ray.head_command
        and not any(n.object_store_bytes for n in nodes)
    ):
        out.append(
            "the image's own entrypoint starts Ray (ray.head_command): its object-store size is "
            "not counted; uncapped, Ray reserves 30 % of each node's memory"
        )
    elif recipe.executor == "ray" and "--object-store-memory" not in recipe.ray.args:
        store = max((n.object_store_bytes for n in nodes), default=0)
        out.append(
            f"Ray's object store is not capped: {_gib(store)} GiB a node (30 % of memory) that "
            "vLLM never uses; cap it with --set ray.--object-store-memory=1073741824"
        )
    if not recipe.drop_caches:
        cache = [n for n in nodes if n.available_bytes is not None]
        if cache:
            out.append(
                "the recipe does not drop the page cache before launch: only MemFree counts "
                "(set drop_caches: true, or --set drop_caches=true)"
            )
    if largest_fraction is not None:
        out.append(f"largest {flag} every node can give: {largest_fraction:.2f} (asked: {frac:g})")
    elif any(n.available_bytes is not None for n in nodes):
        out.append(f"no {flag} fits: the weights and the runtime need more than a node has")
    if largest_context is not None:
        out.append(
            f"largest context at {flag} {largest_fraction:.2f}: {largest_context:,} tokens "
            f"(--{'max-model-len' if recipe.engine == 'vllm' else 'context-length'} "
            f"{largest_context})" + (f"; asked: {context:,}" if context else "")
        )
    if recipe.model.layers is None or recipe.model.head_dim is None:
        out.append(
            "the KV cache need is unknown: the recipe records no layers/head_dim "
            f"({recipe.model.config_source or 'no model.config'}); only the budget is checked"
        )
    elif nodes and nodes[0].kv_cache_upper_bytes:
        out.append(
            f"the KV need is one {context:,}-token sequence ({_gib(nodes[0].kv_cache_need_bytes)} "
            f"GiB a rank); full concurrency would need {_gib(nodes[0].kv_cache_upper_bytes)} GiB, "
            "which vLLM does not reserve (it queues requests instead)"
        )
    return out


def read_states(
    nodes: list[NodeConfig] | tuple[NodeConfig, ...],
    transports: Mapping[str, Transport],
    clock: Clock,
) -> dict[str, NodeState]:
    """One sampling round of every node (in parallel); an unreachable node is a state."""
    from concurrent.futures import ThreadPoolExecutor

    from spark_tui.nodes.sampler import sample

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(nodes)))) as pool:
        got = pool.map(lambda n: sample(transports[n.name], n, clock, include_slow=False), nodes)
        return {n.name: s for n, s in zip(nodes, got, strict=True)}
