"""Recipes in the formats Spark owners already use, read as spark-tui recipes.

Two launchers write them (recipes/SCHEMA.md, "Community formats"):
- eugr/spark-vllm-docker (`run-recipe.sh`, https://github.com/eugr/spark-vllm-docker,
  recipes/README.md): `recipe_version: "1"`, `name`, `container`, `command` (a shell
  command with `{placeholders}` filled by Python's str.format from `defaults`, so `{{`/`}}`
  are literal braces), `env` (exported before the command in the head container),
  `mods`, `build_args`, `cluster_only`, `solo_only`. Multi-node runs are Ray
  (launch-cluster.sh); `--solo` strips `--distributed-executor-backend`.
- sparkrun (https://github.com/spark-arena/sparkrun, RECIPES.md): `recipe_version: "2"`,
  `model`, `runtime`, `container`, `min_nodes`/`max_nodes`, `defaults`, `env` (container
  environment), `command` (optional: without it the runtime's flag map builds one from
  `defaults`), `metadata`, `executor_config`, hooks. vLLM without a Ray hint runs
  natively (`--nnodes/--node-rank/--master-addr`, master port 25000); SGLang with
  `--dist-init-addr HEAD:25000`.

The command is parsed into flags (`-tp 2` and `--tensor-parallel-size 2` are the same
flag), the defaults filled, the env kept, the executor and node count derived. What has
no spark-tui equivalent (mods, build_args, hooks…) is listed in `Recipe.unmapped`, never
fatal; what makes the file unusable (no command and no model, an engine spark-tui does not
launch, a placeholder without a value) is an InputError naming file and line.
"""

from __future__ import annotations

import re
from typing import Any

from spark_tui.recipes.model import (
    Recipe,
)
from spark_tui.yamlfile import line_of

EUGR = "eugr"
SPARKRUN = "sparkrun"
EUGR_URL = "https://github.com/eugr/spark-vllm-docker"
SPARKRUN_URL = "https://github.com/spark-arena/sparkrun"

# keys only spark-tui's own format has; a file with one of them is not a community recipe
_OWN_KEYS = {"id", "serve", "engine", "executor", "nodes", "title", "status"}
_COMMUNITY_KEYS = {
    "recipe_version",
    "sparkrun_version",
    "container",
    "command",
    "runtime",
    "include",  # sparkrun 0.4: a recipe built on another may hold little else
}
_SPARKRUN_KEYS = {
    "sparkrun_version",
    "runtime",
    "runtime_version",
    "min_nodes",
    "max_nodes",
    "mode",
    "metadata",
    "executor_config",
    "pre_exec",
    "post_exec",
    "post_commands",
    "stop_after_post",
    "builder",
    "builder_config",
    "distribution_config",
    "runtime_config",
    "benchmark",
    "model_revision",
    # sparkrun 0.4
    "include",
    "overrides",
    "min_sparkrun_version",
    "readiness",
    "runtime_cache",
    "capabilities",
    "unsupported_capabilities",
    "containers",
    "layout",
    "scheduler",
    "cluster_config",
}

# short spellings -> the long flag spark-tui's facts use (vLLM's argparse aliases; SGLang's
# --tp/--pp, which its argparse accepts as prefixes of --tp-size/--pp-size)
# per-node flags of the engines' own multi-node launch: spark-tui writes them per node
NODE_FLAGS = {
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
    "--dist-init-addr",
}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SPARKRUN_INIT_PORT = 25000  # sparkrun's --master-port / --dist-init-addr port
READY_LINES = {
    "vllm": "Application startup complete",
    "sglang": "The server is fired up and ready to roll",
}


def is_community(data: Any) -> bool:
    """Whether a YAML document is an eugr or sparkrun recipe (not spark-tui's own format)."""
    return (
        isinstance(data, dict)
        and not (_OWN_KEYS & set(data))
        and bool(_COMMUNITY_KEYS & set(data) or ("model" in data and "defaults" in data))
    )


# keys eugr's run-recipe.py reads and spark-tui's own format does not have (sparkrun reads
# some of them too: a sparkrun key decides first)
_EUGR_KEYS = {"mods", "build_args", "cluster_only", "solo_only"}


def flavour(data: dict) -> str:
    """eugr or sparkrun, told by the keys, never by `recipe_version` (eugr's own files have
    carried "2", and eugr runs any version with a warning): a key only sparkrun reads makes it
    sparkrun's; a key only eugr reads, or eugr's required name + container + command without a
    sparkrun key, makes it eugr's; a recipe without a command is sparkrun's (eugr needs one)."""
    keys = set(data)
    if keys & (_SPARKRUN_KEYS - {"model_revision"}):  # eugr files pin revisions too
        return SPARKRUN
    if keys & _EUGR_KEYS or {"name", "container", "command"} <= keys:
        return EUGR
    if "command" not in keys:
        return SPARKRUN
    return SPARKRUN if str(data.get("recipe_version", "")) == "2" else EUGR


def fill_placeholders(
    command: str, values: dict[str, Any], format_escapes: bool
) -> tuple[str, list[str]]:
    """`{key}` -> values[key]; with format_escapes (eugr's str.format) `{{`/`}}` are braces.
    Returns the text and the placeholders that had no value (left as written)."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in values and values[key] is not None:
            value = values[key]
            if isinstance(value, bool):
                return "true" if value else "false"
            return str(value)
        missing.append(key)
        return m.group(0)

    if not format_escapes:
        out = command
        for _ in range(5):  # sparkrun substitutes until nothing changes (nested references)
            missing.clear()
            new = _PLACEHOLDER.sub(sub, out)
            if new == out:
                break
            out = new
        return out, sorted(set(missing))
    # str.format: split on the escapes first so a doubled brace is never a placeholder
    parts = re.split(r"(\{\{|\}\})", command)
    out_parts = []
    for part in parts:
        if part == "{{":
            out_parts.append("{")
        elif part == "}}":
            out_parts.append("}")
        else:
            out_parts.append(_PLACEHOLDER.sub(sub, part))
    return "".join(out_parts), sorted(set(missing))


def _line(data: dict, key: str) -> int | None:
    return line_of(data, key)


def parse_community(data: Any, file: str) -> Recipe:
    """An eugr or sparkrun recipe as a spark-tui Recipe (status untested); its id is the
    file name. Raises InputErrors for what makes it unusable, every error with its line."""
    if flavour(data) == EUGR:
        from spark_tui.recipes.eugr import parse_eugr

        return parse_eugr(data, file)
    from spark_tui.recipes.sparkrun import parse_sparkrun

    return parse_sparkrun(data, file)
