"""`ip -o link` → {interface: (state, mtu)}; `ip -br addr` → {interface: (state, addresses)};
`ibdev2netdev` → {interface: (RoCE devices)}; link speeds from /sys/class/net/*/speed."""

from __future__ import annotations

import re

from spark_tui.nodes.parsers import Unparseable

_LINK = re.compile(r"^\d+:\s+([^:\s]+):\s+<([^>]*)>(.*)$")
_ROCE = re.compile(r"^(\S+)\s+port\s+\d+\s+==>\s+(\S+)(?:\s+\((\w+)\))?")
_SPEED = re.compile(r"/sys/class/net/([^/\s]+)/speed:(-?\d+)\s*$")


def _ifname(raw: str) -> str:
    return raw.split("@", 1)[0]  # veth peers: 'eth0@if5'


def parse_ip_link(text: str) -> dict[str, tuple[str, int | None]] | Unparseable:
    """Interface → (state, MTU) from `ip -o link` (one line per interface)."""
    out: dict[str, tuple[str, int | None]] = {}
    for line in text.splitlines():
        m = _LINK.match(line.strip())
        if not m:
            continue
        rest = m.group(3).split("\\", 1)[0]  # the link/ether part follows a backslash
        mtu_m = re.search(r"\bmtu (\d{1,7})\b", rest)
        mtu = int(mtu_m.group(1)) if mtu_m else None
        state_m = re.search(r"\bstate (\S+)", rest)
        state = state_m.group(1).upper() if state_m else "UNKNOWN"
        flags = m.group(2).split(",")
        if state == "UNKNOWN" and "UP" in flags and "LOWER_UP" in flags and m.group(1) != "lo":
            state = "UP"
        out[_ifname(m.group(1))] = (state, mtu)
    return out if out else Unparseable("no interfaces in ip -o link output")


def parse_ip_br_addr(text: str) -> dict[str, tuple[str, tuple[str, ...]]] | Unparseable:
    """Interface → (state, CIDR addresses) from `ip -br addr`."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2 or not re.fullmatch(r"[\w.:@\-]+", words[0]):
            continue
        state = words[1].upper()
        if not re.fullmatch(r"[A-Z_]+", state):
            continue
        addrs = tuple(w for w in words[2:] if "/" in w)
        out[_ifname(words[0])] = (state, addrs)
    return out if out else Unparseable("no interfaces in ip -br addr output")


def parse_ibdev2netdev(text: str) -> dict[str, tuple[str, ...]] | Unparseable:
    """Interface → its RoCE devices ('rocep1s0f0 port 1 ==> enp1s0f0np0 (Up)')."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _ROCE.match(line.strip())
        if m:
            out.setdefault(m.group(2), []).append(m.group(1))
    if not out and text.strip():
        return Unparseable("no 'DEV port N ==> IF' lines in ibdev2netdev output")
    return {k: tuple(v) for k, v in out.items()}


def parse_speeds(text: str) -> dict[str, int]:
    """Interface → link speed in Mb/s from `grep -H . /sys/class/net/*/speed` (-1 = unknown, left out)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _SPEED.match(line.strip())
        if m and 0 < len(m.group(2)) < 10 and int(m.group(2)) > 0:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_roce_up(text: str) -> tuple[str, ...]:
    """The RoCE devices ibdev2netdev shows as (Up), in order ('rocep1s0f0 port 1 ==> … (Up)')."""
    out: list[str] = []
    for line in text.splitlines():
        m = _ROCE.match(line.strip())
        if m and (m.group(3) or "").lower() == "up" and m.group(1) not in out:
            out.append(m.group(1))
    return tuple(out)


_ROUTE_DEV = re.compile(r"^default\b.*?\bdev\s+([^\s@]+)")


def parse_default_route(text: str) -> str | Unparseable | None:
    """The interface of the first default route from `ip route show default` (None: no route)."""
    for line in text.splitlines():
        m = _ROUTE_DEV.match(line.strip())
        if m:
            return m.group(1)
    if text.strip() and not any(line.startswith("default") for line in text.splitlines()):
        return Unparseable(f"no 'default … dev IF' line: {text.strip().splitlines()[0][:120]!r}")
    return None
