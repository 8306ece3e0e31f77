#!/usr/bin/env python3
"""Triage speed benchmark: `spark-tui triage --json` against `grep -E -c -f` and ripgrep.

    python bench/triage.py [--size 1G] [--out DIR] [--engines hyperscan,re2,re] [--repeat 3]

What it does, in one run:
  1. builds a vLLM-style log of the given size from real healthy lines
     (tests/sample-logs/healthy/*.log and the real captures in
     ../shared/fixtures/real/), repeated, with the real wall examples of
     tests/sample-logs/walls/<wall-id>/*.log planted at known lines (the plant
     nearest the matcher's first 4 MiB chunk boundary straddles it);
  2. exports the loaded knowledge base's log signatures to a POSIX ERE file
     (the same regexes, translated from Python syntax by parse tree);
  3. times `spark-tui triage --json [--engine E] FILE` for each matcher engine
     and `LC_ALL=C grep -E -c -f PATTERNS FILE`, interleaved, `--repeat` times,
     under /usr/bin/time -v (peak RSS);
  4. checks every planted wall is reported at its planted line with the planted
     count, and that grep counts exactly the lines an independent per-line
     Python `re` reference says match (so the two tools did the same work);
  5. measures peak RSS on a second, smaller file, to show memory is flat;
  6. scans once in-process: every planted hit at its line, nothing else;
  7. times both on a log where every tenth line is a wall (a crash loop);
  8. the small case a person waits on: a 1 MB log (spark-tui, grep, rg,
     interleaved, median) and `spark-tui kb list`, each also once with an empty
     cache (XDG_CACHE_HOME).

ripgrep runs as `rg --no-unicode -c -f PATTERNS FILE` (LC_ALL=C), beside grep in the
same interleaved runs. Every tool's stdout goes to a file (GNU grep stops at the first
match when it writes to /dev/null). Intake is the bytes the process tree read(2)
(rchar, Linux task I/O accounting): rg maps a single file with mmap, so its figure
is only its own small reads, not the log.

Results: a Markdown table on stdout and DIR/results.json (DIR defaults to
bench/out/, which git ignores). bench/README.md ("## Triage") has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:  # Python >= 3.11
    import re._constants as sre_c  # type: ignore[import-not-found]
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # Python 3.10
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spark_tui.kb.loader import load_knowledge  # noqa: E402
from spark_tui.kb.matcher import CHUNK_BYTES, ENGINES, Matcher, strip_ansi  # noqa: E402
from spark_tui.kb.schema import Wall  # noqa: E402

SAMPLES = REPO / "tests" / "sample-logs"
FIXTURES_REAL = REPO.parent / "shared" / "fixtures" / "real"
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMG]?)B?$", re.I)


def parse_size(text: str) -> int:
    m = _SIZE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 1G)")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


# ------------------------------------------------------------ Python re -> POSIX ERE

WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
DIGIT = frozenset(b"0123456789")
SPACE = frozenset(b" \t\n\r\f\v")  # what \s means in a bytes pattern
ALL = frozenset(range(256))
CATEGORIES = {
    sre_c.CATEGORY_DIGIT: DIGIT,
    sre_c.CATEGORY_NOT_DIGIT: ALL - DIGIT,
    sre_c.CATEGORY_SPACE: SPACE,
    sre_c.CATEGORY_NOT_SPACE: ALL - SPACE,
    sre_c.CATEGORY_WORD: WORD,
    sre_c.CATEGORY_NOT_WORD: ALL - WORD,
}
ERE_SPECIAL = frozenset(b".[]()*+?{}|^$\\")


class Untranslatable(ValueError):
    """A construct POSIX ERE (GNU grep -E) cannot express."""


def _fold(chars: frozenset[int]) -> frozenset[int]:
    extra = {c ^ 0x20 for c in chars if 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A}
    return chars | extra


def _bracket(chars: frozenset[int]) -> bytes:
    """A bracket expression for a set of bytes (C locale), newline and NUL left out
    (grep matches within one line; neither occurs inside a line)."""
    chars = chars - {0x0A, 0x00}
    if not chars:
        raise Untranslatable("empty character class")
    negate = len(chars) > 128
    members = sorted((ALL - {0x0A, 0x00} - chars) if negate else chars)
    if negate and not members:
        return b"."
    tail = b""
    out = bytearray()
    if ord("]") in members:
        out += b"]"
    if ord("[") in members:
        tail += b"["
    if ord("-") in members:
        tail += b"-"
    rest = [c for c in members if c not in (ord("]"), ord("["), ord("-"))]
    i = 0
    while i < len(rest):  # compress runs of letters/digits into ranges
        j = i
        while (
            j + 1 < len(rest)
            and rest[j + 1] == rest[j] + 1
            and chr(rest[j + 1]).isalnum()
            and chr(rest[i]).isalnum()
        ):
            j += 1
        if j - i >= 2:
            out += bytes([rest[i], ord("-"), rest[j]])
        else:
            out += bytes(rest[i : j + 1])
        i = j + 1
    body = bytes(out) + tail
    if body.startswith(b"^"):  # only '^', '[' and '-' are members; '^' first would negate
        if body == b"^" and not negate:
            return b"\\^"
        body = (b"-" if b"-" in body else b"") + (b"[" if b"[" in body else b"") + b"^"
    return b"[" + (b"^" if negate else b"") + body + b"]"


def _literal(c: int, icase: bool) -> bytes:
    if icase and (0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A):
        return _bracket(frozenset({c, c ^ 0x20}))
    if c == 0x0A:
        raise Untranslatable("newline in pattern")
    return (b"\\" if c in ERE_SPECIAL else b"") + bytes([c])


def _set_of(items, icase: bool) -> frozenset[int]:
    chars: set[int] = set()
    negate = False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            chars.add(av)
        elif op is sre_c.RANGE:
            chars.update(range(av[0], av[1] + 1))
        elif op is sre_c.CATEGORY:
            chars |= CATEGORIES[av]
        else:
            raise Untranslatable(f"class item {op}")
    out = _fold(frozenset(chars)) if icase else frozenset(chars)
    return (ALL - out) if negate else out


def _emit(sub, icase: bool) -> bytes:
    out = bytearray()
    for op, av in sub:
        if op is sre_c.LITERAL:
            out += _literal(av, icase)
        elif op is sre_c.NOT_LITERAL:
            out += _bracket(ALL - (_fold(frozenset({av})) if icase else frozenset({av})))
        elif op is sre_c.ANY:
            out += b"."
        elif op is sre_c.IN:
            out += _bracket(_set_of(av, icase))
        elif op is sre_c.CATEGORY:
            out += _bracket(CATEGORIES[av])
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) or (
            getattr(sre_c, "POSSESSIVE_REPEAT", None) is op
        ):
            lo, hi, body = av
            inner = _emit(body, icase)
            if not (len(body) == 1 and body[0][0] in (sre_c.LITERAL, sre_c.IN, sre_c.ANY)):
                inner = b"(" + inner + b")"
            if hi is sre_c.MAXREPEAT:
                q = {0: b"*", 1: b"+"}.get(lo, b"{%d,}" % lo)
            elif lo == 0 and hi == 1:
                q = b"?"
            elif lo == hi:
                q = b"{%d}" % lo
            else:
                q = b"{%d,%d}" % (lo, hi)
            out += inner + q
        elif op is sre_c.SUBPATTERN:
            _group, add_flags, del_flags, body = av
            inner_icase = (icase or bool(add_flags & re.I)) and not (del_flags & re.I)
            out += b"(" + _emit(body, inner_icase) + b")"
        elif op is sre_c.BRANCH:
            out += b"(" + b"|".join(_emit(alt, icase) for alt in av[1]) + b")"
        elif op is sre_c.AT:
            at = {
                sre_c.AT_BEGINNING: b"^",
                sre_c.AT_BEGINNING_STRING: b"^",
                sre_c.AT_BOUNDARY: b"\\b",
                sre_c.AT_NON_BOUNDARY: b"\\B",
            }.get(av)
            if at is None:
                raise Untranslatable(f"anchor {av}")
            out += at
        elif op is getattr(sre_c, "ATOMIC_GROUP", None):
            out += b"(" + _emit(av, icase) + b")"
        else:
            raise Untranslatable(str(op))
    return bytes(out)


def to_ere(pattern: str, ignore_case: bool) -> bytes:
    """The same regex for `grep -E` in the C locale (bytes, like the matcher)."""
    src = pattern.encode()
    parsed = sre_parse.parse(src, re.I if ignore_case else 0)
    icase = bool(parsed.state.flags & re.I)
    return _emit(parsed, icase)


# ------------------------------------------------------------ the reference matcher


@dataclass
class _RefSig:
    wall: str
    head: re.Pattern[bytes]
    then: re.Pattern[bytes] | None
    within: int


class Reference:
    """An independent, obviously-correct per-line matcher (plain Python `re`, one
    regex at a time): which lines hold a signature's words (grep's count), and,
    for signatures without `after`/`times`/`unless`, the hits of a block with the
    matcher's documented per-line semantics (one hit per wall per line; a
    two-line signature hits on its second line when the first was seen at most
    `within` lines before)."""

    def __init__(self, walls: list[Wall]) -> None:
        self.sigs: list[_RefSig] = []
        self.context: list[re.Pattern[bytes]] = []  # `after`/`reset` words
        for w in walls:
            for s in w.signatures:
                fl = re.I if s.ignore_case else 0
                then = re.compile(s.then.encode(), fl) if s.then else None
                self.sigs.append(_RefSig(w.id, re.compile(s.pattern.encode(), fl), then, s.within))
                self.context += [re.compile(x.encode(), fl) for x in (s.after, s.reset) if x]
        self.max_within = max((s.within for s in self.sigs if s.then), default=0)

    def any_pattern(self, line: bytes) -> bool:
        line = strip_ansi(line)
        return any(
            s.head.search(line) or (s.then is not None and s.then.search(line)) for s in self.sigs
        )

    def any_context(self, line: bytes) -> bool:
        """Words that arm or reset a signature elsewhere (kept out of the filler, so a
        plant is matched as it is alone)."""
        line = strip_ansi(line)
        return any(rx.search(line) for rx in self.context)

    def hits(self, lines: list[bytes]) -> list[tuple[str, int]]:
        """(wall id, 1-based line within `lines`) for a block read from a fresh state."""
        pending: dict[int, int] = {}
        out: list[tuple[str, int]] = []
        for n, raw in enumerate(lines, 1):
            line = strip_ansi(raw.rstrip(b"\n"))
            done: set[str] = set()
            for i, s in enumerate(self.sigs):
                if s.wall in done:
                    continue
                if s.then is None:
                    if s.head.search(line):
                        out.append((s.wall, n))
                        done.add(s.wall)
                    continue
                if s.head.search(line):
                    pending[i] = n
                if s.then.search(line) and i in pending and n - pending[i] <= s.within:
                    del pending[i]
                    out.append((s.wall, n))
                    done.add(s.wall)
        return out


# ------------------------------------------------------------ building the log


@dataclass
class Block:
    """One real wall example, planted whole."""

    wall: str
    path: str
    lines: list[bytes]
    hits: list[tuple[str, int]]  # (wall, line within block)
    pattern_lines: int  # lines grep would count


@dataclass
class Built:
    path: Path
    size: int
    lines: int
    expected: dict[str, dict[str, int]] = field(default_factory=dict)  # wall -> first, count
    planted: list[dict[str, object]] = field(default_factory=list)
    grep_expected: int = 0
    filler_lines: int = 0
    filler_dropped: int = 0
    filler_sources: list[str] = field(default_factory=list)
    unplanted_log_walls: list[str] = field(default_factory=list)


def _lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data.splitlines(keepends=True)


def filler(ref: Reference, samples: Path) -> tuple[list[bytes], list[str], int]:
    """Real healthy lines, minus any line that matches a signature (so the only
    matching lines in the benchmark log are the planted ones)."""
    sources = sorted((samples / "healthy").glob("*.log"))
    sources += sorted(
        p
        for p in FIXTURES_REAL.rglob("*")
        if p.is_file() and p.suffix in (".txt", ".csv", ".xml") and p.stat().st_size > 0
    )
    kept: list[bytes] = []
    dropped = 0
    for p in sources:
        for line in _lines_of(p):
            if ref.any_pattern(line.rstrip(b"\n")) or ref.any_context(line.rstrip(b"\n")):
                dropped += 1
            else:
                kept.append(line)
    if not kept:
        raise SystemExit("no healthy lines found (tests/sample-logs/healthy, fixtures/real)")
    return kept, [_rel(p) for p in sources], dropped


def _rel(p: Path) -> str:
    """A path as the README shows it: repository-relative, ../shared/… for shared material."""
    p = p.resolve()
    for base, prefix in ((REPO, ""), (REPO.parent, "../")):
        try:
            return prefix + str(p.relative_to(base))
        except ValueError:
            continue
    return str(p)


def block_hits(lines: list[bytes]) -> list[tuple[str, int]]:
    """What the matcher finds in a block read alone (wrapped lines joined, `after`,
    `times` and `unless` applied): a plant must be found the same in the big log."""
    return [(h.wall.id, h.line_no) for h in _block_matcher().scan_lines("block", lines)]


def _block_matcher() -> Matcher:
    global _BLOCK_MATCHER
    if _BLOCK_MATCHER is None:
        _BLOCK_MATCHER = Matcher(load_knowledge(use_user=False))
    return _BLOCK_MATCHER


_BLOCK_MATCHER: Matcher | None = None


def blocks(ref: Reference, samples: Path) -> list[Block]:
    out = []
    for d in sorted((samples / "walls").glob("*")):
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.log")):
            lines = _lines_of(p)
            hits = block_hits([ln.rstrip(b"\n") for ln in lines])
            if d.name not in {w for w, _ in hits}:
                print(f"warning: {_rel(p)} does not match {d.name}", file=sys.stderr)
            pat = sum(1 for ln in lines if ref.any_pattern(ln.rstrip(b"\n")))
            out.append(Block(d.name, _rel(p), lines, hits, pat))
    return out


def build(path: Path, size: int, plants: int, kb, ref: Reference, samples: Path) -> Built:
    log_walls = sorted(w.id for w in kb if w.kind == "log" and w.signatures)
    fill, sources, dropped = filler(ref, samples)
    unit = b"".join(fill)
    unit_lines = len(fill)
    examples = blocks(ref, samples)
    planted_walls = {b.wall for b in examples}
    seq = [b for _ in range(plants) for b in examples]
    built = Built(path, 0, 0, filler_sources=sources, filler_dropped=dropped)
    built.filler_lines = unit_lines
    built.unplanted_log_walls = [w for w in log_walls if w not in planted_walls]
    # where each plant goes: evenly spread; the first straddles the first chunk boundary
    targets = [int((i + 0.5) * size / max(len(seq), 1)) for i in range(len(seq))]
    if seq and size > 2 * CHUNK_BYTES:  # the plant nearest the first chunk boundary straddles it
        i = min(range(len(seq)), key=lambda k: abs(targets[k] - CHUNK_BYTES))
        t = CHUNK_BYTES - len(b"".join(seq[i].lines)) // 2
        lo = targets[i - 1] if i > 0 else 0
        hi = targets[i + 1] if i + 1 < len(targets) else size
        if lo < t < hi:
            targets[i] = t
    pos = 0
    line_no = 0  # lines written so far
    expected: dict[str, dict[str, int]] = {}

    with path.open("wb") as fh:

        def fill_to(target: int) -> None:
            nonlocal pos, line_no
            while pos + len(unit) <= target:
                fh.write(unit)
                pos += len(unit)
                line_no += unit_lines
            for line in fill:  # part of a unit, whole lines only
                if pos + len(line) > target:
                    break
                fh.write(line)
                pos += len(line)
                line_no += 1

        last_end_line = -(10**9)
        for blk, target in zip(seq, targets, strict=True):
            fill_to(target)
            if line_no - last_end_line <= ref.max_within:
                raise SystemExit(
                    f"plants too close ({line_no - last_end_line} lines): use a larger --size"
                )
            data = b"".join(blk.lines)
            fh.write(data)
            start = line_no + 1
            for wall, n in blk.hits:
                e = expected.setdefault(wall, {"line": start + n - 1, "count": 0})
                e["count"] += 1
            built.planted.append(
                {
                    "wall": blk.wall,
                    "example": blk.path,
                    "first_line": start,
                    "wall_lines": [start + n - 1 for w, n in blk.hits if w == blk.wall],
                    "hits": [[w, start + n - 1] for w, n in blk.hits],
                    "byte_offset": pos,
                }
            )
            built.grep_expected += blk.pattern_lines
            pos += len(data)
            line_no += len(blk.lines)
            last_end_line = line_no
        fill_to(size)
    built.size, built.lines, built.expected = pos, line_no, expected
    return built


# ------------------------------------------------------------ running and timing


@dataclass
class Run:
    label: str
    seconds: float
    rss_mb: float
    stdout: str
    exit: int
    intake_bytes: int = 0  # bytes the process tree read (rchar), its input and its own files


def _rchar() -> int:
    """Bytes read by this process and every child it has reaped (Linux task I/O accounting:
    a reaped child's counts, and its own reaped children's, are added to the parent's)."""
    text = Path("/proc/self/io").read_text()
    return int(re.search(r"^rchar: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]


_OUT_DIR: Path | None = None  # where timed() writes each tool's stdout (set by main)


def timed(label: str, cmd: list[str], env: dict[str, str] | None = None) -> Run:
    """Run cmd under /usr/bin/time -v, stdout to a file (GNU grep stops at the first
    match when its output is /dev/null), and measure wall time, peak RSS and intake."""
    full = ["/usr/bin/time", "-v", *cmd]
    out_path = (_OUT_DIR or Path(".")) / f"stdout-{label}.txt"
    with out_path.open("w") as out:
        r0 = _rchar()
        t0 = time.perf_counter()
        p = subprocess.run(full, stdout=out, stderr=subprocess.PIPE, text=True, env=env)
        secs = time.perf_counter() - t0
        intake = _rchar() - r0 - len(p.stderr.encode())
    stdout = out_path.read_text()
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rss = int(m.group(1)) / 1024 if m else float("nan")
    if p.returncode not in (0, 1) or (p.returncode == 1 and label not in ("grep", "rg")):
        tail = "\n".join(p.stderr.splitlines()[-25:])
        print(f"{label}: exit {p.returncode}\n{tail}", file=sys.stderr)
    return Run(label, secs, rss, stdout, p.returncode, intake)


def stateful_walls(kb) -> set[str]:
    """Walls with a signature whose state runs over the whole log (an `after` line, a count of
    lines, an excerpt's shape judged at its end): a plant found alone is not found at the same
    line in a log of many plants, so for these only that they are found is checked."""
    return {
        w.id
        for w in kb
        for s in w.signatures
        if s.after or s.times > 1 or getattr(s, "excerpt_times", 0)
    }


def check_triage(
    out: str, built: Built, loose: set[str] | frozenset[str] = frozenset()
) -> list[str]:
    """Differences between triage --json and what was planted ([] when all is right);
    `loose`: walls checked for presence only (stateful_walls)."""
    try:
        got = {
            d["wall"]: {"line": d["line"], "count": d["count"]}
            for d in json.loads(out)["diagnoses"]
        }
    except (ValueError, KeyError) as exc:
        return [f"unreadable output: {exc}"]
    problems = []
    for wall, exp in sorted(built.expected.items()):
        g = got.get(wall)
        if g is None:
            problems.append(f"{wall}: not found (planted first at line {exp['line']})")
        elif g != exp and wall not in loose:
            problems.append(f"{wall}: got line {g['line']} x{g['count']}, planted {exp}")
    for wall in sorted(set(got) - set(built.expected)):
        problems.append(f"{wall}: reported but not planted (line {got[wall]['line']})")
    return problems


def check_every_plant(path: Path, built: Built, kb) -> list[str]:
    """Scan in-process with the default engine and compare every hit, not only the
    first per wall that --json reports, with the planted lines."""
    from spark_tui.kb.matcher import scan_stream

    loose = stateful_walls(kb)
    want = sorted((w, n) for p in built.planted for w, n in p["hits"])  # type: ignore[attr-defined]
    with path.open("rb") as fh:
        got = sorted((h.wall.id, h.line_no) for h in scan_stream(Matcher(kb), "f", fh))
    missing = sorted((w, n) for w, n in set(want) - set(got) if w not in loose)
    extra = sorted((w, n) for w, n in set(got) - set(want) if w not in loose)
    # a stateful wall: found (anywhere) exactly when it was planted
    lost = sorted({w for w, _ in want if w in loose} - {w for w, _ in got})
    stray = sorted({w for w, _ in got if w in loose} - {w for w, _ in want})
    return (
        [f"not found: {w} at line {n}" for w, n in missing[:10]]
        + [f"not planted: {w} at line {n}" for w, n in extra[:10]]
        + [f"not found anywhere: {w}" for w in lost]
        + [f"reported but not planted: {w}" for w in stray]
    )


def build_dense(path: Path, size: int, ref: Reference, samples: Path) -> dict[str, int]:
    """A log where every tenth line is a wall: each real example line that is a
    wall on its own, then nine healthy lines, over and over. Returns the expected
    count per wall."""
    fill, _sources, _dropped = filler(ref, samples)
    unit_lines: list[bytes] = []
    per_unit: dict[str, int] = {}
    k = 0
    for blk in blocks(ref, samples):
        for line in blk.lines:
            alone = block_hits([line.rstrip(b"\n")])
            if len(alone) == 1 and alone == ref.hits([line]):
                unit_lines.append(line)
                unit_lines.extend(fill[(k + i) % len(fill)] for i in range(9))
                k += 9
                per_unit[alone[0][0]] = per_unit.get(alone[0][0], 0) + 1
    unit = b"".join(unit_lines)
    reps = max(size // max(len(unit), 1), 1)
    with path.open("wb") as fh:
        for _ in range(reps):
            fh.write(unit)
    return {w: n * reps for w, n in per_unit.items()}


def engines_available() -> list[str]:
    out = []
    for name in ENGINES:
        try:
            Matcher([], engine=name)
        except ImportError:
            continue
        out.append(name)
    return out


def machine() -> dict[str, str]:
    info = {"python": platform.python_version(), "arch": platform.machine()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for key, name in (("Model name", "cpu"), ("CPU(s)", "cores")):
            m = re.search(rf"^{re.escape(key)}:\s*(.+)$", lscpu, re.M)
            if m:
                info[name] = m.group(1).strip()
    except OSError:
        pass
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        info["memory"] = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, AttributeError):
        pass
    grep_v = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout
    info["grep"] = grep_v.splitlines()[0] if grep_v else "?"
    return info


RG = shutil.which("rg")


def peer_figures(runs: list[Run], built: Built, mib: float, grep_s: float) -> dict | None:
    """Median time, throughput, RSS, intake and count of a peer's runs (None: not run)."""
    if not runs:
        return None
    secs = statistics.median(r.seconds for r in runs)
    count = int(runs[0].stdout.strip() or -1)
    return {
        "seconds": secs,
        "runs": [r.seconds for r in runs],
        "mb_s": mib / secs,
        "ratio_to_grep": secs / grep_s,
        "rss_mb": max(r.rss_mb for r in runs),
        "intake_bytes": statistics.median(r.intake_bytes for r in runs),
        "count": count,
        "expected_count": built.grep_expected,
    }


def small_file(
    built: Built, patterns: Path, kb_args: list[str], cenv, repeat: int, loose: set[str]
) -> dict:
    """A 1 MB log, as a person triages one: spark-tui (default engine), grep and rg,
    interleaved, `repeat` runs each; spark-tui's caches (YAML, matcher database) are
    warmed by one untimed run first, and one run with an empty cache is timed apart."""
    tools: dict[str, tuple[list[str], dict | None]] = {
        "spark-tui": (["spark-tui", "triage", "--json", *kb_args, str(built.path)], None),
        "grep": (["grep", "-E", "-c", "-f", str(patterns), str(built.path)], cenv),
    }
    if RG:
        tools["rg"] = (["rg", "--no-unicode", "-c", "-f", str(patterns), str(built.path)], cenv)
    cold_home = Path(tempfile.mkdtemp(prefix="spark-tui-cold-"))
    try:
        cold = timed(
            "spark-tui",
            tools["spark-tui"][0],
            dict(os.environ, XDG_CACHE_HOME=str(cold_home)),
        )
    finally:
        shutil.rmtree(cold_home, ignore_errors=True)
    timed("spark-tui", tools["spark-tui"][0])  # warms the default cache
    runs: dict[str, list[Run]] = {t: [] for t in tools}
    for _ in range(repeat):
        for name, (cmd, env) in tools.items():
            runs[name].append(timed(name, cmd, env))
    problems = sorted({p for r in runs["spark-tui"] for p in check_triage(r.stdout, built, loose)})
    out: dict = {
        "size_bytes": built.size,
        "lines": built.lines,
        "plants": len(built.planted),
        "cold_cache_seconds": cold.seconds,
        "correct": not problems,
        "problems": problems[:20],
        "tools": {},
    }
    for name, rs in runs.items():
        out["tools"][name] = {
            "seconds": statistics.median(r.seconds for r in rs),
            "runs": [r.seconds for r in rs],
            "rss_mb": max(r.rss_mb for r in rs),
            "intake_bytes": statistics.median(r.intake_bytes for r in rs),
        }
        if name != "spark-tui":
            out["tools"][name]["count"] = int(rs[0].stdout.strip() or -1)
    out["expected_count"] = built.grep_expected
    ours = out["tools"]["spark-tui"]["seconds"]
    out["ratio_to_grep"] = ours / out["tools"]["grep"]["seconds"]
    if "rg" in out["tools"]:
        out["ratio_to_rg"] = ours / out["tools"]["rg"]["seconds"]
    return out


def kb_list(kb_args: list[str], repeat: int, out_dir: Path) -> dict:
    """`spark-tui kb list`: once with an empty cache, then `repeat` runs with it warm."""
    cmd = ["spark-tui", "kb", "list", *kb_args]
    cold_home = Path(tempfile.mkdtemp(prefix="spark-tui-cold-"))
    try:
        cold = timed("kb-list", cmd, dict(os.environ, XDG_CACHE_HOME=str(cold_home)))
    finally:
        shutil.rmtree(cold_home, ignore_errors=True)
    timed("kb-list", cmd)  # warms the default cache
    runs = [timed("kb-list", cmd) for _ in range(repeat)]
    return {
        "seconds": statistics.median(r.seconds for r in runs),
        "runs": [r.seconds for r in runs],
        "cold_cache_seconds": cold.seconds,
        "walls_listed": max(len(r.stdout.splitlines()) for r in runs),
        "intake_bytes": statistics.median(r.intake_bytes for r in runs),
        "exit": max(r.exit for r in runs),
    }


def warm(path: Path) -> None:
    """Read the file once so every timed run reads it from the page cache."""
    with path.open("rb") as fh:
        while fh.read(16 << 20):
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=parse_size, default=parse_size("1G"), help="log size (1G)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out", help="work directory")
    ap.add_argument("--engines", default=None, help="comma list (default: all installed)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each tool (median)")
    ap.add_argument("--plants", type=int, default=3, help="times each wall example is planted")
    ap.add_argument(
        "--rss-size",
        type=parse_size,
        default=None,
        help="second, smaller log for the flat-memory check (default size/8, at least 64M)",
    )
    ap.add_argument(
        "--dense-size",
        type=parse_size,
        default=parse_size("64M"),
        help="size of the log where every tenth line is a wall (64M)",
    )
    ap.add_argument(
        "--small-size",
        type=parse_size,
        default=parse_size("1M"),
        help="the small log a person triages while waiting (1M)",
    )
    ap.add_argument("--knowledge", type=Path, default=None, help="knowledge dir (built-in)")
    ap.add_argument(
        "--samples", type=Path, default=SAMPLES, help="dir with walls/<id>/*.log and healthy/*.log"
    )
    ap.add_argument("--keep", action="store_true", help="reuse logs already built with same inputs")
    args = ap.parse_args(argv)

    if not shutil.which("spark-tui"):
        raise SystemExit("spark-tui is not on PATH (pip install -e .)")
    args.out.mkdir(parents=True, exist_ok=True)
    global _OUT_DIR
    _OUT_DIR = args.out
    if not RG:
        print("ripgrep (rg) is not installed: timing grep alone", file=sys.stderr)
    kb = load_knowledge(args.knowledge, use_user=False)
    ref = Reference(list(kb))
    global _BLOCK_MATCHER
    _BLOCK_MATCHER = Matcher(kb)  # the plants' hits, as this knowledge base finds them
    kb_args = ["--knowledge", str(args.knowledge)] if args.knowledge else []

    # the same regexes for grep
    ere_lines, untranslated = [], []
    for w in kb:
        for s in w.signatures:
            for pat in (s.pattern, s.then):
                if pat is None:
                    continue
                try:
                    ere_lines.append(to_ere(pat, s.ignore_case))
                except Untranslatable as exc:
                    untranslated.append(f"{w.id}: {pat!r} ({exc})")
    patterns = args.out / "patterns.ere"
    patterns.write_bytes(b"\n".join(ere_lines) + b"\n")
    if untranslated:
        print("not translatable to ERE (grep runs without them):", *untranslated, sep="\n  ")

    def make(size: int, name: str, plants: int | None = None) -> Built:
        plants = plants or args.plants
        path = args.out / name
        key = hashlib.sha256()
        key.update(f"v2:{size}:{plants}:".encode() + patterns.read_bytes())  # v2: "hits"
        for p in sorted(args.samples.rglob("*.log")) + sorted(FIXTURES_REAL.rglob("*")):
            if p.is_file():
                key.update(p.name.encode() + p.read_bytes())
        manifest = path.with_suffix(".json")
        if args.keep and path.exists() and manifest.exists():
            saved = json.loads(manifest.read_text())
            if saved.get("key") == key.hexdigest():
                b = Built(path, saved["size"], saved["lines"])
                for k in ("expected", "planted", "grep_expected", "filler_lines"):
                    setattr(b, k, saved[k])
                for k in ("filler_dropped", "filler_sources", "unplanted_log_walls"):
                    setattr(b, k, saved[k])
                print(f"reusing {path} ({b.size / 2**20:.0f} MiB)")
                return b
        t0 = time.perf_counter()
        b = build(path, size, plants, kb, ref, args.samples)
        print(
            f"built {path} ({b.size / 2**20:.0f} MiB, {b.lines} lines) in {time.perf_counter() - t0:.1f} s"
        )
        manifest.write_text(
            json.dumps(
                {"key": key.hexdigest(), "size": b.size, "lines": b.lines}
                | {
                    k: getattr(b, k)
                    for k in ("expected", "planted", "grep_expected", "filler_lines")
                }
                | {
                    k: getattr(b, k)
                    for k in ("filler_dropped", "filler_sources", "unplanted_log_walls")
                },
                indent=1,
            )
        )
        return b

    big = make(args.size, "bench.log")
    engines = args.engines.split(",") if args.engines else engines_available()
    default_engine = Matcher([], engine=None).engine.name
    print(
        f"log walls planted: {len({p['wall'] for p in big.planted})}"
        f" ({len(big.planted)} plants); log walls without an example: {big.unplanted_log_walls or 'none'}"
    )
    warm(big.path)
    load_before = os.getloadavg()[0]
    grep_cmd = ["grep", "-E", "-c", "-f", str(patterns), str(big.path)]
    rg_cmd = ["rg", "--no-unicode", "-c", "-f", str(patterns), str(big.path)] if RG else []
    cenv = dict(os.environ, LC_ALL="C")
    runs: dict[str, list[Run]] = {"grep": [], "rg": []}
    for e in engines:
        runs[e] = []
    for _ in range(args.repeat):  # interleaved, so load from other processes hits all alike
        runs["grep"].append(timed("grep", grep_cmd, cenv))
        if RG:
            runs["rg"].append(timed("rg", rg_cmd, cenv))
        for e in engines:
            cmd = ["spark-tui", "triage", "--json", "--engine", e, *kb_args, str(big.path)]
            runs[e].append(timed(e, cmd))
    empty = args.out / "empty.log"
    empty.write_bytes(b"")
    startup = timed("startup", ["spark-tui", "triage", "--json", *kb_args, str(empty)])

    grep_count = int(runs["grep"][0].stdout.strip() or -1)
    grep_s = statistics.median(r.seconds for r in runs["grep"])
    mib = big.size / 2**20
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "size_bytes": big.size,
        "lines": big.lines,
        "patterns": len(ere_lines),
        "untranslated": untranslated,
        "log_walls_planted": sorted({p["wall"] for p in big.planted}),
        "plants": len(big.planted),
        "unplanted_log_walls": big.unplanted_log_walls,
        "filler": {
            "lines": big.filler_lines,
            "dropped": big.filler_dropped,
            "sources": big.filler_sources,
        },
        "grep": {
            "seconds": grep_s,
            "runs": [r.seconds for r in runs["grep"]],
            "mb_s": mib / grep_s,
            "rss_mb": max(r.rss_mb for r in runs["grep"]),
            "count": grep_count,
            "expected_count": big.grep_expected,
            "intake_bytes": statistics.median(r.intake_bytes for r in runs["grep"]),
        },
        "rg": peer_figures(runs["rg"], big, mib, grep_s),
        "startup_seconds": startup.seconds,
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "default_engine": default_engine,
        "engines": {},
    }
    ok = grep_count == big.grep_expected
    rg_fig = results["rg"]
    if rg_fig and rg_fig["count"] != big.grep_expected:  # type: ignore[index]
        ok = False
        print(f"rg counted {rg_fig['count']} lines, the reference {big.grep_expected}")  # type: ignore[index]
    if not ok:
        print(
            f"grep counted {grep_count} lines, the reference {big.grep_expected}: translation differs"
        )
    for e in engines:
        secs = statistics.median(r.seconds for r in runs[e])
        problems = sorted(
            {p for r in runs[e] for p in check_triage(r.stdout, big, stateful_walls(kb))}
        )
        ok = ok and not problems
        results["engines"][e] = {  # type: ignore[index]
            "seconds": secs,
            "runs": [r.seconds for r in runs[e]],
            "mb_s": mib / secs,
            "ratio_to_grep": secs / grep_s,
            "ratio_to_rg": secs / results["rg"]["seconds"] if results["rg"] else None,  # type: ignore[index]
            "rss_mb": max(r.rss_mb for r in runs[e]),
            "intake_bytes": statistics.median(r.intake_bytes for r in runs[e]),
            "correct": not problems,
            "problems": problems[:20],
        }

    # flat memory: the default engine on a smaller file
    small_size = args.rss_size or max(args.size // 8, 64 << 20)
    small = make(small_size, "bench-small.log")
    r_small = timed("small", ["spark-tui", "triage", "--json", *kb_args, str(small.path)])
    small_problems = check_triage(r_small.stdout, small, stateful_walls(kb))
    ok = ok and not small_problems
    every = check_every_plant(big.path, big, kb)
    ok = ok and not every
    results["every_plant"] = {
        "hits_planted": sum(len(p["hits"]) for p in big.planted),  # type: ignore[arg-type]
        "problems": every,
    }
    results["rss_check"] = {
        "small_size_bytes": small.size,
        "small_rss_mb": r_small.rss_mb,
        "big_rss_mb": max(r.rss_mb for r in runs.get(default_engine, runs[engines[0]])),
        "small_correct": not small_problems,
    }
    # the other extreme: a log where every tenth line is a wall (a crash loop)
    dense = args.out / "dense.log"
    want = build_dense(dense, args.dense_size, ref, args.samples)
    warm(dense)
    d_grep = timed("grep", [*grep_cmd[:-1], str(dense)], cenv)
    d_tui = timed("dense", ["spark-tui", "triage", "--json", *kb_args, str(dense)])
    try:
        d_got = {d["wall"]: d["count"] for d in json.loads(d_tui.stdout)["diagnoses"]}
    except (ValueError, KeyError):
        d_got = {}
    ok = ok and d_got == want
    results["dense"] = {
        "size_bytes": dense.stat().st_size,
        "wall_lines": sum(want.values()),
        "grep_seconds": d_grep.seconds,
        "seconds": d_tui.seconds,
        "ratio_to_grep": d_tui.seconds / d_grep.seconds,
        "rss_mb": d_tui.rss_mb,
        "counts_right": d_got == want,
    }
    if RG:
        d_rg = timed("rg", [*rg_cmd[:-1], str(dense)], cenv)
        results["dense"]["rg_seconds"] = d_rg.seconds  # type: ignore[index]
        results["dense"]["ratio_to_rg"] = d_tui.seconds / d_rg.seconds  # type: ignore[index]

    # where a person waits: a 1 MB log, and `kb list`
    one_mb = make(args.small_size, "bench-1m.log", plants=1)
    warm(one_mb.path)
    results["small_file"] = small_file(
        one_mb, patterns, kb_args, cenv, args.repeat, stateful_walls(kb)
    )
    sf = results["small_file"]
    ok = ok and sf["correct"]  # type: ignore[index]
    results["kb_list"] = kb_list(kb_args, args.repeat, args.out)
    results["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    (args.out / "triage.json").write_text(json.dumps(results, indent=1))
    print(report(results))
    return 0 if ok else 1


def report(r: dict) -> str:
    m = r["machine"]
    g = r["grep"]
    lines = [
        f"{r['date']} · {m.get('cpu', '?')} · {m.get('cores', '?')} cores · {m.get('memory', '?')}"
        f" · Python {m['python']} · {m['grep']}",
        f"load average (1 min) before/after the timed runs: {r['load_average_1m']} on"
        f" {m.get('cores', '?')} cores",
        f"log: {r['size_bytes'] / 2**20:.0f} MiB, {r['lines']:,} lines, {r['plants']} plants of"
        f" {len(r['log_walls_planted'])} log walls; {r['patterns']} regexes",
        "",
        "| tool | seconds (median) | MB/s | ratio to grep | ratio to rg | peak RSS | bytes read | correct |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    rg = r.get("rg")
    rg_s = rg["seconds"] if rg else float("nan")
    for name, v in (("`grep -E -c -f` (LC_ALL=C)", g), ("`rg --no-unicode -c -f` (LC_ALL=C)", rg)):
        if v is None:
            continue
        lines.append(
            f"| {name} | {v['seconds']:.2f} | {v['mb_s']:.0f} | {v['seconds'] / g['seconds']:.2f}"
            f" | {v['seconds'] / rg_s:.2f} | {v['rss_mb']:.0f} MB | {_mb(v['intake_bytes'])}"
            f" | {'yes' if v['count'] == v['expected_count'] else 'NO'} ({v['count']} lines) |"
        )
    for e, v in r["engines"].items():
        star = " (default)" if e == r["default_engine"] else ""
        lines.append(
            f"| `spark-tui triage --json --engine {e}`{star} | {v['seconds']:.2f} | {v['mb_s']:.0f}"
            f" | {v['ratio_to_grep']:.2f} | {v['seconds'] / rg_s:.2f} | {v['rss_mb']:.0f} MB"
            f" | {_mb(v['intake_bytes'])} | {'yes' if v['correct'] else 'NO'} |"
        )
    rc = r["rss_check"]
    ep = r["every_plant"]
    dn = r["dense"]
    lines += [
        f"every tenth line a wall ({dn['size_bytes'] / 2**20:.0f} MiB, {dn['wall_lines']:,} wall"
        f" lines): triage {dn['seconds']:.2f} s, grep {dn['grep_seconds']:.2f} s,"
        f" ratio {dn['ratio_to_grep']:.2f}, {dn['rss_mb']:.0f} MB,"
        f" counts {'right' if dn['counts_right'] else 'WRONG'}",
        f"every planted hit, in-process, default engine: {ep['hits_planted']} planted,"
        f" {'all found at their lines, nothing else' if not ep['problems'] else ep['problems']}",
        "",
        f"startup (KB load + compile, empty input): {r['startup_seconds']:.2f} s",
        f"peak RSS, default engine: {rc['small_rss_mb']:.0f} MB on {rc['small_size_bytes'] / 2**20:.0f} MiB,"
        f" {rc['big_rss_mb']:.0f} MB on {r['size_bytes'] / 2**20:.0f} MiB",
    ]
    if "rg_seconds" in dn:
        lines.append(
            f"  the same with rg: {dn['rg_seconds']:.2f} s (triage/rg {dn['ratio_to_rg']:.2f})"
        )
    sf = r.get("small_file")
    if sf:
        lines += [
            "",
            f"small file: {sf['size_bytes'] / 2**20:.2f} MiB, {sf['lines']:,} lines, {sf['plants']} plants;"
            f" spark-tui correct: {'yes' if sf['correct'] else 'NO'}",
            "| tool | seconds (median) | runs | peak RSS | bytes read |",
            "|---|---:|---|---:|---:|",
        ]
        for name, v in sf["tools"].items():
            runs = " / ".join(f"{x:.3f}" for x in v["runs"])
            extra = f" ({v['count']} lines)" if "count" in v else ""
            lines.append(
                f"| {name}{extra} | {v['seconds']:.3f} | {runs} | {v['rss_mb']:.0f} MB"
                f" | {_mb(v['intake_bytes'])} |"
            )
        lines.append(f"spark-tui with an empty cache: {sf['cold_cache_seconds']:.3f} s")
    kl = r.get("kb_list")
    if kl:
        lines.append(
            f"kb list: {kl['seconds']:.3f} s median ({' / '.join(f'{x:.3f}' for x in kl['runs'])}),"
            f" {kl['cold_cache_seconds']:.3f} s with an empty cache; {kl['walls_listed']} lines,"
            f" {_mb(kl['intake_bytes'])} read"
        )
    lines.append(f"load average at the end: {r.get('load_average_1m_end')}")
    for e, v in r["engines"].items():
        for p in v["problems"]:
            lines.append(f"  {e}: {p}")
    return "\n".join(lines)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


if __name__ == "__main__":
    sys.exit(main())
