"""What pasting does to log text, undone before matching.

Logs reach the knowledge base as users paste them into trackers and terminals:
  * colour codes whose ESC byte was lost (`[2m[33m(raylet)[0m`) or shown in caret
    notation (`^[[0;36m`): `clean_line` removes them with the real ones;
  * lines re-wrapped at a fixed width, mid-word or at a space: a line that does not
    start a new record (no time stamp, level, process prefix, traceback frame)
    continues the line before it, and `joins` gives the texts to match a
    signature against when its words run over such a line break.

Nothing here knows a wall: the matcher asks for a join only where a line holds
half of a signature's required literal (`fragments`), so healthy lines cost nothing.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from spark_tui.untrusted import ESCAPES_BYTES

# ESC-led sequences (CSI, OSC, two-byte), their caret-notation form, and SGR/erase
# codes whose ESC was stripped by the paste: "[0m", "[1;36m", "[0;0m", "[K"
_COLOUR = re.compile(
    ESCAPES_BYTES.pattern + rb"|\^\[\[[0-9;?]*[@-~]"
    rb"|\[[0-9]{1,3}(?:;[0-9]{1,3})*m"
)

MIN_WRAP_COLS = 40  # a line shorter than this was not wrapped by a paste
WRAP_BACK = 3  # lines before a candidate line that a join may take in
WRAP_FWD = 3  # lines after it
MIN_FRAGMENT = 9  # a piece of a literal at a line's edge shorter than this is too common

# What starts a new record rather than continuing a wrapped one: blank or indented
# lines (traceback source lines), brackets ([time], [rank0]:), process prefixes
# ((raylet), (EngineCore pid=1)), dates and times, levels, glog heads, frames,
# exception lines, and the lines Python puts between chained exceptions.
_RECORD = re.compile(
    rb"\s*$|\s\s|\t|[\[<{|#>$]"
    rb"|\((?:raylet|gcs_server|autoscaler|monitor|dashboard|pid=|[^()\s]+ (?:pid|ip|rank)=)"
    rb"|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\d\d-\d\d \d\d:|[A-Z][a-z]{2} [ \d]\d \d\d:"
    rb"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|NOTICE)\b"
    rb"|[IWEF]\d{4} \d\d:"
    rb"|Traceback \(most recent call last\)|File \""
    rb"|During handling of the above exception|The above exception was the direct cause"
)
# an exception line ("ValueError: …"); after a long line cut inside a word ("…torch.distributed.Di"
# then "stStoreError: …"), the same shape is the rest of that word, which a terminal wrapped
# (a real exception line starts with a capital or a dotted module path: "ValueError", "torch.…")
_WORD_REST = re.compile(rb"[a-z][A-Za-z0-9_]*(?:Error|Exception|Warning|Interrupt|Exit)(?::|\()")
_EXCEPTION = re.compile(rb"[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)(?::|\(|\s*$)")
# a prefix repeated on every line of one record: a logger's "(raylet) ", "[rank0]: ",
# `docker compose logs`' "vllm-1  | ", `kubectl logs --prefix`'s "[pod/NAME/CONTAINER] ",
# or a markdown quote's "> "
_PREFIX_RX = (
    rb"(?:\([^()\n]{1,80}\) ?|\[[^\[\]\n]{1,40}\]: ?|[\w.-]{1,60} +\| "
    rb"|\[pod/[^\[\]\n]{1,120}\] |(?:> ?)+)"
)
_PREFIX = re.compile(_PREFIX_RX)


def clean_line(line: bytes) -> bytes:
    """A line without colour codes (real, caret-notation or ESC-less) and without CR."""
    if b"[" in line or b"\x1b" in line:  # every form above holds one of these
        line = _COLOUR.sub(b"", line)
    return line.rstrip(b"\r")


def continues(prev: bytes, line: bytes, tail: bool = False) -> bytes | None:
    """If `line` (clean) continues `prev` (clean) as a paste re-wrapped it, the part
    of `line` that continues it (a prefix repeated from `prev` removed); else None.
    `tail`: `prev` continues a line itself (a short tail that a second wrap, by hand
    then by a terminal, may still continue)."""
    if prev.endswith(b"  ") or (len(prev) < MIN_WRAP_COLS and not tail):  # it ended
        return None
    m = _PREFIX.match(line)
    if m and prev.startswith(m.group(0)):  # the same logger prefix on both lines
        line = line[m.end() :]
    if _RECORD.match(line):
        return None
    if _EXCEPTION.match(line) and not (
        len(prev) >= MIN_WRAP_COLS and prev[-1:].isalnum() and _WORD_REST.match(line)
    ):
        return None
    return line


def may_wrap(prev: bytes | None, line: bytes, nxt: bytes | None) -> bool:
    """A quick look at raw neighbours: could `line` be part of a wrapped run?
    (`nxt` None: not known yet.) Only a no here is certain; a yes is checked on
    clean lines."""
    if prev is not None and may_continue(prev, line):
        return True
    return nxt is None or may_continue(line, nxt)


def may_continue(prev: bytes, line: bytes) -> bool:
    """A quick look at two raw lines: could `line` continue `prev` (a no is certain)?"""
    return continues(_rough(prev), _rough(line), tail=True) is not None


def _rough(line: bytes) -> bytes:
    """Clean only where colour codes change how the line starts or how long it is."""
    if b"\x1b" in line or line.startswith((b"[", b"^[")) or line.endswith(b"m"):
        return clean_line(line)
    return line.rstrip(b"\r")


def joins(parts: Sequence[bytes]) -> list[tuple[bytes, list[tuple[int, int]]]]:
    """The texts a run of wrapped lines stood for, with each line's span in it:
    as a terminal wraps (the characters run on), as a reflow wraps (at a space,
    which the wrap dropped), and both at once (a line as long as the longest ran
    on; a shorter one, wrapped by hand or a second time, ended at a space)."""
    out: list[tuple[bytes, list[tuple[int, int]]]] = []
    widest = max(len(p) for p in parts)
    for mode in ("hard", "soft", "mixed"):
        text = bytearray()
        spans: list[tuple[int, int]] = []
        for i, part in enumerate(parts):
            if i:
                hard = mode == "hard" or (mode == "mixed" and len(parts[i - 1]) == widest)
                if not hard:
                    while text.endswith(b" "):
                        text.pop()
                    part = part.lstrip(b" ")
                    text += b" "
            spans.append((len(text), len(text) + len(part)))
            text += part
        if all(bytes(text) != t for t, _ in out):
            out.append((bytes(text), spans))
    return out


def crosses(span: tuple[int, int], spans: Sequence[tuple[int, int]]) -> int | None:
    """The index of the first line a match overlaps, when it overlaps two or more
    (a match inside one line was found on that line alone); else None."""
    start, end = span
    touched = [i for i, (a, b) in enumerate(spans) if start < b and end > a]
    return touched[0] if len(touched) >= 2 else None


SPLIT_LITERAL = 9  # a literal this long is looked for split by a wrap (shorter: whole only)
TAIL_LITERAL = 12  # that many bytes or more of a literal's second half: looked for as one
MIN_REST = 5  # a continuation starting with less of a literal is too common to look for
HEAD_AT = 10  # a literal split after this many bytes or more is found by its head (what ends
# the line), which a prefix or colour codes on the next line cannot hide
MIN_HEAD = 6  # a line's end is looked for from this many bytes of a literal on
EDGE_LITERAL = 14  # a literal this long is looked for at a line's edge (a break before/after it)
EDGE_SLACK = 16  # how far from its first or last literal a pattern's break is looked for
STRONG_LITERAL = 9  # a literal this long is rare in healthy lines, whole or split
_END = rb"[ \r]*\n"  # padding may follow a break
_START = rb"^ ?"  # a space may lead a continuation
# where the words of a continuation may start: at the line's start, or after what a
# paste put before them (a colour code without its ESC, "[0m"; a logger's "(raylet) ";
# the "vllm-1  | " of `docker compose logs`; kubectl's "[pod/…] "; a markdown quote's "> ");
# a space may come first
_LEAD = rb"(?:^|\[[0-9;]{0,12}m|\| |\) |\] |> ) ?"
# between the two literals of a pair: the rest of a line, up to WRAP_FWD - 1 lines, a line's start
PAIR_GAP = rb"[^\n]*\n(?:[^\n]*\n){0,%d}[^\n]*" % (WRAP_FWD - 1)


def pair_end(candidate: bytes) -> bytes | None:
    """Of a pair candidate (two literals on neighbouring lines), the regex of its
    second literal (found on the line where the pair ends); None for other candidates."""
    _, gap, tail = candidate.partition(PAIR_GAP)
    return tail if gap else None


def _prefix_of(text: bytes, escape) -> bytes:
    """A regex for any prefix of `text`, the empty one too: a(?:b(?:c)?)?"""
    out = b""
    for i in range(len(text) - 1, -1, -1):
        out = b"(?:" + escape(text[i : i + 1]) + out + b")?"
    return out


def wrap_candidates(
    literals: Sequence[frozenset[bytes]], starts: bool, ends: bool, escape
) -> list[bytes]:
    """Regexes (for the candidate engines, over whole chunks) that find where a
    paste may have wrapped a match of a pattern whose required literals are
    `literals` (in order; one of each set occurs). Each holds a rare literal, so
    the engines stay fast and healthy lines are almost never candidates; the
    matcher then checks the lines around for real.

    * a line ends inside a literal: its first half (or more) ends the line;
    * the next line starts inside it: it starts with what is left of it;
    * the break fell between two literals: they are on neighbouring lines;
    * the break fell before the first or after the last: it starts or ends a line.
    `starts`/`ends`: nothing of the pattern comes before the first literal / after
    the last. `escape` turns bytes into a regex that matches them. (Every engine
    scans for these exact regexes, so all find the same lines.)"""
    # a reflow drops the space it breaks at: literals are looked for without their edge spaces
    literals = [frozenset(x.strip(b" ") for x in ls) for ls in literals]
    strong = [ls for ls in literals if min(map(len, ls)) >= STRONG_LITERAL]
    if not strong:
        weak = [ls for ls in literals if min(map(len, ls)) >= MIN_FRAGMENT]
        strong = [max(weak, key=lambda ls: min(map(len, ls)))] if weak else []
    out: list[bytes] = []

    def alt(items) -> bytes:
        return b"(?:" + b"|".join(escape(x) for x in sorted(set(items))) + b")"

    for ls in strong:  # a line break inside one of them
        for lit in sorted(ls):
            n = len(lit)
            if n < SPLIT_LITERAL:
                continue
            if n - (n + 1) // 2 >= TAIL_LITERAL:  # long: both halves are rare
                half = (n + 1) // 2
                # after k <= half bytes: the next line starts with lit[k:] (a space may
                # come first), written as a short alternation before one long literal
                # (the engines look for that literal, then check the line's start)
                heads = b"|".join(escape(lit[k:half]) for k in range(1, half))
                out.append(_LEAD + b"(?:" + heads + b")?" + escape(lit[half:]))
            else:  # short: the next line starts with what is left (a space may come first)
                half = min(max((n + 1) // 2, MIN_HEAD), HEAD_AT)
                out.append(_START + alt({lit[k:] for k in range(1, half + 1) if n - k >= MIN_REST}))
            # after k >= half bytes: the line ends with lit[:k] (padding may follow)
            out.append(escape(lit[:half]) + _prefix_of(lit[half : n - 1], escape) + _END)
    for a, b in itertools.pairwise(strong):  # the break fell between two of them
        pair = alt(a) + PAIR_GAP + alt(b)
        out.append(pair)
    starts = starts and bool(strong) and strong[0] == literals[0]
    ends = ends and bool(strong) and strong[-1] == literals[-1]
    if strong:  # a short literal at a line's edge is too common to look for
        starts = starts or min(map(len, strong[0])) < EDGE_LITERAL
        ends = ends or min(map(len, strong[-1])) < EDGE_LITERAL
    if strong and not starts:  # ... or just before the first
        out.append(_START + alt(strong[0]))
    if strong and not ends:  # ... or shortly after the last
        out.append(alt(strong[-1]) + rb"[^\n]{0,%d}" % EDGE_SLACK + _END)
    return out
