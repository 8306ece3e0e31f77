"""The one event language of the headless commands: typed events and their one serializer.

`up --json`, `watch --json` and `status --json` print what `line()` makes of these events:
one JSON object each, with its `"event"` and its `"time"` (ISO 8601, UTC). The JSON Schema
of every line is shipped in the package (`schema_path()`); docs/json.md describes the fields.
A diagnosis travels as a frozen snapshot, never as the monitor's live record.
"""

from __future__ import annotations

import json
import time as _time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from spark_tui.kb.diagnosis import DiagnosisSnapshot, DiagnosisView

_OMIT_NONE = {"omit_none": True}  # a field left out of the line while it is None


def iso(t: float) -> str:
    """A moment as the lines say it: ISO 8601, UTC, to the second."""
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def _now() -> float:
    return _time.time()


@dataclass(frozen=True, kw_only=True)
class LineEvent:
    """One line of a headless command's output; `EVENT` is its `"event"`."""

    EVENT: ClassVar[str] = ""
    time: float = field(default_factory=_now)

    def name(self) -> str:
        return self.EVENT


@dataclass(frozen=True, kw_only=True)
class DiagnosisSeen(LineEvent):
    """A wall raised (or raised again after it cleared, or confirmed by readings)."""

    EVENT: ClassVar[str] = "diagnosis"
    diagnosis: DiagnosisSnapshot


@dataclass(frozen=True, kw_only=True)
class WallResolved(LineEvent):
    """A wall that no longer holds, and how."""

    EVENT: ClassVar[str] = "resolved"
    wall: str
    node: str | None
    file: str
    how: str


@dataclass(frozen=True, kw_only=True)
class WallFixed(LineEvent):
    """A log wall whose fix ran and was checked: fixed, waiting for the relaunch that proves
    it (then `resolved`; seen again in the new launch's log, a `diagnosis` again)."""

    EVENT: ClassVar[str] = "fixed"
    wall: str
    node: str | None
    file: str
    how: str


@dataclass(frozen=True, kw_only=True)
class NodeReach(LineEvent):
    """A node dropped (`unreachable`) or came back (`reachable`)."""

    node: str
    reachable: bool
    reason: str | None

    def name(self) -> str:
        return "reachable" if self.reachable else "unreachable"


@dataclass(frozen=True, kw_only=True)
class RelaunchDecided(LineEvent):
    """After an engine crashed (watch --auto-relaunch): relaunch or not, and why."""

    EVENT: ClassVar[str] = "relaunch"
    relaunch: bool
    why: str
    wall: str | None = field(default=None, metadata=_OMIT_NONE)
    fix: str | None = field(default=None, metadata=_OMIT_NONE)
    node: str | None = field(default=None, metadata=_OMIT_NONE)


@dataclass(frozen=True, kw_only=True)
class RecipeChosen(LineEvent):
    EVENT: ClassVar[str] = "recipe"
    recipe: str
    revision: int


@dataclass(frozen=True, kw_only=True)
class Adopted(LineEvent):
    """No recipe named: the running deployment, written as a recipe."""

    EVENT: ClassVar[str] = "adopt"
    recipe: str
    text: str


@dataclass(frozen=True, kw_only=True)
class DoctorRan(LineEvent):
    EVENT: ClassVar[str] = "doctor"
    reachable: tuple[str, ...]
    passed: int
    warnings: int
    failed: tuple[dict[str, Any], ...]  # the failed checks, as `doctor --json` prints them


@dataclass(frozen=True, kw_only=True)
class FixApplied(LineEvent):
    EVENT: ClassVar[str] = "fix"
    wall: str
    fix: str
    risk: str
    nodes: tuple[str, ...]
    ok: bool
    summary: str
    # when the fix changed the recipe in use
    recipe: str | None = field(default=None, metadata=_OMIT_NONE)
    revision: int | None = field(default=None, metadata=_OMIT_NONE)
    switched_from: str | None = field(default=None, metadata=_OMIT_NONE)


@dataclass(frozen=True, kw_only=True)
class Launched(LineEvent):
    EVENT: ClassVar[str] = "launch"
    launch: int
    recipe: str | None


@dataclass(frozen=True, kw_only=True)
class Serving(LineEvent):
    EVENT: ClassVar[str] = "serving"
    launch: int
    tok_s: float | None


@dataclass(frozen=True, kw_only=True)
class LaunchFailed(LineEvent):
    EVENT: ClassVar[str] = "launch-failed"
    launch: int
    why: str


@dataclass(frozen=True, kw_only=True)
class Refused(LineEvent):
    """A step not confirmed: nothing ran."""

    EVENT: ClassVar[str] = "refused"
    fix: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Stuck(LineEvent):
    EVENT: ClassVar[str] = "stuck"
    why: str


@dataclass(frozen=True, kw_only=True)
class ActiveWall:
    wall: str
    severity: str
    node: str | None


@dataclass(frozen=True, kw_only=True)
class AppliedFix:
    wall: str
    fix: str


@dataclass(frozen=True, kw_only=True)
class Done(LineEvent):
    """The last line of `up`."""

    EVENT: ClassVar[str] = "done"
    serving: bool
    launches: int
    recipe: str | None
    tok_s: float | None
    fixes: tuple[AppliedFix, ...]
    active: tuple[ActiveWall, ...]


@dataclass(frozen=True, kw_only=True)
class StatusRead(LineEvent):
    """`status --json`: every node now."""

    EVENT: ClassVar[str] = "status"
    cluster: str
    nodes: tuple[dict[str, Any], ...]


def _plain(value: Any) -> Any:
    """A field's value as JSON: tuples as lists, nested records as objects."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


def line(event: LineEvent) -> dict[str, Any]:
    """The one serializer: the JSON object of an event (docs/json.md), `event` first and
    `time` last."""
    out: dict[str, Any] = {"event": event.name()}
    for f in fields(event):
        if f.name == "time":
            continue
        value = getattr(event, f.name)
        if value is None and f.metadata.get("omit_none"):
            continue
        if isinstance(value, DiagnosisSnapshot):
            out.update(value.to_json())
            out["node"] = value.node
            if value.cause:
                out["cause"] = value.cause
            continue
        if f.name == "tok_s" and isinstance(value, float):
            value = round(value, 1)  # a rate as people read it (34.979… is not more true)
        out[f.name] = _plain(value)
    out["time"] = iso(event.time)
    return out


def dumps(event: LineEvent) -> str:
    """The event as one line of JSON."""
    return json.dumps(line(event), ensure_ascii=False, default=str)


def diagnosis_seen(d: DiagnosisView, when: float | None = None) -> DiagnosisSeen:
    return DiagnosisSeen(diagnosis=DiagnosisSnapshot.of(d), time=_now() if when is None else when)


def wall_resolved(d: DiagnosisView, when: float | None = None) -> WallResolved:
    return WallResolved(
        wall=d.wall.id,
        node=d.node,
        file=str(d.source),
        how=d.resolution,
        time=_now() if when is None else when,
    )


def wall_fixed(d: DiagnosisView, when: float | None = None) -> WallFixed:
    return WallFixed(
        wall=d.wall.id,
        node=d.node,
        file=str(d.source),
        how=d.fixed_how,
        time=_now() if when is None else when,
    )


def schema_path() -> Path:
    """The JSON Schema of every JSON output, shipped in the package."""
    return Path(str(resources.files("spark_tui") / "schema" / "json-output.schema.json"))


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return loaded
