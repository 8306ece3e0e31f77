"""How a cluster is opened: a scenario, a cluster.yaml, or what to do with none. The body of
`Session.open`, the one opener every front end goes through (session.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui import policy
from spark_tui.clock import Clock, RealClock
from spark_tui.errors import InputError
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.state import StateDir

if TYPE_CHECKING:
    from spark_tui.session import Session


def open_session(
    cls: type[Session],
    config: str | Path | None = None,
    *,
    scenario: str | None = None,
    recipe: str | None = None,
    speed: float | None = None,
    clock: Clock | None = None,
    keep_state: bool = False,
    read_only: bool = False,
    no_config: str = "simulate",
    sim_nodes: int | None = None,
    demo_flag: bool = True,
) -> Session:
    """`scenario` plays a simulated cluster (at `speed`, or on `clock`; `sim_nodes` nodes;
    its state kept when `keep_state`); else `config` (a cluster.yaml), else ./cluster.yaml
    or ~/.config/spark-tui/cluster.yaml; with none, `no_config` says what to do:
    "simulate" (the simulated cluster, saying so), "refuse" (InputError), or "offline"
    (no nodes, the real state: a report of the journal). `recipe` names the recipe to use
    instead of cluster.yaml's; `read_only` refuses every change from here on."""
    from spark_tui.kb.loader import load_knowledge

    if read_only:
        policy.set_read_only(True)
    kb = load_knowledge()
    if scenario is None:
        from spark_tui.nodes.config import cluster_config_path, load_cluster

        path = cluster_config_path(config)
        if path is not None:
            from spark_tui.nodes.transports import open_transports

            cluster = load_cluster(path)
            return cls(
                cluster,
                open_transports(cluster),
                clock or RealClock(),
                kb,
                StateDir.real(),
                recipe_id=recipe or cluster.recipe,
            )
        if no_config == "refuse":
            from spark_tui import paths

            raise InputError(
                "no cluster.yaml (./cluster.yaml or ~/.config/spark-tui/cluster.yaml): "
                f"write one (see {paths.doc('cluster-yaml.md')} or 'spark-tui discover') "
                "or pass --config FILE"
                + (", or --demo SCENARIO for the simulated cluster" if demo_flag else "")
            )
        if no_config == "offline":
            empty = ClusterConfig(nodes=(), source="<no cluster.yaml>")
            return cls(empty, {}, clock or RealClock(), kb, StateDir.real(), recipe_id=recipe)
    from spark_tui.sim import DEFAULT_SCENARIO, build_sim_cluster

    name = scenario or DEFAULT_SCENARIO
    kwargs: dict[str, Any] = {"nodes": sim_nodes} if sim_nodes else {}
    if clock is not None:
        kwargs["clock"] = clock
    elif speed:
        kwargs["speed"] = speed
    sim = build_sim_cluster(name, **kwargs)
    return cls(
        sim.config,
        dict(sim.transports),
        sim.clock,
        kb,
        StateDir.for_simulation(name, keep=keep_state),
        sim=sim,
        scenario=name,
        no_cluster_yaml=scenario is None,
        recipe_id=recipe,
    )
