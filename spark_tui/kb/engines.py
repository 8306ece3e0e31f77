"""Candidate engines: find the lines of a chunk that may match some pattern.

Fastest first (bench/README.md has the figures): Hyperscan (the hyperscan wheels
bundle Vectorscan: x86-64 and aarch64) reports which patterns matched on which
line; RE2 runs one combined alternation (everywhere); `re` looks for each
pattern's required literal with `bytes.find` (no Hyperscan needed), with the
patterns that require none in one RE2 alternation. All three give the same
candidate lines; the matcher then confirms each with RE2, whose time is linear
in the line, so no pattern can make a line take long (a backtracking engine
takes exponential time on `(a+)+b` against a run of `a`s).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

try:  # the regex parser, for the literals a pattern requires
    import re._constants as _sre  # type: ignore[import-not-found]  # Python >= 3.11 names it so
    import re._parser as _sre_parse  # type: ignore[import-not-found]  # Python >= 3.11 names it so
except ImportError:  # Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]  # Python 3.10's name (unused on 3.11+)
    import sre_parse as _sre_parse  # type: ignore[no-redef]  # Python 3.10's name (unused on 3.11+)

_UNSUPPORTED = [
    (re.compile(r"\(\?[=!<]"), "lookaround"),
    (re.compile(r"\\[1-9]|\(\?P="), "backreference"),
    (re.compile(r"(?<!\\)[$]"), "'$' anchor (lines may end in CR)"),
]
ENGINES = ("hyperscan", "re2", "re")


def re2_options(caseless: bool = False) -> Any:
    """RE2 options for log bytes: one byte is one character (as in a bytes regex),
    no logging of bad patterns to stderr (the loader reports them)."""
    import re2

    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = 256 << 20
    options.log_errors = False
    options.case_sensitive = not caseless
    return options


def compile_confirm(source: bytes, caseless: bool) -> Any:
    """A pattern compiled for confirmation: RE2, linear time in the line."""
    import re2

    return re2.compile(source, re2_options(caseless))


def engine_rejects(pattern: str) -> str | None:
    """Why a pattern cannot be used by every engine, or None when it can."""
    for rx, reason in _UNSUPPORTED:
        if rx.search(pattern):
            return reason
    try:
        compile_confirm(pattern.encode(), False)
    except Exception as exc:  # re2.error: what RE2 (the confirming engine) cannot take
        text = exc.args[0] if exc.args else exc
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return f"RE2 refuses it ({text})"
    return None


def literal_pattern(literal: bytes) -> bytes:
    """A regex matching exactly these bytes, in a syntax every engine reads."""
    return b"".join(
        bytes([c])
        if 0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A
        else b"\\x%02x" % c
        for c in literal
    )


@dataclass
class EnginePattern:
    """What an engine needs of a pattern: its regex source and case folding;
    `prefilter` False: the `re` engine finds it with RE2, not by its literals."""

    source: bytes
    caseless: bool
    prefilter: bool = True


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

    def any(self, data: bytes) -> bool:
        """Whether any line of `data` (a few lines, fed live) is a candidate."""
        return next(iter(self.candidates(data)), None) is not None


def _line_span(data: bytes, pos: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return start, (len(data) if end < 0 else end)


_LEADING_FLAGS = re.compile(rb"^\(\?([aiLmsux]+)\)")
_SPANS_LINES = rb"\n(?:"  # a line break inside a pattern (the wrap candidates' pairs)


def spans_lines(source: bytes) -> bool:
    """Whether a candidate pattern runs over line breaks (a wrap candidates' pair)."""
    return _SPANS_LINES in source


MULTI_LINES = 4  # how many lines such a pattern spans at most


def nth_line_end(data: bytes, pos: int, count: int) -> int:
    """The offset just past the `count`-th newline at or after pos (or the end)."""
    for _ in range(count):
        nl = data.find(b"\n", pos)
        if nl < 0:
            return len(data)
        pos = nl + 1
    return pos


def _scoped(src: bytes, caseless: bool) -> bytes:
    """A pattern as one alternative of a combined regex: its own leading "(?i)" becomes
    a scoped group (global flags are refused after the start)."""
    lead = _LEADING_FLAGS.match(src)
    if lead:
        src = b"(?" + lead.group(1) + b":" + src[lead.end() :] + b")"
    return b"(?i:" + src + b")" if caseless else b"(?:" + src + b")"


class _AlternationEngine(_Engine):
    """One combined RE2 pattern finds the lines; after a match, skip to the next
    line. An RE2 set then names the patterns that match such a line (so only
    those are confirmed); a match over several lines names none (all are tried)."""

    def __init__(self, patterns: Sequence[EnginePattern], name: str) -> None:
        import re2

        self.name = name
        parts = []
        self._set = re2.Set.SearchSet(re2_options())
        for p in patterns:
            parts.append(_scoped(p.source, p.caseless))
            self._set.Add(b"(?m)" + _scoped(p.source, p.caseless))
        self._set.Compile()
        self._rx = re2.compile(b"(?m)" + b"|".join(parts), re2_options()) if parts else None
        # patterns that run over line breaks: a match of another pattern earlier on the same
        # line must not hide them (the scan goes on from the next line)
        multi = [part for part, p in zip(parts, patterns, strict=True) if spans_lines(p.source)]
        self._multi = re2.compile(b"(?m)" + b"|".join(multi), re2_options()) if multi else None

    def any(self, data: bytes) -> bool:
        return self._rx is not None and self._rx.search(data) is not None

    def candidates(self, data: bytes, lo: int = 0, hi: int | None = None):
        if self._rx is None:
            return
        pos, n = lo, (len(data) if hi is None else hi)
        search = self._rx.search
        which = self._set.Match
        while pos < n:
            m = search(data, pos, n)
            if m is None:
                return
            start, end = _line_span(data, m.start())
            if m.end() > end + 1:  # matched across a newline: each line, every pattern
                end2 = _line_span(data, m.end() - 1)[1]
                while start < end2:
                    s, e = _line_span(data, start)
                    yield s, e, None
                    start = e + 1
                pos = end2 + 1
                continue
            ids = which(data[start : min(end + 1, n)])
            yield start, end, (frozenset(ids) if ids else None)
            pos = end + 1
            if self._multi is not None:  # one that starts on this line and runs on
                window = min(n, nth_line_end(data, end, MULTI_LINES))
                m2 = self._multi.search(data, start, window)
                if m2 is not None and m2.start() <= end < m2.end() - 1:
                    end2 = _line_span(data, m2.end() - 1)[1]
                    while pos < end2:
                        s, e = _line_span(data, pos)
                        yield s, e, None
                        pos = e + 1
                    pos = end2 + 1


MAX_DATABASE = 64 << 20  # bytes of a kept compiled database (the knowledge base's: ~1 MB)


def _cached_database(expressions: list[bytes], flags: list[int]) -> Any:
    """A Hyperscan database for these patterns: compiled (a few tenths of a second
    for the knowledge base) or, when the same patterns were compiled before,
    read back from the cache directory (a millisecond)."""
    import hashlib

    import hyperscan

    from spark_tui import paths
    from spark_tui.safefile import read_state, write_atomic
    from spark_tui.yaml_cache import seal, unseal

    key = hashlib.sha256(repr((getattr(hyperscan, "__version__", ""), expressions, flags)).encode())
    path = paths.cache_dir() / f"hyperscan-{key.hexdigest()[:32]}.db"
    # read as our own file (no symlink, no FIFO, no other owner, capped) and used only
    # when it carries our HMAC: a planted database never hangs or steers the matcher
    try:
        data = read_state(path, MAX_DATABASE)
    except OSError:
        data = None
    body = unseal(path.name, data) if data else None
    if body is not None:
        try:
            db = hyperscan.loadb(body, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
            return db
        except Exception:  # a database of another Hyperscan build: compile it again
            pass
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=expressions,
        ids=list(range(len(expressions))),
        elements=len(expressions),
        flags=flags,
    )
    sealed = seal(path.name, hyperscan.dumpb(db))
    if sealed is not None and len(sealed) <= MAX_DATABASE:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, sealed)
        except OSError:  # a read-only home, an unsafe directory: compile every time
            pass
    return db


class _HyperscanEngine(_Engine):
    name = "hyperscan"

    def __init__(self, patterns: Sequence[EnginePattern]) -> None:
        import hyperscan

        self._db = None
        # a scan needs scratch space of its own: one per thread, since one session's
        # matcher serves the monitor's threads and a launch's check at once
        self._local = threading.local()
        if not patterns:
            return
        expressions = [p.source for p in patterns]
        flags = []
        for p in patterns:
            f = hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_MULTILINE
            if p.caseless:
                f |= hyperscan.HS_FLAG_CASELESS
            flags.append(f)
        self._db = _cached_database(expressions, flags)

    def _scratch(self) -> Any:
        """This thread's scratch space for the database (made on its first scan)."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan

            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        return scratch

    def any(self, data: bytes) -> bool:
        if self._db is None:
            return False
        found: list[bool] = []

        def on_match(*_args: object) -> bool:
            found.append(True)
            return True  # stop at the first

        with contextlib.suppress(Exception):  # hyperscan reports the halt as an error
            self._db.scan(data, match_event_handler=on_match, scratch=self._scratch())
        return bool(found)

    def candidates(self, data: bytes, lo: int = 0, hi: int | None = None):
        if self._db is None:
            return
        hi = len(data) if hi is None else hi
        spans: dict[int, tuple[int, set[int]]] = {}
        last: list[int] = [-1, -1]  # [line start, line end] of the last hit

        def on_match(pid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            pos = to - 1 if to else 0
            if last[0] <= pos <= last[1]:
                spans[last[0]][1].add(pid)
                return
            start, end = _line_span(data, pos)
            last[0], last[1] = start, end
            entry = spans.setdefault(start, (end, set()))
            entry[1].add(pid)

        # the whole chunk is scanned (its partial first and last lines are short);
        # their lines are left out below and matched with the next chunk
        self._db.scan(data, match_event_handler=on_match, scratch=self._scratch())
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
                found.append(frozenset().union(*alts))  # type: ignore[arg-type]  # frozensets of ints, all non-empty (checked above)
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


_NEWLINE_CATEGORIES = frozenset(
    c
    for c in (
        getattr(_sre, "CATEGORY_SPACE", None),
        getattr(_sre, "CATEGORY_NOT_DIGIT", None),
        getattr(_sre, "CATEGORY_NOT_WORD", None),
        getattr(_sre, "CATEGORY_LINEBREAK", None),
    )
    if c is not None
)


def _set_has_newline(items) -> bool:
    negate = False
    found = False
    for op, av in items:
        if op is _sre.NEGATE:
            negate = True
        elif op is _sre.LITERAL:
            found = found or av == 10
        elif op is _sre.RANGE:
            found = found or av[0] <= 10 <= av[1]
        elif op is _sre.CATEGORY:
            found = found or av in _NEWLINE_CATEGORIES
        else:  # anything else: assume it may
            found = True
    return found != negate


def _may_span(seq, dotall: bool) -> bool:
    for op, av in seq:
        if op is _sre.LITERAL:
            if av == 10:
                return True
        elif op is _sre.NOT_LITERAL:
            if av != 10:
                return True
        elif op is _sre.IN:
            if _set_has_newline(av):
                return True
        elif op is _sre.ANY:
            if dotall:
                return True
        elif op is _sre.SUBPATTERN:
            inner = (dotall or bool(av[1] & re.DOTALL)) and not av[2] & re.DOTALL
            if _may_span(av[3], inner):
                return True
        elif op is _sre.BRANCH:
            if any(_may_span(alt, dotall) for alt in av[1]):
                return True
        elif op in _REPEATS:
            if _may_span(av[2], dotall):
                return True
        elif op is not _sre.AT:  # a construct not looked into
            return True
    return False


def within_line(pattern: bytes) -> bool:
    """Whether no match of this pattern can hold a newline: then an engine that found it
    in a chunk found it inside one line, and its word needs no second look."""
    try:
        parsed = _sre_parse.parse(pattern)
        return not _may_span(parsed, bool(parsed.state.flags & re.DOTALL))
    except Exception:  # unparsable here: look again
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


def required_sequence(
    pattern: bytes, ignore_case: bool
) -> tuple[list[frozenset[bytes]], bool, bool, bool]:
    """Every set of literals a match must contain one of, in the order they occur;
    whether the pattern starts with the first set and ends with the last (nothing
    can come before or after them); whether to fold case (then all are lower-case)."""
    parsed = _sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    caseless = bool(parsed.state.flags & re.IGNORECASE) or _mentions_ignorecase(parsed)
    ops = [(op, av) for op, av in parsed if op is not _sre.AT]
    seq = [s for s in _required(ops) if s]
    starts = ends = False
    if seq and ops:
        k = next((i for i, (op, _) in enumerate(ops) if op is not _sre.LITERAL), len(ops))
        first = [s for s in _required(ops[: max(k, 1)]) if s]
        starts = bool(first) and first[0] == seq[0]
        j = next((i for i in range(len(ops) - 1, -1, -1) if ops[i][0] is not _sre.LITERAL), -1)
        last = [s for s in _required(ops[min(j + 1, len(ops) - 1) :]) if s]
        ends = bool(last) and last[-1] == seq[-1]
    if caseless:
        seq = [frozenset(x.lower() for x in s) for s in seq]
    return seq, starts, ends, caseless


class _LiteralEngine(_Engine):
    """A literal prefilter in plain Python: a line is a candidate for a pattern
    only if it holds one of the pattern's required literals (a match lies within
    one line, so its line contains the literal), found with `bytes.find`.
    Patterns without a literal go through one combined RE2 alternation."""

    name = "re"

    def __init__(self, patterns: Sequence[EnginePattern]) -> None:
        self._literals: list[tuple[int, bytes, bool]] = []
        rest: list[EnginePattern] = []
        rest_ids: list[int] = []
        for pid, p in enumerate(patterns):
            lits, caseless = (
                required_literals(p.source, p.caseless) if p.prefilter else (None, False)
            )
            if lits is None:
                rest.append(p)
                rest_ids.append(pid)
            else:
                self._literals.extend((pid, lit, caseless) for lit in sorted(lits))
        self._caseless = any(c for _, _, c in self._literals)
        self._rest = _AlternationEngine(rest, "re") if rest else None
        self._rest_ids = rest_ids

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
            for start, end, ids in self._rest.candidates(data, lo, hi):
                named = self._rest_ids if ids is None else [self._rest_ids[i] for i in ids]
                lines.setdefault(start, (end, set()))[1].update(named)
        for start in sorted(lines):
            end, ids = lines[start]
            yield start, end, frozenset(ids)


def available_engine(prefer: str | None = None) -> str:
    """The engine `make_engine` will use: `prefer`, else the fastest installed."""
    if prefer:
        if prefer not in ENGINES:
            raise ValueError(f"unknown matcher engine {prefer!r}")
        return prefer
    try:
        import hyperscan  # noqa: F401

        return "hyperscan"
    except ImportError:
        return "re2"


def installed_engines() -> list[str]:
    """The matcher engines this installation can run, fastest first."""
    out = []
    for name in ENGINES:
        try:
            if name == "hyperscan":
                import hyperscan  # noqa: F401
            elif name == "re2":
                import re2  # noqa: F401
            out.append(name)
        except ImportError:
            pass
    return out


def make_engine(patterns: Sequence[EnginePattern], prefer: str | None) -> _Engine:
    order = [prefer] if prefer else ["hyperscan", "re2", "re"]
    for name in order:
        try:
            if name == "hyperscan":
                return _HyperscanEngine(patterns)
            if name == "re2":
                return _AlternationEngine(patterns, "re2")
            if name == "re":
                return _LiteralEngine(patterns)
        except ImportError:
            if prefer:
                raise
            continue
        except Exception:  # an engine that cannot take these patterns: try the next
            if prefer:
                raise
            continue
    raise ValueError(f"unknown matcher engine {prefer!r}")
