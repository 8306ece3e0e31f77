"""The main screen: node panes, the log, the walls seen and their fixes, the status line."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Label

from spark_tui.errors import SparkTuiError
from spark_tui.events import (
    ActionProgress,
    DiagnosisRaised,
    DiagnosisResolved,
    NodeSampled,
    ReachabilityChanged,
)
from spark_tui.session import Session
from spark_tui.tui.event_pump import Batch
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
from spark_tui.tui.widgets.diagnoses_table import DiagnosesTable
from spark_tui.tui.widgets.diagnosis_detail import DiagnosisDetail
from spark_tui.tui.widgets.log_view import LogView
from spark_tui.tui.widgets.node_pane import NodePane
from spark_tui.tui.widgets.status_line import StatusLine


class MainScreen(Screen):
    """Everything live at once; the keys act on the selected diagnosis and the cluster."""

    HORIZONTAL_BREAKPOINTS: ClassVar = [(0, "-narrow"), (100, "-wide")]
    BINDINGS: ClassVar = [
        Binding("a", "apply_fix", "Apply fix"),
        Binding("right_square_bracket", "next_fix", "Next fix", show=False),
        Binding("r", "relaunch", "Relaunch"),
        Binding("s", "stop_stack", "Stop"),
        Binding("d", "doctor", "Doctor"),
        Binding("l", "cycle_log_source", "Log src"),
        Binding("slash", "search", "Search"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("u", "undo", "Undo patch"),
        Binding("e", "export_report", "Export"),
    ]

    def __init__(self, session: Session, scrollback: int = 100_000) -> None:
        super().__init__(id="main")
        self.session = session
        self.scrollback = scrollback
        self.output: OutputScreen | None = None
        self.selected_key: str | None = None
        self.user_chose = False  # the user picked a row: stop following the newest

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="body"):
            with Grid(id="nodes"):
                for node in self.session.config.nodes:
                    yield NodePane(node)
            with Horizontal(id="lower"):
                with Vertical(id="log-pane"):
                    yield Label("log: every node, merged · follow on", id="log-title")
                    yield LogView(self.scrollback, id="log")
                    yield Input(
                        placeholder="search the log (Enter: next)", id="search", classes="-hidden"
                    )
                with Vertical(id="diag-pane"):
                    yield DiagnosesTable(id="diagnoses")
                    yield DiagnosisDetail(self._fix_lines, id="detail")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        status = self.query_one(StatusLine)
        status.cluster = self.session.describe()
        status.recipe = self.session.recipe_label()
        status.read_only = self.session.read_only
        n = len(self.session.config.nodes)
        self.query_one("#nodes", Grid).add_class(f"-cols-{min(3, max(1, n))}")

    def _fix_lines(self, diagnosis, fix) -> list[str]:
        return self.session.fix_lines(diagnosis, fix)

    # --- engine events (routed here by the app) -----------------------------------
    def apply_batch(self, batch: Batch) -> None:
        """Show one batch of monitor events (UI thread)."""
        try:
            log = self.query_one(LogView)
        except NoMatches:
            return  # the app is closing: its panes are already gone

        for lines in batch.logs:
            log.add_lines(lines.node, lines.lines, lines.marks)
        if batch.dropped_lines:
            log.add_lines(
                "spark-tui", [f"… {batch.dropped_lines} lines skipped (display fell behind)"]
            )
        table = self.query_one(DiagnosesTable)
        for event in batch.events:
            if isinstance(event, NodeSampled) and self._has(event.node):
                self._pane(event.node).set_state(event.state)
            elif isinstance(event, ReachabilityChanged) and self._has(event.node):
                self._pane(event.node).set_reachability(event.reachability)
                self.post_message(ReachabilityShown(event.node, event.reachability.reachable))
            elif isinstance(event, DiagnosisRaised):
                key = table.upsert(event.diagnosis)
                self._auto_select(key, event.diagnosis, event.new)
                self.post_message(DiagnosisShown(event.diagnosis, event.new))
            elif isinstance(event, DiagnosisResolved):
                key = table.upsert(event.diagnosis)
                if key == self.selected_key:
                    self._show_diagnosis(key)
            elif isinstance(event, ActionProgress):
                self.set_last_action(f"{event.step}: {event.status}", event.status != "failed")

    def _auto_select(self, key: str, diagnosis, new: bool) -> None:
        """Until the user picks a row, show the most severe diagnosis, the newest among
        equals; a repeat of another row never takes the selection."""
        if self.user_chose or (not new and key != self.selected_key):
            if key == self.selected_key:
                self._show_diagnosis(key)  # its evidence may have grown
            return
        current = self.query_one(DiagnosesTable).diagnoses.get(self.selected_key or "")
        rank = {"error": 0, "warning": 1, "info": 2}
        if current is None or rank[diagnosis.severity] <= rank[current.severity]:
            table = self.query_one(DiagnosesTable)
            table.move_cursor(row=table.get_row_index(key), scroll=True)
            self._show_diagnosis(key)

    def _has(self, node: str) -> bool:
        return any(n.name == node for n in self.session.config.nodes)

    def _pane(self, node: str) -> NodePane:
        return self.query_one(f"#node-{node}", NodePane)

    def _show_diagnosis(self, key: str) -> None:
        self.selected_key = key
        self.query_one(DiagnosisDetail).diagnosis = self.query_one(DiagnosesTable).diagnoses.get(
            key
        )

    def on_diagnosis_chosen(self, message: DiagnosisChosen) -> None:
        if message.key != self.selected_key:
            self.user_chose = self.query_one(DiagnosesTable).has_focus
        self._show_diagnosis(message.key)

    def on_node_chosen(self, message: NodeChosen) -> None:
        self._set_log_source(message.node)

    def set_last_action(self, text: str, ok: bool | None) -> None:
        status = self.query_one(StatusLine)
        status.last_action, status.last_ok = text, ok
        status.recipe = self.session.recipe_label()  # a fix may have patched or switched it

    # --- log ----------------------------------------------------------------------
    def _set_log_source(self, node: str | None) -> None:
        log = self.query_one(LogView)
        log.source = node
        self._update_log_title()

    def _update_log_title(self) -> None:
        log = self.query_one(LogView)
        src = "every node, merged" if log.source is None else log.source
        follow = "on" if log.follow else "off"
        search = f" · search: {log.search}" if log.search else ""
        self.query_one("#log-title", Label).update(f"log: {src} · follow {follow}{search}")

    def action_cycle_log_source(self) -> None:
        names: list[str | None] = [None, *(n.name for n in self.session.config.nodes)]
        current = self.query_one(LogView).source
        self._set_log_source(names[(names.index(current) + 1) % len(names)])

    def action_toggle_follow(self) -> None:
        log = self.query_one(LogView)
        log.follow = not log.follow
        self._update_log_title()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.remove_class("-hidden")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search":
            return
        row = self.query_one(LogView).find_next(event.value)
        self._update_log_title()
        if event.value and row is None:
            self.notify(f"not in the log: {event.value}", severity="warning")

    def on_key(self, event) -> None:
        box = self.query_one("#search", Input)
        if event.key == "escape" and box.has_focus:
            box.add_class("-hidden")
            self.query_one(LogView).focus()
            event.stop()

    # --- actions ------------------------------------------------------------------
    def action_next_fix(self) -> None:
        self.query_one(DiagnosisDetail).next_fix()

    def action_apply_fix(self) -> None:
        detail = self.query_one(DiagnosisDetail)
        diagnosis, fix = detail.diagnosis, detail.selected_fix()
        if diagnosis is None or fix is None:
            self.notify("Select a diagnosis with a fix first.", severity="warning")
            return
        self._preview("fix", lambda: self.session.plan_fix(diagnosis, fix))

    def action_relaunch(self) -> None:
        self._preview("relaunch", self.session.plan_launch)

    def action_stop_stack(self) -> None:
        self._preview("stop", self.session.plan_stop)

    def _preview(self, action: str, make_plan: Callable) -> None:
        """Plan it and show the plan (preview == run); the modal confirms and runs it."""
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
        self.set_last_action(f"{action}: running", None)
        self.run_action_worker(action, job)

    @work(thread=True, exclusive=True, exit_on_error=False, group="cluster-action")
    def run_action_worker(self, action: str, job: Callable) -> None:
        def progress(p: ActionProgress) -> None:
            self.post_message(ProgressReported(action, p))

        try:
            ok, summary = job(progress)
        except SparkTuiError as exc:  # refused (read-only), bad input, a node that failed
            ok, summary = False, str(exc)
        except Exception as exc:  # an engine bug is a failed action, not a dead UI
            ok, summary = False, f"{type(exc).__name__}: {exc}"
        self.post_message(ActionFinished(action, ok, summary))

    def play_scenario(self) -> None:
        """A simulated scenario plays its story: its recipe is launched, as its people did."""
        self.set_last_action("launching the scenario's recipe (simulated cluster)", None)
        self.run_action_worker("launch", self._launch_job)

    def _launch_job(self, progress: Callable[[ActionProgress], None]) -> tuple[bool, str]:
        result = self.session.apply(self.session.plan_launch(), progress=progress, yes=True)
        return result.ok, result.summary()

    def action_doctor(self) -> None:
        self._start("doctor", "Doctor: read-only preflight", self._doctor_job)

    def _doctor_job(self, progress: Callable[[ActionProgress], None]) -> tuple[bool, str]:
        from spark_tui.bringup import doctor_summary

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
        self.set_last_action(f"{message.action}: {message.summary}", message.ok)
        if self.output is not None and self.output.is_attached:
            self.output.finish(message.ok, message.summary)
