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

SUDOERS_HINT = (
    "spark-tui only uses 'sudo -n' (never a password prompt). Allow the commands "
    "without a password, e.g. in /etc/sudoers.d/spark-tui:\n"
    "  USER ALL=(root) NOPASSWD: /usr/bin/sh, /usr/sbin/reboot, /usr/bin/mv"
)
SUDO_PASSWORD_MARKERS = ("a password is required", "a terminal is required")


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


def as_root(command: str) -> str:
    """Wrap a command to run as root without ever prompting: `sudo -n sh -c '…'`."""
    return f"sudo -n sh -c {quote(command)}"


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
