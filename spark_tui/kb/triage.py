"""Offline triage: log files read through a matcher into diagnoses. `triage` and
`report LOG…` both use it."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from spark_tui.errors import InputError
from spark_tui.kb.diagnosis import Diagnosis, DiagnosisBook
from spark_tui.kb.matcher import Matcher, scan_stream

STDIN = "-"


def source_name(name: str) -> str:
    """How a file is named in the diagnoses ('-' is standard input)."""
    return "<stdin>" if name == STDIN else name


def triage_files(
    matcher: Matcher, names: Iterable[str], facts: Mapping[str, object] | None = None
) -> list[Diagnosis]:
    """Diagnoses of the files (one stream: a wall spanning two files' seams is not one), in
    the order of their first evidence; a file that cannot be read is an InputError. `facts`:
    the recipe's, when the caller knows which recipe the logs come from (a signature's
    `only_when`); without them every hit counts."""
    book = DiagnosisBook()
    stream = matcher.stream()
    for name in names:
        try:
            fh = sys.stdin.buffer if name == STDIN else open(name, "rb")  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", name) from None
        try:
            for hit in scan_stream(matcher, source_name(name), fh, stream):
                if not hit.ruled_out(facts):
                    book.add_hit(hit)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", name) from None
        finally:
            if fh is not sys.stdin.buffer:
                fh.close()
    return book.by_first_line()
