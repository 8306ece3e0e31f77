"""The stall detector's timing: wedge → serving-stall diagnosis on the simulator.

Runs the `serving-stall` scenario (a wedge 300 s into serving) with a SteppedClock (time
moves only with the rounds) for several round periods, and reports the simulated delay
from the wedge to the diagnosis, the real seconds that took, and the real cost of one
rules-engine evaluation over a node's facts (what every round adds).

    python bench/stall.py            # prints a Markdown table
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.test_sim_late_e2e as e2e
from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes.rules import RuleEngine
from spark_tui.sim import SteppedClock, build_sim_cluster
from tests.test_sim_e2e import _smoke_ok
from tests.test_sim_late_e2e import Watch


def one(period_s: float, phase: float) -> tuple[float, float]:
    """`phase`: where in a round period the wedge falls (0 = just as a round reads)."""
    e2e.STEP_S = period_s
    with build_sim_cluster("serving-stall", clock=SteppedClock()) as c:
        w = Watch(c, c.recipe)
        assert w.launch() and _smoke_ok(c, w.recipe)
        wedge_at = c.world.engines[-1].serving_from + 300.0
        # fast-forward to just before the wedge, then time the detection
        w.watch(max(0.0, wedge_at - c.clock.now() - 3 * period_s))
        c.clock.advance(period_s * phase)  # shift the rounds against the wedge
        real0 = time.monotonic()
        at = w.watch(15 * 60, until="serving-stall")
        real = time.monotonic() - real0
        w.stop()
        assert at is not None
        return at - wedge_at, real


def eval_cost() -> float:
    kb = load_knowledge(use_user=False)
    engine = RuleEngine(kb)
    facts = {
        "serving.requests_running": 2.0,
        "serving.tokens_age_s": 10.0,
        "log.silent_s": 5.0,
        "gpu.power_w": 45.0,
        "gpu.sm_pct": 96.0,
        "serving.phase": "serving",
        "memory.available_gib": 12.0,
    }
    runs = []
    for i in range(2000):
        t0 = time.perf_counter()
        engine.evaluate({"spark1": facts, "spark2": facts}, float(i))
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs) * 1e6


def main() -> None:
    print("| round period (s) | wedge in the period | wedge → diagnosis (simulated s) | real s |")
    print("|---|---|---|---|")
    for period in (2.0, 5.0, 20.0):
        for phase in (0.0, 0.5, 0.9):
            sim, real = one(period, phase)
            print(f"| {period:g} | {phase:.0%} | {sim:.0f} | {real:.2f} |")
    print(f"\nrules engine, one evaluation over two nodes' facts: {eval_cost():.0f} µs (median)")


if __name__ == "__main__":
    main()
