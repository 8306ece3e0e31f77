"""The loader validates every field and names file and line; nothing is half-loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spark_tui.errors import InputErrors
from spark_tui.kb.loader import load_dir, load_knowledge

GOOD = """\
id: demo-wall
title: A demo wall
severity: error
kind: log
engines: [vllm]
summary: Something broke.
signatures:
  - log: 'demo failure \\d+'
fixes:
  - id: do-it
    title: Do it
    risk: safe
    actions:
      - type: run
        command: echo ok
references: [seeds/000_45738e5d72b448db.txt]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "kb"
    d.mkdir(exist_ok=True)
    (d / name).write_text(textwrap.dedent(text))
    return d


def errors_of(directory: Path) -> list[str]:
    with pytest.raises(InputErrors) as info:
        load_dir(directory)
    return [str(e) for e in info.value.errors]


def test_good_wall_loads(tmp_path: Path) -> None:
    walls = load_dir(write(tmp_path, "demo-wall.yaml", GOOD))
    wall = walls["demo-wall"]
    assert wall.signatures[0].pattern == r"demo failure \d+"
    assert wall.fixes[0].actions[0].type == "run"


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (("severity: error", "severity: fatal"), 3, "'severity' is 'fatal'"),
        (("kind: log\n", "kind: log\ncolour: red\n"), 5, "unknown field 'colour'"),
        (
            ("  - log: 'demo failure \\d+'", "  - log: 'demo failure (\\d+'"),
            8,
            "regex does not compile",
        ),
        (
            ("      - type: run\n        command: echo ok\n", "      - type: teleport\n"),
            14,
            "unknown action type 'teleport'",
        ),
        (
            ("    actions:\n      - type: run\n        command: echo ok\n", "    actions: []\n"),
            13,
            "needs at least one action",
        ),
        (("title: A demo wall\n", ""), 1, "missing field 'title'"),
        (
            ("  - log: 'demo failure \\d+'", "  - when: ['gpu.bogus >= 3']"),
            8,
            "unknown fact 'gpu.bogus'",
        ),
        (("  - log: 'demo failure \\d+'", "  - log: 'demo(?=x)'"), 8, "lookaround"),
        # what the confirming engine (RE2, linear time) cannot take is refused up front
        (("  - log: 'demo failure \\d+'", "  - log: 'demo a++b'"), 8, "RE2 refuses it"),
        (("  - log: 'demo failure \\d+'", "  - log: 'demo(?>ab)c'"), 8, "RE2 refuses it"),
        (
            ("  - log: 'demo failure \\d+'", "  - log: 'demo'\n    after: 'x\\Z'"),
            9,
            "RE2 refuses it",
        ),
        (
            ("  - log: 'demo failure \\d+'", "  - log: 'demo'\n    times: 0"),
            9,
            "'times' must be a positive number",
        ),
        (
            ("  - log: 'demo failure \\d+'", "  - log: 'demo'\n    confidence: certain"),
            9,
            "'confidence' is 'certain'",
        ),
        (
            ("  - log: 'demo failure \\d+'", "  - log: 'demo'\n    reset: 'again'"),
            9,
            "'reset' only means something with 'after'",
        ),
        (
            ("  - log: 'demo failure \\d+'", "  - log: 'demo'\n    confirm: ['gpu.bogus > 1']"),
            9,
            "unknown fact 'gpu.bogus'",
        ),
    ],
)
def test_errors_name_file_and_line(
    tmp_path: Path, change: tuple[str, str], line: int, message: str
) -> None:
    old, new = change
    assert old in GOOD
    d = write(tmp_path, "demo-wall.yaml", GOOD.replace(old, new))
    errs = errors_of(d)
    assert any(f"demo-wall.yaml:{line}: " in e and message in e for e in errs), errs


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    d = write(tmp_path, "demo-wall.yaml", GOOD.replace("engines: [vllm]", "engines: [vllm"))
    errs = errors_of(d)
    assert len(errs) == 1 and "demo-wall.yaml:" in errs[0] and "invalid YAML" in errs[0]


def test_duplicate_id_and_nothing_half_loaded(tmp_path: Path) -> None:
    d = write(tmp_path, "demo-wall.yaml", GOOD)
    (d / "other.yaml").write_text(GOOD)
    errs = errors_of(d)
    assert any("duplicate wall id 'demo-wall'" in e for e in errs)


def test_user_walls_override_builtin_by_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = load_knowledge()
    some = next(iter(builtin))
    user = tmp_path / "user"
    user.mkdir()
    text = GOOD.replace("id: demo-wall", f"id: {some.id}").replace("A demo wall", "Overridden")
    (user / f"{some.id}.yaml").write_text(text)
    (user / "demo-wall.yaml").write_text(GOOD)
    kb = load_knowledge(user=user)
    assert kb.get(some.id).title == "Overridden"
    assert kb.get("demo-wall").title == "A demo wall"
    assert len(kb) == len(builtin) + 1


def test_lint_cli_exit_2_with_file_and_line(tmp_path: Path) -> None:
    d = write(tmp_path, "demo-wall.yaml", GOOD.replace("risk: safe", "risk: yolo"))
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui", "kb", "lint", str(d)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "demo-wall.yaml:12:" in proc.stderr and "'risk' is 'yolo'" in proc.stderr


def test_builtin_knowledge_is_valid() -> None:
    kb = load_knowledge(use_user=False)
    assert len(kb) >= 1
    for wall in kb:
        assert wall.references, wall.id


def test_cluster_wide_actions_default_to_every_node_in_preview() -> None:
    from spark_tui.kb.schema import Action, Fix
    from spark_tui.remedy.render import preview_lines

    restart = Action("restart-ray", {"args": {"--object-store-memory": 1073741824}})
    assert restart.on == "all" and Action("run", {"command": "true"}).on == "seen"
    lines = preview_lines(Fix("f", "F", "disruptive", False, (restart,)))
    assert lines[0] == "# on every node:"


def test_new_signature_fields_load(tmp_path: Path) -> None:
    text = GOOD.replace(
        "  - log: 'demo failure \\d+'",
        "  - log: 'demo failure \\d+'\n    after: 'started'\n    reset: 'starting'\n"
        "    unless: 'other'\n    times: 2\n    confidence: suspected\n"
        "    confirm: ['gpu.sm_pct >= 90']",
    )
    sig = load_dir(write(tmp_path, "demo-wall.yaml", text))["demo-wall"].signatures[0]
    assert (sig.after, sig.reset, sig.unless, sig.times, sig.confidence) == (
        "started",
        "starting",
        "other",
        2,
        "suspected",
    )
    assert [str(c) for c in sig.confirm] == ["gpu.sm_pct >= 90"]
