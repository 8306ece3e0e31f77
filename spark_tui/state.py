"""Where a session keeps what it did: the journal, recipe revisions, the lock that lets one
change run at a time, the auto-relaunch guard, bring-up progress, evidence and reports.

A real cluster's state lives under ~/.local/state/spark-tui (or $XDG_STATE_HOME); a
simulated cluster's in a scratch directory of its own, discarded when the session ends
(unless kept), so a demo never changes what a real session finds.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spark_tui import paths


@dataclass(frozen=True)
class StateDir:
    """The files of one session's state, under `root`."""

    root: Path
    simulated: bool = False
    scratch: bool = False  # a temporary directory, removed by discard()

    @classmethod
    def real(cls) -> StateDir:
        return cls(paths.state_dir())

    @classmethod
    def for_simulation(cls, label: str, keep: bool = False) -> StateDir:
        """A simulated cluster's own state: a scratch directory, or (kept) one per label under
        the real state directory's demos/ (never mixed with the real journal or revisions)."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label) or "demo"
        if keep:
            root = paths.state_dir() / "demos" / safe
            return cls(root, simulated=True)
        root = Path(tempfile.mkdtemp(prefix=f"spark-tui-{safe}-"))
        return cls(root, simulated=True, scratch=True)

    @property
    def journal_path(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def revisions_dir(self) -> Path:
        return self.root / "recipes"

    @property
    def lock_path(self) -> Path:
        return self.root / "fix.lock"

    @property
    def auto_relaunch_path(self) -> Path:
        return self.root / "auto-relaunch.json"

    @property
    def evidence_dir(self) -> Path:
        return self.root / "evidence"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def active_recipe_path(self) -> Path:
        return self.root / "active-recipe"

    def bringup_path(self, recipe_id: str) -> Path:
        return self.root / "bringup" / f"{recipe_id}.json"

    def discard(self) -> None:
        """Remove a scratch directory (a kept or real one stays)."""
        if self.scratch:
            shutil.rmtree(self.root, ignore_errors=True)
