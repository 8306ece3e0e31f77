"""What `status` says and what a chat request to the engine answers: a service of the session
(its composition root)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_tui.nodes.state import NodeState

if TYPE_CHECKING:
    from spark_tui.session import Session


@dataclass(frozen=True)
class NodeStatus:
    """What `status` says of one node."""

    name: str
    role: str
    reachable: bool
    reason: str
    containers: tuple[str, ...]
    ray: str
    phase: str
    model: str | None
    port: int | None
    tok_s: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "role": self.role,
            "reachable": self.reachable,
            "reason": self.reason or None,
            "containers": list(self.containers),
            "ray": self.ray,
            "phase": self.phase,
            "model": self.model,
            "port": self.port,
            "tok_s": round(self.tok_s, 1) if self.tok_s is not None else None,
        }


class StatusReader:
    def __init__(self, session: Session) -> None:
        self.session = session

    def status(self) -> list[NodeStatus]:
        """Every node now: reachable, containers up, Ray membership, serving phase, model.

        With the monitor running, its readings (the phase from the logs); else one round
        of each node, the phase from the engine's own /metrics (serving when it answers)."""
        from spark_tui.nodes.sampler import sample

        if self.session.monitor is not None:
            self.session.monitor.wait_rounds(1, timeout=60.0)  # a round taken after this call
        live = self.session.states()
        states = {
            n.name: live.get(n.name)
            or sample(self.session.transports[n.name], n, self.session.clock)
            for n in self.session.config.nodes
        }
        phases = {name: st.serving.phase for name, st in states.items()}
        if not live:
            phases = {name: self._engine_phase(name, st) for name, st in states.items()}
            head = self.session.config.head.name
            for name, st in states.items():  # a Ray member serves what its head serves
                if name != head and st.engine is None and (st.ray_member or st.stack_up):
                    phases[name] = phases[head]
        tok_s = self.last_tok_s()
        out = []
        for n in self.session.config.nodes:
            st = states[n.name]
            up = tuple(
                c.name if c.state == "running" else f"{c.name} ({c.state})"
                for c in st.containers
                if c.state in ("running", "restarting")
            )
            if st.ray is not None:
                ray = f"head of {st.ray.nodes_alive} nodes, {st.ray.gpus_total:g} GPUs"
            elif st.ray_member:
                ray = "member"
            else:
                ray = "not running"
            engine = st.engine
            out.append(
                NodeStatus(
                    n.name,
                    n.role,
                    st.reachable,
                    st.unavailable.get("node", ""),
                    up,
                    ray,
                    phases[n.name] if st.reachable else "unknown",
                    engine.model if engine else None,
                    engine.port if engine else None,
                    tok_s if n.role == "head" and phases[n.name] == "serving" else None,
                )
            )
        return out

    def _engine_phase(self, node: str, state: NodeState) -> str:
        """Without the logs: an engine whose /metrics answers serves; one that does not yet
        is starting; none is stopped."""
        from spark_tui import shell
        from spark_tui.nodes import commands
        from spark_tui.nodes.parsers import Unparseable
        from spark_tui.nodes.parsers.metrics import parse_metrics
        from spark_tui.nodes.transport import NodeUnreachable

        if not state.reachable or state.engine is None:
            return "stopped" if state.reachable else "unknown"
        command = shell.fill(commands.METRICS, {"port": state.engine.port})
        try:
            res = self.session.transports[node].run(command, timeout=10.0)
        except NodeUnreachable:
            return "unknown"
        return "starting" if isinstance(parse_metrics(res.stdout), Unparseable) else "serving"

    def chat_request(self) -> tuple[bool, str]:
        """One chat request to the engine on the head, as a client sends it (the recipe's
        smoke request; it changes nothing, so it is not journaled): whether it answered, and
        its tok/s or why not."""
        from spark_tui.recipes.render import smoke_command
        from spark_tui.remedy.launch import parse_smoke

        recipe = self.session._require_recipe("send a request to")
        head = self.session.config.head.name
        res = self.session.transports[head].run(
            smoke_command(recipe), timeout=recipe.smoke.timeout_s
        )
        if not res.ok:
            return False, res.tail(1) or f"exit {res.exit_code}"
        tokens, seconds, why = parse_smoke(res.stdout)
        if why:
            return False, why
        if tokens and seconds:
            self.session._last_tok_s = tokens / seconds
            return True, f"{self.session._last_tok_s:.1f} tok/s"
        return True, "answered"

    def last_tok_s(self) -> float | None:
        """tok/s of the newest smoke request that answered (this session's or the journal's)."""
        if self.session._last_tok_s is not None:
            return self.session._last_tok_s
        for e in reversed(self.session.journal.entries()):
            if e.get("event") == "finished" and e.get("action") == "smoke" and e.get("tok_s"):
                return float(e["tok_s"])
        return None
