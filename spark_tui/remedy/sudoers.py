"""The sudoers rule spark-tui needs: exactly the commands it runs as root, never a shell.

spark-tui runs root commands only through `sudo -n` (never a password prompt), and each
one is a single program with fixed arguments (the knowledge base refuses a root command
that needs a shell: spark_tui.kb.safety). So the rule a user adds names those commands
with their arguments: dropping the page cache, the knowledge base's root fixes (a reboot,
a file moved aside, an MTU, GPU clocks), and the evidence read as root (the previous
boot's kernel log, pstore). Everything is taken from the renderers that build the
commands, so the rule and what runs cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from spark_tui import shell

if TYPE_CHECKING:
    from spark_tui.kb.schema import Action

# Where DGX OS (Ubuntu 24.04) keeps them: sudo matches the full path, found along its
# secure_path (/usr/sbin before /usr/bin). Another system: `command -v NAME`.
PATHS = {
    "sysctl": "/usr/sbin/sysctl",
    "reboot": "/usr/sbin/reboot",
    "poweroff": "/usr/sbin/poweroff",
    "ip": "/usr/sbin/ip",
    "ethtool": "/usr/sbin/ethtool",
    "modprobe": "/usr/sbin/modprobe",
    "mv": "/usr/bin/mv",
    "nvidia-smi": "/usr/bin/nvidia-smi",
    "journalctl": "/usr/bin/journalctl",
    "find": "/usr/bin/find",
    "systemctl": "/usr/bin/systemctl",
}
# the backup suffix's timestamp (%Y%m%dT%H%M%SZ) as a sudoers glob: digits only, so the
# rule allows renaming that one file and nothing else
STAMP_GLOB = "[0-9]" * 8 + "T" + "[0-9]" * 6 + "Z"
_STAMP_MARK = "SPARKTUISTAMP"
# A {node.fabric_if} whose node is not known here. Never `*`: in sudoers a `*` matches
# spaces too, so `ip link set dev * mtu 9000` also allows `ip link set dev eth0 down dev
# eth0 mtu 9000`. The line becomes a regular expression over the whole argument string
# (sudo >= 1.9.10: `^…$`), in which the value is one word of the characters it may have.
_PLACEHOLDER = re.compile(r"<([a-z_.]+)>")
_VALUE_CLASSES = {
    "node.fabric_if": "[A-Za-z0-9_.:-]{1,15}",  # an interface name (as cluster.yaml allows)
    "node.fabric_ip": "[0-9A-Fa-f.:]{2,39}",
    # a value read on the node before a change, which an undo sets back (remedy.undo)
    "net.fabric_mtu": "[1-9][0-9]{2,3}",  # an MTU, 100-9999 (jumbo frames stop near 9216)
}
_ANY_VALUE = "[A-Za-z0-9_.:/@%+-]{1,255}"


def _argv(rendered: str) -> list[str] | None:
    """The program and arguments of a rendered `sudo -n …` command (None: not one)."""
    if not rendered.startswith("sudo -n "):
        return None
    words = shell.simple_words(rendered[len("sudo -n ") :])
    if words is None or words[0] in ("sh", "bash"):
        return None
    return words


def planned_commands(action: Action, values: Mapping[str, object] | None = None) -> list:
    """The commands one action runs on one node (PlannedCommand: command, root), planned
    through the action registry as the engine plans it, then the undo's (what sets the node
    back if the fix fails; the value read before the change stays `<FACT>`); a placeholder
    the node has no value for stays `<name>`. [] for an action that needs a recipe or runs
    none."""
    from spark_tui.errors import SparkTuiError
    from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
    from spark_tui.remedy.actions import kind
    from spark_tui.remedy.actions.base import PlanContext, PlannedCommand

    values = values or {}
    node = NodeConfig(
        name=str(values.get("node.name") or "node"),
        host="node",
        role="head",
        fabric_if=str(values.get("node.fabric_if") or "<node.fabric_if>"),
        fabric_ip=str(values.get("node.fabric_ip") or "<node.fabric_ip>"),
    )
    ctx = PlanContext(ClusterConfig(nodes=(node,)), None, node.name, _STAMP_MARK, "sudoers")
    try:
        planned = kind(action.type).plan(0, action, ctx)
    except (SparkTuiError, KeyError, ValueError, TypeError, AttributeError):
        return []  # a relaunch, a recipe patch: no command of its own without a recipe
    # the value an undo restores stands as its fact (`<net.fabric_mtu>`): one word of the
    # characters that fact's values have
    # (with the fact in `values` — the doctor's reading of the node — the command as it
    # would run there now)
    undo = [
        PlannedCommand(u.node, u.command(_before(u.before, values)), u.root) for u in planned.undo
    ]
    return [*planned.commands, *undo]


def _before(fact: str | None, values: Mapping[str, object]) -> object:
    value = values.get(fact) if fact else None
    return value if value is not None and not isinstance(value, bool) else f"<{fact or 'before'}>"


def root_commands(
    walls: Iterable[object] | None = None, values: Mapping[str, object] | None = None
) -> list[list[str]]:
    """Every command spark-tui may run as root, as argument vectors, in a stable order.
    `walls`: the knowledge base (default: the one spark-tui loads); `values`: one node's
    placeholder values ({node.fabric_if} …), else those words are `*`."""
    from spark_tui.action_schemas import EVIDENCE_ITEMS
    from spark_tui.remedy.render import evidence_command

    if walls is None:
        walls = _knowledge()
    rendered = [shell.as_root(shell.DROP_CACHES_ROOT)]
    for wall in walls:
        for fix in getattr(wall, "fixes", ()):
            for action in fix.actions:
                rendered += [c.command for c in planned_commands(action, values) if c.root]
    rendered += [evidence_command(item, None, _STAMP_MARK) for item in EVIDENCE_ITEMS]
    out: list[list[str]] = []
    for line in rendered:
        argv = _argv(line)
        if argv is not None and argv not in out:
            out.append(argv)
    return out


def _knowledge() -> list[object]:
    from spark_tui.errors import InputError
    from spark_tui.kb.loader import load_knowledge

    try:
        return list(load_knowledge())
    except InputError:  # a broken user wall: the built-in ones still say what runs
        return list(load_knowledge(use_user=False))


def _escape(word: str) -> str:
    """One argument as sudoers reads it: its special characters escaped, the backup
    stamp as a glob of digits."""
    out = "".join("\\" + ch if ch in "\\,:=*?[] " else ch for ch in word)
    return out.replace(_STAMP_MARK, STAMP_GLOB)


def _regex_word(word: str) -> str:
    """One argument inside a `^…$` line: literal characters as themselves (or a class of
    one), each placeholder as the characters its value may have, sudoers' own special
    characters escaped."""
    out = []
    at = 0
    for m in _PLACEHOLDER.finditer(word):
        out.append(_regex_literal(word[at : m.start()]))
        out.append(_VALUE_CLASSES.get(m.group(1), _ANY_VALUE))
        at = m.end()
    out.append(_regex_literal(word[at:]))
    text = "".join(out).replace(_regex_literal(_STAMP_MARK), "[0-9]{8}T[0-9]{6}Z")
    return "".join("\\" + ch if ch in "\\,:=" else ch for ch in text)


def _regex_literal(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-/@%+ " else f"[{ch}]" for ch in text)


def sudoers_line(argv: list[str]) -> str:
    """One command of the rule: full path, then the arguments (`""`: none allowed); with a
    placeholder, the arguments as one regular expression (`^…$`) that allows exactly one
    word for it."""
    path = PATHS.get(argv[0], argv[0] if argv[0].startswith("/") else f"/usr/bin/{argv[0]}")
    if any(_PLACEHOLDER.search(a) for a in argv[1:]):
        return f"{path} ^{' '.join(_regex_word(a) for a in argv[1:])}$"
    args = " ".join(_escape(a) for a in argv[1:])
    return f"{path} {args}" if args else f'{path} ""'


def sudoers_rule(commands: list[list[str]], user: str = "USER") -> str:
    """The text of /etc/sudoers.d/spark-tui for these commands."""
    lines = [sudoers_line(c) for c in commands]
    body = ", \\\n    ".join(lines)
    return f"Cmnd_Alias SPARK_TUI = {body}\n{user} ALL=(root) NOPASSWD: SPARK_TUI"


def sudoers_hint(
    walls: Iterable[object] | None = None,
    values: Mapping[str, object] | None = None,
    user: str = "USER",
) -> str:
    """What to tell a user whose sudo asks for a password: the rule, ready to paste."""
    rule = sudoers_rule(root_commands(walls, values), user)
    return (
        "spark-tui runs commands as root only with 'sudo -n' (it never types a password), "
        "and only these. Allow exactly them — not a shell — with "
        "'sudo visudo -f /etc/sudoers.d/spark-tui' (paths as on DGX OS; 'command -v NAME' "
        "shows yours):\n" + "\n".join("  " + line for line in rule.splitlines())
    )
