"""What the live monitor reports, for every front end (the TUI turns these into
Textual messages; `watch --json` prints them). Plain data, no Textual."""

from __future__ import annotations

from dataclasses import dataclass

from spark_tui.kb.diagnosis import DiagnosisSnapshot
from spark_tui.nodes.state import NodeState
from spark_tui.nodes.transport import Reachability


@dataclass(frozen=True)
class NodeSampled:
    node: str
    state: NodeState


@dataclass(frozen=True)
class LogLines:
    """A batch of log lines from one node's source (e.g. the serving container)."""

    node: str
    source: str
    lines: tuple[str, ...]
    first_line_no: int
    # (line index within `lines`, wall id, severity) for lines that matched a wall
    marks: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class DiagnosisRaised:
    """A wall seen for the first time on a node (or seen again: `count` grew)."""

    diagnosis: DiagnosisSnapshot  # frozen as it was: the book's record goes on changing
    new: bool
    time: float


@dataclass(frozen=True)
class DiagnosisResolved:
    """A wall no longer holds: its readings cleared, its fix was verified, or a new launch
    attempt made its log lines history. The diagnosis keeps how (`resolution`)."""

    diagnosis: DiagnosisSnapshot  # frozen as it was: the book's record goes on changing
    time: float


@dataclass(frozen=True)
class DiagnosisFixed:
    """A log wall whose fix was verified: fixed, waiting for the relaunch that proves it
    (then resolved; seen again, raised again)."""

    diagnosis: DiagnosisSnapshot  # frozen as it was: the book's record goes on changing
    time: float


@dataclass(frozen=True)
class ReachabilityChanged:
    node: str
    reachability: Reachability


@dataclass(frozen=True)
class ActionProgress:
    """A step of a fix, relaunch or bring-up: what runs where, and how it ended."""

    step: str
    node: str | None
    command: str | None
    status: str  # "running" | "ok" | "failed" | "skipped" | "info"
    detail: str = ""


Event = (
    NodeSampled
    | LogLines
    | DiagnosisRaised
    | DiagnosisResolved
    | DiagnosisFixed
    | ReachabilityChanged
    | ActionProgress
)
