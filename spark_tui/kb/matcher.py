"""The one matcher: recognises walls in log text as it arrives.

Two ways in, one state:
  * `feed_line(source, line)` for live streams (node logs, one line at a time);
  * `feed_chunk(source, data)` for bulk reading (files, stdin), which hands whole
    megabyte chunks to a multi-pattern engine that only finds *candidate lines*;
    each candidate line is then confirmed with Python's `re` for the signatures
    the engine named.

Engines, fastest first (bench/README.md has the figures): Hyperscan (the
hyperscan wheels bundle Vectorscan: x86-64 and aarch64), RE2 (a combined
alternation, everywhere), Python `re` (no extra dependency:
each signature's required literal is looked for with `bytes.find`, which is
~8x faster than one combined `re` alternation; signatures without a literal of
3+ bytes share an alternation). All three give the same hits; tests run each.

Input is bytes: invalid UTF-8, NUL bytes, CRLF, ANSI colour codes and lines of
any length never raise and never lose the lines after them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from spark_tui.kb.schema import LogSignature, Wall

try:  # the regex parser, for the literals a pattern requires
    import re._constants as _sre  # type: ignore[import-not-found]
    import re._parser as _sre_parse  # type: ignore[import-not-found]
except ImportError:  # Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

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
    """Finds the lines of a chunk that may match; yields (start, end, ids or None).

    Only lines that start in data[lo:hi] count (the chunk is not copied to cut
    off a partial first or last line); lo is 0 or just after a newline, and
    data[hi - 1] is a newline unless hi == len(data). `^` matches at every
    line start (multi-line mode), as it does when a line is fed alone."""

    name = "?"

    def candidates(
        self, data: bytes, lo: int = 0, hi: int | None = None
    ) -> Iterator[tuple[int, int, frozenset[int] | None]]:
        raise NotImplementedError


def _line_span(data: bytes, pos: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return start, (len(data) if end < 0 else end)


_LEADING_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


class _AlternationEngine(_Engine):
    """One combined pattern; after a match, skip to the next line."""

    def __init__(self, patterns: list[_Pattern], compile_fn, name: str) -> None:
        self.name = name
        parts = []
        for p in patterns:
            src = p.rx.pattern.decode()
            # a pattern's own leading "(?i)" must become a scoped group inside the
            # alternation (Python's re refuses global flags after the start)
            src = _LEADING_FLAGS.sub(lambda m: f"(?{m.group(1)}:", src, count=1) + (
                ")" if _LEADING_FLAGS.match(src) else ""
            )
            parts.append(f"(?i:{src})" if p.sig.ignore_case else f"(?:{src})")
        self._rx = compile_fn("(?m)" + "|".join(parts)) if parts else None

    def candidates(self, data: bytes, lo: int = 0, hi: int | None = None):
        if self._rx is None:
            return
        pos, n = lo, (len(data) if hi is None else hi)
        search = self._rx.search
        while pos < n:
            m = search(data, pos, n)
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
            f = hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_MULTILINE
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

    def candidates(self, data: bytes, lo: int = 0, hi: int | None = None):
        if self._db is None:
            return
        hi = len(data) if hi is None else hi
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

        # the whole chunk is scanned (its partial first and last lines are short);
        # their lines are left out below and matched with the next chunk
        self._db.scan(data, match_event_handler=on_match)
        for start in sorted(spans):
            if lo <= start < hi:
                end, ids = spans[start]
                yield start, end, frozenset(ids)


MIN_LITERAL = 3  # shorter literals would make most lines candidates
_REPEATS = tuple(
    op
    for op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None))
    if op is not None
)


def _best_literals(options: Sequence[frozenset[bytes]]) -> frozenset[bytes] | None:
    """Of several sets of literals a match must contain one of, the most selective."""
    good = [c for c in options if c and min(map(len, c)) >= MIN_LITERAL]
    if not good:
        return None
    return max(good, key=lambda c: (min(map(len, c)), -len(c)))


def _required(seq) -> list[frozenset[bytes]]:
    """Sets of literals such that every match of this parsed sequence contains
    at least one literal of each set (only what is certain is collected)."""
    found: list[frozenset[bytes]] = []
    run = bytearray()
    for op, av in seq:
        if op is _sre.LITERAL:
            run.append(av)
            continue
        if run:  # anything else ends a run of literal characters
            found.append(frozenset({bytes(run)}))
            run.clear()
        if op is _sre.SUBPATTERN:
            best = _best_literals(_required(av[3]))
            if best:
                found.append(best)
        elif op is _sre.BRANCH:
            alts = [_best_literals(_required(alt)) for alt in av[1]]
            if all(alts):
                found.append(frozenset().union(*alts))  # type: ignore[arg-type]
        elif op in _REPEATS and av[0] >= 1:  # the body occurs at least once
            best = _best_literals(_required(av[2]))
            if best:
                found.append(best)
    if run:
        found.append(frozenset({bytes(run)}))
    return found


def _mentions_ignorecase(seq) -> bool:
    for op, av in seq:
        if op is _sre.SUBPATTERN and (av[1] & re.IGNORECASE or _mentions_ignorecase(av[3])):
            return True
        if op is _sre.BRANCH and any(_mentions_ignorecase(alt) for alt in av[1]):
            return True
        if op in _REPEATS and _mentions_ignorecase(av[2]):
            return True
    return False


def required_literals(pattern: bytes, ignore_case: bool) -> tuple[frozenset[bytes] | None, bool]:
    """Literals (one of which every match contains) and whether to look for them
    case-folded (then they are lower-case: look in `data.lower()`). None when
    the pattern requires no literal of MIN_LITERAL bytes."""
    parsed = _sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    caseless = bool(parsed.state.flags & re.IGNORECASE) or _mentions_ignorecase(parsed)
    best = _best_literals(_required(parsed))
    if best and caseless:
        best = frozenset(lit.lower() for lit in best)
    return best, caseless


class _LiteralEngine(_Engine):
    """Python `re` with a literal prefilter: a line is a candidate for a pattern
    only if it holds one of the pattern's required literals (a match lies within
    one line, so its line contains the literal). Patterns without a literal go
    through one combined alternation."""

    name = "re"

    def __init__(self, patterns: list[_Pattern]) -> None:
        self._literals: list[tuple[int, bytes, bool]] = []
        rest: list[_Pattern] = []
        rest_ids: list[int] = []
        for pid, p in enumerate(patterns):
            lits, caseless = required_literals(p.rx.pattern, p.sig.ignore_case)
            if lits is None:
                rest.append(p)
                rest_ids.append(pid)
            else:
                self._literals.extend((pid, lit, caseless) for lit in sorted(lits))
        self._caseless = any(c for _, _, c in self._literals)
        self._rest = (
            _AlternationEngine(rest, lambda src: re.compile(src.encode()), "re") if rest else None
        )
        self._rest_ids = frozenset(rest_ids)

    def candidates(self, data: bytes, lo: int = 0, hi: int | None = None):
        hi = len(data) if hi is None else hi
        lines: dict[int, tuple[int, set[int]]] = {}
        folded = data.lower() if self._caseless else data
        for pid, lit, caseless in self._literals:
            hay = folded if caseless else data
            pos = hay.find(lit, lo, hi)
            while pos >= 0:
                start, end = _line_span(data, pos)
                lines.setdefault(start, (end, set()))[1].add(pid)
                pos = hay.find(lit, end, hi)
        if self._rest is not None:
            for start, end, _ids in self._rest.candidates(data, lo, hi):
                lines.setdefault(start, (end, set()))[1].update(self._rest_ids)
        for start in sorted(lines):
            end, ids = lines[start]
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
                return _LiteralEngine(patterns)
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
        (up to MAX_CARRY bytes: a longer line is matched in pieces).

        The chunk itself is never copied (that cost a quarter of the time on a
        big file): the line left over from the last chunk is completed and
        matched on its own, then the engine reads the chunk's whole lines in place."""
        st = self._state(source)
        hits: list[Hit] = []
        lo = 0
        if st.carry:
            nl = data.find(b"\n")
            if nl < 0:  # that line goes on past this chunk too
                data, st.carry = st.carry + data, b""
                return self._keep(st, source, data)
            hits = self._scan_body(st, source, st.carry + data[: nl + 1])
            st.carry = b""
            lo = nl + 1
        cut = data.rfind(b"\n") + 1
        if cut > lo:
            hits.extend(self._scan_body(st, source, data, lo, cut))
        hits.extend(self._keep(st, source, data[cut:]))  # cut >= lo
        return hits

    def _keep(self, st: _SourceState, source: str, rest: bytes) -> list[Hit]:
        """Carry a partial line to the next chunk; match it now if it is too long."""
        if len(rest) > MAX_CARRY:
            return self._scan_body(st, source, rest)
        st.carry = rest
        return []

    def finish(self, source: str) -> list[Hit]:
        """End of input for a source: match its last, unterminated line."""
        st = self._state(source)
        carry, st.carry = st.carry, b""
        hits = self._scan_body(st, source, carry)
        st.open = False
        st.pending.clear()
        return hits

    def _scan_body(
        self, st: _SourceState, source: str, body: bytes, lo: int = 0, hi: int | None = None
    ) -> list[Hit]:
        """Match the lines in body[lo:hi] (lo is 0 or just after a newline)."""
        hi = len(body) if hi is None else hi
        if hi <= lo:
            return []
        if body.find(b"\x1b", lo, hi) >= 0:  # rare: stripping needs a copy anyway
            body = strip_ansi(body[lo:hi])
            lo, hi = 0, len(body)
            if not body:  # only colour codes: a line has started, nothing to match
                st.line_no, st.open = (st.line_no if st.open else st.line_no + 1), True
                return []
        first = st.line_no if st.open else st.line_no + 1
        hits: list[Hit] = []
        line_no, counted_to = first, lo
        for start, end, ids in self.m.engine.candidates(body, lo, hi):
            line_no += body.count(b"\n", counted_to, start)
            counted_to = start
            hits.extend(self._confirm(st, source, body[start:end], line_no, ids))
        newlines = line_no - first + body.count(b"\n", counted_to, hi)
        if body[hi - 1] == 0x0A:
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
