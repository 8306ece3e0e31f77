"""A diagnosis in full: summary, the cause the readings chose, evidence, fixes with commands."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from spark_tui.driver import changes_something, fix_for
from spark_tui.kb.diagnosis import DiagnosisSnapshot
from spark_tui.kb.schema import CONFIDENCE_WORDS, SUSPECTED, Fix
from spark_tui.redact import redact
from spark_tui.tui.formatting import clock_hms

RISK_STYLE = {"safe": "green", "disruptive": "yellow", "destructive": "bold red"}
FixRenderer = Callable[[DiagnosisSnapshot, Fix], list[str]]


class DiagnosisDetail(VerticalScroll):
    """Shows one diagnosis; `fix_index` is the fix `a` would apply (marked ▶)."""

    diagnosis: reactive[DiagnosisSnapshot | None] = reactive(None, always_update=True)
    fix_index: reactive[int] = reactive(0)
    compact: reactive[bool] = reactive(False)  # little room: only the marked fix's commands
    problem: reactive[str | None] = reactive(None)  # what is wrong with the cluster's recipe

    def __init__(
        self,
        render_fix: FixRenderer,
        *,
        changes: Callable[[DiagnosisSnapshot, Fix], bool] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._render_fix = render_fix
        self._changes = changes  # the driver's judgement (else: from the rendered lines)
        self._shown: tuple[str, str, int, str, str] | None = None
        self.can_focus = True

    def compose(self):
        yield Static(self.render_text(), id="detail-body")

    def fixes(self) -> list[Fix]:
        """The diagnosis's fixes in order of preference (the chosen cause's first); one that
        would change nothing here (the recipe already has it) last."""
        d = self.diagnosis
        if d is None:
            return []
        by_id = {f.id: f for f in d.wall.fixes}
        fixes = [by_id[i] for i in d.fixes() if i in by_id]
        first = fix_for(d, self.changes_something)  # the driver's choice: offered first
        return sorted(fixes, key=lambda f: (f is not first, not self.changes_something(f)))

    def changes_something(self, fix: Fix) -> bool:
        """False when the fix's plan here would leave everything as it is."""
        d = self.diagnosis
        if d is not None and self._changes is not None:
            return self._changes(d, fix)
        return d is None or changes_something(fix, self._render_fix(d, fix))

    def selected_fix(self) -> Fix | None:
        fixes = self.fixes()
        return fixes[self.fix_index % len(fixes)] if fixes else None

    def next_fix(self) -> None:
        if self.fixes():
            self.fix_index = (self.fix_index + 1) % len(self.fixes())

    def watch_diagnosis(self, old: DiagnosisSnapshot | None, new: DiagnosisSnapshot | None) -> None:
        if old is None or new is None or old.wall.id != new.wall.id:
            self.fix_index = 0
        # a snapshot per event: redraw when what it shows changed, not for every copy
        shown = (
            (new.wall.id, str(new.source), len(new.evidence_lines), new.state, new.confidence)
            if new is not None
            else None
        )
        if shown == self._shown:
            return  # seen again with no new evidence: the table's count says it, no redraw
        self._shown = shown
        self._redraw()

    def watch_fix_index(self) -> None:
        self._redraw()

    def watch_problem(self) -> None:
        self._redraw()

    def watch_compact(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        self.query_one("#detail-body", Static).update(self.render_text())

    def render_text(self) -> Text:
        """Title, where and when; the cause the readings chose; the fixes with their exact
        commands (the marked one first in view); the evidence; then what the wall is."""
        d = self.diagnosis
        if d is None and self.problem:
            out = Text("The recipe cannot be used\n", style="bold red")
            out.append(f"{self.problem}\n")
            out.append(
                "spark-tui watches the nodes without one. Fix cluster.yaml's `recipe:` (see "
                "spark-tui recipes list, spark-tui recipes lint), then start it again.",
                style="dim",
            )
            return out
        if d is None:
            return Text("No wall selected: the walls seen are listed above.", style="dim")
        wall = d.wall
        out = Text()
        out.append(f"{wall.title}\n", style="bold" if d.active else "bold dim")
        where = d.node or d.source.subject
        words = CONFIDENCE_WORDS.get(d.confidence, d.confidence)
        out.append(f"{wall.id} · {d.severity} · {words} · {where}")
        out.append(
            "\n" if self.compact else f" · first seen {clock_hms(d.first_seen)}\n", style="dim"
        )
        for conds in d.confirm_with()[:2] if d.confidence == SUSPECTED else ():
            out.append(f"  would be confirmed by: {conds}\n", style="dim")
        if not d.active:
            out.append(f"Resolved at {clock_hms(d.resolved_at)}: {d.resolution}\n", style="green")
        cause = next((c for c in wall.causes if c.id == d.cause), None)
        if cause is not None:
            out.append("Cause: " if self.compact else "Cause (from the readings): ", style="bold")
            out.append(f"{cause.title}\n")
        fixes = self.fixes()
        if fixes and not self.compact:
            out.append("Fixes ", style="bold")
            out.append("(a applies the marked one, ] marks the next)\n", style="dim")
        for i, fix in enumerate(fixes):
            marked = i == self.fix_index % len(fixes)
            out.append(
                f"{'▶' if marked else ' '} {i + 1}. {fix.title} ", style="bold" if marked else ""
            )
            out.append(f"[{fix.risk}{', root' if fix.root else ''}]", style=RISK_STYLE[fix.risk])
            if not self.changes_something(fix):
                out.append(" — nothing to change: the recipe already has it", style="dim")
            out.append("\n")
            if marked or not self.compact:
                for line in self._render_fix(d, fix):
                    style = "dim" if line.startswith("#") else "cyan"
                    out.append(f"     {redact(line)}\n", style=style)
        if d.evidence_lines:
            out.append("Evidence\n", style="bold")
            for line_no, text in d.evidence_lines[-5:]:
                prefix = f"  {line_no:>6}: " if line_no else "  "
                out.append(prefix, style="dim")
                out.append(redact(text[:300]) + "\n")
        out.append("What it is\n", style="bold")
        out.append(" ".join(wall.summary.split()) + "\n")
        if wall.explain:
            out.append(" ".join(wall.explain.split()) + "\n", style="italic")
        return out
