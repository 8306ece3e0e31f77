"""No signature can make a line slow: every confirmation runs on RE2 (linear in the line),
so a user's wall with nested quantifiers loads and the input that takes a backtracking
engine exponential time is matched at once, with the right result, in every engine and
in the live path. (A backtracking `re` took 62 s on 28 `a`s, doubling with each one.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spark_tui.kb.engines import installed_engines
from spark_tui.kb.loader import load_dir
from spark_tui.kb.matcher import Matcher

NESTED = """\
id: nested-quantifiers
title: A user's wall whose regex backtracks exponentially in a backtracking engine
severity: error
kind: log
engines: [any]
summary: A test wall.
signatures:
  - log: '(a+)+b'
  - log: '(x|x)*y'
    then: '(\\w+\\s?)*z'
fixes:
  - id: nothing
    title: Nothing
    risk: safe
    actions:
      - type: run
        command: "true"
references: [local]
"""
CATASTROPHIC = "a" * 28 + "c ab"  # `(a+)+b` matches "ab" at its end


def engines() -> list[str]:
    return installed_engines()


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    d = tmp_path / "knowledge"
    d.mkdir()
    (d / "nested-quantifiers.yaml").write_text(NESTED)
    return d


def test_lint_accepts_nested_quantifiers(kb_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui", "kb", "lint", str(kb_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("engine", engines())
def test_catastrophic_line_is_matched_in_bulk(kb_dir: Path, engine: str) -> None:
    m = Matcher(load_dir(kb_dir).values(), engine=engine)
    stream = m.stream()
    data = ("x" * 40 + "\n" + CATASTROPHIC + "\n" + "x" * 29 + "y\n").encode()
    hits = stream.feed_chunk("f", data) + stream.finish("f")
    assert [(h.wall.id, h.line_no) for h in hits] == [("nested-quantifiers", 2)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("engine", engines())
def test_catastrophic_lines_in_the_live_path(kb_dir: Path, engine: str) -> None:
    m = Matcher(load_dir(kb_dir).values(), engine=engine)
    lines = [CATASTROPHIC, "a" * 5000 + "c", "x" * 3000 + "y", "w " * 2000 + "!", "wz"]
    hits = m.scan_lines("live", lines)
    # line 1: (a+)+b; line 3 arms the two-line signature, line 5 completes it
    assert [(h.wall.id, h.line_no) for h in hits] == [
        ("nested-quantifiers", 1),
        ("nested-quantifiers", 5),
    ]


@pytest.mark.timeout(120)
def test_triage_cli_on_the_catastrophic_input(kb_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "paste.log"
    log.write_text(CATASTROPHIC + "\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_tui",
            "triage",
            "--json",
            "--knowledge",
            str(kb_dir),
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"wall": "nested-quantifiers"' in proc.stdout and '"line": 1' in proc.stdout
