"""/proc/meminfo → MemoryReading (on GB10 the OS is the only source of memory figures)."""

from __future__ import annotations

from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.state import MemoryReading

_UNITS = {"kb": 1024, "mb": 1 << 20, "gb": 1 << 30, "b": 1, "": 1}


def parse_meminfo(text: str) -> MemoryReading | Unparseable:
    """Read MemTotal, MemFree, MemAvailable, Cached, Buffers, Swap*, Shmem (bytes)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts or not parts[0].isdigit() or len(parts[0]) > 20:
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        if unit not in _UNITS:
            continue
        values[key.strip()] = int(parts[0]) * _UNITS[unit]
    if "MemTotal" not in values or "MemFree" not in values:
        return Unparseable("no MemTotal/MemFree in /proc/meminfo output")
    cached = values.get("Cached", 0) + values.get("Buffers", 0)
    # kernels before 3.14 have no MemAvailable: free + page cache is its usual estimate
    available = values.get("MemAvailable", values["MemFree"] + cached)
    return MemoryReading(
        total_bytes=values["MemTotal"],
        available_bytes=available,
        free_bytes=values["MemFree"],
        cached_bytes=cached,
        swap_total_bytes=values.get("SwapTotal", 0),
        swap_free_bytes=values.get("SwapFree", 0),
        shmem_bytes=values.get("Shmem", 0),
    )
