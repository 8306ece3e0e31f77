"""The Markdown incident report: nodes and versions, the recipe and its revisions
with diffs, diagnoses with evidence, the journal. Pure formatting over data the
caller gathered (`spark-tui report` gathers it), so it can be pasted into a
forum post or a GitHub issue as it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.loader import KnowledgeBase
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.revisions import Revision

JOURNAL_TAIL = 200


@dataclass
class ReportData:
    """Everything the report shows; absent parts are said to be absent."""

    cluster: ClusterConfig
    recipe: Recipe | None = None
    revisions: list[Revision] = field(default_factory=list)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> name -> text
    diagnoses: list[Diagnosis] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)
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
                out.append(Diagnosis(wall, f"recipe:{recipe.id}", 0, evidence))
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
            out.append(f"- the seed measured {r.measured.tok_s:g} tok/s")
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
    out += ["## Journal", ""]
    if not d.journal:
        out += ["Nothing was run on a node.", ""]
    else:
        tail = d.journal[-JOURNAL_TAIL:]
        if len(d.journal) > len(tail):
            out.append(f"The last {len(tail)} of {len(d.journal)} entries.")
            out.append("")
        out.append("| time | node | action | command | exit |")
        out.append("|---|---|---|---|---|")
        for e in tail:
            ev = e.get("event")
            if ev == "command":
                cmd = str(e.get("command", "")).replace("|", "\\|").replace("\n", " ")
                out.append(
                    f"| {_when(float(e.get('time', 0)))} | {e.get('node') or '—'} | {e.get('action')} "
                    f"| `{cmd[:300]}` | {e.get('exit_code') if e.get('exit_code') is not None else '—'} |"
                )
            elif ev in ("fix-start", "fix-end", "fix-interrupted", "verify"):
                what = {
                    "fix-start": f"fix {e.get('fix')} started ({e.get('risk')}) on {', '.join(e.get('nodes') or [])}",
                    "fix-end": f"fix {e.get('fix')} ended: {e.get('status')} {e.get('message') or ''}",
                    "fix-interrupted": f"fix {e.get('fix')} INTERRUPTED: {e.get('message')}",
                    "verify": f"verify {e.get('condition')}: {'holds' if e.get('holds') else 'does not hold'}",
                }[ev]
                out.append(
                    f"| {_when(float(e.get('time', 0)))} | {e.get('node') or '—'} | {ev} | {what} | |"
                )
        out.append("")
        failed = [
            e for e in tail if e.get("event") == "command" and e.get("exit_code") not in (0, None)
        ]
        for e in failed[-5:]:
            out.append(
                f"Output of `{e.get('action')}` on {e.get('node')} (exit {e.get('exit_code')}):"
            )
            out.append("")
            out += _fence(str(e.get("output_tail", "")))
            out.append("")
    if d.evidence:
        out += ["## Evidence", ""]
        for name, text in d.evidence.items():
            out.append(f"<details><summary>{name}</summary>")
            out.append("")
            out += _fence(text[-20000:])
            out.append("")
            out.append("</details>")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def versions_from_sections(sections: Mapping[str, tuple[int, str]]) -> dict[str, str]:
    """name -> first line of output (or why it is missing)."""
    out = {}
    for name, (rc, text) in sections.items():
        first = text.strip().splitlines()[0] if text.strip() else ""
        out[name] = first if rc == 0 and first else ("not installed" if rc == 127 else "?")
    return out


def merge_diagnoses(*groups: Iterable[Diagnosis]) -> list[Diagnosis]:
    return [d for g in groups for d in g]
