"""The knowledge base's data model: walls, their signatures, causes and fixes.

One YAML file per wall (knowledge/<id>.yaml); `spark_tui.kb.loader` turns it
into these frozen objects after validating every field. knowledge/SCHEMA.md is
the reference for authors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from spark_tui.action_schemas import SCHEMAS
from spark_tui.kb.conditions import Condition

Severity = Literal["error", "warning", "info"]
Kind = Literal["log", "metric", "check"]
Risk = Literal["safe", "disruptive", "destructive"]

SEVERITIES: tuple[str, ...] = ("error", "warning", "info")
KINDS: tuple[str, ...] = ("log", "metric", "check")
RISKS: tuple[str, ...] = ("safe", "disruptive", "destructive")
ENGINES: tuple[str, ...] = ("vllm", "sglang", "ray", "pytorch", "nccl", "kernel", "any")
TARGETS: tuple[str, ...] = ("all", "head", "workers", "seen")
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}

# How sure a diagnosis is. A log signature says its wall `from-log` (the wall's own
# words), or `suspected` (a symptom that other walls share, or a wall whose main
# evidence is readings); readings that agree make it `confirmed`.
CONFIRMED, FROM_LOG, SUSPECTED = "confirmed", "from-log", "suspected"
CONFIDENCE_RANK = {CONFIRMED: 0, FROM_LOG: 1, SUSPECTED: 2}
CONFIDENCE_WORDS = {CONFIRMED: "confirmed", FROM_LOG: "from the log", SUSPECTED: "suspected"}


def severity_for(severity: str, confidence: str) -> str:
    """A diagnosis's severity: the wall's, one step lower while only suspected."""
    if confidence != SUSPECTED:
        return severity
    return {"error": "warning", "warning": "info"}.get(severity, severity)


# Action types, their fields and what they do: spark_tui.action_schemas (the floor under
# the knowledge base and the remedy's registry, spark_tui.remedy.actions).


@dataclass(frozen=True)
class LogSignature:
    """A regex over one log line; with `then`, a second regex that must match
    within `within` lines after the first (multi-line evidence); with `after`, a
    regex that must have matched earlier in the same log (and `reset`, not since);
    with `times`, the number of matching lines it takes; with `unless`, words that
    must not be on the same line (a more specific wall's); with `excerpt_times`, the
    matching lines that name it (suspected) in a file that holds neither its `after`
    nor its `reset` line (an excerpt pasted from the middle of a log). `confidence` is what a
    match alone says (from-log or suspected); `confirm` are the readings that
    would confirm it; `only_when` are facts (the recipe's, the node's) without which
    the line is harmless (NCCL on loopback is right when the launch is one node)."""

    pattern: str
    then: str | None = None
    within: int = 30
    ignore_case: bool = False
    line: int = 0  # where it was written, for error messages
    after: str | None = None
    reset: str | None = None
    unless: str | None = None
    times: int = 1
    confidence: str = FROM_LOG
    confirm: tuple[Condition, ...] = ()
    excerpt_times: int = 0  # a paste with neither `after` nor `reset`: lines that suffice
    only_when: tuple[Condition, ...] = ()

    def ruled_out(self, facts: Mapping[str, object] | None) -> bool:
        """Whether the facts say this signature's line names no wall here: one of its
        `only_when` conditions is decided (every fact it names is known) and does not hold.
        Unknown facts (no recipe, a stack spark-tui did not launch, a file triaged offline)
        never rule a line out: a wall is not hidden for want of facts."""
        if not self.only_when or not facts:
            return False
        return any(c.decided(facts) and not c.holds(facts) for c in self.only_when)


# Why a signature with `after` names its wall in a pasted file that never shows that line
EXCERPT_REASON = (
    "a pasted excerpt with no startup banner: judged on its own shape"
    " ({n} matching lines), not on what came before it"
)


@dataclass(frozen=True)
class ReadingRule:
    """Conditions over node readings (scope node) or the whole cluster
    (scope cluster) that must all hold for `for_s` seconds."""

    when: tuple[Condition, ...]
    for_s: float = 0.0
    scope: Literal["node", "cluster", "recipe"] = "node"
    line: int = 0


@dataclass(frozen=True)
class Action:
    type: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def on(self) -> str:
        """Where it runs: the action's `on`, else its kind's default."""
        if "on" in self.params:
            return str(self.params["on"])
        schema = SCHEMAS.get(self.type)
        return schema.default_target if schema is not None else "seen"


@dataclass(frozen=True)
class Fix:
    id: str
    title: str
    risk: Risk
    root: bool
    actions: tuple[Action, ...]
    verify: tuple[Condition, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Cause:
    """One of several reasons for a wall; readings tell them apart."""

    id: str
    title: str
    when: tuple[Condition, ...]
    fixes: tuple[str, ...]


# Placeholders a source map's message template may hold (`{name}`), with the realistic
# value each stands for when a test fills the template in; `{{` and `}}` are braces.
PLACEHOLDERS: dict[str, str] = {
    "n": "42",
    "big": "600060",
    "float": "11.19",
    "gib": "119.67",
    "pct": "0.95",
    "ip": "192.168.100.11",
    "port": "29500",
    "addr": "192.168.100.11:29500",
    "iface": "enp1s0f0np0",
    "path": "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/linear.py",
    "file": "csrc/apis/gemm.hpp",
    "name": "Qwen3MoeForCausalLM",
    "word": "fp8",
    "id": "a4f2c9e1",
    "hex": "0x7f3a2c00",
    "text": "see the log above",
    "list": "['awq', 'gptq', 'fp8']",
    "pid": "2871",
    "arch": "12.1",
    "gpu": "NVIDIA GB10",
}
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def placeholders(template: str) -> list[str]:
    """The placeholder names in a message template (`{name}`), in order."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(template) if m.group(1) is not None]


def lone_brace(template: str) -> bool:
    """Whether a template holds a brace that is neither a placeholder nor doubled."""
    rest = _PLACEHOLDER.sub("", template)
    return "{" in rest or "}" in rest


def fill(template: str) -> str:
    """A message template with each placeholder replaced by its realistic value."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        return PLACEHOLDERS[m.group(1)]

    return _PLACEHOLDER.sub(one, template)


@dataclass(frozen=True)
class MessageSource:
    """One message that says a wall, as the project that prints it writes it: its
    template (`{name}` placeholders), the project, the releases that print it, and
    where (file:line at a tag or commit)."""

    message: str
    project: str
    versions: str
    at: str
    line: int = 0  # where it was written, for error messages


@dataclass(frozen=True)
class Wall:
    id: str
    title: str
    severity: Severity
    kind: Kind
    engines: tuple[str, ...]
    summary: str
    signatures: tuple[LogSignature, ...]
    rules: tuple[ReadingRule, ...]
    causes: tuple[Cause, ...]
    fixes: tuple[Fix, ...]
    references: tuple[str, ...]
    explain: str = ""
    source: str = ""  # the file it was loaded from
    sources: tuple[MessageSource, ...] = ()  # the messages that say it, upstream

    def fix(self, fix_id: str) -> Fix | None:
        return next((f for f in self.fixes if f.id == fix_id), None)

    def choose_cause(self, facts: dict[str, object]) -> Cause | None:
        """The first cause whose conditions hold (a cause without conditions is the default)."""
        for cause in self.causes:
            if all(c.holds(facts) for c in cause.when):
                return cause
        return None

    def choose_cause_across(
        self, seen: str | None, facts_by_node: dict[str, dict[str, object]]
    ) -> tuple[Cause | None, str | None]:
        """The cause and the node it holds on. A log line is printed by one node, but
        its cause may sit on another (SGLang's balance check fires on the healthy
        rank; the leak is on its peer): a cause with conditions that hold on the node
        that printed the line wins, then one that holds on another node, then the
        default cause (no conditions) on the printing node."""
        order = ([seen] if seen in facts_by_node else []) + [n for n in facts_by_node if n != seen]
        for node in order:
            for cause in self.causes:
                if cause.when and all(c.holds(facts_by_node[node]) for c in cause.when):
                    return cause, node
        default = next((c for c in self.causes if not c.when), None)
        return default, (seen if default is not None else None)

    def fixes_for(self, facts: dict[str, object] | None = None) -> tuple[Fix, ...]:
        """Fixes in order of preference; the chosen cause's fixes come first."""
        return self.fixes_for_cause(self.choose_cause(facts) if facts is not None else None)

    def fixes_for_cause(self, cause: Cause | None) -> tuple[Fix, ...]:
        """Fixes in order of preference, the cause's own first."""
        if cause is None:
            return self.fixes
        first = [f for fid in cause.fixes if (f := self.fix(fid)) is not None]
        return tuple(first + [f for f in self.fixes if f not in first])
