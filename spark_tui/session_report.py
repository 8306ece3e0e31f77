"""The Markdown incident report of a session and where it is written: a service of the
session (its composition root)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from spark_tui.safefile import read_state_text, write_atomic

if TYPE_CHECKING:
    from collections.abc import Sequence

    from spark_tui.kb.diagnosis import DiagnosisView
    from spark_tui.session import Session


class Reports:
    def __init__(self, session: Session) -> None:
        self.session = session

    def report(
        self,
        diagnoses: Sequence[DiagnosisView] | None = None,
        versions: dict[str, dict[str, str]] | None = None,
    ) -> str:
        """The Markdown incident report of this session (journal and revisions included)."""
        from spark_tui.remedy.report import ReportData, build_report

        recipe = self.session.recipe()
        data = ReportData(
            cluster=self.session.config,
            recipe=recipe,
            revisions=self.session.revisions.revisions(recipe.id) if recipe else [],
            versions=versions or {},
            diagnoses=diagnoses if diagnoses is not None else self.session.diagnoses(True),
            journal=self.session.journal.entries(),
            journal_skipped=list(self.session.journal.skipped),
        )
        ev = self.session.state.evidence_dir
        if ev.is_dir():
            for f in sorted(ev.glob("*/*.txt"))[-20:]:
                with contextlib.suppress(OSError):  # a planted FIFO or symlink: left out
                    data.evidence[f"{f.parent.name}/{f.name}"] = read_state_text(f)
        return build_report(data)

    def export_report(self, diagnoses: Sequence[DiagnosisView] | None = None) -> Path:
        """Write the report where it outlives the session (a simulation's state does not:
        its reports go to the temporary directory); its path."""
        import tempfile

        reports = (
            Path(tempfile.gettempdir()) / "spark-tui-demo-reports"
            if self.session.state.scratch
            else self.session.state.reports_dir
        )
        out = reports / time.strftime("incident-%Y%m%d-%H%M%S.md")
        out.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(out, self.report(diagnoses))  # /tmp is shared: nothing planted followed
        return out
