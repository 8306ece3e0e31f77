"""From a signature line written on a node behind real sshd to its diagnosis: how long?

    python bench/latency.py [--lines 200] [--interval 0.1]

Two real OpenSSH sshd nodes on loopback (tests/sshd_nodes.py). The live ClusterMonitor
tails a serving log on each node over SSH (paramiko, `tail -n0 -F`), exactly as it tails a
serve log; the bench appends real vLLM lines, and every tenth one is a wall's signature,
stamped when written. The clock stops when the monitor's `emit` hands over the LogLines
batch that marks that line with its wall (what the TUI's log and diagnoses panes and
`watch --json` receive). Not a timed test: figures go to bench/README.md ("## Latency").
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_tui import shell  # noqa: E402
from spark_tui.clock import RealClock  # noqa: E402
from spark_tui.events import LogLines  # noqa: E402
from spark_tui.kb.loader import load_knowledge  # noqa: E402
from spark_tui.monitor import ClusterMonitor  # noqa: E402
from tests.sshd_nodes import start_sshd_cluster  # noqa: E402

HEALTHY = "(APIServer pid=4100) INFO 05-28 20:26:31 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 36.6 tokens/s"
SIGNATURE = "(EngineCore_DP0 pid=4242) ValueError: Free memory on device cuda:0 (9.79/119.67 GiB) on startup is less than desired GPU memory utilization (0.82, 98.13 GiB). seq={seq}"


def measure(lines: int, interval: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        sshd = start_sshd_cluster(Path(tmp) / "sshd")
        names = [n.name for n in sshd.cluster_config().nodes]
        logs = {n: Path(tmp) / f"{n}.log" for n in names}
        for p in logs.values():
            p.write_text("")
        written: dict[str, float] = {}
        latencies: list[float] = []
        lock = threading.Lock()

        def emit(event: object) -> None:
            if not isinstance(event, LogLines) or not event.marks:
                return
            now = time.monotonic()
            for index, wall, _severity in event.marks:
                line = event.lines[index]
                key = line.rsplit("seq=", 1)[-1]
                with lock:
                    t0 = written.pop(f"{event.node}:{key}", None)
                if t0 is not None and wall == "vllm-free-memory-low":
                    latencies.append(now - t0)

        transports = {n: sshd.transport(n) for n in names}
        monitor = ClusterMonitor(
            sshd.cluster_config(),
            transports,
            load_knowledge(),
            RealClock(),
            emit,
            period_s=2.0,
            dmon=False,
            auto_tail=False,
        )
        monitor.start()
        for n in names:
            monitor.tail(n, "serve", f"tail -n0 -F {shell.quote(str(logs[n]))}")
        time.sleep(3.0)  # let the tails start
        try:
            for i in range(lines):
                node = names[i % len(names)]
                with logs[node].open("a") as fh:
                    for _ in range(9):
                        fh.write(HEALTHY + "\n")
                    with lock:
                        written[f"{node}:{i}"] = time.monotonic()
                    fh.write(SIGNATURE.format(seq=i) + "\n")
                time.sleep(interval)
            deadline = time.monotonic() + 10
            while written and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            monitor.stop()
            sshd.stop()
        missed = len(written)
        if missed:
            print(f"{missed} signature lines never reached a diagnosis", file=sys.stderr)
        return latencies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200, help="signature lines (default 200)")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between them")
    args = ap.parse_args()
    lat = sorted(measure(args.lines, args.interval))
    if not lat:
        print("no signature line reached a diagnosis", file=sys.stderr)
        return 1
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    print(f"signature lines: {len(lat)} of {args.lines} diagnosed")
    print(
        f"write -> diagnosis: p50 {p(0.5):.0f} ms, p95 {p(0.95):.0f} ms, max {lat[-1] * 1000:.0f} ms, mean {statistics.mean(lat) * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
