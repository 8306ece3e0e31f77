"""From a wall's line written on a node behind real sshd to its diagnosis: how long?

    python bench/latency.py [--runs 3] [--modes session,json,screen] [--json-out FILE]

Two real OpenSSH sshd nodes on loopback (tests/sshd_nodes.py) and a cluster.yaml naming
them by their ~/.ssh/config aliases, each with a `logs: - file: PATH` entry: the cluster
is opened the way the product opens it (spark_tui.session), and the log is followed the
way the product follows a named log (`tail -n 200 -F PATH` over the node's one SSH
connection). The bench appends nine healthy vLLM lines then one real line of an
error-severity wall (a single line of its example in tests/sample-logs/walls/ that names
that wall alone), one wall at a time on alternating nodes, and stops the clock at:

- session: the session's listener receives the DiagnosisRaised (in-process
  `Session.open(cluster.yaml).start(listener)`: the hand-off every front end gets);
- json:    the real `spark-tui watch --json --config cluster.yaml` (a subprocess) prints
  the `diagnosis` event naming that wall on that node (read from its stdout);
- screen:  the real `spark-tui --config cluster.yaml` in tmux (120x40) shows the wall's id
  on its screen (its row in the walls table or the status line), polled with
  `tmux capture-pane` every 5 ms.

Every mode gets fresh log files (a diagnosis is new once per wall and source). Before the
clock runs, a warm-up line (an info wall) must have reached each node's front end, so the
tails are open. Not a timed test: figures go to bench/README.md ("## Latency") and
bench/out/latency.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sshd_nodes import SshdCluster, start_sshd_cluster  # noqa: E402

HEALTHY = "(APIServer pid=4100) INFO 05-28 20:26:31 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 36.6 tokens/s"
WARM_WALL = "fp4-marlin-fallback-notice"
WARM_LINE = "WARNING 05-12 09:14:31 [marlin_utils_fp4.py:204] Your GPU does not have native support for FP4 computation but FP4 quantization is being used. Weight-only FP4 compression will be used leveraging the Marlin kernel."
WALLS_DIR = ROOT / "tests" / "sample-logs" / "walls"
COLS, ROWS = 120, 40
TIMEOUT_S = 15.0  # a wall not delivered within this is counted as missed


def wall_lines() -> list[tuple[str, str]]:
    """(wall id, line) for every error wall with a line of its real examples that names
    that wall, and only it, on its own."""
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.kb.matcher import Matcher, scan_stream

    kb = load_knowledge(use_user=False)
    severity = {w.id: w.severity for w in kb}
    matcher = Matcher(kb)
    out = []
    for d in sorted(p for p in WALLS_DIR.iterdir() if p.is_dir()):
        if severity.get(d.name) != "error":
            continue
        found = None
        for f in sorted(d.glob("*.log")):
            for line in f.read_bytes().splitlines():
                if not line.strip() or len(line) > 400:
                    continue
                hits = {h.wall.id for h in scan_stream(matcher, "f", io.BytesIO(line + b"\n"))}
                if hits == {d.name}:
                    found = line.decode("utf-8", "replace")
                    break
            if found:
                break
        if found:
            out.append((d.name, found))
    return out


class Nodes:
    """The sshd nodes, and a fresh cluster.yaml with fresh log files per mode."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.sshd: SshdCluster = start_sshd_cluster(base / "sshd")
        self.names = list(self.sshd.nodes)
        self.env = dict(os.environ, HOME=str(self.sshd.home))
        # the YAML and matcher caches stay the user's (warm), as on a machine in use
        self.env.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))
        self.env["PATH"] = f"{Path(sys.executable).parent}:{self.env['PATH']}"

    def cluster_yaml(self, mode: str) -> tuple[Path, dict[str, Path], dict[str, Path]]:
        d = self.base / mode
        d.mkdir()
        logs = {n: d / f"{n}.log" for n in self.names}
        warm = {n: d / f"{n}-warm.log" for n in self.names}
        lines = ["nodes:"]
        for i, n in enumerate(self.names):
            logs[n].write_text("")
            warm[n].write_text("")
            lines += [
                f"  - name: {n}",
                f"    host: {n}",
                f"    role: {'head' if i == 0 else 'worker'}",
                "    logs:",
                f"      - file: {logs[n]}",
                f"      - file: {warm[n]}",
            ]
        path = d / "cluster.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path, logs, warm

    def stop(self) -> None:
        self.sshd.stop()


def drive(
    nodes: Nodes,
    logs: dict[str, Path],
    warm: dict[str, Path],
    walls: list[tuple[str, str]],
    seen: Callable[[str, str, float], float | None],
) -> tuple[list[float], list[str]]:
    """Warm up, then write each wall's line (after nine healthy ones) and wait for `seen`
    (wall, node, deadline) to return the monotonic time it was delivered."""
    for n in nodes.names:
        with warm[n].open("a") as fh:
            fh.write(WARM_LINE + "\n")
    for n in nodes.names:
        if seen(WARM_WALL, n, time.monotonic() + 60) is None:
            raise SystemExit(f"the warm-up line on {n} never reached the front end")
    time.sleep(1.0)
    latencies, missed = [], []
    for i, (wall, line) in enumerate(walls):
        node = nodes.names[i % len(nodes.names)]
        with logs[node].open("a") as fh:
            fh.write((HEALTHY + "\n") * 9)
            fh.flush()
            t0 = time.monotonic()
            fh.write(line + "\n")
        t1 = seen(wall, node, t0 + TIMEOUT_S)
        if t1 is None:
            missed.append(f"{wall} on {node}")
        else:
            latencies.append(t1 - t0)
        time.sleep(0.3)
    return latencies, missed


def via_session(nodes: Nodes, walls: list[tuple[str, str]]) -> tuple[list[float], list[str]]:
    """In-process: Session.open(cluster.yaml), its listener receives DiagnosisRaised."""
    from spark_tui.events import DiagnosisRaised
    from spark_tui.session import open_cluster

    path, logs, warm = nodes.cluster_yaml("session")
    arrived: queue.Queue[tuple[str, str, float]] = queue.Queue()

    def listener(event: object) -> None:
        if isinstance(event, DiagnosisRaised) and event.new:
            d = event.diagnosis
            arrived.put((d.wall.id, d.node or "", time.monotonic()))

    os.environ["HOME"] = nodes.env["HOME"]
    os.environ.setdefault("XDG_CACHE_HOME", nodes.env["XDG_CACHE_HOME"])
    with open_cluster(path) as session:
        session.start(listener)
        return drive(nodes, logs, warm, walls, waiter(arrived))


def waiter(arrived: queue.Queue) -> Callable[[str, str, float], float | None]:
    """seen() over a queue of (wall, node, time): earlier unrelated arrivals are kept."""
    early: list[tuple[str, str, float]] = []

    def seen(wall: str, node: str, deadline: float) -> float | None:
        while True:
            for item in early:
                if item[0] == wall and item[1] == node:
                    early.remove(item)
                    return item[2]
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                early.append(arrived.get(timeout=left))
            except queue.Empty:
                return None

    return seen


def via_json(nodes: Nodes, walls: list[tuple[str, str]]) -> tuple[list[float], list[str]]:
    """The real `spark-tui watch --json --config cluster.yaml`, its stdout read line by line."""
    path, logs, warm = nodes.cluster_yaml("json")
    proc = subprocess.Popen(
        ["spark-tui", "watch", "--json", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=nodes.env,
        text=True,
        bufsize=1,
    )
    arrived: queue.Queue[tuple[str, str, float]] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            now = time.monotonic()
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if obj.get("event") == "diagnosis":
                arrived.put((obj.get("wall", ""), obj.get("node") or "", now))

    threading.Thread(target=read, daemon=True).start()
    try:
        return drive(nodes, logs, warm, walls, waiter(arrived))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def via_screen(nodes: Nodes, walls: list[tuple[str, str]]) -> tuple[list[float], list[str]]:
    """The real `spark-tui` in tmux, started afresh for every SCREEN_WALLS walls: the walls
    table keeps its cursor row in view, so once the rows outgrow its ~9 visible lines a new
    row (sorted to the top) scrolls out of sight."""
    latencies, missed = [], []
    for k in range(0, len(walls), SCREEN_WALLS):
        lat, miss = screen_session(nodes, walls[k : k + SCREEN_WALLS], f"screen{k}")
        latencies += lat
        missed += miss
    return latencies, missed


SCREEN_WALLS = 6


def screen_session(
    nodes: Nodes, walls: list[tuple[str, str]], mode: str
) -> tuple[list[float], list[str]]:
    """The real `spark-tui --config cluster.yaml` in tmux; the clock stops when the wall's id
    is on the screen (for the warm-up: its row with the node's name)."""
    path, logs, warm = nodes.cluster_yaml(mode)
    session = f"bench-latency-{os.getpid()}"
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            str(COLS),
            "-y",
            str(ROWS),
            "-e",
            f"HOME={nodes.env['HOME']}",
            "-e",
            f"XDG_CACHE_HOME={nodes.env['XDG_CACHE_HOME']}",
            f"{shutil.which('spark-tui', path=nodes.env['PATH'])} --config {path}",
        ],
        check=True,
        env=nodes.env,
    )

    def screen() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    def seen(wall: str, node: str, deadline: float) -> float | None:
        # the walls column may cut a long id (and then touch the node column): its first 20
        # characters, and the node on the row for the warm-up (the same wall on both nodes)
        if wall == WARM_WALL:
            pat = re.compile(re.escape(wall[:20]) + r"\S*?\s*" + re.escape(node))
        else:
            pat = re.compile(re.escape(wall[:20]))
        while time.monotonic() < deadline:
            if pat.search(screen()):
                return time.monotonic()
            time.sleep(0.005)
        return None

    try:
        return drive(nodes, logs, warm, walls, seen)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


MODES = {"session": via_session, "json": via_json, "screen": via_screen}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of every mode (default 3)")
    ap.add_argument("--modes", default="session,json,screen", help="comma list of modes")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench" / "out" / "latency.json")
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    walls = wall_lines()
    load = [round(os.getloadavg()[0], 2)]
    results: dict[str, dict] = {m: {"latencies": [], "missed": [], "runs": []} for m in modes}
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            nodes = Nodes(Path(tmp))
            try:
                for m in modes:
                    lat, missed = MODES[m](nodes, walls)
                    r = results[m]
                    r["latencies"] += lat
                    r["missed"] += missed
                    r["runs"].append(
                        {"p50_ms": pct(lat, 0.5) * 1e3, "p95_ms": pct(lat, 0.95) * 1e3}
                    )
                    print(
                        f"run {run + 1} {m:8} {len(lat)} of {len(walls)}: p50 {pct(lat, 0.5) * 1e3:.0f} ms,"
                        f" p95 {pct(lat, 0.95) * 1e3:.0f} ms, max {max(lat, default=0) * 1e3:.0f} ms"
                        f" (load {os.getloadavg()[0]:.2f})",
                        flush=True,
                    )
            finally:
                nodes.stop()
    load.append(round(os.getloadavg()[0], 2))
    summary = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_1m": load,
        "walls": len(walls),
        "runs": args.runs,
    }
    print(f"# {summary['date']} · {summary['machine']} · load {load[0]} before, {load[1]} after")
    print("| line written on a node → | delivered | p50 ms | p95 ms | max ms | p95 per run |")
    print("|---|---:|---:|---:|---:|---|")
    for m, r in results.items():
        lat = r["latencies"]
        summary[m] = {
            "delivered": len(lat),
            "written": len(walls) * args.runs,
            "p50_ms": pct(lat, 0.5) * 1e3,
            "p95_ms": pct(lat, 0.95) * 1e3,
            "max_ms": max(lat, default=float("nan")) * 1e3,
            "mean_ms": statistics.mean(lat) * 1e3 if lat else float("nan"),
            "p95_per_run_ms": [x["p95_ms"] for x in r["runs"]],
            "missed": r["missed"],
            "all_delivered": not r["missed"] and len(lat) == len(walls) * args.runs,
        }
        s = summary[m]
        print(
            f"| {m} | {s['delivered']} of {s['written']} | {s['p50_ms']:.0f} | {s['p95_ms']:.0f}"
            f" | {s['max_ms']:.0f} | {' / '.join(f'{x:.0f}' for x in s['p95_per_run_ms'])} |"
        )
        for miss in r["missed"]:
            print(f"  missed ({m}): {miss}")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(summary, indent=1))
    return 0 if all(not r["missed"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
