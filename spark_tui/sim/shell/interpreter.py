"""The sh interpreter of a simulated node: lists, pipes, expansions, redirections, and
dispatch of each command through the one registry (spark_tui.sim.shell.registry)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from spark_tui.sim import sh
from spark_tui.sim.shell.context import Ctx, Out
from spark_tui.sim.shell.files import read_path, write_path
from spark_tui.sim.shell.registry import lookup

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer


class ShellExit(Exception):
    def __init__(self, rc: int, out: Out) -> None:
        self.rc = rc
        self.out = out


def run_script(script: str, ctx: Ctx, stdin: str = "") -> Out:
    """Run a script (one or more command lines) and return its exit code and output."""
    total = Out()
    try:
        return _run_script(script, ctx, stdin, total)
    except ShellExit as ex:
        total.out += ex.out.out
        total.err += ex.out.err
        total.rc = ex.rc
        ctx.last_rc = ex.rc
        return total


def _run_script(script: str, ctx: Ctx, stdin: str, total: Out) -> Out:
    try:
        pipelines = sh.parse(script)
    except sh.ShellSyntaxError as exc:
        return Out(2, "", f"sh: 1: {exc}\n")
    try:
        return _run_list(pipelines, ctx, stdin, total)
    except sh.ShellSyntaxError as exc:
        total.err += f"sh: 1: {exc}\n"
        total.rc = 2
        return total


OPENERS = {"for": "done", "while": "done", "until": "done", "if": "fi", "{": "}"}


def _head(p: sh.Pipeline) -> str | None:
    """The first word of a pipeline when it is a reserved word (for, do, done, if, …)."""
    words = p.commands[0].words if p.commands else []
    first = words[0].literal() if words else None
    return first if first in (*OPENERS, "do", "done", "then", "else", "elif", "fi", "}") else None


def _without_head(p: sh.Pipeline) -> sh.Pipeline | None:
    """The pipeline after its reserved word (None when nothing follows it)."""
    first, *rest = p.commands
    if len(first.words) <= 1 and not first.redirs:
        return sh.Pipeline(rest, p.connector) if rest else None
    return sh.Pipeline([sh.Command(first.words[1:], first.redirs), *rest], p.connector)


def _block(
    pipes: list[sh.Pipeline], i: int, ends: tuple[str, ...], first: sh.Pipeline | None = None
) -> tuple[list, int]:
    """Pipelines from i up to (not with) the first one starting with one of `ends` at this
    depth, and that one's index; `first` is what followed the reserved word opening the
    block (an `if` after `do` opens a level)."""
    depth = 1 if first is not None and _head(first) in OPENERS else 0
    out: list = []
    while i < len(pipes):
        head = _head(pipes[i])
        if depth == 0 and head in ends:
            return out, i
        if head in OPENERS:
            depth += 1
        elif head in ("done", "fi", "}"):
            depth -= 1
        out.append(pipes[i])
        i += 1
    raise sh.ShellSyntaxError(f"Syntax error: end of file unexpected (expecting {ends[0]!r})")


def _run_list(pipes: list[sh.Pipeline], ctx: Ctx, stdin: str, total: Out) -> Out:
    """Run pipelines joined by ; && || &, with for/do/done and if/then/else/fi as sh has."""
    prev_connector = ";"
    i = 0
    while i < len(pipes):
        p = pipes[i]
        run = not (
            (prev_connector == "&&" and ctx.last_rc != 0)
            or (prev_connector == "||" and ctx.last_rc == 0)
        )
        head = _head(p)
        if head == "for":
            words = p.commands[0].words
            if len(words) < 3 or words[2].literal() != "in":
                raise sh.ShellSyntaxError("Syntax error: for NAME in WORDS expected")
            var = words[1].literal() or ""
            _, j = _block(pipes, i + 1, ("do",))
            opening = _without_head(pipes[j])
            body, end = _block(pipes, j + 1, ("done",), opening)
            body = [b for b in (opening, *body) if b is not None]
            if run:
                items = [f for w in words[3:] for f in _expand(w, ctx)]
                ctx.last_rc = 0
                for item in items:
                    ctx.env[var] = item
                    _run_list(body, ctx, stdin, total)
                total.rc = ctx.last_rc
            prev_connector, i = pipes[end].connector, end + 1
            continue
        if head == "{":  # a group: its commands in this shell, the closing brace's redirects
            opening = _without_head(p)
            body, end = _block(pipes, i + 1, ("}",), opening)
            body = [b for b in (opening, *body) if b is not None]
            if run:
                group = Out()
                _run_list(body, ctx, stdin, group)
                for redir in pipes[end].commands[0].redirs:
                    target = " ".join(_expand(redir.target, ctx))
                    if redir.op in (">", ">>") and target == "/dev/null":
                        if redir.fd in (2, -1):
                            group.err = ""
                        if redir.fd in (1, -1):
                            group.out = ""
                total.out += group.out
                total.err += group.err
                total.rc = ctx.last_rc
            prev_connector, i = pipes[end].connector, end + 1
            continue
        if head == "if":
            opening = _without_head(p)
            cond, j = _block(pipes, i + 1, ("then",), opening)
            cond = [c for c in (opening, *cond) if c is not None]
            opening = _without_head(pipes[j])
            then, k = _block(pipes, j + 1, ("else", "fi"), opening)
            then = [t for t in (opening, *then) if t is not None]
            other: list[sh.Pipeline] = []
            end = k
            if _head(pipes[k]) == "else":
                opening = _without_head(pipes[k])
                other, end = _block(pipes, k + 1, ("fi",), opening)
                other = [o for o in (opening, *other) if o is not None]
            if run:
                _run_list(cond, ctx, stdin, total)
                branch = then if ctx.last_rc == 0 else other
                ctx.last_rc = 0
                _run_list(branch, ctx, stdin, total)
                total.rc = ctx.last_rc
            prev_connector, i = pipes[end].connector, end + 1
            continue
        if run:
            r = _run_pipeline(p, ctx, stdin, background=p.connector == "&")
            total.out += r.out
            total.err += r.err
            ctx.last_rc = r.rc
            total.rc = r.rc
            if ctx.blocked:
                return total
        prev_connector = p.connector
        i += 1
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


def _is_assignment(word: sh.Word) -> bool:
    first = word.segs[0] if word.segs else None
    return (
        first is not None
        and first.kind == "lit"
        and not first.quoted
        and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", first.value) is not None
    )


def _expand_whole(word: sh.Word, ctx: Ctx) -> str:
    """A word expanded as one field, as if quoted (no field splitting, no globs)."""
    quoted = sh.Word([replace(seg, quoted=True) for seg in word.segs])
    return "".join(_expand(quoted, ctx))


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
    leading = True
    for w in cmd.words:
        # a leading NAME=value is an assignment: its value is not split into fields (sh)
        leading = leading and _is_assignment(w)
        words += [_expand_whole(w, ctx)] if leading else _expand(w, ctx)
    redirs = [(r.fd, r.op, " ".join(_expand(r.target, ctx))) for r in cmd.redirs]
    # leading assignments
    assigns: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.DOTALL):
        k, v = words.pop(0).split("=", 1)
        assigns[k] = v
    # `exec CMD`: CMD replaces the shell (sh ends with CMD's status; in a container's main
    # shell CMD becomes the main process, the one `docker stop` signals)
    replaces = bool(words) and words[0] == "exec"
    if replaces:
        words = words[1:]
        if ctx.main and ctx.container is not None and words:
            ctx.container.main_is_shell = False
    if not words:
        ctx.env.update(assigns)
        return Out(0)  # `exec` with redirections only (this shell's own streams): not modelled
    run_ctx = ctx.child() if assigns else ctx
    run_ctx.env.update(assigns)
    # where a long-running process writes
    sink_path: str | None = tee_target
    for fd, op, target in redirs:
        if fd in (1, -1) and op in (">", ">>") and target != "/dev/null":
            sink_path = target
    for fd, op, target in redirs:
        if fd == 0 and op == "<":
            text = read_path(ctx, target)
            if text is None:
                return Out(2, "", f"sh: 1: cannot open {target}: No such file\n")
            stdin = text
    run_ctx.sink_path = sink_path
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
        wrc, werr = write_path(ctx, target, text, append=op == ">>")
        if wrc:
            return Out(wrc, "", werr)
    if replaces:  # nothing after it runs in this shell
        raise ShellExit(res.rc, Out(res.rc, out, err))
    return Out(res.rc, out, err)


def not_found(name: str) -> Out:
    return Out(127, "", f"sh: 1: {name}: command not found\n")


def dispatch(argv: list[str], ctx: Ctx, stdin: str = "") -> Out:
    """Run one command (argv already expanded) where ctx says; 127 when it does not exist."""
    fn = lookup(argv[0], in_container=ctx.container is not None)
    if fn is None:
        return not_found(argv[0])
    r = fn(argv, ctx, stdin)
    ctx.last_rc = r.rc
    return r


def run_main_process(c: SimContainer) -> None:
    """A container's main command, run when it starts; it keeps running if it blocks."""
    world = c.node.world
    argv = c.command or ["sleep", "infinity"]
    ctx = Ctx(world, c.node, c, dict(c.env), root=True, detached=False, main=True)
    # a shell as the main process (PID 1) until it `exec`s its program
    c.main_is_shell = argv[0] in ("sh", "bash") and len(argv) >= 3 and argv[1] == "-c"
    r = run_script(argv[2], ctx) if c.main_is_shell else dispatch(list(argv), ctx)
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
