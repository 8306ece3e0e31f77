"""What pasting does to log text, undone before matching.

Logs reach the knowledge base as users paste them into trackers and terminals:
  * colour codes whose ESC byte was lost (`[2m[33m(raylet)[0m`) or shown in caret
    notation (`^[[0;36m`): `clean_line` removes them with the real ones;
  * lines re-wrapped at a fixed width, mid-word or at a space: a line that does not
    start a new record (no time stamp, level, process prefix, traceback frame)
    continues the line before it, and `joins` gives the texts to match a
    signature against when its words run over such a line break.

Nothing here knows a wall: the matcher asks for a join only where a line holds
half of a signature's required literal (`fragments`), so healthy lines cost nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# ESC-led sequences (CSI, OSC, two-byte), their caret-notation form, and SGR/erase
# codes whose ESC was stripped by the paste: "[0m", "[1;36m", "[0;0m", "[K"
_COLOUR = re.compile(
    rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
    rb"|\^\[\[[0-9;?]*[@-~]"
    rb"|\[[0-9]{1,3}(?:;[0-9]{1,3})*m"
)

MIN_WRAP_COLS = 40  # a line shorter than this was not wrapped by a paste
WRAP_BACK = 3  # lines before a candidate line that a join may take in
WRAP_FWD = 3  # lines after it
MIN_FRAGMENT = 5  # half-literals shorter than this would make most lines candidates

# What starts a new record rather than continuing a wrapped one: blank or indented
# lines (traceback source lines), brackets ([time], [rank0]:), process prefixes
# ((raylet), (EngineCore pid=1)), dates and times, levels, glog heads, frames,
# exception lines, and the lines Python puts between chained exceptions.
_RECORD = re.compile(
    rb"\s*$|\s\s|\t|[\[<{|#>$]"
    rb"|\((?:raylet|gcs_server|autoscaler|monitor|dashboard|pid=|[^()\s]+ (?:pid|ip|rank)=)"
    rb"|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\d\d-\d\d \d\d:|[A-Z][a-z]{2} [ \d]\d \d\d:"
    rb"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|NOTICE)\b"
    rb"|[IWEF]\d{4} \d\d:"
    rb"|Traceback \(most recent call last\)|File \""
    rb"|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)(?::|\(|\s*$)"
    rb"|During handling of the above exception|The above exception was the direct cause"
)
# a prefix that a logger repeats on every line of one record: "(raylet) ", "[rank0]: "
_PREFIX = re.compile(rb"(?:\([^()\n]{1,80}\)|\[[^\[\]\n]{1,40}\]:) ?")


def clean_line(line: bytes) -> bytes:
    """A line without colour codes (real, caret-notation or ESC-less) and without CR."""
    if b"[" in line or b"\x1b" in line:  # every form above holds one of these
        line = _COLOUR.sub(b"", line)
    return line.rstrip(b"\r")


def continues(prev: bytes, line: bytes) -> bytes | None:
    """If `line` (clean) continues `prev` (clean) as a paste re-wrapped it, the part
    of `line` that continues it (a prefix repeated from `prev` removed); else None."""
    if len(prev) < MIN_WRAP_COLS or prev.endswith(b"  "):  # short, or padded: it ended
        return None
    m = _PREFIX.match(line)
    if m and prev.startswith(m.group(0)):  # the same logger prefix on both lines
        line = line[m.end() :]
    if _RECORD.match(line):
        return None
    return line


def _joined(parts: Sequence[bytes], sep: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    spans: list[tuple[int, int]] = []
    out = bytearray()
    for i, part in enumerate(parts):
        if i and sep:
            out += sep
        spans.append((len(out), len(out) + len(part)))
        out += part
    return bytes(out), spans


def joins(parts: Sequence[bytes]) -> list[tuple[bytes, list[tuple[int, int]]]]:
    """The texts a run of wrapped lines stood for, with each line's span in it:
    as a terminal wraps (the characters run on), then as a reflow wraps (at a
    space, which the wrap dropped)."""
    hard = _joined(parts, b"")
    trimmed = [p.strip(b" ") if i else p.rstrip(b" ") for i, p in enumerate(parts)]
    soft = _joined(trimmed, b" ")
    return [hard] if soft[0] == hard[0] else [hard, soft]


def crosses(span: tuple[int, int], spans: Sequence[tuple[int, int]]) -> int | None:
    """The index of the first line a match overlaps, when it overlaps two or more
    (a match inside one line was found on that line alone); else None."""
    start, end = span
    touched = [i for i, (a, b) in enumerate(spans) if start < b and end > a]
    return touched[0] if len(touched) >= 2 else None


def fragments(literal: bytes) -> list[bytes]:
    """Pieces of a required literal such that, however a wrap splits it, one of them
    is whole on the line where the wrap happened or on the next: its first and its
    last half (overlapping by one byte), or the literal itself when short."""
    n = len(literal)
    half = (n + 1) // 2
    if half < MIN_FRAGMENT:
        return [literal]
    return [literal[:half], literal[half - 1 :]]
