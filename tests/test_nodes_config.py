"""cluster.yaml: lookup order, --config override, and validation that names file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui import paths
from spark_tui.errors import InputError
from spark_tui.nodes.config import find_cluster_config, load_cluster

SAMPLES = Path(__file__).parent / "sample-clusters"


def test_two_sparks_load() -> None:
    c = load_cluster(SAMPLES / "two-sparks.yaml")
    assert c.recipe == "minimax-m2.7-mxfp4-vllm-tp2"
    assert [n.name for n in c.nodes] == ["spark1", "spark2"]
    assert c.head.name == "spark1" and c.head.port == 22 and c.head.fabric_ip == "10.10.10.1"
    assert c.workers[0].host == "spark2.lan" and c.workers[0].user is None
    assert c.source.endswith("two-sparks.yaml")


def test_local_single_node_is_the_head() -> None:
    c = load_cluster(SAMPLES / "local.yaml")
    assert c.head.is_local and len(c.nodes) == 1


def test_every_error_names_file_and_line() -> None:
    with pytest.raises(InputError) as exc:
        load_cluster(SAMPLES / "bad-many.yaml")
    msg = str(exc.value)
    file = str(SAMPLES / "bad-many.yaml")
    assert f"{file}:5: unknown field 'colour'" in msg
    assert f"{file}:6: duplicate node name 'spark1' (also on line 2)" in msg
    assert f"{file}:8: node 2: 'port' is 70000" in msg
    assert f"{file}:11: node 3: 'host' is '$(touch /tmp/x)'" in msg
    assert f"{file}:12: node 3: 'fabric_ip' is 'not-an-ip'" in msg
    assert f"{file}:13: node 3: 'role' is 'boss'" in msg
    assert f"{file}:9: two heads" in msg
    assert exc.value.exit_code == 2


def test_missing_head(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no-head.yaml:1: no head"):
        load_cluster(SAMPLES / "no-head.yaml")


def test_yaml_syntax_error_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("nodes:\n  - name: [unclosed\n")
    with pytest.raises(InputError, match=r"cluster.yaml:\d+: invalid YAML"):
        load_cluster(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_cluster(tmp_path / "nope.yaml")


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_cluster_config() is None
    with pytest.raises(InputError, match=r"no cluster\.yaml"):
        load_cluster(None)
    user = paths.config_dir() / "cluster.yaml"
    user.parent.mkdir(parents=True)
    user.write_text((SAMPLES / "local.yaml").read_text())
    assert find_cluster_config() == user
    here = tmp_path / "cluster.yaml"
    here.write_text((SAMPLES / "two-sparks.yaml").read_text())
    assert find_cluster_config() == here
    assert load_cluster(None).head.name == "spark1"
