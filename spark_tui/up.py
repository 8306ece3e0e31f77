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
from dataclasses import replace
from typing import Any

from spark_tui.driver import Driver, Step, step_events
from spark_tui.event_journal import EventJournal
from spark_tui.event_lines import (
    ActiveWall,
    AppliedFix,
    DiagnosisSeen,
    Done,
    LineEvent,
    NodeReach,
    RecipeChosen,
    WallFixed,
    WallResolved,
    line,
)
from spark_tui.events import ActionProgress, Event
from spark_tui.remedy.fixes import Confirm
from spark_tui.session import Session

EmitEvent = Callable[[dict[str, Any]], None]


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
    journal = EventJournal(session.clock.now)  # which monitor events make a line: as watch

    def say(event: LineEvent) -> dict[str, Any]:
        """Say an event, stamped with the session's clock (the monitor's stamps too)."""
        if not isinstance(event, DiagnosisSeen | WallResolved | WallFixed | NodeReach):
            event = replace(event, time=session.clock.now())
        said = line(event)
        with lock:  # events come from the monitor's threads too
            emit(said)
        return said

    def watch(event: Event) -> None:
        """The monitor's news, in the words `watch --json` says it (one presenter)."""
        said = journal.said(event)
        if said is not None:
            say(said)

    session.start(watch)
    drv = driver or Driver(session)
    recipe_before = session.recipe()

    def stepped(step: Step) -> None:
        r = session.recipe()
        for event in step_events(step, r):
            say(event)
        if step.kind == "adopt" and r is not None:
            say(RecipeChosen(recipe=r.id, revision=r.revision))

    drv.subscribe(stepped)
    drv.settle()  # the round every front end's driver reads before its first decision
    if recipe_before is not None:
        say(RecipeChosen(recipe=recipe_before.id, revision=recipe_before.revision))
    drv.run(confirm, progress, yes=yes)
    end = drv.end()
    recipe = session.recipe()
    return say(
        Done(
            serving=end.kind == "serving",
            launches=drv.launches,
            recipe=recipe.id if recipe else None,
            tok_s=drv.tok_s,
            fixes=tuple(AppliedFix(wall=w, fix=f) for w, f in drv.fixes),
            active=tuple(
                ActiveWall(wall=d.wall.id, severity=d.severity, node=d.node)
                for d in session.diagnoses()
                if d.severity != "info"
            ),
        )
    )
