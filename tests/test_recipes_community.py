"""Recipes in eugr/spark-vllm-docker's and sparkrun's formats load as spark-tui recipes, render
with every flag and env var of their command, report what has no equivalent, and import into
spark-tui's own format. The files under tests/data/community/ are real ones (SOURCES.md)."""

from __future__ import annotations

import random
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.errors import InputErrors
from spark_tui.recipes.loader import load_file, load_recipes
from spark_tui.recipes.render import render_plan
from tests.recipe_words import COMMUNITY, cluster, community_items, lost_items

FILES = sorted(p for p in COMMUNITY.rglob("*.yaml"))
IPS = ("10.10.10.1", "10.10.10.2", "10.10.10.3", "10.10.10.4")


def user_dir() -> Path:
    d = paths.user_recipes_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_community_file_in_the_user_dir_loads_and_renders_every_flag(path: Path) -> None:
    shutil.copy(path, user_dir() / path.name)
    book = load_recipes()
    assert not book.errors
    recipe = book.get(path.stem)  # the id is the file name
    assert recipe.status == "untested" and recipe.origin in ("eugr", "sparkrun")
    plan = render_plan(recipe, cluster(IPS[: recipe.nodes], "enp1s0f1np1"), stamp="T")
    env, flags, model = community_items(path)
    lost = lost_items(plan, env, flags, model=model)
    assert not lost, f"{path.name}: {lost}"
    assert recipe.model.id == yaml.safe_load(path.read_text())["model"]


def test_the_issue_file_no_longer_hides_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    """eugr's minimax-m2.7-nvfp4.yaml in the user dir, beside a file that is not YAML."""
    shutil.copy(COMMUNITY / "eugr/minimax-m2.7-nvfp4.yaml", user_dir())
    (user_dir() / "half-written.yaml").write_text("id: half-written\nserve: {args: [\n")
    builtin = len(load_recipes(use_user=False))
    assert main(["recipes", "list"]) == 0
    out, err = capsys.readouterr()
    assert "minimax-m2.7-nvfp4 " in out and "half-written.yaml:3: invalid YAML" in err
    book = load_recipes()
    assert len(book) == builtin + 1 and len(book.errors) == 1
    assert main(["recipes", "lint"]) == 2
    assert main(["recipes", "lint", str(COMMUNITY / "eugr")]) == 0


def test_eugr_recipe_maps_executor_nodes_env_and_placeholders() -> None:
    r = load_file(COMMUNITY / "eugr/minimax-m2.7-nvfp4.yaml")
    # eugr's default multi-node launch is no-Ray (vllm serve --nnodes … on every node)
    assert (r.engine, r.executor, r.nodes) == ("vllm", "mp", 2)
    assert r.serve.node_args["--master-port"] == 29501 and r.serve.worker_args == {
        "--headless": True
    }
    assert "--distributed-executor-backend" not in r.serve.args
    ray = r.with_profile("ray")
    assert ray.executor == "ray" and ray.serve.args["--distributed-executor-backend"] == "ray"
    assert not ray.serve.node_args and ray.ray.port == 29501
    args = r.serve.args
    assert args["--tensor-parallel-size"] == 2 and "-tp" not in args
    assert args["--max-model-len"] == 196608 and args["--gpu-memory-utilization"] == 0.85
    # str.format escapes: {{…}} in the file is one JSON object for vLLM
    assert args["--compilation-config"].startswith('{"cudagraph_mode":"none"')
    assert r.serve.env["VLLM_NVFP4_GEMM_BACKEND"] == "flashinfer-cutlass"  # exported for serve
    assert r.docker_env["NCCL_SOCKET_IFNAME"] == "{node.fabric_if}"
    assert r.head_container == r.worker_container == "vllm_node"
    assert "built locally" in r.image_note and r.facts()["recipe.tp"] == 2
    solo = load_file(COMMUNITY / "eugr/openai-gpt-oss-120b.yaml")
    assert (solo.nodes, solo.executor) == (1, "mp")
    assert [u.field for u in solo.unmapped] == ["build_args"]


def test_sparkrun_recipes_follow_sparkrun_runtimes() -> None:
    vllm = load_file(COMMUNITY / "sparkrun/minimax-m2.7-nvfp4-vllm.yaml")
    # vllm-distributed: each node runs vllm serve, workers headless, master port 25000
    assert (vllm.executor, vllm.nodes) == ("mp", 2)
    assert vllm.serve.node_args["--master-port"] == 25000
    assert vllm.serve.worker_args == {"--headless": True}
    assert vllm.docker_env["VLLM_MARLIN_USE_ATOMIC_ADD"] == "1"  # container env, every node
    sg = load_file(COMMUNITY / "sparkrun/minimax-m3-v0-nvfp4-4x.yaml")
    assert (sg.engine, sg.executor, sg.nodes) == ("sglang", "mp", 4)
    assert sg.serve.node_args["--dist-init-addr"] == "{head.fabric_ip}:25000"
    assert sg.serve.args["--tp-size"] == 4
    assert sg.serve.args["--cuda-graph-bs"] == [1, 2, 4, 8, 12, 16]  # several words, kept
    plan = render_plan(sg, cluster(IPS, "enp1s0f1np1"), stamp="T")
    assert "--cuda-graph-bs 1 2 4 8 12 16 " in plan.to_text()


def test_both_tp_spellings_are_one_flag(tmp_path: Path) -> None:
    out = []
    for spelling in ("-tp {tp}", "--tensor-parallel-size {tp}", "--tensor_parallel_size={tp}"):
        f = tmp_path / "spell.yaml"
        f.write_text(
            textwrap.dedent(
                f"""\
                recipe_version: "1"
                name: spell
                container: img:1
                defaults: {{tp: 2}}
                command: vllm serve org/m {spelling} --port 8000
                """
            )
        )
        r = load_file(f)
        out.append((dict(r.serve.args), r.nodes, r.tp))
    assert out[0] == out[1] == out[2]
    assert out[0][1:] == (2, 2)


def test_what_does_not_map_is_reported_never_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    r = load_file(COMMUNITY / "eugr/glm-5.3-flash.yaml")
    fields = {u.field for u in r.unmapped}
    assert {"mods", "pull_image"} <= fields
    mods = next(u for u in r.unmapped if u.field == "mods")
    assert mods.line == 15 and "mods/install-ray" in mods.reason
    assert main(["recipes", "lint", str(COMMUNITY / "eugr/glm-5.3-flash.yaml")]) == 0
    assert "glm-5.3-flash.yaml:15: not mapped: mods:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ("runtime: llama-cpp\nmodel: a/b\ncontainer: i:1\n", 1, "launches vLLM and SGLang only"),
        (
            'recipe_version: "1"\nname: x\ncontainer: i:1\ncommand: vllm serve a/b --port {port}\n',
            4,
            "no value for {port}",
        ),
        (
            'recipe_version: "1"\nname: x\ncontainer: i:1\ncommand: llama-server -m x\n',
            4,
            "is not `vllm serve`",
        ),
        (
            'recipe_version: "1"\nname: x\ncontainer: "--rm"\ncommand: vllm serve a/b\n',
            3,
            "not an image name",
        ),
        (
            'recipe_version: "1"\nname: x\ncontainer: i:1\nenv: {"X\\n": "1"}\ncommand: vllm serve a/b\n',
            4,
            "not an environment variable name",
        ),
    ],
)
def test_an_unusable_community_file_names_file_and_line(
    tmp_path: Path, body: str, line: int, reason: str
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(InputErrors) as exc:
        load_file(f)
    text = str(exc.value)
    assert f"{f}:{line}:" in text and reason in text


def test_import_writes_an_editable_spark_tui_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "mine"
    assert main(["recipes", "import", str(COMMUNITY / "eugr"), "--to", str(out_dir)]) == 0
    written = sorted(p.name for p in out_dir.iterdir())
    assert written == sorted(p.name for p in (COMMUNITY / "eugr").glob("*.yaml"))
    text = (out_dir / "glm-5.3-flash.yaml").read_text()
    comments = [ln for ln in text.splitlines() if ln.startswith("#   line ")]
    # a line per field: each of the four mods (not in an eugr checkout here), pull_image
    assert len(comments) == 5 and sum("mods:" in c for c in comments) == 4
    data = yaml.safe_load(text)
    assert "recipe_version" not in data and data["id"] == "glm-5.3-flash"
    assert data["serve"]["args"]["--tensor-parallel-size"] == 4
    # it loads as spark-tui's own format, and renders the same flags
    mine = load_file(out_dir / "glm-5.3-flash.yaml")
    theirs = load_file(COMMUNITY / "eugr/glm-5.3-flash.yaml")
    assert mine.origin == "spark-tui" and mine.serve.args == theirs.serve.args
    # an existing file is not replaced without --force
    assert (
        main(
            ["recipes", "import", str(COMMUNITY / "eugr/glm-5.3-flash.yaml"), "--to", str(out_dir)]
        )
        == 2
    )
    assert "exists (pass --force" in capsys.readouterr().err
    assert (
        main(
            [
                "recipes",
                "import",
                str(COMMUNITY / "eugr/glm-5.3-flash.yaml"),
                "--to",
                str(out_dir),
                "--force",
            ]
        )
        == 0
    )
    assert len(list(out_dir.glob("glm-5.3-flash.yaml.*.bak"))) == 1


def test_import_in_place_keeps_the_original_aside() -> None:
    src = user_dir() / "minimax-m2.7-nvfp4.yaml"
    shutil.copy(COMMUNITY / "eugr/minimax-m2.7-nvfp4.yaml", src)
    before = load_recipes().get("minimax-m2.7-nvfp4")
    assert main(["recipes", "import", str(src)]) == 0
    assert (user_dir() / "minimax-m2.7-nvfp4.yaml.eugr").is_file()
    after = load_recipes().get("minimax-m2.7-nvfp4")
    assert after.origin == "spark-tui" and after.serve.args == before.serve.args
    assert after.serve.env == before.serve.env and after.executor == before.executor


# ------------------------------------------------------------------ fuzz: unseen recipes

_FLAGS = [
    "--max-num-seqs",
    "--kv-cache-dtype",
    "--load-format",
    "--tool-call-parser",
    "--block-size",
    "--max-num-batched-tokens",
    "--served-model-name",
    "--attention-backend",
    "--dtype",
]
_BARE = [
    "--trust-remote-code",
    "--enable-prefix-caching",
    "--enforce-eager",
    "--enable-auto-tool-choice",
]
_WORDS = ["fp8", "auto", "64", "8192", "0.75", "flashinfer", "qwen3_coder", "my-model", "bfloat16"]


def _random_eugr(rng: random.Random) -> str:
    defaults = {"port": rng.choice([8000, 8888, 30000]), "tp": rng.choice([1, 2, 3])}
    lines = [f"vllm serve org/model-{rng.randrange(100)}"]
    lines.append(
        rng.choice(["-tp {tp}", "--tensor-parallel-size {tp}", "--tensor_parallel_size={tp}"])
    )
    lines.append("--port {port}")
    for flag in rng.sample(_FLAGS, rng.randrange(1, len(_FLAGS))):
        key = flag[2:].replace("-", "_")
        if rng.random() < 0.5:
            defaults[key] = rng.choice(_WORDS)
            lines.append(f"{flag} {{{key}}}")
        else:
            lines.append(
                f"{flag}={rng.choice(_WORDS)}"
                if rng.random() < 0.3
                else f"{flag} {rng.choice(_WORDS)}"
            )
    lines += rng.sample(_BARE, rng.randrange(len(_BARE)))
    if rng.random() < 0.5:
        lines.append("""--compilation-config '{{"cudagraph_mode":"none"}}'""")
    if rng.random() < 0.5:  # a placeholder inside escaped JSON (str.format fills it)
        defaults["nst"] = rng.randrange(1, 8)
        lines.append(
            """--speculative-config '{{"method":"ngram","num_speculative_tokens":{nst}}}'"""
        )
    rest = lines[1:]
    rng.shuffle(rest)  # flags in any order, the model first
    lines = [lines[0], *rest]
    env = {f"VLLM_X_{i}": rng.choice(["0", "1", "marlin", "a b"]) for i in range(rng.randrange(4))}
    extra = {"model_revision": "abc123"} if rng.random() < 0.3 else {}  # eugr may pin one
    return yaml.safe_dump(
        {
            "recipe_version": "1",
            **extra,
            "name": "fuzz",
            "container": "vllm-node",
            "defaults": defaults,
            "env": env,
            "command": " \\\n    ".join(lines) + "\n",
        },
        sort_keys=False,
    )


@pytest.mark.parametrize("seed", range(40))
def test_an_unseen_eugr_recipe_renders_every_flag_and_env_var(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    f = tmp_path / f"fuzz-{seed}.yaml"
    f.write_text(_random_eugr(rng))
    recipe = load_file(f)
    plan = render_plan(recipe, cluster(IPS[: recipe.nodes], "enp1s0f1np1"), stamp="T")
    env, flags, model = community_items(f)
    assert not lost_items(plan, env, flags, model=model), f.read_text()
    assert recipe.nodes == yaml.safe_load(f.read_text())["defaults"]["tp"]
