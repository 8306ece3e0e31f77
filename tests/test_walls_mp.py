"""The walls of the no-Ray (mp) path work on mp recipes: causes pick a fix that fits the
executor, and recipe patches verify on an mp recipe as on a Ray one."""

from __future__ import annotations

import pytest

from spark_tui.kb.loader import load_knowledge
from spark_tui.recipes.loader import load_recipes
from tests.wall_helpers import apply_fix

KB = load_knowledge(use_user=False)
RECIPE = "minimax-m2.7-mxfp4-vllm-tp2"


def recipe(profile: str | None):
    r = load_recipes(use_user=False, use_revisions=False).get(RECIPE)
    return r.with_profile(profile) if profile else r


@pytest.mark.parametrize(
    ("profile", "cause", "first_fix"),
    [
        (None, "mp-executor-across-nodes", "use-ray-executor"),
        ("no-ray", "ranks-not-given", "relaunch-with-ranks"),
    ],
)
def test_semlock_fix_fits_the_executor(profile: str | None, cause: str, first_fix: str) -> None:
    wall = KB.get("mp-cross-node-semlock")
    facts = recipe(profile).facts()
    assert wall.choose_cause(facts).id == cause
    assert wall.fixes_for(facts)[0].id == first_fix


@pytest.mark.parametrize("profile", [None, "no-ray"])
def test_gloo_fix_verifies_on_both_executors(profile: str | None) -> None:
    fix = KB.get("gloo-interface").fix("set-gloo-socket-ifname")
    r = apply_fix(recipe(profile), fix)
    failed = [str(c) for c in fix.verify if not c.holds(r.facts())]
    assert failed == []
