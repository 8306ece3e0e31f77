"""Actions that change the recipe in use: patch-recipe (a new revision with a diff) and
switch-recipe (another recipe from now on)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from spark_tui.action_schemas import PATCH_KEYS, SCHEMAS
from spark_tui.errors import InputError
from spark_tui.events import ActionProgress
from spark_tui.kb.schema import Action
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.revisions import apply_patch, unified_diff
from spark_tui.remedy.actions.base import (
    NO_RECIPE,
    ActionKind,
    PlanContext,
    PlannedAction,
    RunContext,
    VerifyResult,
)
from spark_tui.safefile import read_state_text, write_atomic


def patch_facts(recipe: Recipe, patch: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(what, holds) for each change of a patch, read back from a recipe."""
    target = str(patch.get("target", "serve"))
    if target == "serve":
        args, env = recipe.serve.args, recipe.serve.env
    elif target == "ray":
        args, env = recipe.ray.args, recipe.ray.env
    else:
        args, env = recipe.docker_args, recipe.docker_env
    out: list[tuple[str, bool]] = []
    for k, v in (patch.get("set_args") or {}).items():
        out.append((f"{target} {k} {'' if v is True else v}".rstrip(), k in args and args[k] == v))
    out += [(f"{target} has no {k}", k not in args) for k in patch.get("unset_args") or ()]
    for k, v in (patch.get("set_env") or {}).items():
        out.append((f"{target} env {k}={v}", env.get(k) == str(v)))
    out += [(f"{target} env has no {k}", k not in env) for k in patch.get("unset_env") or ()]
    return out


class PatchRecipe(ActionKind):
    schema = SCHEMAS["patch-recipe"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        target = params.get("target", "serve")
        lines = [
            f"# recipe ({target}): set {k} {'' if v is True else v}".rstrip()
            for k, v in (params.get("set_args") or {}).items()
        ]
        lines += [f"# recipe ({target}): remove {k}" for k in params.get("unset_args") or []]
        lines += [
            f"# recipe ({target}): env {k}={v}" for k, v in (params.get("set_env") or {}).items()
        ]
        lines += [f"# recipe ({target}): unset env {k}" for k in params.get("unset_env") or []]
        return lines

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        current = ctx.recipe
        if current is None:
            raise InputError(f"fix {ctx.fix_id} changes the recipe: {NO_RECIPE}")
        patch = {"target": str(action.params.get("target", "serve"))}
        patch.update({k: action.params[k] for k in PATCH_KEYS if k in action.params})
        return planned_patch(index, self.name, current, patch)

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        assert planned.recipe_after is not None
        head = f"# {planned.index + 1}. {self.name}: recipe {planned.recipe_after.id} gets a new revision"
        return [head, *(planned.diff.splitlines() or ["# (no change: the recipe has it already)"])]

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        commit_recipe(planned, f"fix {ctx.context}", ctx)
        return True

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        recipe = ctx.result.recipe
        if recipe is None:
            return []
        return [
            VerifyResult(None, f"recipe {what}", holds)
            for what, holds in patch_facts(recipe, planned.patch)
        ]


def planned_patch(
    index: int, kind: str, current: Recipe, patch: Mapping[str, Any], **extra: Any
) -> PlannedAction:
    """An action that makes a new revision of the recipe: the patch, the recipe it gives,
    and the diff the preview shows."""
    after = replace(apply_patch(current, **patch), revision=current.revision + 1)
    return PlannedAction(
        index,
        kind,
        recipe_before=current,
        recipe_after=after,
        patch=patch,
        diff=unified_diff(current, after),
        **extra,
    )


def commit_recipe(planned: PlannedAction, note: str, ctx: RunContext) -> None:
    """Store the action's change as a new revision, rebased on the newest revision in use
    (another session may have patched it since the plan), and journal it."""
    assert planned.recipe_before is not None
    rev, recipe = ctx.revisions.commit_patch(planned.recipe_before, planned.patch, note)
    ctx.result.recipe = recipe
    ctx.hooks.recipe_changed(recipe)
    ctx.journal.append(
        event="recipe-revision",
        run=ctx.run_id,
        fix=ctx.context,
        recipe=rev.recipe_id,
        revision=rev.number,
        base=rev.base,
        diff=rev.diff[-2000:],
    )
    ctx.emit(
        ActionProgress(
            planned.type, None, None, "ok", f"recipe {rev.recipe_id} is now revision {rev.number}"
        )
    )


class SwitchRecipe(ActionKind):
    schema = SCHEMAS["switch-recipe"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        to = params.get("to") or "(the one the recipe names as its replacement)"
        return [f"# switch to recipe {to}"]

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        current = ctx.recipe
        to = action.params.get("to") or (current.instead if current else None)
        if not to:
            note = current.instead_note if current and current.instead_note else "none is named"
            raise InputError(f"fix {ctx.fix_id}: switch to which recipe? {note}")
        if ctx.recipes is not None and to not in ctx.recipes:
            raise InputError(f"fix {ctx.fix_id}: no recipe {to!r}")
        after = ctx.recipes[str(to)] if ctx.recipes is not None else None
        return PlannedAction(
            index, self.name, recipe_before=current, recipe_after=after, switch_to=str(to)
        )

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        head = f"# {planned.index + 1}. {self.name}: use recipe {planned.switch_to} from now on"
        before, after = planned.recipe_before, planned.recipe_after
        lines = [head]
        if before is not None and after is not None and before.model.id != after.model.id:
            lines.append(
                f"# note: a different model — {after.model.id} instead of {before.model.id}"
            )
        if before is not None and before.instead_note:
            lines.append(f"# {before.instead_note}")
        return lines

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        before = planned.recipe_before.id if planned.recipe_before is not None else None
        path = ctx.state.active_recipe_path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"from": before, "to": planned.switch_to}) + "\n")
        ctx.journal.append(
            event="recipe-switch", run=ctx.run_id, fix=ctx.context, recipe=planned.switch_to
        )
        if planned.recipe_after is not None:
            ctx.result.recipe = planned.recipe_after
            ctx.hooks.recipe_changed(planned.recipe_after)
        ctx.emit(ActionProgress(self.name, None, None, "ok", f"recipe is now {planned.switch_to}"))
        return True

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        now = ctx.result.recipe.id if ctx.result.recipe is not None else None
        return [
            VerifyResult(None, f"recipe in use is {planned.switch_to}", now == planned.switch_to)
        ]


def switched_recipe(state_path, configured: str | None) -> str | None:
    """The recipe a switch-recipe fix chose instead of `configured` (None: no switch)."""
    try:
        data = json.loads(read_state_text(state_path, 4096))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("from") == configured and data.get("to"):
        return str(data["to"])
    return None


KINDS: tuple[type[ActionKind], ...] = (PatchRecipe, SwitchRecipe)
