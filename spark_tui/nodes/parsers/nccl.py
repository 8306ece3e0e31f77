"""The libnccl.so.2 files inside a serving container: "SIZE SHA256  PATH" lines (from
commands.NCCL_LIBRARIES) → NcclLibrary. Distinct hashes are distinct builds."""

from __future__ import annotations

import re

from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.state import NcclLibrary

_ROW = re.compile(r"^(\d{1,15})\s+([0-9a-f]{64})\s+\*?(/\S.*)$")


def parse_nccl_libraries(text: str) -> tuple[NcclLibrary, ...] | Unparseable:
    """Each file once (sorted by path); no file at all is an empty tuple (NCCL not installed)."""
    found: dict[str, NcclLibrary] = {}
    other = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _ROW.match(line)
        if m is None:
            other += 1
            continue
        found[m.group(3)] = NcclLibrary(m.group(3), int(m.group(1)), m.group(2))
    if not found and other:
        first = next(ln for ln in text.splitlines() if ln.strip())
        return Unparseable(f"not 'SIZE SHA256  PATH' lines: {first.strip()[:160]!r}")
    return tuple(found[p] for p in sorted(found))


def distinct_builds(libraries: tuple[NcclLibrary, ...]) -> int:
    """How many different builds (by content hash) the files are."""
    return len({lib.sha256 for lib in libraries})
