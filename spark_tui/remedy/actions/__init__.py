"""The one registry of fix action kinds: each kind is a class with its parameter schema, its
plan per node, its preview, how it runs and what it verifies (spark_tui.remedy.actions.base).

    from spark_tui.remedy.actions import kind, REGISTRY
    kind("reboot").min_risk            # "destructive"
    kind("relaunch").relaunches        # True

The knowledge base's loader validates actions against it; the engine (remedy.fixes) plans
and runs them through it. A new kind is a class added here, nowhere else.
"""

from __future__ import annotations

from spark_tui.errors import InputError
from spark_tui.remedy.actions import launches, model_copies, node_commands, recipe_changes
from spark_tui.remedy.actions.base import ActionKind

REGISTRY: dict[str, ActionKind] = {
    cls.schema.name: cls()
    for cls in (
        *node_commands.KINDS,
        *model_copies.KINDS,
        *recipe_changes.KINDS,
        *launches.KINDS,
    )
}


def kind(name: str) -> ActionKind:
    """The kind of an action type (InputError for one the registry does not know)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown action type {name!r} (known: {', '.join(REGISTRY)})") from None


__all__ = ["REGISTRY", "ActionKind", "kind"]
