"""A small POSIX-sh subset: enough to run the command lines spark-tui sends.

Words with single/double quotes, backslashes, $VAR, ${VAR}, $? and $( … );
lists with `;`, `&&`, `||`, `&` and newlines; pipes; redirections `>`, `>>`,
`<`, `2>`, `2>&1`, `&>`, `>/dev/null`. No loops or functions: a command line
that needs them is answered as sh would answer a missing command, loudly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPERATORS = ("&&", "||", ";;", ";", "|", "&", "\n")


class ShellSyntaxError(Exception):
    pass


@dataclass
class Seg:
    kind: str  # lit | var | sub
    value: str
    quoted: bool


@dataclass
class Word:
    segs: list[Seg] = field(default_factory=list)

    def literal(self) -> str | None:
        """The word's text when it has no expansion."""
        if all(s.kind == "lit" for s in self.segs):
            return "".join(s.value for s in self.segs)
        return None


@dataclass
class Redir:
    fd: int  # 1 or 2; 0 for input; -1 for both (&>)
    op: str  # > | >> | < | >&
    target: Word


@dataclass
class Command:
    words: list[Word] = field(default_factory=list)
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class Pipeline:
    commands: list[Command]
    connector: str = ";"  # how the NEXT pipeline follows: ; && || &


def _read_sub(s: str, i: int) -> tuple[str, int]:
    """s[i] is just after '$(' — return the inner text and the index after ')'."""
    depth = 1
    j = i
    quote: str | None = None
    while j < len(s):
        c = s[j]
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                j += 1
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return s[i:j], j + 1
        j += 1
    raise ShellSyntaxError("unterminated $(")


def _read_var(s: str, i: int) -> tuple[str, int]:
    """s[i] is just after '$' — the variable name and the index after it."""
    if i < len(s) and s[i] == "{":
        end = s.find("}", i)
        if end < 0:
            raise ShellSyntaxError("bad substitution")
        return s[i + 1 : end], end + 1
    if i < len(s) and s[i] in "?$#!@*0123456789":
        return s[i], i + 1
    j = i
    while j < len(s) and (s[j].isalnum() or s[j] == "_"):
        j += 1
    return s[i:j], j


def tokenize(s: str) -> list[object]:
    """Tokens: Word, operator strings, and ('redir', fd, op) tuples."""
    toks: list[object] = []
    i = 0
    cur: Word | None = None

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            toks.append(cur)
            cur = None

    def lit(text: str, quoted: bool) -> None:
        nonlocal cur
        if cur is None:
            cur = Word()
        if cur.segs and cur.segs[-1].kind == "lit" and cur.segs[-1].quoted == quoted:
            cur.segs[-1].value += text
        else:
            cur.segs.append(Seg("lit", text, quoted))

    while i < len(s):
        c = s[i]
        if c in " \t":
            flush()
            i += 1
        elif c == "#" and cur is None:
            while i < len(s) and s[i] != "\n":
                i += 1
        elif c == "\\":
            if i + 1 < len(s) and s[i + 1] == "\n":
                i += 2
                continue
            lit(s[i + 1] if i + 1 < len(s) else "", True)
            i += 2
        elif c == "'":
            end = s.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("Syntax error: Unterminated quoted string")
            lit(s[i + 1 : end], True)
            if cur is None:
                cur = Word()
            i = end + 1
        elif c == '"':
            i += 1
            if cur is None:
                cur = Word()
            buf = ""
            while True:
                if i >= len(s):
                    raise ShellSyntaxError("Syntax error: Unterminated quoted string")
                d = s[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < len(s) and s[i + 1] in '"\\$`\n':
                    buf += s[i + 1]
                    i += 2
                elif d == "$" and i + 1 < len(s) and s[i + 1] == "(":
                    if buf:
                        lit(buf, True)
                        buf = ""
                    inner, i = _read_sub(s, i + 2)
                    cur.segs.append(Seg("sub", inner, True))
                elif d == "$" and i + 1 < len(s) and (s[i + 1].isalnum() or s[i + 1] in "_{?$#!@*"):
                    if buf:
                        lit(buf, True)
                        buf = ""
                    name, i = _read_var(s, i + 1)
                    cur.segs.append(Seg("var", name, True))
                else:
                    buf += d
                    i += 1
            lit(buf, True)
        elif c == "$" and i + 1 < len(s) and s[i + 1] == "(":
            inner, i = _read_sub(s, i + 2)
            if cur is None:
                cur = Word()
            cur.segs.append(Seg("sub", inner, False))
        elif c == "$" and i + 1 < len(s) and (s[i + 1].isalnum() or s[i + 1] in "_{?$#!@*"):
            name, i = _read_var(s, i + 1)
            if cur is None:
                cur = Word()
            cur.segs.append(Seg("var", name, False))
        elif c in "<>" or (c == "&" and s.startswith("&>", i)):
            fd = 1 if c != "<" else 0
            digits = cur.literal() if cur is not None else None
            if (
                cur is not None
                and digits is not None
                and digits.isdigit()
                and not cur.segs[-1].quoted
            ):
                fd = int(digits)
                cur = None
            flush()
            if s.startswith("&>", i):
                toks.append(("redir", -1, ">"))
                i += 2
            elif s.startswith(">>", i):
                toks.append(("redir", fd, ">>"))
                i += 2
            elif s.startswith(">&", i):
                toks.append(("redir", fd, ">&"))
                i += 2
            elif c == ">":
                toks.append(("redir", fd, ">"))
                i += 1
            else:
                toks.append(("redir", 0, "<"))
                i += 1
        elif c in ";|&\n":
            flush()
            two = s[i : i + 2]
            if two in ("&&", "||", ";;"):
                toks.append(two)
                i += 2
            else:
                toks.append(c)
                i += 1
        elif c in "()":
            raise ShellSyntaxError(f'Syntax error: "{c}" unexpected')
        else:
            lit(c, False)
            i += 1
    flush()
    return toks


def parse(s: str) -> list[Pipeline]:
    toks = tokenize(s)
    pipelines: list[Pipeline] = []
    cmds: list[Command] = []
    cmd = Command()
    i = 0

    def end_command() -> None:
        nonlocal cmd
        if not cmd.words and not cmd.redirs:
            raise ShellSyntaxError("Syntax error: unexpected operator")
        cmds.append(cmd)
        cmd = Command()

    while i < len(toks):
        t = toks[i]
        if isinstance(t, Word):
            cmd.words.append(t)
        elif isinstance(t, tuple):
            _, fd, op = t
            target = toks[i + 1] if i + 1 < len(toks) else None
            if not isinstance(target, Word):
                raise ShellSyntaxError("Syntax error: redirection unexpected")
            cmd.redirs.append(Redir(fd, op, target))
            i += 1
        elif t == "|":
            end_command()
        elif t in (";", "&&", "||", "&", "\n"):
            if not cmd.words and not cmd.redirs and not cmds:
                if t in (";", "\n"):
                    i += 1
                    continue
                raise ShellSyntaxError(f'Syntax error: "{t}" unexpected')
            end_command()
            pipelines.append(Pipeline(cmds, ";" if t == "\n" else t))
            cmds = []
        else:
            raise ShellSyntaxError(f'Syntax error: "{t}" unexpected')
        i += 1
    if cmd.words or cmd.redirs:
        cmds.append(cmd)
    if cmds:
        pipelines.append(Pipeline(cmds, ";"))
    return pipelines
