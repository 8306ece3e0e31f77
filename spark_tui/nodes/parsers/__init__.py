"""Parsers for the node readings, one module per reading (the sections of
spark_tui.nodes.commands). Each takes the command's text and returns a reading
or an `Unparseable` saying why; none of them raises on any input (they are
fuzzed with hypothesis in tests/test_nodes_parsers.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# What nvidia-smi prints where a number cannot be read (GB10 prints these for memory).
NOT_A_NUMBER = ("[n/a]", "n/a", "not supported", "[not supported]", "-", "", "[unknown error]")
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Unparseable:
    """A reading that could not be read from the output; `reason` says why."""

    reason: str

    def __bool__(self) -> bool:  # so `if reading:` treats it like a missing reading
        return False


def number(text: str) -> float | None:
    """The number at the start of a cell ('81.17 W', '0 %', '143771 MiB'), None for
    '[N/A]', 'N/A', 'Not Supported' and anything else that is not a number."""
    cell = text.strip()
    if cell.lower() in NOT_A_NUMBER:
        return None
    m = _NUMBER.match(cell)
    if m is None:
        return None
    try:
        value = float(m.group(0))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def integer(text: str) -> int | None:
    value = number(text)
    return None if value is None else int(value)


MIB = 1 << 20


def mib_to_bytes(text: str) -> int | None:
    """'520 MiB' or '520' (MiB, as nvidia-smi's nounits prints) → bytes."""
    value = number(text)
    return None if value is None or value < 0 else int(value * MIB)


def missing_tool(exit_code: int, text: str) -> str | None:
    """The tool's name when the shell could not find it (exit 127 / 'not found'), else None."""
    low = text.lower()
    if exit_code != 127 and "command not found" not in low:
        return None
    m = re.search(r"(?:^|\s|:)([\w.\-/]+): (?:command )?not found", text)
    if m:
        return m.group(1).rsplit("/", 1)[-1]
    return "tool"
