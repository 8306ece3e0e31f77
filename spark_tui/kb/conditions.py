"""Conditions over readings and facts: the data that metric and check walls,
causes and verify steps are written in.

A condition is one line of text, `PATH OP VALUE`:

    gpu.sm_pct >= 90
    memory.cached_gib > 20
    serving.phase == 'capturing'
    files.drm_override == true
    recipe.ray.object_store_bytes is unset
    recipe.docker.args contains '--rm'
    cluster.available_spread_gib > memory.threshold   (VALUE may be another path)

PATH names a fact (see spark_tui/facts.py for the catalogue). A fact that is
missing makes a comparison false (unknown is never evidence), except `is unset`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from spark_tui.facts import fact_known

OPS = (">=", "<=", "==", "!=", ">", "<", "contains", "not contains", "is set", "is unset")

_PATH = r"[A-Za-z_][\w\-]*(?:\.[\w\-]+)*"
# matched with fullmatch (`$` would take a trailing newline)
_BINARY = re.compile(
    rf"\s*(?P<path>{_PATH})\s+(?P<op>>=|<=|==|!=|>|<|not contains|contains)\s+(?P<value>.+?)\s*"
)
_UNARY = re.compile(rf"\s*(?P<path>{_PATH})\s+(?P<op>is set|is unset)\s*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class PathRef:
    """A value that names another fact."""

    path: str


Value = float | str | bool | None | PathRef


@dataclass(frozen=True)
class Condition:
    path: str
    op: str
    value: Value = None
    text: str = ""

    def holds(self, facts: Mapping[str, object]) -> bool:
        """Whether the condition holds for these facts (missing facts → False)."""
        if self.op == "is set":
            return facts.get(self.path) is not None
        if self.op == "is unset":
            return facts.get(self.path) is None
        if self.path not in facts:
            return False
        left = facts[self.path]
        right: object = self.value
        if isinstance(right, PathRef):
            if right.path not in facts:
                return False
            right = facts[right.path]
        return _compare(left, self.op, right)

    def decided(self, facts: Mapping[str, object]) -> bool:
        """Whether the facts know every fact this condition names (spark_tui.facts.fact_known):
        only then is `holds` an answer rather than a guess."""
        paths = (self.path, self.value.path if isinstance(self.value, PathRef) else None)
        return all(fact_known(p, facts) for p in paths if p is not None)

    def __str__(self) -> str:
        return self.text or f"{self.path} {self.op} {self.value}"


def _compare(left: object, op: str, right: object) -> bool:
    if op in ("contains", "not contains"):
        if left is None:
            return op == "not contains"
        try:
            found = str(right) in left  # type: ignore[operator]  # a string or a list reading; another raises TypeError, caught below
        except TypeError:
            return False
        return found if op == "contains" else not found
    if op in ("==", "!="):
        if (
            isinstance(left, (int, float))
            and isinstance(right, (int, float))
            and not (isinstance(left, bool) or isinstance(right, bool))
        ):
            equal = math.isclose(float(left), float(right), rel_tol=0, abs_tol=1e-9)
        elif isinstance(right, str) and not isinstance(left, str) and left is not None:
            equal = str(left) == right
        else:
            equal = left == right
        return equal if op == "==" else not equal
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    if not isinstance(left, (int, float)) or not isinstance(right, (int, float)):
        return False
    if isinstance(left, float) and math.isnan(left):
        return False
    return {">=": left >= right, "<=": left <= right, ">": left > right, "<": left < right}[op]


def _parse_value(raw: str) -> Value:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    low = raw.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low in ("null", "none"):
        return None
    if _NUMBER.fullmatch(raw):
        return float(raw)
    if re.fullmatch(_PATH, raw) and "." in raw:
        return PathRef(raw)
    raise ValueError(f"cannot read the value {raw!r} (quote strings: 'text')")


def parse_condition(text: str) -> Condition:
    """Parse `PATH OP VALUE`; raise ValueError with a readable reason."""
    if not isinstance(text, str):
        raise ValueError(f"a condition is a line of text like 'gpu.sm_pct >= 90', not {text!r}")
    m = _UNARY.fullmatch(text)
    if m:
        return Condition(m["path"], m["op"], None, text.strip())
    m = _BINARY.fullmatch(text)
    if not m:
        raise ValueError(
            f"cannot read the condition {text!r}: write PATH OP VALUE with OP one of "
            + ", ".join(OPS)
        )
    return Condition(m["path"], m["op"], _parse_value(m["value"]), text.strip())


class HoldTracker:
    """Tracks since when a set of conditions has held, per key (wall, node).

    `update` returns True once the conditions have held continuously for
    `for_s` seconds; a single sample that breaks them resets the clock.
    """

    def __init__(self) -> None:
        self._since: dict[tuple[str, ...], float] = {}

    def update(self, key: tuple[str, ...], holds: bool, now: float, for_s: float) -> bool:
        if not holds:
            self._since.pop(key, None)
            return False
        since = self._since.setdefault(key, now)
        return now - since >= for_s

    def held_for(self, key: tuple[str, ...], now: float) -> float:
        since = self._since.get(key)
        return 0.0 if since is None else now - since

    def reset(self, key: tuple[str, ...] | None = None) -> None:
        if key is None:
            self._since.clear()
        else:
            self._since.pop(key, None)
