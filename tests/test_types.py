"""mypy is a gate: no error on spark_tui (configured in pyproject.toml), and every
`type: ignore` names its error code and says why on the same line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import ROOT

IGNORE = re.compile(r"#\s*type:\s*ignore(?P<rest>.*)$")
WITH_REASON = re.compile(r"^\[[a-z-]+(, *[a-z-]+)*\]\s+#\s*\S")


@pytest.mark.slow
def test_mypy_finds_no_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT, timeout=280
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


def ignores_without_reason(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if (m := IGNORE.search(line)) and not WITH_REASON.match(m.group("rest"))
    ]


def test_every_type_ignore_names_its_code_and_a_reason() -> None:
    bad = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "spark_tui").rglob("*.py"))
        if (found := ignores_without_reason(path.read_text(encoding="utf-8")))
    }
    assert not bad, bad


def test_the_ignore_check_tells_them_apart() -> None:
    assert ignores_without_reason("x = f()  # type: ignore")
    assert ignores_without_reason("x = f()  # type: ignore[arg-type]")
    assert not ignores_without_reason("x = f()  # type: ignore[arg-type]  # checked above")
