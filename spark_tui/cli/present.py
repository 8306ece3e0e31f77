"""Human output of the headless commands (rich), shared by triage, watch and doctor."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from spark_tui.kb.diagnosis import DiagnosisView
from spark_tui.kb.schema import CONFIDENCE_WORDS, FROM_LOG, SUSPECTED, Fix

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}
RISK_STYLE = {"safe": "green", "disruptive": "yellow", "destructive": "red"}


def console() -> Console:
    return Console(highlight=False, no_color="NO_COLOR" in os.environ, soft_wrap=False)


def fix_block(fix: Fix, index: int) -> Text:
    from spark_tui.remedy.render import preview_lines

    text = Text()
    text.append(f"  {index}. {fix.title}", style="bold")
    text.append(f"  [{fix.risk}", style=RISK_STYLE[fix.risk])
    text.append(", needs root]" if fix.root else "]", style=RISK_STYLE[fix.risk])
    for line in preview_lines(fix):
        text.append("\n     $ " if not line.startswith("#") else "\n     ", style="dim")
        text.append(line)
    if fix.note:
        text.append(f"\n     {fix.note}", style="italic dim")
    return text


def diagnosis_panel(d: DiagnosisView) -> Panel:
    w = d.wall
    head = Text()
    head.append(f"{d.severity.upper():8}", style=SEVERITY_STYLE[d.severity])
    head.append(w.title, style="bold")
    if d.confidence != FROM_LOG:
        head.append(f"  ({CONFIDENCE_WORDS[d.confidence]})", style="italic")
    where = Text(f"{d.source}:{d.line}" if d.line else d.source, style="cyan")
    where.append(f"  ({d.count} matching line{'s' if d.count != 1 else ''})", style="dim")
    parts: list[RenderableType] = [head, where, Text(w.summary)]
    if d.confidence == SUSPECTED:
        if d.reason:
            parts.append(Text(f"Suspected: {d.reason}", style="italic dim"))
        for conds in d.confirm_with():
            parts.append(Text(f"Readings that would confirm it: {conds}", style="italic dim"))
    parts.append(Text("> " + d.evidence, style="magenta", overflow="ellipsis", no_wrap=True))
    if w.explain:
        parts.append(Text(w.explain, style="italic"))
    fixes = [f for f in (w.fix(fid) for fid in d.fixes()) if f is not None]
    if fixes:
        parts.append(Text("Fixes, in order:", style="bold"))
        parts.extend(fix_block(f, i) for i, f in enumerate(fixes, 1))
    return Panel(
        Group(*parts),
        title=w.id,
        title_align="left",
        border_style=SEVERITY_STYLE[d.severity].split()[-1],
    )


def print_diagnoses(diagnoses: Iterable[DiagnosisView], files: list[str]) -> None:
    out = console()
    diagnoses = list(diagnoses)
    if not diagnoses:
        out.print(f"No known wall in {', '.join(files)}.")
        return
    for d in diagnoses:
        out.print(diagnosis_panel(d))
    counts = {s: sum(1 for d in diagnoses if d.severity == s) for s in ("error", "warning", "info")}
    summary = ", ".join(
        f"{n} {s}" + ("s" if n != 1 and s != "info" else "") for s, n in counts.items() if n
    )
    out.print(f"{len(diagnoses)} diagnos{'es' if len(diagnoses) != 1 else 'is'}: {summary}")
    sys.stdout.flush()


def ask_terminal(prompt: str, nodes: tuple[str, ...]) -> bool:
    """The CLI's confirmation: the prompt names every node; anything but y/yes is no.
    Off a terminal nothing is asked and the answer is no (pass --yes to run it)."""
    if not sys.stdin.isatty():
        print(
            f"{prompt}\nnot asked (stdin is not a terminal): pass --yes to run it", file=sys.stderr
        )
        return False
    print(prompt, file=sys.stderr)
    for n in nodes:
        print(f"  - {n}", file=sys.stderr)
    try:
        answer = input("Type 'yes' to run it on these nodes: ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def print_progress(ev) -> None:
    """An action's progress on stderr: each command as it starts, then how steps end."""
    where = f"[{ev.node}] " if ev.node else ""
    if ev.status == "running" and ev.command:
        print(f"{where}$ {ev.command}", file=sys.stderr)
    elif ev.detail or ev.status in ("failed", "skipped"):
        print(f"{where}{ev.step}: {ev.status} {ev.detail}".rstrip(), file=sys.stderr)
