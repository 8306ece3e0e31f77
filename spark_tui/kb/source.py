"""Where a diagnosis's evidence came from, typed: built in one place, read by its parts."""

from __future__ import annotations

LOG = "log"  # a log's lines: a node's serve log, container, engine, a file triaged offline
READINGS = "readings"  # a node's readings (or the cluster's, across nodes)
RECIPE = "recipe"  # the recipe's own checks


class Source(str):
    """A diagnosis's source: `kind` (log | readings | recipe), `node` (None: the cluster, the
    recipe, or a file triaged offline) and, for a log, its `name` ("serve", "container:NAME",
    "engine:PID", "log:file:PATH", a file's name). Its text is the lines' `file`:
    "spark1:serve", "spark1:readings", "cluster:readings", "recipe:checks", "vllm.log"."""

    kind: str
    node: str | None
    name: str

    def __new__(cls, kind: str, node: str | None = None, name: str = "") -> Source:
        if kind == LOG:
            text = f"{node}:{name}" if node else name
        elif kind == READINGS:
            text = f"{node or 'cluster'}:readings"
        elif kind == RECIPE:
            text = "recipe:checks"
        else:
            raise ValueError(f"a source's kind is log, readings or recipe, not {kind!r}")
        self = super().__new__(cls, text)
        self.kind, self.node, self.name = kind, node, name
        return self

    def __getnewargs__(self) -> tuple[str, str | None, str]:  # type: ignore[override]  # copy/pickle rebuild it from its parts, not its text
        return (self.kind, self.node, self.name)

    @classmethod
    def log(cls, node: str | None, name: str) -> Source:
        return cls(LOG, node, name)

    @classmethod
    def readings(cls, node: str | None) -> Source:
        """A node's readings; None: the cluster's."""
        return cls(READINGS, node)

    @classmethod
    def recipe(cls) -> Source:
        return cls(RECIPE)

    @property
    def from_readings(self) -> bool:
        """Raised by readings or by the recipe's checks, not by a log line."""
        return self.kind != LOG

    @property
    def subject(self) -> str:
        """What it is about: the node, else "cluster" (readings) or "recipe"."""
        return self.node or ("cluster" if self.kind == READINGS else self.kind)
