"""One small snapshot app: the spark-tui app on a three-node cluster with a frozen clock,
fed a fixed replay of monitor events (readings, real vLLM log lines, the diagnoses the
knowledge base makes of them). Deterministic: no live threads, no wall-clock time.

Used by tests/test_tui_snapshots.py and screenshots/make.py.
"""

from __future__ import annotations

import os
import time

os.environ["TZ"] = "UTC"  # clock times on screen must not depend on the machine
time.tzset()

# freeze the cursor blink (a blinking cursor is a different picture every half second)
from textual.widgets import Input  # noqa: E402

from spark_tui.events import DiagnosisRaised, LogLines, NodeSampled, ReachabilityChanged  # noqa: E402
from spark_tui.facts import GIB  # noqa: E402
from spark_tui.kb.diagnosis import DiagnosisBook  # noqa: E402
from spark_tui.kb.loader import load_knowledge  # noqa: E402
from spark_tui.kb.matcher import Matcher  # noqa: E402
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig  # noqa: E402
from spark_tui.nodes.state import (  # noqa: E402
    Container,
    GpuReading,
    MemoryReading,
    NodeState,
    RayStatus,
    ServingState,
)
from spark_tui.nodes.transport import Reachability  # noqa: E402
from spark_tui.tui.app import SparkTuiApp  # noqa: E402
from spark_tui.tui.session import ClusterSession  # noqa: E402

Input.cursor_blink._default = False  # type: ignore[attr-defined]


def _frozen_stamp() -> str:
    return "20260528-202640"  # backup names and renamed containers carry a stamp: freeze it


import spark_tui.recipes.render as _render  # noqa: E402
import spark_tui.remedy.bringup as _bringup  # noqa: E402
import spark_tui.remedy.fixes as _fixes  # noqa: E402

for _module in (_render, _bringup, _fixes):
    _module.stamp_now = _frozen_stamp

T0 = 1_780_000_000.0  # the frozen clock's "now"

# Real engine output (vLLM 0.11-0.14 wording, as quoted in the upstream trackers).
LOG = {
    "spark1": [
        "INFO 05-12 09:14:02 [__init__.py:216] Automatically detected platform cuda.",
        "INFO 05-12 09:14:09 [api_server.py:1896] vLLM API server version 0.11.1",
        "WARNING 05-12 09:14:31 [marlin_utils_fp4.py:204] Your GPU does not have native support for FP4 computation but FP4 quantization is being used. Weight-only FP4 compression will be used leveraging the Marlin kernel. This may degrade performance for compute-heavy workloads.",
        "INFO 05-12 09:14:33 [gpu_model_runner.py:2602] Starting to load model saricles/MiniMax-M2.7-NVFP4-GB10-AC...",
        "ERROR 05-12 09:14:35 [core.py:708] ValueError: Free memory on device cuda:0 (11.19/119.67 GiB) on startup is less than desired GPU memory utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ],
    "spark2": [
        "INFO 05-12 09:14:05 [worker_base.py:191] Worker ready on node spark2",
        "WARNING 05-12 09:14:31 [marlin_utils_fp4.py:204] Your GPU does not have native support for FP4 computation but FP4 quantization is being used. Weight-only FP4 compression will be used leveraging the Marlin kernel. This may degrade performance for compute-heavy workloads.",
        "INFO 05-12 09:14:33 [gpu_model_runner.py:2602] Starting to load model saricles/MiniMax-M2.7-NVFP4-GB10-AC...",
    ],
}


def _memory(cached_gib: float, free_gib: float) -> MemoryReading:
    total = int(119.7 * GIB)
    return MemoryReading(
        total_bytes=total,
        available_bytes=int((free_gib + cached_gib * 0.95) * GIB),
        free_bytes=int(free_gib * GIB),
        cached_bytes=int(cached_gib * GIB),
        swap_total_bytes=int(16 * GIB),
        swap_free_bytes=int(15.2 * GIB),
        shmem_bytes=int(0.4 * GIB),
    )


def _state(
    name: str, t: float, sm: float, cached: float, free: float, serving: ServingState
) -> NodeState:
    return NodeState(
        name=name,
        time=t,
        memory=_memory(cached, free),
        gpus=(
            GpuReading(
                0,
                "NVIDIA GB10",
                sm_pct=sm,
                mem_bw_pct=0.0,
                temp_c=41.0 + sm / 10,
                power_w=11.0 + sm / 2,
            ),
        ),
        containers=(
            Container(
                "c0ffee", "vllm-ray", "nvcr.io/nvidia/vllm:25.11-py3", "running", "Up 4 minutes"
            ),
        ),
        ray=RayStatus(nodes_alive=3, gpus_used=0.0, gpus_total=3.0),
        serving=serving,
    )


def replay_events() -> list:
    """The fixed event stream: a page-cache-hog launch failing on spark1, spark3 dropped."""
    walls = list(load_knowledge())
    matcher = Matcher(walls).stream()
    book = DiagnosisBook()
    events: list = []
    for i in range(40):  # 40 rounds of readings for the sparklines
        t = T0 - 80 + 2 * i
        events.append(
            NodeSampled(
                "spark1", _state("spark1", t, (i * 37) % 100, 91.5, 11.2, ServingState("crashed"))
            )
        )
        events.append(
            NodeSampled(
                "spark2",
                _state(
                    "spark2", t, (i * 53) % 97, 88.0, 14.0, ServingState("loading", load_pct=43.0)
                ),
            )
        )
        events.append(
            NodeSampled("spark3", _state("spark3", t, 0.0, 2.0, 104.0, ServingState("stopped")))
        )
    last = {e.node: e.state for e in events if isinstance(e, NodeSampled)}
    for node, lines in LOG.items():
        marks = []
        for idx, line in enumerate(lines):
            for hit in matcher.feed_line(f"{node}:serve", line):
                marks.append((idx, hit.wall.id, hit.wall.severity))
                diag, new = book.add(
                    hit.wall,
                    f"{node}:serve",
                    hit.line_no,
                    hit.evidence,
                    node=node,
                    now=T0 - 10 + idx,
                    facts=last[node].facts(),  # the readings choose the cause, as the monitor does
                )
                events.append(DiagnosisRaised(diag, new, T0))
        events.append(LogLines(node, "serve", tuple(lines), 1, tuple(marks)))
    events.append(
        ReachabilityChanged(
            "spark3", Reachability(False, T0 - 14, "connection reset", retrying=True)
        )
    )
    events.append(NodeSampled("spark3", NodeState("spark3", T0, reachable=False)))
    return events


def snapshot_session(read_only: bool = False) -> ClusterSession:
    config = ClusterConfig(
        nodes=(
            NodeConfig(
                "spark1", "10.0.0.1", "head", fabric_if="enp1s0f0np0", fabric_ip="10.10.10.1"
            ),
            NodeConfig(
                "spark2", "10.0.0.2", "worker", fabric_if="enp1s0f0np0", fabric_ip="10.10.10.2"
            ),
            NodeConfig(
                "spark3", "10.0.0.3", "worker", fabric_if="enp1s0f0np0", fabric_ip="10.10.10.3"
            ),
        ),
        recipe="minimax-m2.7-nvfp4-vllm-tp2",
        source="cluster.yaml",
    )
    return ClusterSession(config, {}, None, list(load_knowledge()), read_only=read_only)


class SnapshotApp(SparkTuiApp):
    """The real app, not live, with the replay fed in at mount."""

    def __init__(self, read_only: bool = False) -> None:
        super().__init__(snapshot_session(read_only), live=False)

    def on_mount(self) -> None:
        super().on_mount()
        for event in replay_events():
            self.pump.emit(event)


async def select_first_diagnosis(pilot) -> None:
    """run_before for snapshots: the newest wall selected, its details shown."""
    from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable

    await pilot.pause()
    table = pilot.app.screen.query_one(DiagnosesTable)
    table.focus()
    table.move_cursor(row=0)
    await pilot.pause()


def bringup_step(step: str):
    """run_before for snapshots: the bring-up screen open on one step."""

    async def run_before(pilot) -> None:
        from textual.widgets import ListView

        from spark_tui.tui.bringup_driver import BRINGUP_STEPS

        await pilot.pause()
        await pilot.press("b")
        await pilot.pause()
        pilot.app.screen.query_one(ListView).index = [s for s, _t in BRINGUP_STEPS].index(step)
        await pilot.pause()

    return run_before


app = SnapshotApp()

if __name__ == "__main__":
    app.run()
