"""What a command on a simulated node gets and gives: where it runs (Ctx), its result (Out),
and its entry in the command registry (Command)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.sim.docker import SimContainer
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.world import SimWorld

# where a command exists: on every node and in every container, on the host only, or only
# inside a container (the serving images' tools)
ANYWHERE = "anywhere"
HOST = "host"
CONTAINER = "container"


@dataclass
class Ctx:
    """Where a command runs: a node, maybe inside a container, with an environment."""

    world: SimWorld
    node: SimNode
    container: SimContainer | None = None
    env: dict[str, str] = field(default_factory=dict)
    root: bool = False
    # docker exec -d / a container's main process: long commands keep running
    detached: bool = False
    main: bool = False  # the container's main process (its output is `docker logs`)
    last_rc: int = 0
    blocked: bool = False  # a long-running command is still running (foreground)
    deadline: float | None = None  # clock time the caller stops waiting (transport timeout)
    sink_path: str | None = None  # the file a long-running command's output goes to
    cwd: str | None = None  # the directory `cd` entered (None: where the shell started)

    def path(self, p: str) -> str:
        """`p` as an absolute path: relative ones from the current directory (or $HOME)."""
        if p.startswith("/") or p == "-" or self.cwd is None:
            return p  # before any `cd`, a relative name stays as given (as it always has)
        base = self.cwd
        parts: list[str] = [x for x in base.split("/") if x]
        for part in p.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                parts = parts[:-1]
            else:
                parts.append(part)
        return "/" + "/".join(parts)

    def child(self, **kw: object) -> Ctx:
        """A subshell: the same place and environment (a copy), its own exit status."""
        return replace(self, env=dict(self.env), last_rc=0, blocked=False, **kw)  # type: ignore[arg-type]  # kw are Ctx's own fields with their types


@dataclass
class Out:
    """A command's exit code, stdout and stderr."""

    rc: int = 0
    out: str = ""
    err: str = ""


CommandFn = Callable[[list[str], Ctx, str], Out]


@dataclass(frozen=True)
class Command:
    """A command of the simulated nodes: its function (argv, ctx, stdin) -> Out, where it
    exists, and whether its name is a prefix (python3.12 runs `python`)."""

    run: CommandFn
    where: str = ANYWHERE
    prefix: bool = False
