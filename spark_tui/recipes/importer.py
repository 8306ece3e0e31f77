"""`spark-tui recipes import`: an eugr or sparkrun recipe written as a spark-tui recipe file.

The file is spark-tui's own format (recipes/SCHEMA.md), headed by comments that say where
it came from and one line per field that had no equivalent, so the user can read and edit
it. What is written must load back (loader.load_file) before it replaces anything.
"""

from __future__ import annotations

from pathlib import Path

from spark_tui import paths, policy
from spark_tui.errors import InputError
from spark_tui.recipes.community import EUGR_URL, SPARKRUN_URL, parse_community
from spark_tui.recipes.loader import parse_recipe_text
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


def write_imported(source: Path, target_dir: Path, force: bool = False) -> tuple[Path, Recipe, str]:
    """Convert `source` and write `target_dir/<id>.yaml`. An existing file is refused unless
    `force` (then kept as .bak); the source itself, when it is the target, is kept as
    `<id>.yaml.<format>` (not loaded any more). Returns (path, recipe, note)."""
    from spark_tui.recipes.loader import load_recipe_yaml

    recipe = parse_community(load_recipe_yaml(source), str(source))
    text = imported_text(recipe, source)
    out = target_dir / f"{recipe.id}.yaml"
    parse_recipe_text(text, str(out))  # what is written must load back
    note = ""
    policy.refuse_if_read_only(f"write {out}")
    target_dir.mkdir(parents=True, exist_ok=True)
    if out.exists():
        if out.resolve() == source.resolve():
            kept = out.with_name(f"{out.name}.{recipe.origin}")
            out.rename(kept)
            note = f"; the original is kept as {kept.name}"
        elif not force:
            raise InputError(f"{out} exists (pass --force to replace it)", str(source))
        else:
            backup = out.with_name(f"{out.name}.{_stamp()}.bak")
            out.rename(backup)
            note = f"; the file it replaces is kept as {backup.name}"
    write_atomic(out, text, mode=0o644, own=False)  # a fresh temporary file: no planted symlink
    return out, recipe, note
