"""Newlines, quotes and shell syntax in every field of cluster.yaml: each is refused at
the field's own line, or — for the odd values that are legitimate — reaches the shell
quoted, as one word."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from spark_tui.errors import InputError, InputErrors
from spark_tui.nodes.config import load_cluster
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.render import render_plan

HOSTILE = [
    "enp1s0f0np0\n",  # what passed `$`: a trailing newline inside NCCL_SOCKET_IFNAME
    "a\nb",
    "x\r",
    "it's",
    'say "hi"',
    "$(reboot)",
    "`reboot`",
    "a; reboot",
    "a && reboot",
    "a | sh",
    "-oProxyCommand=touch /tmp/pwned",
    "a b",
    "a\\b",
    "*",
    "~root",
    "",
]
FIELDS = ["name", "host", "user", "port", "fabric_if", "fabric_ip", "role"]


def cluster_text(field: str, value: object) -> str:
    head = {
        "name": "spark1",
        "host": "10.0.0.1",
        "user": "milo",
        "port": 22,
        "fabric_if": "enp1s0f0np0",
        "fabric_ip": "10.10.10.1",
        "role": "head",
    }
    head[field] = value
    # JSON is YAML: every value written exactly as given, control characters escaped
    body = "\n".join(f"    {k}: {json.dumps(v)}" for k, v in head.items())
    return (
        "nodes:\n  - "
        + body.lstrip()
        + "\n  - name: spark2\n    host: 10.0.0.2\n    role: worker\n"
        + "    fabric_if: enp1s0f0np0\n    fabric_ip: 10.10.10.2\n"
        + "recipe: minimax-m2.7-mxfp4-vllm-tp2\n"
    )


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_value_in_each_node_field_is_refused_at_its_line(
    field: str, value: str, tmp_path: Path
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(cluster_text(field, value))
    with pytest.raises(InputError) as info:
        load_cluster(path)
    errors = info.value.errors if isinstance(info.value, InputErrors) else [info.value]
    line = 2 + FIELDS.index(field)  # `  - name:` is line 2, one field a line
    mine = [e for e in errors if e.line == line and e.file == str(path)]
    assert mine, [str(e) for e in errors]
    if "\r" in value:  # refused by the YAML loader itself, before any field is looked at
        assert mine[0].reason == "invalid YAML: control character '\\r' in a value"
    else:
        assert f"'{field}'" in mine[0].reason, mine[0].reason


@pytest.mark.parametrize("value", [*HOSTILE, "no such recipe"])
def test_hostile_recipe_id_is_refused_at_its_line(value: str, tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    text = cluster_text("name", "spark1").replace(
        "recipe: minimax-m2.7-mxfp4-vllm-tp2", f"recipe: {json.dumps(value)}"
    )
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert info.value.line == 14, str(info.value)
    assert ("'recipe'" if "\r" not in value else "control character") in info.value.reason


def test_an_ipv6_scope_must_be_an_interface_name(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    for bad in ("fe80::1%$(reboot)", "fe80::1%a;b", "fe80::1%eth0\n"):
        path.write_text(cluster_text("fabric_ip", bad))
        with pytest.raises(InputError) as info:
            load_cluster(path)
        assert info.value.line == 7 and "not an IP address" in info.value.reason
    path.write_text(cluster_text("fabric_ip", "fe80::1%enp1s0f0np0"))
    assert load_cluster(path).head.fabric_ip == "fe80::1%enp1s0f0np0"


def test_legitimate_odd_values_reach_the_shell_as_one_quoted_word(tmp_path: Path) -> None:
    """A machine account's `$`, an IPv6 scope: accepted, and every command of the launch
    plan that carries them splits (as sh would) back to the exact value."""
    path = tmp_path / "cluster.yaml"
    text = cluster_text("fabric_ip", "fe80::1%enp1s0f0np0").replace('"milo"', '"svc$"')
    path.write_text(text)
    cluster = load_cluster(path)
    assert cluster.head.user == "svc$"
    recipe = load_recipes(use_user=False, use_revisions=False).get(cluster.recipe)
    plan = render_plan(recipe, cluster, stamp="T")
    words = [w for step in plan.steps for w in shlex.split(step.command)]
    carrying = [w for w in words if "fe80::1%enp1s0f0np0" in w]
    assert carrying, plan.to_text()
    # nothing of it was split off into a word of its own
    assert not any(w.startswith("%enp1s0f0np0") or w.endswith("fe80::1") for w in words)
