"""Bounded work on unbounded input: what a node (or a file) sends cannot take unbounded
memory or time, and an idle loop never spins. A log line of 100 MB without a newline,
through real SSH and through a local process, arrives as its first MiB and a count of
the rest, followed by the next line; a `.env` line of 100 KB is read in one pass and a
`.env` of any size is refused by size; `watch --json` idles after a crash wall."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from spark_tui.nodes.local import LocalTransport
from spark_tui.nodes.transport import MAX_LINE, LineSplitter
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401

LONG = 100 * (1 << 20)
# 100 MB of "x" and no newline, then a line: the node's own tools write it
LONG_LINE = f"head -c {LONG} /dev/zero | tr '\\0' x; printf '\\nafter\\n'"


def _two_lines(stream) -> list[str]:
    got: list[str] = []
    for line in stream:
        got.append(line)
        if len(got) == 2:
            break
    return got


def _check_long(got: list[str]) -> None:
    first, second = got
    assert first.startswith("x" * 1000)
    assert first == "x" * MAX_LINE + f" [line cut: {LONG - MAX_LINE} more bytes]"
    assert second == "after"


def test_a_100_mb_line_over_ssh_is_cut_at_1_mib_and_counted(sshd_cluster: SshdCluster) -> None:
    t = sshd_cluster.transport("spark1")
    try:
        with t.stream(LONG_LINE) as s:
            _check_long(_two_lines(s))
    finally:
        t.close()


def test_a_100_mb_line_from_a_local_process_is_cut_at_1_mib_and_counted() -> None:
    with LocalTransport().stream(LONG_LINE) as s:
        _check_long(_two_lines(s))


def test_the_splitter_never_looks_at_pending_bytes_again() -> None:
    """Each byte is searched for a newline once: count the bytes `find` is asked to scan."""
    scanned = 0

    class Counting(bytes):
        def find(self, sub, start=0, *rest):  # type: ignore[override]
            nonlocal scanned
            at = bytes.find(self, sub, start, *rest)
            scanned += (at if at >= 0 else len(self)) - start + 1
            return at

    s = LineSplitter(max_line=1 << 10)
    chunk = Counting(b"y" * 4096)
    for _ in range(2000):  # 8 MB, no newline
        assert s.feed(chunk) == []
    assert scanned <= 2000 * 4097
    (line,) = s.feed(Counting(b"\r\n"))
    assert line == "y" * 1024 + f" [line cut: {2000 * 4096 - 1024 + 1} more bytes]"
    assert s.flush() is None
    assert s.feed(b"a\r\nb") == ["a"] and s.flush() == "b"


def test_a_100_kb_env_line_is_read_in_one_pass(tmp_path: Path) -> None:
    """A value with 100 KB of spaces inside: the old KEY=VALUE pattern (a lazy value, then
    trailing spaces) tried every split of them (20 KB took 10 s, 100 KB minutes)."""
    env = tmp_path / ".env"
    env.write_text("CLUSTER_NODES=10.0.0.1,10.0.0.2\nNOTE=x" + " " * 100_000 + "x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui", "discover", "--from", str(env), "--no-probe"],
        capture_output=True,
        text=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert "Traceback" not in proc.stderr
    assert "10.0.0.2" in proc.stdout, proc.stderr


def test_an_env_of_any_size_is_refused_by_its_size(tmp_path: Path) -> None:
    from spark_tui.errors import InputError
    from spark_tui.nodes.cluster_import import read_cluster_file

    env = tmp_path / ".env"
    with env.open("w") as fh:
        fh.write("CLUSTER_NODES=10.0.0.1\n")
        fh.truncate(64 << 20)  # 64 MB (sparse: no disk taken)
    try:
        read_cluster_file(env)
    except InputError as exc:
        assert exc.file == str(env) and "larger than" in str(exc)
    else:
        raise AssertionError("a 64 MB .env was read")
    fifo = tmp_path / "fifo.env"
    os.mkfifo(fifo)
    try:
        read_cluster_file(fifo)
    except InputError as exc:
        assert exc.file == str(fifo) and "not a regular file" in str(exc)
    else:
        raise AssertionError("a FIFO was read")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_watch_idles_after_a_crash_wall() -> None:
    """watch --json without --auto-relaunch, after the engine crashed with a diagnosis: its
    CPU over the next 20 s (user + system, /proc/PID/stat) is a small part of one core (a
    busy loop took 12.8 s of 20)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spark_tui",
            "watch",
            "--json",
            "--demo",
            "page-cache-hog",
            "--duration",
            "120",
            "--speed",
            "200",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        crash = None
        while crash is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            if event.get("wall") == "vllm-free-memory-low":
                crash = event
        assert crash is not None and crash["severity"] == "error"
        time.sleep(3)  # the crash is sampled (the phase that set off the busy loop)
        before = _cpu_s(proc.pid)
        time.sleep(20)
        used = _cpu_s(proc.pid) - before
        assert proc.poll() is None
        assert used < 5.0, f"watch used {used:.1f} s of CPU in 20 s after the crash"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_fifo_ssh_config_or_known_hosts_does_not_hang_discover(tmp_path: Path) -> None:
    import threading

    from spark_tui.nodes.discover import known_hosts_hosts, ssh_config_hosts

    got: list[object] = []
    for name, read in (("config", ssh_config_hosts), ("known_hosts", known_hosts_hosts)):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        th = threading.Thread(target=lambda r=read, f=fifo: got.append(r(f)), daemon=True)
        th.start()
        th.join(10)
        assert not th.is_alive(), f"discover waits on a FIFO {name}"
    assert got == [[], []]
    real = tmp_path / "real_config"
    real.write_text("Host spark1 spark2\n  HostName 10.0.0.1\nHost *.lab\n")
    assert [c.host for c in ssh_config_hosts(real)] == ["spark1", "spark2"]
