"""Every wall's source map (the upstream messages that say it, `sources:` in its YAML) is
matched by the wall's own signatures: each template, its placeholders filled with
realistic values, in the layouts that print it and after every paste form of
bench/corpus.py (wrap, re-flow, colour, compose and kubectl prefixes, markdown quoting, a
non-English report around it)."""

from __future__ import annotations

import functools

import pytest

from spark_tui.errors import InputErrors
from spark_tui.kb.loader import load_knowledge, parse_wall
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.schema import fill
from spark_tui.yamlfile import parse_yaml

from .test_corpus import corpus

KB = load_knowledge(use_user=False)
MATCHER = Matcher(KB)

# the layouts a message reaches a log in: bare (dmesg, docker inspect, kubectl output),
# behind vLLM's logger in an engine process, behind SGLang's time stamp, behind a Ray
# worker's prefix
LAYOUTS = {
    "bare": "{}",
    "vllm": "(EngineCore_DP0 pid=2871) ERROR 09-21 06:49:24 [core.py:708] {}",
    "sglang": "[2026-09-21 06:49:24 TP0] {}",
    "ray": "(RayWorkerWrapper pid=4123, ip=192.168.100.12) {}",
}
TIMES = 3  # a message that says a wall by repeating (a stall) is printed more than once


def _cases() -> list[tuple[str, str, str]]:
    return [(w.id, s.message, s.at) for w in KB for s in w.sources]


def _named(text: str) -> set[str]:
    return {h.wall.id for h in MATCHER.scan_lines("paste", text.encode().split(b"\n"))}


def test_every_log_wall_has_a_source_map() -> None:
    assert [w.id for w in KB if w.signatures and not w.sources] == []


# the forms that re-wrap a line: a wrap that cuts a message where it looks like a new record (a
# time stamp, an exception name) cannot always be told from one; these are held to a rate
WRAPPING = {"wrapped at 80", "screen copy at 120", "reflowed at 100", "colour, wrapped at 80"}
WRAPPED_RECALL = 0.98  # measured 0.984 (29 of 1840 wrapped cases missed)


def _misses(wall: str, message: str) -> list[tuple[str, str]]:
    text = fill(message)
    out = []
    for layout, frame in LAYOUTS.items():
        lines = [frame.format(line) for line in text.split("\n")] * TIMES
        for form, paste in corpus.VARIANTS.items():
            if wall not in _named(paste("\n".join(lines))):
                out.append((layout, form))
    return out


@functools.cache
def misses() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Every case's misses, made when a test first asks (not at collection, which every xdist
    worker repeats); the file is one xdist group, so one worker makes them once."""
    return {(w, m): _misses(w, m) for w, m, _ in _cases()}


pytestmark = pytest.mark.xdist_group("wall-sources")


@pytest.mark.parametrize(("wall", "message", "at"), _cases())
def test_each_message_names_its_wall_unwrapped(wall: str, message: str, at: str) -> None:
    """Every layout and every paste form that keeps the line whole: always found."""
    missed = [f"{lay} / {form}" for lay, form in misses()[(wall, message)] if form not in WRAPPING]
    assert missed == [], f"{at}: {fill(message)!r}"


def test_messages_survive_rewrapping() -> None:
    """Re-wrapped (terminal, screen copy, editor reflow): found in nearly every case, and every
    message in at least one wrapped form of every layout."""
    cases = len(misses()) * len(LAYOUTS) * len(WRAPPING)
    missed = [(w, lay, form) for (w, _), ms in misses().items() for lay, form in ms]
    assert 1 - len(missed) / cases >= WRAPPED_RECALL, missed
    for (wall, message), ms in misses().items():
        for layout in LAYOUTS:
            lost = {form for lay, form in ms if lay == layout}
            assert lost != WRAPPING, (wall, message, layout)


def test_a_bad_source_map_is_refused_with_its_line() -> None:
    base = (
        "id: x-wall\ntitle: t\nseverity: error\nkind: log\nengines: [vllm]\nsummary: s\n"
        "signatures: [{log: 'boom'}]\nfixes: []\nexplain: e\nreferences: [r]\n"
    )
    bad = {
        "sources:\n  - message: 'boom {nope}'\n    project: p\n    versions: v\n    at: f:1\n": (
            "unknown placeholder"
        ),
        "sources:\n  - message: 'boom {'\n    project: p\n    versions: v\n    at: f:1\n": (
            "lone brace"
        ),
        "sources:\n  - message: 'boom'\n    project: p\n": "missing field 'versions'",
        "sources: []\n": "must list the upstream messages",
    }
    for extra, words in bad.items():
        with pytest.raises(InputErrors) as err:
            parse_wall(parse_yaml(base + extra, "x-wall.yaml"), "x-wall.yaml")
        assert words in str(err.value)
        assert "x-wall.yaml:" in str(err.value)
    good = "sources:\n  - message: 'boom {n} {{x}}'\n    project: p\n    versions: v\n    at: f:1\n"
    wall = parse_wall(parse_yaml(base + good, "x-wall.yaml"), "x-wall.yaml")
    assert fill(wall.sources[0].message) == "boom 42 {x}"


def test_kb_show_lists_the_source_map() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "spark_tui", "kb", "show", "dist-init-timeout"],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "COLUMNS": "200"},
    ).stdout
    assert "Messages it is named from" in out
    assert "retreiving ncclUniqueId" in out and "pytorch/pytorch, 1.13 to 2.1" in out
