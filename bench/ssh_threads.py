"""Threads per SSH connection: N connections to real sshd nodes on loopback.

    python bench/ssh_threads.py [N ...]      (default: 20 100 200)

Starts 4 real sshd nodes (tests/sshd_nodes.py), opens N SSHTransports spread over them
(each its own paramiko connection, as N cluster nodes would have), runs one command on
each, and prints the threads the process gained, by name: paramiko's own thread per
connection, the one shared watcher (`ssh-watch`), and the reopen threads (`ssh-open:*`)
while one node's sshd is stopped and started again (every connection to it comes back).
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sshd_nodes import start_sshd_cluster

NODES = ("spark1", "spark2", "spark3", "spark4")


def kinds() -> collections.Counter[str]:
    out: collections.Counter[str] = collections.Counter()
    for t in threading.enumerate():
        name = t.name
        if name.startswith("ssh-open:"):
            out["ssh-open"] += 1
        elif name == "ssh-watch" or name.startswith("ssh-watch:"):
            out["ssh-watch"] += 1
        elif type(t).__name__ == "Transport":
            out["paramiko"] += 1
        else:
            out["other"] += 1
    return out


def one(n: int, base: Path) -> None:
    cluster = start_sshd_cluster(base / f"n{n}", names=NODES)
    os.environ["HOME"] = str(cluster.home)
    before = threading.active_count()
    conns = [cluster.transport(NODES[i % len(NODES)]) for i in range(n)]
    try:
        start = time.perf_counter()
        for t in conns:
            assert t.run("true").ok
        up = time.perf_counter() - start
        steady = kinds()
        gained = threading.active_count() - before
        dropped = [t for t in conns if t.name == "spark2"]
        cluster.node("spark2").stop()
        while any(t.state.reachable for t in dropped):
            time.sleep(0.05)
        cluster.node("spark2").start()
        peak = threading.active_count()
        start = time.perf_counter()
        while not all(t.state.reachable for t in dropped):
            peak = max(peak, threading.active_count())
            time.sleep(0.02)
        back = time.perf_counter() - start
        print(
            f"{n:>4} connections: +{gained} threads ({dict(steady)}); connected in {up:.1f} s; "
            f"{len(dropped)} dropped came back in {back:.1f} s, peak +{peak - before} threads"
        )
    finally:
        for t in conns:
            t.close()
        cluster.stop()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ssh-threads-") as d:
        for n in [int(a) for a in sys.argv[1:]] or [20, 100, 200]:
            one(n, Path(d))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
