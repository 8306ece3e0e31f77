"""The `re` engine's literal prefilter: a literal is only ever one that every match contains."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher, required_literals

KB_PATTERNS = sorted(
    {
        (pat, s.ignore_case)
        for w in load_knowledge(use_user=False)
        for s in w.signatures
        for pat in (s.pattern, s.then)
        if pat
    }
)
TRICKY = [
    (r"(?:NET/Socket|Bootstrap) ?: Using\b.*[ \]]lo:\d", False),
    (r"Bootstrap ?: no (?:NCCL_SOCKET_IFNAME )?(?:socket )?interface found", False),
    (r"(?i:tilelang|tvm).{0,200}(?:sm_?121|unsupported)", False),
    (r"no kernel image is available", True),
    (r"(?:ab|cd)+xyz?", False),
    (r"a(?:bc|)d", False),
    (r"\d+ unique IP addresses", False),
]


def test_literals_of_known_shapes() -> None:
    # the most selective set: its shortest literal is the longest
    assert required_literals(rb"(?:NET/Socket|Bootstrap) ?: Using", False) == (
        frozenset({b"NET/Socket", b"Bootstrap"}),
        False,
    )
    assert required_literals(rb"DistStoreError: Timed out after \d+ s", False) == (
        frozenset({b"DistStoreError: Timed out after "}),
        False,
    )
    assert required_literals(rb"(?:clients|workers) joined", False)[0] == frozenset({b" joined"})
    assert required_literals(rb"(?:input|output) size", False)[0] == frozenset({b" size"})
    assert required_literals(rb"(?:Gloo|NCCL)", False)[0] == frozenset({b"Gloo", b"NCCL"})
    assert required_literals(rb"NO Kernel", True) == (frozenset({b"no kernel"}), True)
    assert required_literals(rb"x(?i:Tvm)y", False) == (frozenset({b"tvm"}), True)
    assert required_literals(rb"a(?:bc|)d", False)[0] is None  # an empty branch requires nothing
    assert required_literals(rb"\d+ab", False)[0] is None  # too short to be selective


@pytest.mark.parametrize(("pattern", "ignore_case"), KB_PATTERNS + TRICKY)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_match_holds_a_required_literal(
    pattern: str, ignore_case: bool, data: st.DataObject
) -> None:
    rx = re.compile(pattern.encode(), re.IGNORECASE if ignore_case else 0)
    text = data.draw(st.from_regex(rx, fullmatch=False).filter(lambda b: b"\n" not in b))
    assert rx.search(text)
    lits, caseless = required_literals(rx.pattern, ignore_case)
    if lits is not None:
        hay = text.lower() if caseless else text
        assert any(lit in hay for lit in lits), (text, lits)


def test_patterns_without_literals_still_match() -> None:
    from spark_tui.kb.schema import LogSignature, Wall

    w = Wall("w", "w", "error", "log", ("any",), "s", (LogSignature(r"\d+ab"),), (), (), (), ("x",))
    m = Matcher([w], engine="re")
    assert [h.line_no for h in m.scan_lines("s", [b"x", b"12ab", b"ab"])] == [2]


# -- patterns that cannot hold a newline (their engine's word needs no second look) ------


def test_within_line_of_known_shapes() -> None:
    from spark_tui.kb.engines import within_line

    inside = [rb"a.b", rb"\d+ ms", rb"(?:ab|c)\w+", rb"[\S]+", rb"x[^\n]{0,40}y", rb"\(PACK\)"]
    across = [rb"(?s)a.b", rb"(?s:a.b)", rb"a\sb", rb"[^)]x", rb"a\Wb", rb"[\s\S]", rb"a\Db"]
    assert [within_line(p) for p in inside] == [True] * len(inside)
    assert [within_line(p) for p in across] == [False] * len(across)


@pytest.mark.parametrize(("pattern", "ignore_case"), KB_PATTERNS + TRICKY)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_pattern_said_to_stay_in_its_line_never_matches_a_newline(
    pattern: str, ignore_case: bool, data
) -> None:
    from spark_tui.kb.engines import within_line

    rx = re.compile(pattern.encode(), re.IGNORECASE if ignore_case else 0)
    if not within_line(pattern.encode()):
        return
    # any text the pattern matches whole (hypothesis builds it from the regex itself)
    text = data.draw(st.from_regex(rx, fullmatch=True))
    assert b"\n" not in text
