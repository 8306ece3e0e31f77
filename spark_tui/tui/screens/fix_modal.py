"""Apply a fix: preview the exact commands per node, confirm, stream the run, show the verify."""

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
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.tui.messages import ActionFinished, ProgressReported
from spark_tui.tui.session import ClusterSession, FixPreview


class FixModal(ModalScreen[bool]):
    """Preview → (confirm) → running → applied/failed; dismisses with whether it worked."""

    BINDINGS: ClassVar = [
        Binding("y", "confirm", "Yes, apply"),
        Binding("n", "cancel", "No"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, session: ClusterSession, diagnosis: Diagnosis, preview: FixPreview) -> None:
        super().__init__(classes="fix-modal")
        self.session = session
        self.diagnosis = diagnosis
        self.preview = preview
        self.phase = "preview"  # preview | running | done
        self.result: bool = False

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical(id="fix-dialog"):
            yield Static(self._title(), id="fix-title")
            with VerticalScroll(id="fix-commands"):
                yield Static(self._commands_text(), id="fix-preview")
            yield Static(self._question(), id="fix-question")
            yield Log(id="fix-output", max_lines=2000, classes="-hidden")
            with Horizontal(id="fix-buttons"):
                yield Button("Cancel (n)", id="cancel", variant="default")
                yield Button(
                    "Apply (y)",
                    id="apply",
                    variant="warning" if p.needs_confirmation else "primary",
                )

    def on_mount(self) -> None:
        # for disruptive/destructive fixes the safe answer has focus first
        self.query_one("#cancel" if self.preview.needs_confirmation else "#apply", Button).focus()

    def _title(self) -> Text:
        f = self.preview.fix
        t = Text()
        t.append(f"Apply fix: {f.title}\n", style="bold")
        t.append(f"for {self.preview.wall} · risk ")
        t.append(f.risk, style={"safe": "green", "disruptive": "yellow"}.get(f.risk, "bold red"))
        t.append(" · needs root" if f.root else "")
        return t

    def _commands_text(self) -> Text:
        """The engine's plan as it will run: notes dim, commands as typed at a prompt."""
        t = Text()
        for line in self.preview.lines()[1:]:
            if line.startswith("# on "):
                t.append(line[2:] + "\n", style="bold")
            elif line.startswith(("#", "---", "+++", "@@", "-", "+")):
                t.append(f"  {line}\n", style="dim" if line.startswith("#") else "yellow")
            else:
                t.append(f"  $ {line}\n", style="cyan")
        if self.preview.fix.note:
            t.append(f"\n{' '.join(self.preview.fix.note.split())}\n", style="italic")
        return t

    def _question(self) -> Text:
        p = self.preview
        if self.session.read_only:
            return Text(
                "Read-only: this fix will not be applied (started with --read-only).",
                style="bold red",
            )
        nodes = ", ".join(p.nodes) or "no node (recipe change only)"
        if p.needs_confirmation:
            style = "bold red" if p.fix.risk == "destructive" else "bold yellow"
            return Text(f"{p.plan.confirmation_prompt()}  y / n", style=style)
        return Text(f"Runs on {nodes}. Apply? y / n")

    # --- actions ----------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        if self.phase == "running":
            self.notify("The fix is running; wait for it to finish.", severity="warning")
            return
        self.dismiss(self.result)

    def action_confirm(self) -> None:
        if self.phase != "preview":
            if self.phase == "done":
                self.dismiss(self.result)
            return
        if self.session.read_only:
            msg = f"read-only: refused to apply {self.preview.fix.id} (started with --read-only)"
            self.notify(msg, severity="error")
            self.app.post_message(ActionFinished("fix", False, msg))
            return
        self.phase = "running"
        self.query_one("#fix-output", Log).remove_class("-hidden")
        self.query_one("#fix-question", Static).update(Text("Running…", style="bold"))
        self.query_one("#apply", Button).disabled = True
        self.query_one("#cancel", Button).disabled = True
        self.run_fix()

    @work(thread=True, exclusive=True, exit_on_error=False, group="fix")
    def run_fix(self) -> None:
        allowed = set(self.preview.nodes)

        def confirm(_prompt: str, nodes: tuple[str, ...]) -> bool:
            # the user confirmed in this modal, for the nodes it named; nothing more
            return set(nodes) <= allowed

        def progress(p: ActionProgress) -> None:
            self.post_message(ProgressReported("fix", p))

        try:
            ok, summary = self.session.apply_fix(self.preview, confirm, progress)
        except SparkTuiError as exc:
            ok, summary = False, str(exc)
        except Exception as exc:  # an engine bug must end the modal, not hang it
            ok, summary = False, f"{type(exc).__name__}: {exc}"
        self.post_message(ActionFinished("fix", ok, summary))

    def on_progress_reported(self, message: ProgressReported) -> None:
        message.stop()
        p = message.progress
        where = f"[{p.node}] " if p.node else ""
        line = f"{where}{p.status:>7} {p.step}"
        if p.command:
            line += f": $ {p.command}"
        if p.detail:
            line += f"\n        {p.detail}"
        self.query_one("#fix-output", Log).write_line(line)

    def on_action_finished(self, message: ActionFinished) -> None:
        message.stop()
        self.phase = "done"
        self.result = message.ok
        verdict = "Applied and verified: " if message.ok else "Failed: "
        self.query_one("#fix-question", Static).update(
            Text(
                verdict + message.summary + "   (Enter or Escape closes)",
                style="bold green" if message.ok else "bold red",
            )
        )
        apply = self.query_one("#apply", Button)
        apply.label = "Close"
        apply.disabled = False
        apply.focus()
        # the app records the outcome in the status line too
        self.app.post_message(ActionFinished("fix", message.ok, message.summary))
