"""Files of a simulated node or container: /proc, /sys/class/net, sysctl writes
(drop_caches), root-only paths, and the commands that read and move them (cat, ls, test,
mv, rm, sync, sysctl, find, stat, sha256sum, cd).

Checkpoint shards are not stored: each one's content is a short stand-in line naming its file
and size (so its sha256 is that of name and size, and a truncated copy's differs); a shard
written by a command (a copy fetched from another node) is kept in the node's files and
stands in for the listed one."""

from __future__ import annotations

import fnmatch
import hashlib
import re
from typing import Any

from spark_tui.sim.shell.context import Command, Ctx, Out
from spark_tui.sim.timedlog import TimedLog

ROOT_ONLY_PREFIXES = ("/proc/sys/", "/etc/", "/sys/", "/usr/", "/boot/")


def read_path(ctx: Ctx, path: str) -> str | None:
    node, now = ctx.node, ctx.world.clock.now()
    path = ctx.path(path)
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
    if path in node.files:
        return node.files[path]
    return shard_on_disk(ctx).get(path)


def write_path(ctx: Ctx, path: str, text: str, append: bool) -> tuple[int, str]:
    node = ctx.node
    path = ctx.path(path)
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
    path = ctx.path(path)
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
    src, dst = ctx.path(args[0]), ctx.path(args[1])
    files: dict[str, Any] = ctx.container.files if ctx.container is not None else ctx.node.files
    if src not in files and ctx.container is None and src in (on_disk := shard_on_disk(ctx)):
        files[src] = on_disk[src]  # a listed shard moved: its content goes with it
        ctx.node.shards_moved.add(src)
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
    args = [ctx.path(a) for a in argv[1:] if not a.startswith("-")]
    files = ctx.container.files if ctx.container is not None else ctx.node.files
    rc, err = 0, ""
    for a in args:
        if ctx.container is None and _rm_model_dirs(ctx, a):
            continue
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


def _rm_model_dirs(ctx: Ctx, path: str) -> bool:
    """`rm -r` of a model checkpoint directory (or a directory above it) on the node: the
    checkpoints under it are gone. Whether any was."""
    home = ctx.env.get("HOME", "/home/milo").rstrip("/")
    top = path.rstrip("/") or "/"
    if not top.startswith("/"):  # an ssh command's path, relative to the login directory
        top = f"{home}/{top}"

    def under_home(key: str) -> str:  # the checkpoint's path with the node's $HOME
        for prefix in ("~/", "/root/"):
            if key.startswith(prefix):
                return f"{home}/{key[len(prefix) :]}"
        return key if key.startswith("/") else f"{home}/{key}"

    gone = [
        key
        for key in ctx.node.models
        if under_home(key) == top or under_home(key).startswith(top + "/")
    ]
    for key in gone:
        del ctx.node.models[key]
    return bool(gone)


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
    if "-print0" in argv:
        fmt = "%p\0"
    skip = {"-name", "-printf", "-type", "-maxdepth", "-mindepth"}
    roots, i = [], 1
    while i < len(argv):
        a = argv[i]
        if a in skip:
            i += 2
            continue
        if not a.startswith("-") and not a.startswith("("):
            roots.append(a.rstrip("/") or "/")
        i += 1
    home = ctx.env.get("HOME", "/home/milo")
    out: list[str] = []
    missing: list[str] = []
    for root in roots or ["."]:
        where = ctx.path(root)  # find names what it finds from the root as given
        files = [(p, n) for p, n in checkpoint_files(ctx, home) if p.startswith(where + "/")]
        if (
            not files
            and not exists(ctx, where)
            and not any(d.startswith(where + "/") or d == where for d, _ in _model_dirs(ctx, home))
        ):
            missing.append(f"find: '{root}': No such file or directory\n")
        for path, size in files:
            if fnmatch.fnmatch(path.rsplit("/", 1)[-1], pattern):
                shown = root + path[len(where) :]
                line = fmt.replace("%s", str(size)).replace("%p", shown).replace("\\n", "\n")
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


SHARD_MARK = "spark-sim-safetensors "


def shard_content(path: str, size: int) -> str:
    """The stand-in content of a shard of `size` bytes: its sha256 is that of name and size."""
    return f"{SHARD_MARK}{path.rsplit('/', 1)[-1]} {size}\n"


def file_size(text: str) -> int:
    """A file's size in bytes (a shard's stand-in gives the size it stands for)."""
    if text.startswith(SHARD_MARK):
        return int(text.split()[-1])
    return len(text.encode())


def corrupt_node(world: Any) -> str | None:
    """The node whose copy of the corrupt shard is short (the last node unless named)."""
    if world.faults.corrupt_shard is None:
        return None
    return world.faults.corrupt_node or (list(world.nodes)[-1] if world.nodes else None)


def _listed_shards(ctx: Ctx, home: str, fault: bool = True) -> list[tuple[str, int]]:
    """Every shard of every checkpoint as the node's disk had it: a Hub cache entry keeps them
    under snapshots/; the scenario's corrupt shard is short on one node."""
    from spark_tui.sim import models

    corrupt = ctx.world.faults.corrupt_shard
    here = fault and corrupt_node(ctx.world) == ctx.node.name
    files: list[tuple[str, int]] = []
    for directory, size in _model_dirs(ctx, home):
        name = directory.rsplit("/", 1)[-1]
        shards = models.info(name.replace("models--", "").replace("--", "/")).shards
        short = round(corrupt[0] / corrupt[1] * shards) if corrupt and here else None
        where = f"{directory}/snapshots/main" if name.startswith("models--") else directory
        for k in range(1, shards + 1):
            bytes_ = size // shards if k != short else size // shards * 37 // 100
            files.append((f"{where}/model-{k:05d}-of-{shards:05d}.safetensors", bytes_))
    return files


def shard_on_disk(ctx: Ctx) -> dict[str, str]:
    """The listed shards still in place (not moved away), by path: their stand-in content."""
    if ctx.container is not None:
        return {}
    home = ctx.env.get("HOME", "/home/milo")
    moved = ctx.node.shards_moved
    return {p: shard_content(p, n) for p, n in _listed_shards(ctx, home) if p not in moved}


def checkpoint_files(ctx: Ctx, home: str) -> list[tuple[str, int]]:
    """Every shard on the node now, sorted: the listed ones in place, and those written since."""
    moved = ctx.node.shards_moved
    files = {p: n for p, n in _listed_shards(ctx, home) if p not in moved}
    dirs = [d for d, _ in _model_dirs(ctx, home)]
    for path, text in ctx.node.files.items():
        if path.endswith(".safetensors") and any(path.startswith(d + "/") for d in dirs):
            files[path] = file_size(text)
    return sorted(files.items())


def truncated_shards(ctx: Ctx) -> list[str]:
    """The shards on the node shorter than a whole copy (what a weight load dies on)."""
    home = ctx.env.get("HOME", "/home/milo")
    whole = dict(_listed_shards(ctx, home, fault=False))
    return [p for p, n in checkpoint_files(ctx, home) if p in whole and n != whole[p]]


def _stat(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`stat [-L] -c FMT FILE...` (%s size, %n name as given, %% a percent sign)."""
    args, fmt, names = argv[1:], None, []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-c", "--format") or (a.startswith("-") and a.endswith("c") and a != "--"):
            fmt = args[i + 1] if i + 1 < len(args) else ""
            i += 2
            continue
        if a.startswith("--format="):
            fmt = a.split("=", 1)[1]
        elif not a.startswith("-") or a == "-":
            names.append(a)
        i += 1
    if not names:
        return Out(1, "", "stat: missing operand\n")
    out, err, rc = "", "", 0
    for name in names:
        text = read_path(ctx, name)
        if text is None:
            err += f"stat: cannot statx '{name}': No such file or directory\n"
            rc = 1
            continue
        size = file_size(text)
        if fmt is None:
            out += f"  File: {name}\n  Size: {size}\n"
            continue
        line = fmt.replace("%%", "\0").replace("%s", str(size)).replace("%n", name)
        out += line.replace("\0", "%") + "\n"
    return Out(rc, out, err)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256sum(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`sha256sum FILE...` and `sha256sum -c [--quiet] [FILE|-]` (check lines `SHA  NAME`)."""
    args = argv[1:]
    check = any(a in ("-c", "--check") for a in args)
    quiet = "--quiet" in args
    names = [a for a in args if not a.startswith("-") or a == "-"]
    if not check:
        out, err, rc = "", "", 0
        for name in names or ["-"]:
            text = stdin if name == "-" else read_path(ctx, name)
            if text is None:
                err += f"sha256sum: {name}: No such file or directory\n"
                rc = 1
                continue
            out += f"{_sha256(text)}  {name}\n"
        return Out(rc, out, err)
    lines = ""
    for name in names or ["-"]:
        text = stdin if name == "-" else read_path(ctx, name)
        if text is None:
            return Out(1, "", f"sha256sum: {name}: No such file or directory\n")
        lines += text
    out, err, bad, unread, checked = "", "", 0, 0, 0
    for line in lines.splitlines():
        m = re.fullmatch(r"([0-9a-fA-F]{64}) [ *](.+)", line)
        if m is None:
            continue
        checked += 1
        want, name = m.group(1).lower(), m.group(2)
        text = read_path(ctx, name)
        if text is None:
            err += f"sha256sum: {name}: No such file or directory\n"
            out += f"{name}: FAILED open or read\n"
            unread += 1
        elif _sha256(text) != want:
            out += f"{name}: FAILED\n"
            bad += 1
        elif not quiet:
            out += f"{name}: OK\n"
    if not checked:
        return Out(1, "", "sha256sum: -: no properly formatted checksum lines found\n")
    if unread:
        s = "s" if unread > 1 else ""
        err += f"sha256sum: WARNING: {unread} listed file{s} could not be read\n"
    if bad:
        s = "s" if bad > 1 else ""
        err += f"sha256sum: WARNING: {bad} computed checksum{s} did NOT match\n"
    return Out(1 if bad or unread else 0, out, err)


def _is_dir(ctx: Ctx, path: str) -> bool:
    """A directory the node has: one of its files' (or checkpoints') parents, $HOME, /."""
    home = ctx.env.get("HOME", "/home/milo")
    if path in ("/", "/tmp", home) or home.startswith(path + "/"):
        return True
    files = ctx.container.files if ctx.container is not None else ctx.node.files
    prefix = path + "/"
    if any(k.startswith(prefix) for k in files):
        return True
    if ctx.container is not None:
        return False
    return any(
        d == path or d.startswith(prefix) or path.startswith(d + "/")
        for d, _ in _model_dirs(ctx, home)
    )


def _cd(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`cd [DIR]`: enters DIR when the node has it (sh's message when not)."""
    args = [a for a in argv[1:] if a != "--"]
    target = args[0] if args else ctx.env.get("HOME", "/home/milo")
    where = ctx.path(target) if ctx.cwd is not None or target.startswith("/") else None
    if where is None:  # relative, before any cd: from $HOME (where ssh starts)
        where = ctx.child(cwd=ctx.env.get("HOME", "/home/milo")).path(target)
    if ctx.container is not None:
        return Out(0)  # a container's directories are not kept: there cd changes nothing
    if not _is_dir(ctx, where):
        return Out(2, "", f"sh: 1: cd: can't cd to {target}\n")
    ctx.cwd = where
    return Out(0)


def _du(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`du -sbL -- PATH`: the size of a model checkpoint the node holds (the write-ups' models
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
    "stat": Command(_stat),
    "sha256sum": Command(_sha256sum),
    "cd": Command(_cd),
}
