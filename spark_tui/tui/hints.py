"""What the status line says: what is happening now, and which key comes next.

Plain Python (no Textual): the main screen gathers what it knows into a `Situation`,
`next_step` turns it into one sentence and the key to press.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_tui.kb.diagnosis import DiagnosisSnapshot

ACTION_WORDS = {
    "launch": "launching",
    "relaunch": "relaunching",
    "stop": "stopping",
    "fix": "applying the fix",
    "doctor": "running the doctor",
    "undo": "undoing the last patch",
    "rollback": "rolling back to what served",
    "export": "writing the report",
    "bring-up": "guided bring-up",
}


@dataclass(frozen=True)
class Situation:
    """What the main screen knows of the cluster and of the user's last moves."""

    recipe: str | None = None  # the recipe's id
    running: str | None = None  # the action running now (launch, relaunch, fix, …)
    wall: DiagnosisSnapshot | None = None  # the active wall shown (None: none, or an info one)
    fix_title: str | None = None  # its marked fix
    fix_number: int = 1
    fixed: bool = False  # the last fix worked and asks for a relaunch to show it
    serving: float | None = None  # tok/s while the head serves (0.0: serving, no figure)
    launched: bool = False  # a launch ran in this session
    last_failed: str | None = None  # the last action failed: what it said
    requests: str | None = None  # a simulated story's client: what it is doing


def next_step(s: Situation) -> tuple[str, str]:
    """(what is happening, what to press next): short, no internal names."""
    if s.running is not None:
        doing = ACTION_WORDS.get(s.running, s.running)
        what = f"{doing} {s.recipe}…" if s.running in ("launch", "relaunch") else f"{doing}…"
        return what, "the log shows each step as it runs"
    fix_key = (
        f"a applies fix {s.fix_number} ({s.fix_title}); ] the next"
        if s.fix_title
        else "r relaunches; e writes a report to share"
    )
    serving = s.serving is not None
    if s.wall is not None and not (serving and s.wall.severity != "error"):
        d = s.wall
        where = f" on {d.node}" if d.node else ""
        return f"{d.severity}{where}: {d.wall.id}", fix_key
    if s.fixed and not serving:
        return "fixed", f"r relaunches {s.recipe or 'the recipe'} with the fix"
    if serving:
        rate = f" at {s.serving:.1f} tok/s" if s.serving else ""
        what = f"serving {s.recipe}{rate}" if s.recipe else f"serving{rate}"
        if s.requests:
            what += f" · {s.requests}"
        if s.wall is not None:  # a warning while it serves: worth its fix, not alarming
            return f"{what} · {s.wall.severity}: {s.wall.wall.id}", fix_key
        return what, "s stops; r relaunches; d runs the doctor"
    if s.last_failed:
        return f"failed: {s.last_failed}", "r relaunches; d runs the doctor; b guides a bring-up"
    if s.recipe is None:
        return "no recipe chosen", "b guides a bring-up (it picks a recipe)"
    if s.launched:
        return "nothing serving", f"r relaunches {s.recipe}"
    return "nothing launched yet", f"r launches {s.recipe}; b guides a bring-up"
