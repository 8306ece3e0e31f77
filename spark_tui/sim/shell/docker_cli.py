"""The `docker` command of a simulated node (the containers themselves: spark_tui.sim.docker)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from spark_tui.sim import docker as dk
from spark_tui.sim.shell.context import HOST, Command, Ctx, Out
from spark_tui.sim.shell.interpreter import dispatch
from spark_tui.sim.shell.textutils import count_opt


def _matches(c: dk.SimContainer, key: str, value: str) -> bool:
    """One `docker ps --filter KEY=VALUE` (name: a regular expression searched in the name)."""
    if key == "label":
        lk, _, lv = value.partition("=")
        return lk in c.labels and (not lv or c.labels[lk] == lv)
    if key == "name":
        return re.search(value, c.name) is not None
    if key == "status":
        return c.state == value
    if key == "ancestor":
        return c.image == value or c.image.split(":")[0] == value
    return True


def _ps(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker ps: the node's containers (running, or all with -a), filtered, formatted."""
    node = ctx.node
    now = ctx.world.clock.now()
    show_all = any(a in ("-a", "--all") for a in args) or "-aq" in args or "-qa" in args
    quiet = any(a in ("-q", "--quiet", "-aq", "-qa") for a in args)
    fmt = None
    filters: list[str] = []
    i = 0
    while i < len(args):
        if args[i] == "--format" and i + 1 < len(args):
            fmt = args[i + 1]
            i += 1
        elif args[i] in ("--filter", "-f") and i + 1 < len(args):
            filters.append(args[i + 1])
            i += 1
        i += 1
    # docker ps lists what is up: running, and restarting under a restart policy
    rows = [c for c in node.containers.values() if show_all or c.running or c.state == "restarting"]
    by_key: dict[str, list[str]] = {}
    for f in filters:
        k, _, v = f.partition("=")
        by_key.setdefault(k, []).append(v)
    # as docker does: filters of one key are OR'ed, different keys AND'ed
    for k, values in by_key.items():
        rows = [c for c in rows if any(_matches(c, k, v) for v in values)]
    if quiet:
        return Out(0, "".join(c.id[:12] + "\n" for c in rows))
    if fmt is not None and "json" in fmt:
        return Out(0, "".join(c.ps_json(now) + "\n" for c in rows))
    if fmt is not None:
        out = ""
        for c in rows:
            line = (
                fmt.replace("{{.Names}}", c.name)
                .replace("{{.ID}}", c.id[:12])
                .replace("{{.Status}}", c.status(now))
                .replace("{{.Image}}", c.image)
                .replace("{{.State}}", c.state)
            )
            out += line.encode().decode("unicode_escape") + "\n"
        return Out(0, out)
    out = "CONTAINER ID   IMAGE     COMMAND   CREATED   STATUS    PORTS     NAMES\n"
    for c in rows:
        out += f'{c.id[:12]}   {c.image}   "{" ".join(c.command)[:20]}…"   {c.status(now)}   {c.name}\n'
    return Out(0, out)


def _run(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker run: a new container started with its main command."""
    node = ctx.node
    world = ctx.world
    now = ctx.world.clock.now()
    parsed = dk.parse_run(args)
    if isinstance(parsed, str):
        return Out(125, "", f"docker: {parsed}.\nSee 'docker run --help'.\n")
    opts, flags, rest = parsed
    if not rest:
        return Out(125, "", "docker: 'docker run' requires at least 1 argument.\n")
    names = opts.get("--name")
    name = (names[-1] if names else None) or f"sim_{len(node.containers) + 1}"
    if name in node.containers:
        c = node.containers[name]
        return Out(
            125,
            "",
            f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use by container "{c.id}". You have to remove (or rename) that container to be able to reuse that name.\n',
        )
    if dk.image_id(node, rest[0]) is None:
        return Out(
            125,
            "",
            f"docker: Error response from daemon: No such image: {rest[0]}.\n"
            "See 'docker run --help'.\n",
        )
    labels = {}
    for lab in opts.get("-l", []) + opts.get("--label", []):
        k, _, v = lab.partition("=")
        labels[k] = v
    c = dk.SimContainer(
        node=node,
        name=name,
        image=rest[0],
        command=rest[1:],
        env=dk.env_from_opts(opts, ctx.env),
        labels=labels,
        restart_policy=(opts.get("--restart") or ["no"])[-1],
        auto_remove="--rm" in flags,
        network=((opts.get("--network") or opts.get("--net") or ["bridge"])[-1]),
        created_at=now,
    )
    node.containers[name] = c
    c.start(now)
    detached = any(f in flags for f in ("-d", "--detach", "-itd", "-dit"))
    if c.auto_remove and not c.running:  # --rm: a container whose process ended is removed
        node.containers.pop(name, None)
    if not detached:
        return Out(c.exit_code, c.log.text(world.clock.now()))
    return Out(0, c.id + "\n")


def _exec(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker exec: a command inside a running container (-d: left running)."""
    node = ctx.node
    world = ctx.world
    detach = False
    env: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in ("-d", "--detach"):
            detach = True
        elif a in ("-e", "--env") and i + 1 < len(args):
            k, _, v = args[i + 1].partition("=")
            env[k] = v
            i += 1
        elif a in ("-w", "--workdir", "-u", "--user") and i + 1 < len(args):
            i += 1
        elif a.startswith("-") and not a.startswith("--") and "d" in a[1:]:
            detach = True
        i += 1
    if i >= len(args):
        return Out(1, "", '"docker exec" requires at least 2 arguments.\n')
    c = dk.find(node, args[i])
    if c is None:
        return Out(1, "", dk.no_such(args[i]))
    if not c.running:
        return Out(1, "", f"Error response from daemon: container {c.id} is not running\n")
    cmd = args[i + 1 :]
    if not cmd:
        return Out(1, "", '"docker exec" requires at least 2 arguments.\n')
    cctx = Ctx(world, node, c, {**c.env, **env}, root=True, detached=detach)
    r = dispatch(cmd, cctx, stdin)
    if detach:
        return Out(0)
    if cctx.blocked:
        ctx.blocked = True
        return Out(-9, r.out, r.err)
    return r


def _logs(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker logs: the container's main process output (--tail N)."""
    node = ctx.node
    world = ctx.world
    ref = next((a for a in reversed(args) if not a.startswith("-") and not a.isdigit()), None)
    n, _rest, _flags = count_opt([a.replace("--tail", "-n") for a in args], -1)
    c = dk.find(node, ref or "")
    if c is None:
        return Out(1, "", dk.no_such(ref or ""))
    lines = c.log.lines(world.clock.now())
    if n >= 0:
        lines = lines[-n:] if n else []
    return Out(0, "".join(line + "\n" for line in lines))


def _lifecycle(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker stop / kill / rm / restart / start of containers by name or id."""
    node = ctx.node
    now = ctx.world.clock.now()
    force = any(a in ("-f", "--force") for a in args)
    wait_s = 10.0  # docker stop's default grace period
    refs: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-t", "--time", "-s", "--signal"):
            if a in ("-t", "--time") and i + 1 < len(args):
                wait_s = _seconds(args[i + 1], wait_s)
            i += 2
            continue
        if a.startswith("--time="):
            wait_s = _seconds(a.split("=", 1)[1], wait_s)
        if not a.startswith("-"):
            refs.append(a)
        i += 1
    if not refs:
        return Out(1, "", f'"docker {sub}" requires at least 1 argument.\n')
    out, err, rc = "", "", 0
    for ref in refs:
        c = dk.find(node, ref)
        if c is None:
            err += dk.no_such(ref)
            rc = 1
            continue
        if sub in ("stop", "kill"):
            if c.running or c.state == "restarting":  # a stop ends a restart loop too
                c.stopped_by_user = True
                hard = sub == "kill" or wait_s <= 0
                if not hard and c.running and c.main_is_shell:
                    # SIGTERM to a shell as PID 1 does nothing: docker waits out the grace
                    # period, then SIGKILLs it and the program it runs
                    now = _wait(ctx, now + wait_s)
                    hard = True
                c.stop(now, 137 if hard else 143, hard=hard)
                if c.auto_remove:
                    node.containers.pop(c.name, None)
        elif sub == "rm":
            if c.running and not force:
                err += f'Error response from daemon: cannot remove container "/{c.name}": container is running: stop the container before removing or force remove\n'
                rc = 1
                continue
            if c.running:
                c.stop(now, 137, hard=True)
            node.containers.pop(c.name, None)
        elif sub in ("restart", "start"):
            if c.running and sub == "restart":
                c.stop(now, 143, hard=False)
            if not c.running:
                c.stopped_by_user = False
                c.start(now)
        out += ref + "\n"
    return Out(rc, out, err)


def _seconds(text: str, default: float) -> float:
    try:
        return float(text)
    except ValueError:
        return default


def _wait(ctx: Ctx, until: float) -> float:
    """The command waits until `until` (or its caller's deadline): the time it ends."""
    clock = ctx.world.clock
    if ctx.deadline is not None:
        until = min(until, max(clock.now(), ctx.deadline))
    clock.sleep(max(0.0, until - clock.now()))
    return clock.now()


def _rename(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker rename OLD NEW."""
    node = ctx.node
    if len(args) != 2:
        return Out(1, "", '"docker rename" requires exactly 2 arguments.\n')
    c = dk.find(node, args[0])
    if c is None:
        return Out(1, "", dk.no_such(args[0]))
    if args[1] in node.containers:
        return Out(
            1,
            "",
            f'Error response from daemon: Conflict. The container name "/{args[1]}" is already in use\n',
        )
    node.containers.pop(c.name)
    c.name = args[1]
    node.containers[c.name] = c
    return Out(0)


def _update(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker update --restart=POLICY CONTAINER...: prints each container it changed."""
    policy = None
    refs: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--restart="):
            policy = a.split("=", 1)[1]
        elif a == "--restart" and i + 1 < len(args):
            policy, i = args[i + 1], i + 1
        elif not a.startswith("-"):
            refs.append(a)
        i += 1
    if not refs:
        return Out(1, "", '"docker update" requires at least 1 argument.\n')
    out, err = [], []
    for ref in refs:
        c = dk.find(ctx.node, ref)
        if c is None:
            err.append(dk.no_such(ref))
            continue
        if policy is not None:
            c.restart_policy = policy
        out.append(ref + "\n")
    return Out(1 if err else 0, "".join(out), "".join(err))


def _inspect(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker inspect: JSON, or -f with a Go template."""
    node = ctx.node
    now = ctx.world.clock.now()
    fmt = None
    refs = []
    i = 0
    while i < len(args):
        if args[i] in ("-f", "--format") and i + 1 < len(args):
            fmt = args[i + 1]
            i += 2
            continue
        if not args[i].startswith("-"):
            refs.append(args[i])
        i += 1
    found = []
    for ref in refs:
        c = dk.find(node, ref)
        if c is None:
            return Out(1, "[]\n", f"Error: No such object: {ref}\n")
        found.append(c.inspect(now))
    if fmt:
        out = ""
        for d in found:
            out += _go_template(fmt, d) + "\n"
        return Out(0, out)
    return Out(0, json.dumps(found, indent=4) + "\n")


def _images(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker images: none are listed; `docker image inspect [-f FMT] REF…` answers the
    node's image IDs."""
    if sub == "image" and args[:1] == ["inspect"]:
        return _image_inspect(args[1:], ctx)
    return Out(0, "REPOSITORY   TAG   IMAGE ID   CREATED   SIZE\n")


def _image_inspect(args: list[str], ctx: Ctx) -> Out:
    fmt = None
    refs = []
    i = 0
    while i < len(args):
        if args[i] in ("-f", "--format") and i + 1 < len(args):
            fmt, i = args[i + 1], i + 2
            continue
        if not args[i].startswith("-"):
            refs.append(args[i])
        i += 1
    found: list[dict[str, object]] = []
    for ref in refs:
        iid = dk.image_id(ctx.node, ref)
        if iid is None:
            return Out(1, "[]\n", f"Error response from daemon: No such image: {ref}\n")
        found.append({"Id": iid, "RepoTags": [r for r, v in ctx.node.images.items() if v == iid]})
    if fmt:
        return Out(0, "".join(_go_template(fmt, d) + "\n" for d in found))
    return Out(0, json.dumps(found, indent=4) + "\n")


def _pull(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker pull: every image is up to date."""
    return Out(
        0,
        f"Using default tag: latest\nStatus: Image is up to date for {args[-1] if args else ''}\n",
    )


DOCKER_CLIENT = "28.3.3"  # the docker CLI's own version (`docker --version`)


def _info(sub: str, args: list[str], ctx: Ctx, stdin: str) -> Out:
    """docker info / docker version [--format TEMPLATE]: the daemon's version is the node's."""
    server = ctx.node.docker_version
    if sub == "info":
        return Out(0, f"Server Version: {server}\n")
    fmt = args[args.index("--format") + 1] if "--format" in args[:-1] else None
    if fmt is not None:
        data: dict[str, object] = {
            "Client": {"Version": DOCKER_CLIENT},
            "Server": {"Version": server},
        }
        return Out(0, _go_template(fmt, data) + "\n")
    return Out(
        0,
        f"Client:\n Version:           {DOCKER_CLIENT}\n\n"
        f"Server:\n Engine:\n  Version:          {server}\n",
    )


def _docker(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if len(argv) < 2:
        return Out(0, "Usage:  docker [OPTIONS] COMMAND\n")
    if argv[1] in ("--version", "-v"):
        return Out(0, f"Docker version {DOCKER_CLIENT}, build e6534b4\n")
    sub, args = argv[1], argv[2:]
    if sub == "container" and args:
        sub, args = args[0], args[1:]
    run = _SUBCOMMANDS.get(sub)
    if run is None:
        return Out(1, "", f"docker: '{sub}' is not a docker command.\nSee 'docker --help'\n")
    return run(sub, args, ctx, stdin)


def _go_template(fmt: str, data: dict[str, object]) -> str:
    def sub(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr.startswith("json "):
            expr = expr[5:].strip()
            wrap: Callable[[object], str] = json.dumps
        else:
            wrap = str
        cur: object = data
        for part in expr.strip(".").split("."):
            if not part:
                continue
            cur = cur.get(part) if isinstance(cur, dict) else None
        if isinstance(cur, bool) and wrap is str:
            return "true" if cur else "false"
        return wrap(cur) if cur is not None else "<no value>"

    return re.sub(r"\{\{(.*?)\}\}", sub, fmt)


_SUBCOMMANDS: dict[str, Callable[[str, list[str], Ctx, str], Out]] = {
    "ps": _ps,
    "run": _run,
    "exec": _exec,
    "logs": _logs,
    "stop": _lifecycle,
    "kill": _lifecycle,
    "rm": _lifecycle,
    "restart": _lifecycle,
    "start": _lifecycle,
    "rename": _rename,
    "update": _update,
    "inspect": _inspect,
    "images": _images,
    "image": _images,
    "pull": _pull,
    "info": _info,
    "version": _info,
}
COMMANDS = {"docker": Command(_docker, HOST)}
