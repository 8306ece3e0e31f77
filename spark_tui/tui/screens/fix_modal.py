"""Run a plan (a wall's fix, a relaunch, a stop): preview the exact commands per node,
confirm, stream the run, show how it ended and what was checked."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Log, Static

from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.redact import redact
from spark_tui.remedy.fixes import FixPlan
from spark_tui.session import Session
from spark_tui.tui.messages import ActionFinished, ProgressReported

RISK_STYLE = {"safe": "green", "disruptive": "yellow", "destructive": "bold red"}
DIFF_STYLE = {"-": "red", "+": "green", "@": "magenta"}


def plan_text(lines: list[str], note: str = "") -> Text:
    """A plan as it will run: '# on NODE:' headers bold, notes dim, recipe diffs coloured,
    commands as typed at a prompt (only commands get the `$`)."""
    t = Text()
    in_diff = False
    for line in lines:
        if line.startswith("# on "):
            in_diff = False
            t.append(line[2:] + "\n", style="bold")
        elif line.startswith("#"):
            in_diff = "gets a new revision" in line
            t.append(f"  {line}\n", style="dim")
        elif line.startswith(("---", "+++")) or (in_diff and line[:1] in ("-", "+", "@", " ")):
            in_diff = True
            t.append(f"    {line}\n", style=DIFF_STYLE.get(line[:1], "dim"))
        else:
            t.append(f"  $ {line}\n", style="cyan")
    if note:
        t.append(f"\n{' '.join(note.split())}\n", style="italic")
    return t


class FixModal(ModalScreen[bool]):
    """Preview → (confirm) → running → done; dismisses with whether it worked."""

    BINDINGS: ClassVar = [
        Binding("y", "confirm", "Yes, run it"),
        Binding("n", "cancel", "No"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, session: Session, plan: FixPlan, action: str = "fix") -> None:
        super().__init__(classes="fix-modal")
        self.session = session
        self.plan = plan
        self.action = action  # fix | relaunch | stop: the status line's word for it
        self.phase = "preview"  # preview | running | done
        self.result: bool = False

    def compose(self) -> ComposeResult:
        with Vertical(id="fix-dialog"):
            yield Static(self._title(), id="fix-title")
            with VerticalScroll(id="fix-commands"):
                yield Static(
                    plan_text(self.plan.preview_lines()[1:], self.plan.fix.note), id="fix-preview"
                )
            yield Static(self._question(), id="fix-question")
            yield Log(id="fix-output", max_lines=2000, classes="-hidden")
            with Horizontal(id="fix-buttons"):
                yield Button("Cancel (n)", id="cancel", variant="default")
                yield Button(
                    "Run (y)",
                    id="apply",
                    variant="warning" if self.plan.needs_confirmation else "primary",
                )

    def on_mount(self) -> None:
        # for disruptive/destructive plans the safe answer has focus first
        self.query_one("#cancel" if self.plan.needs_confirmation else "#apply", Button).focus()

    def _title(self) -> Text:
        f = self.plan.fix
        t = Text()
        t.append(f"{f.title}\n", style="bold")
        if self.plan.wall and self.plan.wall != f.id:
            t.append(f"for {self.plan.wall} · ")
        t.append("risk ")
        t.append(f.risk, style=RISK_STYLE.get(f.risk, ""))
        t.append(" · needs root" if f.root else "")
        return t

    def _question(self) -> Text:
        p = self.plan
        if self.session.read_only:
            return Text(
                "Read-only (started with --read-only): this shows what would run; nothing will.",
                style="bold red",
            )
        if p.needs_confirmation:
            style = "bold red" if p.fix.risk == "destructive" else "bold yellow"
            return Text(f"{p.confirmation_prompt()}  y / n", style=style)
        nodes = ", ".join(p.nodes) or "no node (a recipe change only)"
        return Text(f"Runs on {nodes}. Run it? y / n")

    @property
    def running(self) -> str | None:
        """The action while it runs (quit asks first), else None."""
        return self.action if self.phase == "running" else None

    # --- actions ----------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        if self.phase == "running":
            self.notify("It is running; wait for it to finish.", severity="warning")
            return
        self.dismiss(self.result)

    def action_confirm(self) -> None:
        if self.phase != "preview":
            if self.phase == "done":
                self.dismiss(self.result)
            return
        self.phase = "running"
        self.query_one("#fix-output", Log).remove_class("-hidden")
        self.query_one("#fix-question", Static).update(Text("Running…", style="bold"))
        self.query_one("#apply", Button).disabled = True
        self.query_one("#cancel", Button).display = False
        self.run_plan()

    @work(thread=True, exclusive=True, exit_on_error=False, group="fix")
    def run_plan(self) -> None:
        allowed = set(self.plan.nodes)

        def confirm(_prompt: str, nodes: tuple[str, ...]) -> bool:
            # the user confirmed in this modal, for the nodes it named; nothing more
            return set(nodes) <= allowed

        def progress(p: ActionProgress) -> None:
            self.post_message(ProgressReported(self.action, p))

        try:
            result = self.session.apply(self.plan, confirm, progress)
            ok, summary = result.ok, result.summary()
        except SparkTuiError as exc:  # refused (read-only, another change running, journal)
            ok, summary = False, str(exc)
        except Exception as exc:  # an engine bug must end the modal, not hang it
            ok, summary = False, f"{type(exc).__name__}: {exc}"
        self.app.call_from_thread(self._finished, ok, redact(summary))

    def on_progress_reported(self, message: ProgressReported) -> None:
        message.stop()
        p = message.progress
        where = f"[{p.node}] " if p.node else ""
        line = f"{where}{p.status:>7} {p.step}"
        if p.command:
            line += f": $ {p.command}"
        if p.detail:
            line += f"\n        {p.detail}"
        log = self.query_one("#fix-output", Log)
        log.write_line(redact(line))
        log.scroll_end(animate=False)

    def _finished(self, ok: bool, summary: str) -> None:
        """The run ended (UI thread): say how, and tell the app once (its status line)."""
        self.phase = "done"
        self.result = ok
        verdict = "Done — " if ok else "Failed — "
        self.query_one("#fix-question", Static).update(
            Text(
                verdict + summary + "   (Enter or Escape closes)",
                style="bold green" if ok else "bold red",
            )
        )
        apply = self.query_one("#apply", Button)
        apply.label = "Close"
        apply.disabled = False
        apply.focus()
        self.app.post_message(ActionFinished(self.action, ok, summary))
