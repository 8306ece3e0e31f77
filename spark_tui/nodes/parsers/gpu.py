"""nvidia-smi query CSV → GpuReading / GpuProcess.

Accepts the header with units (`--format=csv`) or none (`noheader`), and
`[N/A]`, `N/A`, `Not Supported` wherever a number can stand (GB10 prints them
for every framebuffer figure: unified memory has none).
"""

from __future__ import annotations

import csv
import io

from spark_tui.nodes.commands import GPU_QUERY_FIELDS
from spark_tui.nodes.parsers import MIB, Unparseable, integer, mib_to_bytes, number
from spark_tui.nodes.state import GpuProcess, GpuReading

_FIELDS = tuple(GPU_QUERY_FIELDS.split(","))
# nvidia-smi names some columns differently in its header than in the query
_ALIASES = {"clocks.current.sm": "clocks.sm", "used_gpu_memory": "used_memory"}


def _rows(text: str) -> list[list[str]]:
    try:
        return [
            [c.strip() for c in row]
            for row in csv.reader(io.StringIO(text.replace("\x00", "")), skipinitialspace=True)
            if row and any(c.strip() for c in row)
        ]
    except csv.Error:
        return []


def _header(row: list[str]) -> list[str] | None:
    """Column names from a header row ('memory.used [MiB]' → 'memory.used'), or None."""
    names = [c.split(" [")[0].strip().lower() for c in row]
    names = [_ALIASES.get(n, n) for n in names]
    known = set(_FIELDS) | {"pid", "process_name", "used_memory", "gpu_uuid"}
    return names if sum(n in known for n in names) >= max(1, len(names) // 2) else None


def _columns(rows: list[list[str]], default: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    if rows and (head := _header(rows[0])) is not None:
        return head, rows[1:]
    return list(default), rows


def parse_gpu_query(text: str) -> tuple[GpuReading, ...] | Unparseable:
    """`nvidia-smi --query-gpu=<GPU_QUERY_FIELDS> --format=csv[,noheader][,nounits]`."""
    if "NVIDIA-SMI has failed" in text or "No devices were found" in text:
        return Unparseable(text.strip().splitlines()[0][:200])
    names, rows = _columns(_rows(text), _FIELDS)
    gpus: list[GpuReading] = []
    for row in rows:
        cell = dict(zip(names, row, strict=False))
        index = integer(cell.get("index", ""))
        if index is None or index < 0 or len(row) < 2:
            continue
        total = cell.get("memory.total", "")
        used = cell.get("memory.used", "")
        gpus.append(
            GpuReading(
                index=index,
                name=cell.get("name", ""),
                uuid=cell.get("uuid", ""),
                sm_pct=number(cell.get("utilization.gpu", "")),
                mem_bw_pct=number(cell.get("utilization.memory", "")),
                memory_used_bytes=mib_to_bytes(used),
                memory_total_bytes=mib_to_bytes(total),
                temp_c=number(cell.get("temperature.gpu", "")),
                power_w=number(cell.get("power.draw", "")),
                sm_clock_mhz=number(cell.get("clocks.sm", "")),
            )
        )
    if not gpus:
        return Unparseable("no GPU rows in nvidia-smi --query-gpu output")
    return tuple(gpus)


def parse_compute_apps(text: str) -> tuple[GpuProcess, ...] | Unparseable:
    """`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`
    (a header alone means no process)."""
    if "NVIDIA-SMI has failed" in text or "No devices were found" in text:
        return Unparseable(text.strip().splitlines()[0][:200])
    rows = _rows(text)
    if rows and rows[0] and rows[0][0].lower().startswith("no running"):
        return ()
    names, rows = _columns(rows, ("pid", "process_name", "used_memory"))
    if "pid" not in names:
        return Unparseable("no pid column in nvidia-smi --query-compute-apps output")
    procs: list[GpuProcess] = []
    for row in rows:
        cell = dict(zip(names, row, strict=False))
        pid = integer(cell.get("pid", ""))
        if pid is None or pid < 0:
            return Unparseable(f"not a process row: {','.join(row)[:120]!r}")
        used = cell.get("used_memory", "")
        procs.append(GpuProcess(pid, cell.get("process_name", ""), mib_to_bytes(used)))
    return tuple(procs)


__all__ = ["MIB", "parse_compute_apps", "parse_gpu_query"]
