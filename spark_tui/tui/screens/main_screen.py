"""The main screen: node panes, the log, the walls seen and their fixes, the status line.

Wide terminals show full node panes over log | walls; small ones (under 100 columns or
32 rows) a one-line strip per node, the walls and the marked fix, then the log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from spark_tui.driver import Driver, Step
from spark_tui.errors import SparkTuiError
from spark_tui.event_journal import EventJournal
from spark_tui.events import (
    ActionProgress,
    DiagnosisFixed,
    DiagnosisRaised,
    DiagnosisResolved,
    NodeSampled,
    ReachabilityChanged,
)
from spark_tui.session import Session
from spark_tui.tui.event_pump import Batch
from spark_tui.tui.hints import Situation, next_step
from spark_tui.tui.messages import (
    ActionFinished,
    DiagnosisChosen,
    DiagnosisShown,
    NodeChosen,
    ProgressReported,
    ReachabilityShown,
)
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.screens.output_screen import OutputScreen
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable, diagnosis_key
from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail
from spark_tui.tui.widgets.log_pane import LogPane
from spark_tui.tui.widgets.node_pane import NodePane
from spark_tui.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from spark_tui.recipes.model import Recipe
    from spark_tui.recipes.revisions import Served

PANE_LIMIT = 12  # node panes on the screen; more nodes are counted in one line
STORY_REQUESTS = 8  # a simulated story's client sends this many chat requests, at most
STORY_REQUEST_EVERY_S = 8.0  # real seconds between two of them


class MainScreen(Screen):
    """Everything live at once; the keys act on the selected diagnosis and the cluster."""

    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 - Textual types it per instance
    VERTICAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 - Textual types it per instance
    BINDINGS: ClassVar = [
        Binding("a", "apply_fix", "Fix"),
        Binding("right_square_bracket", "next_fix", "Next fix", show=False),
        Binding("r", "relaunch", "Relaunch"),
        Binding("s", "stop_stack", "Stop"),
        Binding("d", "doctor", "Doctor"),
        Binding("slash", "log('search')", "Search"),
        Binding("n", "log('wall')", "Next wall line", show=False),
        Binding("N", "log('wall-back')", "Previous wall line", show=False),
        Binding("l", "log('node')", "Log node", show=False),
        Binding("o", "log('origin')", "Log source", show=False),
        Binding("v", "log('level')", "Log level", show=False),
        Binding("f", "log('follow')", "Follow", show=False),
        Binding("w", "log('wrap')", "Wrap", show=False),
        Binding("u", "undo", "Undo patch", show=False),
        Binding("R", "rollback", "Roll back", show=False),
        Binding("e", "export_report", "Export", show=False),
        Binding("J", "events", "Journal of events", show=False),
    ]

    def __init__(self, session: Session, driver: Driver, scrollback: int = 100_000) -> None:
        # classes given at creation, not added in on_mount: each add_class there restyled
        # every widget of the screen once more before the first frame
        super().__init__(id="main", classes="-no-walls")
        self.session = session
        self.driver = driver
        # the monitor's events and the driver's steps in the event language of watch --json
        self.events = EventJournal(session.clock.now)
        driver.subscribe(self._stepped)
        self.scrollback = scrollback
        self.output: OutputScreen | None = None
        self.selected_key: str | None = None
        self.user_chose = False  # the user picked a row: stop following the most severe
        self.running: str | None = None  # the action this screen's worker runs
        self.last_result: tuple[str, bool, str] | None = None  # (action, ok, summary)
        self.story = False  # a simulated scenario plays its story (launch, then a client)
        self._memory: dict[str, object] = {"fixed": False, "launched": False}
        self._serving: float | None = None
        self._story_stop = threading.Event()
        self.problem: str | None = None  # what is wrong with cluster.yaml's recipe
        # a pane for the head and the first nodes; the rest are counted in one line (a
        # screen of 500 panes would take seconds to lay out, and shows a dozen anyway)
        nodes = self.session.config.nodes
        head = self.session.config.head.name if nodes else None
        order = [n for n in nodes if n.name == head] + [n for n in nodes if n.name != head]
        self._paned = {n.name for n in order[:PANE_LIMIT]}
        self._unpaned: dict[str, bool | None] = {n.name: None for n in order[PANE_LIMIT:]}

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="body"):
            cols = min(3, max(1, len(self.session.config.nodes)))
            with Grid(id="nodes", classes=f"-cols-{cols}"):
                for node in self.session.config.nodes:
                    if node.name in self._paned:
                        yield NodePane(node)
            if self._unpaned:
                yield Static(self._more_text(), id="more-nodes")
            with Vertical(id="lower"):
                with Vertical(id="diag-pane"):
                    yield DiagnosesTable(simulated=self.session.simulated, id="diagnoses")
                    yield DiagnosisDetail(self._fix_lines, changes=self.driver.changes, id="detail")
                names = [n.name for n in self.session.config.nodes]
                yield LogPane(names, self.scrollback, id="log-pane")
        yield StatusLine(id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        # a recipe that cannot be used (unknown, its file does not load) is said here, in
        # the status line and the detail panel; the app runs on without one
        self.problem = self.session.set_aside_bad_recipe()
        self.query_one(DiagnosisDetail).problem = self.problem
        self.query_one(StatusLine).read_only = self.session.read_only
        self.refresh_status()

    def on_resize(self) -> None:
        compact = self.has_class("-narrow") or self.has_class("-short")
        self.query_one(DiagnosisDetail).compact = compact

    def _fix_lines(self, diagnosis, fix) -> list[str]:
        return self.session.fix_lines(diagnosis, fix)

    # --- engine events (routed here by the app) -----------------------------------
    def apply_batch(self, batch: Batch) -> None:
        """Show one batch of monitor events (UI thread)."""
        try:
            pane = self.query_one(LogPane)
            log = pane.view
        except NoMatches:
            return  # the app is closing: its panes (or the log inside) are already gone
        for lines in batch.logs:
            log.add_lines(lines.node, lines.lines, lines.marks, lines.source)
        if batch.dropped_lines:
            log.add_lines(
                "spark-tui",
                [
                    f"… {batch.dropped_lines} lines not shown: the display fell behind (every one was matched)"
                ],
            )
        try:
            if batch.logs:
                pane.update_title()
            table = self.query_one(DiagnosesTable)
        except NoMatches:
            return  # closing: the title or the table went before the log (a traceback on quit)
        head = self.session.config.head.name
        for event in batch.events:
            self.events.said(event)
            if isinstance(event, NodeSampled) and event.node in self._unpaned:
                self._count_unpaned(event.node, event.state.reachable)
            elif isinstance(event, ReachabilityChanged) and event.node in self._unpaned:
                self._count_unpaned(event.node, event.reachability.reachable)
            elif isinstance(event, NodeSampled) and self._has(event.node):
                self._pane(event.node).set_state(event.state)
                if event.node == head:
                    s = event.state.serving
                    self._serving = (s.tok_s or 0.0) if s.phase == "serving" else None
            elif isinstance(event, ReachabilityChanged) and self._has(event.node):
                self._pane(event.node).set_reachability(event.reachability)
                self.post_message(ReachabilityShown(event.node, event.reachability.reachable))
            elif isinstance(event, DiagnosisRaised):
                key = table.upsert(event.diagnosis)
                self.remove_class("-no-walls")
                self._auto_select(key, event.new)
                self.post_message(DiagnosisShown(event.diagnosis, event.new))
            elif isinstance(event, (DiagnosisResolved, DiagnosisFixed)):
                key = table.upsert(event.diagnosis)
                if key == self.selected_key:
                    self._auto_select(table.first_active() or key, True, resolved=True)
        if batch.events:
            with contextlib.suppress(NoMatches):  # the app closing: the status line is gone
                self.refresh_status()

    def _auto_select(self, key: str, new: bool, resolved: bool = False) -> None:
        """Until the user picks a row, show the wall on top (active, most severe, newest);
        a repeat of another row never takes the selection."""
        table = self.query_one(DiagnosesTable)
        if self.user_chose and not resolved:
            if key == self.selected_key:
                self._show_diagnosis(key)  # its evidence may have grown
            return
        top = self._offered_key() or table.first_active()
        target = top if top is not None and (new or resolved) else self.selected_key or key
        if target != self.selected_key or resolved:
            table.move_cursor(row=table.get_row_index(target), scroll=True)
            self._show_diagnosis(target)
        elif target == key:
            self._show_diagnosis(key)

    def _offered_key(self) -> str | None:
        """The row of the wall the driver would fix first (the one key's offer)."""
        move = self.driver.offer()
        if move is None or move.diagnosis is None:
            return None
        key = diagnosis_key(move.diagnosis)
        return key if key in self.query_one(DiagnosesTable).diagnoses else None

    def _has(self, node: str) -> bool:
        if node in self._unpaned:
            return False
        return node in self._paned

    def _count_unpaned(self, node: str, reachable: bool) -> None:
        """A node without a pane: counted in the line under the panes."""
        if node in self._unpaned and self._unpaned[node] is not reachable:
            self._unpaned[node] = reachable
            with contextlib.suppress(NoMatches):
                self.query_one("#more-nodes", Static).update(self._more_text())

    def _more_text(self) -> str:
        seen = [v for v in self._unpaned.values() if v is not None]
        down = sum(1 for v in seen if not v)
        text = f"+{len(self._unpaned)} more nodes: {len(seen) - down} reachable"
        text += f", {down} unreachable" if down else ""
        waiting = len(self._unpaned) - len(seen)
        return text + (f", {waiting} not read yet" if waiting else "") + " (l: a node's log)"

    def _pane(self, node: str) -> NodePane:
        return self.query_one(f"#node-{node}", NodePane)

    def _show_diagnosis(self, key: str) -> None:
        self.selected_key = key
        self.query_one(DiagnosisDetail).diagnosis = self.query_one(DiagnosesTable).diagnoses.get(
            key
        )
        self.refresh_status()

    def on_diagnosis_chosen(self, message: DiagnosisChosen) -> None:
        if message.key != self.selected_key:
            self.user_chose = self.query_one(DiagnosesTable).has_focus
        self._show_diagnosis(message.key)

    def on_node_chosen(self, message: NodeChosen) -> None:
        self.query_one(LogPane).show_node(message.node)

    # --- the status line ------------------------------------------------------------
    def refresh_status(self, **changes: object) -> None:
        """Say what is happening and which key comes next (after any change); `changes`
        update what the screen remembers (fixed, launched, last_failed, requests)."""
        self._memory.update(changes)
        try:
            detail = self.query_one(DiagnosisDetail)
            self.query_one(StatusLine)
        except NoMatches:
            return  # the app is closing: its widgets are already gone
        d = detail.diagnosis
        wall = d if d is not None and d.active and d.severity != "info" else None
        fix = detail.selected_fix() if wall is not None else None
        recipe = self.session.recipe()
        s = Situation(
            recipe=recipe.id if recipe else None,
            running=self.running,
            wall=wall,
            fix_title=fix.title if fix else None,
            fix_number=detail.fix_index % max(1, len(detail.fixes())) + 1,
            serving=self._serving,
            **self._memory,  # type: ignore[arg-type]  # the status line's memory fields (int or None)
        )
        if any(d.state == "fixed" for d in self.session.diagnoses(True)):
            s = dataclasses.replace(s, fixed=True)  # a verified fix waits for its relaunch
        now, key = next_step(s)
        if self.problem and s.running is None and wall is None:
            now, key = f"{self.problem}: running without a recipe", key
        status = self.query_one(StatusLine)
        status.now, status.next_key = now, key
        if s.running is not None:
            status.tone = ""
        elif wall is not None and wall.severity == "error":
            status.tone = "error"
        elif s.serving is not None:
            status.tone = "ok"
        elif wall is not None:
            status.tone = wall.severity
        else:
            status.tone = "error" if s.last_failed or self.problem else ""
        status.recipe = self.session.recipe_label()

    def set_last_action(self, text: str, ok: bool | None) -> None:
        """An action's outcome, for the status line."""
        self.refresh_status(last_failed=None if ok is not False else text)

    # --- actions ------------------------------------------------------------------
    def action_log(self, what: str) -> None:
        self.query_one(LogPane).act(what)

    def action_next_fix(self) -> None:
        self.query_one(DiagnosisDetail).next_fix()
        self.refresh_status()

    def action_apply_fix(self) -> None:
        detail = self.query_one(DiagnosisDetail)
        diagnosis, fix = detail.diagnosis, detail.selected_fix()
        if diagnosis is None or fix is None:
            self.notify("Select a wall with a fix first.", severity="warning")
            return
        if self.session.recipe() is None and self.driver.next_move().kind == "adopt":
            self._adopt_then(lambda: self.action_apply_fix())  # the fix patches that recipe
            return
        self._preview("fix", lambda: self.session.plan_fix(diagnosis, fix))

    def _adopt_then(self, then: Callable[[], None]) -> None:
        """No recipe, an engine running that spark-tui did not start: adopt it as the
        recipe (asked first, as `up` asks), then go on."""
        from spark_tui.driver import Move
        from spark_tui.tui.screens.confirm_modal import ConfirmModal

        try:
            recipe, _text = self.session.adopt_running()
        except SparkTuiError as exc:
            self.notify(str(exc), severity="error")
            return
        question = (
            f"No recipe is in use: adopt the deployment running now as recipe {recipe.id} "
            "(its fixes patch it, and a relaunch starts it)?"
        )

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                self.driver.take(Move("adopt", "adopt what runs"), yes=True)
            except SparkTuiError as exc:
                self.notify(str(exc), severity="error")
                return
            self.refresh_status()
            then()

        self.app.push_screen(ConfirmModal(question, ()), answered)

    def action_relaunch(self) -> None:
        if self.session.recipe() is None and self.driver.next_move().kind == "adopt":
            self._adopt_then(self.action_relaunch)
            return
        self._preview("relaunch", self.session.plan_launch)

    def action_stop_stack(self) -> None:
        self._preview("stop", self.session.plan_stop)

    def _running_action(self) -> str | None:
        """What the app runs now (a fix, a relaunch), if anything."""
        running = getattr(self.app, "running_action", None)  # SparkTuiApp's, or a harness's
        return running() if callable(running) else None

    def _preview(self, action: str, make_plan: Callable) -> None:
        """Plan it and show the plan (preview == run); the modal confirms and runs it."""
        running = self._running_action()
        if running is not None:
            self.notify(f"{running} is running: wait for it.", severity="warning")
            return
        try:
            plan = make_plan()
        except SparkTuiError as exc:
            self.notify(str(exc), severity="error")
            self.set_last_action(f"{action}: {exc}", False)
            return
        self.app.push_screen(FixModal(self.session, plan, action))

    def _start(self, action: str, title: str, job: Callable) -> None:
        self.output = OutputScreen(title)
        self.app.push_screen(self.output)
        self.run_action_worker(action, job)

    @work(thread=True, exclusive=True, exit_on_error=False, group="cluster-action")
    def run_action_worker(self, action: str, job: Callable) -> None:
        def progress(p: ActionProgress) -> None:
            self.post_message(ProgressReported(action, p))

        self.app.call_from_thread(self._started, action)
        try:
            ok, summary = job(progress)
        except SparkTuiError as exc:  # refused (read-only), bad input, a node that failed
            ok, summary = False, str(exc)
        except Exception as exc:  # an engine bug is a failed action, not a dead UI
            ok, summary = False, f"{type(exc).__name__}: {exc}"
        self.post_message(ActionFinished(action, ok, summary))

    def _started(self, action: str) -> None:
        self.running = action
        self.refresh_status()

    def play_scenario(self) -> None:
        """A simulated scenario plays its story: its recipe is launched, as its people did,
        and once it serves a client sends requests (some walls come only under load)."""
        self.story = True
        self.run_action_worker("launch", self._launch_job)

    def _launch_job(self, progress: Callable[[ActionProgress], None]) -> tuple[bool, str]:
        result = self.session.apply(self.session.plan_launch(), progress=progress, yes=True)
        return result.ok, result.summary()

    @work(thread=True, exclusive=True, exit_on_error=False, group="story-client")
    def story_client(self) -> None:
        """The story's client: a chat request every few seconds until one fails."""
        for sent in range(1, STORY_REQUESTS + 1):
            try:
                ok, what = self.session.chat_request()
            except SparkTuiError as exc:
                ok, what = False, str(exc)
            words = f"request {sent}: {what}" if ok else f"request {sent} failed"
            self.app.call_from_thread(self.refresh_status, requests=words)
            if not ok or self._story_stop.wait(STORY_REQUEST_EVERY_S):
                return

    def on_unmount(self) -> None:
        self._story_stop.set()

    def action_doctor(self) -> None:
        self._start("doctor", "Doctor: read-only preflight", self._doctor_job)

    def _doctor_job(self, progress: Callable[[ActionProgress], None]) -> tuple[bool, str]:
        from spark_tui.nodes.doctor import doctor_summary

        report = self.session.doctor()
        words = {"pass": "ok", "fail": "failed", "warn": "warning", "skip": "skipped"}
        for c in report.checks:
            progress(ActionProgress(c.id, c.node, None, words[c.status], c.detail))
        ok = bool(report.reachable) and not any(c.status == "fail" for c in report.checks)
        return ok, doctor_summary(report)

    def action_undo(self) -> None:
        def job(_progress: Callable) -> tuple[bool, str]:
            back = self.session.undo()
            return True, f"recipe {back.id} back to revision {back.revision}"

        self._start("undo", "Undo the last recipe patch", job)

    def action_rollback(self) -> None:
        """Back to the image and recipe revision that last served: the change previewed,
        asked, then applied (a new revision, journaled); the next launch uses it."""
        import time

        running = self._running_action()
        if running is not None:
            self.notify(f"{running} is running: wait for it.", severity="warning")
            return
        try:
            current, served, diff = self.session.rollback_preview()
        except SparkTuiError as exc:
            self.notify(str(exc), severity="error")
            self.set_last_action(f"rollback: {exc}", False)
            return
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(served.time))
        if not diff:
            self.notify(f"{current.id} rev {current.revision} is what served at {when}")
            return
        self._rollback_images(current, served, diff, when)

    @work(thread=True, exclusive=True, exit_on_error=False, group="rollback-preview")
    def _rollback_images(self, current: Recipe, served: Served, diff: str, when: str) -> None:
        """Each node's copy of the image a rollback pins (read from the nodes), then ask."""
        image = "\n".join(self.session.rollback_image_lines(served))
        self.app.call_from_thread(self._ask_rollback, current, served, diff, when, image)

    def _ask_rollback(
        self, current: Recipe, served: Served, diff: str, when: str, image: str
    ) -> None:
        from spark_tui.tui.screens.confirm_modal import ConfirmModal

        lines = diff.rstrip("\n").splitlines()
        shown = "\n".join(lines[:24]) + (
            f"\n… {len(lines) - 24} more lines" if len(lines) > 24 else ""
        )
        prompt = (
            f"Roll {current.id} back to what served at {when} "
            f"(revision {served.revision}, image {served.image or 'none'})?\n"
            f"A new revision; the next launch uses it.\n{image}\n\n{shown}"
        )

        def answer(yes: bool | None) -> None:
            if not yes:
                return

            def job(_progress: Callable) -> tuple[bool, str]:
                after = self.session.rollback()
                return (
                    True,
                    f"recipe {after.id} at revision {after.revision}: what served at {when}",
                )

            self._start("rollback", "Roll back to what last served", job)

        self.app.push_screen(ConfirmModal(prompt, None, yes="Roll back (y)"), answer)

    def _stepped(self, step: Step) -> None:
        """A driver's step (from the thread that took it): its lines in the journal."""
        self.events.stepped(step, self.session.recipe())

    def action_events(self) -> None:
        from spark_tui.tui.screens.events_screen import EventsScreen

        self.app.push_screen(EventsScreen(self.events))

    def action_export_report(self) -> None:
        diagnoses = list(self.query_one(DiagnosesTable).diagnoses.values())

        def job(_progress: Callable) -> tuple[bool, str]:
            return True, f"written to {self.session.export_report(diagnoses)}"

        self._start("export", "Export the incident report", job)

    def on_progress_reported(self, message: ProgressReported) -> None:
        if self.output is not None and self.output.is_attached:
            self.output.add_progress(message.progress)

    def on_action_finished(self, message: ActionFinished) -> None:
        message.stop()
        self.finished(message)

    def finished(self, message: ActionFinished) -> None:
        """An action ended (this screen's worker, or a fix modal's run): the status says
        what comes next; a simulated story's launch that serves starts its client."""
        if message.action == self.running:
            self.running = None
        self.last_result = (message.action, message.ok, message.summary)
        launched = message.action in ("launch", "relaunch")
        changes: dict[str, object] = {
            "last_failed": None if message.ok else f"{message.action}: {message.summary}",
            "launched": bool(self._memory["launched"]) or launched,
            "fixed": (message.action == "fix" and message.ok)
            or (bool(self._memory["fixed"]) and not launched),
        }
        if launched:
            changes["requests"] = None
        self.refresh_status(**changes)
        if self.output is not None and self.output.is_attached:
            self.output.finish(message.ok, message.summary)
        if launched and message.ok and self.story:
            self.story_client()
