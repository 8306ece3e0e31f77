"""Runs command lines on a simulated node: the interpreter and its commands.

The node's state changes only here, through the commands a real node would
receive. Unknown commands exit 127 as sh would.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.sim import docker as dk
from spark_tui.sim import gpu, sh
from spark_tui.sim.engine import Engine, parse_serve
from spark_tui.sim.ray import ray_start, ray_status, ray_stop
from spark_tui.sim.timedlog import TimedLog

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.world import SimWorld

ROOT_ONLY_PREFIXES = ("/proc/sys/", "/etc/", "/sys/", "/usr/", "/boot/")


@dataclass
class Ctx:
    """Where a command runs: a node, maybe inside a container, with an environment."""

    world: SimWorld
    node: SimNode
    container: SimContainer | None = None
    env: dict[str, str] = field(default_factory=dict)
    root: bool = False
    detached: bool = (
        False  # docker exec -d / a container's main process: long commands keep running
    )
    main: bool = False  # the container's main process (its output is `docker logs`)
    last_rc: int = 0
    blocked: bool = False  # a long-running command is still running (foreground)
    deadline: float | None = None  # clock time the caller stops waiting (transport timeout)
    timed_out: bool = False

    def child(self, **kw: object) -> Ctx:
        c = Ctx(
            self.world,
            self.node,
            self.container,
            dict(self.env),
            self.root,
            self.detached,
            self.main,
        )
        c.deadline = self.deadline
        c.sink_path = getattr(self, "sink_path", None)  # type: ignore[attr-defined]
        for k, v in kw.items():
            setattr(c, k, v)
        return c


@dataclass
class Out:
    rc: int = 0
    out: str = ""
    err: str = ""


class _Exit(Exception):
    def __init__(self, rc: int, out: Out) -> None:
        self.rc = rc
        self.out = out


def run_script(script: str, ctx: Ctx, stdin: str = "") -> Out:
    """Run a script (one or more command lines) and return its exit code and output."""
    total = Out()
    try:
        return _run_script(script, ctx, stdin, total)
    except _Exit as ex:
        total.out += ex.out.out
        total.err += ex.out.err
        total.rc = ex.rc
        ctx.last_rc = ex.rc
        return total


def _exit(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    try:
        rc = int(argv[1]) if len(argv) > 1 else ctx.last_rc
    except ValueError:
        return Out(2, "", f"sh: 1: exit: Illegal number: {argv[1]}\n")
    raise _Exit(rc & 0xFF, Out())


def _run_script(script: str, ctx: Ctx, stdin: str, total: Out) -> Out:
    try:
        pipelines = sh.parse(script)
    except sh.ShellSyntaxError as exc:
        return Out(2, "", f"sh: 1: {exc}\n")
    prev_connector = ";"
    for p in pipelines:
        run = True
        if prev_connector == "&&" and ctx.last_rc != 0:
            run = False
        if prev_connector == "||" and ctx.last_rc == 0:
            run = False
        if run:
            r = _run_pipeline(p, ctx, stdin, background=p.connector == "&")
            total.out += r.out
            total.err += r.err
            ctx.last_rc = r.rc
            total.rc = r.rc
            if ctx.blocked:
                return total
        prev_connector = p.connector
    return total


def _expand(word: sh.Word, ctx: Ctx) -> list[str]:
    fields: list[str] = [""]
    has_quoted = False
    for seg in word.segs:
        if seg.kind == "lit":
            fields[-1] += seg.value
            has_quoted = has_quoted or seg.quoted
            continue
        if seg.kind == "var":
            name = seg.value
            if name == "?":
                val = str(ctx.last_rc)
            elif name == "$":
                val = str(ctx.node.index * 1000 + 17)
            elif name == "#":
                val = "0"
            else:
                val = ctx.env.get(name, "")
        else:
            val = run_script(seg.value, ctx.child()).out.rstrip("\n")
        if seg.quoted:
            fields[-1] += val
            has_quoted = True
        else:
            parts = val.split()
            if not parts:
                continue
            if val[:1].isspace() and fields[-1]:
                fields.append("")
            fields[-1] += parts[0]
            for extra in parts[1:]:
                fields.append(extra)
            if val[-1:].isspace():
                fields.append("")
    if fields and fields[-1] == "" and len(fields) > 1:
        fields.pop()
    if fields == [""] and not has_quoted:
        return []
    unquoted_glob = any(
        seg.kind == "lit" and not seg.quoted and ("*" in seg.value or "?" in seg.value)
        for seg in word.segs
    )
    if unquoted_glob:
        out: list[str] = []
        for f in fields:
            hits = sorted(p for p in _all_paths(ctx) if fnmatch.fnmatchcase(p, f))
            out += hits or [f]
        return out
    return fields


def _all_paths(ctx: Ctx) -> list[str]:
    paths = list(ctx.container.files if ctx.container is not None else ctx.node.files)
    for i in ctx.node.interfaces():
        for leaf in ("speed", "mtu", "operstate"):
            paths.append(f"/sys/class/net/{i.name}/{leaf}")
    return paths


def _run_pipeline(p: sh.Pipeline, ctx: Ctx, stdin: str, background: bool) -> Out:
    data = stdin
    result = Out()
    err_all = ""
    # a long-running command piped into `tee FILE` writes FILE
    tee_target: str | None = None
    for cmd in p.commands[1:]:
        argv = [w.literal() or "" for w in cmd.words]
        if argv and argv[0] == "tee":
            files = [a for a in argv[1:] if not a.startswith("-")]
            tee_target = files[0] if files else None
    for i, cmd in enumerate(p.commands):
        sub = ctx if len(p.commands) == 1 else ctx.child()
        if background:
            sub = ctx.child(detached=True)
        result = _run_command(cmd, sub, data, tee_target if i == 0 else None)
        if len(p.commands) > 1:
            ctx.last_rc = result.rc
            if sub.blocked:
                ctx.blocked = True
        data = result.out
        err_all += result.err
    if background:
        ctx.blocked = False
        return Out(0, "", err_all)
    return Out(result.rc, data, err_all)


def _run_command(cmd: sh.Command, ctx: Ctx, stdin: str, tee_target: str | None) -> Out:
    words: list[str] = []
    for w in cmd.words:
        words += _expand(w, ctx)
    redirs = [(r.fd, r.op, " ".join(_expand(r.target, ctx))) for r in cmd.redirs]
    # leading assignments
    assigns: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        k, v = words.pop(0).split("=", 1)
        assigns[k] = v
    if not words:
        ctx.env.update(assigns)
        return Out(0)
    run_ctx = ctx.child() if assigns else ctx
    run_ctx.env.update(assigns)
    # where a long-running process writes
    sink_path: str | None = tee_target
    for fd, op, target in redirs:
        if fd in (1, -1) and op in (">", ">>") and target != "/dev/null":
            sink_path = target
    for fd, op, target in redirs:
        if fd == 0 and op == "<":
            text = _read_path(ctx, target)
            if text is None:
                return Out(2, "", f"sh: 1: cannot open {target}: No such file\n")
            stdin = text
    run_ctx.sink_path = sink_path  # type: ignore[attr-defined]
    res = dispatch(words, run_ctx, stdin)
    if run_ctx is not ctx:
        ctx.last_rc = run_ctx.last_rc
        ctx.blocked = run_ctx.blocked
    out, err = res.out, res.err
    for fd, op, target in redirs:
        if op == ">&":
            if fd == 2 and target == "1":
                out, err = out + err, ""
            elif fd == 1 and target == "2":
                out, err = "", err + out
            continue
        if fd == 0:
            continue
        text = out if fd == 1 else err if fd == 2 else out + err
        if fd in (1, -1):
            out = ""
        if fd in (2, -1):
            err = ""
        if target == "/dev/null":
            continue
        wrc, werr = _write_path(ctx, target, text, append=op == ">>")
        if wrc:
            return Out(wrc, "", werr)
    return Out(res.rc, out, err)


# ---------------------------------------------------------------------------- files --


def _read_path(ctx: Ctx, path: str) -> str | None:
    node, now = ctx.node, ctx.world.clock.now()
    if path == "/proc/meminfo":
        return node.meminfo(now)
    if path == "/proc/sys/kernel/random/boot_id":
        return node.boot_id + "\n"
    if path == "/proc/uptime":
        up = now - node.booted_at
        return f"{up:.2f} {up * 19.3:.2f}\n"
    if path == "/etc/hostname":
        return node.name + "\n"
    if path == "/proc/sys/vm/drop_caches":
        return "0\n"
    if path.startswith("/sys/class/net/"):
        parts = path.split("/")
        if len(parts) == 6:
            iface = next((i for i in node.interfaces() if i.name == parts[4]), None)
            if iface is not None:
                if parts[5] == "mtu":
                    return f"{iface.mtu}\n"
                if parts[5] == "operstate":
                    return (
                        "up"
                        if iface.state == "UP"
                        else "down"
                        if iface.state == "DOWN"
                        else "unknown"
                    ) + "\n"
                if parts[5] == "speed":
                    return (
                        f"{iface.speed_mbps}\n"
                        if iface.state == "UP" and iface.speed_mbps
                        else None
                    )
        return None
    if ctx.container is not None:
        text = ctx.container.read_file(path, now)
        if text is not None:
            return text
        return None
    real = node.mounted(path)
    if real is not None:
        try:
            with open(real, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return None
    return node.files.get(path)


def _write_path(ctx: Ctx, path: str, text: str, append: bool) -> tuple[int, str]:
    node = ctx.node
    if path == "/proc/sys/vm/drop_caches":
        if not ctx.root and ctx.container is None:
            return 2, f"sh: 1: cannot create {path}: Permission denied\n"
        if ctx.container is not None:
            return 2, f"sh: 1: cannot create {path}: Read-only file system\n"
        if text.strip() in ("1", "3"):
            node.drop_caches()
        return 0, ""
    if ctx.container is not None:
        c = ctx.container
        old = c.files.get(path)
        if isinstance(old, TimedLog):
            old.add(ctx.world.clock.now(), text.rstrip("\n"))
        else:
            c.files[path] = (old or "" if append else "") + text
        return 0, ""
    if path.startswith(ROOT_ONLY_PREFIXES) and not ctx.root:
        return 2, f"sh: 1: cannot create {path}: Permission denied\n"
    node.files[path] = (node.files.get(path, "") if append else "") + text
    return 0, ""


# ------------------------------------------------------------------------- dispatch --


def not_found(name: str) -> Out:
    return Out(127, "", f"sh: 1: {name}: command not found\n")


def dispatch(argv: list[str], ctx: Ctx, stdin: str = "") -> Out:
    name = argv[0]
    fn = _BUILTINS.get(name)
    if fn is None and ctx.container is not None:
        fn = _CONTAINER.get(name)
    if fn is None and ctx.container is None:
        fn = _HOST.get(name)
    if fn is None and name.startswith("python") and ctx.container is not None:
        fn = _python
    if fn is None:
        return not_found(name)
    r = fn(argv, ctx, stdin)
    ctx.last_rc = r.rc
    return r


def _sudo(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    rest = argv[1:]
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-u", "-g") else rest[1:]
    if not rest:
        return Out(1, "", "usage: sudo -h | -K | -k | -V\n")
    # passwordless sudo on the simulated nodes
    return dispatch(rest, ctx.child(root=True), stdin)


def _shell(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if len(argv) >= 3 and argv[1] == "-c":
        sub = ctx.child()
        r = run_script(argv[2], sub, stdin)
        ctx.blocked = sub.blocked
        return r
    if len(argv) == 1:
        return run_script(stdin, ctx.child())
    return Out(127, "", f"{argv[0]}: 0: cannot open {argv[1]}: No such file\n")


def _export(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    for a in argv[1:]:
        if "=" in a:
            k, v = a.split("=", 1)
            ctx.env[k] = v
    return Out(0)


def _unset(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    for a in argv[1:]:
        ctx.env.pop(a, None)
    return Out(0)


def _echo(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = argv[1:]
    newline = True
    interp = False
    while args and args[0] in ("-n", "-e", "-ne", "-en"):
        newline = newline and "n" not in args[0]
        interp = interp or "e" in args[0]
        args = args[1:]
    text = " ".join(args)
    if interp:
        text = text.encode().decode("unicode_escape")
    return Out(0, text + ("\n" if newline else ""))


def _printf(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if len(argv) < 2:
        return Out(1, "", "printf: usage: printf format [arguments]\n")
    import codecs

    raw = codecs.escape_decode(argv[1].encode("utf-8"))[0]
    fmt = raw.decode("utf-8", "replace")
    try:
        text = fmt % tuple(argv[2:]) if "%" in fmt else fmt
    except TypeError:
        text = fmt
    return Out(0, text)


def _cat(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    files = [a for a in argv[1:] if not a.startswith("-") or a == "-"]
    if not files:
        return Out(0, stdin)
    out, err, rc = "", "", 0
    for f in files:
        text = stdin if f == "-" else _read_path(ctx, f)
        if text is None:
            err += f"cat: {f}: No such file or directory\n"
            rc = 1
        else:
            out += text
    return Out(rc, out, err)


def _exists(ctx: Ctx, path: str) -> bool:
    return _read_path(ctx, path) is not None or any(
        k.startswith(path.rstrip("/") + "/")
        for k in (ctx.container.files if ctx.container else ctx.node.files)
    )


def _ls(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    paths = [a for a in argv[1:] if not a.startswith("-")]
    out, err, rc = "", "", 0
    for p in paths or ["."]:
        if p == "." or _exists(ctx, p):
            out += p + "\n"
        else:
            err += f"ls: cannot access '{p}': No such file or directory\n"
            rc = 2
    return Out(rc, out, err)


def _test(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = argv[1:]
    if argv[0] == "[":
        if not args or args[-1] != "]":
            return Out(2, "", "[: missing ]\n")
        args = args[:-1]
    neg = False
    if args and args[0] == "!":
        neg, args = True, args[1:]
    ok = False
    if len(args) == 2 and args[0] in ("-e", "-f", "-r", "-s"):
        ok = _exists(ctx, args[1])
    elif len(args) == 2 and args[0] == "-d":
        ok = False
    elif len(args) == 2 and args[0] == "-n":
        ok = args[1] != ""
    elif len(args) == 2 and args[0] == "-z":
        ok = args[1] == ""
    elif len(args) == 3 and args[1] in ("=", "=="):
        ok = args[0] == args[2]
    elif len(args) == 3 and args[1] == "!=":
        ok = args[0] != args[2]
    elif len(args) == 1:
        ok = args[0] != ""
    return Out(0 if ok != neg else 1)


def _mv(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = [a for a in argv[1:] if a not in ("-n", "-f", "-v", "--", "-i")]
    no_clobber = "-n" in argv[1:]
    if len(args) != 2:
        return Out(1, "", "mv: missing destination file operand\n")
    src, dst = args
    files = ctx.container.files if ctx.container is not None else ctx.node.files
    if src not in files:
        return Out(1, "", f"mv: cannot stat '{src}': No such file or directory\n")
    if (
        ctx.container is None
        and not ctx.root
        and (src.startswith(ROOT_ONLY_PREFIXES) or dst.startswith(ROOT_ONLY_PREFIXES))
    ):
        return Out(1, "", f"mv: cannot move '{src}' to '{dst}': Permission denied\n")
    if no_clobber and dst in files:
        return Out(0)
    files[dst] = files.pop(src)
    return Out(0)


def _rm(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = [a for a in argv[1:] if not a.startswith("-")]
    files = ctx.container.files if ctx.container is not None else ctx.node.files
    rc, err = 0, ""
    for a in args:
        if a not in files:
            if "-f" not in argv:
                err += f"rm: cannot remove '{a}': No such file or directory\n"
                rc = 1
            continue
        if ctx.container is None and not ctx.root and a.startswith(ROOT_ONLY_PREFIXES):
            err += f"rm: cannot remove '{a}': Permission denied\n"
            rc = 1
            continue
        del files[a]
    return Out(rc, "", err)


def _true(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0)


def _false(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(1)


def _sleep(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    arg = argv[1] if len(argv) > 1 else "0"
    if arg == "infinity":
        if ctx.detached:
            return Out(0)
        ctx.blocked = True
        return Out(0)
    try:
        secs = float(arg.rstrip("s"))
    except ValueError:
        return Out(1, "", f"sleep: invalid time interval '{arg}'\n")
    if ctx.deadline is not None and ctx.world.clock.now() + secs > ctx.deadline:
        ctx.world.clock.sleep(max(0.0, ctx.deadline - ctx.world.clock.now()))
        ctx.blocked = True  # the caller's timeout ends it
        return Out(-9)
    ctx.world.clock.sleep(secs)
    return Out(0)


def _reboot(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if argv[0] == "shutdown" and "-r" not in argv:
        return Out(1, "", "shutdown: only reboots are simulated\n")
    if argv[0] == "systemctl" and (len(argv) < 2 or argv[1] != "reboot"):
        return Out(0)
    if not ctx.root:
        return Out(
            1,
            "",
            "Failed to set wall message, ignoring: Interactive authentication required.\n"
            "Call to Reboot failed: Interactive authentication required.\n",
        )
    ctx.node.request_reboot()
    return Out(0)


def _sync(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0)


def _hostname(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if "-I" in argv:
        return Out(0, f"{ctx.node.mgmt_ip} {ctx.node.fabric_ip}\n")
    return Out(0, ctx.node.name + "\n")


def _whoami(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0, ("root" if ctx.root or ctx.container is not None else "milo") + "\n")


def _id(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if "-u" in argv:
        return Out(0, ("0" if ctx.root else "1000") + "\n")
    return Out(0, "uid=1000(milo) gid=1000(milo) groups=1000(milo),27(sudo),986(docker)\n")


def _env(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    rest = argv[1:]
    sub = ctx.child()
    while rest and "=" in rest[0]:
        k, v = rest.pop(0).split("=", 1)
        sub.env[k] = v
    if rest:
        return dispatch(rest, sub, stdin)
    return Out(0, "".join(f"{k}={v}\n" for k, v in sorted(ctx.env.items())))


def _nohup(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return (
        dispatch(argv[1:], ctx, stdin)
        if len(argv) > 1
        else Out(125, "", "nohup: missing operand\n")
    )


def _timeout(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    rest = [a for a in argv[1:] if not a.startswith("-")]
    return (
        dispatch(rest[1:], ctx, stdin)
        if len(rest) > 1
        else Out(125, "", "timeout: missing operand\n")
    )


def _grep(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = argv[1:]
    flags: set[str] = set()
    patterns: list[str] = []
    files: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            files += args[i + 1 :] if patterns else args[i + 2 :]
            if not patterns and i + 1 < len(args):
                patterns.append(args[i + 1])
            break
        if a == "-e" and i + 1 < len(args):
            patterns.append(args[i + 1])
            i += 2
            continue
        if a.startswith("-") and len(a) > 1:
            flags.update(a[1:])
        elif not patterns:
            patterns.append(a)
        else:
            files.append(a)
        i += 1
    if not patterns:
        return Out(2, "", "Usage: grep [OPTION]... PATTERNS [FILE]...\n")
    text = stdin
    errs = ""
    if files:
        parts = []
        prefix = "H" in flags or (len(files) > 1 and "h" not in flags)
        for f in files:
            t = _read_path(ctx, f)
            if t is None:
                errs += (
                    f"grep: {f}: No such file or directory\n"
                    if not f.startswith("/sys/")
                    else f"grep: {f}: Invalid argument\n"
                )
                continue
            parts.append("".join(f"{f}:{ln}\n" for ln in t.splitlines()) if prefix else t)
        text = "".join(parts)
    ic = re.IGNORECASE if "i" in flags else 0
    if "F" in flags:
        regs = [re.compile(re.escape(p), ic) for p in patterns]
    else:
        regs = []
        for p in patterns:
            if "E" not in flags:
                p = p.replace(r"\|", "|").replace(r"\(", "(").replace(r"\)", ")")
            try:
                regs.append(re.compile(p, ic))
            except re.error:
                regs.append(re.compile(re.escape(p), ic))
    hits = [
        ln
        for ln in text.splitlines()
        if any(r.search(ln.split(":", 1)[1] if ("H" in flags and ":" in ln) else ln) for r in regs)
        != ("v" in flags)
    ]
    rc = 0 if hits else (2 if errs and not text else 1)
    if "q" in flags:
        return Out(rc, "", errs)
    if "c" in flags:
        return Out(rc, f"{len(hits)}\n", errs)
    return Out(rc, "".join(h + "\n" for h in hits), errs)


def _count_opt(args: list[str], default: int) -> tuple[int, list[str], set[str]]:
    n = default
    rest: list[str] = []
    flags: set[str] = set()
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-n" and i + 1 < len(args):
            n = int(args[i + 1].lstrip("+") or 0)
            i += 2
            continue
        if a.startswith("-n") and a[2:].isdigit():
            n = int(a[2:])
        elif a.startswith("-") and a[1:].isdigit():
            n = int(a[1:])
        elif a.startswith("--lines="):
            n = int(a.split("=", 1)[1])
        elif a.startswith("-") and len(a) > 1:
            flags.update(a[1:])
        else:
            rest.append(a)
        i += 1
    return n, rest, flags


def _tail(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    n, files, _flags = _count_opt(argv[1:], 10)
    text = stdin
    if files:
        t = _read_path(ctx, files[0])
        if t is None:
            return Out(
                1, "", f"tail: cannot open '{files[0]}' for reading: No such file or directory\n"
            )
        text = t
    lines = text.splitlines()
    out = lines[-n:] if n else []
    return Out(0, "".join(line + "\n" for line in out))


def _head(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    n, files, _ = _count_opt(argv[1:], 10)
    text = stdin
    if files:
        t = _read_path(ctx, files[0])
        if t is None:
            return Out(
                1, "", f"head: cannot open '{files[0]}' for reading: No such file or directory\n"
            )
        text = t
    return Out(0, "".join(line + "\n" for line in text.splitlines()[:n]))


def _wc(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0, f"{len(stdin.splitlines())}\n")


def _tee(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    for f in [a for a in argv[1:] if not a.startswith("-")]:
        _write_path(ctx, f, stdin, append="-a" in argv)
    return Out(0, stdin)


def _free(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    m = ctx.node.memory()
    g = 1 << 30
    b = lambda x: int(x * g)  # noqa: E731
    return Out(
        0,
        "               total        used        free      shared  buff/cache   available\n"
        f"Mem:     {b(m.total):>12} {b(m.total - m.free - m.cached):>11} {b(m.free):>11} {b(m.shmem):>11} {b(m.cached):>11} {b(m.available):>11}\n"
        f"Swap:    {b(m.swap_total):>12} {b(m.swap_total - m.swap_free):>11} {b(m.swap_free):>11}\n",
    )


def _ip(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if argv[1:3] == ["link", "set"] and "mtu" in argv:
        return _ip_link_set(argv[1:], ctx)
    args = [a for a in argv[1:] if a not in ("-o", "-br", "-4", "-6", "-d", "-s")]
    brief = "-br" in argv
    obj = args[0] if args else ""
    ifs = ctx.node.interfaces()
    lines = []
    if obj in ("link", "l"):
        for n, i in enumerate(ifs, 1):
            if brief:
                lines.append(f"{i.name:<17}{i.state:<15}{i.mac} <BROADCAST,MULTICAST,UP,LOWER_UP>")
                continue
            flags = (
                "LOOPBACK,UP,LOWER_UP"
                if i.name == "lo"
                else (
                    "BROADCAST,MULTICAST,UP,LOWER_UP"
                    if i.state == "UP"
                    else "NO-CARRIER,BROADCAST,MULTICAST,UP"
                )
            )
            kind = "loopback" if i.name == "lo" else "ether"
            lines.append(
                f"{n}: {i.name}: <{flags}> mtu {i.mtu} qdisc mq state {i.state} mode DEFAULT group default qlen 1000\\"
                f"    link/{kind} {i.mac} brd ff:ff:ff:ff:ff:ff"
            )
    elif obj in ("addr", "a", "address"):
        for n, i in enumerate(ifs, 1):
            if brief:
                lines.append(f"{i.name:<17}{i.state:<15}{' '.join(i.addrs)}")
            else:
                for a in i.addrs:
                    lines.append(
                        f"{n}: {i.name}    inet {a} scope global {i.name}\\       valid_lft forever preferred_lft forever"
                    )
    elif obj in ("route", "r"):
        lines.append(
            f"default via 192.168.1.1 dev {ctx.node.mgmt_if} proto dhcp src {ctx.node.mgmt_ip} metric 100"
        )
        lines.append(
            f"10.10.10.0/24 dev {ctx.node.fabric_if} proto kernel scope link src {ctx.node.fabric_ip}"
        )
        lines.append(
            f"192.168.1.0/24 dev {ctx.node.mgmt_if} proto kernel scope link src {ctx.node.mgmt_ip} metric 100"
        )
    else:
        return Out(255, "", f'Object "{obj}" is unknown, try "ip help".\n')
    return Out(0, "".join(line + "\n" for line in lines))


def _ip_link_set(args: list[str], ctx: Ctx) -> Out:
    """`ip link set dev IF mtu N` (root) changes the fabric MTU (fabric-slow's fix)."""
    if not ctx.root:
        return Out(2, "", "RTNETLINK answers: Operation not permitted\n")
    dev = args[args.index("dev") + 1] if "dev" in args else args[2]
    mtu = int(args[args.index("mtu") + 1])
    node = ctx.node
    if dev == node.fabric_if:
        node.fabric_mtu = mtu
        return Out(0, "")
    return Out(1, "", f'Cannot find device "{dev}"\n')


def _ibdev2netdev(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    lines = [
        f"{i.roce} port 1 ==> {i.name} ({'Up' if i.state == 'UP' else 'Down'})"
        for i in ctx.node.interfaces()
        if i.roce
    ]
    return Out(0, "".join(line + "\n" for line in lines))


def _dmesg(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    now = ctx.world.clock.now()
    return Out(0, "".join(line + "\n" for t, line in ctx.node.dmesg if t <= now))


def _journalctl(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0, "-- No entries --\n")


def _ss(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    ports = [22]
    for c in ctx.node.containers.values():
        if c.running and c.ray is not None:
            ports += [6379, 8265, 10001] if c.ray.head else []
    now = ctx.world.clock.now()
    for e in ctx.world.engines:
        if (
            e.node is ctx.node
            and e.serving_from is not None
            and now >= e.serving_from
            and e.alive(now)
        ):
            ports.append(e.spec.port)
    header = "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
    body = "".join(
        f"LISTEN 0      4096         0.0.0.0:{p:<6}      0.0.0.0:*\n" for p in sorted(set(ports))
    )
    return Out(0, body if "H" in "".join(argv[1:]) else header + body)


def _find_node(world: SimWorld, host: str) -> SimNode | None:
    host = host.split("@")[-1]
    for n in world.nodes.values():
        if host in (n.name, n.fabric_ip, n.mgmt_ip):
            return n
    return None


def _ssh(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = argv[1:]
    target = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if target is None and a in ("-o", "-p", "-i", "-l", "-J", "-F"):
            i += 2
            continue
        if target is None and a.startswith("-"):
            i += 1
            continue
        if target is None:
            target = a
        else:
            rest.append(a)
        i += 1
    if target is None:
        return Out(255, "", "usage: ssh destination [command]\n")
    node = _find_node(ctx.world, target)
    if node is None:
        return Out(
            255, "", f"ssh: Could not resolve hostname {target}: Name or service not known\n"
        )
    if not node.is_up():
        return Out(
            255,
            "",
            f"ssh: connect to host {target} port 22: {node.down_reason().split(' (')[0].capitalize()}\n",
        )
    return run_script(" ".join(rest) or "true", Ctx(ctx.world, node), stdin)


def _ping(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    host = next((a for a in reversed(argv[1:]) if not a.startswith("-") and not a.isdigit()), "")
    node = _find_node(ctx.world, host)
    if node is None or not node.is_up():
        return Out(
            1,
            f"PING {host} ({host}) 56(84) bytes of data.\n\n--- {host} ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n\n",
        )
    return Out(
        0,
        f"PING {host} ({host}) 56(84) bytes of data.\n64 bytes from {host}: icmp_seq=1 ttl=64 time=0.211 ms\n\n"
        f"--- {host} ping statistics ---\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
        "rtt min/avg/max/mdev = 0.211/0.211/0.211/0.000 ms\n",
    )


def _curl(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    from urllib.parse import urlsplit

    args = argv[1:]
    method = None
    data: str | None = None
    headers: dict[str, str] = {}
    url = ""
    write_out = ""
    fail = False
    timeout = 30.0
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a in ("-X", "--request"):
            method, i = nxt, i + 2
        elif a in ("-d", "--data", "--data-raw", "--data-binary"):
            data, i = (stdin if nxt == "@-" else nxt), i + 2
        elif a in ("-H", "--header"):
            if ":" in nxt:
                k, v = nxt.split(":", 1)
                headers[k.strip()] = v.strip()
            i += 2
        elif a in ("-w", "--write-out"):
            write_out, i = nxt, i + 2
        elif a in ("-m", "--max-time", "--connect-timeout"):
            with contextlib.suppress(ValueError):
                timeout = float(nxt)
            i += 2
        elif a in ("-o", "--output", "-u", "--user"):
            i += 2
        elif a.startswith("-"):
            fail = fail or a in ("-f", "--fail") or ("f" in a[1:] and not a.startswith("--"))
            i += 1
        else:
            url, i = a, i + 1
    parts = urlsplit(url if "://" in url else "http://" + url)
    host, port = parts.hostname or "", parts.port or 80
    node = (
        ctx.node if host in ("127.0.0.1", "localhost", "0.0.0.0") else _find_node(ctx.world, host)
    )
    endpoint = (
        ctx.world.http_endpoint(node.name, port) if node is not None and node.is_up() else None
    )
    if endpoint is None:
        return Out(
            7,
            "",
            f"curl: (7) Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server\n",
        )
    full = endpoint + (parts.path or "/") + (("?" + parts.query) if parts.query else "")
    body = data.encode() if data is not None else None
    req = urllib.request.Request(
        full, data=body, method=method or ("POST" if body else "GET"), headers=headers
    )
    start = ctx.world.clock.now()
    try:
        with urllib.request.urlopen(
            req, timeout=max(1.0, timeout / max(ctx.world.clock.speed, 1.0) + 5)
        ) as resp:
            text = resp.read().decode("utf-8", "replace")
            status = resp.status
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        status = exc.code
    except (urllib.error.URLError, OSError, TimeoutError):
        return Out(
            28,
            "",
            f"curl: (28) Operation timed out after {int(timeout * 1000)} milliseconds with 0 bytes received\n",
        )
    elapsed = ctx.world.clock.now() - start
    if fail and status >= 400:
        return Out(22, "", f"curl: (22) The requested URL returned error: {status}\n")
    if write_out:
        w = write_out.replace("%{time_total}", f"{elapsed:.6f}").replace(
            "%{http_code}", str(status)
        )
        text += w.encode().decode("unicode_escape")
    return Out(0, text)


def _nvidia_smi(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return gpu.nvidia_smi(argv, ctx.world, ctx.node)


# ----------------------------------------------------------------------------- docker --


def _docker(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if len(argv) < 2:
        return Out(0, "Usage:  docker [OPTIONS] COMMAND\n")
    sub, args = argv[1], argv[2:]
    node, world = ctx.node, ctx.world
    now = world.clock.now()
    if sub == "container" and args:
        sub, args = args[0], args[1:]
    if sub == "ps":
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
        rows = [c for c in node.containers.values() if show_all or c.running]
        for f in filters:
            k, _, v = f.partition("=")
            if k == "label":
                lk, _, lv = v.partition("=")
                rows = [c for c in rows if lk in c.labels and (not lv or c.labels[lk] == lv)]
            elif k == "name":
                rows = [c for c in rows if v in c.name]
            elif k == "status":
                rows = [c for c in rows if c.state == v]
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
    if sub == "run":
        parsed = dk.parse_run(args)
        if isinstance(parsed, str):
            return Out(125, "", f"docker: {parsed}.\nSee 'docker run --help'.\n")
        opts, flags, rest = parsed
        if not rest:
            return Out(125, "", "docker: 'docker run' requires at least 1 argument.\n")
        name = (opts.get("--name") or [None])[-1] or f"sim_{len(node.containers) + 1}"
        if name in node.containers:
            c = node.containers[name]
            return Out(
                125,
                "",
                f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use by container "{c.id}". You have to remove (or rename) that container to be able to reuse that name.\n',
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
        if not detached:
            return Out(c.exit_code, c.log.text(world.clock.now()))
        return Out(0, c.id + "\n")
    if sub == "exec":
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
        cctx.sink_path = None  # type: ignore[attr-defined]
        r = dispatch(cmd, cctx, stdin)
        if detach:
            return Out(0)
        if cctx.blocked:
            ctx.blocked = True
            return Out(-9, r.out, r.err)
        return r
    if sub == "logs":
        ref = next((a for a in reversed(args) if not a.startswith("-") and not a.isdigit()), None)
        n, _rest, _flags = _count_opt([a.replace("--tail", "-n") for a in args], -1)
        c = dk.find(node, ref or "")
        if c is None:
            return Out(1, "", dk.no_such(ref or ""))
        lines = c.log.lines(world.clock.now())
        if n >= 0:
            lines = lines[-n:] if n else []
        return Out(0, "".join(line + "\n" for line in lines))
    if sub in ("stop", "kill", "rm", "restart", "start"):
        force = any(a in ("-f", "--force") for a in args)
        hard_stop = False
        refs: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-t", "--time", "-s", "--signal"):
                if a in ("-t", "--time") and i + 1 < len(args) and args[i + 1] == "0":
                    hard_stop = True
                i += 2
                continue
            if a.startswith("--time=") and a.endswith("=0"):
                hard_stop = True
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
                if c.running:
                    c.stopped_by_user = True
                    c.stop(
                        now,
                        137 if sub == "kill" or hard_stop else 143,
                        hard=sub == "kill" or hard_stop,
                    )
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
    if sub == "rename":
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
    if sub == "inspect":
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
    if sub in ("images", "image"):
        return Out(0, "REPOSITORY   TAG   IMAGE ID   CREATED   SIZE\n")
    if sub == "pull":
        return Out(
            0,
            f"Using default tag: latest\nStatus: Image is up to date for {args[-1] if args else ''}\n",
        )
    if sub in ("info", "version"):
        return Out(0, "Server Version: 28.3.3\n")
    return Out(1, "", f"docker: '{sub}' is not a docker command.\nSee 'docker --help'\n")


def _go_template(fmt: str, data: dict[str, object]) -> str:
    def sub(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr.startswith("json "):
            expr = expr[5:].strip()
            wrap = json.dumps
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


# --------------------------------------------------------------- inside a container --


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
    path = getattr(ctx, "sink_path", None)
    if path:
        _write_path(ctx, path, text, append=True)
    elif ctx.main:
        c.log.add_many(now, text.rstrip("\n").split("\n"))


def _sink_for(ctx: Ctx) -> TimedLog | None:
    c = ctx.container
    assert c is not None
    path = getattr(ctx, "sink_path", None)
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
        spec.arg("--dist-init-addr", default="?")  # type: ignore[attr-defined]
        if spec.kind == "sglang"  # type: ignore[attr-defined]
        else f"{spec.arg('--master-addr', default='?')}:{spec.arg('--master-port', default=29501)}"  # type: ignore[attr-defined]
    )
    nnodes = int(spec.num("--nnodes", default=1))  # type: ignore[attr-defined]
    waiting = world.sglang_waiting.setdefault(key, [])
    waiting[:] = [r for r in waiting if r.container.running]
    waiting.append(SglangRank(ctx.node, ctx.container, argv, dict(ctx.env), now, sink))  # type: ignore[arg-type]
    if ctx.main:
        ctx.container.main_engine = _Pending()  # type: ignore[union-attr]
    if len({r.node.name for r in waiting}) < nnodes:
        return
    world.sglang_waiting.pop(key, None)
    ranks = sorted(
        waiting, key=lambda r: int(parse_serve(r.argv, r.env).num("--node-rank", default=0))
    )  # type: ignore[union-attr]
    r0 = ranks[0]
    spec0 = parse_serve(r0.argv, r0.env)
    assert spec0 is not None
    e = Engine(world, spec0, r0.node, r0.container, now, r0.sink)  # type: ignore[arg-type]
    for i, r in enumerate(ranks):
        m = e._member(r.node, i, r.sink, is_head=i == 0)  # type: ignore[arg-type]
        e.members[r.node.name] = m
        e.rank_containers.append(r.container)
    e.plan()
    world.engines.append(e)
    http.serve(world, e)
    for r in ranks:
        if isinstance(r.container.main_engine, _Pending):
            r.container.main_engine = e


class _Pending:
    """A rank waiting for the others: alive until they come."""

    dead_at = None

    def alive(self, now: float) -> bool:
        return True


def _find(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`find / -xdev -type f -name 'libnccl.so.2*' -printf '%s %p\\n' -exec sha256sum {} +`
    in a container: the image's NCCL files (one build, or the OS's and the wheel's)."""
    pattern = argv[argv.index("-name") + 1] if "-name" in argv else ""
    if "libnccl" not in pattern:
        return Out(0, "")
    files = ctx.world.faults.nccl_files()
    out = "".join(f"{size} {path}\n" for path, size, _ in files)
    out += "".join(f"{digest}  {path}\n" for path, _, digest in files)
    return Out(0, out)


def _python(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if (
        len(argv) >= 3
        and argv[1] == "-m"
        and argv[2] in ("sglang.launch_server", "vllm.entrypoints.openai.api_server")
    ):
        return _serve(argv, ctx, stdin)
    if len(argv) >= 2 and argv[1] in ("--version", "-V"):
        return Out(0, "Python 3.12.3\n")
    return Out(1, "", f"{argv[0]}: simulated node: only engine launches are available\n")


def _vllm(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if len(argv) > 1 and argv[1] == "serve":
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


def run_main_process(c: SimContainer) -> None:
    """A container's main command, run when it starts; it keeps running if it blocks."""
    world = c.node.world
    argv = c.command or ["sleep", "infinity"]
    ctx = Ctx(world, c.node, c, dict(c.env), root=True, detached=False, main=True)
    ctx.sink_path = None  # type: ignore[attr-defined]
    if argv[0] in ("sh", "bash") and len(argv) >= 3 and argv[1] == "-c":
        r = run_script(argv[2], ctx)
    else:
        r = dispatch(list(argv), ctx)
    now = world.clock.now()
    if r.out or r.err:
        c.log.add_many(now, (r.out + r.err).rstrip("\n").split("\n"))
    if not ctx.blocked:
        # the main process ended: the container exits with its code
        c.state = "exited"
        c.exit_code = r.rc
        c.finished_at = now
        if c.ray is not None:
            c.ray = None


_BUILTINS = {
    "exit": _exit,
    "sudo": _sudo,
    "sh": _shell,
    "bash": _shell,
    "export": _export,
    "unset": _unset,
    "echo": _echo,
    "printf": _printf,
    "cat": _cat,
    "ls": _ls,
    "test": _test,
    "[": _test,
    "mv": _mv,
    "rm": _rm,
    "true": _true,
    ":": _true,
    "false": _false,
    "sleep": _sleep,
    "sync": _sync,
    "grep": _grep,
    "tail": _tail,
    "head": _head,
    "wc": _wc,
    "tee": _tee,
    "env": _env,
    "nohup": _nohup,
    "timeout": _timeout,
    "hostname": _hostname,
    "whoami": _whoami,
    "id": _id,
    "free": _free,
    "nvidia-smi": _nvidia_smi,
    "cd": _true,
    "curl": _curl,
    "ip": _ip,
}
_HOST = {
    "reboot": _reboot,
    "shutdown": _reboot,
    "systemctl": _reboot,
    "ibdev2netdev": _ibdev2netdev,
    "dmesg": _dmesg,
    "journalctl": _journalctl,
    "ss": _ss,
    "ssh": _ssh,
    "ping": _ping,
    "docker": _docker,
}


def _entrypoint_script(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """The avarok/dgx-vllm image's `ray-head` / `ray-worker` entrypoints (seed 003): they
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


_CONTAINER = {
    "ray-head": _entrypoint_script,
    "ray-worker": _entrypoint_script,
    "ray": _ray,
    "vllm": _vllm,
    "pkill": _pkill,
    "find": _find,
}
