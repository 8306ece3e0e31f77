"""build_sim_cluster: a simulated DGX Spark cluster in a scenario's initial state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_tui import shell
from spark_tui.clock import ScaledClock
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.sim import logs
from spark_tui.sim import scenarios as sc
from spark_tui.sim.docker import SimContainer
from spark_tui.sim.node import DRM_OVERRIDE, SimNode
from spark_tui.sim.transport import SimTransport
from spark_tui.sim.world import SimWorld

FABRIC_IF = "enp1s0f0np0"
# one simulated minute of a 5-minute weight load takes a real second at the default speed
DEFAULT_SPEED = 60.0
DRM_OVERRIDE_TEXT = "# installed by the DGX OS image\noptions nvidia-drm modeset=1\n"


@dataclass
class SimCluster:
    """A simulated cluster: its config, one SimTransport per node, the clock, the world."""

    config: ClusterConfig
    transports: dict[str, SimTransport]
    clock: ScaledClock
    world: SimWorld
    scenario: sc.Scenario
    nodes: dict[str, SimNode] = field(default_factory=dict)

    @property
    def recipe(self) -> Any:
        """The scenario's recipe (its variant applied), as spark_tui.recipes.model.Recipe; None
        for a story of a deployment already running that spark-tui did not launch."""
        return sc.recipe_for(self.scenario)

    def http_endpoint(self, node: str, port: int) -> str | None:
        """The real local URL behind a node's serving port (None while nothing listens)."""
        return self.world.http_endpoint(node, port)

    def port_map(self) -> dict[tuple[str, int], int]:
        """(node, recipe port) -> local port of every engine server started so far."""
        return {k: s.port for k, s in self.world.servers.items()}

    def close(self) -> None:
        for t in self.transports.values():
            t.close()
        self.world.close()

    def __enter__(self) -> SimCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SteppedClock(ScaledClock):
    """Simulated time that passes only when someone waits on it (or advance()): runs are
    deterministic whatever the machine's load. Waits return at once."""

    def __init__(self, start: float = 1_780_000_000.0) -> None:
        super().__init__(speed=0.0, start=start)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)


def build_sim_cluster(
    scenario: str = sc.DEFAULT,
    nodes: int | None = None,
    speed: float = DEFAULT_SPEED,
    seed: int = 0,
    clock: ScaledClock | None = None,
) -> SimCluster:
    """A cold simulated cluster (spark1..N, spark1 the head) in the scenario's initial state.

    `speed`: simulated seconds per real second (tests use a high speed or clock.advance());
    `clock`: a clock to use instead (e.g. SteppedClock(): time moves only with the waits).
    """
    s = sc.get(scenario)
    count = nodes or s.nodes_count
    clock = clock if clock is not None else ScaledClock(speed=speed)
    world = SimWorld(clock=clock, seed=seed, faults=s.faults)
    node_cfgs = []
    for i in range(1, count + 1):
        name = f"spark{i}"
        n = SimNode(world=world, name=name, index=i, fabric_if=FABRIC_IF)
        world.nodes[name] = n
        node_cfgs.append(
            NodeConfig(
                name=name,
                host=name,
                role="head" if i == 1 else "worker",
                fabric_if=FABRIC_IF,
                fabric_ip=n.fabric_ip,
            )
        )
    for target, state in s.nodes.items():
        names = list(world.nodes) if target == "all" else [target]
        for name in names:
            if name in world.nodes:
                _set_node_state(world.nodes[name], state)
    for name, containers in s.containers.items():
        if name in world.nodes:
            for cname, spec in containers.items():
                _add_container(world.nodes[name], cname, spec)
    config = ClusterConfig(
        nodes=tuple(node_cfgs),
        recipe=s.recipe,
        source="<simulated>",
        simulated=True,
        extra={
            "scenario": s.name,
            "recipe_dir": str(sc.variant_recipe_dir()),
            "recipe_sets": list(s.sets),
        },
    )
    models = _model_checkpoints()
    for n in world.nodes.values():
        n.models.update(models)
    transports = {name: SimTransport(world, n) for name, n in world.nodes.items()}
    for name, containers in s.containers.items():
        for cname, spec in containers.items():
            if spec.get("exec") and name in transports:
                # what the other launcher started inside it (eugr: a detached vllm serve)
                command = shell.join(["docker", "exec", "-d", cname, "sh", "-c", str(spec["exec"])])
                transports[name].run(command)
    # ... and started long enough ago to serve now: attaching finds a deployment that
    # already loaded (its weights in the page cache), whatever the machine's load
    serving_from = [e.serving_from for e in world.engines if e.serving_from is not None]
    if serving_from:
        clock.advance(max(0.0, max(serving_from) - clock.now()))
    return SimCluster(config, transports, clock, world, s, dict(world.nodes))


def _set_node_state(n: SimNode, state: dict[str, Any]) -> None:
    """A scenario's node state (scenarios.NODE_KEYS)."""
    for key, value in state.items():
        if key == "drm_override":
            if value:
                n.files[DRM_OVERRIDE] = DRM_OVERRIDE_TEXT
                n.drm_active = True
        elif key in ("fabric_mtu", "switch_port_mtu"):
            setattr(n, key, int(value))
        elif key == "kernel":
            n.kernel = str(value)
        else:
            setattr(n, key, float(value))


def _add_container(node: SimNode, name: str, spec: dict[str, Any]) -> None:
    """A container another launcher left on the node (scenarios.CONTAINER_KEYS), created an
    hour ago: one that crashed (a `log`) and that a restart policy restarts (`restarts`) is
    left as docker shows it; any other runs its command, as docker does."""
    now = node.world.clock.now()
    restarts = int(spec.get("restarts", 0))
    c = SimContainer(
        node=node,
        name=name,
        image=str(spec["image"]),
        command=[str(a) for a in spec.get("command") or ()],
        env={},
        restart_policy=str(spec.get("restart", "no")),
        created_at=now - 3600,
    )
    node.containers[name] = c
    if not spec.get("log") and not restarts:
        c.start(now - 60)
        return
    c.started_at, c.restart_count, c.main_blocks = now - 30, restarts, True
    c.state = "restarting" if restarts else "running"
    if spec.get("log"):  # the crashed run's last lines, before the policy restarted it
        c.log.add_many(now - 40, logs.render("vllm", str(spec["log"])), 1.0)


def _model_checkpoints() -> dict[str, int]:
    """Host directory -> size of every built-in recipe's checkpoint: on the write-ups' Sparks
    the models were on disk before the stories begin (a write-up: "the model was already
    on our Sparks")."""
    from spark_tui.nodes.model_paths import recipe_model_paths
    from spark_tui.recipes.loader import load_recipes

    out: dict[str, int] = {}
    for r in load_recipes(use_user=False, use_revisions=False):
        size = r.model.checkpoint_bytes
        if not size:
            continue
        for path in recipe_model_paths(r.model.path or r.model.id, r.volumes):
            path = path.rstrip("/")
            out[path] = int(size)
            if path.startswith("~/"):  # over ssh the doctor asks relative to the login dir
                out[path[2:]] = out["/root/" + path[2:]] = int(size)
    return out
