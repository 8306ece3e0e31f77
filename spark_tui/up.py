"""`spark-tui up`: the guided bring-up, headless — a view of the one driver.

The driver (spark_tui.driver) decides every step: doctor → the fixes its findings call for
(walls a launch would hit, fixed before it) → launch → on a wall, the fix its cause calls
for and one relaunch per diagnosis → a soak of requests → serving. `up` prints each step
as it ends (`step_event`), the walls as they are raised and clear, and last

    {"event": "done", "serving": true|false, "launches": N, "recipe": ID,
     "active": [{"wall": ID, "severity": S, "node": N}, …]}

Nothing restarts blindly: a relaunch needs a diagnosis, and each diagnosis gets one
(the session's auto-relaunch guard). A disruptive or destructive step is confirmed by the
caller's `confirm` (the CLI asks on a terminal, or takes --yes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from spark_tui.driver import Driver, Step, step_event
from spark_tui.events import ActionProgress, DiagnosisRaised, DiagnosisResolved, Event
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.remedy.fixes import Confirm
from spark_tui.session import Session

EmitEvent = Callable[[dict[str, Any]], None]


def diagnosis_event(d: Diagnosis, kind: str = "diagnosis") -> dict[str, Any]:
    out: dict[str, Any] = {"event": kind, **d.to_json(), "node": d.node}
    if d.cause:
        out["cause"] = d.cause
    return out


def bring_up(
    session: Session,
    emit: EmitEvent,
    confirm: Confirm | None,
    *,
    yes: bool = False,
    progress: Callable[[ActionProgress], None] | None = None,
    driver: Driver | None = None,
) -> dict[str, Any]:
    """Bring the session's recipe up (see the module docstring); the `done` event."""
    lock = threading.Lock()
    announced: set[tuple[str, str]] = set()

    def said(event: dict[str, Any]) -> None:
        with lock:  # events come from the monitor's threads too
            emit(event)

    def watch(event: Event) -> None:
        """Walls as they are raised (new, or again after they cleared) and as they clear."""
        if isinstance(event, DiagnosisRaised) and event.new:
            d = event.diagnosis
            announced.add((d.wall.id, d.source))
            said(diagnosis_event(d))
        elif isinstance(event, DiagnosisResolved):
            d = event.diagnosis
            if (d.wall.id, d.source) in announced:
                said({"event": "resolved", "wall": d.wall.id, "node": d.node, "how": d.resolution})

    session.start(watch)
    drv = driver or Driver(session)
    recipe_before = session.recipe()

    def stepped(step: Step) -> None:
        event = step_event(step)
        if step.kind == "fix":
            after = session.recipe()
            before = step.data.get("plan").recipe if step.data.get("plan") is not None else None
            if after is not None and (
                before is None or (after.id, after.revision) != (before.id, before.revision)
            ):
                event["recipe"] = after.id
                event["revision"] = after.revision
                if before is not None and after.id != before.id:
                    event["switched_from"] = before.id
        said(event)
        r = session.recipe()
        if step.kind == "adopt" and r is not None:
            said({"event": "recipe", "recipe": r.id, "revision": r.revision})

    drv.subscribe(stepped)
    if session.monitor is not None:
        session.monitor.wait_rounds(1)
    if recipe_before is not None:
        said({"event": "recipe", "recipe": recipe_before.id, "revision": recipe_before.revision})
    drv.run(confirm, progress, yes=yes)
    end = drv.end()
    recipe = session.recipe()
    done = {
        "event": "done",
        "serving": end.kind == "serving",
        "launches": drv.launches,
        "recipe": recipe.id if recipe else None,
        "tok_s": drv.tok_s,
        "fixes": [{"wall": w, "fix": f} for w, f in drv.fixes],
        "active": [
            {"wall": d.wall.id, "severity": d.severity, "node": d.node}
            for d in session.diagnoses()
            if d.severity != "info"
        ],
    }
    said(done)
    return done
