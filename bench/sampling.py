"""What watching costs a node: remote sessions, processes and CPU per minute.

Starts real sshd nodes on loopback (tests/sshd_nodes.py, with the shim tools
that print real captures), opens them as the product does (a cluster.yaml,
spark_tui.session: Session.open, session.start) for a while, idle and then with
a serving container on each node (the docker shim lists a running vLLM
container and prints its log), then reads what the nodes saw:
- sessions: "Starting session: command" lines in each sshd's log (one per channel);
- tool calls: the shims' own log (nvidia-smi, docker, ip, …);
- processes per round: the commands of the sampling script (sh + each external
  command and pipeline member; `echo` is a shell builtin);
- CPU: utime+stime of the node's sshd and everything below it (sessions and their
  commands are reaped into sshd's cumulative times once the connection closes).

"our CPU" is this process's CPU (the session's threads and what they spawn) per node.
For contrast, `--ways naive` runs one `run()` per probe per round.

    python bench/sampling.py [--seconds 60] [--period 2] [--runs 3] [--ways idle,serving]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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


SERVING_CONTAINER = {  # what `docker ps` shows on a node that serves (the shim prints it)
    "ID": "ab12cd34ef56",
    "Image": "vllm/vllm-openai:v0.13.0",
    "Names": "vllm_node",
    "State": "running",
    "Status": "Up 2 hours",
}
SERVE_LOG = (
    "(APIServer pid=4100) INFO 05-28 20:26:31 [loggers.py:127] Engine 000: Avg prompt "
    "throughput: 0.0 tokens/s, Avg generation throughput: 36.6 tokens/s\n"
) * 50


SETTLE_S = 5.0


def watch(seconds: float, period: float, way: str) -> dict[str, float]:
    """Watch two sshd nodes for `seconds`: way "idle" and "serving" open the cluster as the
    product does (a cluster.yaml, Session.open, session.start); "naive" runs one `run()`
    per probe per round over the same transports."""
    from spark_tui.session import open_cluster

    with tempfile.TemporaryDirectory() as tmp:
        cluster_nodes = start_sshd_cluster(Path(tmp))
        os.environ["HOME"] = str(cluster_nodes.home)
        try:
            if way == "serving":
                for node in cluster_nodes.nodes.values():
                    node.set_file("docker-ps.jsonl", json.dumps(SERVING_CONTAINER) + "\n")
                    node.set_file("serve.log", SERVE_LOG)
            config = cluster_nodes.write_cluster_yaml()
            names = list(cluster_nodes.nodes)
            rounds = 0

            def counters() -> dict[str, dict[str, float]]:
                return {
                    n: {
                        "sessions": node.sshd_log().count("Starting session: command"),
                        "tool_calls": len(node.commands()),
                        "docker_exec": sum(1 for c in node.commands() if "docker exec" in c),
                        "cpu_s": cpu_seconds(node.proc.pid),
                    }
                    for n, node in cluster_nodes.nodes.items()
                }

            if way == "naive":
                cluster = cluster_nodes.cluster_config()
                transports = {n.name: cluster_nodes.transport(n.name) for n in cluster.nodes}
                start, own0 = counters(), os.times()
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    for t in transports.values():
                        for command in commands.SAMPLE.values():
                            t.run(command + " 2>&1")
                    rounds += 1
                    time.sleep(period)
                own1 = os.times()
                for t in transports.values():
                    t.close()
            else:
                events: list[object] = []
                with open_cluster(config) as session:
                    session.start(events.append, period_s=period)
                    time.sleep(SETTLE_S)  # opening (KB, first rounds, tails) is not watching
                    first = len(events)
                    start, own0 = counters(), os.times()
                    time.sleep(seconds)
                    own1 = os.times()
                    sampled = [e for e in events[first:] if type(e).__name__ == "NodeSampled"]
                    rounds = len(sampled) / len(names)
            time.sleep(1.0)  # let sshd reap its sessions (their CPU goes to sshd then)
            end = counters()
            per_node = [{k: end[n][k] - start[n][k] for k in end[n]} for n in names]
        finally:
            cluster_nodes.stop()
    minutes = seconds / 60
    avg = {k: sum(p[k] for p in per_node) / len(per_node) / minutes for k in per_node[0]}
    avg["rounds"] = rounds / minutes
    # our side: this process (the session's threads) and its reaped children, per node
    own = (own1.user - own0.user) + (own1.system - own0.system)
    own += (own1.children_user - own0.children_user) + (own1.children_system - own0.children_system)
    avg["our_cpu_s"] = own / len(per_node) / minutes
    return avg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3, help="runs of each way (default 3)")
    parser.add_argument(
        "--ways", default="idle,serving", help="comma list of idle, serving, naive (idle,serving)"
    )
    parser.add_argument("--json-out", type=Path, default=ROOT / "bench" / "out" / "sampling.json")
    args = parser.parse_args()
    sections = {**commands.SAMPLE, **commands.SLOW}
    procs_fast = processes_per_round(commands.SAMPLE)
    procs_slow = processes_per_round(sections)
    load = [round(os.getloadavg()[0], 2)]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"# {platform.node()} · {platform.machine()} · {os.cpu_count()} cores · "
        f"Python {platform.python_version()} · {date}"
    )
    print(
        f"# {args.seconds:.0f} s of watching 2 real sshd nodes, period {args.period} s, {args.runs}"
        f" runs; processes per round: {procs_fast} ({procs_slow} with the slow sections, every 5th)"
    )
    print(
        "| way | run | rounds/min | SSH sessions/min/node | tool calls/min/node"
        " | docker exec/min/node | node CPU s/min | our CPU s/min/node | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    out: dict[str, object] = {"date": date, "seconds": args.seconds, "period": args.period}
    for way in args.ways.split(","):
        runs = []
        for i in range(args.runs):
            r = watch(args.seconds, args.period, way)
            r["load"] = round(os.getloadavg()[0], 2)
            runs.append(r)
            print(
                f"| {way} | {i + 1} | {r['rounds']:.1f} | {r['sessions']:.1f} | {r['tool_calls']:.1f}"
                f" | {r['docker_exec']:.1f} | {r['cpu_s']:.2f} | {r['our_cpu_s']:.2f} | {r['load']} |",
                flush=True,
            )
        out[way] = {k: statistics.median(r[k] for r in runs) for k in runs[0]} | {"runs": runs}
    load.append(round(os.getloadavg()[0], 2))
    out["load_average_1m"] = load
    print(f"# load average (1 min): {load[0]} before, {load[1]} after")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
