"""Every JSON line every command prints validates against the schema shipped in the package
(spark_tui/schema/json-output.schema.json, linked from docs/json.md). The commands run for
real, as a user runs them, on the simulated cluster (or this machine for doctor)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from spark_tui.event_lines import (
    ActiveWall,
    Adopted,
    AppliedFix,
    DoctorRan,
    Done,
    FixApplied,
    Launched,
    LaunchFailed,
    LineEvent,
    NodeReach,
    RecipeChosen,
    Refused,
    RelaunchDecided,
    Serving,
    StatusRead,
    Stuck,
    WallFixed,
    WallResolved,
    line,
    schema,
    schema_path,
)

ROOT = Path(__file__).resolve().parent.parent
RECIPE = "minimax-m2.7-nvfp4-vllm-tp2"
SPARKRUN = "name: lab\nhosts:\n- spark-a\n- 10.0.0.12\nuser: ubuntu\ntopology: direct\n"


def validator(definition: str) -> Draft202012Validator:
    doc = schema()
    Draft202012Validator.check_schema(doc)
    sub = {"$defs": doc["$defs"], "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(sub, format_checker=FormatChecker())


def errors_of(definition: str, obj: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(definition).iter_errors(obj)
    ]


def spark_tui(*args: str, ok: tuple[int, ...] = (0,), cwd: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=280,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode in ok, (args, proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip(), (args, proc.stderr[-2000:])
    return proc.stdout


def event_lines(out: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    for obj in lines:
        assert not errors_of("event", obj), (obj, errors_of("event", obj))
    return lines


def test_the_schema_is_a_valid_schema_shipped_in_the_package() -> None:
    assert schema_path().is_relative_to(ROOT / "spark_tui")
    Draft202012Validator.check_schema(schema())
    assert "spark_tui/schema/json-output.schema.json" in (ROOT / "docs/json.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["drm-override", "host-ip-mismatch", "attach-eugr"])
def test_up_json_lines_validate(scenario: str, tmp_path: Path) -> None:
    lines = event_lines(
        spark_tui("up", "--demo", scenario, "--yes", "--json", ok=(0, 1), cwd=tmp_path)
    )
    kinds = [x["event"] for x in lines]
    assert kinds[-1] == "done" and "launch" in kinds, kinds
    assert "diagnosis" in kinds and "fix" in kinds, kinds
    for x in lines:
        if x["event"] == "resolved":
            assert x["file"], x


@pytest.mark.slow
def test_watch_json_lines_validate(tmp_path: Path) -> None:
    out = spark_tui(
        "watch", "--json", "--demo", "restart-loop", "--auto-relaunch", "--duration", "25",
        cwd=tmp_path,
    )  # fmt: skip
    kinds = {x["event"] for x in event_lines(out)}
    assert "diagnosis" in kinds, kinds


def test_status_json_is_an_event_line(tmp_path: Path) -> None:
    (obj,) = event_lines(spark_tui("status", "--json", "--demo", "healthy", cwd=tmp_path))
    assert obj["event"] == "status" and [n["name"] for n in obj["nodes"]] == ["spark1", "spark2"]


def test_triage_json_validates() -> None:
    logs = sorted((ROOT / "tests/sample-logs/walls").glob("*/*.log"))[:12]
    doc = json.loads(spark_tui("triage", "--json", *map(str, logs), ok=(0, 1)))
    assert doc["diagnoses"], "the sample logs show walls"
    assert not errors_of("triage", doc), errors_of("triage", doc)


def test_doctor_json_validates_on_this_machine() -> None:
    cluster = ROOT / "tests/sample-clusters/local.yaml"
    doc = json.loads(spark_tui("doctor", "--json", "--config", str(cluster), ok=(0, 1)))
    assert doc["checks"], doc
    assert not errors_of("doctor", doc), errors_of("doctor", doc)


def test_stop_json_validates(tmp_path: Path) -> None:
    doc = json.loads(spark_tui("stop", "--json", "--demo", "healthy", "--yes", cwd=tmp_path))
    assert not errors_of("stop", doc), errors_of("stop", doc)


@pytest.mark.parametrize(
    ("definition", "args"),
    [
        ("recipes-list", ("recipes", "list", "--json")),
        ("recipes-render", ("recipes", "render", RECIPE, "--json")),
        ("recipes-fit", ("recipes", "fit", RECIPE, "--json")),
        ("kb-list", ("kb", "list", "--json")),
    ],
)
def test_recipe_and_kb_json_validates(definition: str, args: tuple[str, ...]) -> None:
    doc = json.loads(spark_tui(*args))
    assert doc
    assert not errors_of(definition, doc), errors_of(definition, doc)


def test_recipes_show_json_of_every_recipe_validates(capsys: pytest.CaptureFixture[str]) -> None:
    """Every built-in recipe and a community one of each format, as `recipes show --json`
    prints it (in this process: one interpreter for the 27 recipes)."""
    from spark_tui import paths
    from spark_tui.entry import main

    community = ROOT / "tests/data/community"
    user = paths.user_recipes_dir()
    user.mkdir(parents=True)
    for f in (
        community / "eugr/minimax-m2.7-nvfp4.yaml",
        community / "sparkrun/qwen3.6-27b-fp8-vllm.yaml",
    ):
        (user / f"community-{f.parent.name}.yaml").write_bytes(f.read_bytes())
    ids = [p.stem for p in sorted((ROOT / "recipes").glob("*.yaml"))]
    assert len(ids) > 20, ids
    seen = set()
    for rid in [*ids, "community-eugr", "community-sparkrun"]:
        assert main(["recipes", "show", rid, "--json"]) == 0, rid
        doc = json.loads(capsys.readouterr().out)
        assert doc["id"] == rid
        assert not errors_of("recipes-show", doc), (rid, errors_of("recipes-show", doc))
        seen.update(doc)
    # the optional parts were there to be checked, not only the required ones
    assert {"blocked_by", "profiles", "ray", "docker", "sources", "model"} <= seen, seen


def test_recipes_check_flags_json_validates(tmp_path: Path) -> None:
    doc = json.loads(spark_tui("recipes", "check-flags", RECIPE, "--json", cwd=tmp_path))
    assert doc["recipe"] == RECIPE and doc["known_options"] > 0, doc
    assert not errors_of("recipes-check-flags", doc), errors_of("recipes-check-flags", doc)


def test_a_failed_flag_check_json_validates(tmp_path: Path) -> None:
    """Flags the image's engine does not know, one of them renamed: exit 1, both said."""
    out = spark_tui(
        "recipes", "check-flags", RECIPE, "--set", "serve.--no-such-flag=1",
        "--set", "serve.--context-length=4096", "--json", ok=(1,), cwd=tmp_path,
    )  # fmt: skip
    doc = json.loads(out)
    assert not doc["ok"] and "--no-such-flag" in doc["unknown"], doc
    assert doc["renamed"] == {"--context-length": "--max-model-len"}, doc
    assert not errors_of("recipes-check-flags", doc), errors_of("recipes-check-flags", doc)


def test_every_json_flag_of_the_cli_has_a_schema_definition() -> None:
    """Each `--json` the command line accepts is covered by a definition of the schema (a new
    one without a definition fails here)."""
    import argparse

    from spark_tui.entry import build_parser

    def with_json(parser: argparse.ArgumentParser, name: str) -> list[str]:
        found = [name] if any("--json" in a.option_strings for a in parser._actions) else []
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, p in a.choices.items():
                    found += with_json(p, f"{name} {sub}".strip())
        return found

    lines = {"up", "watch", "status"}  # lines of the event language: #/$defs/event
    defs = schema()["$defs"]
    commands = with_json(build_parser(), "")
    assert "recipes show" in commands and "up" in commands, commands
    missing = [c for c in commands if c not in lines and c.replace(" ", "-") not in defs]
    assert not missing, missing


def test_discover_json_validates(tmp_path: Path) -> None:
    f = tmp_path / "lab.yaml"
    f.write_text(SPARKRUN)
    doc = json.loads(spark_tui("discover", "--from", str(f), "--no-probe", "--json"))
    assert [n["host"] for n in doc["nodes"]] == ["spark-a", "10.0.0.12"]
    assert not errors_of("discover", doc), errors_of("discover", doc)


EVERY_EVENT: list[LineEvent] = [
    WallResolved(wall="cuda-oom", node="spark1", file="spark1:serve", how="fixed: x", time=1.0),
    WallFixed(
        wall="cuda-oom",
        node="spark1",
        file="spark1:serve",
        how="fixed: x; the next launch proves it",
    ),
    NodeReach(node="spark2", reachable=False, reason="timed out"),
    NodeReach(node="spark2", reachable=True, reason=None),
    RelaunchDecided(relaunch=True, why="one relaunch", wall="cuda-oom", fix="cap-context"),
    RelaunchDecided(relaunch=False, why="no diagnosis with a fix"),
    RecipeChosen(recipe=RECIPE, revision=0),
    Adopted(recipe="adopted-1", text="id: adopted-1\n"),
    DoctorRan(reachable=("spark1",), passed=3, warnings=0, failed=()),
    FixApplied(
        wall="cuda-oom",
        fix="cap-context",
        risk="safe",
        nodes=(),
        ok=True,
        summary="checked",
        recipe=RECIPE,
        revision=1,
    ),
    Launched(launch=1, recipe=RECIPE),
    Serving(launch=1, tok_s=33.1),
    LaunchFailed(launch=1, why="timed out"),
    Refused(fix="adopt", why="not confirmed: nothing saved"),
    Stuck(why="no diagnosis with a fix"),
    Done(
        serving=False,
        launches=1,
        recipe=None,
        tok_s=None,
        fixes=(AppliedFix(wall="cuda-oom", fix="cap-context"),),
        active=(ActiveWall(wall="cuda-oom", severity="error", node=None),),
    ),
    StatusRead(cluster="cluster.yaml", nodes=()),
]


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: e.name())
def test_every_event_kind_serializes_to_a_valid_line(event: LineEvent) -> None:
    obj = line(event)
    keys = list(obj)
    assert (keys[0], keys[-1]) == ("event", "time")
    assert not errors_of("event", obj), errors_of("event", obj)
    assert obj["event"] in schema()["$defs"]["event"]["properties"]["event"]["enum"]


def test_tok_s_is_said_to_one_decimal() -> None:
    assert line(Serving(launch=1, tok_s=34.97929116652657))["tok_s"] == 35.0
    done = Done(
        serving=True, launches=1, recipe=RECIPE, tok_s=16.53391585625678, fixes=(), active=()
    )
    assert line(done)["tok_s"] == 16.5
    assert line(Serving(launch=1, tok_s=None))["tok_s"] is None


def test_a_line_missing_its_time_or_a_field_does_not_validate() -> None:
    obj = line(Launched(launch=1, recipe=RECIPE))
    assert not errors_of("event", obj)
    assert errors_of("event", {k: v for k, v in obj.items() if k != "time"})
    assert errors_of("event", {k: v for k, v in obj.items() if k != "launch"})
    assert errors_of("event", {**obj, "event": "no-such-event"})
