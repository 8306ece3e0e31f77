"""The doctor over a simulated cluster: the seeds' models are on every node's disk."""

from __future__ import annotations

from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes.doctor import run_doctor
from spark_tui.nodes.model_paths import recipe_model_paths
from spark_tui.sim import SteppedClock, build_sim_cluster


def doctor(scenario: str):
    with build_sim_cluster(scenario, clock=SteppedClock()) as c:
        r = c.recipe
        return run_doctor(
            c.config,
            c.transports,
            load_knowledge(),
            c.clock,
            recipe_facts=r.facts(),
            image=r.image,
            model_paths=recipe_model_paths(r.model.path, r.volumes),
        )


def test_model_files_are_found_the_same_on_every_node() -> None:
    checks = [c for c in doctor("healthy").checks if c.id == "model-files"]
    assert checks and all(c.status == "pass" for c in checks), checks
    assert "131.3 GiB on every node" in checks[0].detail  # 141 GB: seed 000's checkpoint


def test_a_healthy_cluster_fails_no_check() -> None:
    failed = [(c.id, c.node, c.detail) for c in doctor("healthy").checks if c.status == "fail"]
    assert failed == []
