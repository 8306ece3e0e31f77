"""A one-line history of a percentage (SM %, memory bandwidth %), drawn on a fixed 0-100 scale."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"


def bar(pct: float) -> str:
    """One cell for a percentage: ▁ for 0 %, █ for 100 % (a fixed scale, not the data's)."""
    pct = min(100.0, max(0.0, pct))
    return BARS[min(len(BARS) - 1, int(pct / 100 * len(BARS)))]


class PercentHistory(Widget):
    """The newest samples, right-aligned; a gap (no reading: unreachable) is a dim `·`.
    Empty until the first sample: never a full row of blocks that would read as 100 %."""

    DEFAULT_CSS = "PercentHistory { height: 1; width: 1fr; color: $accent; }"
    samples: reactive[tuple[float | None, ...]] = reactive((), layout=False)

    def __init__(self, maxlen: int = 120, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self._history: deque[float | None] = deque(maxlen=maxlen)

    def add(self, pct: float | None) -> None:
        """A sample (None: the node gave none this round)."""
        self._history.append(pct)
        self.samples = tuple(self._history)

    def render(self) -> Text:
        if not any(s is not None for s in self.samples):
            return Text("no reading", style="dim")
        shown = self.samples[-max(1, self.size.width) :]
        text = Text(no_wrap=True)
        for s in shown:
            if s is None:
                text.append("·", style="dim")
            else:
                text.append(bar(s))
        return text
