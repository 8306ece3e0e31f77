"""Who and what a simulated node is: hostname, whoami, id, free, nvidia-smi, the kernel
log (dmesg, journalctl) and reboot."""

from __future__ import annotations

import re

from spark_tui.sim import gpu
from spark_tui.sim.processes import executable, find_process, node_processes, stdout_target
from spark_tui.sim.shell.context import HOST, Command, Ctx, Out


def _hostname(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if "-I" in argv:
        return Out(0, f"{ctx.node.mgmt_ip} {ctx.node.fabric_ip}\n")
    return Out(0, ctx.node.name + "\n")


def _uname(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """uname -r (the kernel release), -n (the host name), -m, -s; -a all of them."""
    n = ctx.node
    fields = {
        "-s": "Linux",
        "-n": n.name,
        "-r": n.kernel,
        "-v": "#1 SMP PREEMPT_DYNAMIC",
        "-m": "aarch64",
    }
    if "-a" in argv:
        return Out(0, " ".join([*fields.values(), "aarch64 aarch64 GNU/Linux"]) + "\n")
    wanted = [fields[a] for a in argv[1:] if a in fields] or ["Linux"]
    return Out(0, " ".join(wanted) + "\n")


def _whoami(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0, ("root" if ctx.root or ctx.container is not None else "milo") + "\n")


def _id(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if "-u" in argv:
        return Out(0, ("0" if ctx.root else "1000") + "\n")
    return Out(0, "uid=1000(milo) gid=1000(milo) groups=1000(milo),27(sudo),986(docker)\n")


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


def _nvidia_smi(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return gpu.nvidia_smi(argv, ctx.world, ctx.node)


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


def _dmesg(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    now = ctx.world.clock.now()
    return Out(0, "".join(line + "\n" for t, line in ctx.node.dmesg if t <= now))


def _ps(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`ps -ww -eo pid=,uid=,args=`: the processes the host sees in its running containers
    (root's: a container's processes run as root)."""
    rows = node_processes(ctx.world, ctx.node)
    return Out(0, "".join(f"{p.pid:>7} {0:>5} {p.args}\n" for p in rows))


def _readlink(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`readlink /proc/PID/fd/N`: where a process's output goes (a file, or docker's pipe);
    `readlink /proc/PID/exe`: its executable."""
    paths = [a for a in argv[1:] if not a.startswith("-")]
    out, rc = "", 0
    for path in paths:
        m = re.fullmatch(r"/proc/(\d+)/(fd/[12]|exe)", path)
        proc = find_process(ctx.world, ctx.node, int(m.group(1))) if m else None
        if proc is None or m is None:
            rc = 1
            continue
        out += (stdout_target(proc) if m.group(2) != "exe" else executable(proc)) + "\n"
    return Out(rc, out)


def _hf(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`hf download REPO [--force-download]` (and `huggingface-cli download`): a forced
    download replaces a truncated shard; a plain one trusts the cached blob, as the Hub
    client does."""
    from dataclasses import replace

    args = argv[1:]
    if not args or args[0] != "download" or len(args) < 2:
        return Out(2, "", f"usage: {argv[0]} download REPO_ID [FILES...] [--force-download]\n")
    repo = args[1]
    world = ctx.world
    if "--force-download" in args and world.faults.corrupt_shard is not None:
        world.faults = replace(world.faults, corrupt_shard=None)
    path = f"/root/.cache/huggingface/hub/models--{repo.replace('/', '--')}"
    return Out(0, f"Fetching files of {repo}: 100%\n{path}/snapshots/main\n")


def _journalctl(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0, "-- No entries --\n")


COMMANDS = {
    "hostname": Command(_hostname),
    "uname": Command(_uname),
    "whoami": Command(_whoami),
    "id": Command(_id),
    "free": Command(_free),
    "nvidia-smi": Command(_nvidia_smi),
    "reboot": Command(_reboot, HOST),
    "shutdown": Command(_reboot, HOST),
    "systemctl": Command(_reboot, HOST),
    "dmesg": Command(_dmesg, HOST),
    "journalctl": Command(_journalctl, HOST),
    "ps": Command(_ps, HOST),
    "hf": Command(_hf, HOST),
    "readlink": Command(_readlink, HOST),
    "huggingface-cli": Command(_hf, HOST),
}
