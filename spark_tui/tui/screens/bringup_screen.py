"""Guided first bring-up: cluster → recipe → doctor → fixes → launch → serving.

Each step shows what it runs; a failed step lands on its diagnosis with the driver's fix
ready (`a`); running the step again goes on from there. The steps are the driver's
(spark_tui.driver, through spark_tui.bringup): the same as `spark-tui up` takes.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import (
    ContentSwitcher,
    Footer,
    Header,
    Label,
    ListItem,
    ListView,
    Log,
    ProgressBar,
    Static,
)

from spark_tui.bringup import BRINGUP_STEPS, GuidedBringUp, StepOutcome
from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress, NodeSampled
from spark_tui.session import Session
from spark_tui.tui.event_pump import Batch
from spark_tui.tui.formatting import serving_text
from spark_tui.tui.messages import ActionFinished, ProgressReported
from spark_tui.tui.screens.confirm_modal import ConfirmModal
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.widgets.cluster_form import ClusterForm
from spark_tui.tui.widgets.recipe_chooser import RecipeChooser

GLYPH = {"pending": "○", "running": "◐", "ok": "✓", "failed": "✗", "skipped": "–"}


class BringUpScreen(Screen):
    """A list of steps on the left, the selected step on the right."""

    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 - Textual types it per instance
    BINDINGS: ClassVar = [
        Binding("g", "run_step", "Run step"),
        Binding("a", "apply_fix", "Apply fix"),
        Binding("escape", "back", "Main screen"),
    ]

    def __init__(self, session: Session, bringup: GuidedBringUp) -> None:
        super().__init__(id="bringup")
        self.session = session
        self.driver = bringup
        self.driver.confirm = self._ask  # the driver asks before disruptive steps
        self.step = self.driver.resume_step()
        self.outcome: StepOutcome | None = None
        self.running: str | None = None  # "bring-up STEP" while a step runs (quit asks)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="bringup-body"):
            yield ListView(
                *(ListItem(Label(self._label(sid)), id=f"step-{sid}") for sid, _t in BRINGUP_STEPS),
                id="bringup-steps",
            )
            with Vertical(id="bringup-main"):
                yield Static("", id="step-title")
                with ContentSwitcher(initial="step-runner", id="step-switcher"):
                    c = self.session.config
                    yield ClusterForm([n.host for n in c.nodes], c.nodes[0].user, c.head.fabric_if)
                    yield RecipeChooser(self.driver.recipes(), self.driver.recipe_id)
                    with Vertical(id="step-runner"):
                        with VerticalScroll(id="step-runs-box"):
                            yield Static("", id="step-runs")
                        yield ProgressBar(total=100, id="step-progress", show_eta=False)
                        yield Log(id="step-log", max_lines=5000)
                yield Static("", id="step-result")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = "guided bring-up · " + self.session.describe()
        self._show(self.step)
        index = [sid for sid, _t in BRINGUP_STEPS].index(self.step)
        self.query_one(ListView).index = index

    def _label(self, sid: str) -> str:
        title = dict(BRINGUP_STEPS)[sid]
        n = [s for s, _t in BRINGUP_STEPS].index(sid) + 1
        return f"{GLYPH[self.driver.status(sid)]} {n}. {title}"

    def _refresh_labels(self) -> None:
        for sid, _t in BRINGUP_STEPS:
            self.query_one(f"#step-{sid} Label", Label).update(self._label(sid))

    def _show(self, sid: str) -> None:
        self.step = sid
        self.query_one("#step-title", Static).update(
            Text(f"{dict(BRINGUP_STEPS)[sid]}", style="bold")
        )
        switcher = self.query_one(ContentSwitcher)
        switcher.current = {"cluster": "cluster-form", "recipe": "recipe-chooser"}.get(
            sid, "step-runner"
        )
        runs = Text()
        runs.append("Runs:\n", style="bold")
        for line in self.driver.commands(sid):
            runs.append(f"  {line}\n", style="dim" if line.startswith("#") else "cyan")
        self.query_one("#step-runs", Static).update(runs)
        self.query_one("#step-progress", ProgressBar).display = sid == "launch"
        if sid == "recipe" and self.driver.recipe_id is None:
            move = self.driver.driver.next_move()
            if move.kind == "adopt":
                self.notify("No recipe named: g adopts the deployment running now.")
        self._show_result()

    def _show_result(self) -> None:
        o = self.outcome if self.outcome and self.outcome.step == self.step else None
        text = Text()
        if o is not None:
            text.append(
                ("✓ " if o.ok else "✗ ") + o.summary, style="bold green" if o.ok else "bold red"
            )
            if o.diagnosis is not None:
                d = o.diagnosis
                text.append(
                    f"\nDiagnosis: {d.wall.title} ({d.wall.id} on {d.node or d.source})\n",
                    style="bold",
                )
                fix = self.driver.driver.fix_for(d)
                if fix is not None:
                    text.append(f"Fix ready (a): {fix.title} [{fix.risk}]\n", style="yellow")
                    for line in self.session.fix_lines(d, fix):
                        text.append(f"  {line}\n", style="dim" if line.startswith("#") else "cyan")
                text.append("Then g runs the step again (the bring-up resumes here).", style="dim")
        else:
            status = self.driver.status(self.step)
            text.append(
                "g runs this step." if status != "ok" else "Done. g runs it again.", style="dim"
            )
            if status == "failed" and self.step == "doctor":
                text.append("\nA check failed: g on the next step fixes what it can.", style="dim")
        self.query_one("#step-result", Static).update(text)

    def _ask(self, prompt: str, nodes: tuple[str, ...]) -> bool:
        """From the engine's thread: ask in a modal naming the nodes, wait for the answer."""
        answered = threading.Event()
        answer: list[bool] = []

        def show() -> None:
            def done(ok: bool | None) -> None:
                answer.append(bool(ok))
                answered.set()

            self.app.push_screen(ConfirmModal(prompt, nodes), done)

        self.app.call_from_thread(show)
        while not answered.wait(0.5):
            if not self.app.is_running:
                return False
        return answer[0]

    # --- navigation -------------------------------------------------------------------
    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        if event.item is not None and event.item.id:
            self._show(event.item.id.removeprefix("step-"))

    def action_back(self) -> None:
        self.app.pop_screen()

    # --- steps 1 and 2: the form and the recipe ---------------------------------------
    def on_cluster_form_detect_requested(self, message: ClusterForm.DetectRequested) -> None:
        self.query_one(ClusterForm).say("Probing the hosts…")
        self.detect_interfaces(message.hosts, message.user)

    @work(thread=True, exclusive=True, exit_on_error=False, group="bringup-detect")
    def detect_interfaces(self, hosts: list[str], user: str | None) -> None:
        try:
            names, preferred, note = self.driver.detect_interfaces(hosts, user)
        except SparkTuiError as exc:
            names, preferred, note = [], None, str(exc)
        self.app.call_from_thread(
            self.query_one(ClusterForm).offer_interfaces, names, preferred, note
        )

    def on_cluster_form_write_requested(self, message: ClusterForm.WriteRequested) -> None:
        try:
            path = self.driver.write_cluster(message.hosts, message.user, message.fabric_if)
        except SparkTuiError as exc:
            self.query_one(ClusterForm).say(f"Not written: {exc}")
            return
        self.query_one(ClusterForm).say(f"Written: {path}")
        self._step_done(StepOutcome("cluster", True, f"cluster.yaml written: {path}"))

    def on_recipe_chooser_recipe_picked(self, message: RecipeChooser.RecipePicked) -> None:
        self.driver.choose_recipe(message.recipe_id)
        self._step_done(StepOutcome("recipe", True, f"recipe {message.recipe_id}"))

    # --- steps 3..7: run through the engine ---------------------------------------------
    def action_run_step(self) -> None:
        if self.step == "recipe" and self.driver.driver.next_move().kind == "adopt":
            self.query_one("#step-log", Log).clear()
            self.driver.mark("recipe", "running")
            self.running = "bring-up step recipe"
            self._refresh_labels()
            self.run_engine_step("recipe")
            return
        if self.step in ("cluster", "recipe"):
            self.notify("Fill in the form (cluster) or pick a recipe with Enter.")
            return
        self.query_one("#step-log", Log).clear()
        self.driver.mark(self.step, "running")
        self.running = f"bring-up step {self.step}"
        self._refresh_labels()
        self.run_engine_step(self.step)

    @work(thread=True, exclusive=True, exit_on_error=False, group="bringup")
    def run_engine_step(self, sid: str) -> None:
        def progress(p: ActionProgress) -> None:
            self.post_message(ProgressReported(sid, p))

        try:
            outcome = self.driver.run(sid, progress)
        except SparkTuiError as exc:
            outcome = StepOutcome(sid, False, str(exc))
        except Exception as exc:  # an engine bug fails the step, never the screen
            outcome = StepOutcome(sid, False, f"{type(exc).__name__}: {exc}")
        self.app.call_from_thread(self._step_done, outcome)

    def _step_done(self, outcome: StepOutcome) -> None:
        self.outcome = outcome
        self.running = None
        self.driver.mark(outcome.step, "ok" if outcome.ok else "failed")
        self._refresh_labels()
        self.app.post_message(
            ActionFinished(f"bring-up {outcome.step}", outcome.ok, outcome.summary)
        )
        if outcome.ok:
            nxt = self.driver.resume_step()
            self.query_one(ListView).index = [s for s, _t in BRINGUP_STEPS].index(nxt)
            self._show(nxt)
        else:
            self._show(outcome.step)

    def on_progress_reported(self, message: ProgressReported) -> None:
        p = message.progress
        line = f"{'[' + p.node + '] ' if p.node else ''}{p.status:>7} {p.step}"
        if p.command:
            line += f": $ {p.command}"
        if p.detail:
            line += f"  {p.detail}"
        self.query_one("#step-log", Log).write_line(line)

    def apply_batch(self, batch: Batch) -> None:
        """Live readings while a step runs: weight loading and graph capture progress."""
        if not self.is_attached:
            return
        head = self.session.config.head.name
        for event in batch.events:
            if isinstance(event, NodeSampled) and event.node == head and self.step == "launch":
                s = event.state.serving
                bar = self.query_one("#step-progress", ProgressBar)
                if s.phase == "loading" and s.load_pct is not None:
                    bar.update(total=100, progress=s.load_pct)
                elif s.phase == "capturing" and s.capture_total:
                    bar.update(total=s.capture_total, progress=s.capture_done or 0)
                self.query_one("#step-title", Static).update(
                    Text(f"Launch · {head}: {serving_text(s)}", style="bold")
                )

    def action_apply_fix(self) -> None:
        o = self.outcome
        if o is None or o.diagnosis is None:
            self.notify("No failed step with a diagnosis here.", severity="warning")
            return
        d = o.diagnosis
        fix = self.driver.driver.fix_for(d)
        if fix is None:
            self.notify(f"{d.wall.id} has no fix to apply.", severity="warning")
            return
        try:
            plan = self.session.plan_fix(d, fix)
        except SparkTuiError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(FixModal(self.session, plan))
