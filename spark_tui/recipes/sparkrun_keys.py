"""sparkrun's own rules for a recipe, read from sparkrun_keys.json (written by
tools/sparkrun_keymaps.py from an installed sparkrun; the version is in the file).

- The recipe-key -> flag maps a command-less recipe's `defaults` go through, which keys are
  on/off switches, and which switches render `--no-FLAG` when false.
- The environment sparkrun sets in every container: the DGX Spark platform's (allocator, CuTe
  DSL arch), the runtime's (Hugging Face offline: sparkrun copies the model first) and, on more
  than one node, the runtime's cluster env.
- `{config.NAME}` / `{launch.NAME}` in a recipe's env: sparkrun fills them from the recipe's
  settings and the launch (`{{config.x}}` is the literal text `{config.x}`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("sparkrun_keys.json")

# sparkrun emits these itself, outside the flag map (the per-launch topology decides them)
_CALLER_EMITTED = {
    "vllm": {"tensor_parallel", "distributed_executor_backend"},
    "sglang": {"tensor_parallel", "data_parallel"},
}
# {launch.NAME} -> what spark-tui renders per node (None: no equivalent)
LAUNCH_PLACEHOLDERS: dict[str, str | None] = {
    "model_path": "{model.path}",
    "num_nodes": "{cluster.size}",
    "node_rank": "{node.rank}",
    "node_host": "{node.host}",
    "model_revision": None,
    "cluster_id": None,
    "runtime_cache_dir": None,
}
_OPEN = re.compile(r"(?<![$\{])(\{+)(config|launch)\.")


@lru_cache(maxsize=1)
def keys() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def version() -> str:
    return str(keys()["sparkrun"])


def flag_map(engine: str) -> dict[str, str]:
    """Recipe key -> flag for the keys sparkrun's flag builder renders (not the ones its
    runtime emits itself, such as the tensor-parallel size)."""
    table: dict[str, str] = keys()[engine]["flags"]
    return {k: v for k, v in table.items() if k not in _CALLER_EMITTED[engine]}


def all_keys(engine: str) -> set[str]:
    return set(keys()[engine]["flags"])


def bool_keys(engine: str) -> set[str]:
    return set(keys()[engine]["bool"])


def negatable_keys(engine: str) -> set[str]:
    return set(keys()[engine]["negatable"])


def is_true(value: Any) -> bool:
    """sparkrun's reading of a switch value (scitrera's ext_parse_bool)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "y", "on", "t")
    return bool(value)


def flag_value(value: Any) -> Any:
    """A value as sparkrun writes it after its flag: mappings and lists as one compact JSON
    word, a JSON string stripped; a number or word as it is."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        return value.strip()
    return value


def defaults_flags(engine: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The flags sparkrun builds from `defaults` for a recipe without a command template,
    in sparkrun's order: the tensor-parallel size first, then its flag map's order."""
    out: dict[str, Any] = {}
    tp = defaults.get("tensor_parallel")
    if tp:
        out["--tensor-parallel-size" if engine == "vllm" else "--tp-size"] = tp
    bools, negatable = bool_keys(engine), negatable_keys(engine)
    for key, flag in flag_map(engine).items():
        value = defaults.get(key)
        if value is None:
            continue
        if key in bools:
            if is_true(value):
                out[flag] = True
            elif key in negatable and flag.startswith("--"):
                out["--no-" + flag[2:]] = True
        else:
            out[flag] = flag_value(value)
    return out


def always_env(engine: str, nodes: int) -> dict[str, str]:
    """What sparkrun sets in every container of a launch, before the recipe's env."""
    data = keys()
    env = {**data["platform_env"].get(engine, {}), **data[engine]["env"]["common"]}
    if nodes > 1:
        env.update(data[engine]["env"]["cluster"])
    return {str(k): str(v) for k, v in env.items()}


def render_env_template(
    value: str, config: Mapping[str, Any], launch: Mapping[str, str | None] | None = None
) -> tuple[str, list[str]]:
    """`{config.NAME}` -> the recipe's setting, `{launch.NAME}` -> spark-tui's per-node
    placeholder (`launch` gives this recipe's own: its pinned revision, its runtime cache),
    `{{…}}` -> literal braces, as sparkrun renders a recipe's env. Returns the text and the
    fields that have no value here (left as written)."""
    fields = {**LAUNCH_PLACEHOLDERS, **(launch or {})}
    missing: list[str] = []
    out: list[str] = []
    cursor = 0
    for m in _OPEN.finditer(value):
        if m.start() < cursor:
            continue
        width = len(m.group(1))
        end = value.find("}", m.end())
        if end < 0:
            break
        stop = end
        while stop < len(value) and value[stop] == "}":
            stop += 1
        closing = min(width, stop - end)
        name = value[m.start() + width : end]
        out.append(value[cursor : m.start()])
        cursor = end + closing
        if width > 1:  # escaped: literal, one brace pair removed
            out.append(
                value[m.start() + 1 : cursor - 1]
                if closing == width
                else value[m.start() + 1 : cursor]
            )
            continue
        namespace, _, field = name.partition(".")
        if namespace == "config" and config.get(field) is not None:
            v = config[field]
            out.append(("true" if v else "false") if isinstance(v, bool) else str(v))
        elif namespace == "launch" and fields.get(field):
            out.append(str(fields[field]))
        else:
            missing.append(name)
            out.append(value[m.start() : cursor])
    out.append(value[cursor:])
    return "".join(out), missing


def pulled_image(image: str, builder: str, build_args: list[str]) -> str:
    """The image sparkrun's eugr builder runs for a recipe's `container`: eugr's nightly
    ":latest" names become sparkrun's own nightly pull (the b12x one for the b12x variant)
    unless `build_args` ask for a local build."""
    data = keys()
    if builder not in ("", "eugr"):
        return image
    if any(a not in data["pull_compatible_build_args"] for a in build_args):
        return image
    b12x = any(a in ("--exp-b12x", "--experimental-b12x") for a in build_args)
    substitute = data["image_substitutes"].get(image.strip())
    if substitute and b12x:
        return str(
            data["image_substitutes"]["ghcr.io/spark-arena/dgx-vllm-eugr-nightly-b12x:latest"]
        )
    return str(substitute or image)
