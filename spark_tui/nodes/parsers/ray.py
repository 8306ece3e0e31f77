"""`ray status` → RayStatus (alive nodes, GPUs used/total, object store size).

Reads the autoscaler summary of Ray 2.x: an `Active:` list of nodes, then
`Usage:` (or `Total Usage:`) lines like ` 0.0/2.0 GPU` and
` 0B/9.31GiB object_store_memory`.
"""

from __future__ import annotations

import re

from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.state import RayStatus

_USAGE = re.compile(r"^\s*([\d.]+)\s*([KMGTP]i?B|B)?\s*/\s*([\d.]+)\s*([KMGTP]i?B|B)?\s+(\S+)\s*$")
_SCALE = {
    None: 1,
    "B": 1,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "PiB": 1 << 50,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "PB": 10**15,
}
_NODE = re.compile(r"^\s*\d+\s+node_[0-9a-f]+|^\s*\(no active nodes\)")
NOT_RUNNING = ("could not find any running ray instance", "no such container", "is not running")


def parse_ray_status(text: str) -> RayStatus | Unparseable:
    low = text.lower()
    if any(m in low for m in NOT_RUNNING):
        return Unparseable("ray: not running")
    if "node status" not in low and "usage:" not in low:
        return Unparseable("no 'Node status' in ray status output")
    alive = 0
    section = ""
    gpus_used = gpus_total = 0.0
    store_total: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and not stripped.startswith("("):
            section = stripped[:-1].lower()
            continue
        if section == "active" and _NODE.match(line) and "no active" not in stripped:
            try:
                alive += int(stripped.split()[0])
            except (ValueError, IndexError):
                continue
        elif section in ("usage", "total usage"):
            m = _USAGE.match(line)
            if not m:
                continue
            try:
                used, total = float(m.group(1)), float(m.group(3))
            except ValueError:
                continue
            what = m.group(5)
            if what == "GPU":
                gpus_used, gpus_total = used, total
            elif what == "object_store_memory":
                store_total = int(total * _SCALE.get(m.group(4), 1))
    return RayStatus(alive, gpus_used, gpus_total, store_total)
