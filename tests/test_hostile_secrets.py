"""Attack: `report` — made to be pasted in public — leaks a recipe's HF_TOKEN (issue 22,
attack 3), and so did the journal, the fix messages and output tails.

A token is planted in a recipe's env (HF_TOKEN), as its `--api-key`, and in the
environment spark-tui runs in (HUGGING_FACE_HUB_TOKEN, and a variable only cluster.yaml's
`secrets:` marks); then up (fixes and launches), status, watch, report and the debug log
run on the simulated cluster, through the real CLI in subprocesses. No token is in any
output or in any file under the state, cache and config directories (a revision of the
recipe included: it holds ${NAME}); each shows as ${NAME}.

A recipe that refers to a secret as ${NAME} gets its value only in the command the node
receives: launched, relaunched, patched, rolled back, its preview, plan JSON, journal,
revisions, history and report hold ${NAME}; the node's container has the value."""

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
        # the revision holds ${HF_TOKEN} and ${API_KEY}: the launches take the values from here
        "HF_TOKEN": RECIPE_TOKEN,
        "API_KEY": API_KEY,
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
        assert recipe is not None and recipe.serve.env["HF_TOKEN"] == "${HF_TOKEN}"  # in use
        assert recipe.serve.args["--api-key"] == "${API_KEY}"
        outputs["report"] = session.report([], versions={})
    assert "${HF_TOKEN}" in outputs["report"], outputs["report"]
    for what, text in outputs.items():
        for token in TOKENS:
            assert token not in text, f"{what} prints {token}:\n{text}"
    # every file we wrote, the recipe's revisions included (they hold ${NAME})
    files = [p for home in homes.values() for p in home.rglob("*") if p.is_file()] + [debug]
    assert any(p.name.startswith("rev-") for p in files), files
    assert any(p.name == "journal.jsonl" for p in files), files
    for p in files:
        data = p.read_bytes()
        for token in TOKENS:
            assert token.encode() not in data, f"{p} holds {token}"


def _files_hold(homes: list[Path], tokens: tuple[str, ...]) -> list[str]:
    return [
        f"{p} holds {t}"
        for home in homes
        for p in home.rglob("*")
        if p.is_file()
        for t in tokens
        if t.encode() in p.read_bytes()
    ]


def test_a_reference_gets_its_value_only_on_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe with `HF_TOKEN: ${HF_TOKEN}` in its container env and `--api-key: ${API_KEY}`:
    launch, relaunch, a fix's patch, history, rollback. The container on the node has the
    value; everything spark-tui wrote or printed holds only ${NAME}."""
    from spark_tui.recipes.revisions import last_served

    homes = [tmp_path / k for k in ("state", "cache", "config")]
    for k, home in zip(("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"), homes, strict=True):
        monkeypatch.setenv(k, str(home))
    monkeypatch.setenv("HF_TOKEN", RECIPE_TOKEN)
    monkeypatch.setenv("API_KEY", API_KEY)
    redact.remember_environment()  # as every spark-tui command does when it starts
    shown: list[str] = []
    with Session.open(None, scenario="healthy", keep_state=True, speed=600) as session:
        before = session.recipe()
        assert before is not None
        written = replace(
            before,
            docker_env={**before.docker_env, "HF_TOKEN": "${HF_TOKEN}"},
            serve=replace(before.serve, args={**before.serve.args, "--api-key": "${API_KEY}"}),
        )
        session.revisions.commit(before, written, "the user's recipe refers to its secrets")
        session.use_recipe(session.revisions.current(before.id) or before)
        launch = session.plan_launch()
        for action in launch.actions:
            if action.launch is not None:
                shown += [line for s in action.launch.steps for line in s.paste_lines()]
                shown.append(json.dumps(action.launch.to_json()))
        assert any("HF_TOKEN=${HF_TOKEN}" in line for line in shown), shown
        assert any("${API_KEY}" in line for line in shown), shown
        first = session.apply(launch, yes=True)
        assert first.ok, first
        node = session.config.head.name
        container = session.recipe().head_container
        env = session.transports[node].run(
            f"docker inspect -f '{{{{.Config.Env}}}}' {container}", timeout=30
        )
        assert f"HF_TOKEN={RECIPE_TOKEN}" in env.stdout, env.stdout  # the node has the value
        again = session.apply(session.plan_launch(), yes=True)  # the relaunch
        assert again.ok, again
        session.revisions.patch(
            session.recipe(), "a fix", target="serve", set_args={"--max-model-len": 4096}
        )
        session.use_recipe(session.revisions.current(before.id) or before)
        history = "\n".join(r.diff for r in session.revisions.revisions(before.id))
        assert "--max-model-len" in history and "${API_KEY}" in history, history
        served = last_served(session.revisions, before.id)
        assert served is not None and served.recipe.docker_env["HF_TOKEN"] == "${HF_TOKEN}"
        _current, _served, diff = session.rollback_preview()
        after = session.rollback()
        assert after.docker_env["HF_TOKEN"] == "${HF_TOKEN}"
        shown += [history, diff, session.report([], versions={})]
        assert "${HF_TOKEN}" in shown[-1]
        journal = "\n".join(json.dumps(e) for e in session.journal.entries())
        assert "HF_TOKEN=${HF_TOKEN}" in journal
    for text in shown:
        for token in TOKENS:
            assert token not in text, text
    assert not _files_hold(homes, (RECIPE_TOKEN, API_KEY))


def test_a_revision_of_a_recipe_holding_a_value_writes_its_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's own recipe file holds the token; a fix's revision of it holds ${HF_TOKEN},
    and the launch of that revision still gets the value (from the user's file)."""
    from spark_tui.recipes.clusters import find_cluster
    from spark_tui.recipes.loader import parse_recipe_text
    from spark_tui.recipes.render import render_plan
    from spark_tui.recipes.revisions import RevisionStore

    monkeypatch.delenv("HF_TOKEN", raising=False)
    src = Path(__file__).resolve().parents[1] / "recipes" / "qwen3.6-35b-a3b-fp8-vllm.yaml"
    text = src.read_text().replace("  env:\n", f"  env:\n    HF_TOKEN: {RECIPE_TOKEN}\n", 1)
    mine = parse_recipe_text(text, str(tmp_path / "mine.yaml"))
    assert mine.docker_env["HF_TOKEN"] == RECIPE_TOKEN
    store = RevisionStore(tmp_path / "revisions")
    rev = store.patch(mine, "a fix", target="serve", set_args={"--max-model-len": 4096})
    patched = store.load(mine.id, rev.number)
    assert patched.docker_env["HF_TOKEN"] == "${HF_TOKEN}"
    assert not _files_hold([tmp_path / "revisions"], (RECIPE_TOKEN,))
    plan = render_plan(patched, find_cluster(None, simulated_nodes=patched.nodes))
    assert plan.unresolved() == [] and not any("no value" in w for w in plan.warnings)
    serve = next(s for s in plan.steps if s.id in ("serve", "ray-head"))
    assert "HF_TOKEN=${HF_TOKEN}" in serve.command and RECIPE_TOKEN not in serve.command
    assert f"HF_TOKEN={RECIPE_TOKEN}" in redact.expand(serve.command)


def test_an_unset_reference_stops_the_launch_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN_SET", raising=False)
    with Session.open(None, scenario="healthy", speed=600) as session:
        before = session.recipe()
        assert before is not None
        env = {**before.docker_env, "NO_SUCH_TOKEN_SET": "${NO_SUCH_TOKEN_SET}"}
        session.use_recipe(replace(before, docker_env=env))
        plan = session.plan_launch()
        warnings = [w for a in plan.actions if a.launch for w in a.launch.warnings]
        assert any("${NO_SUCH_TOKEN_SET} has no value" in w for w in warnings), warnings
        result = session.apply(plan, yes=True)
        assert not result.ok
        assert "set NO_SUCH_TOKEN_SET in the environment" in result.message, result
        started = [e for e in session.journal.entries() if e.get("action") == "stop-leftovers"]
        assert not started  # nothing was stopped


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("echo ${NO_SUCH_TOKEN_SET}", "has no value"),
        ("echo ${API_KEY_Q}", "not inside a quoted word"),
        ("echo 'x=${API_KEY_Q}'", "single quote"),
    ],
)
def test_expand_refuses_what_it_cannot_pass(
    monkeypatch: pytest.MonkeyPatch, command: str, why: str
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN_SET", raising=False)
    monkeypatch.setenv("API_KEY_Q", "it's" if "'x=" in command else "plain")
    with pytest.raises(redact.UnresolvedReference, match=why):
        redact.expand(command)


def test_expand_fills_nested_quoting(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_tui import shell

    monkeypatch.setenv("API_KEY_Q", "sk-x y$z")
    inner = shell.join(["export", "K=${API_KEY_Q}"])
    outer = shell.join(["docker", "exec", "c", "sh", "-c", inner])
    assert redact.expand(outer) == outer.replace("${API_KEY_Q}", "sk-x y$z")
    import shlex

    assert shlex.split(shlex.split(redact.expand(outer))[-1])[1] == "K=sk-x y$z"


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


def test_an_imported_recipe_holds_a_reference_not_its_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An eugr recipe with the token in its env (and as --api-key): the file `recipes import`
    writes holds ${HF_TOKEN} and ${API_KEY}; the import's output neither."""
    from spark_tui.entry import main

    src = tmp_path / "with-token.yaml"
    src.write_text(
        'recipe_version: "1"\nname: With a token\ncontainer: vllm-node\n'
        f"env:\n  HF_TOKEN: {RECIPE_TOKEN}\n"
        f"command: vllm serve org/model --port 8000 --api-key {API_KEY}\n"
    )
    out = tmp_path / "imported"
    assert main(["recipes", "import", str(src), "--to", str(out)]) == 0
    printed = capsys.readouterr()
    text = (out / "with-token.yaml").read_text()
    assert "HF_TOKEN: ${HF_TOKEN}" in text and "--api-key: ${API_KEY}" in text, text
    for token in (RECIPE_TOKEN, API_KEY):
        assert token not in text and token not in printed.out + printed.err
