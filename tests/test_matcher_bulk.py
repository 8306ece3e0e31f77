"""Bulk reading (chunks read in place, a partial line carried over) finds exactly
what feeding the same lines one at a time finds, for every engine."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_tui.kb.matcher import ENGINES, Matcher, scan_stream
from spark_tui.kb.schema import LogSignature, Wall


def wall(wid: str, *sigs: LogSignature) -> Wall:
    return Wall(wid, wid, "error", "log", ("any",), "s", sigs, (), (), (), ("x",))


WALLS = [
    wall("anchored", LogSignature(r"^RuntimeError: boom")),
    wall("free-mem", LogSignature(r"Free memory on device \S* ?\([\d.]+/[\d.]+ GiB\)")),
    wall("caseless", LogSignature(r"no kernel image", ignore_case=True)),
    wall("no-literal", LogSignature(r"\d+ab")),
    wall("two-line", LogSignature(r"Traceback", then=r"ValueError: bad", within=3)),
]
LINES = [
    b"RuntimeError: boom",
    b"  RuntimeError: boom",  # not at the start of the line
    b"Free memory on device cuda:0 (11.19/119.67 GiB) on startup",
    b"\x1b[31mNO KERNEL IMAGE\x1b[0m is here",
    b"12ab",
    b"Traceback (most recent call last):",
    b"ValueError: bad",
    b"plain line",
    b"",
    b"x" * 300,
    b"CR line\r",
    b"\x1b[0m",  # nothing but a colour code
]


def engines() -> list[str]:
    out = []
    for name in ENGINES:
        try:
            Matcher(WALLS, engine=name)
        except ImportError:
            continue
        out.append(name)
    return out


MATCHERS = {name: Matcher(WALLS, engine=name) for name in engines()}


class Slow(io.BytesIO):
    def __init__(self, data: bytes, sizes: list[int]) -> None:
        super().__init__(data)
        self.sizes = sizes or [1 << 20]
        self.i = 0

    def read(self, n: int = -1) -> bytes:
        size = self.sizes[self.i % len(self.sizes)]
        self.i += 1
        return super().read(size)


def bulk(m: Matcher, data: bytes, sizes: list[int]) -> list[tuple[str, int]]:
    return [(h.wall.id, h.line_no) for h in scan_stream(m, "f", Slow(data, sizes))]


@pytest.mark.parametrize("engine", engines())
def test_anchor_matches_at_every_line_start_in_bulk(engine: str) -> None:
    data = b"a\nRuntimeError: boom\n  RuntimeError: boom\nRuntimeError: boom\n"
    assert bulk(MATCHERS[engine], data, [1 << 20]) == [("anchored", 2), ("anchored", 4)]


@pytest.mark.parametrize("engine", engines())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    lines=st.lists(st.sampled_from(LINES), min_size=1, max_size=40),
    sizes=st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=6),
    last_newline=st.booleans(),
)
def test_bulk_finds_what_line_by_line_finds(
    engine: str, lines: list[bytes], sizes: list[int], last_newline: bool
) -> None:
    m = MATCHERS[engine]
    data = b"\n".join(lines) + (b"\n" if last_newline else b"")
    fed = data.split(b"\n")[:-1] if last_newline else data.split(b"\n")
    streamed = [(h.wall.id, h.line_no) for h in m.scan_lines("s", fed)]
    assert bulk(m, data, sizes) == streamed
    assert bulk(m, data, [1 << 20]) == streamed


@pytest.mark.parametrize("engine", engines())
def test_leading_inline_flags_in_every_engine(engine: str) -> None:
    # no literal of 3+ bytes, so the re engine puts it in its combined alternation,
    # where Python refuses a global "(?i)" that is not at the very start
    m = Matcher([wall("w", LogSignature(r"(?i)\d+ab|zz\d"))], engine=engine)
    assert [h.line_no for h in m.scan_lines("s", [b"x", b"12AB", b"ZZ9", b"ab"])] == [2, 3]
