"""Which shell commands are read-only: the only ones a fix may run at `risk: safe`.

A list of names that change things cannot decide this (`eval`, `busybox`, `$(printf
reb)oot`, `python3 -c`, `curl … | sh` all reboot past it). So it is turned around: a
command is read-only only when every part of it is known to be. The whole command is
read as the shell reads it: every simple command of every pipeline and list (`|`, `;`,
`&&`, `||`, newlines), each of which must be

- a known read-only program called by its name (not a path), with only flags known for
  it (and, for programs that can also change things, only their reading subcommands);
- with words the shell cannot turn into other words or commands: no command or process
  substitution, no unquoted `$VAR` (split into words, perhaps options), no brace
  expansion, globs only in absolute paths, no assignments before the command;
- without a redirection that writes (only to /dev/null, or a copy of a descriptor), no
  here-document, no background job, no subshell or compound command (`for`, `if`, `{`).

`read_only_problem` says what breaks this (None: read-only). A run that is not read-only
is at least `disruptive` (spark_tui.kb.safety).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# $HOME and $USER are known words (a home directory, a user name: one word, never an
# option); any other variable may hold anything
_QUOTED_VARS = {"HOME", "USER"}
_KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done"}
_KEYWORDS |= {"case", "esac", "select", "function", "{", "}", "!", "[[", "]]", "time", "coproc"}
_OPS: tuple[str, ...] = (
    "&&",
    "||",
    ";;",
    ">>",
    "<<",
    "<&",
    ">&",
    "<>",
    ">|",
    "&>",
    "|&",
    "|",
    "&",
    ";",
)
_OPS += ("(", ")", "<", ">")


class _NotReadOnly(Exception):
    pass


@dataclass
class _Word:
    text: str
    quoted: bool = False  # some of it was quoted
    glob: bool = False  # an unquoted * ? [
    brace: bool = False  # an unquoted { or }


def _lex(command: str) -> list[_Word | str]:
    """Words and operators (str), as sh reads them; _NotReadOnly for what makes words at
    run time (a substitution, an unquoted expansion) or cannot be read (open quotes)."""
    out: list[_Word | str] = []
    word: _Word | None = None
    i, n = 0, len(command)

    def cur() -> _Word:
        nonlocal word
        if word is None:
            word = _Word("")
        return word

    def end() -> None:
        nonlocal word
        if word is not None:
            out.append(word)
            word = None

    while i < n:
        c = command[i]
        if c in " \t":
            end()
            i += 1
        elif c == "\n":
            end()
            out.append(";")
            i += 1
        elif c == "#" and word is None:
            while i < n and command[i] != "\n":
                i += 1
        elif c == "\\":
            if i + 1 < n and command[i + 1] == "\n":
                i += 2
                continue
            if i + 1 >= n:
                raise _NotReadOnly("a backslash at the end")
            w = cur()
            w.text += command[i + 1]
            w.quoted = True
            i += 2
        elif c == "'":
            j = command.find("'", i + 1)
            if j < 0:
                raise _NotReadOnly("an unclosed quote")
            w = cur()
            w.text += command[i + 1 : j]
            w.quoted = True
            i = j + 1
        elif c == '"':
            w = cur()
            w.quoted = True
            i += 1
            while True:
                if i >= n:
                    raise _NotReadOnly("an unclosed quote")
                d = command[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and command[i + 1] in '$`"\\\n':
                    w.text += command[i + 1] if command[i + 1] != "\n" else ""
                    i += 2
                elif d == "`":
                    raise _NotReadOnly("a command substitution (`…`) builds a word")
                elif d == "$":
                    name, i = _expansion(command, i, quoted=True)
                    w.text += "${" + name + "}"
                else:
                    w.text += d
                    i += 1
        elif c == "`":
            raise _NotReadOnly("a command substitution (`…`) builds a word")
        elif c == "$":
            if i + 1 < n and command[i + 1] == "'":  # $'…': ANSI-C quoting
                raise _NotReadOnly("$'…' quoting")
            name, i = _expansion(command, i, quoted=False)
            cur().text += "${" + name + "}"
        elif c in "|&;()<>":
            # 2>…, 2>&1: the descriptor number belongs to the redirection
            if c in "<>" and word is not None and word.text.isdigit() and not word.quoted:
                word = None
            else:
                end()
            op = next(o for o in _OPS if command.startswith(o, i))
            if op in ("<", ">") and i + 1 < n and command[i + 1] == "(":
                raise _NotReadOnly("a process substitution builds a file name")
            out.append(op)
            i += len(op)
        else:
            w = cur()
            if c in "*?[":
                w.glob = True
            if c in "{}":
                w.brace = True
            w.text += c
            i += 1
    end()
    return out


def _expansion(command: str, i: int, quoted: bool) -> tuple[str, int]:
    """A `$…` at i: the variable it names and where it ends, when it is allowed."""
    rest = command[i + 1 : i + 3]
    if rest.startswith("("):
        raise _NotReadOnly("a command substitution $(…) builds a word")
    if rest.startswith("{"):
        j = command.find("}", i)
        name = command[i + 2 : j] if j > 0 else ""
        end = j + 1
    else:
        m = _NAME.match(command, i + 1)
        name = m.group() if m else command[i + 1 : i + 2]
        end = i + 1 + len(name)
    if not quoted and name not in _QUOTED_VARS:
        raise _NotReadOnly(f"an unquoted ${name} (split into words, perhaps options)")
    if name not in _QUOTED_VARS:
        raise _NotReadOnly(f'${{{name}}} (only "$HOME" and "$USER" are read as known words)')
    return name, end


def read_only_problem(command: str) -> str | None:
    """Why the command is not known to be read-only (None: it is)."""
    try:
        tokens = _lex(command)
        simple: list[_Word] = []
        commands = 0
        i = 0
        while i <= len(tokens):
            tok = tokens[i] if i < len(tokens) else ";"
            if isinstance(tok, _Word):
                simple.append(tok)
            elif tok in (";", "|", "&&", "||", "|&"):
                if simple:
                    _check(simple)
                    commands += 1
                elif tok != ";":
                    raise _NotReadOnly(f"{tok} with no command before it")
                simple = []
            elif tok == "&":
                raise _NotReadOnly("a command left running in the background (&)")
            elif tok in ("(", ")"):
                raise _NotReadOnly("a subshell ( … )")
            elif tok == ";;":
                raise _NotReadOnly("a case statement")
            elif tok == "<<":
                raise _NotReadOnly("a here-document")
            else:  # a redirection: its target is the next word
                target = tokens[i + 1] if i + 1 < len(tokens) else None
                if not isinstance(target, _Word):
                    raise _NotReadOnly(f"{tok} with no file")
                _redirection(tok, target)
                i += 1
            i += 1
        if not commands:
            raise _NotReadOnly("no command")
    except _NotReadOnly as exc:
        return str(exc)
    return None


def _redirection(op: str, target: _Word) -> None:
    if target.glob or target.brace:
        raise _NotReadOnly(f"a redirection to a pattern ({target.text})")
    if op in ("<&", ">&"):
        if target.text == "-" or target.text.isdigit():
            return
        raise _NotReadOnly(f"{op}{target.text} writes a file")
    if op == "<":
        return  # reads a file
    if target.text == "/dev/null":
        return
    if target.text == "/proc/sys/vm/drop_caches":  # what `sysctl -w vm.drop_caches=N` writes
        return
    raise _NotReadOnly(f"writes {target.text} ({op})")


def _check(words: list[_Word]) -> None:
    first = words[0]
    if first.text in _KEYWORDS and not first.quoted:
        raise _NotReadOnly(f"a compound command ({first.text})")
    if not first.quoted and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", first.text):
        raise _NotReadOnly(f"sets {first.text.split('=')[0]} for the command")
    name = first.text
    if first.glob or first.brace or "$" in name:
        raise _NotReadOnly(f"the command name {name!r} is made at run time")
    if "/" in name:
        raise _NotReadOnly(f"{name} is a path: only known commands, by name, are read-only")
    spec = READ_ONLY.get(name)
    if spec is None:
        raise _NotReadOnly(f"{name} is not a known read-only command")
    args = words[1:]
    for a in args:
        if a.brace:
            raise _NotReadOnly(f"{a.text!r}: a brace expansion makes several words")
        if a.glob and not a.text.startswith("/"):
            raise _NotReadOnly(f"{a.text!r}: a pattern not in an absolute path may match an option")
    spec.check(name, [a.text for a in args])


# ------------------------------------------------------------------ the known commands


@dataclass(frozen=True)
class Spec:
    """A read-only program: the short flag letters and long flags it may be given (those
    in `values` take a value: attached, or the next word), how many operands it may have,
    and (for programs that also change things) a check of the reading subcommands."""

    letters: str = ""
    long: frozenset[str] = frozenset()
    values: frozenset[str] = frozenset()  # "-n", "--lines": a value follows
    max_operands: int | None = None
    operand: Callable[[str], bool] | None = None  # each operand must pass this
    then: Callable[[list[str]], None] | None = None  # operands checked as a whole
    custom: Callable[[str, list[str]], None] | None = None  # the whole check, its own way

    def check(self, name: str, args: list[str]) -> None:
        if self.custom is not None:
            self.custom(name, args)
            return
        operands: list[str] = []
        i = 0
        options_end = False
        while i < len(args):
            a = args[i]
            i += 1
            if options_end or a == "-" or not a.startswith("-"):
                if self.operand is not None and not self.operand(a):
                    raise _NotReadOnly(f"{name} {a}: not a reading use of {name}")
                operands.append(a)
                continue
            if a == "--":
                options_end = True
                continue
            if a.startswith("--"):
                flag = a.split("=", 1)[0]
                if flag not in self.long:
                    raise _NotReadOnly(f"{name} {flag}: not a known read-only flag of {name}")
                if flag in self.values and "=" not in a:
                    i += 1
                continue
            for k, letter in enumerate(a[1:]):
                if letter not in self.letters:
                    raise _NotReadOnly(f"{name} -{letter}: not a known read-only flag of {name}")
                if f"-{letter}" in self.values:
                    if k == len(a) - 2:
                        i += 1  # the value is the next word
                    break  # the rest of the word is the value
        if self.max_operands is not None and len(operands) > self.max_operands:
            raise _NotReadOnly(f"{name} with {len(operands)} operands: not a reading use of {name}")
        if self.then is not None:
            self.then(operands)


def _values(*flags: str) -> frozenset[str]:
    return frozenset(flags)


def _long(*names: str) -> frozenset[str]:
    return frozenset("--" + n for n in names)


def _find_check(args: list[str]) -> None:
    allowed = {"-name", "-iname", "-path", "-ipath", "-type", "-size", "-mtime", "-mmin"}
    allowed |= {"-newer", "-user", "-group", "-perm", "-maxdepth", "-mindepth", "-print"}
    allowed |= {"-print0", "-printf", "-ls", "-prune", "-o", "-a", "-or", "-and", "-not"}
    allowed |= {"-empty", "-links", "-regex", "-iregex", "-xdev", "-mount", "-follow"}
    allowed |= {"-L", "-H", "-P", "-samefile", "-inum", "-readable", "-true", "-false"}
    takes_value = {"-name", "-iname", "-path", "-ipath", "-type", "-size", "-mtime"}
    takes_value |= {"-mmin", "-newer", "-user", "-group", "-perm", "-maxdepth", "-mindepth"}
    takes_value |= {"-printf", "-links", "-regex", "-iregex", "-samefile", "-inum"}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1:
            if a not in allowed:
                raise _NotReadOnly(f"find {a}: not a known read-only part of find")
            if a in takes_value:
                i += 1
        i += 1


def _find(name: str, args: list[str]) -> None:
    _find_check(args)


def _date_operand(a: str) -> bool:
    return a.startswith("+")  # a format; anything else sets the clock


def _sysctl(name: str, args: list[str]) -> None:
    """Reading: `sysctl NAME…`, `-a`, `-n`; the one write that is safe: dropping the page
    cache (`-w vm.drop_caches=1|2|3`, which frees clean cache and changes nothing else)."""
    writes = [a for a in args if "=" in a and not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    if writes:
        if args in (
            ["-w", w] for w in ("vm.drop_caches=1", "vm.drop_caches=2", "vm.drop_caches=3")
        ):
            return
        raise _NotReadOnly(f"sysctl {writes[0]}: sets a kernel setting")
    for f in flags:
        if f not in ("-a", "-n", "-e", "-N", "-q", "-b", "--all", "--values", "--names"):
            raise _NotReadOnly(f"sysctl {f}: not a known read-only flag of sysctl")


def _nvidia_smi(name: str, args: list[str]) -> None:
    ok = {"-q", "-L", "-x", "-i", "-d", "-f", "--query", "--list-gpus", "--xml-format"}
    ok |= {"--id", "--display", "--format", "--query-gpu", "--query-compute-apps"}
    ok |= {"--format", "--query-supported-clocks", "-l", "-lms", "--loop", "--loop-ms"}
    takes_value = {"-i", "-d", "-f", "--id", "--display", "-l", "-lms"}
    i = 0
    if args[:1] == ["topo"]:
        if all(a in ("-m", "--matrix", "-mp") for a in args[1:]):
            return
        raise _NotReadOnly("nvidia-smi topo: only -m reads")
    if args[:1] == ["dmon"]:
        args = args[1:]
        ok = {"-s", "-c", "-d", "-o", "-i", "-f"}
        takes_value = ok
        if "-f" in args:
            raise _NotReadOnly("nvidia-smi dmon -f writes a file")
    while i < len(args):
        a = args[i]
        flag = a.split("=", 1)[0]
        if flag == "-f" or flag == "--filename":
            raise _NotReadOnly("nvidia-smi -f writes a file")
        if flag not in ok:
            raise _NotReadOnly(f"nvidia-smi {a}: not a known read-only flag of nvidia-smi")
        value = args[i + 1] if i + 1 < len(args) else None
        if flag in ("-l", "-lms", "--loop", "--loop-ms"):
            # the interval may be left out: a next word that is not a number is a flag
            if "=" not in a and value is not None and value.isdigit():
                i += 1
        elif flag in takes_value and "=" not in a:
            if value is not None and value.startswith("-"):  # -d -r: is -r a value or a reset?
                raise _NotReadOnly(f"nvidia-smi {a} {value}: a flag where a value belongs")
            i += 1
        i += 1


_IP_FLAGS = {"-br", "-brief", "-s", "-stats", "-d", "-details", "-4", "-6", "-j", "-json"}
_IP_FLAGS |= {"-p", "-pretty", "-c", "-color", "-o", "-oneline"}


def _ip(name: str, args: list[str]) -> None:
    """`ip [-br|-s|-d|-4|-6|-j|-c] OBJECT [show|list] …`: only showing."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] not in _IP_FLAGS:
            raise _NotReadOnly(f"ip {args[i]}: not a known read-only flag of ip")
        i += 1
    rest = args[i:]
    objects: tuple[str, ...] = (
        "a",
        "addr",
        "address",
        "l",
        "link",
        "r",
        "route",
        "n",
        "neigh",
        "neighbour",
    )
    objects += ("rule", "maddr", "tunnel", "netns")
    if not rest:
        return
    if rest[0] not in objects:
        raise _NotReadOnly(f"ip {rest[0]}: not a known read-only part of ip")
    if len(rest) > 1 and rest[1] not in ("show", "list", "ls", "lst", "sh", "get", "dev"):
        raise _NotReadOnly(f"ip {rest[0]} {rest[1]}: changes the network")
    if rest[0] in ("r", "route") and len(rest) > 1 and rest[1] == "get":
        return
    for a in rest[2:]:
        if a in ("add", "del", "delete", "set", "change", "replace", "flush", "append"):
            raise _NotReadOnly(f"ip … {a}: changes the network")


def _ethtool(name: str, args: list[str]) -> None:
    reading = {"-i", "--driver", "-S", "--statistics", "-k", "--show-features", "-g"}
    reading |= {"--show-ring", "-a", "--show-pause", "-c", "--show-coalesce", "-m"}
    reading |= {"--dump-module-eeprom", "--module-info", "-T", "--show-time-stamping"}
    reading |= {"-l", "--show-channels", "--show-fec", "--show-eee", "-P", "--show-permaddr"}
    flags = [a for a in args if a.startswith("-")]
    for f in flags:
        if f not in reading:
            raise _NotReadOnly(f"ethtool {f}: not a known read-only flag of ethtool")
    if len([a for a in args if not a.startswith("-")]) > 1:
        raise _NotReadOnly("ethtool with more than an interface: changes a setting")


def _docker(name: str, args: list[str]) -> None:
    reading = {"ps", "logs", "inspect", "images", "version", "info", "top", "port", "stats"}
    reading |= {"events", "diff", "history"}
    if args and args[0].startswith("-"):
        raise _NotReadOnly(f"docker {args[0]}: a global flag (another daemon, config)")
    sub = args[0] if args else ""
    rest = args[1:]
    if sub in ("container", "image", "volume", "network", "system", "compose") and rest:
        if rest[0] in ("ls", "list", "inspect", "ps", "logs", "df", "info", "history", "top"):
            return
        raise _NotReadOnly(f"docker {sub} {rest[0]}: not a reading subcommand of docker")
    if sub not in reading:
        raise _NotReadOnly(f"docker {sub or '(nothing)'}: not a reading subcommand of docker")
    if sub == "logs" and any(a in ("-f", "--follow") for a in rest):
        raise _NotReadOnly("docker logs -f never ends")
    if sub == "stats" and "--no-stream" not in rest:
        raise _NotReadOnly("docker stats without --no-stream never ends")
    if sub == "events" and not any(a.startswith("--until") for a in rest):
        raise _NotReadOnly("docker events without --until never ends")


_SYSTEMCTL_FLAGS = {"--no-pager", "--all", "-a", "--full", "-l", "--plain", "--user", "-p"}
_SYSTEMCTL_FLAGS |= {"--property", "--value", "--type", "-t", "--state", "-n", "--lines"}


_SYSTEMCTL_VALUES = {"-p", "--property", "-t", "--type", "--state", "-n", "--lines"}


def _systemctl(name: str, args: list[str]) -> None:
    """Only a reading verb, read as systemctl reads it: a flag's value is the next word
    (`systemctl -p status reboot` reboots: `status` is the property, `reboot` the verb)."""
    reading = {"status", "show", "is-active", "is-enabled", "is-failed", "list-units"}
    reading |= {"list-unit-files", "list-timers", "list-sockets", "cat", "list-dependencies"}
    reading |= {"is-system-running", "get-default"}
    operands: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            operands.append(a)
            continue
        flag = a.split("=", 1)[0]
        if flag not in _SYSTEMCTL_FLAGS:
            raise _NotReadOnly(f"systemctl {flag}: not a known read-only flag of systemctl")
        if flag in _SYSTEMCTL_VALUES and "=" not in a:
            i += 1  # its value, whatever it says
    if operands and operands[0] not in reading:
        raise _NotReadOnly(f"systemctl {operands[0]}: not a reading subcommand of systemctl")


READ_ONLY: dict[str, Spec] = {
    "true": Spec(),
    "false": Spec(),
    "sync": Spec(letters="df", long=_long("data", "file-system")),
    "echo": Spec(letters="neE"),
    "printf": Spec(),
    "cat": Spec(letters="AbeEnstTuv", long=_long("number", "show-all", "squeeze-blank")),
    "head": Spec(
        letters="qvcnz",
        long=_long("lines", "bytes", "quiet", "silent", "verbose", "zero-terminated"),
        values=_values("-n", "-c", "--lines", "--bytes"),
    ),
    "tail": Spec(
        letters="qvcnz",
        long=_long("lines", "bytes", "quiet", "silent", "verbose", "zero-terminated"),
        values=_values("-n", "-c", "--lines", "--bytes"),
    ),
    "wc": Spec(letters="clmwL", long=_long("bytes", "chars", "lines", "words")),
    "sort": Spec(
        letters="bdfghiMnrRsuVkt",
        long=_long("key", "numeric-sort", "reverse", "unique", "human-numeric-sort"),
        values=_values("-k", "-t", "--key", "--field-separator"),
    ),
    "uniq": Spec(letters="cdiuzfsw", values=_values("-f", "-s", "-w"), max_operands=1),
    "cut": Spec(
        letters="bcdfsnz",
        long=_long("complement", "output-delimiter", "fields", "delimiter"),
        values=_values("-b", "-c", "-d", "-f", "--output-delimiter", "--fields", "--delimiter"),
    ),
    "tr": Spec(letters="cdst", max_operands=2),
    "grep": Spec(
        letters="EFGPivwxcLloqsbHhnTZzrRaIUABCmef",
        long=_long(
            "color",
            "colour",
            "include",
            "exclude",
            "exclude-dir",
            "max-count",
            "regexp",
            "ignore-case",
            "count",
            "files-with-matches",
            "line-number",
            "no-filename",
            "with-filename",
            "only-matching",
            "quiet",
            "silent",
            "recursive",
            "extended-regexp",
            "fixed-strings",
            "perl-regexp",
            "invert-match",
            "word-regexp",
            "line-regexp",
            "after-context",
            "before-context",
            "context",
            "text",
        ),
        values=_values("-A", "-B", "-C", "-m", "-e", "-f", "--max-count", "--regexp"),
    ),
    "ls": Spec(
        letters="aAlhtrSRd1FiInGgoQpsuXcv",
        long=_long("all", "almost-all", "human-readable", "color", "sort", "full-time"),
    ),
    "stat": Spec(
        letters="cLtf",
        long=_long("format", "printf", "terse", "dereference", "file-system"),
        values=_values("-c", "--format", "--printf"),
    ),
    "df": Spec(
        letters="ahHiklPTxt",
        long=_long("human-readable", "inodes", "output", "print-type", "total", "local"),
        values=_values("-t", "-x"),
    ),
    "du": Spec(
        letters="achHLlsSbkmxd",
        long=_long("max-depth", "summarize", "human-readable", "apparent-size", "total"),
        values=_values("-d"),
    ),
    "free": Spec(letters="bkmgthlw", long=_long("human", "giga", "mega", "total", "wide", "si")),
    "uptime": Spec(letters="ps", long=_long("pretty", "since")),
    "uname": Spec(letters="asnrvmpio", long=_long("all")),
    "hostname": Spec(letters="sfdiIAa", max_operands=0),  # an operand sets it
    "id": Spec(letters="ugGnrz", max_operands=1),
    "whoami": Spec(max_operands=0),
    "date": Spec(
        letters="uRId",
        long=_long("utc", "iso-8601", "rfc-3339", "rfc-email", "date"),
        values=_values("-d", "--date"),
        operand=_date_operand,
    ),
    "nproc": Spec(long=_long("all")),
    "sleep": Spec(max_operands=1),
    "lscpu": Spec(letters="eJpx", long=_long("json", "extended", "parse")),
    "lsblk": Spec(letters="abdDfilmnoOpPrsStTxJ", values=_values("-o")),
    "lspci": Spec(letters="vnkmtDbxqs", values=_values("-s")),
    "lsusb": Spec(letters="vt"),
    "lsmod": Spec(),
    "findmnt": Spec(letters="lnrJuDTtOSoA", values=_values("-t", "-T", "-O", "-S", "-o")),
    "ps": Spec(letters="aAefFlouxwHTpCjLy", values=_values("-o", "-p", "-C", "-u")),
    # ss: never -K (kills sockets), -D (writes a file), -F (reads a filter file), -N (enters a netns)
    "ss": Spec(letters="altunpxwseimoH46", max_operands=0),
    "pgrep": Spec(letters="aflnoxcu", values=_values("-u")),
    "printenv": Spec(),
    "which": Spec(letters="a"),
    "nvcc": Spec(long=_long("version"), max_operands=0),
    "getconf": Spec(letters="a"),
    "ibstat": Spec(letters="lsp"),
    "ibv_devinfo": Spec(letters="lv", values=_values("-d", "-i")),
    "ibdev2netdev": Spec(letters="v"),
    "mokutil": Spec(long=_long("sb-state")),
    "dmesg": Spec(
        letters="kTtHLlxwrP",
        long=_long("ctime", "level", "facility", "human", "notime", "kernel", "nopager"),
        values=_values("-l", "--level", "--facility"),
    ),
    "journalctl": Spec(
        letters="kbuneaxrqop",
        long=_long(
            "unit",
            "boot",
            "no-pager",
            "lines",
            "since",
            "until",
            "priority",
            "grep",
            "output",
            "reverse",
            "dmesg",
            "list-boots",
            "quiet",
            "all",
            "system",
            "user",
        ),
        values=_values("-u", "-n", "-p", "-o", "--unit", "--lines", "--since", "--until"),
    ),
    "find": Spec(custom=_find),
    "sysctl": Spec(custom=_sysctl),
    "nvidia-smi": Spec(custom=_nvidia_smi),
    "ip": Spec(custom=_ip),
    "ethtool": Spec(custom=_ethtool),
    "docker": Spec(custom=_docker),
    "systemctl": Spec(custom=_systemctl),
}
