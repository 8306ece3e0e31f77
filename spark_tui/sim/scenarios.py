"""The scenarios the simulator replays (data in scenarios.yaml, one per seed story)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from spark_tui.errors import InputError
from spark_tui.sim.faults import Faults
from spark_tui.yamlfile import LDict, line_of, load_yaml

_FILE = Path(__file__).resolve().parent / "scenarios.yaml"
_RECIPES = Path(__file__).resolve().parent / "recipes"
NODE_KEYS = {
    "page_cache_gib",
    "leaked_gib",
    "services_gib",
    "drm_override",
    "swap_used_gib",
    "fabric_mtu",
    "switch_port_mtu",
    "kernel",
}
FAULT_KEYS = {"wedge_after_s", "nccl_builds", "corrupt_shard"}
CONTAINER_KEYS = {"image", "command", "restart", "restarts", "log", "exec"}
KEYS = {
    "seed",
    "description",
    "recipe",
    "set",
    "nodes",
    "nodes_count",
    "walls",
    "switch_to",
    "faults",
    "containers",
    "launch",
}
DEFAULT = "healthy"


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: str
    description: str
    recipe: str | None  # the recipe id it launches (None: it plays a deployment already running)
    sets: tuple[str, ...] = ()  # `--set` changes that make its variant
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes_count: int = 2
    walls: tuple[str, ...] = ()
    switch_to: str | None = None
    faults: Faults = field(default_factory=Faults)
    # node -> container name -> what another launcher left running there (CONTAINER_KEYS)
    containers: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # whether the demo launches the scenario's recipe by itself (not when the story is a
    # deployment already running, started by another launcher)
    launch: bool = True


@cache
def scenarios(path: Path = _FILE) -> dict[str, Scenario]:
    """All scenarios, in file order; bad data is an InputError naming file:line."""
    data = load_yaml(path)
    if not isinstance(data, LDict):
        raise InputError("expected a mapping of scenario name -> scenario", str(path), 1)
    out: dict[str, Scenario] = {}
    for name, body in data.items():
        where = line_of(data, name) or 1
        try:
            out[name] = _scenario(name, body, path, where)
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            # a value of the wrong shape (a number where a mapping goes, text for a number)
            raise InputError(f"scenario {name!r}: {exc}", str(path), where) from None
    return out


def _scenario(name: str, body: Any, path: Path, where: int) -> Scenario:
    """One scenario's body, checked."""
    _check_keys(body, KEYS, f"scenario {name!r}", path, where)
    # a story of a deployment already running (launch: false) may have no recipe
    required = ("description", "recipe") if body.get("launch", True) else ("description",)
    for req in required:
        if req not in body:
            raise InputError(f"scenario {name!r}: missing {req!r}", str(path), where)
    nodes = body.get("nodes") or {}
    for nname, state in nodes.items():
        bad = set(state or {}) - NODE_KEYS
        if bad:
            raise InputError(
                f"scenario {name!r}: node {nname!r}: unknown field {sorted(bad)[0]!r}",
                str(path),
                line_of(nodes, nname),
            )
    faults = body.get("faults") or {}
    _check_keys(faults, FAULT_KEYS, f"scenario {name!r}: faults", path, where)
    containers = body.get("containers") or {}
    for named in containers.values():
        for cname, spec in (named or {}).items():
            _check_keys(
                spec, CONTAINER_KEYS, f"scenario {name!r}: container {cname!r}", path, where
            )
    shard = faults.get("corrupt_shard")
    return Scenario(
        name=name,
        seed=str(body.get("seed", "")),
        description=str(body["description"]),
        recipe=str(body["recipe"]) if body.get("recipe") else None,
        sets=tuple(str(s) for s in body.get("set") or ()),
        nodes={str(k): dict(v or {}) for k, v in nodes.items()},
        nodes_count=int(body.get("nodes_count", 2)),
        walls=tuple(str(w) for w in body.get("walls") or ()),
        switch_to=body.get("switch_to"),
        faults=Faults(
            wedge_after_s=_float_or_none(faults.get("wedge_after_s")),
            nccl_builds=int(faults.get("nccl_builds", 1)),
            corrupt_shard=(int(shard[0]), int(shard[1])) if shard else None,
            corrupt_node=str(shard[2]) if shard and len(shard) > 2 else None,
        ),
        containers={
            str(n): {str(k): dict(v or {}) for k, v in (named or {}).items()}
            for n, named in containers.items()
        },
        launch=bool(body.get("launch", True)),
    )


def _check_keys(body: Any, allowed: set[str], what: str, path: Path, where: int) -> None:
    """An unknown key (or a body that is no mapping) is an InputError at its line."""
    if not isinstance(body, dict):
        raise InputError(f"{what}: expected a mapping", str(path), where)
    bad = set(body) - allowed
    if bad:
        key = sorted(bad)[0]
        raise InputError(f"{what}: unknown field {key!r}", str(path), line_of(body, key))


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def get(name: str) -> Scenario:
    try:
        return scenarios()[name]
    except KeyError:
        raise InputError(f"unknown scenario {name!r} (known: {', '.join(scenarios())})") from None


def variant_recipe_dir() -> Path:
    """Simulator-only recipes (in the recipes/ format), for scenarios that need one."""
    return _RECIPES


def recipe_for(scenario: Scenario, recipe_id: str | None = None) -> Any:
    """The scenario's recipe with its variant applied (spark_tui.recipes.model.Recipe)."""
    from spark_tui.recipes.loader import load_dir, load_recipes
    from spark_tui.recipes.overrides import apply_sets

    rid = recipe_id or scenario.recipe
    if rid is None:
        return None
    book = dict(load_dir(_RECIPES))
    if rid not in book:
        rb = load_recipes(use_user=False, use_revisions=False)
        recipe = rb.get(rid)
    else:
        recipe = book[rid]
    if recipe_id is None or recipe_id == scenario.recipe:
        recipe = apply_sets(recipe, list(scenario.sets))
        if scenario.switch_to and not recipe.instead:
            # the recipe the seed pivoted to, so that the KB's switch-recipe fix has a target
            recipe = replace(recipe, instead=scenario.switch_to)
    return recipe
