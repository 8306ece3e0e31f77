"""sparkrun 0.4's recipe format in full: `include:`, `overrides:` evaluated for the launch the
recipe describes on DGX Sparks, `{launch.*}` and `{model_revision}` placeholders, revision
pinning (`model_revision`), `readiness`, `runtime_cache`, `capabilities`,
`min_sparkrun_version`.

The recipes are tests/data/sparkrun-registries/derived/sparkrun-0.4/: real registry recipes
(the official qwen3.6-27b-fp8-vllm.yaml, littlecedar's DeepSeek V4.1 SGLang recipe) and files
written over them with those keys (SOURCES.md there). sparkrun 0.4.2 itself is the oracle:
its `run --dry-run` (tests/test_recipes_sparkrun_oracle.py compares every launch, node by
node) and its `export recipe --realize` (the plain recipe it would launch: include merged,
overrides resolved), both captured in dryrun-sparkrun-0.4.2.json by tools/sparkrun_dryrun.py.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from spark_tui import paths
from spark_tui.entry import main
from spark_tui.recipes.loader import load_file
from tests.sparkrun_oracle import DRYRUN, REGISTRIES, our_nodes

V04 = REGISTRIES / "derived" / "sparkrun-0.4"
LAUNCHES = json.loads(DRYRUN.read_text())["recipes"]
REALIZED = sorted(k for k, e in LAUNCHES.items() if e.get("realized"))


def put(*files: Path) -> Path:
    """Copy recipe files into the user's recipe directory (a recipe and the bases it
    includes, beside it, as sparkrun needs them)."""
    user = paths.user_recipes_dir()
    user.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, user / f.name)
    return user


def render(rid: str, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["recipes", "render", rid, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def lint(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["recipes", "lint", str(path)])
    out, err = capsys.readouterr()
    return code, (out + err).splitlines()


def volumes(plan: dict) -> list[set[str]]:
    """The -v of each node's serve container, with $HOME as ~."""
    out = []
    for step in (s for s in plan["steps"] if s["id"] == "serve"):
        words = shlex.split(step["command"].replace('"$HOME"', "~"))
        out.append({words[i + 1] for i, w in enumerate(words) if w == "-v"})
    return out


@pytest.mark.parametrize("key", REALIZED)
def test_spark_tui_reads_include_and_overrides_as_sparkrun_realizes_them(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """spark-tui's launch of the recipe as written (its include: chain merged, its overrides:
    evaluated for its own node count on DGX Spark) is, node by node, its launch of the plain
    recipe sparkrun's `export --realize` makes of it for the same hosts."""
    path = REGISTRIES / key
    bases = [
        V04 / n for n in ("qwen3.6-27b-fp8-vllm.yaml", "deepseek-v4.1-flash-mxfp4-tp4-sglang.yaml")
    ]
    put(path, *bases)
    ours = render(path.stem, capsys)
    realized = tmp_path / f"realized-{path.stem}.yaml"
    realized.write_text(LAUNCHES[key]["realized"])
    put(realized)
    theirs = render(realized.stem, capsys)
    mine, sparkrun = our_nodes(ours), our_nodes(theirs)
    assert len(mine) == len(sparkrun) == LAUNCHES[key]["hosts"]
    for a, b in zip(mine, sparkrun, strict=True):
        assert (a.image, a.model, a.executor) == (b.image, b.model, b.executor)
        assert a.flags == b.flags
        assert a.env == b.env
    assert volumes(ours) == volumes(theirs)
    assert load_file(path).model.revision == load_file(realized).model.revision


def test_overrides_are_evaluated_for_two_sparks(capsys: pytest.CaptureFixture[str]) -> None:
    """Each entry applied or not as sparkrun 0.4.2 decides for 2 nodes of GB10 (sm_121, 121
    GB, platform dgx-spark), the later wins; an entry sparkrun cannot evaluate (an unknown
    selector) never applies, with a warning; lint says which applied and why."""
    path = V04 / "qwen3.6-27b-fp8-tp2-overrides-vllm.yaml"
    put(path, V04 / "qwen3.6-27b-fp8-vllm.yaml")
    r = load_file(paths.user_recipes_dir() / path.name)
    args = r.serve.args
    assert r.nodes == 2
    assert args["--max-model-len"] == 262144  # `nodes: 1` did not apply
    assert args["--max-num-batched-tokens"] == 16384  # `nodes: {gte: 2}` did
    assert args["--gpu-memory-utilization"] == 0.8  # `arch: [sm_100, sm_120]` did not
    assert args["--max-num-seqs"] == 4  # 32 (platform, memory) then 4 (config ne): later wins
    env = r.docker_env
    assert env["NCCL_DEBUG"] == "WARN" and env["SPARK_ARCH"] == "sm_121"
    assert env["KV_NOTE"] == "fp8-cache"
    assert env["PREFILL_BATCH"] == "16384"  # {config.X} reads the settings after the overrides
    assert "VLLM_MARLIN_USE_ATOMIC_ADD" not in env  # `null` deleted what the base set
    code, lines = lint(path, capsys)
    assert code == 0
    decided = [ln for ln in lines if ": overrides[" in ln]
    assert len(decided) == 8
    assert "note: overrides[0]: not applied: nodes is 2 (for 2 nodes of DGX Spark" in decided[0]
    assert "note: overrides[1]: applied" in decided[1]
    assert "warning: overrides[7]: not applied: unknown selector 'gpu_count'" in decided[7]
    theirs = LAUNCHES["derived/sparkrun-0.4/" + path.name]["nodes"][0]["env"]
    assert {k: env[k] for k in ("NCCL_DEBUG", "SPARK_ARCH", "KV_NOTE")} == {
        k: theirs[k] for k in ("NCCL_DEBUG", "SPARK_ARCH", "KV_NOTE")
    }


def test_launch_placeholders_revision_pin_and_runtime_cache(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """{launch.runtime_cache_dir} is sparkrun's /cache/runtime, mounted from the same host
    directory sparkrun mounts for that model and pin (so the two launchers share the cache);
    {launch.node_rank}/{launch.num_nodes} per node; {model_revision} the pin, passed to the
    engine as --revision."""
    path = V04 / "qwen3.6-27b-fp8-tp2-overrides-vllm.yaml"
    put(path, V04 / "qwen3.6-27b-fp8-vllm.yaml")
    plan = render(path.stem, capsys)
    nodes = our_nodes(plan)
    pin = "3f2c0d5e8a1b4c6d7e9f0a1b2c3d4e5f6a7b8c9d"
    assert [n.env["RANK_OF"] for n in nodes] == ["rank 0 of 2", "rank 1 of 2"]
    assert {n.env["TRITON_CACHE_DIR"] for n in nodes} == {"/cache/runtime/triton"}
    assert {n.flags["--revision"] for n in nodes} == {(pin,)}
    theirs = LAUNCHES["derived/sparkrun-0.4/" + path.name]["nodes"]
    sparkrun_cache = {
        o for n in theirs for o in n["docker_options"] if o.endswith(":/cache/runtime")
    }
    assert len(sparkrun_cache) == 1
    assert all(sparkrun_cache <= v for v in volumes(plan))
    assert load_file(paths.user_recipes_dir() / path.name).model.revision == pin


def test_a_pinned_sglang_recipe_without_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    """littlecedar's DeepSeek V4.1 recipe with its command deleted (`command: null`) and the
    checkpoint pinned: defaults.revision "{model_revision}" is the pin (sparkrun's SGLang
    runtime fills it), readiness gives the wait and the smoke request, capabilities are
    listed as having no equivalent."""
    path = V04 / "deepseek-v4.1-flash-tp4-sglang-pinned.yaml"
    user = put(path, V04 / "deepseek-v4.1-flash-mxfp4-tp4-sglang.yaml")
    r = load_file(user / path.name)
    pin = "fb2764a5cf321eaa5070ca8f9e892818f477c16d"
    assert r.engine == "sglang" and r.nodes == 4 and r.model.revision == pin
    assert r.serve.args["--revision"] == pin and r.serve.args["--model-type"] == "llm"
    assert r.serve.args["--max-running-requests"] == 4  # its override for 4 nodes at tp 4
    assert "--reasoning-parser" not in r.serve.args  # the deleted command's flags are gone
    assert r.docker_env["DSV41_MODEL_TYPE"] == "llm"
    assert r.serve.startup_timeout_s == 3600 + 1800  # port (its own) + health (the base's)
    assert r.smoke.timeout_s == 600 and r.smoke.prompt == "Reply with exactly: ready"
    fields = {u.field for u in r.unmapped if u.kind == "not mapped"}
    assert {"capabilities", "unsupported_capabilities"} <= fields
    base = load_file(user / "deepseek-v4.1-flash-mxfp4-tp4-sglang.yaml")
    assert base.serve.startup_timeout_s == 7200 + 1800  # the registry's own readiness


def test_an_include_names_its_base_not_a_missing_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old reading refused a recipe built with include: as 'line 1: a recipe without a
    command needs a model'; now a base that is not there is named, at the include's line."""
    f = tmp_path / "mine.yaml"
    f.write_text('recipe_version: "2"\n# my tuning\ninclude: qwen3.6-27b-fp8-vllm\n'
                 "defaults: {max_num_seqs: 8}\n")  # fmt: skip
    code, lines = lint(f, capsys)
    assert code == 2
    assert not any("needs a model" in ln for ln in lines)
    assert f"{f}:3: include: 'qwen3.6-27b-fp8-vllm' is not beside mine.yaml" in "\n".join(lines)
    shutil.copy(V04 / "qwen3.6-27b-fp8-vllm.yaml", tmp_path)
    code, lines = lint(f, capsys)
    assert code == 0, lines
    assert load_file(f).serve.args["--max-model-len"] == 262144  # the base's, merged


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('include: "@official/qwen3.6-27b-fp8-vllm"\n', 2, "spark-tui reads no registry"),
        ("include: ../qwen3.6-27b-fp8-vllm\n", 2, "no path separators"),
        ("include: [a, b]\n", 2, "is not a recipe name"),
        ('min_sparkrun_version: ">=0.4"\ninclude: qwen3.6-27b-fp8-vllm\n', 2, "not a range"),
    ],
)
def test_what_an_include_cannot_name_is_one_line(
    text: str, line: int, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(V04 / "qwen3.6-27b-fp8-vllm.yaml", tmp_path)
    f = tmp_path / "bad.yaml"
    f.write_text('recipe_version: "2"\n' + text)
    code, lines = lint(f, capsys)
    assert code == 2
    errors = [ln for ln in lines if ln.startswith(f"{f}:")]
    assert len(errors) == 1 and errors[0].startswith(f"{f}:{line}: ") and says in errors[0]


@pytest.mark.parametrize(
    ("name", "where", "says"),
    [
        ("include-cycle-a.yaml", "include-cycle-b.yaml:3", "include: cycle: 'include-cycle-a'"),
        ("qwen3.6-27b-fp8-needs-newer-sparkrun.yaml", None, "needs sparkrun 0.5.0 or newer"),
        ("qwen3.6-27b-fp8-no-runtime-cache.yaml", None, "which runtime_cache turns off"),
    ],
)
def test_what_sparkrun_refuses_spark_tui_refuses_with_file_and_line(
    name: str, where: str | None, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = LAUNCHES["derived/sparkrun-0.4/" + name]
    assert entry["exit"] != 0  # sparkrun 0.4.2 refused it
    code, lines = lint(V04 / name, capsys)
    assert code == 2
    error = next(ln for ln in lines if says in ln)
    if where is None:  # the line of the key that refuses it, in the file itself
        key = "min_sparkrun_version" if "newer" in name else "TRITON_CACHE_DIR"
        text = (V04 / name).read_text().splitlines()
        n = next(i for i, t in enumerate(text, 1) if t.strip().startswith(key + ":"))
        where = f"{name}:{n}"
    assert error.startswith(f"{V04 / where.split(':')[0]}:{where.split(':')[1]}: "), error


def test_an_older_min_sparkrun_version_loads(tmp_path: Path) -> None:
    shutil.copy(V04 / "qwen3.6-27b-fp8-vllm.yaml", tmp_path)
    f = tmp_path / "ok.yaml"
    f.write_text(
        'recipe_version: "2"\nmin_sparkrun_version: "0.4.2"\ninclude: qwen3.6-27b-fp8-vllm\n'
    )
    assert load_file(f).model.id == "Qwen/Qwen3.6-27B-FP8"


def test_an_imported_04_recipe_loads_back_and_renders_the_same(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`recipes import` writes spark-tui's own format: the pin (model.revision), the cache
    mount, the evaluated overrides, the wait — the same launch, with no include left."""
    path = V04 / "qwen3.6-27b-fp8-tp2-overrides-vllm.yaml"
    user = put(path, V04 / "qwen3.6-27b-fp8-vllm.yaml")
    before = render(path.stem, capsys)
    assert main(["recipes", "import", str(path), "--force"]) == 0  # over the copy put there
    written = (user / path.name).read_text()
    assert "revision: 3f2c0d5e8a1b4c6d7e9f0a1b2c3d4e5f6a7b8c9d" in written
    assert "include:" not in written.split("\nid:", 1)[1]
    after = render(path.stem, capsys)
    assert our_nodes(after) == our_nodes(before) and volumes(after) == volumes(before)
