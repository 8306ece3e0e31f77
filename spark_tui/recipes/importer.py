"""`spark-tui recipes import`: an eugr or sparkrun recipe written as a spark-tui recipe file.

The file is spark-tui's own format (recipes/SCHEMA.md), headed by comments that say where
it came from and one line per field that had no equivalent, so the user can read and edit
it. What is written must load back (loader.load_file) before it replaces anything.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path

from spark_tui import paths, policy
from spark_tui.errors import InputError
from spark_tui.recipes.community import EUGR_URL, SPARKRUN_URL, parse_community
from spark_tui.recipes.loader import ID, parse_recipe_text
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.revisions import recipe_to_yaml
from spark_tui.safefile import write_atomic
from spark_tui.untrusted import escaped


def imported_text(recipe: Recipe, source: Path) -> str:
    """The spark-tui recipe file for an imported recipe: header comments, then the YAML."""
    launcher = (
        f"eugr/spark-vllm-docker ({EUGR_URL})"
        if recipe.origin == "eugr"
        else f"sparkrun ({SPARKRUN_URL})"
    )
    lines = [
        f"# Imported by `spark-tui recipes import` from a recipe in the format of {launcher}:",
        f"#   {escaped(str(source))}",
        "# status: untested until it served for you; then set `status: works` and name in",
        f"# `sources:` where it is reported working ({paths.builtin_recipes_dir() / 'SCHEMA.md'}).",
    ]
    if recipe.unmapped:
        lines.append(
            "# Read as its launcher reads it, warnings, and what has no spark-tui equivalent "
            "(line numbers are the source file's):"
        )
        lines += [
            f"#   {'' if u.kind == 'not mapped' else u.kind + ': '}{escaped(str(u))}"
            for u in recipe.unmapped
        ]
    else:
        lines.append("# Every field was mapped.")
    return "\n".join(lines) + "\n" + recipe_to_yaml(recipe)


def _stamp() -> str:
    from spark_tui.recipes.render import stamp_now

    return stamp_now()


def distinct_id(rid: str, source: Path, root: Path | None, taken: AbstractSet[str]) -> str:
    """An id no other file of the same import took: `rid` when it is free, else the nearest
    folders between the import's `root` and the file before it, as few as make it distinct (a
    registry keeps recipes of the same name in different folders), else -2, -3, ... after."""
    if rid not in taken:
        return rid
    folders: tuple[str, ...] = ()
    if root is not None:
        try:
            folders = source.resolve().relative_to(root.resolve()).parts[:-1]
        except ValueError:
            folders = ()
    for k in range(1, len(folders) + 1):
        candidate = "-".join((*folders[-k:], rid)).lower()
        if ID.fullmatch(candidate) and candidate not in taken:
            return candidate
    n = 2
    while f"{rid}-{n}" in taken:
        n += 1
    return f"{rid}-{n}"


def write_imported(
    source: Path,
    target_dir: Path,
    force: bool = False,
    taken: AbstractSet[str] = frozenset(),
    root: Path | None = None,
) -> tuple[Path, Recipe, str]:
    """Convert `source` and write `target_dir/<id>.yaml`. An existing file is refused unless
    `force` (then kept as .bak); the source itself, when it is the target, is kept as
    `<id>.yaml.<format>` (not loaded any more). An id in `taken` (another file of the same
    import wrote it) is made distinct (distinct_id), never a collision. Returns (path,
    recipe, note)."""
    from spark_tui.recipes.loader import load_recipe_yaml

    recipe = parse_community(load_recipe_yaml(source), str(source))
    note = ""
    rid = distinct_id(recipe.id, source, root, taken)
    if rid != recipe.id:
        note = f"; its id {recipe.id!r} is another file's of this import: imported as {rid!r}"
        recipe = replace(recipe, id=rid)
    text = imported_text(recipe, source)
    out = target_dir / f"{recipe.id}.yaml"
    parse_recipe_text(text, str(out))  # what is written must load back
    policy.refuse_if_read_only(f"write {out}")
    target_dir.mkdir(parents=True, exist_ok=True)
    if out.exists():
        if out.resolve() == source.resolve():
            kept = out.with_name(f"{out.name}.{recipe.origin}")
            out.rename(kept)
            note += f"; the original is kept as {kept.name}"
        elif not force:
            raise InputError(f"{out} exists (pass --force to replace it)", str(source))
        else:
            backup = out.with_name(f"{out.name}.{_stamp()}.bak")
            out.rename(backup)
            note += f"; the file it replaces is kept as {backup.name}"
    write_atomic(out, text, mode=0o644, own=False)  # a fresh temporary file: no planted symlink
    return out, recipe, note
