"""The spark-tui application: composition, bindings and message routing only.

The engines live behind the core session (spark_tui.session); the monitor's
events arrive through the EventPump and are routed to the screen showing them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding

from spark_tui.bringup import GuidedBringUp
from spark_tui.driver import Driver
from spark_tui.errors import SparkTuiError
from spark_tui.session import Session
from spark_tui.tui.commands import SparkCommands
from spark_tui.tui.event_pump import EventPump
from spark_tui.tui.messages import ActionFinished, EventsPending
from spark_tui.tui.screens.confirm_modal import ConfirmModal
from spark_tui.tui.screens.help_screen import HelpScreen
from spark_tui.tui.screens.main_screen import MainScreen

DRAIN_INTERVAL_S = 0.15


class SparkTuiApp(App[int]):
    """Live panes for every node, log triage, one-key fixes, relaunch, guided bring-up."""

    TITLE = "spark-tui"
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses live elsewhere
    COMMANDS: ClassVar = App.COMMANDS | {SparkCommands}
    BINDINGS: ClassVar = [
        Binding("b", "bringup", "Bring-up"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "request_quit", "Quit"),
        Binding("ctrl+c", "request_quit", "Quit", show=False, priority=True),
        Binding("t", "toggle_theme", "Theme", show=False),
        # vi keys in every list and scrolling view (the focused one)
        Binding("j", "vi('down')", "Down", show=False),
        Binding("k", "vi('up')", "Up", show=False),
        Binding("g", "vi('top')", "Top", show=False),
        Binding("G", "vi('bottom')", "Bottom", show=False),
    ]

    def __init__(
        self,
        session: Session,
        *,
        live: bool = True,
        autoplay: bool = False,
        scrollback: int = 100_000,
        max_pending_lines: int = 50_000,
    ) -> None:
        super().__init__()
        self.session = session
        self.live = live
        self.autoplay = autoplay  # a simulated scenario launches its recipe by itself
        self.scrollback = scrollback
        self.pump = EventPump(self._wake, max_pending_lines=max_pending_lines)
        self._last_drain = 0.0
        self._drain_scheduled = False
        self.driver = Driver(session)  # what happens next: the hint, the bring-up, the offer
        self.main_screen = MainScreen(session, self.driver, scrollback=scrollback)
        self._bringup: GuidedBringUp | None = None

    def _wake(self) -> None:
        self.post_message(EventsPending())

    def on_mount(self) -> None:
        self.sub_title = self.session.describe()
        if self.session.no_cluster_yaml:
            self.sub_title = "no cluster.yaml found: " + self.sub_title
        self.push_screen(self.main_screen)
        if self.live:  # after the first frame: the panes show while the monitor starts
            self.call_after_refresh(self._start_live)

    def _start_live(self) -> None:
        if self.live:
            try:
                self.session.start(self.pump.emit)
            except SparkTuiError as exc:
                self.main_screen.set_last_action(f"monitor not started: {exc}", False)
                self.notify(str(exc), title="Live monitor", severity="error", timeout=10)
            else:
                if self.autoplay and self.session.plays_launch:
                    self.call_after_refresh(self.main_screen.play_scenario)

    def on_unmount(self) -> None:
        self.session.stop_watching()  # whoever opened the session closes it

    # --- routing ----------------------------------------------------------------
    def on_events_pending(self, _message: EventsPending) -> None:
        # at most one batch per DRAIN_INTERVAL_S: a fast stream costs a few redraws a second
        wait = self._last_drain + DRAIN_INTERVAL_S - time.monotonic()
        if wait > 0:
            if not self._drain_scheduled:
                self._drain_scheduled = True
                self.set_timer(wait, self._drain)
            return
        self._drain()

    def _drain(self) -> None:
        self._drain_scheduled = False
        self._last_drain = time.monotonic()
        batch = self.pump.drain()
        if not self.screen_stack:
            return  # closing: a timer fired after the last screen went
        self.main_screen.apply_batch(batch)
        feed = getattr(self.screen, "apply_batch", None)
        if feed is not None and self.screen is not self.main_screen:
            feed(batch)

    def on_action_finished(self, message: ActionFinished) -> None:
        self.main_screen.finished(message)

    def running_action(self) -> str | None:
        """The action running now on any screen (a launch, a fix, a bring-up step), or None."""
        for screen in reversed(self.screen_stack):
            running = getattr(screen, "running", None)
            if isinstance(running, str):
                return running
        return None

    # --- app-wide actions ---------------------------------------------------------
    def action_request_quit(self) -> None:
        """q and ctrl+c quit at once, unless an action runs: then they ask first."""
        running = self.running_action()
        if running is None:
            self.exit(0)
            return
        if isinstance(self.screen, ConfirmModal):
            return  # already asking

        def answer(yes: bool | None) -> None:
            if yes:
                self.session.closing.set()  # the action's waits end at their next poll
                self.exit(0)

        prompt = (
            f"{running.capitalize()} is running. Quit anyway? spark-tui stops following it "
            "and it may be left half done (the journal keeps what ran)."
        )
        self.push_screen(ConfirmModal(prompt, (), yes="Quit (y)"), answer)

    def action_vi(self, move: str) -> None:
        """j, k, g, G on the focused list or view (its own cursor or scroll actions)."""
        names = {
            "down": ("cursor_down", "scroll_down"),
            "up": ("cursor_up", "scroll_up"),
            "top": ("scroll_top", "first", "scroll_home"),
            "bottom": ("scroll_bottom", "last", "scroll_end"),
        }[move]
        widget = self.focused
        if widget is None:
            return
        for name in names:
            if callable(getattr(widget, f"action_{name}", None)):
                self.call_later(widget.run_action, name)
                return

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # on the bring-up screen already: `b` leaves the footer
        return not (action == "bringup" and self.screen.id == "bringup")

    def action_bringup(self) -> None:
        from spark_tui.tui.screens.bringup_screen import BringUpScreen

        if not isinstance(self.screen, BringUpScreen):
            if self._bringup is None:
                self._bringup = GuidedBringUp(self.driver)  # one per session: it goes on
            self.push_screen(BringUpScreen(self.session, self._bringup))
