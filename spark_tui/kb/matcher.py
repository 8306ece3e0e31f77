"""The one matcher: recognises walls in log text as it arrives.

Two ways in, one state:
  * `feed_line(source, line)` for live streams (node logs, one line at a time);
  * `feed_chunk(source, data)` for bulk reading (files, stdin), which hands whole
    megabyte chunks to a multi-pattern engine that only finds *candidate lines*;
    each candidate line is then confirmed with Python's `re` for the signatures
    the engine named.

Engines, fastest first (bench/README.md has the figures): Hyperscan (x86-64),
RE2 (a combined alternation, everywhere), Python `re` (a combined alternation;
no extra dependency). All three give the same hits; tests run each.

Input is bytes: invalid UTF-8, NUL bytes, CRLF, ANSI colour codes and lines of
any length never raise and never lose the lines after them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from spark_tui.kb.schema import LogSignature, Wall

CHUNK_BYTES = 4 << 20
MAX_CARRY = 8 << 20  # a line longer than this is matched in pieces
EVIDENCE_CHARS = 2000

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_UNSUPPORTED = [
    (re.compile(r"\(\?[=!<]"), "lookaround"),
    (re.compile(r"\\[1-9]|\(\?P="), "backreference"),
    (re.compile(r"(?<!\\)[$]"), "'$' anchor (lines may end in CR)"),
]


def engine_rejects(pattern: str) -> str | None:
    """Why a pattern cannot be used by every engine, or None when it can."""
    for rx, reason in _UNSUPPORTED:
        if rx.search(pattern):
            return reason
    return None


def strip_ansi(data: bytes) -> bytes:
    return _ANSI.sub(b"", data) if b"\x1b" in data else data


def to_text(line: bytes) -> str:
    """A log line as text for evidence: decoded leniently, control bytes made visible."""
    text = line[: EVIDENCE_CHARS * 4].decode("utf-8", errors="replace").rstrip("\r\n")
    text = text.replace("\x00", "\ufffd").replace("\r", "")
    return text[:EVIDENCE_CHARS] + ("…" if len(text) > EVIDENCE_CHARS else "")


@dataclass(frozen=True)
class Hit:
    """A wall recognised in one line of one source."""

    wall: Wall
    source: str
    line_no: int
    evidence: str


@dataclass
class _Pattern:
    wall_index: int
    sig: LogSignature
    is_then: bool
    rx: re.Pattern[bytes]


# ---------------------------------------------------------------- engines


class _Engine:
    """Finds the lines of a chunk that may match; yields (start, end, ids or None)."""

    name = "?"

    def candidates(self, data: bytes) -> Iterator[tuple[int, int, frozenset[int] | None]]:
        raise NotImplementedError


def _line_span(data: bytes, pos: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return start, (len(data) if end < 0 else end)


class _AlternationEngine(_Engine):
    """One combined pattern; after a match, skip to the next line."""

    def __init__(self, patterns: list[_Pattern], compile_fn, name: str) -> None:
        self.name = name
        parts = []
        for p in patterns:
            src = p.rx.pattern.decode()
            parts.append(f"(?i:{src})" if p.sig.ignore_case else f"(?:{src})")
        self._rx = compile_fn("|".join(parts)) if parts else None

    def candidates(self, data: bytes):
        if self._rx is None:
            return
        pos, n = 0, len(data)
        search = self._rx.search
        while pos < n:
            m = search(data, pos)
            if m is None:
                return
            start, end = _line_span(data, m.start())
            if m.end() > end:  # matched across a newline (\s or [^x]); confirm each line
                end2 = _line_span(data, m.end() - 1)[1]
                while start < end2:
                    s, e = _line_span(data, start)
                    yield s, e, None
                    start = e + 1
                pos = end2 + 1
                continue
            yield start, end, None
            pos = end + 1


class _HyperscanEngine(_Engine):
    name = "hyperscan"

    def __init__(self, patterns: list[_Pattern]) -> None:
        import hyperscan

        self._db = None
        if not patterns:
            return
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        flags = []
        for p in patterns:
            f = hyperscan.HS_FLAG_ALLOWEMPTY
            if p.sig.ignore_case:
                f |= hyperscan.HS_FLAG_CASELESS
            flags.append(f)
        db.compile(
            expressions=[p.rx.pattern for p in patterns],
            ids=list(range(len(patterns))),
            elements=len(patterns),
            flags=flags,
        )
        self._db = db

    def candidates(self, data: bytes):
        if self._db is None:
            return
        spans: dict[int, tuple[int, set[int]]] = {}
        last: list[int] = [-1, -1]  # [line start, line end] of the last hit

        def on_match(pid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            pos = max(to - 1, 0)
            if last[0] <= pos <= last[1]:
                spans[last[0]][1].add(pid)
                return
            start, end = _line_span(data, pos)
            last[0], last[1] = start, end
            entry = spans.setdefault(start, (end, set()))
            entry[1].add(pid)

        self._db.scan(data, match_event_handler=on_match)
        for start in sorted(spans):
            end, ids = spans[start]
            yield start, end, frozenset(ids)


def _make_engine(patterns: list[_Pattern], prefer: str | None) -> _Engine:
    order = [prefer] if prefer else ["hyperscan", "re2", "re"]
    for name in order:
        try:
            if name == "hyperscan":
                return _HyperscanEngine(patterns)
            if name == "re2":
                import re2

                options = re2.Options()
                options.max_mem = 256 << 20
                return _AlternationEngine(
                    patterns, lambda src, o=options: re2.compile(src.encode(), o), "re2"
                )
            if name == "re":
                return _AlternationEngine(patterns, lambda src: re.compile(src.encode()), "re")
        except ImportError:
            continue
        except Exception:  # an engine that cannot take these patterns: try the next
            if prefer:
                raise
            continue
    raise ValueError(f"unknown matcher engine {prefer!r}")


ENGINES = ("hyperscan", "re2", "re")


# ---------------------------------------------------------------- the matcher


class Matcher:
    """Compiled signatures of a set of walls. Cheap to share; state lives in MatchStream."""

    def __init__(self, walls: Iterable[Wall], engine: str | None = None) -> None:
        self.walls: list[Wall] = [w for w in walls if w.signatures]
        self.patterns: list[_Pattern] = []
        for wi, wall in enumerate(self.walls):
            for sig in wall.signatures:
                flags = re.IGNORECASE if sig.ignore_case else 0
                self.patterns.append(
                    _Pattern(wi, sig, False, re.compile(sig.pattern.encode(), flags))
                )
                if sig.then:
                    self.patterns.append(
                        _Pattern(wi, sig, True, re.compile(sig.then.encode(), flags))
                    )
        self.engine = _make_engine(self.patterns, engine)
        self._all_ids = frozenset(range(len(self.patterns)))

    def stream(self) -> MatchStream:
        return MatchStream(self)

    def scan_lines(self, source: str, lines: Iterable[str | bytes]) -> list[Hit]:
        """Match whole lines (tests and small inputs)."""
        stream = self.stream()
        hits: list[Hit] = []
        for line in lines:
            hits.extend(stream.feed_line(source, line))
        return hits


@dataclass
class _SourceState:
    line_no: int = 0  # number of the last line that has started
    open: bool = False  # that line has had no newline yet
    carry: bytes = b""
    # multi-line signatures waiting for their second line: head pattern -> its line number
    pending: dict[int, int] = field(default_factory=dict)


class MatchStream:
    """Matching state for many sources at once (line numbers, partial lines,
    multi-line signatures waiting for their second line)."""

    def __init__(self, matcher: Matcher) -> None:
        self.m = matcher
        self._sources: dict[str, _SourceState] = {}
        self._head_of: dict[int, int] = {
            i: i - 1 for i, p in enumerate(matcher.patterns) if p.is_then
        }

    def _state(self, source: str) -> _SourceState:
        st = self._sources.get(source)
        if st is None:
            st = self._sources[source] = _SourceState()
        return st

    def line_count(self, source: str) -> int:
        return self._state(source).line_no

    # -- confirmation of one line --------------------------------------------------
    def _confirm(self, st: _SourceState, source: str, line: bytes, line_no: int, ids) -> list[Hit]:
        hits: list[Hit] = []
        done_walls: set[int] = set()
        pats = self.m.patterns
        for pid in sorted(ids if ids is not None else self.m._all_ids):
            p = pats[pid]
            if p.wall_index in done_walls or p.rx.search(line) is None:
                continue
            if p.sig.then is None:
                hits.append(Hit(self.m.walls[p.wall_index], source, line_no, to_text(line)))
                done_walls.add(p.wall_index)
            elif not p.is_then:
                st.pending[pid] = line_no
            else:
                head = self._head_of[pid]
                start = st.pending.get(head)
                if start is not None and line_no - start <= p.sig.within:
                    del st.pending[head]
                    hits.append(Hit(self.m.walls[p.wall_index], source, line_no, to_text(line)))
                    done_walls.add(p.wall_index)
        return hits

    # -- live lines ---------------------------------------------------------------
    def feed_line(self, source: str, line: str | bytes) -> list[Hit]:
        """One complete line (with or without its newline)."""
        st = self._state(source)
        data = line.encode("utf-8", errors="surrogateescape") if isinstance(line, str) else line
        data = strip_ansi(data.rstrip(b"\r\n").replace(b"\n", b" "))
        if not st.open:
            st.line_no += 1
        st.open = False
        hits: list[Hit] = []
        for _s, _e, ids in self.m.engine.candidates(data):
            hits.extend(self._confirm(st, source, data, st.line_no, ids))
        return hits

    # -- bulk chunks ----------------------------------------------------------------
    def feed_chunk(self, source: str, data: bytes) -> list[Hit]:
        """Bytes as they were read; a partial last line waits for the next chunk
        (up to MAX_CARRY bytes: a longer line is matched in pieces)."""
        st = self._state(source)
        if st.carry:
            data = st.carry + data
            st.carry = b""
        cut = data.rfind(b"\n") + 1
        hits = self._scan_body(st, source, data[:cut])
        rest = data[cut:]
        if len(rest) > MAX_CARRY:
            hits.extend(self._scan_body(st, source, rest))
            rest = b""
        st.carry = rest
        return hits

    def finish(self, source: str) -> list[Hit]:
        """End of input for a source: match its last, unterminated line."""
        st = self._state(source)
        carry, st.carry = st.carry, b""
        hits = self._scan_body(st, source, carry)
        st.open = False
        st.pending.clear()
        return hits

    def _scan_body(self, st: _SourceState, source: str, body: bytes) -> list[Hit]:
        if not body:
            return []
        body = strip_ansi(body)
        first = st.line_no if st.open else st.line_no + 1
        hits: list[Hit] = []
        line_no, counted_to = first, 0
        for start, end, ids in self.m.engine.candidates(body):
            line_no += body.count(b"\n", counted_to, start)
            counted_to = start
            hits.extend(self._confirm(st, source, body[start:end], line_no, ids))
        newlines = body.count(b"\n")
        if body.endswith(b"\n"):
            st.line_no, st.open = first + newlines - 1, False
        else:
            st.line_no, st.open = first + newlines, True
        return hits


def scan_stream(
    matcher: Matcher, source: str, fh: BinaryIO, stream: MatchStream | None = None
) -> Iterator[Hit]:
    """Read a binary stream to its end in chunks, yielding hits as they are found."""
    ms = stream or matcher.stream()
    while True:
        chunk = fh.read(CHUNK_BYTES)
        if not chunk:
            break
        yield from ms.feed_chunk(source, chunk)
    yield from ms.finish(source)
