"""Files of a simulated node or container: /proc, /sys/class/net, sysctl writes
(drop_caches), root-only paths, and the commands that read and move them (cat, ls, test,
mv, rm, sync, sysctl, find)."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from spark_tui.sim.shell.context import Command, Ctx, Out
from spark_tui.sim.timedlog import TimedLog

ROOT_ONLY_PREFIXES = ("/proc/sys/", "/etc/", "/sys/", "/usr/", "/boot/")


def read_path(ctx: Ctx, path: str) -> str | None:
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
    if m := re.fullmatch(r"/proc/(\d+)/cgroup", path):
        from spark_tui.sim.processes import cgroup, find_process

        proc = find_process(ctx.world, node, int(m.group(1)))
        return cgroup(proc) if proc is not None else None
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


def write_path(ctx: Ctx, path: str, text: str, append: bool) -> tuple[int, str]:
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


def _cat(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    files = [a for a in argv[1:] if not a.startswith("-") or a == "-"]
    if not files:
        return Out(0, stdin)
    out, err, rc = "", "", 0
    for f in files:
        text = stdin if f == "-" else read_path(ctx, f)
        if text is None:
            err += f"cat: {f}: No such file or directory\n"
            rc = 1
        else:
            out += text
    return Out(rc, out, err)


def exists(ctx: Ctx, path: str) -> bool:
    return read_path(ctx, path) is not None or any(
        k.startswith(path.rstrip("/") + "/")
        for k in (ctx.container.files if ctx.container else ctx.node.files)
    )


def _ls(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    paths = [a for a in argv[1:] if not a.startswith("-")]
    out, err, rc = "", "", 0
    for p in paths or ["."]:
        if p == "." or exists(ctx, p):
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
        ok = exists(ctx, args[1])
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
    files: dict[str, Any] = ctx.container.files if ctx.container is not None else ctx.node.files
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


def _sync(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0)


def _sysctl(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`sysctl -w KEY=VALUE` (as root) writes /proc/sys/KEY; `sysctl KEY` reads it."""
    out, err, rc = "", "", 0
    for arg in argv[1:]:
        if arg.startswith("-"):
            continue
        key, eq, value = arg.partition("=")
        path = "/proc/sys/" + key.replace(".", "/")
        if eq:
            code, _ = write_path(ctx, path, value + "\n", append=False)
            if code:
                err += f'sysctl: permission denied on key "{key}"\n'
                rc = 1
                continue
            out += f"{key} = {value}\n"
        else:
            text = read_path(ctx, path)
            if text is None:
                err += f"sysctl: cannot stat {path}: No such file or directory\n"
                rc = 1
                continue
            out += f"{key} = {text.strip()}\n"
    return Out(rc, out, err)


def _find(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`find [-L] ROOT... [-name GLOB] [-printf FMT]`: in a container, the image's NCCL files
    (`find / -xdev -type f -name 'libnccl.so.2*' -printf '%s %p\\n' -exec sha256sum {} +`);
    on a node, the model checkpoints it holds under ROOT, shard by shard (a truncated shard
    short, as the weight load finds it)."""
    pattern = argv[argv.index("-name") + 1] if "-name" in argv else "*"
    if ctx.container is not None:
        if "libnccl" not in pattern:
            return Out(0, "")
        nccl = ctx.world.faults.nccl_files()
        listing = "".join(f"{size} {path}\n" for path, size, _ in nccl)
        listing += "".join(f"{digest}  {path}\n" for path, _, digest in nccl)
        return Out(0, listing)
    if len(argv) > 1 and argv[1].startswith("/sys/fs/pstore"):  # root only, and empty:
        if not ctx.root:  # no crash was kept
            return Out(1, "", f"find: '{argv[1]}': Permission denied\n")
        return Out(0, "")
    fmt = argv[argv.index("-printf") + 1] if "-printf" in argv else "%p\\n"
    skip = {"-name", "-printf", "-type", "-maxdepth", "-mindepth"}
    roots, i = [], 1
    while i < len(argv):
        a = argv[i]
        if a in skip:
            i += 2
            continue
        if not a.startswith("-") and not a.startswith("("):
            roots.append(a.rstrip("/"))
        i += 1
    home = ctx.env.get("HOME", "/home/milo")
    out: list[str] = []
    missing: list[str] = []
    for root in roots or ["."]:
        files = [(p, n) for p, n in _checkpoint_files(ctx, home) if p.startswith(root + "/")]
        if (
            not files
            and not exists(ctx, root)
            and not any(d.startswith(root + "/") or d == root for d, _ in _model_dirs(ctx, home))
        ):
            missing.append(f"find: '{root}': No such file or directory\n")
        for path, size in files:
            if fnmatch.fnmatch(path.rsplit("/", 1)[-1], pattern):
                line = fmt.replace("%s", str(size)).replace("%p", path).replace("\\n", "\n")
                out.append(line)
    return Out(1 if missing else 0, "".join(out), "".join(missing))


def _model_dirs(ctx: Ctx, home: str) -> list[tuple[str, int]]:
    """The node's checkpoint directories (absolute host paths) and their sizes."""
    dirs: dict[str, int] = {}
    for path, size in ctx.node.models.items():
        if path.startswith("~/"):
            dirs[home + path[1:]] = size
        elif path.startswith("/"):
            dirs[path] = size
    return sorted(dirs.items())


def _checkpoint_files(ctx: Ctx, home: str) -> list[tuple[str, int]]:
    """Every shard of every checkpoint: a Hub cache entry keeps them under snapshots/."""
    from spark_tui.sim import models

    corrupt = ctx.world.faults.corrupt_shard
    files: list[tuple[str, int]] = []
    for directory, size in _model_dirs(ctx, home):
        name = directory.rsplit("/", 1)[-1]
        shards = models.info(name.replace("models--", "").replace("--", "/")).shards
        short = round(corrupt[0] / corrupt[1] * shards) if corrupt else None
        where = f"{directory}/snapshots/main" if name.startswith("models--") else directory
        for k in range(1, shards + 1):
            bytes_ = size // shards if k != short else size // shards * 37 // 100
            files.append((f"{where}/model-{k:05d}-of-{shards:05d}.safetensors", bytes_))
    return files


def _du(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`du -sbL -- PATH`: the size of a model checkpoint the node holds (the seeds' models
    sit on every node's disk before the story starts)."""
    paths = [a for a in argv[1:] if not a.startswith("-")]
    out, missing = [], []
    for path in paths:
        size = ctx.node.models.get(path.rstrip("/"))
        if size is None:
            missing.append(f"du: cannot access '{path}': No such file or directory\n")
        else:
            out.append(f"{size}\t{path}\n")
    return Out(1 if missing else 0, "".join(out), "".join(missing))


COMMANDS = {
    "cat": Command(_cat),
    "du": Command(_du),
    "ls": Command(_ls),
    "test": Command(_test),
    "[": Command(_test),
    "mv": Command(_mv),
    "rm": Command(_rm),
    "sync": Command(_sync),
    "sysctl": Command(_sysctl),
    "find": Command(_find),
}
