"""Simulator behaviour for the walls beyond the seeds (issue 8): a wedge after minutes of
serving, two libnccl.so.2 builds in the serving image, a slow fabric, a container that a
restart policy keeps restarting, a truncated weight shard.

Data per scenario (LATE, keyed by scenario name; scenarios.yaml holds the scenario itself)
and new functions only: `apply` sets a world up when a cluster is built, `after_plan` changes
an engine's planned timeline, `find` answers the NCCL probe inside a container and `ip_link`
takes `ip link set dev IF mtu N`. `install()` hooks them into the interpreter's command tables
and the engine's plan() without changing the code that is there.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spark_tui.sim.engine import Engine
    from spark_tui.sim.shell import Ctx, Out
    from spark_tui.sim.world import SimWorld

OS_NCCL = "/usr/lib/aarch64-linux-gnu/libnccl.so.2.28.9"
WHEEL_NCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"
STATS_EVERY_S = 10.0  # vLLM's stats logger interval
REQUESTS_IN_FLIGHT = 2  # a client keeps two requests running once the engine serves
SHM_WARN_EVERY_S = 60.0

# scenario name -> what differs from the healthy cluster
LATE: dict[str, dict[str, Any]] = {
    # after 5 minutes of serving the engine wedges (tokens frozen, power ~22 W, SM ~96 %)
    # unless the serve process preloads the OS NCCL (the nccl-dual-build fix)
    "serving-stall": {"wedge_after_s": 300.0, "nccl_builds": 2},
    "fabric-slow": {"fabric_mtu": {"spark2": 1500}},
    # a container another launcher started with --restart unless-stopped, restarted 6 times
    "restart-loop": {
        "restart_loop": {
            "node": "spark1",
            "name": "vllm_node",
            "count": 6,
            "policy": "unless-stopped",
        }
    },
    # shard 17 of 41 is truncated: the load dies there every time
    "safetensors-corrupt-shard": {"corrupt_shard": (17, 41)},
}


def late_of(world: SimWorld) -> dict[str, Any]:
    return getattr(world, "late", {})


def apply(world: SimWorld, scenario: str) -> None:
    """Set a freshly built world up for a late scenario (nothing for the others)."""
    install()
    late = dict(LATE.get(scenario, {}))
    world.late = late  # type: ignore[attr-defined]
    for name, mtu in (late.get("fabric_mtu") or {}).items():
        if name in world.nodes:
            world.nodes[name].fabric_mtu = int(mtu)
    rl = late.get("restart_loop")
    if rl and rl["node"] in world.nodes:
        from spark_tui.sim.docker import SimContainer

        node = world.nodes[rl["node"]]
        now = world.clock.now()
        c = SimContainer(
            node=node,
            name=rl["name"],
            image="vllm-node",
            command=["vllm", "serve", "/models/model"],
            env={},
            restart_policy=rl["policy"],
            created_at=now - 3600,
            started_at=now - 30,
            state="restarting",  # docker's state while its policy restarts the crashed engine
            restart_count=int(rl["count"]),
            main_blocks=True,
        )
        c.log.add(now - 40, "(EngineCore pid=171) ERROR [core.py:1242] EngineCore failed to start.")
        c.log.add(
            now - 39, "RuntimeError: Engine core initialization failed. See root cause above."
        )
        node.containers[c.name] = c


def _preloads_os_nccl(env: dict[str, str]) -> bool:
    return "libnccl.so.2" in env.get("LD_PRELOAD", "")


def after_plan(e: Engine) -> None:
    """Change an engine's laid-out timeline for the world's late scenario."""
    late = late_of(e.world)
    shard = late.get("corrupt_shard")
    if shard and e.load_start is not None and e.load_end is not None:
        _corrupt_shard(e, *shard)
    wedge = late.get("wedge_after_s")
    if wedge and e.serving_from is not None and e.dead_at is None:
        if late.get("nccl_builds", 1) >= 2 and _preloads_os_nccl(e.spec.env):
            wedge = None  # one NCCL build in the process: no wedge (vllm-project/vllm#42354)
        _serve_load(e, e.serving_from + wedge if wedge else None)


def _corrupt_shard(e: Engine, k: int, n: int) -> None:
    from spark_tui.sim.engine import _ts

    t = e.load_start + (e.load_end - e.load_start) * k / n
    lines = [
        f"(Worker_TP0 pid={e.pid}) ERROR {_ts(t)} [multiproc_executor.py:772] WorkerProc failed to start.",
        "safetensors_rust.SafetensorError: Error while deserializing header: "
        "invalid JSON in header: EOF while parsing a value at line 1 column 0",
    ]
    for m in e.members.values():
        if m.sink is not None:
            m.sink.cut_after(t)
    if e.sink is not None:
        e.sink.cut_after(t)
        e.sink.add_many(t, lines, 0.01)
    e.fail_load_at = t
    e._die(t + 1.0, "SafetensorError")


def _serve_load(e: Engine, wedge_at: float | None) -> None:
    """A client keeps requests running from serving_from; tokens move (and vLLM logs its
    stats every 10 s) until wedge_at, when everything freezes but /health and SM %."""
    from spark_tui.sim.engine import _ts

    start = e.serving_from
    e.__class__ = _loaded_class(type(e))
    e.__dict__["_late"] = (
        start,
        wedge_at,
        e.__dict__.pop("tokens_total", 0.0),
        e.__dict__.pop("requests_running", 0),
        e.__dict__.pop("wedged_since", None),
    )
    if e.sink is None:
        return
    end = wedge_at if wedge_at is not None else start + 2 * 3600.0
    t = start + STATS_EVERY_S
    while t < end:
        e.sink.add(
            t,
            f"(APIServer pid={e.api_pid}) INFO {_ts(t)} [loggers.py:271] Engine 000: Avg prompt "
            f"throughput: 0.0 tokens/s, Avg generation throughput: {e.tok_s:.1f} tokens/s, "
            f"Running: {REQUESTS_IN_FLIGHT} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, "
            "Prefix cache hit rate: 0.0%",
        )
        t += STATS_EVERY_S
    if wedge_at is not None:
        t = wedge_at + SHM_WARN_EVERY_S
        while t < wedge_at + 3600.0:
            e.sink.add(
                t,
                f"(EngineCore pid={e.pid}) INFO {_ts(t)} [shm_broadcast.py:705] No available shared "
                "memory broadcast block found in 60 seconds. This typically happens when some "
                "processes are hanging or doing some time-consuming work (e.g. compilation, "
                "weight/kv cache quantization).",
            )
            t += SHM_WARN_EVERY_S


_CLASSES: dict[type, type] = {}


def _loaded_class(base: type) -> type:
    """The engine's class with time-driven tokens, running requests and wedge."""
    if base in _CLASSES:
        return _CLASSES[base]

    def _now(self) -> float:
        return self.world.clock.now()

    def _moving(self) -> float:
        start, wedge_at, *_ = self.__dict__["_late"]
        now = _now(self)
        if not self.alive(now) or now < start:
            return 0.0
        stop = now if wedge_at is None else min(now, wedge_at)
        return max(0.0, stop - start)

    def get_tokens(self) -> float:
        return self.__dict__["_late"][2] + self.tok_s * _moving(self)

    def set_tokens(self, value: float) -> None:
        start, wedge_at, _base, running, wedged = self.__dict__["_late"]
        self.__dict__["_late"] = (
            start,
            wedge_at,
            value - self.tok_s * _moving(self),
            running,
            wedged,
        )

    def get_running(self) -> int:
        start, _w, _b, running, _wd = self.__dict__["_late"]
        now = _now(self)
        in_flight = REQUESTS_IN_FLIGHT if self.alive(now) and now >= start else 0
        return running + in_flight

    def set_running(self, value: int) -> None:
        start, wedge_at, base, _running, wedged = self.__dict__["_late"]
        now = _now(self)
        in_flight = REQUESTS_IN_FLIGHT if self.alive(now) and now >= start else 0
        self.__dict__["_late"] = (start, wedge_at, base, max(0, value - in_flight), wedged)

    def get_wedged(self) -> float | None:
        _s, wedge_at, _b, _r, wedged = self.__dict__["_late"]
        if wedged is not None:
            return wedged
        return wedge_at if wedge_at is not None and _now(self) >= wedge_at else None

    def set_wedged(self, value: float | None) -> None:
        start, wedge_at, base, running, _wd = self.__dict__["_late"]
        self.__dict__["_late"] = (start, wedge_at, base, running, value)

    cls = type(
        base.__name__ + "WithLoad",
        (base,),
        {
            "tokens_total": property(get_tokens, set_tokens),
            "requests_running": property(get_running, set_running),
            "wedged_since": property(get_wedged, set_wedged),
        },
    )
    _CLASSES[base] = cls
    return cls


def _digest(path: str, build: str) -> str:
    return hashlib.sha256(f"{build}:{path}".encode()).hexdigest()


def find(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`find / -xdev -type f -name 'libnccl.so.2*' -printf '%s %p\\n' -exec sha256sum {} +`
    in a serving container: the image's NCCL files (one build, or the OS's and the wheel's)."""
    from spark_tui.sim.shell import Out

    pattern = argv[argv.index("-name") + 1] if "-name" in argv else ""
    if "libnccl" not in pattern:
        return Out(0, "")
    builds = late_of(ctx.world).get("nccl_builds", 1)
    files = [(OS_NCCL, 253847384, "os")]
    files.append((WHEEL_NCCL, 261928192, "wheel") if builds >= 2 else (WHEEL_NCCL, 253847384, "os"))
    out = "".join(f"{size} {path}\n" for path, size, _ in files)
    out += "".join(f"{_digest('libnccl', build)}  {path}\n" for path, _, build in files)
    return Out(0, out)


def ip_link(inner):
    """`ip link set dev IF mtu N` (root) changes the fabric MTU; anything else as before."""

    def run(argv: list[str], ctx: Ctx, stdin: str) -> Out:
        from spark_tui.sim.shell import Out

        args = argv[1:]
        if args[:2] == ["link", "set"] and "mtu" in args:
            if not ctx.root:
                return Out(2, "", "RTNETLINK answers: Operation not permitted\n")
            dev = args[args.index("dev") + 1] if "dev" in args else args[2]
            mtu = int(args[args.index("mtu") + 1])
            node = ctx.node
            if dev == node.fabric_if:
                node.fabric_mtu = mtu
                return Out(0, "")
            return Out(1, "", f'Cannot find device "{dev}"\n')
        return inner(argv, ctx, stdin)

    run.late = True  # type: ignore[attr-defined]
    return run


_INSTALLED = False


def install() -> None:
    """Hook the late behaviour in (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from spark_tui.sim import shell
    from spark_tui.sim.engine import Engine

    shell._CONTAINER.setdefault("find", find)
    if not getattr(shell._BUILTINS.get("ip"), "late", False):
        shell._BUILTINS["ip"] = ip_link(shell._BUILTINS["ip"])
    original = Engine.plan

    def plan(self: Engine) -> None:
        original(self)
        after_plan(self)

    Engine.plan = plan  # type: ignore[method-assign]
    _INSTALLED = True
