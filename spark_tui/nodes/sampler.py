"""One sampling round of one node: ONE remote process for every reading.

`sample()` sends commands.sample_script(...) as a single command line, splits
the output into sections and hands each to its parser. A missing tool becomes
`unavailable[reading] = "nvidia-smi: not available"`; output that cannot be
read becomes `unavailable[reading] = "unparseable: …"`; every other reading
still counts. An unreachable node is a NodeState with reachable=False, never
an exception.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable
from typing import TypeVar

from spark_tui import shell
from spark_tui.clock import Clock
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.parsers import Unparseable, missing_tool
from spark_tui.nodes.parsers.containers import parse_docker_ps, parse_restarts
from spark_tui.nodes.parsers.gpu import parse_compute_apps, parse_gpu_query
from spark_tui.nodes.parsers.kernel import parse_boot, parse_listening_ports, parse_nvrm
from spark_tui.nodes.parsers.links import (
    parse_default_route,
    parse_ibdev2netdev,
    parse_ip_br_addr,
    parse_ip_link,
    parse_roce_up,
    parse_speeds,
)
from spark_tui.nodes.parsers.meminfo import parse_meminfo
from spark_tui.nodes.parsers.metrics import parse_metrics
from spark_tui.nodes.parsers.processes import parse_processes
from spark_tui.nodes.parsers.ray import parse_ray_status
from spark_tui.nodes.state import EngineMetrics, Interface, NodeState
from spark_tui.nodes.transport import NodeUnreachable, Transport

ROUND_TIMEOUT_S = 20.0
# which tool a section needs, for the "not available" note
_TOOLS = {
    "gpu": "nvidia-smi",
    "gpu-apps": "nvidia-smi",
    "containers": "docker",
    "ray": "docker",
    "roce": "ibdev2netdev",
    "links": "ip",
    "addrs": "ip",
    "ports": "ss",
    "nvrm": "dmesg",
    "restarts": "docker",
    "route": "ip",
    "metrics": "curl",
    "procs": "ps",
}
SLOW_READINGS = ("ray", "roce", "nvrm", "ports", "speeds")

T = TypeVar("T")


def sample(
    transport: Transport,
    node: NodeConfig,
    clock: Clock,
    *,
    include_slow: bool = True,
    previous: NodeState | None = None,
    timeout: float = ROUND_TIMEOUT_S,
    extra_sections: dict[str, str] | None = None,
) -> NodeState:
    """Read the node once (SAMPLE, plus SLOW when include_slow, plus `extra_sections` such as
    the head's /metrics) in ONE remote process.

    Without the slow sections, their readings are carried over from `previous`.
    """
    sections = dict(commands.SAMPLE)
    if include_slow:
        sections.update(commands.SLOW)
    ray_in = ray_container(previous)
    if ray_in is None:
        sections.pop("ray", None)  # no Ray head seen here: nothing to ask
    elif include_slow or (previous is not None and previous.ray is None):
        sections["ray"] = shell.fill(commands.SLOW["ray"], {"container": ray_in})
    sections.update(extra_sections or {})
    now = clock.now()
    try:
        result = transport.run(commands.sample_script(sections), timeout=timeout)
    except NodeUnreachable as exc:
        return NodeState(
            node.name, now, reachable=False, unavailable={"node": exc.reason}, fabric_if=None
        )
    outputs = commands.split_sections(result.stdout)
    state = read_sections(node, now, outputs, expected=tuple(sections))
    if result.timed_out:
        state.unavailable.setdefault("round", f"timed out after {timeout:.0f} s")
    state.metrics = _token_history(state, previous)
    if not include_slow and previous is not None and previous.reachable:
        carried = {
            "ray": state.ray if "ray" in sections else previous.ray,
            "nvrm_lines": previous.nvrm_lines,
            "listening_ports": previous.listening_ports,
            "roce_up": previous.roce_up,
        }
        state = dataclasses.replace(state, **carried)  # type: ignore[arg-type]  # NodeState fields of the previous round, each its own type
        if previous.interfaces and state.interfaces:
            old = {i.name: i for i in previous.interfaces}
            state.interfaces = tuple(
                dataclasses.replace(
                    i,
                    roce_devices=old[i.name].roce_devices if i.name in old else (),
                    speed_mbps=old[i.name].speed_mbps if i.name in old else None,
                )
                for i in state.interfaces
            )
            state.fabric_if = node.fabric_if or detect_fabric(state.interfaces, node.fabric_ip)
        for key in SLOW_READINGS:
            if key in previous.unavailable:
                state.unavailable.setdefault(key, previous.unavailable[key])
    if not state.ray_head:
        state.ray = None  # Ray's head is not (or no longer) here
    elif include_slow and "ray" not in sections:
        state.ray = _ray_status_now(transport, state, timeout)  # first round: ask now
    return state


def _ray_status_now(transport: Transport, state: NodeState, timeout: float):
    """`ray status` in the container this round saw Ray's head in (a second process, only
    when no earlier round said where it runs)."""
    container = ray_container(state)
    if container is None:
        return None
    command = commands.sample_script(
        {"ray": shell.fill(commands.SLOW["ray"], {"container": container})}
    )
    try:
        res = transport.run(command, timeout=timeout)
    except NodeUnreachable:
        return None
    rc, text = commands.split_sections(res.stdout).get("ray", (1, ""))
    ray = parse_ray_status(text) if rc == 0 else None
    return None if ray is None or isinstance(ray, Unparseable) else ray


def ray_container(previous: NodeState | None) -> str | None:
    """The container to ask `ray status` in: where the last round saw Ray's head run (a
    running container named for the head, else one of the serving stack); None when the
    node runs no Ray head (or has not been read yet)."""
    if previous is None or not previous.reachable or not previous.ray_head:
        return None
    running = [c for c in previous.containers if c.state == "running"]
    for pick in (
        lambda c: "head" in c.name.lower(),
        lambda c: any(w in f"{c.name} {c.image}".lower() for w in ("ray", "vllm", "sglang")),
    ):
        found = [c for c in running if pick(c)]
        if found:
            return found[0].name
    return None


def read_sections(
    node: NodeConfig,
    now: float,
    outputs: dict[str, tuple[int, str]],
    expected: tuple[str, ...] = (),
) -> NodeState:
    """Build a NodeState from section → (exit code, text); never raises."""
    state = NodeState(node.name, now)
    notes = state.unavailable

    def section(name: str) -> str | None:
        """The section's text, or None (with a note) when its tool is missing."""
        if name not in outputs:
            if name in expected:
                notes[name] = "no output (the round was cut short)"
            return None
        rc, text = outputs[name]
        tool = missing_tool(rc, text)
        if tool is not None:
            notes[name] = f"{_TOOLS.get(name, tool)}: not available"
            return None
        return text

    def parsed(name: str, value: T | Unparseable) -> T | None:
        if isinstance(value, Unparseable):
            notes[name] = f"unparseable: {value.reason}"
            return None
        return value

    if (text := section("meminfo")) is not None:
        state.memory = parsed("meminfo", parse_meminfo(text))
    if (text := section("gpu")) is not None:
        state.gpus = parsed("gpu", parse_gpu_query(text)) or ()
    if (text := section("gpu-apps")) is not None:
        state.gpu_processes = parsed("gpu-apps", parse_compute_apps(text)) or ()
    if (text := section("containers")) is not None:
        state.containers = parsed("containers", parse_docker_ps(text)) or ()
    if "containers" in notes:
        notes.setdefault("ray", notes["containers"])
    if "drm-override" in outputs:
        rc, _text = outputs["drm-override"]
        state.drm_override = rc == 0
    if (text := section("restarts")) is not None:
        restarts = parsed("restarts", parse_restarts(text))
        if restarts:
            state.containers = tuple(
                dataclasses.replace(
                    c, restart_count=restarts[c.name][0], restart_policy=restarts[c.name][1]
                )
                if c.name in restarts
                else c
                for c in state.containers
            )
    if (text := section("route")) is not None:
        route = parsed("route", parse_default_route(text))
        state.default_route_if = route if isinstance(route, str) else None
    if commands.METRICS_SECTION in outputs:
        rc, text = outputs[commands.METRICS_SECTION]
        metrics = parse_metrics(text)
        # nothing listening (curl exit 7) or no counters: the engine is not serving yet
        state.metrics = None if isinstance(metrics, Unparseable) else metrics
        if isinstance(metrics, Unparseable) and text.strip():
            notes["metrics"] = f"unparseable: {metrics.reason}"
    if (text := section("boot")) is not None:
        boot = parsed("boot", parse_boot(text))
        if boot:
            state.boot_id, state.uptime_s = boot
    if (text := section("procs")) is not None:
        procs = parse_processes(text)
        state.ray_head, state.ray_member, state.engine = (
            procs.ray_head,
            procs.ray_member,
            procs.engine,
        )
    if (text := section("ray")) is not None:
        ray = parse_ray_status(text)
        # "not running" is a reading (no Ray here), not a failure to read
        state.ray = None if isinstance(ray, Unparseable) else ray
        if isinstance(ray, Unparseable) and "not running" not in ray.reason:
            notes["ray"] = f"unparseable: {ray.reason}"
    if (text := section("nvrm")) is not None:
        state.nvrm_lines = parse_nvrm(text)
    if (text := section("ports")) is not None:
        state.listening_ports = parsed("ports", parse_listening_ports(text)) or ()
    state.interfaces = _interfaces(section, parsed)
    if "roce" in outputs and "roce" not in notes:
        state.roce_up = parse_roce_up(outputs["roce"][1])
    state.fabric_if = node.fabric_if or detect_fabric(state.interfaces, node.fabric_ip)
    return state


def _interfaces(section, parsed) -> tuple[Interface, ...]:
    links: dict = {}
    addrs: dict = {}
    roce: dict = {}
    speeds: dict = {}
    if (text := section("links")) is not None:
        links = parsed("links", parse_ip_link(text)) or {}
    if (text := section("addrs")) is not None:
        addrs = parsed("addrs", parse_ip_br_addr(text)) or {}
    if (text := section("roce")) is not None:
        roce = parsed("roce", parse_ibdev2netdev(text)) or {}
    if (text := section("speeds")) is not None:
        speeds = parse_speeds(text)
    out = []
    for name in list(links) + [n for n in addrs if n not in links]:
        state, mtu = links.get(name, (None, None))
        br_state, cidrs = addrs.get(name, ("UNKNOWN", ()))
        out.append(
            Interface(
                name=name,
                state=state or br_state,
                addresses=tuple(cidrs),
                mtu=mtu,
                speed_mbps=speeds.get(name),
                roce_devices=tuple(roce.get(name, ())),
            )
        )
    return tuple(out)


def detect_fabric(interfaces: tuple[Interface, ...], fabric_ip: str | None = None) -> str | None:
    """The 200G fabric interface: the one holding `fabric_ip`, else an UP one with RoCE
    devices, else an UP ConnectX-style port (`…np0`), else None."""
    if fabric_ip:
        for i in interfaces:
            if any(a.split("/")[0] == fabric_ip for a in i.addresses):
                return i.name
    for pick in (
        lambda i: i.roce_devices and i.state == "UP",
        lambda i: i.name.endswith(("np0", "np1")) and i.state == "UP",
        lambda i: bool(i.roce_devices),
    ):
        found = [i for i in interfaces if pick(i)]
        if found:
            return found[0].name
    return None


def fabric_address(state: NodeState, node: NodeConfig) -> str | None:
    """The node's fabric IP: from config, else the first IPv4 address on its fabric interface."""
    if node.fabric_ip:
        return node.fabric_ip
    fab = state.fabric()
    if fab is None:
        return None
    for cidr in fab.addresses:
        try:
            addr = ipaddress.ip_interface(cidr).ip
        except ValueError:
            continue
        if addr.version == 4:
            return str(addr)
    return None


def _token_history(state: NodeState, previous: NodeState | None) -> EngineMetrics | None:
    """The round's /metrics with the time the token counter last moved: now when it changed
    (or on the first reading), else carried over from the previous round."""
    em = state.metrics
    if em is None:
        return None
    before = previous.metrics if previous is not None and previous.reachable else None
    moved = (
        before is None
        or before.generation_tokens_total != em.generation_tokens_total
        or before.tokens_moved_at is None
    )
    moved_at = state.time if moved or before is None else before.tokens_moved_at
    return dataclasses.replace(em, tokens_moved_at=moved_at)


class Sampler:
    """Rounds of one node: the SLOW sections every `slow_every`-th round, carried over between."""

    def __init__(
        self,
        transport: Transport,
        node: NodeConfig,
        clock: Clock,
        slow_every: int = 5,
        extra_sections: Callable[[], dict[str, str]] | None = None,
    ):
        self.extra_sections = extra_sections
        self.transport = transport
        self.node = node
        self.clock = clock
        self.slow_every = max(1, slow_every)
        self.rounds = 0
        self.last: NodeState | None = None

    def next_round(self) -> NodeState:
        """Sample once; the slow readings on the first round and every Nth after."""
        need_slow = (
            self.rounds % self.slow_every == 0 or self.last is None or not self.last.reachable
        )
        extra = self.extra_sections() if self.extra_sections is not None else None
        state = sample(
            self.transport,
            self.node,
            self.clock,
            include_slow=need_slow,
            previous=self.last,
            extra_sections=extra,
        )
        self.rounds += 1
        self.last = state
        return state
