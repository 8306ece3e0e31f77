"""What spark-tui costs and how fast it is on real parts: the real engine (vLLM's CPU build)
in real Docker on the real sshd nodes of tests/real/cluster.sh.

    SPARK_TUI_REAL_INSTANCE=K tests/real/cluster.sh up     # its last line: CLUSTER.yaml
    python bench/real.py --config CLUSTER.yaml [--rounds 4] [--parts up,load,fatal]

Run by hand (not by pytest); root, tmux, the cluster up and no engine serving on it. One run:

- up:    `spark-tui up --config CLUSTER.yaml --recipe R --yes --json`, nothing to serving, timed;
         `spark-tui stop`; then the same launch by hand: the exact commands `spark-tui recipes
         render R --json` prints (its preflight and `docker run`) run over `ssh`, `/health`
         polled every 2 s until 200, then the recipe's smoke request (curl on the node).
         `--up-pairs N` interleaves N of each. The last hand launch is left serving.
- load:  on that engine, rounds of three phases in a rotating order: no front end, `spark-tui
         watch --json --config CLUSTER.yaml`, and the TUI (`spark-tui --config CLUSTER.yaml` in
         tmux, 120x40, sampling the nodes over SSH as a user's does). In each phase, after
         --warmup seconds, the same load: --requests completions (fixed prompt, --max-tokens,
         ignore_eos, --concurrency at a time) sent from this machine to the head's engine port;
         tok/s = completion tokens / wall seconds. Beside it, CPU seconds from the host's
         /proc and the node's cgroup (the nodes' processes are this kernel's): the node's sshd
         tree (every session spark-tui opens and every command it runs there: the nvidia-smi
         shim, docker CLI, ps, ...), its dockerd+containerd (they serve `docker logs -f`, `docker
         ps`, `docker exec`), the engine container's cgroup (cpuacct), and the front end's own
         process on this machine.
- fatal: a real fatal line -> `watch --json`'s diagnosis event (and the TUI's screen showing
         the wall id), both running: (a) the serving EngineCore killed (-9): the API server's
         "MPClient: engine core exited unexpectedly" (engine-process-killed), its time taken
         by reading the engine's log file from the host through /proc/PID/root every 5 ms;
         (b) --fatal-trials launches by hand with a flag vLLM 0.32 refuses
         (--disable-log-requests, vllm-unknown-flag), the output to docker's log, the line's
         time from `docker logs --timestamps`.

Figures go to bench/out/real.json and, summed up, to stdout; bench/README.md ("## On real
parts") has the run kept.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
TICKS = os.sysconf("SC_CLK_TCK")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SPARK_TUI = [sys.executable, "-m", "spark_tui"]
PROMPT = "Write a haiku about two small computers."
COLS, ROWS = 120, 40
HEALTH_TIMEOUT_S = 1200


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# ---------------------------------------------------------------- the cluster


class Cluster:
    """The harness's cluster.yaml and what the host sees of its nodes."""

    def __init__(self, config: Path, recipe: str) -> None:
        self.config = config
        data = yaml.safe_load(config.read_text())
        self.recipe = recipe
        self.nodes = [n["name"] for n in data["nodes"]]
        self.alias = {n["name"]: n["host"] for n in data["nodes"]}
        self.ip = {n["name"]: n["fabric_ip"] for n in data["nodes"]}
        self.head = next(n["name"] for n in data["nodes"] if n.get("role") == "head")
        self.state = config.parent  # the harness keeps nodes/<name>/ beside cluster.yaml
        plan = json.loads(run([*SPARK_TUI, "recipes", "render", recipe, "--json",
                               "--config", str(config)]).stdout)  # fmt: skip
        self.plan = plan
        self.port = 8000
        for step in plan["steps"]:
            m = re.search(r"--port (\d+)", step["command"])
            if m:
                self.port = int(m.group(1))

    def ssh(self, node: str, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", self.alias[node], command], capture_output=True, text=True, timeout=timeout
        )

    def sshd_log(self, node: str) -> Path:
        return self.state / "nodes" / node / "log" / "sshd.log"

    def sessions(self, node: str) -> int:
        try:
            return self.sshd_log(node).read_text(errors="replace").count("Starting session:")
        except OSError:
            return 0

    def init_pid(self, node: str) -> int:
        marker = f"{self.state}/nodes/{node}/etc/init.sh"
        for pid, (_ppid, args) in procs().items():
            if args.startswith("/bin/bash") and marker in args:
                return pid
        raise SystemExit(f"{node}: its init.sh is not running (is the cluster up?)")

    def cgroup_parent(self, node: str) -> str:
        init = self.init_pid(node)
        table = procs()
        for pid in descendants(table, init):
            m = re.search(r"--cgroup-parent=/?(\S+)", table[pid][1])
            if table[pid][1].startswith("dockerd") and m:
                return m.group(1)
        raise SystemExit(f"{node}: no dockerd with --cgroup-parent")

    def node_cpu(self, node: str) -> dict[str, float]:
        """CPU seconds so far (user+system, reaped children included) of the node's sshd tree,
        its dockerd+containerd tree, the containers' cgroup (the engine) and the whole node."""
        table = procs()
        init = self.init_pid(node)
        tree = descendants(table, init)
        kids = [p for p in tree if table[p][0] == init]
        sshd = next(p for p in kids if table[p][1].startswith("sshd:"))
        dockerd = next(p for p in kids if table[p][1].startswith("dockerd"))
        cg = Path("/sys/fs/cgroup/cpuacct") / self.cgroup_parent(node)
        engine = 0.0
        if cg.is_dir():
            for usage in cg.glob("*/cpuacct.usage"):
                engine += int(usage.read_text()) / 1e9
        # the simulated GPU's `nvidia-smi dmon` (the harness's shim, a Python process that
        # lives as long as our stream): apart, since a Spark's real nvidia-smi costs far less
        dmon = sum(
            proc_cpu(p) for p in descendants(table, sshd) if "nvidia_smi.py dmon" in table[p][1]
        )
        return {
            "dmon_shim_live": dmon,
            "sshd": tree_cpu(table, sshd),
            "docker": tree_cpu(table, dockerd),
            "engine": engine,
            "node": tree_cpu(table, init),
        }

    def cpu_all(self) -> dict[str, dict[str, float]]:
        return {n: self.node_cpu(n) for n in self.nodes}

    def clean_head(self) -> None:
        """No engine container on any node (renamed-aside ones removed too)."""
        for node in self.nodes:
            self.ssh(node, "docker ps -aq --filter name=vllm_node | xargs -r docker rm -f", 180)


def run(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=ROOT)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {res.returncode}\n{res.stderr[-2000:]}")
    return res


def procs() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, command line) of every process on this machine."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            args = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out[int(d.name)] = (ppid, args.strip())
    return out


def descendants(table: dict[int, tuple[int, str]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def proc_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of one process (its reaped children included), seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS


def tree_cpu(table: dict[int, tuple[int, str]], root: int) -> float:
    """Every live process of the tree with what each has reaped: no second count."""
    return sum(proc_cpu(p) for p in descendants(table, root))


def delta(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> dict:
    return {n: {k: round(b[n][k] - a[n][k], 3) for k in a[n]} for n in a}


# ---------------------------------------------------------------- front ends


class FrontEnd:
    """Nothing, `spark-tui watch --json`, or the TUI in tmux; each on the cluster.yaml."""

    def __init__(self, kind: str, cluster: Cluster, tag: str = "") -> None:
        self.kind = kind
        self.cluster = cluster
        self.pid = 0
        self.proc: subprocess.Popen[str] | None = None
        self.events: list[tuple[float, dict]] = []
        self.tmux = f"bench-real-{os.getpid()}-{tag or kind}"

    def start(self) -> None:
        argv = [*SPARK_TUI, "--config", str(self.cluster.config)]
        if self.kind == "watch":
            self.proc = subprocess.Popen(
                [*SPARK_TUI, "watch", "--json", "--config", str(self.cluster.config)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                env=ENV,
                cwd=ROOT,
            )
            self.pid = self.proc.pid
            threading.Thread(target=self._read, daemon=True).start()
        elif self.kind == "tui":
            env_args = [x for k in ("PYTHONPATH", "HOME") for x in ("-e", f"{k}={ENV[k]}")]
            subprocess.run(
                ["tmux", "new-session", "-d", "-s", self.tmux, "-x", str(COLS), "-y", str(ROWS),
                 *env_args, "exec " + shlex.join(argv)],
                check=True, env=ENV, cwd=ROOT,
            )  # fmt: skip
            out = subprocess.run(
                ["tmux", "list-panes", "-t", self.tmux, "-F", "#{pane_pid}"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            self.pid = int(out.stdout.split()[0])

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            now = time.time()
            try:
                self.events.append((now, json.loads(raw)))
            except ValueError:
                continue

    def cpu(self) -> float:
        """Our process on this machine, reaped children included (0 for none)."""
        return proc_cpu(self.pid) if self.pid else 0.0

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.tmux], capture_output=True, text=True
        ).stdout

    def stop(self) -> None:
        if self.kind == "watch" and self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        elif self.kind == "tui":
            subprocess.run(["tmux", "send-keys", "-t", self.tmux, "q"], capture_output=True)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and Path(f"/proc/{self.pid}").exists():
                time.sleep(0.2)
            subprocess.run(["tmux", "kill-session", "-t", self.tmux], capture_output=True)


# ---------------------------------------------------------------- the load


def one_request(host: str, port: int, max_tokens: int) -> int:
    body = json.dumps(
        {"model": "/models/tiny-llama", "prompt": PROMPT, "max_tokens": max_tokens,
         "temperature": 0, "ignore_eos": True}
    )  # fmt: skip
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = json.loads(resp.read())
    finally:
        conn.close()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {str(data)[:300]}")
    return int(data["usage"]["completion_tokens"])


def load(cluster: Cluster, requests: int, concurrency: int, max_tokens: int) -> dict:
    host = cluster.ip[cluster.head]
    t0 = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(
            pool.map(lambda _: one_request(host, cluster.port, max_tokens), range(requests))
        )
    wall = time.monotonic() - t0
    return {"tokens": tokens, "seconds": round(wall, 3), "tok_s": round(tokens / wall, 2)}


def phase(cluster: Cluster, kind: str, args: argparse.Namespace, tag: str) -> dict:
    """One front end (or none) over one load: tok/s, CPU on the nodes and ours."""
    sessions0 = {n: cluster.sessions(n) for n in cluster.nodes}
    life0, t_life0 = cluster.cpu_all(), time.monotonic()
    fe = FrontEnd(kind, cluster, tag)
    fe.start()
    time.sleep(args.warmup)
    la0 = loadavg()
    win0, fe0, t0 = cluster.cpu_all(), fe.cpu(), time.monotonic()
    res = load(cluster, args.requests, args.concurrency, args.max_tokens)
    win1, fe1, t1 = cluster.cpu_all(), fe.cpu(), time.monotonic()
    la1 = loadavg()
    if kind == "tui":
        screen = fe.screen()
        res["tui_saw_nodes"] = all(n in screen for n in cluster.nodes)
    fe_total = fe.cpu()
    dmon = {n: c["dmon_shim_live"] for n, c in cluster.cpu_all().items()}
    fe.stop()
    time.sleep(2)  # the sessions' sshd processes end and are reaped into the listener's times
    life1, t_life1 = cluster.cpu_all(), time.monotonic()
    res.update(
        kind=kind,
        load_avg=[la0, la1],
        window_s=round(t1 - t0, 3),
        window_cpu=delta(win0, win1),
        frontend_cpu_window=round(fe1 - fe0, 3),
        lifetime_s=round(t_life1 - t_life0, 3),
        lifetime_cpu=delta(life0, life1),
        frontend_cpu_lifetime=round(fe_total, 3),
        sessions={n: cluster.sessions(n) - sessions0[n] for n in cluster.nodes},
        dmon_shim_cpu=dmon,
    )
    for n in cluster.nodes:  # what the sessions cost without the GPU shim's dmon
        res["lifetime_cpu"][n]["sshd_without_dmon"] = round(
            res["lifetime_cpu"][n]["sshd"] - dmon[n], 3
        )
    log(
        f"{tag} {kind:5s} {res['tok_s']:7.1f} tok/s  load {la0:.1f}->{la1:.1f}  "
        f"sshd {[res['lifetime_cpu'][n]['sshd'] for n in cluster.nodes]} s over "
        f"{res['lifetime_s']:.0f} s (dmon {list(dmon.values())}), sessions {res['sessions']}, ours {fe_total:.2f} s"
    )
    return res


def bench_load(cluster: Cluster, args: argparse.Namespace) -> dict:
    kinds = ["none", "watch", "tui"]
    one_request(cluster.ip[cluster.head], cluster.port, args.max_tokens)  # the engine warm
    phases = []
    for r in range(args.rounds):
        order = kinds[r % 3 :] + kinds[: r % 3]
        for kind in order:
            phases.append({"round": r, **phase(cluster, kind, args, f"r{r}")})
            time.sleep(args.settle)
    return {"phases": phases, "summary": summarize_load(phases, cluster.nodes)}


def stats(xs: list[float]) -> dict:
    return {
        "n": len(xs),
        "mean": round(statistics.fmean(xs), 3) if xs else None,
        "stdev": round(statistics.stdev(xs), 3) if len(xs) > 1 else None,
        "min": min(xs, default=None),
        "max": max(xs, default=None),
    }


def summarize_load(phases: list[dict], nodes: list[str]) -> dict:
    out: dict[str, Any] = {}
    by = {k: [p for p in phases if p["kind"] == k] for k in ("none", "watch", "tui")}
    base = [p["tok_s"] for p in by["none"]]
    for kind, ps in by.items():
        toks = [p["tok_s"] for p in ps]
        s: dict[str, Any] = {"tok_s": stats(toks)}
        if kind != "none" and base and toks:
            # per round: this phase against the no-front-end phase of the same round
            pairs = []
            for p in ps:
                b = next(q for q in by["none"] if q["round"] == p["round"])
                pairs.append(100 * (p["tok_s"] / b["tok_s"] - 1))
            s["diff_pct_per_round"] = [round(x, 2) for x in pairs]
            s["diff_pct"] = stats(pairs)
            s["diff_pct_of_means"] = round(
                100 * (statistics.fmean(toks) / statistics.fmean(base) - 1), 2
            )
        per_min: dict[str, Any] = {}
        for n in nodes:
            per_min[n] = {
                k: round(
                    60
                    * sum(p["lifetime_cpu"][n][k] for p in ps)
                    / sum(p["lifetime_s"] for p in ps),
                    3,
                )
                for k in ("sshd", "sshd_without_dmon", "docker", "engine", "node")
            }
            per_min[n]["sessions_per_min"] = round(
                60 * sum(p["sessions"][n] for p in ps) / sum(p["lifetime_s"] for p in ps), 1
            )
        s["node_cpu_s_per_min_lifetime"] = per_min
        s["engine_cpu_s_per_min_window"] = round(
            60
            * sum(p["window_cpu"][nodes[0]]["engine"] for p in ps)
            / sum(p["window_s"] for p in ps),
            2,
        )
        s["frontend_cpu_s_per_min_window"] = round(
            60 * sum(p["frontend_cpu_window"] for p in ps) / sum(p["window_s"] for p in ps), 3
        )
        s["load_avg"] = [min(min(p["load_avg"]) for p in ps), max(max(p["load_avg"]) for p in ps)]
        out[kind] = s
    return out


# ---------------------------------------------------------------- up, by spark-tui and by hand


def wait_health(cluster: Cluster, interval: float = 2.0) -> float:
    cmd = f"curl -s -o /dev/null -w '%{{http_code}}' -m 5 http://127.0.0.1:{cluster.port}/health"
    t0 = time.monotonic()
    while time.monotonic() - t0 < HEALTH_TIMEOUT_S:
        if cluster.ssh(cluster.head, cmd, 30).stdout.strip() == "200":
            return time.monotonic() - t0
        time.sleep(interval)
    raise SystemExit("the hand-launched engine never answered /health")


def up_by_spark_tui(cluster: Cluster) -> dict:
    la0, t0 = loadavg(), time.monotonic()
    proc = subprocess.Popen(
        [*SPARK_TUI, "up", "--config", str(cluster.config), "--recipe", cluster.recipe,
         "--yes", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
    )  # fmt: skip
    events, stdout = [], []
    assert proc.stdout is not None
    for raw in proc.stdout:  # each event with the second it arrived (where the time went)
        stdout.append(raw)
        if raw.startswith("{"):
            events.append({"at_s": round(time.monotonic() - t0, 1), **json.loads(raw)})
    stderr = proc.stderr.read() if proc.stderr else ""
    rc = proc.wait(HEALTH_TIMEOUT_S + 600)
    wall = time.monotonic() - t0
    done = events[-1] if events else {}
    out = {
        "how": "spark-tui up",
        "seconds": round(wall, 1),
        "serving": bool(done.get("serving")),
        "tok_s": done.get("tok_s"),
        "launches": done.get("launches"),
        "load_avg": [la0, loadavg()],
        "rc": rc,
        "events_at_s": [
            (e["at_s"], e.get("event"), e.get("step") or e.get("wall")) for e in events
        ],
    }
    log(f"spark-tui up: {out}")
    if not out["serving"]:
        raise SystemExit(f"spark-tui up did not serve: {''.join(stdout)[-3000:]}{stderr[-3000:]}")
    return out


def up_by_hand(cluster: Cluster) -> dict:
    """The exact commands `recipes render` prints, over ssh; /health; the smoke request."""
    la0, t0 = loadavg(), time.monotonic()
    smoke = ""
    for step in cluster.plan["steps"]:
        if step["kind"] == "run":
            r = cluster.ssh(step["node"], step["command"], step["timeout_s"] + 30)
            if r.returncode != 0 and not step["may_fail"]:
                raise SystemExit(f"{step['id']}: {r.stderr[-2000:]}")
        elif step["kind"] == "smoke":
            smoke = step["command"]
    t_launched = time.monotonic() - t0
    wait_health(cluster)
    t_health = time.monotonic() - t0
    r = cluster.ssh(cluster.head, smoke, 200)
    wall = time.monotonic() - t0
    lines = r.stdout.strip().splitlines()
    tokens = json.loads(lines[0])["usage"]["completion_tokens"]
    out = {
        "how": "by hand (ssh + docker run of `recipes render`, /health every 2 s, smoke)",
        "seconds": round(wall, 1),
        "launched_s": round(t_launched, 1),
        "health_s": round(t_health, 1),
        "tok_s": round(tokens / float(lines[-1]), 1),
        "load_avg": [la0, loadavg()],
    }
    log(f"by hand: {out}")
    return out


def stop_by_spark_tui(cluster: Cluster) -> None:
    subprocess.run(
        [*SPARK_TUI, "stop", "--config", str(cluster.config), "--yes", "--json"],
        capture_output=True, text=True, timeout=600, env=ENV, cwd=ROOT,
    )  # fmt: skip
    cluster.clean_head()


def bench_up(cluster: Cluster, pairs: int, first: str) -> list[dict]:
    """`pairs` of (spark-tui up, the hand launch), `first` first in every pair; the last
    launch is left serving."""
    ways = [up_by_spark_tui, up_by_hand] if first == "spark-tui" else [up_by_hand, up_by_spark_tui]
    out = []
    cluster.clean_head()
    for i in range(pairs):
        for k, way in enumerate(ways):
            out.append(way(cluster))
            if i < pairs - 1 or k == 0:
                stop_by_spark_tui(cluster)
    return out


# ---------------------------------------------------------------- fatal line -> screen


def watch_and_tui(cluster: Cluster, tag: str) -> tuple[FrontEnd, FrontEnd]:
    w, t = FrontEnd("watch", cluster, tag + "w"), FrontEnd("tui", cluster, tag + "t")
    w.start()
    t.start()
    return w, t


def wait_front_ends(
    w: FrontEnd, t: FrontEnd, wall: str, node: str, timeout: float
) -> tuple[float | None, float | None]:
    """Wall-clock times at which watch printed the diagnosis and the TUI showed the wall id."""
    t_json = t_screen = None
    deadline = time.monotonic() + timeout
    pat = re.compile(re.escape(wall[:20]))
    while time.monotonic() < deadline and (t_json is None or t_screen is None):
        if t_json is None:
            for ts, ev in list(w.events):
                if (
                    ev.get("event") == "diagnosis"
                    and ev.get("wall") == wall
                    and ev.get("node") == node
                ):
                    t_json = ts
                    break
        if t_screen is None and pat.search(t.screen()):
            t_screen = time.time()
        time.sleep(0.02)
    return t_json, t_screen


def engine_core_pid(cluster: Cluster) -> tuple[int, int]:
    """(EngineCore's pid, the API server's pid) on the head, as this machine sees them."""
    table = procs()
    tree = descendants(table, cluster.init_pid(cluster.head))
    core = [p for p in tree if "EngineCore" in table[p][1]]
    api = [p for p in tree if "vllm.entrypoints.openai.api_server" in table[p][1]
           and not table[p][1].startswith("sh ")]  # fmt: skip
    if not core or not api:
        raise SystemExit("no serving EngineCore on the head")
    return core[0], api[0]


def fatal_kill(cluster: Cluster, warmup: float) -> dict:
    """The serving EngineCore killed: the API server's own line, through to watch and the TUI."""
    _, api = engine_core_pid(cluster)
    logf = open(f"/proc/{api}/root/tmp/vllm-serve.log", "rb")  # noqa: SIM115
    logf.seek(0, 2)
    w, t = watch_and_tui(cluster, "kill")
    try:
        time.sleep(warmup)
        core, _ = engine_core_pid(cluster)
        la = loadavg()
        t_kill = time.time()
        os.kill(core, signal.SIGKILL)
        t_line, buf, line = None, b"", ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and t_line is None:
            buf += logf.read()
            for raw in buf.split(b"\n"):
                if b"engine core exited unexpectedly" in raw or b"died unexpectedly" in raw:
                    t_line, line = time.time(), raw.decode(errors="replace")
                    break
            time.sleep(0.005)
        t_json, t_screen = wait_front_ends(w, t, "engine-process-killed", cluster.head, 120)
    finally:
        w.stop()
        t.stop()
        logf.close()
    out = {
        "line": line.strip()[:200],
        "kill_to_line_s": rel(t_kill, t_line),
        "line_to_json_s": rel(t_line, t_json),
        "line_to_screen_s": rel(t_line, t_screen),
        "kill_to_json_s": rel(t_kill, t_json),
        "load_avg": la,
    }
    log(f"fatal (kill): {out}")
    return out


def rel(a: float | None, b: float | None) -> float | None:
    return round(b - a, 3) if a is not None and b is not None else None


def docker_ts(stamp: str) -> float:
    """2026-11-25T19:30:01.123456789Z -> seconds since the epoch."""
    head, frac = stamp.rstrip("Z").split(".")
    base = datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return base.timestamp() + float("0." + frac)


def fatal_flag(cluster: Cluster, warmup: float, trial: int) -> dict:
    """A launch by hand with a flag vLLM 0.32 refuses; the line's time from docker's log."""
    cluster.clean_head()
    w, t = watch_and_tui(cluster, f"flag{trial}")
    try:
        time.sleep(warmup)
        la = loadavg()
        launch = (
            "docker run -d --name vllm_node --network host --gpus all --ipc=host "
            "-v /root/models:/models vllm-cpu:0.32.0 python -m vllm.entrypoints.openai.api_server "
            f"--model /models/tiny-llama --port {cluster.port} --disable-log-requests"
        )
        t_launch = time.time()
        r = cluster.ssh(cluster.head, launch)
        if r.returncode != 0:
            raise SystemExit(f"launch: {r.stderr}")
        t_json, t_screen = wait_front_ends(w, t, "vllm-unknown-flag", cluster.head, 300)
    finally:
        w.stop()
        t.stop()
    logs = cluster.ssh(cluster.head, "docker logs --timestamps vllm_node 2>&1").stdout
    t_line, line = None, ""
    for raw in logs.splitlines():
        if "unrecognized arguments" in raw:
            stamp, _, line = raw.partition(" ")
            t_line = docker_ts(stamp)
            break
    out = {
        "line": line.strip()[:200],
        "launch_to_line_s": rel(t_launch, t_line),
        "line_to_json_s": rel(t_line, t_json),
        "line_to_screen_s": rel(t_line, t_screen),
        "load_avg": la,
    }
    log(f"fatal (flag {trial}): {out}")
    return out


def bench_fatal(cluster: Cluster, args: argparse.Namespace, serving: bool) -> dict:
    out: dict[str, Any] = {"kill": None, "flag": []}
    if serving:
        out["kill"] = fatal_kill(cluster, args.warmup)
    for i in range(args.fatal_trials):
        out["flag"].append(fatal_flag(cluster, args.warmup, i))
    cluster.clean_head()
    for key in ("line_to_json_s", "line_to_screen_s"):
        xs = [f[key] for f in out["flag"] if f[key] is not None]
        if out["kill"] and out["kill"][key] is not None:
            xs.append(out["kill"][key])
        out[key] = {"n": len(xs), "median": statistics.median(xs) if xs else None,
                    "max": max(xs, default=None)}  # fmt: skip
    return out


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, required=True, help="the harness's cluster.yaml")
    p.add_argument("--recipe", default="tiny-llama-cpu-vllm")
    p.add_argument("--parts", default="up,load,fatal")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--requests", type=int, default=60)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--warmup", type=float, default=20.0, help="front end running before the load")
    p.add_argument("--settle", type=float, default=3.0)
    p.add_argument("--up-pairs", type=int, default=1)
    p.add_argument("--up-first", choices=["spark-tui", "hand"], default="spark-tui")
    p.add_argument("--fatal-trials", type=int, default=3)
    p.add_argument("--out", type=Path, default=OUT / "real.json")
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))
    cluster = Cluster(args.config.resolve(), args.recipe)
    result: dict[str, Any] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, Linux {platform.release()}",
        "command": "python bench/real.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "args": {k: str(v) for k, v in vars(args).items()},
        "load_avg_start": loadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        args.out.write_text(json.dumps(result, indent=1))

    if "up" in parts:
        result["up"] = bench_up(cluster, args.up_pairs, args.up_first)
        save()
    serving = False
    if "load" in parts or "fatal" in parts:
        health = f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{cluster.port}/health"
        serving = cluster.ssh(cluster.head, health).stdout.strip() == "200"
    if "load" in parts:
        if not serving:
            log("no engine serving: a hand launch first")
            result["up_for_load"] = up_by_hand(cluster)
            serving = True
        result["load"] = bench_load(cluster, args)
        save()
    if "fatal" in parts:
        result["fatal"] = bench_fatal(cluster, args, serving)
    result["load_avg_end"] = loadavg()
    save()
    print(json.dumps({k: result[k] for k in result if k != "load"} | {
        "load_summary": result.get("load", {}).get("summary")}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
