"""What runs inside a serving container: ray, the engine launches (vllm serve, python -m
sglang.launch_server / vllm.entrypoints…, ranks that join across nodes), the image's
entrypoint scripts, pkill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_tui.sim.engine import Engine
from spark_tui.sim.ray import ray_start, ray_status, ray_stop
from spark_tui.sim.serve_spec import parse_serve
from spark_tui.sim.shell.context import CONTAINER, Command, Ctx, Out
from spark_tui.sim.shell.files import write_path
from spark_tui.sim.shell.interpreter import not_found
from spark_tui.sim.timedlog import TimedLog


def _ray(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    c = ctx.container
    assert c is not None
    sub = argv[1] if len(argv) > 1 else ""
    if sub == "start":
        rc, out, err, blocks = ray_start(ctx.world, ctx.node, c, argv[2:], ctx.env)
        if rc == 0:
            _write_spawn_output(ctx, out)
            if blocks and not ctx.detached:
                ctx.blocked = True
            return Out(0, "" if ctx.main else out)
        return Out(rc, out, err)
    if sub == "stop":
        rc, out, err = ray_stop(ctx.world, ctx.node, c)
        return Out(rc, out, err)
    if sub == "status":
        rc, out, err = ray_status(ctx.world, c)
        return Out(rc, out, err)
    return Out(2, "", f"Usage: ray [OPTIONS] COMMAND [ARGS]...\nError: No such command '{sub}'.\n")


def _write_spawn_output(ctx: Ctx, text: str) -> None:
    c = ctx.container
    if c is None or not text:
        return
    now = ctx.world.clock.now()
    path = ctx.sink_path
    if path:
        write_path(ctx, path, text, append=True)
    elif ctx.main:
        c.log.add_many(now, text.rstrip("\n").split("\n"))


def _sink_for(ctx: Ctx) -> TimedLog | None:
    c = ctx.container
    assert c is not None
    path = ctx.sink_path
    if path and path != "/dev/null":
        f = c.files.get(path)
        if not isinstance(f, TimedLog):
            old = f if isinstance(f, str) else ""
            f = TimedLog()
            if old:
                f.add_many(ctx.world.clock.now() - 1, old.rstrip("\n").split("\n"))
            c.files[path] = f
        return f
    if ctx.main:
        return c.log
    return None


def _serve(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    from spark_tui.sim import openai_server as http

    spec = parse_serve(argv, ctx.env)
    if spec is None:
        return not_found(argv[0])
    c = ctx.container
    assert c is not None
    world = ctx.world
    now = world.clock.now()
    sink = _sink_for(ctx)
    if int(spec.num("--nnodes", default=1)) > 1 and (
        spec.kind == "sglang"
        or str(spec.arg("--distributed-executor-backend", default="mp")) == "mp"
    ):
        _join_sglang(ctx, spec, argv, sink)
    else:
        e = Engine(world, spec, ctx.node, c, now, sink)
        e.argv_in[c.id] = list(argv)
        e.plan()
        world.engines.append(e)
        http.serve(world, e)
        if ctx.main:
            c.main_engine = e
    if not ctx.detached:
        ctx.blocked = True
    return Out(0)


def _join_sglang(ctx: Ctx, spec: object, argv: list[str], sink: TimedLog | None) -> None:
    """SGLang multi-node, and vLLM's mp executor (--nnodes/--master-addr): every rank runs the
    server; the engine starts when all joined."""
    from spark_tui.sim import openai_server as http
    from spark_tui.sim.world import SglangRank

    world = ctx.world
    now = world.clock.now()
    key = str(  # the rendezvous every rank names
        spec.arg("--dist-init-addr", default="?")  # type: ignore[attr-defined]  # a ServeSpec: parse_serve found the serving command
        if spec.kind == "sglang"  # type: ignore[attr-defined]  # a ServeSpec: parse_serve found the serving command
        else f"{spec.arg('--master-addr', default='?')}:{spec.arg('--master-port', default=29501)}"  # type: ignore[attr-defined]  # a ServeSpec: parse_serve found the serving command
    )
    nnodes = int(spec.num("--nnodes", default=1))  # type: ignore[attr-defined]  # a ServeSpec: parse_serve found the serving command
    waiting = world.sglang_waiting.setdefault(key, [])
    waiting[:] = [r for r in waiting if r.container.running]
    waiting.append(SglangRank(ctx.node, ctx.container, argv, dict(ctx.env), now, sink))  # type: ignore[arg-type]  # an engine rank always runs in a container
    if ctx.main:
        ctx.container.main_engine = PendingRank()  # type: ignore[union-attr]  # an engine rank always runs in a container
    if len({r.node.name for r in waiting}) < nnodes:
        return
    world.sglang_waiting.pop(key, None)

    def node_rank(r: Any) -> int:
        spec = parse_serve(r.argv, r.env)
        return int(spec.num("--node-rank", default=0)) if spec is not None else 0

    ranks = sorted(waiting, key=node_rank)
    r0 = ranks[0]
    spec0 = parse_serve(r0.argv, r0.env)
    assert spec0 is not None
    e = Engine(world, spec0, r0.node, r0.container, now, r0.sink)  # type: ignore[arg-type]  # an engine rank always runs in a container
    for i, r in enumerate(ranks):
        m = e.member(r.node, i, r.sink, is_head=i == 0)  # type: ignore[arg-type]  # an engine rank always runs in a container
        e.members[r.node.name] = m
        e.rank_containers.append(r.container)
        e.argv_in[r.container.id] = list(r.argv)
    e.plan()
    world.engines.append(e)
    http.serve(world, e)
    for r in ranks:
        if isinstance(r.container.main_engine, PendingRank):
            r.container.main_engine = e


class PendingRank:
    """A rank waiting for the others: alive until they come."""

    dead_at = None

    def alive(self, now: float) -> bool:
        return True


def _python(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if (
        len(argv) >= 3
        and argv[1] == "-m"
        and argv[2] in ("sglang.launch_server", "vllm.entrypoints.openai.api_server")
    ):
        section = _asks_help(argv[3:])
        if section is not None:
            return _help("sglang" if argv[2].startswith("sglang") else "vllm", section)
        return _serve(argv, ctx, stdin)
    if len(argv) >= 2 and argv[1] in ("--version", "-V"):
        return Out(0, "Python 3.12.3\n")
    return Out(1, "", f"{argv[0]}: simulated node: only engine launches are available\n")


HELP_DIR = Path(__file__).resolve().parent.parent / "engine_help"
# the releases whose own --help output the simulated images print (engine_help/SOURCES.md)
HELP_TEXT = {
    ("vllm", "all"): "vllm-0.32.0-serve-help-all.txt",
    ("vllm", ""): "vllm-0.32.0-serve-help.txt",
    ("sglang", ""): "sglang-0.5.23-launch-server-help.txt",
}


def _asks_help(argv: list[str]) -> str | None:
    """'' for --help / -h, 'all' (or a section) for vLLM's --help=SECTION, else None."""
    for a in argv:
        if a in ("--help", "-h"):
            return ""
        if a.startswith("--help="):
            return a.split("=", 1)[1]
    return None


def _help(engine: str, section: str) -> Out:
    name = HELP_TEXT.get((engine, "all" if section else ""))
    if name is None:
        return Out(2, "", f"{engine}: error: unrecognized arguments: --help={section}\n")
    return Out(0, (HELP_DIR / name).read_text(encoding="utf-8"))


def _sglang(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`sglang serve …`: SGLang's current entrypoint for python -m sglang.launch_server."""
    if len(argv) > 1 and argv[1] == "serve":
        return _python(["python3", "-m", "sglang.launch_server", *argv[2:]], ctx, stdin)
    return Out(2, "", "usage: sglang [-h] {serve,version} ...\n")


def _vllm(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if len(argv) > 1 and argv[1] == "serve":
        section = _asks_help(argv[2:])
        if section is not None:
            return _help("vllm", section)
        return _serve(argv, ctx, stdin)
    if len(argv) > 1 and argv[1] in ("--version", "-v"):
        return Out(0, "0.18.1rc1\n")
    return Out(
        2, "", "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"
    )


def _pkill(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    pattern = next((a for a in reversed(argv[1:]) if not a.startswith("-")), "")
    hard = "-9" in argv or "-KILL" in argv or "--signal=9" in argv
    now = ctx.world.clock.now()
    hit = False
    for e in ctx.world.engines_in(ctx.container) if ctx.container else []:
        if e.alive(now) and (
            pattern in ("vllm", "sglang", "python")
            or pattern in " ".join(e.spec.args)
            or pattern in e.spec.model
        ):
            e.kill(now, hard=hard, reason="pkill")
            hit = True
    return Out(0 if hit else 1)


def _entrypoint_script(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """The avarok/dgx-vllm image's `ray-head` / `ray-worker` entrypoints: they
    export VLLM_HOST_IP and run `ray start` with the node's IP from HEAD_IP / WORKER_IP."""
    env = ctx.env
    if argv[0] == "ray-head":
        ip = env.get("HEAD_IP") or env.get("VLLM_HOST_IP") or ctx.node.mgmt_ip
        args = ["ray", "start", "--head", "--port=6379", f"--node-ip-address={ip}", "--block"]
    else:
        ip = env.get("WORKER_IP") or env.get("VLLM_HOST_IP") or ctx.node.mgmt_ip
        head = env.get("HEAD_IP", "")
        args = ["ray", "start", f"--address={head}:6379", f"--node-ip-address={ip}", "--block"]
    return _ray(args, ctx, stdin)


COMMANDS = {
    "ray": Command(_ray, CONTAINER),
    "ray-head": Command(_entrypoint_script, CONTAINER),
    "ray-worker": Command(_entrypoint_script, CONTAINER),
    "vllm": Command(_vllm, CONTAINER),
    "sglang": Command(_sglang, CONTAINER),
    "pkill": Command(_pkill, CONTAINER),
    # python, python3, python3.12 …: only engine launches are simulated
    "python": Command(_python, CONTAINER, prefix=True),
}
