"""spark_tui.sim: a simulated DGX Spark (GB10) cluster, reached through the Transport
interface like a real one (never imports Textual).

    from spark_tui.sim import build_sim_cluster, scenario_names
    with build_sim_cluster("page-cache-hog", speed=600) as cluster:
        cluster.transports["spark1"].run("cat /proc/meminfo")
"""

from __future__ import annotations

from spark_tui.sim.cluster import SimCluster, SteppedClock, build_sim_cluster
from spark_tui.sim.scenarios import DEFAULT as DEFAULT_SCENARIO
from spark_tui.sim.scenarios import Scenario


def scenario_names() -> list[str]:
    """Every scenario, in the order of scenarios.yaml."""
    from spark_tui.sim.scenarios import scenarios as _all

    return list(_all())


__all__ = [
    "DEFAULT_SCENARIO",
    "Scenario",
    "SimCluster",
    "SteppedClock",
    "build_sim_cluster",
    "scenario_names",
]
