"""Real engine output, kept as data in logtext/*.txt (sources in logtext/SOURCES.md).

A file holds sections (`## name`) of template lines; `<<name>>` marks a value the
simulator fills in from its state (a pid, a time, a memory figure). Nothing else
is ever changed, so every line the simulator prints is one a real engine printed.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import cache
from pathlib import Path

_DIR = Path(__file__).resolve().parent / "logtext"
_SLOT = re.compile(r"<<(\w+)>>")


@cache
def sections(kind: str) -> dict[str, tuple[str, ...]]:
    """Sections of logtext/<kind>.txt: name -> template lines."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in (_DIR / f"{kind}.txt").read_text(encoding="utf-8").splitlines():
        if raw.startswith("## "):
            current = out.setdefault(raw[3:].strip(), [])
        elif current is not None:
            current.append(raw)
        # lines before the first section are the file's comment header
    return {k: tuple(v) for k, v in out.items()}


def render(kind: str, section: str, **values: object) -> list[str]:
    """The lines of one section with its slots filled; a missing value is an error."""

    def fill(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(f"logtext/{kind}.txt [{section}] needs <<{key}>>")
        return str(values[key])

    return [_SLOT.sub(fill, line) for line in sections(kind)[section]]


def slots(kind: str, section: str) -> set[str]:
    """Slot names a section uses (tests check every one is filled)."""
    return {m for line in sections(kind)[section] for m in _SLOT.findall(line)}


def vllm_ts(t: float) -> str:
    """vLLM's log time stamp (month-day time, UTC)."""
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%m-%d %H:%M:%S")


def sglang_ts(t: float) -> str:
    """SGLang's log time stamp (date and time, UTC)."""
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def mmss(s: float) -> str:
    """A tqdm duration: minutes:seconds."""
    s = max(0, int(s))
    return f"{s // 60:02d}:{s % 60:02d}"
