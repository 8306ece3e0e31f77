"""The TUI on a big simulated cluster: seconds to the first frame, and threads.

    python bench/tui_nodes.py [NODES ...]      (default: 3 100 500)

For each size: a fresh process opens the simulated cluster (`healthy`, NODES nodes),
starts the app under Textual's pilot (160x50) and prints the seconds from opening the
session to the app's first frame (`run_test` entered: mounted and laid out), the CPU
seconds the process used for it (the same figure on a loaded machine, where the wall
seconds wait for the CPU), and the peak number of threads over the next 3 s (the
monitor's pool, its stream pump and flusher, Textual's own).

Run it with byte-code caches (PYTHONDONTWRITEBYTECODE unset), as an installed spark-tui
runs: otherwise every module is compiled again inside the measured start. The runs use a
state and cache directory of their own, warmed by one untimed start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time


def one(nodes: int) -> None:
    from spark_tui.session import Session
    from spark_tui.tui.app import SparkTuiApp

    start = time.perf_counter()
    cpu = time.process_time()
    session = Session.open(None, scenario="healthy", sim_nodes=nodes, speed=20)

    async def run() -> None:
        app = SparkTuiApp(session)
        async with app.run_test(size=(160, 50)) as pilot:
            first = time.perf_counter() - start
            first_cpu = time.process_time() - cpu
            peak = threading.active_count()
            for _ in range(12):
                await pilot.pause(0.25)
                peak = max(peak, threading.active_count())
            print(
                f"{nodes:>5} nodes: first frame {first:5.2f} s (CPU {first_cpu:4.2f} s), "
                f"threads (peak) {peak}"
            )

    try:
        asyncio.run(run())
    finally:
        session.close()


def main() -> int:
    if sys.argv[1:2] == ["--one"]:
        one(int(sys.argv[2]))
        return 0
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-tui-nodes-") as home:
        # its own state and cache, warmed by one start first (as an installed spark-tui's
        # are after its first run): test runs on the same machine write the shared cache
        # with their own keys, which made every timed start parse every YAML file again
        env = dict(os.environ, XDG_STATE_HOME=f"{home}/state", XDG_CACHE_HOME=f"{home}/cache")
        run = [sys.executable, __file__, "--one"]
        subprocess.run([*run, "3"], check=False, timeout=900, env=env, stdout=subprocess.DEVNULL)
        for n in [int(a) for a in sys.argv[1:]] or [3, 100, 500]:
            subprocess.run([*run, str(n)], check=False, timeout=900, env=env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
