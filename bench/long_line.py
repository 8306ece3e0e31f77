"""A log line without a newline, of 25 / 50 / 100 MB, through the tails: the real seconds
until the next line arrives, and the growth of our peak RSS. Linear time and bounded
memory are the goal (before: 50 MB took 28 s, 100 MB 99 s, RSS +300 MB).

Two ways in: a local process (LocalTransport, what `host: local` tails) and the splitter
alone fed 64 KiB chunks (what the SSH channel hands it; the SSH test in
tests/test_hostile_bounds.py runs the same line through a real sshd).

    python bench/long_line.py            # prints a Markdown table
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_tui.nodes.local import LocalTransport
from spark_tui.nodes.transport import LineSplitter


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def local(mb: int) -> float:
    cmd = f"head -c {mb << 20} /dev/zero | tr '\\0' x; printf '\\nafter\\n'"
    t0 = time.monotonic()
    with LocalTransport().stream(cmd) as s:
        for n, line in enumerate(s):
            if n == 1:
                assert line == "after"
                break
    return time.monotonic() - t0


def splitter(mb: int) -> float:
    chunk = b"x" * (64 << 10)
    s = LineSplitter()
    t0 = time.monotonic()
    for _ in range((mb << 20) // len(chunk)):
        s.feed(chunk)
    assert s.feed(b"\nafter\n")[1] == "after"
    return time.monotonic() - t0


def main() -> None:
    print("| line | local process | splitter alone (64 KiB chunks) | peak RSS so far |")
    print("|---|---|---|---|")
    for mb in (25, 50, 100):
        a = local(mb)
        b = splitter(mb)
        print(f"| {mb} MB | {a:.2f} s | {b:.3f} s | {_rss_mb():.0f} MB |")


if __name__ == "__main__":
    main()
