"""Helpers shared by the wall tests."""

from __future__ import annotations

from spark_tui.kb.schema import Fix
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.revisions import apply_patch


def apply_fix(recipe: Recipe, fix: Fix) -> Recipe:
    """The recipe after a fix's patch-recipe actions (its other actions touch nodes)."""
    for action in fix.actions:
        if action.type == "patch-recipe":
            recipe = apply_patch(recipe, **action.params)
    return recipe
