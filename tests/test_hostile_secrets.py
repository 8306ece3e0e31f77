"""Attack: `report` — made to be pasted in public — leaks a recipe's HF_TOKEN (issue 22,
attack 3), and so did the journal, the fix messages and output tails.

A token is planted in a recipe's env (HF_TOKEN), as its `--api-key`, and in the
environment spark-tui runs in (HUGGING_FACE_HUB_TOKEN, and a variable only cluster.yaml's
`secrets:` marks); then up (fixes and launches), status, watch, report and the debug log
run on the simulated cluster, through the real CLI in subprocesses. No token is in any
output or in any file under the state, cache and config directories (but the recipe the
user wrote); each shows as ${NAME}."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from spark_tui import redact
from spark_tui.nodes.config import parse_cluster
from spark_tui.session import Session
from spark_tui.yamlfile import parse_yaml

RECIPE_TOKEN = "hf_RecipeTok3n9f8e7d6c5b4a"
API_KEY = "sk-ApiKey0123456789abcdef"
ENV_TOKEN = "hf_EnvTok3nZyXwVuTsRqP"
TOKENS = (RECIPE_TOKEN, API_KEY, ENV_TOKEN)
SCENARIO = "page-cache-hog"


def _plant_in_recipe() -> None:
    """The scenario's recipe with a token in its serve env and an API key, as the user's
    revision of it (a simulated cluster reads the built-in recipes and their revisions)."""
    with Session.open(None, scenario=SCENARIO, keep_state=True, speed=600) as session:
        before = session.recipe()
        assert before is not None
        serve = replace(
            before.serve,
            env={**before.serve.env, "HF_TOKEN": RECIPE_TOKEN},
            args={**before.serve.args, "--api-key": API_KEY},
        )
        session.revisions.commit(before, replace(before, serve=serve), "the user's token")


def _cli(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tui.entry", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout + proc.stderr


def test_a_planted_token_is_in_no_output_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    homes = {
        k: tmp_path / k.lower() for k in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
    }
    for k, v in homes.items():
        monkeypatch.setenv(k, str(v))
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", ENV_TOKEN)
    _plant_in_recipe()
    debug = tmp_path / "debug.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "SPARK_TUI_DEBUG_LOG": str(debug),
    }
    demo = ["--demo", SCENARIO, "--keep-state"]
    outputs = {
        "up --json": _cli(env, "up", *demo, "--yes", "--json", "--speed", "600"),
        "up": _cli(env, "up", *demo, "--yes", "--speed", "600"),
        "status": _cli(env, "status", *demo),
        "status --json": _cli(env, "status", *demo, "--json"),
        "watch --json": _cli(env, "watch", *demo, "--json", "--duration", "4", "--speed", "120"),
        "stop": _cli(env, "stop", *demo, "--yes"),
    }
    # the runs did what they do (fixes, launches): the tokens had somewhere to leak
    events = [json.loads(x) for x in outputs["up --json"].splitlines() if x.startswith("{")]
    assert {"fix", "launch"} <= {e["event"] for e in events}, outputs["up --json"]
    with Session.open(None, scenario=SCENARIO, keep_state=True, speed=600) as session:
        recipe = session.recipe()
        assert recipe is not None and recipe.serve.env["HF_TOKEN"] == RECIPE_TOKEN  # in use
        outputs["report"] = session.report([], versions={})
    assert "${HF_TOKEN}" in outputs["report"], outputs["report"]
    for what, text in outputs.items():
        for token in TOKENS:
            assert token not in text, f"{what} prints {token}:\n{text}"
    # every file we wrote, but the recipe's revisions (a recipe holds the values it launches
    # with: the user's own text, made a revision of here by the test itself)
    files = [
        p
        for home in homes.values()
        for p in home.rglob("*")
        if p.is_file() and "recipes" not in p.relative_to(home).parts
    ] + [debug]
    assert any(p.name == "journal.jsonl" for p in files), files
    for p in files:
        data = p.read_bytes()
        for token in TOKENS:
            assert token.encode() not in data, f"{p} holds {token}"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_secret_given_with_set_is_not_in_recipes_render(tmp_path: Path, as_json: bool) -> None:
    """`recipes render --set` with a token and an API key whose values hold a space, quotes
    and a substitution: the rendered commands (quoted twice: `sh -c '…'`) and their JSON
    show ${HF_TOKEN} and ${API_KEY}, never a piece of either value."""
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    token, key = "hf_Tok3n Sp4ce'q\"$(reboot)", "sk-K3y 'two words'"
    out = _cli(
        env,
        "recipes",
        "render",
        "glm-4.7-flash-awq-vllm",
        *(["--json"] if as_json else []),
        "--set",
        f"env.HF_TOKEN={token}",
        "--set",
        f"serve.--api-key={key}",
    )
    assert "${HF_TOKEN}" in out and "${API_KEY}" in out, out
    for piece in ("Tok3n", "Sp4ce", "K3y", "two words"):
        assert piece not in out, f"{piece} in:\n{out}"


def test_cluster_yaml_marks_a_secret_of_any_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_PASS_PHRASE_X", "correct-horse-battery")
    text = "secrets: [REGISTRY_PASS_PHRASE_X]\nnodes:\n  - {name: a, host: local, role: head}\n"
    parse_cluster(parse_yaml(text, "cluster.yaml"), "cluster.yaml")
    assert (
        redact.redact("docker login -p correct-horse-battery")
        == "docker login -p ${REGISTRY_PASS_PHRASE_X}"
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("docker run -e HF_TOKEN=hf_abcdefgh img", "docker run -e HF_TOKEN=${HF_TOKEN} img"),
        ('{"HF_TOKEN": "hf_abcdefgh"}', '{"HF_TOKEN": "${HF_TOKEN}"}'),
        ("  HF_TOKEN: hf_abcdefgh", "  HF_TOKEN: ${HF_TOKEN}"),
        (
            "vllm serve m --api-key sk-abcdefgh --port 1",
            "vllm serve m --api-key ${API_KEY} --port 1",
        ),
        ("vllm serve m --api-key=sk-abcdefgh", "vllm serve m --api-key=${API_KEY}"),
        ("AWS_SECRET_ACCESS_KEY=abcdefgh", "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}"),
        ("DB_PASSWORD='abc def'", "DB_PASSWORD='${DB_PASSWORD}'"),
        ("--max-num-batched-tokens 8192", "--max-num-batched-tokens 8192"),
        ("max_num_batched_tokens=8192", "max_num_batched_tokens=8192"),
        ('{"completion_tokens": 12}', '{"completion_tokens": 12}'),
        ("HF_TOKEN=${HF_TOKEN}", "HF_TOKEN=${HF_TOKEN}"),
    ],
)
def test_redaction_forms(text: str, shown: str) -> None:
    assert redact.redact(text) == shown
