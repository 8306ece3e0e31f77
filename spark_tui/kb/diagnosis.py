"""Diagnoses: hits of the matcher (and of the reading rules) gathered per wall per source."""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_tui.kb.schema import SEVERITY_RANK, Wall


@dataclass
class Diagnosis:
    """One wall seen in one source (a log file, a node's stream, a node's readings)."""

    wall: Wall
    source: str
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
    attempt: int = 0  # the launch attempt it was seen in (0: before any launch)

    @property
    def active(self) -> bool:
        return self.resolved_at is None

    def resolve(self, now: float, how: str) -> bool:
        """Mark it resolved (once); False when it already was."""
        if self.resolved_at is not None:
            return False
        self.resolved_at, self.resolution = now, how
        return True

    @property
    def severity(self) -> str:
        return self.wall.severity

    @property
    def target_node(self) -> str | None:
        """Where a fix aimed at 'the node where it was seen' should go: the node the
        cause holds on, else the node that showed the evidence."""
        return self.cause_node or self.node

    def fixes(self) -> tuple[str, ...]:
        return self.fix_ids or tuple(f.id for f in self.wall.fixes)

    def to_json(self) -> dict[str, object]:
        """The object `triage --json` prints (docs/json.md); a resolved one says how."""
        out: dict[str, object] = {
            "wall": self.wall.id,
            "title": self.wall.title,
            "severity": self.wall.severity,
            "file": self.source,
            "line": self.line,
            "count": self.count,
            "evidence": self.evidence,
            "fixes": list(self.fixes()),
        }
        if not self.active:
            out["resolved"] = self.resolution
        return out


class DiagnosisBook:
    """Diagnoses keyed by (wall, source): the first evidence and a count of matching lines."""

    MAX_EVIDENCE_LINES = 20

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], Diagnosis] = {}
        self._last_line: dict[tuple[str, str], int] = {}
        self._source_order: dict[str, int] = {}

    def add(
        self,
        wall: Wall,
        source: str,
        line: int,
        evidence: str,
        *,
        node: str | None = None,
        now: float = 0.0,
        facts: dict[str, object] | None = None,
        facts_by_node: dict[str, dict[str, object]] | None = None,
    ) -> tuple[Diagnosis, bool]:
        """Record one piece of evidence; returns the diagnosis and whether it is new.

        Several hits on the same line (a long line matched in pieces) count once.
        """
        key = (wall.id, source)
        self._source_order.setdefault(source, len(self._source_order))
        diag = self._by_key.get(key)
        if diag is None:
            diag = Diagnosis(wall, source, line, evidence, node=node, first_seen=now, last_seen=now)
            self._choose_cause(diag, facts, facts_by_node)
            diag.evidence_lines.append((line, evidence))
            self._by_key[key] = diag
            self._last_line[key] = line
            return diag, True
        if line and self._last_line.get(key) == line:
            return diag, False
        self._last_line[key] = line
        diag.count += 1
        diag.last_seen = now
        if not diag.active:  # seen again after it was resolved: a new episode
            diag.resolved_at, diag.resolution = None, ""
            diag.first_seen, diag.line, diag.evidence = now, line, evidence
            diag.evidence_lines = [(line, evidence)]
            self._choose_cause(diag, facts, facts_by_node)
            return diag, True
        if len(diag.evidence_lines) < self.MAX_EVIDENCE_LINES:
            diag.evidence_lines.append((line, evidence))
        return diag, False

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

    def get(self, wall_id: str, source: str) -> Diagnosis | None:
        return self._by_key.get((wall_id, source))

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self):
        return iter(self._by_key.values())
