"""Text filters on a simulated node: grep, head, tail, wc, tee."""

from __future__ import annotations

import re

from spark_tui.sim.shell.context import Command, Ctx, Out
from spark_tui.sim.shell.files import read_path, write_path


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
            t = read_path(ctx, f)
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


def count_opt(args: list[str], default: int) -> tuple[int, list[str], set[str]]:
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


def _input(argv: list[str], ctx: Ctx, stdin: str) -> tuple[int, str | Out]:
    """head/tail's count and text: the first file named, or stdin (an Out: the error)."""
    n, files, _flags = count_opt(argv[1:], 10)
    if not files:
        return n, stdin
    text = read_path(ctx, files[0])
    if text is None:
        why = f"{argv[0]}: cannot open '{files[0]}' for reading: No such file or directory\n"
        return n, Out(1, "", why)
    return n, text


def _tail(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    n, files, flags = count_opt(argv[1:], 10)
    if len(files) > 1:  # coreutils: each file's last lines, under a header unless -q
        parts: list[str] = []
        err: list[str] = []
        for f in files:
            body = read_path(ctx, f)
            if body is None:
                err.append(f"tail: cannot open '{f}' for reading: No such file or directory\n")
                continue
            if "q" not in flags:
                parts.append(f"{chr(10) if parts else ''}==> {f} <==\n")
            parts += [line + "\n" for line in (body.splitlines()[-n:] if n else [])]
        return Out(1 if err else 0, "".join(parts), "".join(err))
    n, text = _input(argv, ctx, stdin)
    if isinstance(text, Out):
        return text
    lines = text.splitlines()
    last = lines[-n:] if n else []
    return Out(0, "".join(line + "\n" for line in last))


def _head(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    n, text = _input(argv, ctx, stdin)
    if isinstance(text, Out):
        return text
    return Out(0, "".join(line + "\n" for line in text.splitlines()[:n]))


def _wc(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    return Out(0, f"{len(stdin.splitlines())}\n")


def _tee(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    for f in [a for a in argv[1:] if not a.startswith("-")]:
        write_path(ctx, f, stdin, append="-a" in argv)
    return Out(0, stdin)


def _sort(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    """`sort [-n] [-r] [-u] [-z] [-k N[,M]] [-t SEP] [FILE...]`: coreutils' sort for the fields
    and flags scripts use (whitespace-separated fields unless -t)."""
    args, files, flags = argv[1:], [], set[str]()
    key: int | None = None
    sep: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-k", "-t") and i + 1 < len(args):
            value = args[i + 1]
            i += 1
            if a == "-k":
                key = int(value.split(",")[0].rstrip("nr") or 1)
                flags.update(c for c in value if c in "nr")
            else:
                sep = value
        elif a.startswith("-k") and len(a) > 2:
            key = int(a[2:].split(",")[0].rstrip("nr") or 1)
        elif a.startswith("-") and len(a) > 1:
            flags.update(a[1:])
        else:
            files.append(a)
        i += 1
    text = stdin
    if files:
        parts = [read_path(ctx, f) for f in files]
        missing = [f for f, t in zip(files, parts, strict=True) if t is None]
        if missing:
            return Out(2, "", f"sort: cannot read: {missing[0]}: No such file or directory\n")
        text = "".join(t or "" for t in parts)

    def field(line: str) -> str:
        if key is None:
            return line
        cols = line.split(sep) if sep is not None else line.split()
        return (sep or " ").join(cols[key - 1 :]) if len(cols) >= key else ""

    def order(line: str) -> tuple:
        f = field(line)
        if "n" in flags:
            head = f.split()[0] if f.split() else ""
            try:
                return (float(head), line)
            except ValueError:
                return (0.0, line)
        return (f, line)

    end = "\0" if "z" in flags else "\n"  # -z: records end with NUL, not newline
    records = text.split(end)
    if records and records[-1] == "":
        records.pop()
    lines = sorted(records, key=order, reverse="r" in flags)
    if "u" in flags:
        lines = list(dict.fromkeys(lines))
    return Out(0, "".join(line + end for line in lines))


COMMANDS = {
    "grep": Command(_grep),
    "sort": Command(_sort),
    "tail": Command(_tail),
    "head": Command(_head),
    "wc": Command(_wc),
    "tee": Command(_tee),
}
