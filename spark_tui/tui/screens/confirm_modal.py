"""Asked by an engine mid-run: a disruptive or destructive step, naming its nodes."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmModal(ModalScreen[bool]):
    """y confirms; n or Escape cancels; the cancel button has focus first."""

    BINDINGS: ClassVar = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, prompt: str, nodes: tuple[str, ...] | None, yes: str = "Yes (y)") -> None:
        super().__init__(classes="confirm-modal")
        self.prompt = prompt
        self.nodes = nodes  # None or (): the question is not about nodes
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(Text(self.prompt, style="bold"))
            if self.nodes:
                yield Static(f"Nodes: {', '.join(self.nodes)}")
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel (n)", id="no")
                yield Button(self.yes, id="yes", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
