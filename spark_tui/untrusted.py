"""The trust boundary for what a node says: text from a node is data, never terminal input.

Everything read from a node — log lines, a command's output, process lists, file and
container names — goes through `clean` where it enters (the transports' CommandResult,
the monitor's log lines), so no front end (the TUI, the headless commands, `--json`, a
report, the journal) ever hands a terminal an escape sequence a node chose:

  * ESC-led sequences are removed whole: CSI (`ESC [ … final`, colours, cursor moves,
    screen clears), OSC (`ESC ] … BEL|ST`: window titles, OSC 52 clipboard writes,
    hyperlinks), DCS/SOS/PM/APC strings (`ESC P|X|^|_ … ST`), and two-byte escapes;
    a lone ESC goes too;
  * their 8-bit forms (U+0080–U+009F: CSI as U+009B, OSC as U+009D, …) and every other
    C0 control but TAB (and LF where `keep_newlines`), and DEL;
  * bidirectional overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E,
    U+200F, U+061C: the "Trojan Source" set), which make a line read differently from
    what it holds.

`clean_line` also caps a line's length, saying how much was cut. `escaped` is the form for
a line of a file spark-tui writes (a comment naming a path, a command line): the same
characters shown as their escapes instead of dropped, so the line can neither end early
(a line break in a directory's name starting YAML of its own) nor act on a terminal.
"""

from __future__ import annotations

import re

LINE_CHARS = 16_384  # a longer log line is cut here (the rest counted, never shown)

# ESC-led sequences, the 8-bit forms included: CSI; OSC/DCS/SOS/PM/APC strings (ended by
# BEL or ST, or running to the end of the text when unterminated); two-byte escapes.
_SEQ = (
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
_BAD = re.compile(f"{_SEQ}|[{_CONTROLS}]")
_BAD_LINE = re.compile(f"{_SEQ}|[\\n{_CONTROLS}]")
_ANY = re.compile(f"[\\x1b\\n{_CONTROLS}]")

# the same sequences in bytes, for the matcher (which reads raw log bytes)
ESCAPES_BYTES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]?"
)


def clean(text: str, *, keep_newlines: bool = True) -> str:
    """`text` without escape sequences, controls (TAB kept; LF kept when `keep_newlines`,
    else each line break becomes a space) and bidirectional overrides. CR is dropped."""
    if not _ANY.search(text):  # the common case: nothing to do
        return text
    if keep_newlines:
        return _BAD.sub("", text)
    return _BAD_LINE.sub(lambda m: " " if m.group() == "\n" else "", text)


def clean_line(text: str, limit: int = LINE_CHARS) -> str:
    """One line for display: cleaned (a line break becomes a space) and at most `limit`
    characters, what was cut counted."""
    dropped = max(0, len(text) - limit * 4)  # never cleaned: it is cut anyway
    text = clean(text[: limit * 4] if dropped else text, keep_newlines=False)
    return cap(text, limit, dropped)


def cap(text: str, limit: int, dropped: int = 0) -> str:
    """`text` cut to `limit` characters, ending in a note of how many were cut
    (`dropped`: characters already cut before it came here)."""
    if len(text) <= limit and not dropped:
        return text
    kept = text[:limit]
    return f"{kept}… [{len(text) - len(kept) + dropped} more characters]"


def has_controls(text: str) -> bool:
    """True when `text` holds anything `clean` removes (tests and checks)."""
    return bool(_BAD.search(text))


def escaped(text: str) -> str:
    """`text` on one line, every control character, line break and bidirectional mark
    written as its escape (`\\n`, `\\x1b`, `\\u202e`): for a line of a file we write."""
    if text.isprintable():  # the common case: nothing to do
        return text
    return "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )
