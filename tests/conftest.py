"""Shared fixtures. Every test runs with its own empty ~/.config and ~/.local/state."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(autouse=True)
def _private_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))


@pytest.fixture(autouse=True)
def _writable_policy() -> Iterator[None]:
    """--read-only is process-wide: each test starts (and leaves the next one) writable."""
    from spark_tui import policy

    policy._reset_for_tests()
    yield
    policy._reset_for_tests()


def require_tool(name: str) -> str:
    """A real external tool the test needs; under CI it must exist (never skip there)."""
    path = shutil.which(name) or (
        f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None
    )
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is missing under CI: .ci/run must install it")
        pytest.skip(f"{name} not installed")
    return path
