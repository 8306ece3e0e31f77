"""Kernel and boot readings: NVRM lines from dmesg, boot id and uptime, listening ports."""

from __future__ import annotations

import re

from spark_tui.nodes.parsers import Unparseable

_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_PORT = re.compile(r":(\d{1,5})$")


def parse_nvrm(text: str) -> tuple[str, ...]:
    """The kernel log lines that come from the NVIDIA driver (NVRM), in order."""
    return tuple(line.rstrip() for line in text.splitlines() if "NVRM" in line)


def parse_boot(text: str) -> tuple[str, float] | Unparseable:
    """(boot id, seconds since boot) from `cat boot_id /proc/uptime`."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not _BOOT_ID.match(lines[0]):
        return Unparseable("no boot id / uptime")
    try:
        uptime = float(lines[1].split()[0])
    except (ValueError, IndexError):
        return Unparseable("no uptime")
    if uptime != uptime or uptime < 0 or uptime == float("inf"):
        return Unparseable("no uptime")
    return lines[0], uptime


def parse_listening_ports(text: str) -> tuple[int, ...] | Unparseable:
    """TCP ports something listens on, from `ss -ltnH` (sorted, each once)."""
    ports: set[int] = set()
    rows = 0
    for line in text.splitlines():
        words = line.split()
        if len(words) < 4 or words[0] != "LISTEN":
            continue
        rows += 1
        m = _PORT.search(words[3])
        if m and 0 < int(m.group(1)) < 65536:
            ports.add(int(m.group(1)))
    if not rows and text.strip():
        return Unparseable("no LISTEN rows in ss -ltnH output")
    return tuple(sorted(ports))
