"""Every log wall is recognised in real text, and healthy logs raise no error.

Data, not code (posting's sample-configs): tests/sample-logs/walls/<wall-id>/*.log
hold real log excerpts (different versions and wordings; where each came from is
in that folder's SOURCES.md); tests/sample-logs/healthy/*.log are hard negatives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.kb.engines import installed_engines
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher, scan_stream

from .conftest import TESTS

SAMPLES = TESTS / "sample-logs"
KB = load_knowledge(use_user=False)
LOG_WALLS = sorted(w.id for w in KB if w.signatures and w.kind == "log")


def engines() -> list[str]:
    return installed_engines()


MATCHERS = {name: Matcher(KB, engine=name) for name in engines()}


def walls_in(path: Path, engine: str) -> dict[str, int]:
    found: dict[str, int] = {}
    with path.open("rb") as fh:
        for hit in scan_stream(MATCHERS[engine], path.name, fh):
            found.setdefault(hit.wall.id, hit.line_no)
    return found


def positive_examples() -> list[tuple[str, Path]]:
    out = []
    for d in sorted((SAMPLES / "walls").glob("*")):
        if d.is_dir():
            out += [(d.name, p) for p in sorted(d.glob("*.log"))]
    return out


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize(
    ("wall_id", "path"), positive_examples(), ids=lambda v: getattr(v, "name", v)
)
def test_positive_example_is_recognised(wall_id: str, path: Path, engine: str) -> None:
    assert wall_id in KB.walls, f"{path.parent.name} is not a wall id"
    assert wall_id in walls_in(path, engine), f"{wall_id} not found in {path}"


# Walls whose one real example so far is the real engine's own log, made on the real tier
# (tests/real/engine_chroot.sh): a second, from a public thread or another run, is wanted.
ONE_EXAMPLE_SO_FAR: set[str] = set()


@pytest.mark.parametrize("wall_id", LOG_WALLS)
def test_every_log_wall_has_two_real_examples(wall_id: str) -> None:
    folder = SAMPLES / "walls" / wall_id
    examples = sorted(folder.glob("*.log"))
    least = 1 if wall_id in ONE_EXAMPLE_SO_FAR else 2
    assert len(examples) >= least, f"{wall_id}: needs two or more real examples in {folder}"
    assert (folder / "SOURCES.md").is_file(), f"{wall_id}: say where the examples come from"
    texts = {p.read_bytes() for p in examples}
    assert len(texts) == len(examples), f"{wall_id}: examples must differ"


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("path", sorted((SAMPLES / "healthy").glob("*.log")), ids=lambda p: p.name)
def test_healthy_logs_raise_no_error(path: Path, engine: str) -> None:
    errors = [w for w in walls_in(path, engine) if KB.walls[w].severity == "error"]
    assert errors == [], f"{path.name}: false error diagnoses {errors}"
