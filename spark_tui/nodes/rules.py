"""The one engine for metric and check walls: every wall's ReadingRules over facts.

Scopes (knowledge/SCHEMA.md): `node` rules run over each node's facts
(NodeState.facts(), with the cluster and recipe facts beside them, so causes
may name those too); `cluster` rules over the facts computed from all nodes
(cluster_facts); `recipe` rules over the facts a recipe gives (a plain dict
from its `facts()`). A rule must hold for its `for:` seconds (HoldTracker);
any rule of a wall that fires raises the wall. The cause is chosen with
Wall.choose_cause and the diagnosis recorded in a DiagnosisBook under the
source "<node>:readings", "cluster:readings" or "recipe:checks". A raised wall
whose rules have all stopped holding for RESOLVE_AFTER_S (or its longest `for:`)
is resolved, with the readings that cleared it (`resolved` after each evaluation).

There is no code per wall here: a new wall is a YAML file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_tui.facts import GIB
from spark_tui.kb.conditions import HoldTracker
from spark_tui.kb.diagnosis import Diagnosis, DiagnosisBook
from spark_tui.kb.schema import CONFIRMED, ReadingRule, Wall
from spark_tui.kb.source import Source
from spark_tui.nodes.state import NodeState

CLUSTER = "cluster"
RECIPE = "recipe"
RESOLVE_AFTER_S = 10.0  # clock seconds a raised wall must stay clear before it is resolved


def source_of(subject: str) -> Source:
    """The DiagnosisBook source for a subject: a node's readings, the cluster's, the recipe's."""
    if subject == RECIPE:
        return Source.recipe()
    return Source.readings(None if subject == CLUSTER else subject)


def cluster_facts(states: Mapping[str, NodeState]) -> dict[str, object]:
    """The cluster.* facts of spark_tui/facts.py, from the latest state of every node."""
    reachable = [s for s in states.values() if s.reachable]
    f: dict[str, object] = {
        "cluster.nodes": len(states),
        "cluster.reachable_nodes": len(reachable),
    }
    mem = [s.memory for s in reachable if s.memory is not None]
    if len(mem) >= 1:
        after_drop = [(m.free_bytes + m.cached_bytes - m.shmem_bytes) / GIB for m in mem]
        f["cluster.available_min_gib"] = min(after_drop)
        swap = [(m.swap_total_bytes - m.swap_free_bytes) / GIB for m in mem]
        f["cluster.swap_used_max_gib"] = max(swap)
        # what a launch could have on each node: meaningless while an engine holds the memory
        # (a relaunch stops it first; the head's API server alone is gigabytes apart)
        idle = all(s.serving.phase in ("stopped", "crashed") for s in reachable)
        if len(mem) >= 2 and idle:
            f["cluster.available_spread_gib"] = max(after_drop) - min(after_drop)
    mtus = [fab.mtu for s in reachable if (fab := s.fabric()) is not None and fab.mtu is not None]
    if mtus:
        f["cluster.fabric_mtu_min"] = min(mtus)
        f["cluster.mtu_mismatch"] = len(set(mtus)) > 1
    return f


@dataclass(frozen=True)
class RuleFiring:
    """A wall raised by the readings of one subject (a node, the cluster, the recipe)."""

    diagnosis: Diagnosis
    new: bool  # first time this wall is seen for this subject
    subject: str


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.1f}".rstrip("0").rstrip(".") if value == value else "nan"
    return (
        repr(value)
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def evidence_text(rule: ReadingRule, facts: Mapping[str, object], held_s: float) -> str:
    """What the rule saw: each condition with the value it met, and for how long."""
    parts = []
    for c in rule.when:
        value = facts.get(c.path)
        parts.append(f"{c} (is {_show(value)})" if value is not None else str(c))
    text = "; ".join(parts)
    return f"{text}; for {held_s:.0f} s" if rule.for_s else text


class RuleEngine:
    """Evaluates every wall with reading rules; remembers what is raised now."""

    def __init__(self, walls: Iterable[Wall], book: DiagnosisBook | None = None) -> None:
        self.walls: list[Wall] = [w for w in walls if w.rules]
        self.book = book if book is not None else DiagnosisBook()
        self.holds = HoldTracker()
        self._active: set[tuple[str, str]] = set()  # (wall id, subject) raised now
        self._clear_since: dict[tuple[str, str], float] = {}
        self._subjects: set[str] = set()
        self.resolved: list[Diagnosis] = []  # resolved by the last evaluation

    def forget_active(self, wall_id: str, subject: str) -> None:
        """Its diagnosis was resolved from outside (a verified fix): if the rule holds again
        for its window (not on a round read before the fix), it is raised again."""
        self._active.discard((wall_id, subject))
        self._clear_since.pop((wall_id, subject), None)
        for wall in self.walls:
            if wall.id == wall_id:
                for i in range(len(wall.rules)):
                    self.holds.reset((wall.id, str(i), subject))

    def active(self) -> set[tuple[str, str]]:
        """(wall id, subject) of the walls whose rules hold now."""
        return set(self._active)

    def evaluate_states(
        self,
        states: Mapping[str, NodeState],
        now: float,
        recipe_facts: Mapping[str, object] | None = None,
        *,
        ignore_durations: bool = False,
    ) -> list[RuleFiring]:
        """Evaluate over node states (unreachable nodes have no facts: their rules reset)."""
        node_facts = {name: s.facts() for name, s in states.items() if s.reachable}
        return self.evaluate(
            node_facts,
            now,
            recipe_facts=recipe_facts,
            cluster=cluster_facts(states),
            ignore_durations=ignore_durations,
        )

    def evaluate(
        self,
        node_facts: Mapping[str, Mapping[str, object]],
        now: float,
        *,
        recipe_facts: Mapping[str, object] | None = None,
        cluster: Mapping[str, object] | None = None,
        ignore_durations: bool = False,
    ) -> list[RuleFiring]:
        """One evaluation at clock time `now`; returns the walls raised (or raised again)."""
        recipe = dict(recipe_facts or {})
        cluster_f = dict(cluster or {})
        subjects: dict[str, dict[str, object]] = {
            name: {**recipe, **cluster_f, **facts} for name, facts in node_facts.items()
        }
        scoped: dict[str, dict[str, dict[str, object]]] = {
            "node": subjects,
            "cluster": {CLUSTER: {**recipe, **cluster_f}} if cluster_f else {},
            "recipe": {RECIPE: {**cluster_f, **recipe}} if recipe_facts is not None else {},
        }
        gone = self._subjects - set(subjects) - {CLUSTER, RECIPE}
        for subject in gone:  # a node that dropped: what it held no longer holds
            self._forget(subject)
        self._subjects = set(subjects) | {CLUSTER, RECIPE}
        firings: list[RuleFiring] = []
        self.resolved = []
        for wall in self.walls:
            fired: dict[str, tuple[ReadingRule, dict[str, object], float]] = {}
            seen_subjects: set[str] = set()
            for i, rule in enumerate(wall.rules):
                for subject, facts in scoped[rule.scope].items():
                    seen_subjects.add(subject)
                    key = (wall.id, str(i), subject)
                    holds = all(c.holds(facts) for c in rule.when)
                    for_s = 0.0 if ignore_durations else rule.for_s
                    if self.holds.update(key, holds, now, for_s) and subject not in fired:
                        fired[subject] = (rule, facts, self.holds.held_for(key, now))
            for subject in seen_subjects:
                key2 = (wall.id, subject)
                if subject not in fired:
                    self._clear(wall, subject, now, scoped)
                    continue
                self._clear_since.pop(key2, None)
                rule, facts, held = fired[subject]
                if key2 in self._active:
                    diag = self.book.get(wall.id, source_of(subject))
                    if diag is not None:
                        diag.last_seen = now
                    continue
                self._active.add(key2)
                diag, new = self.book.add(
                    wall,
                    source_of(subject),
                    0,
                    evidence_text(rule, facts, held),
                    node=subject if subject not in (CLUSTER, RECIPE) else None,
                    now=now,
                    facts=facts,
                    confidence=CONFIRMED,  # the readings are the evidence
                )
                if not new:  # seen again: the cause may differ this time
                    cause = wall.choose_cause(facts)
                    diag.cause = cause.id if cause else None
                    diag.fix_ids = tuple(f.id for f in wall.fixes_for(facts))
                    diag.evidence = evidence_text(rule, facts, held)
                firings.append(RuleFiring(diag, new, subject))
        return firings

    def _clear(
        self, wall: Wall, subject: str, now: float, scoped: dict[str, dict[str, dict]]
    ) -> None:
        """The wall does not hold on the subject now: resolve it once it stayed clear."""
        key = (wall.id, subject)
        if key not in self._active:
            return
        since = self._clear_since.setdefault(key, now)
        window = max([RESOLVE_AFTER_S, *(r.for_s for r in wall.rules)])
        if now - since < window:
            return
        self._active.discard(key)
        self._clear_since.pop(key, None)
        diag = self.book.get(wall.id, source_of(subject))
        if diag is None:
            return
        rule = next((r for r in wall.rules if subject in scoped[r.scope]), wall.rules[0])
        facts = scoped[rule.scope].get(subject, {})
        cleared = [c for c in rule.when if not c.holds(facts)] or list(rule.when)
        shown = "; ".join(
            f"{c} (is {_show(facts[c.path])})" if c.path in facts else f"{c} (unknown now)"
            for c in cleared
        )
        if diag.resolve(now, f"no longer holds: {shown}"):
            self.resolved.append(diag)

    def _forget(self, subject: str) -> None:
        for wall in self.walls:
            self._active.discard((wall.id, subject))
            self._clear_since.pop((wall.id, subject), None)
            for i in range(len(wall.rules)):
                self.holds.reset((wall.id, str(i), subject))
