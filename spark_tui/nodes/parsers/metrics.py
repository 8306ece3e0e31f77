"""The serving engine's Prometheus `/metrics` lines → EngineMetrics.

vLLM: `vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:generation_tokens_total`
(one line per engine with data parallelism: summed). SGLang: `sglang:num_running_reqs`,
`sglang:num_queue_reqs`, `sglang:generation_tokens_total` (one line per tensor-parallel rank
with a `tp_rank` label: rank 0 speaks for the engine, so the other ranks are not added twice).
"""

from __future__ import annotations

import math
import re

from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.state import EngineMetrics

_LINE = re.compile(
    r"^(?P<name>(?:vllm|sglang):[A-Za-z_]+)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)"
)
_TP_RANK = re.compile(r'(?:^|,)\s*tp_rank="(\d+)"')
_NAMES = {
    "vllm:num_requests_running": "running",
    "sglang:num_running_reqs": "running",
    "vllm:num_requests_waiting": "waiting",
    "sglang:num_queue_reqs": "waiting",
    "vllm:generation_tokens_total": "tokens",
    "sglang:generation_tokens_total": "tokens",
}


def parse_metrics(text: str) -> EngineMetrics | Unparseable:
    """The three figures the stall detector needs; Unparseable when none is there."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m or m["name"] not in _NAMES:
            continue
        rank = _TP_RANK.search(m["labels"] or "")
        if rank and rank.group(1) != "0":
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        if not math.isfinite(value) or value < 0:
            continue
        key = _NAMES[m["name"]]
        sums[key] = sums.get(key, 0.0) + value
    if not sums:
        return Unparseable("no vllm:/sglang: request or token counters in /metrics")
    return EngineMetrics(
        requests_running=sums.get("running"),
        requests_waiting=sums.get("waiting"),
        generation_tokens_total=sums.get("tokens"),
    )
