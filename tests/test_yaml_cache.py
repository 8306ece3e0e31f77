"""Parsed YAML kept by content: the same answer (lines included) without parsing again,
never a refused file let through, and a damaged or unwritable cache simply not used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_tui import yaml_cache, yamlfile
from spark_tui.errors import InputError

TEXT = "id: demo\nsteps:\n  - name: one\n    run: echo 1\n  - name: two\n    run: echo 2\n"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yaml_cache._MEMORY.clear()
    return tmp_path / "cache" / "spark-tui" / "yaml"


def _shape(data):
    return (data, data.line_of("steps"), data["steps"].line_of(1), data["steps"][1].line_of("run"))


def test_a_second_parse_comes_from_the_cache_with_the_same_lines(
    _own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = yamlfile.parse_yaml(TEXT, "demo.yaml")
    assert len(list(_own_cache.iterdir())) == 1
    yaml_cache._MEMORY.clear()  # a new process: from disk
    monkeypatch.setattr(yamlfile, "_parse", lambda text, file: pytest.fail("parsed again"))
    second = yamlfile.parse_yaml(TEXT, "demo.yaml")
    assert (
        _shape(second)
        == _shape(first)
        == (
            {
                "id": "demo",
                "steps": [{"name": "one", "run": "echo 1"}, {"name": "two", "run": "echo 2"}],
            },
            2,
            5,
            6,
        )
    )
    assert type(second) is yamlfile.LDict and type(second["steps"]) is yamlfile.LList
    second["steps"].append("changed")  # a caller's change never reaches the next load
    assert len(yamlfile.parse_yaml(TEXT, "demo.yaml")["steps"]) == 2


def test_an_edit_is_parsed_afresh() -> None:
    assert yamlfile.parse_yaml(TEXT, "a.yaml")["id"] == "demo"
    assert yamlfile.parse_yaml(TEXT.replace("demo", "other"), "a.yaml")["id"] == "other"


def test_a_refused_file_is_refused_every_time(_own_cache: Path) -> None:
    bad = "a: &a [1, 2]\nb: *a\nc: [\n"
    for _ in range(2):
        with pytest.raises(InputError) as err:
            yamlfile.parse_yaml(bad, "bad.yaml")
        assert err.value.file == "bad.yaml" and err.value.line >= 3
    assert not _own_cache.exists() or not list(_own_cache.iterdir())


def test_a_damaged_entry_is_a_miss(_own_cache: Path) -> None:
    yamlfile.parse_yaml(TEXT, "demo.yaml")
    (entry,) = _own_cache.iterdir()
    import marshal

    entry.write_bytes(marshal.dumps(42))  # unmarshals fine, but is not an entry
    yaml_cache._MEMORY.clear()
    assert yamlfile.parse_yaml(TEXT, "demo.yaml")["id"] == "demo"
    entry.write_bytes(b"\xff\x00garbage")
    yaml_cache._MEMORY.clear()
    assert yamlfile.parse_yaml(TEXT, "demo.yaml")["steps"][0]["run"] == "echo 1"


def test_an_unwritable_cache_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert yamlfile.parse_yaml(TEXT, "demo.yaml")["id"] == "demo"
    assert blocked.is_file() and not any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())


def test_values_marshal_cannot_keep_are_parsed_every_time(_own_cache: Path) -> None:
    data = yamlfile.parse_yaml("when: 2026-11-23\n", "t.yaml")
    assert str(data["when"]) == "2026-11-23"
    assert not _own_cache.exists() or not list(_own_cache.iterdir())
    assert os.environ["XDG_CACHE_HOME"].endswith("cache")
