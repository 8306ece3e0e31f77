"""The matcher on hostile input, across engines, in streaming and bulk modes."""

from __future__ import annotations

import io

import pytest

from spark_tui.kb.conditions import parse_condition
from spark_tui.kb.matcher import ENGINES, Matcher, scan_stream
from spark_tui.kb.schema import Fix, LogSignature, Wall
from spark_tui.kb.source import Source


def wall(wid: str, *sigs: LogSignature, severity: str = "error") -> Wall:
    return Wall(wid, wid, severity, "log", ("any",), "s", sigs, (), (), (), ("x",))  # type: ignore[arg-type]


WALLS = [
    wall("free-mem", LogSignature(r"Free memory on device \S* ?\([\d.]+/[\d.]+ GiB\)")),
    wall("nccl", LogSignature(r"Watchdog caught collective operation timeout")),
    wall(
        "two-line",
        LogSignature(
            r"Traceback \(most recent call last\)",
            then=r"RuntimeError: Unsupported architecture",
            within=5,
        ),
    ),
    wall("caseless", LogSignature(r"no kernel image is available", ignore_case=True)),
]
FREE = b"ValueError: Free memory on device cuda:0 (11.19/119.67 GiB) on startup is less than desired GPU memory utilization (0.9, 107.7 GiB)."


def available_engines() -> list[str]:
    out = []
    for name in ENGINES:
        try:
            Matcher(WALLS, engine=name)
        except ImportError:
            continue
        out.append(name)
    return out


@pytest.fixture(params=available_engines())
def matcher(request: pytest.FixtureRequest) -> Matcher:
    return Matcher(WALLS, engine=request.param)


def bulk(m: Matcher, data: bytes, chunk: int = 1 << 20) -> list[tuple[str, int]]:
    class Slow(io.BytesIO):
        def read(self, n: int = -1) -> bytes:  # small reads exercise chunk boundaries
            return super().read(min(n, chunk) if n and n > 0 else chunk)

    return [(h.wall.id, h.line_no) for h in scan_stream(m, "f", Slow(data))]


def test_finds_each_wall_with_line_numbers(matcher: Matcher) -> None:
    data = (
        b"ok\n"
        + FREE
        + b"\nfine\n[rank0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)\nNO KERNEL IMAGE IS AVAILABLE for execution\n"
    )
    assert bulk(matcher, data) == [("free-mem", 2), ("nccl", 4), ("caseless", 5)]


def test_bulk_and_streaming_agree(matcher: Matcher) -> None:
    lines = [b"x" * (i % 7) for i in range(50)]
    lines[17] = FREE
    lines[33] = b"Traceback (most recent call last):"
    lines[36] = b"RuntimeError: Unsupported architecture for sparse decode fwd"
    data = b"\n".join(lines) + b"\n"
    streamed = [(h.wall.id, h.line_no) for h in matcher.scan_lines("s", lines)]
    for chunk in (7, 64, 1 << 20):
        assert bulk(matcher, data, chunk) == streamed == [("free-mem", 18), ("two-line", 37)]


def test_multiline_needs_both_lines_in_order_and_within(matcher: Matcher) -> None:
    far = (
        [b"Traceback (most recent call last):"]
        + [b"  frame"] * 10
        + [b"RuntimeError: Unsupported architecture"]
    )
    assert matcher.scan_lines("s", far) == []
    backwards = [b"RuntimeError: Unsupported architecture", b"Traceback (most recent call last):"]
    assert matcher.scan_lines("s", backwards) == []


def test_sources_are_independent(matcher: Matcher) -> None:
    st = matcher.stream()
    assert st.feed_line("a", "Traceback (most recent call last):") == []
    assert st.feed_line("b", "RuntimeError: Unsupported architecture") == []
    hits = st.feed_line("a", "RuntimeError: Unsupported architecture")
    assert [(h.wall.id, h.source, h.line_no) for h in hits] == [("two-line", "a", 2)]


def test_hostile_input_never_loses_later_lines(matcher: Matcher) -> None:
    data = (
        b"\x1b[1;31mERROR\x1b[0m "
        + FREE.replace(b"Free memory", b"Free \x1b[33mmemory\x1b[0m")
        + b"\r\n"  # ANSI + CRLF
        + b"\xff\xfe invalid utf-8 \x00 NUL \xc3\x28\n"  # line 2
        + b"A" * (10 << 20)  # a 10 MB line, newline only at its end (line 3)
        + b" Watchdog caught collective operation timeout\n"
        + b"tail line\n"
        + FREE  # last line, no newline (line 5)
    )
    got = bulk(matcher, data, chunk=1 << 20)
    assert got == [("free-mem", 1), ("nccl", 3), ("free-mem", 5)]


def test_evidence_is_clean_text(matcher: Matcher) -> None:
    hits = matcher.scan_lines("s", [b"\x1b[31m" + FREE + b"\x00\xff\r\n"])
    assert hits[0].evidence.startswith("ValueError: Free memory on device cuda:0")
    assert "\x1b" not in hits[0].evidence and "\r" not in hits[0].evidence


def test_no_match_across_lines(matcher: Matcher) -> None:
    # \s in a pattern may let an engine match over a newline; confirmation is per line
    m = Matcher([wall("ws", LogSignature(r"alpha\s+beta"))], engine=matcher.engine.name)
    assert bulk(m, b"alpha\nbeta\nalpha  beta\n") == [("ws", 3)]


def test_conditions_parse_and_hold() -> None:
    facts = {"gpu.sm_pct": 96.0, "serving.phase": "capturing", "recipe.docker.args": "--rm -d"}
    assert parse_condition("gpu.sm_pct >= 90").holds(facts)
    assert parse_condition("serving.phase == 'capturing'").holds(facts)
    assert parse_condition("recipe.docker.args contains '--rm'").holds(facts)
    assert parse_condition("recipe.ray.args.--object-store-memory is unset").holds(facts)
    assert not parse_condition("memory.cached_gib > 1").holds(facts)  # missing → false
    with pytest.raises(ValueError):
        parse_condition("gpu.sm_pct ~ 3")


def test_fixes_follow_the_chosen_cause() -> None:
    from spark_tui.kb.schema import Action, Cause

    a = Fix("a", "A", "safe", False, (Action("run", {"command": "true"}),))
    b = Fix("b", "B", "safe", False, (Action("run", {"command": "true"}),))
    w = Wall(
        "w",
        "w",
        "error",
        "log",
        ("any",),
        "s",
        (),
        (),
        (Cause("cache", "cache", (parse_condition("memory.cached_gib >= 10"),), ("b",)),),
        (a, b),
        ("x",),
    )
    assert [f.id for f in w.fixes_for({"memory.cached_gib": 30.0})] == ["b", "a"]
    assert [f.id for f in w.fixes_for({"memory.cached_gib": 1.0})] == ["a", "b"]


def test_a_log_walls_cause_may_hold_on_another_node() -> None:
    from spark_tui.kb.diagnosis import DiagnosisBook
    from spark_tui.kb.schema import Action, Cause

    cache = Fix("drop", "drop", "safe", True, (Action("run", {"command": "true"}),))
    reboot = Fix("reboot", "reboot", "destructive", True, (Action("reboot", {}),))
    w = Wall(
        "unbalanced",
        "u",
        "error",
        "log",
        ("sglang",),
        "s",
        (LogSignature("unbalanced"),),
        (),
        (
            Cause("leak", "leak", (parse_condition("memory.unexplained_gib >= 20"),), ("reboot",)),
            Cause("other", "otherwise", (), ("drop",)),
        ),
        (cache, reboot),
        ("x",),
    )
    healthy = {"memory.unexplained_gib": 0.0}
    leaking = {"memory.unexplained_gib": 33.0}
    book = DiagnosisBook()
    # the healthy rank prints the line; the leak sits on its peer
    d, _ = book.add(
        w,
        Source.log("spark1", "log"),
        7,
        "unbalanced",
        node="spark1",
        facts_by_node={"spark1": healthy, "spark2": leaking},
    )
    assert (d.cause, d.cause_node, d.target_node, d.fixes()[0]) == (
        "leak",
        "spark2",
        "spark2",
        "reboot",
    )
    d2, _ = book.add(
        w,
        Source.log("spark1", "log2"),
        7,
        "unbalanced",
        node="spark1",
        facts_by_node={"spark1": healthy, "spark2": healthy},
    )
    assert (d2.cause, d2.target_node, d2.fixes()[0]) == ("other", "spark1", "drop")


def test_one_matcher_scans_from_several_threads_at_once(matcher: Matcher) -> None:
    """A session's one matcher serves the monitor's threads and a launch's wall check at
    the same time: concurrent scans find what one scan finds, and none fails."""
    import threading

    lines = [b"INFO nothing here", FREE, b"more noise " * 20] * 300
    expected = [(h.wall.id, h.line_no) for h in matcher.scan_lines("f", lines)]
    assert expected
    results: list[list[tuple[str, int]]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def scan() -> None:
        try:
            start.wait()
            for _ in range(5):
                results.append([(h.wall.id, h.line_no) for h in matcher.scan_lines("f", lines)])
        except BaseException as exc:  # hyperscan: ScratchInUseError when scratch is shared
            errors.append(exc)

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 20 and all(r == expected for r in results)
