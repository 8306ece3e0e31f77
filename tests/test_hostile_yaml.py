"""Hostile YAML through every loader (walls, recipes, cluster.yaml, scenarios): alias
bombs, deep nesting, recursive aliases, FIFOs, huge and binary files, and fuzzed text.
The outcome is always a loaded object or an InputError naming the file and a line —
never another exception, never a hang."""

from __future__ import annotations

import os
import string
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_tui import yamlfile
from spark_tui.entry import main
from spark_tui.errors import InputError, InputErrors
from spark_tui.kb.loader import load_dir as load_walls
from spark_tui.nodes.config import load_cluster
from spark_tui.recipes.loader import load_dir as load_recipe_dir
from spark_tui.sim.scenarios import scenarios

ROOT = Path(__file__).resolve().parent.parent
WALL = (ROOT / "knowledge" / "page-cache-hog.yaml").read_text()
RECIPE_ID = "minimax-m2.7-mxfp4-vllm-tp2"
RECIPE = (ROOT / "recipes" / f"{RECIPE_ID}.yaml").read_text()
CLUSTER = """\
nodes:
  - name: spark1
    host: 10.0.0.1
    role: head
    fabric_if: enp1s0f0np0
  - name: spark2
    host: 10.0.0.2
    role: worker
"""
SCENARIOS = (ROOT / "spark_tui" / "sim" / "scenarios.yaml").read_text()


def _wall(path: Path):
    return load_walls(path.parent)


def _recipe(path: Path):
    return load_recipe_dir(path.parent)


# kind → (file name, valid text, loader of the file)
KINDS: dict[str, tuple[str, str, Callable[[Path], object]]] = {
    "wall": ("page-cache-hog.yaml", WALL, _wall),
    "recipe": (f"{RECIPE_ID}.yaml", RECIPE, _recipe),
    "cluster": ("cluster.yaml", CLUSTER, load_cluster),
    "scenarios": ("scenarios.yaml", SCENARIOS, lambda p: scenarios.__wrapped__(p)),
}


def refusal(kind: str, text: str, tmp: Path) -> InputError:
    """Load `text` as a file of this kind; it must be refused: return the error."""
    name, _, load = KINDS[kind]
    path = tmp / kind / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load(path)
    err = info.value
    errors = err.errors if isinstance(err, InputErrors) else [err]
    for e in errors:
        assert e.file == str(path), str(e)
        assert isinstance(e.line, int) and e.line >= 1, str(e)
    return errors[0]


def test_the_valid_files_load(tmp_path: Path) -> None:
    for kind, (name, text, load) in KINDS.items():
        path = tmp_path / kind / name
        path.parent.mkdir()
        path.write_text(text)
        assert load(path), kind


# ---------------------------------------------------------------- alias bombs


def bomb(levels: int = 9, width: int = 9, indent: str = "") -> str:
    """The billion laughs: `width`**`levels` values from a few hundred bytes."""
    lines = [f"{indent}l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_alias_bomb_is_refused_at_its_line(kind: str, tmp_path: Path) -> None:
    text = KINDS[kind][1]
    if kind == "wall":  # inside an action's parameters, as the 741-byte wall did
        anchor = "        command: sysctl -w vm.drop_caches=3\n"
        assert anchor in text
        hostile = text.replace(anchor, anchor + "        bomb:\n" + bomb(indent="          "))
        first_line = text[: text.index(anchor)].count("\n") + 3
    else:
        hostile = bomb() + text
        first_line = 1
    err = refusal(kind, hostile, tmp_path)
    assert "refused: more than 50000 values once aliases are expanded" in err.reason
    # the alias that pushed it over the limit: in the bomb's last levels
    assert first_line + 4 <= err.line <= first_line + 8


def test_a_wide_alias_fan_out_is_refused_by_count(tmp_path: Path) -> None:
    text = "a: &a x\nb: [" + ", ".join(["*a"] * 65) + "]\n" + CLUSTER
    err = refusal("cluster", text, tmp_path)
    assert (err.line, err.reason) == (2, "refused: more than 64 aliases (*name)")


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    err = refusal("cluster", "nodes: &n\n  - *n\n", tmp_path)
    assert err.line == 2
    assert err.reason == "refused: alias *n inside the value it names (a recursive structure)"


def test_aliases_that_nest_too_deep_once_expanded_are_refused(tmp_path: Path) -> None:
    # each level is shallow as written, but the aliases stack 40 levels deep
    lines = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, 40)]
    err = refusal("cluster", "\n".join(lines) + "\n", tmp_path)
    assert err.reason == "refused: nested more than 32 levels deep once aliases are expanded"
    # line 31 (l30): the document's mapping, l30's list, then l29's 31 levels = 33
    assert err.line == 31


def test_a_few_aliases_still_work(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "nodes:\n  - &n {name: spark1, host: h1, role: head, fabric_if: enp1s0f0np0}\n"
        "  - {name: spark2, host: h2, role: worker, fabric_if: enp1s0f0np0}\n"
    )
    assert [n.fabric_if for n in load_cluster(path).nodes] == ["enp1s0f0np0"] * 2


def test_kb_lint_refuses_the_bomb_wall_in_one_line(tmp_path: Path, capsys) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    anchor = "        command: sysctl -w vm.drop_caches=3\n"
    (kb / "page-cache-hog.yaml").write_text(
        WALL.replace(anchor, anchor + "        bomb:\n" + bomb(indent="          "))
    )
    assert main(["kb", "lint", str(kb)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "all valid" not in err
    assert err.startswith(f"spark-tui: {kb / 'page-cache-hog.yaml'}:")
    assert "refused: more than 50000 values once aliases are expanded (an alias bomb?)" in err


# ---------------------------------------------------------------- deep nesting


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("style", ["flow", "block"])
def test_5000_deep_nesting_is_refused_at_its_line(kind: str, style: str, tmp_path: Path) -> None:
    if style == "flow":
        deep = "deep: " + "[" * 5000 + "]" * 5000 + "\n"
        line = 1
    else:
        deep = "deep:\n" + "".join(" " * i + "- \n" for i in range(1, 200))
        line = 33  # the 33rd level (the document's mapping is the first)
    err = refusal(kind, deep + KINDS[kind][1], tmp_path)
    assert err.reason == "refused: nested more than 32 levels deep"
    assert err.line == line


def test_doctor_on_a_5000_deep_cluster_yaml_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n  - name: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["doctor", "--config", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"spark-tui: {path}:2: refused: nested more than 32 levels deep\n"
    )


# ---------------------------------------------------------------- files that are not text


def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    os.mkfifo(kb / "x.yaml")  # nobody writes: a read would wait for ever
    with pytest.raises(InputError) as info:
        load_walls(kb)
    assert str(info.value) == f"{kb / 'x.yaml'}: cannot read: not a regular file"


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    with path.open("wb") as fh:
        fh.truncate(yamlfile.MAX_BYTES + 1)
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert str(info.value) == f"{path}: larger than 1024 KiB: refused"


def test_binary_and_control_characters_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(CLUSTER.encode() + b"# \xff\xfe\n")
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert (info.value.line, info.value.reason) == (9, "cannot read: not UTF-8 text")
    path.write_text(CLUSTER + "x: a\x00b\n")
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert (info.value.line, info.value.reason) == (
        9,
        "invalid YAML: character '\\x00' is not allowed",
    )


@pytest.mark.parametrize(
    "value, reason",
    [
        ("2024-13-45", "month must be in 1..12"),
        ("!!binary 'not base64!'", "failed to decode base64 data"),
        ("!!python/object:os.system ls", "could not determine a constructor"),
        ("!!timestamp 2024-02-30", "day is out of range for month"),
    ],
)
def test_values_yaml_cannot_build_name_their_line(value: str, reason: str, tmp_path: Path) -> None:
    err = refusal("cluster", CLUSTER + f"extra: {value}\n", tmp_path)
    assert err.line == 9 and reason in err.reason


# ---------------------------------------------------------------- fuzzing


YAML_ALPHABET = string.ascii_letters[:8] + string.digits[:4] + " \n\t-:,[]{}&*!|>'\"#%@`?.\\~=<"


def mutate(text: str, data: st.DataObject) -> str:
    """A valid file with a few characters inserted, deleted or replaced."""
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(st.text(YAML_ALPHABET, min_size=1, max_size=8))
        if op == "insert":
            text = text[:i] + piece + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + len(piece) :]
        else:
            text = text[:i] + piece + text[i + len(piece) :]
    return text


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["head", "worker", "all", "safe", "destructive", "run", "reboot", "vllm"]),
)
keys = st.sampled_from(
    ["id", "title", "nodes", "name", "host", "role", "fixes", "actions", "type", "command",
     "root", "risk", "signatures", "log", "when", "serve", "args", "env", "image", "model",
     "path", "on", "fabric_if", "port", "user", "recipe", "engines", "references"]
)  # fmt: skip
trees = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5)
)


def check_outcome(kind: str, text: str) -> None:
    """Loaded, or an InputError naming the file and a line: nothing else."""
    name, _, load = KINDS[kind]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            result = load(path)
        except InputError as exc:
            errors = exc.errors if isinstance(exc, InputErrors) else [exc]
            for e in errors:
                assert e.file == str(path), str(e)
                assert isinstance(e.line, int) and e.line >= 1, str(e)
        else:
            assert result is not None


FUZZED = ["wall", "recipe", "cluster"]


@pytest.mark.parametrize("kind", FUZZED)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_edits_of_a_valid_file(kind: str, data: st.DataObject) -> None:
    check_outcome(kind, mutate(KINDS[kind][1], data))


@pytest.mark.parametrize("kind", FUZZED)
@settings(max_examples=150, deadline=None)
@given(text=st.text(YAML_ALPHABET, max_size=200))
def test_fuzzed_text(kind: str, text: str) -> None:
    check_outcome(kind, text)


@pytest.mark.parametrize("kind", FUZZED)
@settings(max_examples=150, deadline=None)
@given(tree=trees)
def test_fuzzed_structures(kind: str, tree: object) -> None:
    check_outcome(kind, yaml.safe_dump(tree, allow_unicode=True))


@pytest.mark.parametrize("kind", FUZZED)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_values_in_the_valid_structure(kind: str, data: st.DataObject) -> None:
    """Each value of a valid file replaced by an arbitrary one (the shape stays right)."""
    tree = yaml.safe_load(KINDS[kind][1])

    def replace(node: object) -> object:
        if isinstance(node, dict):
            return {k: replace(v) for k, v in node.items()}
        if isinstance(node, list):
            return [replace(v) for v in node]
        return data.draw(trees) if data.draw(st.integers(0, 4)) == 0 else node

    check_outcome(kind, yaml.safe_dump(replace(tree), allow_unicode=True, sort_keys=False))


@pytest.mark.parametrize("kind", ["wall", "recipe", "cluster"])
@pytest.mark.parametrize("escape", ["\\e]0;pwned\\a", "\\e[2J", "\\r", "\\x9b", "\\0"])
def test_a_terminal_escape_in_a_value_is_refused(kind: str, escape: str, tmp_path: Path) -> None:
    """Double-quoted YAML may spell control characters; a title that clears the screen
    or rewrites the terminal's title must not reach `kb list`."""
    err = refusal(kind, f'zz-extra: "evil {escape} text"\n' + KINDS[kind][1], tmp_path)
    assert err.line == 1 and err.reason.startswith("invalid YAML: control character ")
