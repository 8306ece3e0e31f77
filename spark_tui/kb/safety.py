"""What a fix does to a node, read from its actions: which commands need root and how
much a fix can break. The loader (so `kb lint`, and every command that loads the
knowledge base) refuses a wall whose fix says otherwise, naming file and line:

- a `run` command never calls sudo itself: it says `root: true` and spark-tui renders it
  with `sudo -n` (never a password prompt); a command that needs root says so;
- a command run as root is one program with its arguments (no `;`, `|`, `>`, `$(…)`),
  so that a sudoers rule can allow exactly it instead of a root shell;
- the fix's `risk` is at least what its actions do: a reboot, a file moved, removed or
  written, a disk touched is `destructive`; stopping, killing or restarting something,
  changing a link, a clock or a kernel setting is `disruptive`; a typed action is at
  least its kind's `min_risk` in the action registry (`stop-stack`, `relaunch`,
  `restart-ray`: disruptive; `reboot`, `move-aside`: destructive);
- a fix with an action that runs as root says `root: true` itself;
- a fix is `safe` only when every command it runs is known to be read-only, by what it
  can do rather than what it is called (spark_tui.kb.readonly): anything else (an
  interpreter, `eval`, `busybox`, a substitution building a word, a pipe into a shell, a
  redirection that writes) is at least `disruptive`.

The reading of shell commands is conservative: a word that looks like a command
anywhere (after `;`, `&&`, `|`, `$(`, `do`, `sh -c`, `xargs`, `find -exec` …) counts.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

from spark_tui.action_schemas import SCHEMAS
from spark_tui.kb.readonly import read_only_problem
from spark_tui.kb.schema import Action, Fix

RISK_ORDER = {"safe": 0, "disruptive": 1, "destructive": 2}

# words that start a compound command or run the next word as a command
_KEYWORDS = {"do", "then", "else", "elif", "if", "while", "until", "!", "{", "}", "done", "fi"}
_SKIP_STATEMENTS = {"for", "case", "esac", "select", "function"}
# wrappers: name → options that take a value (the rest of the words are a command)
_WRAPPERS: dict[str, set[str]] = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir"},
    "nohup": set(),
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "-P", "-u"},
    "timeout": {"-k", "-s", "--kill-after", "--signal"},
    "stdbuf": {"-i", "-o", "-e"},
    "exec": {"-a"},
    "command": set(),
    "builtin": set(),
    "time": {"-f", "-o"},
    "xargs": {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--delimiter", "--max-args"},
    "setsid": set(),
    "chroot": set(),
    "flock": {"-w", "-E", "--timeout"},
    "watch": {"-n", "-d", "--interval"},
    "runuser": {"-u", "-g", "-l"},
    "su": {"-c"},
    "doas": {"-u"},
    "pkexec": {"--user"},
}
_ELEVATE = {"sudo", "su", "doas", "pkexec", "runuser"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}

# destructive: the machine goes down, or files and disks change for good
_REBOOTS = {"reboot", "poweroff", "halt", "shutdown", "kexec"}
_DESTRUCTIVE = _REBOOTS | {
    "mv",
    "rm",
    "rmdir",
    "unlink",
    "shred",
    "dd",
    "wipefs",
    "fdisk",
    "sfdisk",
    "gdisk",
    "sgdisk",
    "parted",
    "mkswap",
    "mke2fs",
    "truncate",
    "fallocate",
    "chmod",
    "chown",
    "chgrp",
    "chattr",
    "cp",
    "install",
    "ln",
    "rsync",
    "apt",
    "apt-get",
    "aptitude",
    "dpkg",
    "snap",
    "update-initramfs",
    "update-grub",
    "grub-install",
}
# disruptive: something running is stopped, killed, restarted or reconfigured
_DISRUPTIVE = {
    "kill",
    "pkill",
    "killall",
    "modprobe",
    "rmmod",
    "insmod",
    "mount",
    "umount",
    "swapon",
    "swapoff",
    "iptables",
    "ip6tables",
    "nft",
    "nvidia-persistenced",
}
# only root may run these at all
_ROOT = (
    _REBOOTS
    | {"modprobe", "rmmod", "insmod", "mount", "umount", "swapon", "swapoff"}
    | {"fdisk", "sfdisk", "gdisk", "sgdisk", "parted", "wipefs", "mkswap", "mke2fs"}
    | {"iptables", "ip6tables", "nft", "chown", "chgrp", "chattr", "apt", "apt-get", "aptitude"}
    | {"dpkg", "snap", "update-initramfs", "update-grub", "grub-install", "nvidia-persistenced"}
)
_DOCKER_DESTRUCTIVE = {"rm", "rmi", "prune"}
_DOCKER_DISRUPTIVE = {"stop", "kill", "restart", "pause", "start", "run", "up", "down", "create"}
_SYSTEMCTL_DESTRUCTIVE = {"reboot", "poweroff", "halt", "kexec", "soft-reboot"}
_SYSTEMCTL_CHANGES = {
    "start",
    "stop",
    "restart",
    "reload",
    "try-restart",
    "reload-or-restart",
    "try-reload-or-restart",
    "kill",
    "isolate",
    "enable",
    "disable",
    "mask",
    "unmask",
    "daemon-reload",
    "set-property",
    "set-default",
}
_IP_CHANGES = {"set", "add", "del", "delete", "flush", "replace", "change", "append"}
# nvidia-smi options that change the GPU (clocks, power, reset, modes)
_NVIDIA_SMI_CHANGES = re.compile(
    r"^(-r|--gpu-reset|-lgc|--lock-gpu-clocks.*|-rgc|--reset-gpu-clocks|-lmc|"
    r"--lock-memory-clocks.*|-rmc|--reset-memory-clocks|-pm|--persistence-mode.*|-pl|"
    r"--power-limit.*|-ac|--applications-clocks.*|-rac|--reset-applications-clocks|-mig|"
    r"--multi-instance-gpu.*|-e|--ecc-config.*|-p|--reset-ecc-errors.*|-c|--compute-mode.*|"
    r"-am|--accounting-mode.*|-caa|--clear-accounted-apps|-dm|--driver-model.*|-cc|"
    r"--cuda-clocks.*)$"
)
_ETHTOOL_CHANGES = re.compile(r"^(-[sKGLACrEfW]|--(set|change|reset|flash|offload).*)$")
_SCRATCH = ("/tmp/", "/var/tmp/", "/dev/shm/")
_HARMLESS_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_SYSTEM: tuple[str, ...] = (
    "/etc/",
    "/boot/",
    "/usr/",
    "/lib",
    "/bin/",
    "/sbin/",
    "/var/lib/",
    "/opt/",
    "/root/",
)
_SYSTEM += ("/dev/", "/sys/", "/proc/", "/srv/", "/var/log/")
DROP_CACHES_PATH = "/proc/sys/vm/drop_caches"


@dataclass
class Effects:
    """What one shell command does, as far as its words tell."""

    risk: str = "safe"  # the least risk a fix running it must declare
    risk_why: str = ""  # the word that makes it that risky
    root: list[str] = field(default_factory=list)  # why it needs root
    sudo: bool = False  # it calls sudo (or su, doas, …) itself
    shell: bool = False  # it needs a shell: more than one program and its arguments

    def raise_risk(self, risk: str, why: str) -> None:
        if RISK_ORDER[risk] > RISK_ORDER[self.risk]:
            self.risk, self.risk_why = risk, why

    def needs_root(self, why: str) -> None:
        if why not in self.root:
            self.root.append(why)


def command_effects(command: str) -> Effects:
    """Read a shell command: the root it needs and the risk it carries."""
    from spark_tui import shell

    effects = Effects()
    effects.shell = shell.simple_words(command) is None
    _read(command, effects, depth=0)
    return effects


def _read(command: str, eff: Effects, depth: int) -> None:
    if depth > 8:  # sh -c 'sh -c …' nested this deep is itself suspect
        eff.raise_risk("destructive", "commands nested in sh -c too deep to read")
        return
    for words, targets in _simple_commands(command):
        for target in targets:
            _write(target, eff)
        _one(words, eff, depth)


def _tokens(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:  # unbalanced quotes: read the words as they stand
        return command.replace('"', " ").replace("'", " ").split()


def _simple_commands(command: str) -> Iterator[tuple[list[str], list[str]]]:
    """(words, redirection targets) of every simple command, command substitutions
    included (their text is read again as commands)."""
    words: list[str] = []
    targets: list[str] = []
    tokens = _tokens(command)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok and all(c in ";&|()<>" for c in tok):
            if "<" in tok or ">" in tok:
                if not tok.endswith("&") and i + 1 < len(tokens):
                    if ">" in tok:
                        targets.append(tokens[i + 1])
                    i += 1
            else:
                if words or targets:
                    yield words, targets
                words, targets = [], []
        else:
            for inner in _substitutions(tok):
                yield from _simple_commands(inner)
            if tok.startswith("$"):
                tok = tok[1:]  # `$(` came apart as `$`, `(`: the `(` splits the command
            if tok:
                words.append(tok)
        i += 1
    if words or targets:
        yield words, targets


def _substitutions(word: str) -> list[str]:
    """The commands inside `$(…)` and backticks of one word (quoted ones included)."""
    out = []
    for m in re.finditer(r"\$\((.*)\)|`([^`]*)`", word):
        out.append(m.group(1) or m.group(2) or "")
    return out


def _strip(words: list[str], eff: Effects, depth: int) -> list[str]:
    """Drop keywords, assignments and wrappers (noting sudo); run `sh -c TEXT` again."""
    while words:
        w = words[0]
        name = w.rsplit("/", 1)[-1]
        if w in _KEYWORDS:
            words = words[1:]
        elif w in _SKIP_STATEMENTS:
            return []
        elif re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
            words = words[1:]
        elif name in _SHELLS and "-c" in words[1:]:
            at = words.index("-c")
            if at + 1 < len(words):
                _read(words[at + 1], eff, depth + 1)
            return []
        elif name in _WRAPPERS:
            if name in _ELEVATE:
                eff.sudo = True
            if name == "su" and "-c" in words[1:]:
                at = words.index("-c")
                if at + 1 < len(words):
                    _read(words[at + 1], eff, depth + 1)
                return []
            takes_value = _WRAPPERS[name]
            rest = words[1:]
            while rest and (rest[0].startswith("-") or ("=" in rest[0] and name == "env")):
                opt = rest[0]
                rest = rest[2:] if opt in takes_value else rest[1:]
                if opt == "--":
                    break
            if name == "timeout" and rest:
                rest = rest[1:]  # the duration
            if name in ("chroot", "flock") and rest:
                rest = rest[1:]  # the directory / the lock file
            words = rest
        else:
            return words
    return words


def _one(words: list[str], eff: Effects, depth: int) -> None:
    words = _strip(words, eff, depth)
    if not words:
        return
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    subcommand = next((a for a in args if not a.startswith("-")), "")
    if name in _ROOT:
        eff.needs_root(name)
    if name.startswith("mkfs"):
        eff.needs_root(name)
        eff.raise_risk("destructive", name)
    if name in _DESTRUCTIVE:
        eff.raise_risk("destructive", name)
        for path in _paths(args):
            if path.startswith(_SYSTEM):
                eff.needs_root(f"{name} {path}")
    if name == "tee":  # writes each file it names (and its stdout)
        for target in (a for a in args if not a.startswith("-")):
            _write(target, eff)
    if name in _DISRUPTIVE:
        eff.raise_risk("disruptive", name)
    if name in ("sed", "perl") and any(a.startswith(("-i", "--in-place")) for a in args):
        eff.raise_risk("destructive", f"{name} -i")
        if any(p.startswith(_SYSTEM) for p in _paths(args)):
            eff.needs_root(f"{name} -i on a system file")
    if name == "find":
        if "-delete" in args:
            eff.raise_risk("destructive", "find -delete")
        for flag in ("-exec", "-execdir", "-ok", "-okdir"):
            if flag in args:
                inner = args[args.index(flag) + 1 :]
                end = next((k for k, a in enumerate(inner) if a in (";", "+", "\\;")), len(inner))
                _one(inner[:end], eff, depth + 1)
    if name == "xargs":
        _one(args, eff, depth + 1)
    if name == "docker":
        if subcommand in _DOCKER_DESTRUCTIVE or (
            subcommand in ("system", "image", "volume") and ({"rm", "prune"} & set(args))
        ):
            eff.raise_risk("destructive", f"docker {subcommand}")
        elif subcommand in _DOCKER_DISRUPTIVE or subcommand in ("compose", "container"):
            if subcommand not in ("compose", "container") or set(args) & _DOCKER_DISRUPTIVE:
                eff.raise_risk("disruptive", f"docker {subcommand}")
            if set(args) & _DOCKER_DESTRUCTIVE:
                eff.raise_risk("destructive", f"docker {subcommand} rm")
    if name == "systemctl":
        if subcommand in _SYSTEMCTL_DESTRUCTIVE:
            eff.raise_risk("destructive", f"systemctl {subcommand}")
            eff.needs_root(f"systemctl {subcommand}")
        elif subcommand in _SYSTEMCTL_CHANGES and "--user" not in args:
            eff.raise_risk("disruptive", f"systemctl {subcommand}")
            eff.needs_root(f"systemctl {subcommand}")
    if name == "service" and set(args) & {"start", "stop", "restart", "reload", "force-reload"}:
        eff.raise_risk("disruptive", "service")
        eff.needs_root("service")
    if name == "ray" and subcommand in ("stop", "start"):
        eff.raise_risk("disruptive", f"ray {subcommand}")
    if name == "ip" and set(args) & _IP_CHANGES:
        eff.raise_risk("disruptive", "ip " + " ".join(a for a in args[:2]))
        eff.needs_root("ip " + " ".join(a for a in args[:2]))
    if name == "ethtool" and any(_ETHTOOL_CHANGES.match(a) for a in args):
        eff.raise_risk("disruptive", "ethtool")
        eff.needs_root("ethtool")
    if name == "nvidia-smi":
        changes = [a for a in args if _NVIDIA_SMI_CHANGES.match(a.split("=", 1)[0])]
        if changes:
            eff.raise_risk("disruptive", f"nvidia-smi {changes[0]}")
            eff.needs_root(f"nvidia-smi {changes[0]}")
    if name == "sysctl":
        settings = [a for a in args if "=" in a and not a.startswith("-")]
        if settings or {"-w", "--write", "-p", "--load", "--system"} & set(args):
            eff.needs_root("sysctl")
            if not settings or any(not s.startswith("vm.drop_caches=") for s in settings):
                eff.raise_risk("disruptive", "sysctl")
    if name == "dd":
        for a in args:
            if a.startswith("of="):
                _write(a[3:], eff)


def _paths(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("/")]


def _write(target: str, eff: Effects) -> None:
    """A file the command writes (a redirection, tee, dd of=)."""
    if target.startswith("&") or target.startswith(_HARMLESS_TARGETS):
        return
    if target.startswith("/dev/fd/"):
        return
    if target == DROP_CACHES_PATH:
        eff.needs_root(f"writes {target}")
        return
    if target.startswith(("/proc/", "/sys/")):
        eff.needs_root(f"writes {target}")
        eff.raise_risk("disruptive", f"writes {target}")
        return
    if target.startswith(_SCRATCH):
        return
    if target.startswith(_SYSTEM):
        eff.needs_root(f"writes {target}")
    eff.raise_risk("destructive", f"writes {target}")


# ---------------------------------------------------------------- a fix


@dataclass(frozen=True)
class Problem:
    """One disagreement: the action (index, None for the fix itself), the field it is
    about (for the line), the message."""

    action: int | None
    key: str
    message: str


def action_root(action: Action) -> bool:
    """Whether the action runs something as root (sudo -n): its kind always does (reboot),
    or a command it plans does (`root: true`; move-aside unless `root: false`)."""
    schema = SCHEMAS.get(action.type)
    return schema is not None and schema.runs_root(action.params)


def _placeholders_as_words(command: str) -> str:
    from spark_tui import shell

    return shell._PLACEHOLDER.sub(lambda m: "X" + m.group(1).replace(".", "_"), command)


def check_fix(fix: Fix) -> list[Problem]:
    """Every way the fix's declared risk and root disagree with its actions."""
    problems: list[Problem] = []
    needed, needed_why = "safe", ""
    root_actions: list[int] = []
    for i, action in enumerate(fix.actions):
        if action_root(action):
            root_actions.append(i)
        kind = SCHEMAS.get(action.type)
        risk = kind.min_risk if kind is not None else "safe"  # the kind's own floor
        if RISK_ORDER[risk] > RISK_ORDER[needed]:
            needed, needed_why = risk, f"action {i + 1} is a {action.type}"
        if action.type != "run" or not isinstance(action.params.get("command"), str):
            continue
        as_root = bool(action.params.get("root", False))
        checks = [(action.params["command"], as_root, "command", f"action {i + 1}")]
        undo = action.params.get("undo")
        if isinstance(undo, dict) and isinstance(undo.get("command"), str):
            problems += _undo_problems(i, undo)
            checks.append(
                (undo["command"], bool(undo.get("root", as_root)), "undo", f"action {i + 1}'s undo")
            )
        for command, root, key, what in checks:
            problems += _command_problems(i, command, root, key)
            needed, needed_why = _command_risk(command, what, needed, needed_why)
    if RISK_ORDER[needed] > RISK_ORDER.get(fix.risk, 0):
        problems.append(
            Problem(
                None,
                "risk",
                f"risk is {fix.risk}, but {needed_why}: it must be {needed}"
                + (" or destructive" if needed == "disruptive" else ""),
            )
        )
    if root_actions and not fix.root:
        problems.append(
            Problem(
                None,
                "root",
                f"action {root_actions[0] + 1} runs as root: say root: true on the fix "
                "(the preview and the confirmation tell the user)",
            )
        )
    return problems


def _command_problems(i: int, command: str, as_root: bool, key: str) -> list[Problem]:
    """A run command's (or its undo's) sudo and root against what it declares."""
    problems: list[Problem] = []
    eff = command_effects(_placeholders_as_words(command))
    if eff.sudo:
        problems.append(
            Problem(
                i,
                key,
                "the command calls sudo itself: write it without sudo and set root: true "
                "(spark-tui runs it with sudo -n, which never asks for a password)",
            )
        )
    elif eff.root and not as_root:
        problems.append(
            Problem(
                i,
                key,
                f"the command needs root ({', '.join(eff.root)}): set root: true "
                + ("on the undo" if key == "undo" else "on the action and on the fix"),
            )
        )
    if as_root and eff.shell:
        problems.append(
            Problem(
                i,
                key,
                "a command run as root must be one program and its arguments (no ;, |, "
                ">, $(…), globs), so that a sudoers rule can allow exactly it and not a "
                "root shell: split it into actions (sysctl -w writes /proc/sys)",
            )
        )
    return problems


def _command_risk(command: str, what: str, needed: str, needed_why: str) -> tuple[str, str]:
    """The risk a fix needs once it runs this command (`what`: 'action N', its undo)."""
    eff = command_effects(_placeholders_as_words(command))
    if RISK_ORDER[eff.risk] > RISK_ORDER[needed]:
        why = eff.risk_why
        why = why if why.startswith(("writes ", "commands ")) else f"runs {why}"
        needed, needed_why = eff.risk, f"{what} {why}"
    if needed == "safe":  # safe only when every part of it is known to be read-only
        why_not = read_only_problem(_placeholders_as_words(command))
        if why_not is not None:
            needed = "disruptive"
            needed_why = (
                f"{what} is not known to be read-only ({why_not}); only commands "
                "known to read and never change anything are safe"
            )
    return needed, needed_why


def _undo_problems(i: int, undo: dict) -> list[Problem]:
    """An undo's `before` is a fact read on a node; its command fills only {before} and
    the values the action's own command may use."""
    from spark_tui.facts import NODE_FACTS

    before = undo.get("before")
    if before is not None and before not in NODE_FACTS:
        return [
            Problem(
                i,
                "undo",
                f"undo: 'before' is {before!r}, not a node fact (a value read on each node, "
                "e.g. net.fabric_mtu)",
            )
        ]
    return []
