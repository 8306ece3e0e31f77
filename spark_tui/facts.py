"""The catalogue of facts that wall conditions, causes and verify steps may name.

This is the contract between the knowledge base (knowledge/*.yaml), the node
probes (spark_tui.nodes, which produce `node` facts from readings), the
cluster view (`cluster.*` facts across nodes) and the recipes (`recipe.*`).
`spark-tui kb lint` rejects a condition over a fact not listed here.

Units are in the names: _gib (GiB, 2**30 bytes), _pct (0-100), _s (seconds),
_w (watts), _mhz. A fact that could not be read is absent, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping

NODE_FACTS: dict[str, str] = {
    # memory, from /proc/meminfo (on GB10 the OS is the only source of memory figures)
    "memory.total_gib": "MemTotal",
    "memory.available_gib": "MemAvailable",
    "memory.free_gib": "MemFree: what CUDA sees as free on unified memory",
    "memory.cached_gib": "Cached + Buffers (page cache, dropped by drop_caches)",
    "memory.after_drop_gib": "MemFree + page cache: what a launch can have after dropping caches",
    "memory.used_gib": "MemTotal - MemAvailable",
    "memory.swap_used_gib": "SwapTotal - SwapFree",
    "memory.gpu_process_gib": "memory held by GPU compute processes (nvidia-smi --query-compute-apps)",
    "memory.unexplained_gib": "used memory not explained by GPU processes, containers or the OS baseline: a leak",
    # GPU, from nvidia-smi (GB10: no framebuffer figures, dmon memory % reads 0 even under load)
    "gpu.present": "nvidia-smi answered with at least one GPU",
    "gpu.name": "e.g. 'NVIDIA GB10'",
    "gpu.sm_pct": "SM utilisation (dmon sm / utilization.gpu)",
    "gpu.mem_bw_pct": "memory-bandwidth utilisation (dmon mem); 0 on GB10 whatever the load",
    "gpu.power_w": "power.draw",
    "gpu.temp_c": "temperature.gpu",
    "gpu.sm_clock_mhz": "clocks.sm",
    "gpu.process_count": "compute processes",
    "gpu.cuda_total_gib": "device memory CUDA reports (~119.7 on GB10, ~62 with the drm override)",
    # files and kernel
    "files.drm_override": "/etc/modprobe.d/zz-nvidia-drm-override.conf exists",
    "kernel.nvrm_oom_count": "'NVRM: Out of memory' lines in the kernel log since the launch",
    "boot.id": "/proc/sys/kernel/random/boot_id",
    "boot.uptime_s": "seconds since boot",
    "boot.changed_unasked": "the boot id changed without spark-tui asking for a reboot",
    # containers and ray
    "containers.running": "number of running containers",
    "containers.serving": "a serving container (vllm/sglang/ray) is running",
    "containers.restart_count": "highest RestartCount among serving containers",
    "containers.restart_policy": "restart policy of the serving container ('no', 'always', 'unless-stopped', …)",
    "ray.running": "Ray's head runs here and `ray status` answered",
    "ray.member": "a raylet runs here: the node is a member of a Ray cluster",
    "engine.running": "a serving engine's API process runs here (vllm serve, sglang.launch_server)",
    "engine.port": "the port in the engine's command line (--port, else its default)",
    "engine.model": "the model in the engine's command line",
    "ray.gpus_total": "GPUs the Ray cluster reports (ray status)",
    "ray.nodes": "alive Ray nodes",
    # network
    "net.fabric_if": "the fabric (200G) interface name",
    "net.fabric_up": "the fabric interface is UP",
    "net.fabric_mtu": "its MTU",
    "net.fabric_speed_mbps": "its link speed",
    "net.roce_devices": "RoCE devices ibdev2netdev maps to the fabric port(s)",
    "net.roce_devices_up": "RoCE devices ibdev2netdev shows (Up) on the node",
    "net.nccl_ib_hca_count": "devices named in the recipe's NCCL_IB_HCA",
    "net.default_route_if": "the interface of the default route",
    "nccl.library_builds": "distinct libnccl.so.2 builds (by hash) inside the serving container",
    "nccl.library_files": "libnccl.so.2* files inside the serving container",
    "serving.generation_tokens_total": "the engine's generation token counter (/metrics)",
    "serving.requests_waiting": "vllm:num_requests_waiting (or SGLang's sglang:num_queue_reqs)",
    # the serving engine, from its log and /metrics
    "serving.phase": "'stopped' | 'starting' | 'loading' | 'capturing' | 'serving' | 'crashed'",
    "serving.load_pct": "weights loaded, 0-100",
    "serving.capture_done": "CUDA graphs captured so far",
    "serving.capture_total": "CUDA graphs to capture",
    "serving.progress_age_s": "seconds since load/capture progress last moved",
    "serving.tok_s": "generation tokens per second",
    "serving.expected_tok_s": "the recipe's measured tokens per second",
    "serving.requests_running": "vllm:num_requests_running (or SGLang's equivalent)",
    "serving.tokens_age_s": "seconds since the generation token counter last moved",
    "log.silent_s": "seconds since the serving log's last line",
}

CLUSTER_FACTS: dict[str, str] = {
    "cluster.nodes": "nodes in the cluster",
    "cluster.reachable_nodes": "nodes that answer",
    "cluster.available_spread_gib": "max - min of memory.after_drop_gib across nodes (no engine up)",
    "cluster.available_min_gib": "the smallest memory.after_drop_gib",
    "cluster.swap_used_max_gib": "the largest memory.swap_used_gib",
    "cluster.mtu_mismatch": "fabric MTUs differ between nodes",
    "cluster.fabric_mtu_min": "the smallest fabric MTU",
}

# Recipe facts are open families: recipe.serve_args.<flag>, recipe.env.<VAR>, …
RECIPE_FACT_FAMILIES: dict[str, str] = {
    "recipe.id": "the recipe's id",
    "recipe.engine": "'vllm' | 'sglang'",
    "recipe.executor": "'ray' | 'mp'",
    "recipe.nodes": "nodes the recipe needs",
    "recipe.tp": "tensor-parallel size",
    "recipe.serve_args.": "a serve argument's value (true for a bare flag), e.g. recipe.serve_args.--enforce-eager",
    "recipe.env.": "an environment variable of the serve process",
    "recipe.ray.args.": "a `ray start` argument, e.g. recipe.ray.args.--object-store-memory",
    "recipe.ray.env.": "an environment variable of the Ray daemons",
    "recipe.docker.args": "the docker run arguments, as one string (e.g. contains '--rm')",
    "recipe.docker.restart_policy": "the docker run restart policy ('no' when unset)",
    "recipe.cuda_graphs": "the serve command leaves CUDA graphs on",
}

_FAMILIES = tuple(k for k in RECIPE_FACT_FAMILIES if k.endswith("."))


def is_known_fact(path: str) -> bool:
    """Whether a condition may name this fact."""
    if path in NODE_FACTS or path in CLUSTER_FACTS or path in RECIPE_FACT_FAMILIES:
        return True
    return any(path.startswith(f) and len(path) > len(f) for f in _FAMILIES)


def fact_known(path: str, facts: Mapping[str, object]) -> bool:
    """Whether `facts` say anything about this fact: it is there, or it is a `recipe.*` fact
    and the recipe is known (a recipe gives every fact it has, so one it lacks is unset).
    A node fact that is absent was not read: unknown."""
    return path in facts or (path.startswith("recipe.") and "recipe.id" in facts)


def unknown_fact_reason(path: str) -> str | None:
    if is_known_fact(path):
        return None
    prefix = path.split(".")[0]
    near = sorted(
        k
        for k in (*NODE_FACTS, *CLUSTER_FACTS, *RECIPE_FACT_FAMILIES)
        if k.startswith(prefix + ".")
    )
    hint = f" (known {prefix}.* facts: {', '.join(near[:12])})" if near else ""
    return f"unknown fact {path!r}{hint}; the catalogue is spark_tui/facts.py"


GIB = float(1 << 30)


def gib(n_bytes: float | int | None) -> float | None:
    return None if n_bytes is None else float(n_bytes) / GIB
