"""Bring-up step 1: the cluster — hosts, user, and the fabric interface found on the nodes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, Select, Static


class ClusterForm(Vertical):
    """A short form; `Detect` asks the app to probe the hosts, `Write` to save cluster.yaml."""

    class DetectRequested(Message):
        def __init__(self, hosts: list[str], user: str | None) -> None:
            self.hosts, self.user = hosts, user
            super().__init__()

    class WriteRequested(Message):
        def __init__(self, hosts: list[str], user: str | None, fabric_if: str | None) -> None:
            self.hosts, self.user, self.fabric_if = hosts, user, fabric_if
            super().__init__()

    def __init__(self, hosts: list[str], user: str | None, fabric_if: str | None) -> None:
        super().__init__(id="cluster-form")
        self._hosts, self._user, self._fabric = hosts, user, fabric_if

    def compose(self) -> ComposeResult:
        yield Label("Hosts (the head first; addresses or ~/.ssh/config aliases, space-separated)")
        yield Input(" ".join(self._hosts), id="form-hosts", placeholder="10.0.0.1 10.0.0.2")
        yield Label("SSH user (empty: ~/.ssh/config, else your own)")
        yield Input(self._user or "", id="form-user", placeholder="milo")
        yield Label("Fabric interface (the 200G port; detected on the nodes)")
        options = [(self._fabric, self._fabric)] if self._fabric else []
        yield Select(options, id="form-fabric", prompt="detect first", allow_blank=True)
        yield Static("", id="form-note")
        with Horizontal(classes="form-buttons"):
            yield Button("Detect interfaces", id="form-detect")
            yield Button("Write cluster.yaml", id="form-write", variant="primary")

    def values(self) -> tuple[list[str], str | None, str | None]:
        hosts = self.query_one("#form-hosts", Input).value.split()
        user = self.query_one("#form-user", Input).value.strip() or None
        fabric = self.query_one("#form-fabric", Select).value
        return hosts, user, fabric if isinstance(fabric, str) else None

    def offer_interfaces(self, names: list[str], preferred: str | None, note: str) -> None:
        """Show the interfaces the nodes have; the detected fabric one chosen."""
        select = self.query_one("#form-fabric", Select)
        select.set_options([(n, n) for n in names])
        if preferred in names:
            select.value = preferred
        self.query_one("#form-note", Static).update(note)

    def say(self, note: str) -> None:
        self.query_one("#form-note", Static).update(note)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        hosts, user, fabric = self.values()
        if not hosts:
            self.say("Give at least one host.")
            return
        if event.button.id == "form-detect":
            self.post_message(self.DetectRequested(hosts, user))
        else:
            self.post_message(self.WriteRequested(hosts, user, fabric))
