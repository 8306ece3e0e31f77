"""Diagnoses: hits of the matcher (and of the reading rules) gathered per wall per source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui.kb.conditions import Condition
from spark_tui.kb.schema import (
    CONFIDENCE_RANK,
    CONFIRMED,
    FROM_LOG,
    SEVERITY_RANK,
    SUSPECTED,
    Wall,
    severity_for,
)
from spark_tui.kb.source import LOG, Source

if TYPE_CHECKING:
    from spark_tui.kb.matcher import Hit


def confirming_conditions(
    wall: Wall, confirm: tuple[Condition, ...] = ()
) -> list[tuple[Condition, ...]]:
    """The sets of readings that confirm a log diagnosis of this wall: the
    signature's own `confirm`, else each of the wall's node or cluster rules."""
    if confirm:
        return [confirm]
    return [r.when for r in wall.rules if r.scope in ("node", "cluster")]


def source_kind(source: object) -> str:
    """What a diagnosis was seen in: "readings" (a node's), "recipe" (its checks) or "log"
    (a typed Source's kind; a plain text source read by its form)."""
    kind = getattr(source, "kind", None)
    if isinstance(kind, str):
        return kind
    text = str(source)
    if text.endswith(":readings"):
        return "readings"
    return "recipe" if text.startswith("recipe:") else "log"


class DiagnosisView:
    """What can be read of a diagnosis, live (`Diagnosis`, the book's record) or frozen
    (`DiagnosisSnapshot`, what events and front ends carry): one reading of both."""

    wall: Wall
    source: Source
    line: int
    evidence: str
    count: int
    node: str | None
    cause: str | None
    cause_node: str | None
    first_seen: float
    last_seen: float
    fix_ids: tuple[str, ...]
    resolved_at: float | None
    resolution: str
    fixed_at: float | None
    fixed_how: str
    attempt: int
    confidence: str
    confirm: Sequence[tuple[Condition, ...]]  # a list live, a tuple frozen
    evidence_lines: Sequence[tuple[int, str]]
    reason: str

    @property
    def active(self) -> bool:
        return self.resolved_at is None and self.fixed_at is None

    @property
    def state(self) -> str:
        """Its life: "active" → "fixed" (a verified fix, waiting for the relaunch that proves
        it) → "resolved"; seen again, "active" again."""
        if self.resolved_at is not None:
            return "resolved"
        return "fixed" if self.fixed_at is not None else "active"

    @property
    def severity(self) -> str:
        """The wall's severity; one step lower while the diagnosis is only suspected."""
        return severity_for(self.wall.severity, self.confidence)

    def confirm_with(self) -> list[str]:
        """The readings that would confirm it (empty once confirmed)."""
        if self.confidence == CONFIRMED:
            return []
        return [" and ".join(str(c) for c in conds) for conds in self.confirm]

    @property
    def target_node(self) -> str | None:
        """Where a fix aimed at 'the node where it was seen' should go: the node the
        cause holds on, else the node that showed the evidence."""
        return self.cause_node or self.node

    def fixes(self) -> tuple[str, ...]:
        return self.fix_ids or tuple(f.id for f in self.wall.fixes)

    def to_json(self) -> dict[str, Any]:
        """The object `triage --json` prints (docs/json.md); a resolved one says how."""
        out: dict[str, Any] = {
            "wall": self.wall.id,
            "title": self.wall.title,
            "severity": self.severity,
            "confidence": self.confidence,
            "confirm_with": self.confirm_with(),
            "file": str(self.source),
            "line": self.line,
            "count": self.count,
            "evidence": self.evidence,
            "fixes": list(self.fixes()),
        }
        if self.reason and self.confidence == SUSPECTED:
            out["reason"] = self.reason
        if self.state == "fixed":
            out["fixed"] = self.fixed_how
        elif self.state == "resolved":
            out["resolved"] = self.resolution
        return out


@dataclass
class Diagnosis(DiagnosisView):
    """One wall seen in one source (a log file, a node's stream, a node's readings): the
    book's live record. Only the book and the monitor's rules change it; everything else
    gets a `snapshot()`."""

    wall: Wall
    source: Source
    line: int  # first line of evidence (0 for reading rules)
    evidence: str
    count: int = 1
    node: str | None = None
    cause: str | None = None  # id of the cause chosen from the readings
    cause_node: str | None = None  # the node the cause holds on (may differ from `node`)
    first_seen: float = 0.0
    last_seen: float = 0.0
    evidence_lines: list[tuple[int, str]] = field(default_factory=list)
    fix_ids: tuple[str, ...] = ()
    # its life: active until its readings clear, its fix is verified, or a new launch
    # attempt makes its log lines history; seen again, it is active again
    resolved_at: float | None = None
    resolution: str = ""
    # a log wall whose fix was verified: fixed, waiting for the relaunch that proves it
    fixed_at: float | None = None
    fixed_how: str = ""
    attempt: int = 0  # the launch attempt it was seen in (0: before any launch)
    confidence: str = FROM_LOG  # confirmed (by readings) | from-log | suspected
    confirm: list[tuple[Condition, ...]] = field(default_factory=list)  # what would confirm it
    reason: str = ""  # why it is only suspected, when its signature alone does not say

    def resolve(self, now: float, how: str) -> bool:
        """Mark it resolved (once); False when it already was."""
        if self.resolved_at is not None:
            return False
        self.resolved_at, self.resolution = now, how
        return True

    def mark_fixed(self, now: float, how: str) -> bool:
        """Its fix was verified; the next launch proves it. False unless it was active."""
        if not self.active:
            return False
        self.fixed_at, self.fixed_how = now, how
        return True

    def check_confirmed(self, facts: dict[str, object] | None) -> bool:
        """Confirm it when readings agree; True if that changed it."""
        if self.confidence == CONFIRMED or not facts:
            return False
        if any(all(c.holds(facts) for c in conds) for conds in self.confirm):
            self.confidence = CONFIRMED
            return True
        return False

    def snapshot(self) -> DiagnosisSnapshot:
        """It as it is now, frozen: what events, front ends and JSON carry."""
        return DiagnosisSnapshot(
            wall=self.wall,
            source=self.source,
            line=self.line,
            evidence=self.evidence,
            count=self.count,
            node=self.node,
            cause=self.cause,
            cause_node=self.cause_node,
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            evidence_lines=tuple(self.evidence_lines),
            fix_ids=self.fix_ids,
            resolved_at=self.resolved_at,
            resolution=self.resolution,
            fixed_at=self.fixed_at,
            fixed_how=self.fixed_how,
            attempt=self.attempt,
            confidence=self.confidence,
            confirm=tuple(self.confirm),
            reason=self.reason,
        )


@dataclass(frozen=True)
class DiagnosisSnapshot(DiagnosisView):
    """A diagnosis as it was when reported: what events carry, front ends show and JSON
    prints (`to_json`). Frozen: the book's live record goes on changing, this does not."""

    wall: Wall
    source: Source
    line: int
    evidence: str
    count: int
    node: str | None
    cause: str | None
    cause_node: str | None
    first_seen: float
    last_seen: float
    evidence_lines: tuple[tuple[int, str], ...]
    fix_ids: tuple[str, ...]
    resolved_at: float | None
    resolution: str
    fixed_at: float | None
    fixed_how: str
    attempt: int
    confidence: str
    confirm: tuple[tuple[Condition, ...], ...]
    reason: str

    @classmethod
    def of(cls, d: DiagnosisView) -> DiagnosisSnapshot:
        """A frozen copy of a diagnosis (a snapshot is its own)."""
        if isinstance(d, DiagnosisSnapshot):
            return d
        assert isinstance(d, Diagnosis)
        return d.snapshot()


class DiagnosisBook:
    """Diagnoses keyed by (wall, source): the first evidence and a count of matching lines."""

    MAX_EVIDENCE_LINES = 20

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, Source], Diagnosis] = {}
        self._last_line: dict[tuple[str, Source], int] = {}
        self._source_order: dict[Source, int] = {}

    def add(
        self,
        wall: Wall,
        source: Source,
        line: int,
        evidence: str,
        *,
        node: str | None = None,
        now: float = 0.0,
        facts: dict[str, object] | None = None,
        facts_by_node: dict[str, dict[str, object]] | None = None,
        confidence: str = FROM_LOG,
        confirm: tuple[Condition, ...] = (),
        lines: tuple[tuple[int, str], ...] = (),
        reason: str = "",
    ) -> tuple[Diagnosis, bool]:
        """Record one piece of evidence; returns the diagnosis and whether it is new.

        Several hits on the same line (a long line matched in pieces) count once.
        `confidence` is what the evidence says alone; readings in `facts` (or the
        node's in `facts_by_node`) that meet `confirm` (else one of the wall's
        rules) confirm it. `lines` are the evidence's lines when it spans several.
        """
        key = (wall.id, source)
        own_facts = (facts_by_node or {}).get(node or "") if facts_by_node else facts
        self._source_order.setdefault(source, len(self._source_order))
        diag = self._by_key.get(key)
        if diag is None:
            diag = Diagnosis(
                wall,
                source,
                line,
                evidence,
                node=node,
                first_seen=now,
                last_seen=now,
                confidence=confidence,
                confirm=[] if confidence == CONFIRMED else confirming_conditions(wall, confirm),
                reason=reason,
            )
            self._choose_cause(diag, facts, facts_by_node)
            diag.check_confirmed(own_facts)
            diag.evidence_lines.extend(lines or ((line, evidence),))
            self._by_key[key] = diag
            self._last_line[key] = line
            return diag, True
        if confidence != diag.confidence and (
            CONFIDENCE_RANK[confidence] < CONFIDENCE_RANK[diag.confidence]
        ):
            diag.confidence = confidence  # better evidence for the same wall
            diag.reason = reason
            if confidence == FROM_LOG and confirm:
                diag.confirm = confirming_conditions(wall, confirm)
        if own_facts:
            diag.check_confirmed(own_facts)
        if line and self._last_line.get(key) == line:
            return diag, False
        self._last_line[key] = line
        diag.count += 1
        diag.last_seen = now
        if not diag.active:  # seen again after it was resolved or fixed: a new episode
            diag.resolved_at, diag.resolution = None, ""
            diag.fixed_at, diag.fixed_how = None, ""
            diag.first_seen, diag.line, diag.evidence = now, line, evidence
            diag.evidence_lines = list(lines or ((line, evidence),))
            diag.confidence = confidence  # as sure as its new evidence
            diag.confirm = [] if confidence == CONFIRMED else confirming_conditions(wall, confirm)
            self._choose_cause(diag, facts, facts_by_node)
            diag.check_confirmed(own_facts)
            return diag, True
        for entry in lines or ((line, evidence),):
            if len(diag.evidence_lines) < self.MAX_EVIDENCE_LINES:
                diag.evidence_lines.append(entry)
        return diag, False

    def add_hit(
        self,
        hit: Hit,
        *,
        node: str | None = None,
        now: float = 0.0,
        facts_by_node: dict[str, dict[str, object]] | None = None,
        source: Source | None = None,
    ) -> tuple[Diagnosis, bool]:
        """Record a matcher hit, with its confidence and its evidence lines; `source`
        defaults to the file the matcher read (a log triaged offline)."""
        sig = hit.signature
        return self.add(
            hit.wall,
            source or Source(LOG, None, hit.source),
            hit.line_no,
            hit.evidence,
            node=node,
            now=now,
            facts_by_node=facts_by_node,
            confidence=hit.confidence,
            confirm=sig.confirm if sig else (),
            lines=hit.lines,
            reason=hit.reason,
        )

    def confirm_with(self, facts_by_node: dict[str, dict[str, object]]) -> list[Diagnosis]:
        """Re-check the active diagnoses not yet confirmed against fresh readings of
        their node; returns those the readings now confirm."""
        out = []
        for d in self._by_key.values():
            facts = facts_by_node.get(d.node or "")
            if d.active and d.confidence != CONFIRMED and facts and d.check_confirmed(facts):
                out.append(d)
        return out

    @staticmethod
    def _choose_cause(
        diag: Diagnosis,
        facts: dict[str, object] | None,
        facts_by_node: dict[str, dict[str, object]] | None,
    ) -> None:
        """The cause (and the node it holds on) from the readings, and its fixes first."""
        wall = diag.wall
        cause, cause_node = None, None
        if facts_by_node:
            cause, cause_node = wall.choose_cause_across(diag.node, facts_by_node)
        elif facts is not None:
            cause, cause_node = wall.choose_cause(facts), diag.node
        informed = facts is not None or bool(facts_by_node)
        diag.cause = cause.id if cause else None
        diag.cause_node = cause_node if cause else None
        diag.fix_ids = tuple(f.id for f in wall.fixes_for_cause(cause)) if informed else ()

    def by_first_line(self) -> list[Diagnosis]:
        """In the order the sources were first seen, then by first line."""
        order = self._source_order
        return sorted(
            self._by_key.values(),
            key=lambda d: (order[d.source], d.line, SEVERITY_RANK[d.severity]),
        )

    def newest_first(self) -> list[Diagnosis]:
        return sorted(
            self._by_key.values(), key=lambda d: (-d.last_seen, SEVERITY_RANK[d.severity])
        )

    def get(self, wall_id: str, source: Source) -> Diagnosis | None:
        return self._by_key.get((wall_id, source))

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self):
        return iter(self._by_key.values())
