"""LocalTransport runs real commands: exit codes, timeouts, streams, files."""

from __future__ import annotations

from pathlib import Path

from spark_tui import shell
from spark_tui.nodes.local import LocalTransport


def test_run_exit_code_and_output() -> None:
    t = LocalTransport()
    r = t.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.ok


def test_timeout_kills_the_command() -> None:
    r = LocalTransport().run("sleep 30", timeout=0.3)
    assert r.timed_out and not r.ok and r.duration_s < 10


def test_stream_lines_and_close() -> None:
    with LocalTransport().stream("printf 'a\\nb\\n'; sleep 30") as s:
        it = iter(s)
        assert [next(it), next(it)] == ["a", "b"]


def test_hostile_value_is_quoted_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    value = f"$(touch {marker}); `touch {marker}`"
    r = LocalTransport().run(f"echo {shell.quote(value)}")
    assert r.stdout.strip() == value and not marker.exists()


def test_read_file(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"\x00\xffdata")
    assert LocalTransport().read_file(str(p), max_bytes=3) == b"\x00\xffd"
