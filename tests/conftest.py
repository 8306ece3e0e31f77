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
# the xdist group of the real tier (tests/real/conftest.py puts its tests in it, first)
REAL_GROUP = "real"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under `--dist loadgroup` (pyproject's addopts): the real tier, the longest chain of
    tests, is collected first, so it is the first unit handed out, and the worker that runs it
    takes nothing else until it ends (a test queued behind an engine's minutes would finish
    last); every other test goes to whichever worker is free, one or two at a time."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class RealTierAlone(LoadGroupScheduling):
        def _reschedule(self, node: object) -> None:
            real = self.assigned_work.get(node, {}).get(REAL_GROUP)
            if real and not all(real.values()):
                return
            super()._reschedule(node)

    return RealTierAlone(config, log)


@pytest.fixture(autouse=True)
def _private_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    # the cache too: its entries are sealed with a key kept in the state directory, so a
    # test writing the machine's own cache with its private key spoilt every entry of it
    # for the real user (each start parsed every YAML file again)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))


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
