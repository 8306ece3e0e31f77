"""TUI benchmark (not a test): what the app costs under a heavy log stream.

    python bench/tui.py            # every figure (about 4 minutes; needs tmux)
    python bench/tui.py --quick    # shorter windows, 1 million lines instead of 10

Figures (bench/README.md, "## TUI"):
1. Three nodes each streaming 5,000 log lines/s into the app (the real pipeline: a
   LocalTransport per node runs `tail -F`, the ClusterMonitor matches every line, the
   EventPump hands batches to the log pane) and into toolong (`pip install toolong` in a
   throw-away venv) on the same three files in the same run: CPU of each, and each one's
   intake (how far into each file its processes have read, from the offsets of their open
   descriptors in /proc/PID/fdinfo, in bytes and in lines), so CPU per line taken in.
   Then keypress-to-screen under the same stream, each viewer alone: toolong's ctrl+t
   (its TAIL label goes and comes back), then ours, `f` (following / paused), timed in
   a real terminal (tmux) until the screen shows the change.
2. RSS of the app after 10 million lines through the same pipeline (bounded scrollback).
3. Cold start of `spark-tui` to its first frame (tmux, until the node panes show).
4. `spark-tui --help`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
COLS, ROWS = 120, 40
RATE = 5_000  # lines per second per node
NODES = ("n1", "n2", "n3")
LINES = [  # real vLLM wording; the last one is a wall's signature (matched, highlighted)
    "INFO 05-12 09:14:33 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 35.8 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%",
    'INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 05-12 09:14:34 [async_llm.py:269] Added request chatcmpl-7f3a9e2c1b.",
    "DEBUG 05-12 09:14:34 [core.py:428] EngineCore loop active.",
]
SIGNATURE = "WARNING 05-12 09:14:31 [marlin_utils_fp4.py:204] Your GPU does not have native support for FP4 computation but FP4 quantization is being used. Weight-only FP4 compression will be used leveraging the Marlin kernel."


# ---------------------------------------------------------------- the app, as run in tmux
def run_app(files: list[str], status: str, flood: int) -> None:
    """The real app on three local nodes, each tailing one file (or a flood of lines)."""
    from spark_tui.clock import RealClock
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
    from spark_tui.nodes.local import LocalTransport
    from spark_tui.session import Session
    from spark_tui.state import StateDir
    from spark_tui.tui.app import SparkTuiApp
    from spark_tui.tui.widgets.log_view import LogView

    nodes = tuple(
        NodeConfig(n, "local", "head" if i == 0 else "worker") for i, n in enumerate(NODES)
    )
    config = ClusterConfig(nodes=nodes, source="bench")
    session = Session(
        config,
        {n.name: LocalTransport(name=n.name) for n in nodes},
        RealClock(),
        load_knowledge(),
        StateDir.for_simulation("bench"),
    )

    class BenchApp(SparkTuiApp):
        def _start_live(self) -> None:
            super()._start_live()  # the monitor starts after the first frame
            for i, node in enumerate(NODES):
                if flood:
                    line = LINES[0].replace("'", "")
                    cmd = f'seq {flood} | awk \'{{print "{i} " $1 " {line}"}}\''
                else:
                    cmd = f"tail -n0 -F {files[i]}"
                self.session.monitor.tail(node, "serve", cmd)
            self.set_interval(0.5, self.report)
            if os.environ.get("BENCH_EXIT_AFTER"):
                self.set_timer(float(os.environ["BENCH_EXIT_AFTER"]), self.exit)

        def report(self) -> None:
            log = self.main_screen.query_one(LogView)
            data = {"lines": log.total_lines, "rss": psutil.Process().memory_info().rss}
            Path(status).write_text(json.dumps(data))

    BenchApp(session, scrollback=100_000).run()


# ---------------------------------------------------------------- helpers
TMUX_ENV = {**os.environ, "TERM": os.environ.get("TERM") or "xterm-256color"}


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", *args], capture_output=True, text=True, check=False, env=TMUX_ENV
    ).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def start(session: str, command: str) -> psutil.Process:
    """A detached tmux session of COLS x ROWS running `command`; its process."""
    r = subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", str(COLS), "-y", str(ROWS), command],
        capture_output=True,
        text=True,
        env=TMUX_ENV,
        check=False,
    )
    pid = tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip()
    if not pid.isdigit():
        raise RuntimeError(f"tmux session {session} did not start: {r.stderr.strip()}")
    return psutil.Process(int(pid))


def cpu_seconds(proc: psutil.Process) -> float:
    """CPU of a process tree: itself, its children (alive and reaped)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def wait_for(predicate, limit_s: float, step: float = 0.01) -> float | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        if predicate():
            return time.perf_counter() - t0
        time.sleep(step)
    return None


class Writer(threading.Thread):
    """Appends RATE lines per second to each file, in 10 ms batches."""

    def __init__(self, files: list[Path]) -> None:
        super().__init__(daemon=True)
        self.files = [open(f, "a", buffering=1 << 16) for f in files]  # noqa: SIM115
        self.stop = threading.Event()
        self.written = 0

    def run(self) -> None:
        batch = RATE // 100
        n = 0
        next_t = time.perf_counter()
        while not self.stop.is_set():
            for fh in self.files:
                chunk = []
                for _ in range(batch):
                    n += 1
                    chunk.append(SIGNATURE if n % 1000 == 0 else LINES[n % len(LINES)])
                fh.write("\n".join(chunk) + "\n")
                fh.flush()
            self.written += batch * len(self.files)
            next_t += 0.01
            time.sleep(max(0.0, next_t - time.perf_counter()))


def toolong_command() -> str | None:
    """`tl` from a throw-away venv (made once under the temp dir)."""
    venv = Path(tempfile.gettempdir()) / "spark-tui-bench-toolong"
    tl = venv / "bin" / "tl"
    if not tl.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "toolong"], check=False)
        if r.returncode != 0:
            return None
    return str(tl)


# ---------------------------------------------------------------- the figures
def file_positions(proc: psutil.Process | None, files: list[Path]) -> dict[str, int]:
    """For each log file, the furthest read offset of any descriptor a process of the tree
    holds on it (/proc/PID/fdinfo): how far into the file the viewer has read."""
    out = {str(f): 0 for f in files}
    if proc is None:
        return out
    for p in [proc, *proc.children(recursive=True)]:
        try:
            for of in p.open_files():
                if of.path in out:
                    out[of.path] = max(out[of.path], of.position)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def lines_between(path: str, start: int, end: int) -> int:
    """Lines (newlines) in a file between two offsets."""
    if end <= start:
        return 0
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(end - start).count(b"\n")


def intake(files: list[Path], before: dict[str, int], after: dict[str, int]) -> tuple[int, int]:
    """(bytes, lines) read from the files between two file_positions()."""
    b = sum(after[str(f)] - before[str(f)] for f in files)
    n = sum(lines_between(str(f), before[str(f)], after[str(f)]) for f in files)
    return b, n


def keypresses(session: str, key: str, on: str, presses: int) -> list[float]:
    """Send `key`, time until the screen changes state: `on` appears, then (the next press)
    disappears. Polled every 5 ms."""
    latencies = []
    for _ in range(presses):
        shown = on in screen(session)
        t = time.perf_counter()
        tmux("send-keys", "-t", session, key)
        took = wait_for(lambda s=shown: (on in screen(session)) != s, 5, step=0.005)
        latencies.append((time.perf_counter() - t) if took is not None else 5.0)
        time.sleep(0.2)
    return sorted(latencies)


def pcts(latencies: list[float]) -> tuple[float, float]:
    return (
        1000 * statistics.median(latencies),
        1000 * latencies[int(0.95 * (len(latencies) - 1))],
    )


def status_lines(status: Path) -> int:
    """The log view's line count from the app's status file (retried: it is rewritten
    every 0.5 s, and may be read half written)."""
    for _ in range(50):
        try:
            return int(json.loads(status.read_text())["lines"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.02)
    return 0


def streaming(window_s: float, presses: int) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="spark-tui-bench-"))
    files = [tmp / f"{n}.log" for n in NODES]
    for f in files:
        f.write_text("")
    status = tmp / "status.json"
    writer = Writer(files)
    out: dict[str, object] = {}
    app_cmd = f"{sys.executable} {__file__} --app {status} {' '.join(map(str, files))}"
    try:
        app = start("bench-app", app_cmd)
        tl_cmd = toolong_command()
        tl = start("bench-tl", f"{tl_cmd} {' '.join(map(str, files))}") if tl_cmd else None
        wait_for(lambda: "· following" in screen("bench-app"), 30)
        if tl:
            wait_for(lambda: "TAIL" in screen("bench-tl"), 30)
        writer.start()  # both follow the files from the start (toolong stalls on a file growing as it opens)
        time.sleep(3.0)  # both warmed up on the stream
        sizes0 = {str(f): f.stat().st_size for f in files}
        pos_app0, pos_tl0 = file_positions(app, files), file_positions(tl, files)
        pane0 = status_lines(status)
        c_app, c_tl, t0 = cpu_seconds(app), cpu_seconds(tl) if tl else 0.0, time.perf_counter()
        time.sleep(window_s)
        dt = time.perf_counter() - t0
        cpu_app = cpu_seconds(app) - c_app
        cpu_tl = cpu_seconds(tl) - c_tl if tl else 0.0
        sizes1 = {str(f): f.stat().st_size for f in files}
        pos_app1, pos_tl1 = file_positions(app, files), file_positions(tl, files)
        time.sleep(0.6)  # the status file is written every 0.5 s
        pane1 = status_lines(status)
        written_b, written_n = intake(files, sizes0, sizes1)
        app_b, app_n = intake(files, pos_app0, pos_app1)
        out["window_s"] = dt
        out["written_lines"] = written_n
        out["written_bytes"] = written_b
        out["cpu_app"] = cpu_app / dt
        out["app_read_lines"] = app_n
        out["app_read_bytes"] = app_b
        out["app_pane_rows"] = pane1 - pane0  # the log view's own count (rows)
        out["app_cpu_us_per_line"] = 1e6 * cpu_app / max(app_n, 1)
        out["app_intake_fraction"] = app_n / max(written_n, 1)
        if tl:
            tl_b, tl_n = intake(files, pos_tl0, pos_tl1)
            out["cpu_toolong"] = cpu_tl / dt
            out["toolong_read_lines"] = tl_n
            out["toolong_read_bytes"] = tl_b
            out["toolong_cpu_us_per_line"] = 1e6 * cpu_tl / max(tl_n, 1)
            out["toolong_intake_fraction"] = tl_n / max(written_n, 1)
            out["cpu_ratio"] = cpu_app / cpu_tl if cpu_tl else None
            out["cpu_per_line_ratio"] = out["app_cpu_us_per_line"] / out["toolong_cpu_us_per_line"]  # type: ignore[operator]
            out["toolong_alive"] = tl.is_running()
        # keypress to screen under the same stream, each viewer alone (on two cores the two
        # side by side would measure the machine's overload): toolong first, ctrl+t
        # toggling its TAIL label; then ours, `f` toggling following/paused
        tmux("kill-session", "-t", "bench-app")
        if tl:
            time.sleep(1.0)
            lat = keypresses("bench-tl", "C-t", "TAIL", presses)
            out["toolong_key_p50_ms"], out["toolong_key_p95_ms"] = pcts(lat)
            tmux("kill-session", "-t", "bench-tl")
        start("bench-app", app_cmd)
        wait_for(lambda: "· following" in screen("bench-app"), 30)
        time.sleep(3.0)
        lat = keypresses("bench-app", "f", "· paused", presses)
        out["key_p50_ms"], out["key_p95_ms"] = pcts(lat)
        out["lines_written"] = writer.written
    finally:
        writer.stop.set()
        tmux("kill-session", "-t", "bench-app")
        tmux("kill-session", "-t", "bench-tl")
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def flood(lines_per_node: int) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="spark-tui-bench-"))
    status = tmp / "status.json"
    t0 = time.perf_counter()
    app = start(
        "bench-flood", f"{sys.executable} {__file__} --app {status} --flood {lines_per_node}"
    )
    total = lines_per_node * len(NODES)
    peak = 0
    last = -1
    stalled_since = time.perf_counter()
    try:
        while time.perf_counter() - t0 < 1800:
            time.sleep(1.0)
            try:
                data = json.loads(status.read_text())
            except (OSError, ValueError):
                continue
            peak = max(peak, data["rss"])
            if data["lines"] >= total:
                break
            if data["lines"] != last:
                last, stalled_since = data["lines"], time.perf_counter()
            elif time.perf_counter() - stalled_since > 20:
                break  # the sources ended; lines the display skipped are counted below
        data = json.loads(status.read_text())
        return {
            "flood_lines": total,
            "flood_on_screen": data["lines"],
            "flood_rss_mb": data["rss"] / 2**20,
            "flood_peak_rss_mb": peak / 2**20,
            "flood_s": time.perf_counter() - t0,
            "pid_alive": app.is_running(),
        }
    finally:
        tmux("kill-session", "-t", "bench-flood")
        shutil.rmtree(tmp, ignore_errors=True)


def cold_start(runs: int) -> dict[str, object]:
    times = []
    tmp = Path(tempfile.mkdtemp(prefix="spark-tui-bench-"))  # no cluster.yaml here: the simulator
    for i in range(runs):
        t = time.perf_counter()
        start(f"bench-cold{i}", f"cd {tmp} && XDG_CONFIG_HOME={tmp} spark-tui")
        took = wait_for(lambda i=i: "spark1 · head" in screen(f"bench-cold{i}"), 20, step=0.005)
        times.append(took if took is not None else 20.0)
        tmux("kill-session", "-t", f"bench-cold{i}")
        del t
    shutil.rmtree(tmp, ignore_errors=True)
    return {"cold_start_median_s": statistics.median(times), "cold_start_max_s": max(times)}


def help_time(runs: int) -> dict[str, object]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(["spark-tui", "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return {"help_median_s": statistics.median(times), "help_max_s": max(times)}


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = psutil.virtual_memory().total / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", choices=("help", "cold", "stream", "flood"), help="one figure")
    p.add_argument("--app", metavar="STATUS", help=argparse.SUPPRESS)
    p.add_argument("--flood", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.app:
        run_app(args.files, args.app, args.flood)
        return 0
    if shutil.which("tmux") is None:
        print("bench/tui.py needs tmux (apt-get install tmux)", file=sys.stderr)
        return 2
    results: dict[str, object] = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average_1m_before": round(os.getloadavg()[0], 2),
    }
    # one idle session keeps the tmux server up between the measured ones (a server that
    # exits as the next session starts fails that start)
    start("bench-anchor", "sleep 3600")
    try:
        return _figures(args, results)
    finally:
        tmux("kill-session", "-t", "bench-anchor")


def _figures(args: argparse.Namespace, results: dict[str, object]) -> int:
    want = {args.only} if args.only else {"help", "cold", "stream", "flood"}
    if "help" in want:
        results.update(help_time(10))
    if "cold" in want:
        results.update(cold_start(3 if args.quick else 5))
    if "stream" in want:
        results.update(streaming(10 if args.quick else 30, 20 if args.quick else 60))
    if "flood" in want:
        results.update(flood(333_334 if args.quick else 3_333_334))
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=2))
    out = ROOT / "bench" / "out" / "tui.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
