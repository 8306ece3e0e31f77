"""The bring-up says true things: a recipe nobody has run is "untested", not broken; a
doctor step with a failed check is a failed step (✗, never a green ✓)."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from spark_tui.bringup import GuidedBringUp
from spark_tui.driver import Driver
from spark_tui.recipes.loader import load_recipes
from spark_tui.session import open_cluster
from spark_tui.tui.widgets.recipe_chooser import RecipeChooser


def test_an_untested_recipe_says_untested_and_a_broken_one_broken() -> None:
    book = load_recipes()
    untested = [r for r in book.recipes.values() if r.status == "untested"]
    broken = next(r for r in book.recipes.values() if r.broken)
    assert untested, "the catalogue has untested recipes"

    class One(App):
        def compose(self) -> ComposeResult:
            yield RecipeChooser([*untested, broken], current=untested[0].id)

    async def scenario() -> list[str]:
        app = One()
        async with app.run_test(size=(120, 40)) as pilot:
            chooser = app.query_one(RecipeChooser)
            said = []
            for r in [*untested, broken]:
                chooser.describe(r.id)
                await pilot.pause()
                said.append(str(app.query_one("#recipe-about").render()))
            return said

    said = asyncio.run(scenario())
    for r, text in zip(untested, said, strict=False):
        assert "Untested: nobody has run this recipe" in text and "broken" not in text, (r.id, text)
    assert "Known-broken: blocked by " in said[-1], said[-1]


def test_a_doctor_step_with_a_failed_check_is_a_failed_step() -> None:
    with open_cluster(scenario="drm-override", speed=240.0) as session:
        session.start()
        driver = Driver(session)
        driver.settle()
        outcome = GuidedBringUp(driver).doctor()
    failed = [c for c in outcome.report.checks if c.status == "fail"]
    assert failed, outcome.summary  # the override file halves the memory: the doctor fails it
    assert not outcome.ok and "failed" in outcome.summary, outcome.summary
