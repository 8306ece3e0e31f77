"""`nvidia-smi dmon` lines → DmonSample, one line at a time (it is a long-lived stream).

The header names the columns (`# gpu pwr gtemp mtemp sm mem …` for `-s pu`,
`# gpu sm mem …` for `-s u`), so the parser reads them instead of assuming an
order. On GB10 `mem` reads 0 whatever the load (no framebuffer: Syllo/nvtop#426).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_tui.nodes.parsers import Unparseable, integer, number

DEFAULT_COLUMNS = ("gpu", "sm", "mem", "enc", "dec", "jpg", "ofa")


@dataclass(frozen=True)
class DmonSample:
    gpu: int
    sm_pct: float | None
    mem_bw_pct: float | None
    power_w: float | None = None


class DmonParser:
    """Keeps the column names of the last header; `feed` turns a data line into a sample."""

    def __init__(self) -> None:
        self.columns: tuple[str, ...] = DEFAULT_COLUMNS

    def feed(self, line: str) -> DmonSample | None:
        """A sample, or None for a header, a blank line or a line that is not a sample."""
        text = line.strip()
        if not text:
            return None
        if text.startswith("#"):
            words = tuple(w.lower() for w in text.lstrip("#").split())
            if words and words[0] == "gpu":  # the names line, not the units line
                self.columns = words
            return None
        cells = text.split()
        if len(cells) != len(self.columns):
            return None
        cell = dict(zip(self.columns, cells, strict=False))
        gpu = integer(cell.get("gpu", ""))
        if gpu is None or gpu < 0 or not cells[0].isdigit():
            return None
        return DmonSample(
            gpu,
            number(cell.get("sm", "")),
            number(cell.get("mem", "")),
            number(cell.get("pwr", "")),
        )


def parse_dmon(text: str) -> tuple[DmonSample, ...] | Unparseable:
    """Every sample of a captured dmon output."""
    parser = DmonParser()
    samples = tuple(s for line in text.splitlines() if (s := parser.feed(line)) is not None)
    return samples if samples else Unparseable("no samples in nvidia-smi dmon output")
