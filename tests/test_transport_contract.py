"""One suite over every Transport: local (subprocess) and ssh (real sshd on loopback).
The simulator adds its own implementation to `transport` below."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui import shell
from spark_tui.nodes.local import LocalTransport
from spark_tui.nodes.transport import Transport
from tests.sshd_nodes import sshd_cluster  # noqa: F401  (fixture)


@pytest.fixture(params=["local", "ssh", "sim"])
def transport(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Transport]:
    if request.param == "local":
        t: Transport = LocalTransport(name="local")
    elif request.param == "sim":
        from spark_tui.sim import build_sim_cluster

        sim = build_sim_cluster("healthy", speed=50.0)
        request.addfinalizer(sim.close)
        sim.nodes["spark1"].mounts.append(str(tmp_path))  # the test's files, read-only
        t = sim.transports["spark1"]
    else:
        cluster = request.getfixturevalue("sshd_cluster")
        t = cluster.transport("spark1")
    try:
        yield t
    finally:
        t.close()


def test_exit_code_stdout_stderr(transport: Transport) -> None:
    r = transport.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)
    assert transport.state.reachable


def test_input_goes_to_stdin(transport: Transport) -> None:
    assert transport.run("cat", input=b"hello\n").stdout == "hello\n"


def test_timeout_is_a_result_not_an_exception(transport: Transport) -> None:
    r = transport.run("sleep 30", timeout=0.5)
    assert r.timed_out and not r.ok


def test_stream_lines_then_close(transport: Transport) -> None:
    with transport.stream("printf 'a\\nb\\n'; sleep 30") as s:
        it = iter(s)
        assert [next(it), next(it)] == ["a", "b"]


def test_stream_ends_with_the_command(transport: Transport) -> None:
    with transport.stream("printf 'x\\ny'") as s:
        assert list(s) == ["x", "y"]


def test_hostile_value_is_quoted_never_executed(transport: Transport, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    value = f"$(touch {marker}); `touch {marker}` && touch {marker}"
    r = transport.run(f"echo {shell.quote(value)}")
    assert r.stdout.strip() == value and not marker.exists()


def test_read_file_bytes_and_missing(transport: Transport, tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"\x00\xffdata")
    assert transport.read_file(str(p), max_bytes=3) == b"\x00\xffd"
    with pytest.raises(FileNotFoundError):
        transport.read_file(str(tmp_path / "nope"))


def test_invalid_utf8_is_decoded_leniently(transport: Transport) -> None:
    r = transport.run("printf 'a\\377b\\n'")
    assert r.stdout == "a\ufffdb\n"
