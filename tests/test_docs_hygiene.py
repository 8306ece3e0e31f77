"""What a user sees names no file the user does not have: the developers' notes (DESIGN.md,
WALLS.md, GB10-FACTS.md), the seed stories (seeds/…) or their captures — public write-ups are
cited by title and address instead — and the docs the product points to exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRIVATE = re.compile(r"DESIGN\.md|WALLS\.md|GB10-FACTS\.md|seeds/0|fixtures/real|\.\./shared")


def user_visible_files() -> list[Path]:
    out = [ROOT / "README.md"]
    for folder, pattern in (
        ("spark_tui", "*.py"),
        ("spark_tui", "*.md"),
        ("spark_tui", "*.yaml"),
        ("knowledge", "*"),
        ("recipes", "*"),
        ("docs", "*"),
    ):
        out += [p for p in (ROOT / folder).rglob(pattern) if p.is_file()]
    return out


def test_no_user_visible_text_names_a_private_file() -> None:
    offenders: dict[str, list[str]] = {}
    for path in user_visible_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                offenders.setdefault(str(path.relative_to(ROOT)), []).append(f"{number}: {line}")
    assert not offenders, offenders


def test_the_docs_the_product_names_exist() -> None:
    named = set()
    for path in user_visible_files():
        named |= set(re.findall(r"docs/[a-z-]+\.md", path.read_text(encoding="utf-8")))
    assert named >= {"docs/cluster-yaml.md", "docs/json.md"}
    missing = [n for n in sorted(named) if not (ROOT / n).is_file()]
    assert not missing
    readme = (ROOT / "README.md").read_text()
    for doc in ("docs/cluster-yaml.md", "docs/recipes.md", "docs/walls.md", "docs/json.md"):
        assert f"]({doc})" in readme, doc


RELATIVE_DOC = re.compile(r"(?<![\w/])(?:docs/[\w-]+|recipes/SCHEMA|knowledge/SCHEMA)\.md")


def product_strings() -> list[tuple[str, int, str]]:
    """Every string the product's code holds that is not a docstring (help, errors, hints,
    files it writes), as (file, line, text)."""
    out = []
    for path in sorted((ROOT / "spark_tui").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                first = node.body[0] if node.body else None
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docstrings.add(id(first.value))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                out.append((str(path.relative_to(ROOT)), node.lineno, node.value))
    return out


def test_what_the_product_says_cites_docs_where_an_installed_user_has_them() -> None:
    """A pip-installed user has no docs/ or recipes/ folder: a page is named by the path it is
    installed at (spark_tui.paths.doc), never by the source checkout's relative name."""
    offenders = [f"{f}:{n}: {RELATIVE_DOC.search(s)[0]}" for f, n, s in product_strings() if RELATIVE_DOC.search(s)]  # fmt: skip
    for folder in ("knowledge", "recipes"):
        for path in (ROOT / folder).glob("*.yaml"):
            text = path.read_text(encoding="utf-8")
            offenders += [f"{path.name}: {m}" for m in RELATIVE_DOC.findall(text)]
    assert not offenders, offenders


def test_every_page_the_product_names_ships_in_the_wheel() -> None:
    named = set()
    for path in sorted((ROOT / "spark_tui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "doc"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "paths"
            ):
                (arg,) = node.args
                assert isinstance(arg, ast.Constant), ast.dump(node)
                named.add(arg.value)
    assert {"cluster-yaml.md", "json.md"} <= named, named
    assert all((ROOT / "docs" / n).is_file() for n in named), named
    # the wheel carries them where paths.doc looks (tests/test_packaging.py installs it)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"docs" = "spark_tui/_data/docs"' in pyproject
    assert '"recipes" = "spark_tui/_data/recipes"' in pyproject


def test_no_seed_jargon_in_what_the_commands_print(tmp_path: Path) -> None:
    """ "Seed" is the developers' word for the stories the walls come from: the help of every
    command, the demo's list and a report never use it."""
    import argparse
    import os
    import subprocess
    import sys

    from spark_tui.entry import build_parser

    def helps(parser: argparse.ArgumentParser) -> list[str]:
        out = [parser.format_help()]
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for p in a.choices.values():
                    out += helps(p)
        return out

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    printed = helps(build_parser())
    for args in (
        ("demo", "--list"),
        ("report", "--offline", "--recipe", "minimax-m2.7-nvfp4-vllm-tp2"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "spark_tui", *args],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0 and proc.stdout, (args, proc.stderr)
        printed.append(proc.stdout + proc.stderr)
    assert "measured 35.8 tok/s" in printed[-1]
    offenders = [
        t for text in printed for t in text.splitlines() if re.search(r"(?i)\bseeds?\b", t)
    ]
    assert not offenders, offenders
