"""The Markdown incident report: nodes and versions, the recipe and its revisions
with diffs, diagnoses with evidence, the journal. Pure formatting over data the
caller gathered (`spark-tui report` gathers it), so it can be pasted into a
forum post or a GitHub issue as it is.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_tui.kb.diagnosis import Diagnosis, DiagnosisView
from spark_tui.kb.loader import KnowledgeBase
from spark_tui.kb.source import Source
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.revisions import Revision
from spark_tui.redact import redact
from spark_tui.remedy.journal import command_running

JOURNAL_TAIL = 200


@dataclass
class ReportData:
    """Everything the report shows; absent parts are said to be absent."""

    cluster: ClusterConfig
    recipe: Recipe | None = None
    revisions: list[Revision] = field(default_factory=list)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> name -> text
    diagnoses: Sequence[DiagnosisView] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)
    journal_skipped: list[str] = field(default_factory=list)  # "file:line: why"
    evidence: dict[str, str] = field(default_factory=dict)  # file name -> text
    generated: float = field(default_factory=time.time)


def recipe_checks(kb: KnowledgeBase, recipe: Recipe) -> list[Diagnosis]:
    """Check walls whose recipe-scope rules hold for this recipe's facts."""
    facts = recipe.facts()
    out = []
    for wall in kb:
        for rule in wall.rules:
            if rule.scope == "recipe" and rule.when and all(c.holds(facts) for c in rule.when):
                evidence = f"recipe {recipe.id}: " + " and ".join(str(c) for c in rule.when)
                out.append(Diagnosis(wall, Source.recipe(), 0, evidence))
                break
    return out


def _fence(text: str, lang: str = "") -> list[str]:
    text = text.replace("```", "ʼʼʼ")  # a fence inside evidence must not close ours
    return [f"```{lang}", text.rstrip("\n"), "```"]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def build_report(d: ReportData) -> str:
    """The report as Markdown."""
    out = ["# spark-tui incident report", "", f"Generated {_when(d.generated)}.", ""]
    out += ["## Nodes", ""]
    c = d.cluster
    out.append(
        f"Cluster from `{c.source}`"
        + (" (simulated: no cluster.yaml)" if c.simulated else "")
        + f", {len(c.nodes)} node{'s' if len(c.nodes) != 1 else ''}."
    )
    out.append("")
    names = sorted({k for v in d.versions.values() for k in v})
    header = ["node", "role", "host", "fabric", *names]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for n in c.nodes:
        v = d.versions.get(n.name, {})
        fabric = f"{n.fabric_if or '?'} {n.fabric_ip or ''}".strip()
        cells = [n.name, n.role, n.host, fabric, *(v.get(k, "—") for k in names)]
        out.append("| " + " | ".join(str(x).replace("|", "\\|") for x in cells) + " |")
    out.append("")
    out += ["## Recipe", ""]
    r = d.recipe
    if r is None:
        out += ["No recipe named (cluster.yaml has no `recipe:`).", ""]
    else:
        out.append(f"`{r.id}` — {r.title}")
        out.append("")
        out.append(
            f"- status: {r.status}"
            + (
                f" (stopped by {', '.join(r.blocked_by)}; instead: {r.instead or '—'})"
                if r.blocked_by
                else ""
            )
        )
        out.append(
            f"- engine: {r.engine} ({r.executor}), {r.nodes} nodes, image `{r.image or 'not named'}`"
        )
        out.append(f"- model: `{r.model.id}`")
        if r.measured.tok_s:
            out.append(f"- its source measured {r.measured.tok_s:g} tok/s")
        out.append(f"- revision in use: {r.revision}")
        out.append("")
        if d.revisions:
            out += ["### Revisions", ""]
            for rev in d.revisions:
                out.append(
                    f"**revision {rev.number}** — {_when(rev.time)} — {rev.note or ''}".rstrip(" —")
                )
                out.append("")
                if rev.diff:
                    out += _fence(rev.diff, "diff")
                    out.append("")
    out += ["## Diagnoses", ""]
    if not d.diagnoses:
        out += ["No known wall was found.", ""]
    for diag in d.diagnoses:
        w = diag.wall
        where = f"{diag.source}:{diag.line}" if diag.line else diag.source
        out.append(f"### {w.id} ({w.severity})")
        out.append("")
        out.append(
            f"{w.title} — seen in `{where}`" + (f", {diag.count} lines" if diag.count > 1 else "")
        )
        out.append("")
        out += _fence(diag.evidence)
        out.append("")
        fixes = [w.fix(f) for f in diag.fixes()]
        if any(fixes):
            out.append("Fixes: " + "; ".join(f"`{f.id}` ({f.risk})" for f in fixes if f))
            out.append("")
    out += _journal_section(d.journal)
    if d.journal_skipped:
        out += ["Journal lines left out (not records spark-tui wrote):", ""]
        out += [f"- {_cell(s)}" for s in d.journal_skipped[:20]] + [""]
    if d.evidence:
        out += ["## Evidence", ""]
        for name, text in d.evidence.items():
            out.append(f"<details><summary>{name}</summary>")
            out.append("")
            out += _fence(text[-20000:])
            out.append("")
            out.append("</details>")
            out.append("")
    # made to be pasted in public: secrets only as ${NAME}
    return redact("\n".join(out).rstrip("\n") + "\n")


_EVENT_TEXT = {
    "fix-start": lambda e: (
        f"{e.get('fix')} started ({e.get('risk')}) on {', '.join(e.get('nodes') or []) or 'the recipe'}"
    ),
    "fix-end": lambda e: f"{e.get('fix')} ended: {e.get('status')} — {e.get('message') or ''}",
    "fix-interrupted": lambda e: f"{e.get('fix')} INTERRUPTED: {e.get('message')}",
    "verify": lambda e: (
        f"check {e.get('condition')}: {'holds' if e.get('holds') else 'does not hold'}"
    ),
    "recipe-revision": lambda e: f"recipe {e.get('recipe')} is now revision {e.get('revision')}",
    "recipe-switch": lambda e: f"recipe is now {e.get('recipe')}",
    "recipe-undo": lambda e: f"recipe {e.get('recipe')} back to revision {e.get('revision')}",
    "reboot-back": lambda e: f"back after the reboot (boot id {e.get('boot_id')})",
    "preflight": lambda e: f"not reachable before the change: {e.get('reason')}; nothing ran",
    "undo-saved": lambda e: (
        f"before the change: {e.get('fact') or 'undo'} = {e.get('value')}; "
        f"set back if the fix fails with: {e.get('undo')}"
    ),
}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _journal_section(journal: list[dict[str, Any]]) -> list[str]:
    """Every command with how it ended; a command that started and has no end is said to
    be so (it may have half-run); a simulated cluster's entries are marked."""
    out = ["## Journal", ""]
    if not journal:
        return [*out, "Nothing was run on a node.", ""]
    tail = journal[-JOURNAL_TAIL:]
    if len(journal) > len(tail):
        out += [f"The last {len(tail)} of {len(journal)} entries.", ""]
    if any(e.get("simulated") for e in tail):
        out += ["Entries marked *(simulated)* were run on spark-tui's simulated cluster.", ""]
    out += ["| time | node | action | command or event | result |", "|---|---|---|---|---|"]
    open_cmds: dict[str, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    for e in tail:
        ev = e.get("event")
        when = _when(float(e.get("time", 0))) + (" *(simulated)*" if e.get("simulated") else "")
        node = e.get("node") or "—"
        if ev == "started":
            open_cmds[str(e.get("cmd"))] = e
            continue
        if ev == "finished":
            open_cmds.pop(str(e.get("cmd")), None)
            outcome = e.get("outcome", "exit")
            result = f"exit {e.get('exit_code')}" if outcome == "exit" else str(outcome)
            if outcome != "exit" or e.get("exit_code") not in (0, None):
                failed.append(e)
            cmd = _cell(str(e.get("command", ""))[:300])
            out.append(f"| {when} | {node} | {e.get('action')} | `{cmd}` | {result} |")
        elif ev in _EVENT_TEXT:
            out.append(f"| {when} | {node} | {ev} | {_cell(_EVENT_TEXT[ev](e))} | |")
    for e in open_cmds.values():
        when = _when(float(e.get("time", 0)))
        cmd = _cell(str(e.get("command", ""))[:300])
        state = (
            f"**running now** (spark-tui pid {e.get('pid')})"
            if command_running(e)
            else "**started, no end recorded: it may have half-run**"
        )
        out.append(f"| {when} | {e.get('node') or '—'} | {e.get('action')} | `{cmd}` | {state} |")
    out.append("")
    for e in failed[-5:]:
        how = e.get("outcome") if e.get("outcome") != "exit" else f"exit {e.get('exit_code')}"
        out += [f"Output of `{e.get('action')}` on {e.get('node')} ({how}):", ""]
        out += _fence(str(e.get("output_tail", "")))
        out.append("")
    return out


def versions_from_sections(sections: Mapping[str, tuple[int, str]]) -> dict[str, str]:
    """name -> first line of output (or why it is missing)."""
    out = {}
    for name, (rc, text) in sections.items():
        first = text.strip().splitlines()[0] if text.strip() else ""
        out[name] = first if rc == 0 and first else ("not installed" if rc == 127 else "?")
    return out
