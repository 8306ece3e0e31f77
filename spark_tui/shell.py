"""The one renderer of shell commands: every value from config, a recipe or the
knowledge base reaches a shell through here, quoted.

Preview and execution both call these functions, so what the user approves is
byte for byte what runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)\}")

SUDO_PASSWORD_MARKERS = ("a password is required", "a terminal is required")
# Drop the page cache: `sync` needs no root; the drop itself is one command sudoers can
# allow by name (`echo 3 > /proc/sys/vm/drop_caches` would need a root shell).
DROP_CACHES_ROOT = "sysctl -w vm.drop_caches=3"


def quote(value: object) -> str:
    """Quote one value for a POSIX shell."""
    return shlex.quote(str(value))


def join(argv: Iterable[object]) -> str:
    """Render an argument vector as one shell command line, each word quoted."""
    return " ".join(quote(a) for a in argv)


def fill(template: str, values: Mapping[str, object]) -> str:
    """Replace `{name}` / `{node.fabric_if}` placeholders with quoted values.

    Raises KeyError naming the placeholder when a value is missing, so a
    template never runs half-filled.
    """

    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values or values[key] is None:
            raise KeyError(key)
        return quote(values[key])

    return _PLACEHOLDER.sub(sub, template)


def placeholders(template: str) -> list[str]:
    """The placeholder names a template uses, in order."""
    return _PLACEHOLDER.findall(template)


# outside quotes these make a command more than one program with its arguments
_UNQUOTED_SPECIAL = set(";&|<>()$`\\*?[]{}~#!\n\r")
_DOUBLE_QUOTED_SPECIAL = set("$`\\")


def simple_words(command: str) -> list[str] | None:
    """The words of a command that is one program and its arguments (no operators,
    redirections, expansions, globs or assignments), else None."""
    quote_char = ""
    for i, ch in enumerate(command):
        if quote_char == "'":
            quote_char = "" if ch == "'" else quote_char
        elif quote_char == '"':
            if ch in _DOUBLE_QUOTED_SPECIAL:
                return None
            quote_char = "" if ch == '"' else quote_char
        elif ch in "'\"":
            quote_char = ch
        elif ch in _UNQUOTED_SPECIAL and not (ch in "{}" and _bare_braces(command, i)):
            return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or words[0].startswith("-") or "=" in words[0]:
        return None
    return words


def _bare_braces(command: str, i: int) -> bool:
    """`{}` standing alone as a word (find's -exec placeholder) is not shell syntax."""
    start = i if command[i] == "{" else i - 1
    word = command[start : start + 2]
    before = command[start - 1] if start > 0 else " "
    after = command[start + 2] if start + 2 < len(command) else " "
    return word == "{}" and before.isspace() and after.isspace()


def as_root(command: str) -> str:
    """A command run as root without ever prompting: `sudo -n PROGRAM ARGS…` when it is one
    program (what a sudoers rule can allow exactly); `sudo -n sh -c '…'` otherwise."""
    if simple_words(command) is not None:
        return "sudo -n " + command
    return f"sudo -n sh -c {quote(command)}"


def drop_caches() -> str:
    """Drop the page cache on a node: `sync`, then the drop as root."""
    return f"sync; {as_root(DROP_CACHES_ROOT)}"


def needs_sudo_password(output: str) -> bool:
    """True when `sudo -n` refused because a password would have been needed."""
    low = output.lower()
    return "sudo" in low and any(m in low for m in SUDO_PASSWORD_MARKERS)


def env_prefix(env: Mapping[str, object]) -> str:
    """`K1=v1 K2=v2 ` with each value quoted (names are checked, never quoted)."""
    parts = []
    for key, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"not an environment variable name: {key!r}")
        parts.append(f"{key}={quote(value)}")
    return " ".join(parts) + (" " if parts else "")
