"""What watching costs a node: remote sessions, processes and CPU per minute.

Starts real sshd nodes on loopback (tests/sshd_nodes.py, with the shim tools
that print real captures), runs the live ClusterMonitor on them for a while,
then reads what the nodes saw:
- sessions: "Starting session: command" lines in each sshd's log (one per channel);
- tool calls: the shims' own log (nvidia-smi, docker, ip, …);
- processes per round: the commands of the sampling script (sh + each external
  command and pipeline member; `echo` is a shell builtin);
- CPU: utime+stime of the node's sshd and everything below it (sessions and their
  commands are reaped into sshd's cumulative times once the connection closes).

For contrast it runs the naive way too: one `run()` per probe per round.

    python bench/sampling.py [--seconds 60] [--period 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_tui.clock import RealClock  # noqa: E402
from spark_tui.kb.loader import load_knowledge  # noqa: E402
from spark_tui.monitor import ClusterMonitor  # noqa: E402
from spark_tui.nodes import commands  # noqa: E402
from tests.sshd_nodes import start_sshd_cluster  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS


def processes_per_round(sections: dict[str, str]) -> int:
    """sh itself, plus every external command of the script (pipelines count each member)."""
    count = 1
    for command in sections.values():
        for simple in command.replace("&&", ";").replace("||", ";").split(";"):
            count += len([p for p in simple.split("|") if p.strip()])
    return count


def watch(seconds: float, period: float, naive: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster_nodes = start_sshd_cluster(Path(tmp))
        os.environ["HOME"] = str(cluster_nodes.home)
        try:
            cluster = cluster_nodes.cluster_config()
            transports = {n.name: cluster_nodes.transport(n.name) for n in cluster.nodes}
            start_cpu = {n: cpu_seconds(node.proc.pid) for n, node in cluster_nodes.nodes.items()}
            rounds = 0
            if naive:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    for t in transports.values():
                        for command in commands.SAMPLE.values():
                            t.run(command + " 2>&1")
                    rounds += 1
                    time.sleep(period)
                for t in transports.values():
                    t.close()
            else:
                events: list[object] = []
                mon = ClusterMonitor(
                    cluster,
                    transports,
                    load_knowledge(),
                    RealClock(),
                    events.append,
                    period_s=period,
                )
                mon.start()
                time.sleep(seconds)
                mon.stop()
                rounds = sum(1 for e in events if type(e).__name__ == "NodeSampled") / len(
                    cluster.nodes
                )
            time.sleep(1.0)  # let sshd reap its sessions
            per_node = []
            for name, node in cluster_nodes.nodes.items():
                log = node.sshd_log()
                per_node.append(
                    {
                        "sessions": log.count("Starting session: command"),
                        "tool_calls": len(node.commands()),
                        "cpu_s": cpu_seconds(node.proc.pid) - start_cpu[name],
                    }
                )
        finally:
            cluster_nodes.stop()
    minutes = seconds / 60
    avg = {k: sum(p[k] for p in per_node) / len(per_node) / minutes for k in per_node[0]}
    avg["rounds"] = rounds / minutes
    return avg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=2.0)
    args = parser.parse_args()
    sections = {**commands.SAMPLE, **commands.SLOW}
    procs_fast = processes_per_round(commands.SAMPLE)
    procs_slow = processes_per_round(sections)
    print(
        f"# {platform.node()} · {platform.machine()} · {os.cpu_count()} cores · "
        f"Python {platform.python_version()} · "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}"
    )
    print(
        f"# {args.seconds:.0f} s of watching 2 real sshd nodes, period {args.period} s; "
        f"processes per round: {procs_fast} ({procs_slow} with the slow sections, every 5th)"
    )
    print(
        "| way | rounds/min | SSH sessions/min/node | probe tool calls/min/node | node CPU s/min |"
    )
    print("|---|---|---|---|---|")
    for naive in (False, True):
        r = watch(args.seconds, args.period, naive)
        way = (
            "one process per probe (naive)" if naive else "ClusterMonitor (one script/round + dmon)"
        )
        print(
            f"| {way} | {r['rounds']:.1f} | {r['sessions']:.1f} | {r['tool_calls']:.1f} | "
            f"{r['cpu_s']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
