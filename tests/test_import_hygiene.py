"""The domain core and the headless CLI never import Textual (harlequin's test, and import-linter)."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys

import pytest

import spark_tui

from .conftest import ROOT

HEADLESS = ("kb", "nodes", "recipes", "remedy", "sim", "cli")


def headless_modules() -> list[str]:
    mods = ["spark_tui.entry", "spark_tui.shell", "spark_tui.facts", "spark_tui.paths"]
    for pkg in HEADLESS:
        mods.append(f"spark_tui.{pkg}")
        path = [str(ROOT / "spark_tui" / pkg)]
        mods += [f"spark_tui.{pkg}.{m.name}" for m in pkgutil.iter_modules(path)]
    return mods


@pytest.mark.parametrize("module", headless_modules())
def test_module_does_not_import_textual(module: str) -> None:
    code = f"import sys, {module}; bad = [m for m in sys.modules if m == 'textual' or m.startswith('spark_tui.tui')]; print(bad); sys.exit(1 if bad else 0)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_linter_contract() -> None:
    exe = shutil.which("lint-imports")
    assert exe, "import-linter is in the test extra"
    proc = subprocess.run([exe], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_version() -> None:
    assert spark_tui.__version__
