"""One node's live pane: reachability, memory, swap, GPU history, containers, Ray, serving;
on a small terminal one line of it (the strip): name, memory, serving, Ray."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Static

from spark_tui.facts import GIB
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.state import NodeState
from spark_tui.nodes.transport import Reachability
from spark_tui.tui.formatting import gib, memory_split, reachability_text, serving_text
from spark_tui.tui.messages import NodeChosen
from spark_tui.tui.widgets.memory_bar import MemoryBar
from spark_tui.tui.widgets.percent_history import PercentHistory

HISTORY = 120  # samples kept for the histories (a few minutes at 1-2 s per round)


class NodePane(Vertical):
    """The pane of one node; fed NodeState readings and reachability changes. The class
    `-compact` (set by the screen on a small terminal) shows only its one-line strip."""

    def __init__(self, node: NodeConfig) -> None:
        super().__init__(id=f"node-{node.name}", classes="node-pane")
        self.node = node
        self.state: NodeState | None = None
        self.reachability: Reachability | None = None
        self.border_title = f"{node.name} · {node.role}"
        self._shown: dict[str, str] = {}

    @property
    def sm_history(self) -> tuple[float | None, ...]:
        return self.query_one(".sm", PercentHistory).samples

    def compose(self) -> ComposeResult:
        yield Static(f"{self.node.name} {self.node.role}: no reading yet", classes="strip")
        yield Static("reachable", classes="reach")
        yield MemoryBar()
        yield Static("", classes="swap-gpu")
        with Horizontal(classes="spark-row"):
            yield Label("SM %", classes="spark-label")
            yield PercentHistory(HISTORY, classes="sm")
        with Horizontal(classes="spark-row"):
            yield Label("mem-bw %", classes="spark-label")
            yield PercentHistory(HISTORY, classes="bw")
        yield Static("", classes="stack")
        yield Static("serving: stopped", classes="serving")

    def on_click(self) -> None:
        self.post_message(NodeChosen(self.node.name))

    def set_reachability(self, r: Reachability) -> None:
        self.reachability = r
        self.set_class(not r.reachable, "-unreachable")
        self._show(".reach", reachability_text(r))
        self._show(".strip", self._strip_line())

    def on_mount(self) -> None:
        # what came before the pane's parts were there
        if self.reachability is not None:
            self.set_reachability(self.reachability)
        if self.state is not None:
            self.set_state(self.state)

    def set_state(self, state: NodeState) -> None:
        """Show one sampling round (a round from an unreachable node only marks it)."""
        self.state = state
        if not self.query(MemoryBar):
            return  # not composed yet: on_mount shows it
        if not state.reachable:
            self.add_class("-unreachable")
            self.query_one(".sm", PercentHistory).add(None)
            self.query_one(".bw", PercentHistory).add(None)
            self._show(".strip", self._strip_line())
            return
        if self.reachability is None or self.reachability.reachable:
            self.remove_class("-unreachable")
            self._show(".reach", "reachable")
        self.query_one(MemoryBar).memory = state.memory
        gpu = state.gpus[0] if state.gpus else None
        self.query_one(".sm", PercentHistory).add(None if gpu is None else gpu.sm_pct or 0.0)
        self.query_one(".bw", PercentHistory).add(None if gpu is None else gpu.mem_bw_pct or 0.0)
        self._show(".swap-gpu", self._swap_gpu_line(state))
        self._show(".stack", self._stack_line(state))
        serving = state.serving
        self._show(".serving", f"serving: {serving_text(serving)}")
        self._show(".strip", self._strip_line())
        self.set_class(serving.phase == "crashed", "-crashed")
        self.set_class(serving.phase == "serving", "-serving")

    def _show(self, selector: str, text: str) -> None:
        """Update a line only when its text changed; a same-length change needs no layout
        (a new reading every round must not re-lay out the whole screen)."""
        old = self._shown.get(selector)
        if old == text or not self.query(selector):  # not composed yet: on_mount shows it
            return
        self._shown[selector] = text
        same_shape = (
            old is not None and len(old) == len(text) and old.count("\n") == text.count("\n")
        )
        self.query_one(selector, Static).update(text, layout=not same_shape)

    def _strip_line(self) -> str:
        """`spark1 head · serving at 36.6 tok/s · Ray head · used 98.1G cache 2.7G`."""
        head = f"{self.node.name} {self.node.role}"
        r = self.reachability
        if (r is not None and not r.reachable) or (self.state and not self.state.reachable):
            return f"{head} · {reachability_text(r) if r else 'unreachable'}"
        s = self.state
        if s is None:
            return f"{head} · no reading yet"
        # what serves (and its tok/s) first: a narrow strip cuts the memory figures, never it
        parts = [head, serving_text(s.serving)]
        # then what cannot be read there (no docker, no nvidia-smi): it explains the gaps
        parts += _missing_tools(s)
        if s.ray is not None:
            parts.append("Ray head")
        elif s.ray_member:
            parts.append("Ray member")
        if s.memory is not None and s.memory.total_bytes > 0:
            used, cache, _free, _after_drop = memory_split(s.memory)
            parts.append(f"used {gib(used)}G cache {gib(cache)}G")
        return " · ".join(parts)

    @staticmethod
    def _swap_gpu_line(state: NodeState) -> str:
        parts: list[str] = []
        gpu = state.gpus[0] if state.gpus else None
        if gpu is None:  # first: a narrow pane cuts the swap figure, never why the GPU is blank
            parts.append(f"GPU: {state.unavailable.get('gpu', 'no reading')}")
        m = state.memory
        if m is not None and m.swap_total_bytes:
            parts.append(f"swap {(m.swap_total_bytes - m.swap_free_bytes) / GIB:.1f}G")
        elif m is not None:
            parts.append("swap off")
        if gpu is not None:
            parts.append(f"SM {gpu.sm_pct or 0:.0f}% · bw {gpu.mem_bw_pct or 0:.0f}%")
            if gpu.temp_c is not None:
                parts.append(f"{gpu.temp_c:.0f}°C")
            if gpu.power_w is not None:
                parts.append(f"{gpu.power_w:.0f}W")
        return " · ".join(parts)

    @staticmethod
    def _stack_line(state: NodeState) -> str:
        if "containers" in state.unavailable:
            containers = f"containers: {state.unavailable['containers']}"
        else:
            running = [c.name for c in state.containers if c.state == "running"]
            containers = f"containers: {', '.join(running) if running else 'none running'}"
        if state.ray is not None:
            ray = f"Ray: head of {state.ray.nodes_alive} nodes, {state.ray.gpus_total:g} GPUs"
        elif state.ray_member:
            ray = "Ray: member" + (" (head here)" if state.ray_head else "")
        else:
            ray = f"Ray: {state.unavailable.get('ray', 'not running')}"
        return f"{containers}\n{ray}"


def _missing_tools(state: NodeState) -> list[str]:
    """What could not be read on a node, once each, short for a strip (`docker: not
    available` is `no docker`)."""
    out: list[str] = []
    for key in ("gpu", "containers"):
        why = state.unavailable.get(key)
        if why and why.endswith(": not available"):
            why = "no " + why.removesuffix(": not available")
        if why and why not in out:
            out.append(why)
    return out
