"""Textual messages of the app: engine events handed over, and widgets talking upward."""

from __future__ import annotations

from textual.message import Message

from spark_tui.events import ActionProgress


class EventsPending(Message):
    """Engine events are waiting in the EventPump; one pending is enough."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EventsPending)


class ProgressReported(Message):
    """A step of a fix, relaunch, doctor or bring-up (from a worker thread)."""

    def __init__(self, job: str, progress: ActionProgress) -> None:
        self.job = job
        self.progress = progress
        super().__init__()


class ActionFinished(Message):
    """An action's worker ended: which action, whether it worked, one line for the status."""

    def __init__(self, action: str, ok: bool, summary: str, detail: object = None) -> None:
        self.action = action
        self.ok = ok
        self.summary = summary
        self.detail = detail
        super().__init__()


class DiagnosisChosen(Message):
    """The user highlighted a diagnosis in the table (key is 'wall|source')."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__()


class NodeChosen(Message):
    """The user clicked a node pane (its log becomes the log source)."""

    def __init__(self, node: str) -> None:
        self.node = node
        super().__init__()


class DiagnosisShown(Message):
    """A diagnosis reached the screen (new, or seen again with a higher count)."""

    def __init__(self, diagnosis: object, new: bool) -> None:
        self.diagnosis = diagnosis
        self.new = new
        super().__init__()


class ReachabilityShown(Message):
    """A node's pane now shows it reachable or not."""

    def __init__(self, node: str, reachable: bool) -> None:
        self.node = node
        self.reachable = reachable
        super().__init__()
