"""sh built-ins and the small utilities every node has: exit, sudo, sh -c, export, echo,
printf, true/false, sleep, env, nohup, timeout."""

from __future__ import annotations

from spark_tui.sim.shell.context import Command, Ctx, Out
from spark_tui.sim.shell.interpreter import ShellExit, dispatch, run_script


def _exit(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    try:
        rc = int(argv[1]) if len(argv) > 1 else ctx.last_rc
    except ValueError:
        return Out(2, "", f"sh: 1: exit: Illegal number: {argv[1]}\n")
    raise ShellExit(rc & 0xFF, Out())


def _sudo(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    rest = argv[1:]
    options = []
    while rest and rest[0].startswith("-"):
        options.append(rest[0])
        rest = rest[2:] if rest[0] in ("-u", "-g") else rest[1:]
    if not rest:
        return Out(1, "", "usage: sudo -h | -K | -k | -V\n")
    if "-l" in options:  # `sudo -l CMD`: is it allowed? (it is, here) — nothing runs
        return Out(0, " ".join([f"/usr/bin/{rest[0]}", *rest[1:]]) + "\n")
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


def _xargs(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`xargs [-0] [-r] COMMAND [ARG...]`: runs COMMAND with ARGs and then the items read from
    stdin (NUL-separated with -0, else blank-separated); with -r, not at all when there are none."""
    args = argv[1:]
    nul = no_run = False
    while args and args[0].startswith("-") and len(args[0]) > 1:
        flag = args.pop(0)
        if flag == "--":
            break
        if flag in ("--null",):
            nul = True
        elif flag in ("--no-run-if-empty",):
            no_run = True
        else:
            nul = nul or "0" in flag
            no_run = no_run or "r" in flag
    items = stdin.split("\0") if nul else stdin.split()
    if nul and items[-1:] == [""]:
        items.pop()
    if not items and no_run:
        return Out(0)
    r = dispatch([*(args or ["echo"]), *items], ctx.child(), "")
    # xargs exits 123 when the command failed, 127 when it is not found (GNU findutils)
    return Out(r.rc if r.rc in (0, 127) else 123, r.out, r.err)


COMMANDS = {
    "xargs": Command(_xargs),
    "exit": Command(_exit),
    "sudo": Command(_sudo),
    "sh": Command(_shell),
    "bash": Command(_shell),
    "export": Command(_export),
    "unset": Command(_unset),
    "echo": Command(_echo),
    "printf": Command(_printf),
    "true": Command(_true),
    ":": Command(_true),
    "false": Command(_false),
    "sleep": Command(_sleep),
    "env": Command(_env),
    "nohup": Command(_nohup),
    "timeout": Command(_timeout),
}
