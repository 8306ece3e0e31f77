"""The one matcher: recognises walls in log text as it arrives.

Two ways in, one state:
  * `feed_line(source, line)` for live streams (node logs, one line at a time);
  * `feed_chunk(source, data)` for bulk reading (files, stdin), which hands whole
    megabyte chunks to a candidate engine (spark_tui.kb.engines) that only finds
    *candidate lines*; each candidate line is then confirmed with RE2 (linear
    time: no signature can make a line slow) for the patterns the engine named.

A signature is more than one regex (knowledge/SCHEMA.md): `then` must follow
within `within` lines, `after` must have been seen before in the same source,
`times` counts the lines it needs. The state for these lives per source.

Pastes (spark_tui.kb.paste): colour codes are removed, also when their ESC byte
was lost; a signature whose words run over a line break that a paste made is
matched on the lines joined, and its evidence keeps each line's own number.

Input is bytes: invalid UTF-8, NUL bytes, CRLF, colour codes and lines of any
length never raise and never lose the lines after them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from spark_tui.kb import paste
from spark_tui.kb.engines import (
    ENGINES,
    MULTI_LINES,
    EnginePattern,
    available_engine,
    compile_confirm,
    engine_rejects,
    literal_pattern,
    make_engine,
    nth_line_end,
    required_literals,
    required_sequence,
    spans_lines,
    within_line,
)
from spark_tui.kb.schema import (
    EXCERPT_REASON,
    FROM_LOG,
    SUSPECTED,
    LogSignature,
    Wall,
    severity_for,
)
from spark_tui.untrusted import ESCAPES_BYTES, clean

__all__ = [
    "CHUNK_BYTES",
    "ENGINES",
    "Hit",
    "MatchStream",
    "Matcher",
    "engine_rejects",
    "required_literals",
    "scan_stream",
    "strip_ansi",
]

CHUNK_BYTES = 4 << 20
MAX_CARRY = 8 << 20  # a line longer than this is matched in pieces
EVIDENCE_CHARS = 2000
MAX_WRAP_LINE = 4096  # a longer line was not made by a paste's wrapping

_ESC = ESCAPES_BYTES

# pattern roles
HEAD, THEN, AFTER, RESET, FRAG = "log", "then", "after", "reset", "fragment"
_NONE: frozenset[int] = frozenset()


def strip_ansi(data: bytes) -> bytes:
    """Bytes without ESC-led control sequences (a whole chunk at a time)."""
    return _ESC.sub(b"", data) if b"\x1b" in data else data


def to_text(line: bytes) -> str:
    """A log line as text for evidence: decoded leniently, control bytes made visible."""
    text = line[: EVIDENCE_CHARS * 4].decode("utf-8", errors="replace").rstrip("\r\n")
    text = clean(text, keep_newlines=False)
    return text[:EVIDENCE_CHARS] + ("…" if len(text) > EVIDENCE_CHARS else "")


@dataclass(frozen=True)
class Hit:
    """A wall recognised in the log of one source: at `line_no`, with the evidence
    text; `lines` holds every line of it (number, text) when it spans several."""

    wall: Wall
    source: str
    line_no: int
    evidence: str
    signature: LogSignature | None = None
    lines: tuple[tuple[int, str], ...] = ()
    reason: str = ""  # why it is only suspected, when the signature alone does not say

    @property
    def confidence(self) -> str:
        """'from-log', or 'suspected' when the signature is a symptom only (or was
        judged on a pasted excerpt's shape)."""
        if self.reason:
            return SUSPECTED
        return self.signature.confidence if self.signature else FROM_LOG

    @property
    def severity(self) -> str:
        return severity_for(self.wall.severity, self.confidence)

    def ruled_out(self, facts: Mapping[str, object] | None) -> bool:
        """Whether the facts of the node and the recipe say this line names no wall here
        (its signature's `only_when`; unknown facts keep it)."""
        return self.signature is not None and self.signature.ruled_out(facts)


@dataclass
class _Pattern(EnginePattern):
    wall_index: int = 0
    sig_index: int = 0
    role: str = HEAD
    rx: Any = None  # RE2, for confirmation (None for wrap candidates)
    owner: int = -1  # the pattern a wrap candidate is for
    within_line: bool = False  # no match can hold a newline (an engine's word is exact)


def _patterns(
    walls: list[Wall], engine: str = "hyperscan"
) -> tuple[list[tuple[int, LogSignature]], list[_Pattern]]:
    sigs: list[tuple[int, LogSignature]] = []
    pats: list[_Pattern] = []
    for wi, wall in enumerate(walls):
        for sig in wall.signatures:
            si = len(sigs)
            sigs.append((wi, sig))
            roles = ((RESET, sig.reset), (AFTER, sig.after), (HEAD, sig.pattern), (THEN, sig.then))
            for role, text in roles:
                if text:
                    src = text.encode()
                    rx = compile_confirm(src, sig.ignore_case)
                    pats.append(
                        _Pattern(
                            src,
                            sig.ignore_case,
                            wall_index=wi,
                            sig_index=si,
                            role=role,
                            rx=rx,
                            within_line=within_line(src),
                        )
                    )
    frags: list[_Pattern] = []
    for pid, p in enumerate(pats):  # where a paste's wrap may split a pattern's words
        if p.role == RESET:  # a reset only has to be seen whole
            continue
        seq, starts, ends, caseless = required_sequence(p.source, p.caseless)
        for src in paste.wrap_candidates(seq, starts, ends, literal_pattern):
            frags.append(
                _Pattern(
                    src,
                    caseless,
                    False,
                    wall_index=p.wall_index,
                    sig_index=p.sig_index,
                    role=FRAG,
                    owner=pid,
                )
            )
    return sigs, pats + frags


class Matcher:
    """Compiled signatures of a set of walls. Cheap to share; state lives in MatchStream."""

    def __init__(self, walls: Iterable[Wall], engine: str | None = None) -> None:
        self.walls: list[Wall] = [w for w in walls if w.signatures]
        name = available_engine(engine)
        self.sigs, self.patterns = _patterns(self.walls, name)
        # words that must not be on a signature's line (a more specific wall's)
        self.unless = {
            si: compile_confirm(sig.unless.encode(), sig.ignore_case)
            for si, (_, sig) in enumerate(self.sigs)
            if sig.unless
        }
        self.engine = make_engine(self.patterns, name)
        # Hyperscan and RE2 name exactly the patterns that match a line: one that cannot
        # hold a newline needs no second look on a line that cleaning leaves as it is
        self._exact = self.engine.name in ("hyperscan", "re2")
        self._plain = tuple(i for i, p in enumerate(self.patterns) if p.role != FRAG)
        # plain signature lines with no context at all (no after, then, count or unless)
        self._simple_heads = frozenset(
            i
            for i, p in enumerate(self.patterns)
            if p.role == HEAD
            and not (lambda sig: sig.after or sig.then or sig.unless or sig.times > 1)(
                self.sigs[p.sig_index][1]
            )
        )
        # patterns whose only effect is a hit of their wall on their line (no `then`
        # waiting, no count): once the wall is named on a line, they add nothing there
        self._plain_hit_only = frozenset(
            i
            for i, p in enumerate(self.patterns)
            if p.role == HEAD
            and not self.sigs[p.sig_index][1].then
            and self.sigs[p.sig_index][1].times == 1
        )
        # with engines that cannot name the patterns, a wrap may have split any of them
        self._wrappable = frozenset(p.owner for p in self.patterns if p.role == FRAG)
        # the candidates that run over line breaks, once more where one body of lines
        # meets the next (a line fed live, a chunk read): the same lines in bulk and live
        self._seam_ids = [i for i, p in enumerate(self.patterns) if spans_lines(p.source)]
        self.seam = self.seam_ends = None
        if self._seam_ids:
            self.seam = make_engine([self.patterns[i] for i in self._seam_ids], name)
            # the line where such a pattern ends holds its last literal (most lines do not)
            ends = {
                (paste.pair_end(self.patterns[i].source), self.patterns[i].caseless)
                for i in self._seam_ids
            }
            if all(e for e, _ in ends):
                self.seam_ends = make_engine(
                    [EnginePattern(e, c) for e, c in sorted(ends) if e is not None], name
                )

    def stream(self) -> MatchStream:
        return MatchStream(self)

    def scan_lines(self, source: str, lines: Iterable[str | bytes]) -> list[Hit]:
        """Match whole lines to the end (tests and small inputs)."""
        stream = self.stream()
        hits: list[Hit] = []
        for line in lines:
            hits.extend(stream.feed_line(source, line))
        hits.extend(stream.finish(source))
        return hits


@dataclass
class _Run:
    """Lines around a candidate line that a paste may have wrapped, waiting for the
    lines after it: (number, clean text) each, and the patterns to try on them."""

    lines: list[tuple[int, bytes]]
    owners: frozenset[int]
    forward: int = 0  # lines taken in after the candidate line
    due: int = 0  # the line before whose own matching it is tried (0: still open)


@dataclass
class _SourceState:
    line_no: int = 0  # number of the last line that has started
    open: bool = False  # that line has had no newline yet
    carry: bytes = b""
    # signatures waiting for their `then` line: signature -> (line number, evidence)
    pending: dict[int, tuple[int, str]] = field(default_factory=dict)
    armed: set[int] = field(default_factory=set)  # signatures whose `after` was seen
    counts: dict[int, int] = field(default_factory=dict)  # matching lines per signature
    recent: list[tuple[int, bytes]] = field(default_factory=list)  # last lines, raw
    runs: list[_Run] = field(default_factory=list)  # open runs
    joined: set[tuple[int, int]] = field(default_factory=set)  # (pattern, line) done
    walls_at: set[tuple[int, int]] = field(default_factory=set)  # (wall, line) of recent hits
    bannered: set[int] = field(default_factory=set)  # signatures whose after/reset was seen
    # signatures with `excerpt_times` whose line came before any `after`: count, first line
    loose: dict[int, tuple[int, int, str, tuple[tuple[int, str], ...]]] = field(
        default_factory=dict
    )


class MatchStream:
    """Matching state for many sources at once (line numbers, partial lines,
    multi-line signatures, runs of wrapped lines waiting for their end)."""

    def __init__(self, matcher: Matcher) -> None:
        self.m = matcher
        self._sources: dict[str, _SourceState] = {}

    def _state(self, source: str) -> _SourceState:
        st = self._sources.get(source)
        if st is None:
            st = self._sources[source] = _SourceState()
        return st

    def line_count(self, source: str) -> int:
        return self._state(source).line_no

    def new_file(self, source: str) -> None:
        """The source reads another file from here on (a new container's log under the same
        name): what the old one armed, counted or left waiting (`after`, `then`, `times`, a
        partial line) no longer applies. Line numbers go on."""
        old = self._sources.get(source)
        if old is not None:
            self._sources[source] = _SourceState(line_no=old.line_no)

    # -- one pattern matched --------------------------------------------------------
    def _on_match(
        self,
        st: _SourceState,
        source: str,
        pid: int,
        line_no: int,
        text: bytes,
        lines: tuple[tuple[int, str], ...] = (),
        logical: Callable[[], bytes] | None = None,
    ) -> Hit | None:
        p = self.m.patterns[pid]
        wi, sig = self.m.sigs[p.sig_index]
        si = p.sig_index
        if p.role == AFTER:
            st.armed.add(si)
            st.bannered.add(si)
            return None
        if p.role == RESET:
            st.bannered.add(si)
            st.armed.discard(si)
            st.counts.pop(si, None)
            return None
        unless = self.m.unless.get(si)
        if unless is not None and unless.search(logical() if logical else text) is not None:
            return None
        if p.role == HEAD:
            if sig.after and si not in st.armed:
                if sig.excerpt_times and si not in st.bannered:  # maybe an excerpt: count
                    n, *first = st.loose.get(si, (0, line_no, to_text(text), lines))
                    st.loose[si] = (n + 1, *first)  # type: ignore[assignment]  # the loose tuple's tail is kept as it was read
                return None
            if sig.times > 1:
                st.counts[si] = st.counts.get(si, 0) + 1
                if st.counts[si] < sig.times:
                    return None
            if sig.then:
                st.pending[si] = (line_no, to_text(text))
                return None
            return Hit(self.m.walls[wi], source, line_no, to_text(text), sig, lines)
        head = st.pending.get(si)  # THEN
        if head is None or line_no - head[0] > sig.within:
            return None
        del st.pending[si]
        opening = lines or ((line_no, to_text(text)),)
        return Hit(self.m.walls[wi], source, line_no, to_text(text), sig, (head, *opening))

    def _moot(self, st: _SourceState, pid: int) -> bool:
        """Whether a match of this pattern could change nothing now (a signature's
        `after` already seen, its `reset` with nothing to reset, its line or its
        `then` waiting for an `after` or a first line that has not come)."""
        p = self.m.patterns[pid]
        si = p.sig_index
        sig = self.m.sigs[si][1]
        excerpt = bool(sig.excerpt_times) and si not in st.bannered  # no banner yet
        if p.role == AFTER:
            return si in st.armed
        if p.role == RESET:
            return si not in st.armed and si not in st.counts and not excerpt
        if p.role == THEN:
            return si not in st.pending
        return bool(sig.after) and si not in st.armed and not excerpt

    # -- confirmation of one line --------------------------------------------------
    def _confirm(
        self, st: _SourceState, source: str, raw: bytes, line_no: int, ids, before=None
    ) -> tuple[list[Hit], frozenset[int]]:
        """Hits on this line alone, and the patterns to try across its neighbours."""
        pats = self.m.patterns
        if ids is not None:  # the common case first: one plain signature line, maybe with
            # candidates for its own wrapped form (a crash loop is mostly such lines)
            head = -1
            for pid in ids:
                o = pats[pid].owner
                if o < 0:
                    o = pid
                if head == -1:
                    head = o
                elif o != head:
                    head = -2
                    break
            if head >= 0 and head in self.m._simple_heads and head in ids:
                p = pats[head]
                line = paste.clean_line(raw)
                if (p.within_line and self.m._exact and len(line) == len(raw)) or p.rx.search(
                    line
                ) is not None:
                    wi = p.wall_index
                    st.walls_at.add((wi, line_no))
                    if len(st.walls_at) > 4096:  # only the lines a run can still reach matter
                        st.walls_at = {x for x in st.walls_at if x[1] > line_no - 12}
                    sig = self.m.sigs[p.sig_index][1]
                    return [Hit(self.m.walls[wi], source, line_no, to_text(line), sig)], _NONE
        moot = self._moot
        owners: set[int] = set()
        if ids is None:  # the engine cannot say which: every pattern, every fragment
            owners.update(o for o in self.m._wrappable if not moot(st, o))
            plain: list[int] = [pid for pid in self.m._plain if not moot(st, pid)]
        else:
            plain = []
            for pid in sorted(ids):
                if pats[pid].role == FRAG:
                    if not moot(st, pats[pid].owner):
                        owners.add(pats[pid].owner)
                elif not moot(st, pid):
                    plain.append(pid)
        if not plain:  # nothing to confirm on the line alone
            return [], frozenset(owners)
        line = paste.clean_line(raw)
        exact = ids is not None and self.m._exact and len(line) == len(raw)
        hits: list[Hit] = []
        done_walls: set[int] = set()
        unless = self.m.unless
        for pid in plain:
            p = pats[pid]
            if p.wall_index in done_walls and pid in self.m._plain_hit_only:
                owners.discard(pid)  # its wall is named on this line already: nothing to add
                continue
            if not (exact and p.within_line) and p.rx.search(line) is None:
                continue
            owners.discard(pid)
            logical = (
                (lambda: self._logical(line, before()))
                if before and p.sig_index in unless
                else None
            )
            hit = self._on_match(st, source, pid, line_no, line, (), logical)
            if hit is not None and p.wall_index not in done_walls:
                hits.append(hit)
                done_walls.add(p.wall_index)
                st.walls_at.add((p.wall_index, line_no))
        if len(st.walls_at) > 4096:  # only the lines a run can still reach matter
            st.walls_at = {x for x in st.walls_at if x[1] > line_no - 4 * paste.WRAP_BACK}
        return hits, frozenset(owners)

    # -- runs of wrapped lines -----------------------------------------------------
    def _try_run(self, st: _SourceState, source: str, run: _Run) -> list[Hit]:
        """Match a run's owners on its lines joined; a match must span a line break."""
        if len(run.lines) < 2:
            return []
        hits: list[Hit] = []
        texts = [t for _, t in run.lines]
        variants = paste.joins(texts)
        for pid in sorted(run.owners):
            p = self.m.patterns[pid]
            for joined, spans in variants:
                m = p.rx.search(joined)
                first = paste.crosses(m.span(), spans) if m else None
                if first is None:
                    continue
                line_no = run.lines[first][0]
                if (pid, line_no) not in st.joined:
                    st.joined.add((pid, line_no))
                    last = max(i for i, (a, b) in enumerate(spans) if m.start() < b and m.end() > a)
                    lines = tuple((n, to_text(t)) for n, t in run.lines[first : last + 1])
                    hit = self._on_match(
                        st,
                        source,
                        pid,
                        line_no,
                        joined[m.start() : m.end()],
                        lines,
                        functools.partial(bytes, joined),
                    )
                    if hit is not None and (p.wall_index, hit.line_no) not in st.walls_at:
                        st.walls_at.add((p.wall_index, hit.line_no))  # one hit a wall a line
                        hits.append(
                            Hit(
                                hit.wall,
                                source,
                                hit.line_no,
                                to_text(joined[spans[first][0] : spans[last][1]]),
                                hit.signature,
                                hit.lines,
                            )
                        )
                break
        if len(st.joined) > 4096:  # only the lines of open runs can come back
            st.joined.clear()
        if len(st.walls_at) > 4096:
            st.walls_at = {x for x in st.walls_at if x[1] > run.lines[0][0] - 4 * paste.WRAP_BACK}
        return hits

    @staticmethod
    def _backward(line: bytes, before: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """The lines before `line` (raw, nearest first) that it continues, oldest first
        and clean, each cut to the part that continues the one before; `line` last
        (numbered 0)."""
        clean = []
        for _, raw in before:
            if len(raw) > MAX_WRAP_LINE:  # never a wrapped line: the record starts after it
                break
            clean.append(paste.clean_line(raw))
        lines = [(0, line)]
        for i, prev in enumerate(clean):
            # a short line may be a wrapped line's tail that a second wrap continues
            tail = i + 1 < len(clean) and paste.continues(clean[i + 1], prev) is not None
            rest = paste.continues(prev, lines[0][1], tail)
            if rest is None:
                break
            lines[0] = (lines[0][0], rest)
            lines.insert(0, (before[i][0], prev))
        return lines

    @classmethod
    def _logical(cls, line: bytes, before: list[tuple[int, bytes]]) -> bytes:
        """A line with the lines a paste wrapped before it: the record it belongs to."""
        return b"".join(t for _, t in cls._backward(line, before))

    def _extend(self, run: _Run, line_no: int, raw: bytes) -> None:
        """Offer a run the next line: it takes it in, or closes before it."""
        text = paste.clean_line(raw) if len(raw) <= MAX_WRAP_LINE else None
        tail = len(run.lines) > 1  # the last line continues one already
        rest = paste.continues(run.lines[-1][1], text, tail) if text is not None else None
        if rest is None:
            run.due = line_no
            return
        run.lines.append((line_no, rest))
        run.forward += 1
        if run.forward >= paste.WRAP_FWD:
            run.due = line_no

    def _start_run(
        self, st: _SourceState, owners: frozenset[int], line_no: int, raw: bytes, before
    ) -> _Run | None:
        """A run around a candidate line, with the lines before it that it continues."""
        if len(raw) > MAX_WRAP_LINE:
            return None
        lines = self._backward(paste.clean_line(raw), before)
        lines[-1] = (line_no, lines[-1][1])
        return _Run(lines, owners)

    # -- live lines ---------------------------------------------------------------
    def feed_line(self, source: str, line: str | bytes) -> list[Hit]:
        """One complete line (with or without its newline)."""
        st = self._state(source)
        data = line.encode("utf-8", errors="surrogateescape") if isinstance(line, str) else line
        data = data.rstrip(b"\r\n").replace(b"\n", b" ") + b"\n"
        if st.carry:  # a partial line fed in bulk before: this one completes it
            data, st.carry = st.carry + data, b""
        elif not (st.open or st.runs or b"\x1b" in data):  # the common case, quickly
            line_no = st.line_no + 1
            if not self.m.engine.any(data) and not (
                self.m.seam is not None
                and st.recent
                and st.recent[-1][0] == line_no - 1
                and self._may_cross(st, data, 0, len(data))
            ):  # nothing to match, nothing waiting: only remember the line
                st.line_no = line_no
                st.recent.append((line_no, data[:-1]))
                if len(st.recent) > paste.WRAP_BACK:
                    del st.recent[0]
                return []
        return self._scan_body(st, source, data)

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
        """End of input for a source: match its last, unterminated line, close its runs."""
        st = self._state(source)
        carry, st.carry = st.carry, b""
        hits = self._scan_body(st, source, carry)
        for run in st.runs:
            hits.extend(self._try_run(st, source, run))
        st.runs.clear()
        st.open = False
        st.pending.clear()
        hits.extend(self._excerpt_hits(st, source))
        return hits

    def _excerpt_hits(self, st: _SourceState, source: str) -> list[Hit]:
        """At the end of a file: the signatures that wait for a line (`after`) that the
        file never held, judged on the excerpt's own shape (suspected, with the reason)."""
        hits = []
        for si, (n, line_no, evidence, lines) in sorted(st.loose.items()):
            wi, sig = self.m.sigs[si]
            if si not in st.bannered and n >= sig.excerpt_times:
                reason = EXCERPT_REASON.format(n=n)
                hits.append(Hit(self.m.walls[wi], source, line_no, evidence, sig, lines, reason))
        st.loose.clear()
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
        due: list[_Run] = []
        if st.runs:  # runs from before this body take in its first lines
            due = self._feed_runs(st, st.runs, body, lo, hi, first)
            st.runs = [r for r in st.runs if not r.due]
        line_no, counted_to = first, lo
        candidates = self.m.engine.candidates(body, lo, hi)
        if (
            self.m.seam is not None
            and not st.open
            and st.recent
            and st.recent[-1][0] == first - 1
            and self._may_cross(st, body, lo, hi)
        ):
            candidates = self._with_seam(st, body, lo, hi, candidates)
        for start, end, ids in candidates:
            line_no += body.count(b"\n", counted_to, start)
            counted_to = start
            if due:
                hits.extend(self._flush(st, source, due, line_no))
            found, owners = self._confirm(
                st,
                source,
                body[start:end],
                line_no,
                ids,
                lambda s=start, n=line_no: self._before(st, body, lo, s, n),
            )
            hits.extend(found)
            if owners:
                # a quick look at the two neighbours first: most candidates stop here
                if start > lo:
                    prev: bytes | None = body[
                        max(body.rfind(b"\n", lo, start - 1) + 1, lo) : start - 1
                    ]
                else:
                    prev = (
                        st.recent[-1][1] if st.recent and st.recent[-1][0] == line_no - 1 else None
                    )
                nxt = body.find(b"\n", end + 1, hi) if end + 1 < hi else -2
                after = None if nxt == -2 else body[end + 1 : nxt if nxt >= 0 else hi]
                if not paste.may_wrap(prev, body[start:end], after):
                    continue
                before = self._before(st, body, lo, start, line_no)
                run = self._start_run(st, owners, line_no, body[start:end], before)
                if run is not None:
                    new_due = self._feed_runs(st, [run], body, end + 1, hi, line_no + 1)
                    if run.due:
                        due.extend(new_due)
                        due.sort(key=lambda r: r.due)
                    else:
                        st.runs.append(run)
        newlines = line_no - first + body.count(b"\n", counted_to, hi)
        if body[hi - 1] == 0x0A:
            st.line_no, st.open = first + newlines - 1, False
        else:
            st.line_no, st.open = first + newlines, True
        if due:
            hits.extend(self._flush(st, source, due, st.line_no + 1))
        self._remember(st, body, lo, hi)
        return hits

    def _may_cross(self, st: _SourceState, body: bytes, lo: int, hi: int) -> bool:
        """Whether a pattern over line breaks may run from the lines before this body
        into it: its first line continues the last one, and one of its first lines
        holds such a pattern's last literal."""
        if self.m.seam_ends is not None:
            cut = min(nth_line_end(body, lo, MULTI_LINES - 1), hi)
            if not self.m.seam_ends.any(body[lo:cut] if lo or cut < len(body) else body):
                return False
        return paste.may_continue(st.recent[-1][1], _first_line(body, lo, hi))

    def _with_seam(self, st: _SourceState, body: bytes, lo: int, hi: int, candidates):
        """The engine's candidates, and those of the patterns that run over line
        breaks where the lines before this body meet its first lines."""
        prefix = b""
        for _, raw in reversed(st.recent[-(MULTI_LINES - 1) :]):
            if len(raw) > MAX_WRAP_LINE:
                break
            prefix = raw + b"\n" + prefix
        if not prefix:
            yield from candidates
            return
        cut = min(nth_line_end(body, lo, MULTI_LINES - 1), hi)
        seam = prefix + body[lo:cut]
        extra: list[tuple[int, int, frozenset[int] | None]] = []
        assert self.m.seam is not None  # the caller checked: the matcher has seam patterns
        for s, e, ids in self.m.seam.candidates(seam):
            if s < len(prefix):
                continue  # a line before this body: seen with it
            named = self.m._seam_ids if ids is None else [self.m._seam_ids[i] for i in ids]
            extra.append((s - len(prefix) + lo, e - len(prefix) + lo, frozenset(named)))
        if not extra:
            yield from candidates
            return
        for start, end, ids in candidates:
            while extra and extra[0][0] < start:
                yield extra.pop(0)
            if extra and extra[0][0] == start:
                more = extra.pop(0)[2]
                ids = None if ids is None else ids | more
            yield start, end, ids
        yield from extra

    def _feed_runs(
        self, st: _SourceState, runs: list[_Run], body: bytes, pos: int, hi: int, line_no: int
    ) -> list[_Run]:
        """Offer open runs the lines of body[pos:hi] (the first is number line_no)
        until each closes; returns those that closed."""
        open_runs = [r for r in runs if not r.due]
        while open_runs and pos < hi:
            end = body.find(b"\n", pos, hi)
            if end < 0:  # the last, unterminated line (or a piece of a huge one)
                end = hi
            for run in open_runs:
                self._extend(run, line_no, body[pos:end])
            open_runs = [r for r in open_runs if not r.due]
            pos, line_no = end + 1, line_no + 1
        return [r for r in runs if r.due]

    def _flush(self, st: _SourceState, source: str, due: list[_Run], line_no: int) -> list[Hit]:
        """Try the runs that closed before `line_no` (in the order they closed)."""
        hits: list[Hit] = []
        while due and due[0].due <= line_no:
            hits.extend(self._try_run(st, source, due.pop(0)))
        return hits

    def _before(
        self, st: _SourceState, body: bytes, lo: int, start: int, line_no: int
    ) -> list[tuple[int, bytes]]:
        """The lines before a candidate line (nearest first), raw: from this body,
        then from the bodies before it."""
        out: list[tuple[int, bytes]] = []
        pos = start
        while len(out) < paste.WRAP_BACK and pos > lo:
            s = max(body.rfind(b"\n", lo, pos - 1) + 1, lo)
            out.append((line_no - len(out) - 1, body[s : pos - 1]))
            pos = s
        if len(out) < paste.WRAP_BACK:
            for n, raw in reversed(st.recent):
                if n < line_no - len(out) - 1:
                    break
                if n == line_no - len(out) - 1:
                    out.append((n, raw))
                if len(out) >= paste.WRAP_BACK:
                    break
        return out

    def _remember(self, st: _SourceState, body: bytes, lo: int, hi: int) -> None:
        """Keep the last complete lines of this body for the runs of the next one."""
        if not st.open and body.find(b"\n", lo, hi - 1) < 0:  # one line (fed live)
            st.recent.append((st.line_no, body[lo : hi - 1]))
            if len(st.recent) > paste.WRAP_BACK:
                del st.recent[0]
            return
        last = st.line_no if not st.open else st.line_no - 1
        end = hi - 1 if body[hi - 1] == 0x0A else body.rfind(b"\n", lo, hi)
        tail: list[tuple[int, bytes]] = []
        while end >= lo and len(tail) < paste.WRAP_BACK:
            s = max(body.rfind(b"\n", lo, end) + 1, lo)
            tail.append((last - len(tail), body[s:end]))
            if s <= lo:
                break
            end = s - 1
        tail.reverse()
        if len(tail) >= paste.WRAP_BACK or not st.recent:
            st.recent = tail
        else:
            st.recent = [x for x in st.recent if x[0] < (tail[0][0] if tail else last + 1)][
                -(paste.WRAP_BACK - len(tail)) :
            ] + tail


def _first_line(data: bytes, lo: int, hi: int) -> bytes:
    end = data.find(b"\n", lo, hi)
    return data[lo : end if end >= 0 else hi]


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
