"""sparkrun 0.4's `include:` — a recipe written as a small change over another one, read as
sparkrun 0.4.2 reads it (its `sparkrun.core.recipe_include`):

- `include: NAME` names a recipe file beside this one (`NAME`, `NAME.yaml` or `NAME.yml`; one
  path component, no separator: an include never walks the filesystem); the base is read, its
  own `include:` resolved first (at most 8 deep), then this file is merged over it;
- merging: mappings merge key by key, scalars and lists replace, a `null` deletes the inherited
  key; the values inside `defaults` and `env` are each one setting (a mapping value there
  replaces the base's whole mapping); `overrides:` lists append (the base's first);
- a cycle, a v1 recipe (`recipe_version: "1"`) on either side, a name with a separator, a file
  that is not there or lies outside the directory are refused; so is `@registry/NAME` (a base
  in one of sparkrun's registries: spark-tui reads no registry).

Every error names the file and the line of the `include:` that failed. The merged data keeps
the lines of this file's own keys; what it inherits is placed on its `include:` line (that is
where it enters this file), so an error in inherited text points there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from spark_tui.errors import InputError, InputErrors
from spark_tui.yamlfile import LDict, LList, line_of

MAX_DEPTH = 8  # sparkrun's MAX_INCLUDE_DEPTH
_ATOMIC = frozenset({"defaults", "env"})  # sections whose values are single settings
_SUFFIXES = (".yaml", ".yml")
# one path component: starts alphanumeric or underscore (`_common.yaml`), no separator
_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")


def _relined(value: Any, line: int) -> Any:
    """`value` (inherited from a base file) with every line it knows set to `line`."""
    if isinstance(value, dict):
        out = LDict({k: _relined(v, line) for k, v in value.items()})
        out.line = line
        out.key_lines = dict.fromkeys(out, line)
        return out
    if isinstance(value, list):
        items = LList(_relined(v, line) for v in value)
        items.line = line
        items.item_lines = [line] * len(items)
        return items
    return value


def _merge_mapping(base: dict, outer: dict, atomic: bool, line: int) -> LDict:
    out = LDict(base)
    out.line = getattr(outer, "line", line)
    out.key_lines = {k: line for k in base}
    for key, value in outer.items():
        if value is None:
            out.pop(key, None)
            out.key_lines.pop(key, None)
            continue
        if not atomic and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge_mapping(out[key], value, False, line)
        else:
            out[key] = value
        out.key_lines[key] = line_of(outer, key) or line
    return out


def merge(base: dict, outer: dict, line: int) -> LDict:
    """`outer` merged over `base` by sparkrun's include rules (neither is changed); what comes
    from `base` is placed on `line` (the includer's `include:`)."""
    merged = LDict({k: _relined(v, line) for k, v in base.items() if k != "include"})
    merged.line = 1
    merged.key_lines = dict.fromkeys(merged, line)
    merged.duplicates = list(getattr(outer, "duplicates", []))
    for key, value in outer.items():
        if key == "include":
            continue
        if value is None:
            merged.pop(key, None)
            merged.key_lines.pop(key, None)
            continue
        if key == "overrides" and isinstance(value, list) and isinstance(merged.get(key), list):
            both = LList([*merged[key], *value])
            both.line = line_of(outer, key) or line
            both.item_lines = [
                *getattr(merged[key], "item_lines", [line] * len(merged[key])),
                *(line_of(value, i) or line for i in range(len(value))),
            ]
            merged[key] = both
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge_mapping(merged[key], value, key in _ATOMIC, line)
        else:
            merged[key] = value
        merged.key_lines[key] = line_of(outer, key) or line
    return merged


def resolve(data: Any, file: str) -> tuple[Any, tuple[Path, ...]]:
    """(the recipe with its `include:` chain merged in, the files it was built from, the
    outermost base first); `data` unchanged when it has no `include:`. InputErrors, each with
    the file and line of the `include:` that failed."""
    if not isinstance(data, dict) or "include" not in data:
        return data, ()
    path = Path(file)
    return _resolve(data, path, {str(path.resolve())}, 0)


def _resolve(data: dict, path: Path, seen: set[str], depth: int) -> tuple[Any, tuple[Path, ...]]:
    from spark_tui.recipes.loader import load_recipe_yaml

    if "include" not in data:
        return data, ()
    line = line_of(data, "include") or 1

    def refuse(message: str) -> InputErrors:
        return InputErrors([InputError(f"include: {message}", str(path), line)])

    ref = data["include"]
    if not isinstance(ref, str) or not ref.strip():
        raise refuse(
            f"{ref!r} is not a recipe name (a file beside this one, e.g. "
            "`include: qwen3.6-27b-fp8-vllm`)"
        )
    ref = ref.strip()
    if depth >= MAX_DEPTH:
        raise refuse(f"the chain is deeper than {MAX_DEPTH} recipes (at {ref!r})")
    if str(data.get("recipe_version", "2")) == "1":
        raise refuse('include is a sparkrun v2 feature; this is a v1 recipe (recipe_version: "1")')
    if ref.startswith("@"):
        raise refuse(
            f"{ref!r} is a recipe of one of sparkrun's registries: spark-tui reads no registry "
            "— put that recipe's file beside this one and include it by its name"
        )
    if not _SAFE.fullmatch(ref):
        raise refuse(f"{ref!r} must name a recipe file in the same directory (no path separators)")
    directory = path.parent
    names = [ref] if ref.endswith(_SUFFIXES) else [ref + s for s in _SUFFIXES]
    base_path = next((directory / n for n in names if (directory / n).is_file()), None)
    if base_path is None:
        raise refuse(f"{ref!r} is not beside {path.name} (looked for {', '.join(names)})")
    try:
        inside = base_path.resolve().is_relative_to(directory.resolve())
    except OSError:
        inside = False
    if not inside:
        raise refuse(f"{ref!r} resolves outside this recipe's directory ({base_path.resolve()})")
    key = str(base_path.resolve())
    if key in seen:
        raise refuse(f"cycle: {ref!r} ({base_path.name}) is already part of this include chain")
    seen.add(key)
    base = load_recipe_yaml(base_path)  # its own errors name its own file and line
    if not isinstance(base, dict):
        raise refuse(f"{ref!r} ({base_path.name}) is not a recipe (a YAML mapping)")
    if str(base.get("recipe_version", "2")) == "1":
        raise refuse(
            f'{ref!r} ({base_path.name}) is a v1 recipe (recipe_version: "1"): include takes '
            "a v2 recipe"
        )
    base, chain = _resolve(base, base_path, seen, depth + 1)
    return merge(base, data, line), (*chain, base_path)
