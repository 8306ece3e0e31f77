"""The libnccl.so.2 files inside a serving container → NcclLibrary.

commands.NCCL_LIBRARIES prints "SIZE PATH" for each file, then sha256sum's "SHA256  PATH"
for each; they are joined by path. Distinct hashes are distinct builds.
"""

from __future__ import annotations

import re

from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.state import NcclLibrary

_SIZE = re.compile(r"^(\d{1,15}) (/\S.*)$")
_HASH = re.compile(r"^([0-9a-f]{64})\s+\*?(/\S.*)$")


def parse_nccl_libraries(text: str) -> tuple[NcclLibrary, ...] | Unparseable:
    """Each hashed file once (sorted by path); no file at all is an empty tuple."""
    sizes: dict[str, int] = {}
    hashes: dict[str, str] = {}
    other = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if m := _HASH.match(line):
            hashes[m.group(2)] = m.group(1)
        elif m := _SIZE.match(line):
            sizes[m.group(2)] = int(m.group(1))
        else:
            other += 1
    if not hashes and other:
        first = next(ln for ln in text.splitlines() if ln.strip())
        return Unparseable(f"not 'SIZE PATH' / 'SHA256  PATH' lines: {first.strip()[:160]!r}")
    return tuple(NcclLibrary(p, sizes.get(p, -1), hashes[p]) for p in sorted(hashes))


def distinct_builds(libraries: tuple[NcclLibrary, ...], preload: str | None = None) -> int:
    """How many different builds (by content hash) the engine can load. A libnccl named in
    LD_PRELOAD is loaded first and satisfies every later `libnccl.so.2` (same SONAME), so
    then only that build runs."""
    if preload:
        for word in preload.replace(":", " ").split():
            if any(
                lib.path == word or lib.path.startswith(word.rstrip("/") + ".") for lib in libraries
            ):
                return 1
    return len({lib.sha256 for lib in libraries})
