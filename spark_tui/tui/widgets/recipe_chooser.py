"""Bring-up step 2: choose a recipe; a known-broken one says why and offers the working one;
one nobody has run yet says "untested" (not broken)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class RecipeChooser(Vertical):
    """Recipes as options (✓ works, ✗ known-broken, ? untested); picking one posts RecipePicked."""

    class RecipePicked(Message):
        def __init__(self, recipe_id: str) -> None:
            self.recipe_id = recipe_id
            super().__init__()

    def __init__(self, recipes: list[Any], current: str | None) -> None:
        super().__init__(id="recipe-chooser")
        self.recipes = {r.id: r for r in recipes}
        self.current = current

    def compose(self) -> ComposeResult:
        options = []
        for r in self.recipes.values():
            if r.works:
                mark = Text("✓ ", style="green")
            elif r.broken:
                mark = Text("✗ ", style="bold red")
            else:
                mark = Text("? ", style="yellow")
            options.append(Option(mark + Text(f"{r.id}  ({r.nodes} nodes, {r.engine})"), id=r.id))
        yield OptionList(*options, id="recipe-list")
        yield Static("", id="recipe-about")

    def on_mount(self) -> None:
        ids = list(self.recipes)
        current = self.current
        if current is not None and current in self.recipes:
            self.query_one(OptionList).highlighted = ids.index(current)
            self.describe(current)

    def describe(self, recipe_id: str) -> None:
        """Show what the recipe is; for a known-broken one, why and what to use instead."""
        r = self.recipes[recipe_id]
        t = Text()
        t.append(f"{r.title}\n", style="bold")
        t.append(f"model {r.model.path} · {r.engine} over {r.executor} · {r.nodes} nodes\n")
        if not r.works and not r.broken:
            t.append("Untested: ", style="bold yellow")
            t.append("nobody has run this recipe here yet; the bring-up watches its first launch.")
        elif not r.works:
            t.append("Known-broken: ", style="bold red")
            t.append(f"blocked by {', '.join(r.blocked_by) or 'a wall'}. ")
            if r.instead_note:
                t.append(" ".join(r.instead_note.split()) + " ")
            if r.instead:
                t.append(f"\nUse {r.instead} instead (Enter on it picks it).", style="bold green")
        elif r.measured and getattr(r.measured, "tok_s", None):
            t.append(f"measured: {r.measured.tok_s} tok/s\n", style="dim")
        self.query_one("#recipe-about", Static).update(t)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id:
            self.describe(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        rid = event.option.id
        if rid is None:
            return
        r = self.recipes[rid]
        if r.broken and r.instead in self.recipes:
            # a known-broken recipe is not launched: offer the working one instead
            ids = list(self.recipes)
            self.query_one(OptionList).highlighted = ids.index(r.instead)
            self.app.notify(f"{rid} is known-broken; {r.instead} is highlighted: Enter picks it.")
            return
        self.post_message(self.RecipePicked(rid))
