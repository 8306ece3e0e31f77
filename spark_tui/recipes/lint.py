"""`spark-tui recipes lint`'s checks of what a recipe would launch, on any recipe (spark-tui's
own format, eugr's, sparkrun's, one `recipes import` wrote): one Unmapped per finding, with the
line of the file it is on where the file shows it.

- a `{name}` left in a value after the placeholders are filled (in eugr's str.format `{{`/`}}`
  are literal braces, so `{{name}}` reaches the engine as `{name}`);
- a JSON value (`--speculative-config '{…}'`) that is not valid JSON: the engine exits at
  startup;
- a tensor-parallel size above 1 on one node (a GB10 node has one GPU; eugr's solo mode
  forces 1);
- a flag only an eugr mod adds (a patch of the mod adds the option) while the recipe does not
  apply that mod: stock vLLM rejects it;
- the executor of a multi-node launch, and the other one a profile runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from spark_tui.recipes.model import ArgValue, Recipe, Unmapped, render_value

WARNING = "warning"
NOTE = "note"
_LEFT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_OURS = ("node.", "head.", "cluster.", "model.")  # spark-tui's placeholders (dotted)
_ADDED_OPTION = re.compile(r'^\+.*?["\'](--[a-z0-9][a-z0-9-]*)["\']', re.M)


def _line_of(recipe: Recipe, text: str) -> int | None:
    """The first line of the recipe's file that holds `text`."""
    try:
        lines = Path(recipe.source).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((i for i, line in enumerate(lines, 1) if text in line), None)


def _args(recipe: Recipe) -> dict[str, ArgValue]:
    s = recipe.serve
    return {**s.args, **s.node_args, **s.worker_args}


def _values(recipe: Recipe) -> Iterable[tuple[str, str]]:
    """(where, text) of every value that reaches the engine or its environment."""
    for flag, value in _args(recipe).items():
        for v in value if isinstance(value, list) else [value]:
            if v is not True:
                yield flag, render_value(v)
    for word in recipe.serve.command:
        yield "serve.command", word
    for env in (recipe.serve.env, recipe.docker_env):
        for name, text in env.items():
            yield name, str(text)


def _literal_braces(recipe: Recipe) -> list[Unmapped]:
    out = []
    for where, text in _values(recipe):
        for name in dict.fromkeys(_LEFT.findall(text)):
            if name.startswith(_OURS):
                continue
            how = (
                "eugr's str.format makes `{{`/`}}` literal braces, so "
                if recipe.origin == "eugr"
                else ""
            )
            out.append(
                Unmapped(
                    _line_of(recipe, "{" + name + "}") or _line_of(recipe, where),
                    where,
                    f"{{{name}}} is left as written ({how}no value fills it): the engine gets "
                    f"the text {{{name}}}",
                    WARNING,
                )
            )
    return out


def _json_values(recipe: Recipe) -> list[Unmapped]:
    out = []
    for where, text in _values(recipe):
        t = text.strip()
        if not (t.startswith("{") and t.endswith("}")) and not (
            t.startswith("[") and t.endswith("]")
        ):
            continue
        if any(t.find("{" + p) >= 0 for p in _OURS):
            continue  # filled per node at render time
        try:
            json.loads(t)
        except ValueError as exc:
            out.append(
                Unmapped(
                    _line_of(recipe, where),
                    where,
                    f"{t[:80]!r} is not valid JSON ({exc}): the engine exits at startup",
                    WARNING,
                )
            )
    return out


def _solo_tp(recipe: Recipe) -> list[Unmapped]:
    tp = recipe.tp or 1
    if recipe.nodes != 1 or tp <= 1:
        return []
    flag = next(
        (f for f in ("--tensor-parallel-size", "-tp", "--tp-size", "--tp") if f in _args(recipe)),
        "--tensor-parallel-size",
    )
    return [
        Unmapped(
            _line_of(recipe, flag),
            flag,
            f"tensor parallel {tp} on one node: a GB10 node has one GPU (eugr's solo mode runs "
            "tensor_parallel 1)",
            WARNING,
        )
    ]


def mods_adding(tree: Path) -> dict[str, list[str]]:
    """flag -> the mods of an eugr tree (tree/mods/NAME) whose patches add that option."""
    out: dict[str, list[str]] = {}
    mods = tree / "mods"
    if not mods.is_dir():
        return out
    for mod in sorted(p for p in mods.iterdir() if p.is_dir()):
        for patch in sorted(mod.rglob("*")):
            if patch.suffix not in (".patch", ".diff") or not patch.is_file():
                continue
            text = patch.read_text(errors="replace")[:500_000]
            for flag in _ADDED_OPTION.findall(text):
                if mod.name not in out.setdefault(flag, []):
                    out[flag].append(mod.name)
    return out


def _tree(recipe: Recipe) -> Path | None:
    if recipe.mods:
        return Path(recipe.mods[0]).parent.parent
    if recipe.origin == "eugr" and recipe.source:
        from spark_tui.recipes.eugr import tree_root

        return tree_root(recipe.source, [])
    return None


def _mod_flags(recipe: Recipe) -> list[Unmapped]:
    tree = _tree(recipe)
    if tree is None or recipe.engine != "vllm":
        return []
    added = mods_adding(tree)
    applied = {Path(m).name for m in recipe.mods}
    out = []
    for flag in _args(recipe):
        mods = added.get(flag)
        if mods and not applied & set(mods):
            out.append(
                Unmapped(
                    _line_of(recipe, flag),
                    flag,
                    f"only the mod {' or '.join('mods/' + m for m in mods)} adds this option "
                    "(its patch), and the recipe does not apply it: stock vLLM rejects it",
                    WARNING,
                )
            )
    return out


def _executor(recipe: Recipe) -> list[Unmapped]:
    if recipe.nodes < 2 or any("executor-backend is stripped" in u.reason for u in recipe.unmapped):
        return []  # an eugr file's own line says it
    other = [
        name for name, p in recipe.profiles.items() if p.executor and p.executor != recipe.executor
    ]
    if recipe.executor == "ray":
        how = "Ray: a Ray head and workers, the serve command on the head"
    else:
        how = (
            "no Ray: one serve command per node (--nnodes/--node-rank/--master-addr"
            + (", eugr's default" if recipe.origin == "eugr" else "")
            + ")"
        )
    also = f"; --profile {' or --profile '.join(other)} runs the other" if other else ""
    return [Unmapped(None, "executor", f"{recipe.nodes} nodes, {how}{also}", NOTE)]


def recipe_checks(recipe: Recipe) -> list[Unmapped]:
    """What `recipes lint` says about what the recipe would launch (see the module doc)."""
    return [
        *_literal_braces(recipe),
        *_json_values(recipe),
        *_solo_tp(recipe),
        *_mod_flags(recipe),
        *_executor(recipe),
    ]
