#!/usr/bin/env python3
"""nvidia-smi for a real-tier node: real captured layouts, figures from the node's engine."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINE = re.compile(rb"vllm|VLLM|sglang")
COMM = re.compile(rb"python|VLLM|sglang")
UUID = os.environ.get("GB10_UUID", "GPU-5f0e6a2c-7d41-4b0a-9c3e-2a6b8d1e4f70")
IDLE_W, W_PER_PCT = 11.0, 0.6
TICK = os.sysconf("SC_CLK_TCK")


def engine_pids() -> list[int]:
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_bytes()
        except OSError:
            continue
        # the engine's processes (its API server, EngineCore, workers), not a shell naming it
        if ENGINE.search(cmd) and COMM.match(comm):
            out.append(int(entry))
    return out


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total


def utilisation(interval: float) -> int:
    pids = engine_pids()
    if not pids:
        return 0
    a = cpu_ticks(pids)
    time.sleep(interval)
    b = cpu_ticks(pids)
    return max(0, min(100, round((b - a) / TICK / interval * 100)))


def header_lines(name: str, n: int) -> list[str]:
    return (HERE / name).read_text().splitlines()[:n]


def query_gpu(args: list[str]) -> None:
    sm = utilisation(0.5)
    power = IDLE_W + W_PER_PCT * sm
    if any("driver_version" in a for a in args):
        print("580.95.05")
        return
    head = header_lines("query-gpu.csv", 1)[0]
    print(head)
    print(
        f"0, NVIDIA GB10, {UUID}, {sm} %, 0 %, [N/A], [N/A], {40 + sm // 4}, "
        f"{power:.2f} W, {2411 if sm else 208} MHz"
    )


def query_apps() -> None:
    print(header_lines("query-apps-busy.csv", 1)[0])
    for pid in engine_pids():
        try:
            rss_kb = int(
                next(
                    ln.split()[1]
                    for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if ln.startswith("VmRSS:")
                )
            )
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except (OSError, StopIteration, ValueError):
            continue
        print(f"{pid}, {name}, {rss_kb // 1024} MiB")


def dmon(args: list[str]) -> None:
    cols = 10  # gpu pwr gtemp mtemp sm mem enc dec jpg ofa: the groups p and u
    for line in header_lines("dmon-pucm-idle.txt", 2):
        print(line[: 5 + 7 * (cols - 1)] + " ")  # the captured header, cut after `ofa`
    count = None
    if "-c" in args:
        count = int(args[args.index("-c") + 1])
    n = 0
    while count is None or n < count:
        t0 = time.monotonic()
        sm = utilisation(1.0)
        # one line a second whatever runs: with no engine utilisation() returns at once, and
        # without this wait dmon printed as fast as it could (15 % of a core, lines flooding
        # the reader)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
        power = round(IDLE_W + W_PER_PCT * sm)
        vals = [0, power, 40 + sm // 4, 40 + sm // 4, sm, 0, 0, 0, 0, 0]
        print("".join(f"{v:>{5 if i == 0 else 7}}" for i, v in enumerate(vals)), flush=True)
        n += 1


def main(argv: list[str]) -> int:
    try:
        if argv and argv[0] == "dmon":
            dmon(argv[1:])
        elif any(a.startswith("--query-gpu") for a in argv):
            query_gpu(argv)
        elif any(a.startswith("--query-compute-apps") for a in argv):
            query_apps()
        elif "-L" in argv:
            print(f"GPU 0: NVIDIA GB10 (UUID: {UUID})")
        else:
            print(f"GPU 0: NVIDIA GB10 (UUID: {UUID})")
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
