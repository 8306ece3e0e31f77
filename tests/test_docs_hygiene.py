"""What a user sees names no file the user does not have: the developers' notes (DESIGN.md,
WALLS.md, GB10-FACTS.md), the seed stories (seeds/…) or their captures — public write-ups are
cited by title and address instead — and the docs the product points to exist."""

from __future__ import annotations

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
