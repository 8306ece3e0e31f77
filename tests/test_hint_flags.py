"""Every command the product suggests parses, and every flag an error tells the user to pass
is one the command they ran accepts (`doctor`, `fix`, `report` once suggested `--demo`; `up`
suggested `--set`, which only `recipes render/fit/check-flags` take)."""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tui.entry import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
# `spark-tui COMMAND …` up to the end of the quote, code span or parenthesis it is in
SUGGESTION = re.compile(r"spark-tui ((?:" + "|".join(COMMANDS) + r")\b[^'`\"\n),;]*)")
# the words of a command line: flags, placeholders ({} of an f-string, NAME, ID, FILE…)
ARGUMENT = re.compile(r"-{1,2}[a-z][\w-]*(?:=\S+)?|[A-Z][A-Z_]*(?:=\S+)?|\{\}|[\w.-]+=\S+")


def product_texts() -> list[tuple[str, str]]:
    """(where, text) for every string of the product's code (an f-string with {} for each
    value) but docstrings, and every line of the knowledge base and the recipes."""
    out = []
    for path in sorted((ROOT / "spark_tui").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                first = node.body[0] if node.body else None
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    skip.add(id(first.value))
            if isinstance(node, ast.JoinedStr):
                skip.update(id(v) for v in node.values)
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.JoinedStr):
                text = "".join(
                    v.value if isinstance(v, ast.Constant) else "{}" for v in node.values
                )
                out.append((where, text))
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in skip
            ):
                out.append((where, node.value))
    for folder in ("knowledge", "recipes"):
        for path in sorted((ROOT / folder).glob("*.yaml")):
            for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                out.append((f"{folder}/{path.name}:{n}", text))
    return out


def command_words(text: str, parser: argparse.ArgumentParser) -> list[str]:
    """The command line a suggestion holds: its (sub)commands, then its arguments, up to
    the first word of prose; placeholders become a word."""
    words: list[str] = []
    for word in text.split():
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and word in subs[0].choices:
            words.append(word)
            parser = subs[0].choices[word]
        elif ARGUMENT.fullmatch(word):
            words.append("x" if word == "{}" or word.isupper() else word)
        else:
            break
    return words


def test_every_command_the_product_suggests_parses() -> None:
    parser = build_parser()
    suggested = [
        (where, command_words(m.group(1), parser))
        for where, text in product_texts()
        for m in SUGGESTION.finditer(text)
    ]
    assert len(suggested) > 20 and any(w[:1] == ["trust"] for _, w in suggested), suggested
    assert any(len(w) > 3 for _, w in suggested), suggested  # a suggestion with arguments
    bad = []
    for where, words in suggested:
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                build_parser().parse_args(words)
        except SystemExit:
            # naming a command without its operands (`spark-tui recipes import`) is fine;
            # an option or a subcommand it does not have is not
            if "the following arguments are required" not in said.getvalue():
                bad.append((where, " ".join(words), said.getvalue().splitlines()[-1]))
    assert not bad, bad


def accepted(argv: tuple[str, ...]) -> set[str]:
    """The options the command `argv` names accepts (its own and the global ones)."""
    parser = build_parser()
    found = {o for a in parser._actions for o in a.option_strings}
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
        found |= {o for a in parser._actions for o in a.option_strings}
    return found


NO_IMAGE = "minimax-m3-nvfp4-vllm-tp3"  # its source names a build, not an image


@pytest.mark.parametrize(
    "argv",
    [
        ("doctor",),
        ("fix", "cuda-oom"),
        ("status",),
        ("stop",),
        ("watch", "--json"),
        ("up",),
        ("recipes", "adopt"),
        ("trust", "spark1"),
        ("up", "--demo", "healthy", "--recipe", NO_IMAGE, "--yes"),
        ("recipes", "render", NO_IMAGE),
    ],
    ids=lambda a: " ".join(a),
)
def test_an_error_names_only_flags_its_command_accepts(
    argv: tuple[str, ...], tmp_path: Path
) -> None:
    """Run where there is no cluster.yaml; what goes wrong names flags of the same command
    (a suggestion of another command, 'spark-tui X …', is checked above)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui", *argv],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=200,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-1500:])
    said = proc.stderr.splitlines()[-1]
    own = SUGGESTION.sub("", said)  # another command's suggestion: checked on its own
    if NO_IMAGE in argv:  # the recipe's own note on its image names the engine's flags
        from spark_tui.recipes.loader import load_recipes

        own = own.replace(load_recipes().get(NO_IMAGE).image_note, "")
    flags = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", own))
    assert flags <= accepted(argv), (sorted(flags - accepted(argv)), said)


def test_the_debug_log_hint_puts_the_option_where_it_parses() -> None:
    """--debug-log is an option of spark-tui itself: `spark-tui up --debug-log F` is refused,
    so the hint after an internal error shows it before the command."""
    from spark_tui import debuglog

    said = debuglog.where()
    m = re.search(r"'spark-tui (--debug-log FILE) COMMAND …'", said)
    assert m, said
    build_parser().parse_args(["--debug-log", "x.log", "up", "--demo", "healthy"])
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        build_parser().parse_args(["up", "--demo", "healthy", "--debug-log", "x.log"])
