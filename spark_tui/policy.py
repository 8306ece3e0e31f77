"""What this process may change: `--read-only` refuses every change at the engine's entry
points (a fix, a launch, a stop, an undo, a bring-up step, a trusted host key, a written
cluster.yaml), whichever front end asks. The front ends only show the refusal.

The flag is process-wide and only ever tightens: once read-only, always read-only.
"""

from __future__ import annotations

import threading

from spark_tui.errors import SparkTuiError


class ReadOnlyRefused(SparkTuiError):
    """--read-only: the change was refused; nothing ran."""


_lock = threading.Lock()
_read_only = False


def set_read_only(flag: bool = True) -> None:
    """Make this process read-only (a False never loosens it)."""
    global _read_only
    with _lock:
        _read_only = _read_only or bool(flag)


def read_only() -> bool:
    return _read_only


def refuse_if_read_only(what: str) -> None:
    """Raise ReadOnlyRefused naming the change when the process is read-only."""
    if _read_only:
        raise ReadOnlyRefused(
            f"read-only: refused to {what} (started with --read-only); nothing ran"
        )


def _reset_for_tests() -> None:
    """Tests run many sessions in one process: each starts writable."""
    global _read_only
    with _lock:
        _read_only = False
