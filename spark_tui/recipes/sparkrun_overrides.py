"""sparkrun 0.4's `overrides:` — conditional layers of a recipe, evaluated for the launch it
describes, as sparkrun 0.4.2 evaluates them (its `sparkrun.core.recipe_overrides`). Not to be
confused with `--set` (spark_tui.recipes.overrides).

    overrides:
      - when: {nodes: 1}
        defaults: {max_model_len: 65536}
      - when: {arch: sm_120}
        env: {…}
      - when: {config: {kv_cache_dtype: fp8}}
        container: repo/image:tag

- A `when` holds selectors that must all hold: the launch's shape (`nodes`, `gpus_per_node`,
  `tp`/`pp`/`dp`/`ep`/`cp` from the recipe's parallelism), its runtime (`runtime`: vllm-
  distributed, vllm-ray, eugr-vllm, sglang; `runtime_family`: vllm, sglang), the hardware
  (`platform`, `vendor`, `accelerator`, `arch`, `capability`, `memory_gb`) and `config` (the
  recipe's settings before any override). A value is equal-to, a list any-of, a mapping of
  operators (eq, ne, in, not_in, gt, gte, lt, lte).
- A selector or operator sparkrun does not know makes the entry not match (noted).
- Matching entries apply in order (the later wins): `defaults`, `env`, `container`.
- The hardware is a DGX Spark's, as sparkrun knows it: one NVIDIA GB10 per node (platform
  dgx-spark, arch sm_121, 121 GB, capabilities cuda and unified-memory); the node count is
  the recipe's tensor × pipeline × data parallel size (one GPU per node), 1 for a solo recipe.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from spark_tui.errors import InputError, InputErrors
from spark_tui.yamlfile import line_of

LAYERS = ("defaults", "env", "container")
RESERVED = frozenset({"mods", "builder_config", "executor_config", "command"})
PARALLELISM = (
    ("tensor_parallel", "tp"),
    ("pipeline_parallel", "pp"),
    ("data_parallel", "dp"),
    ("expert_parallel", "ep"),
    ("context_parallel", "cp"),
)
SHAPE = frozenset(short for _, short in PARALLELISM) | {"nodes", "gpus_per_node"}
RUNTIME = frozenset({"runtime", "runtime_family"})
HARDWARE = frozenset({"platform", "vendor", "accelerator", "arch", "capability", "memory_gb"})
SELECTORS = SHAPE | RUNTIME | HARDWARE | {"config"}
OPERATORS = frozenset({"eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte"})
_ORDERED_OPS = frozenset({"gt", "gte", "lt", "lte"})
_UNORDERED = RUNTIME | (HARDWARE - {"memory_gb"})
# what an override may not set: what names the workload, and what a `when` reads
FORBIDDEN = frozenset({"port", "served_model_name"}) | {long for long, _ in PARALLELISM}
# a DGX Spark's GB10 as sparkrun 0.4.2's dgx-spark platform describes it
DGX_SPARK = {
    "platform": "dgx-spark",
    "vendor": "nvidia",
    "accelerator": "gb10",
    "arch": "sm_121",
    "capability": frozenset({"cuda", "unified-memory"}),
    "memory_gb": 121.0,
}
_ARCH = re.compile(r"sm_?(\d{2,3})[af]?")  # sparkrun's _ARCH_RE


@dataclass(frozen=True)
class Override:
    index: int
    line: int
    when: dict[str, Any]
    defaults: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    container: str | None = None


@dataclass(frozen=True)
class Decision:
    override: Override
    matched: bool
    reason: str


def parse(raw: Any, file: str, line: int) -> list[Override]:
    """The `overrides:` list, checked as sparkrun checks it at load (InputErrors: file:line)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputErrors(
            [
                InputError(
                    "overrides must be a list of {when: …, defaults/env/container: …}", file, line
                )
            ]
        )
    out: list[Override] = []
    errors: list[InputError] = []
    for index, entry in enumerate(raw):
        where = f"overrides[{index}]"
        at = line_of(raw, index) or line

        def err(message: str, at: int = at, where: str = where) -> None:
            errors.append(InputError(f"{where}: {message}", file, at))

        if not isinstance(entry, dict):
            err("must be a mapping")
            continue
        when = entry.get("when")
        if not isinstance(when, dict) or not when:
            err("needs a non-empty `when:` mapping (use `defaults:` for unconditional values)")
            continue
        if "config" in when and (not isinstance(when["config"], dict) or not when["config"]):
            err("`when.config` must be a non-empty mapping of config key → predicate")
            continue
        layers = set(entry) - {"when"}
        reserved = sorted(layers & RESERVED)
        if reserved:
            err(
                f"{', '.join(reserved)} cannot be overridden (sparkrun overrides defaults, env, container)"
            )
            continue
        unknown = sorted(layers - set(LAYERS))
        if unknown:
            err(
                f"unknown key(s) {', '.join(unknown)} (an entry has when, defaults, env, container)"
            )
            continue
        if not layers:
            err("sets nothing (add defaults, env or container)")
            continue
        defaults = entry.get("defaults") or {}
        if not isinstance(defaults, dict):
            err("defaults must be a mapping")
            continue
        forbidden = sorted(set(defaults) & FORBIDDEN)
        if forbidden:
            err(
                f"{', '.join(forbidden)} cannot be overridden: they name the workload or are "
                "read by `when:`"
            )
            continue
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            err("env must be a mapping")
            continue
        container = entry.get("container")
        if container is not None and (not isinstance(container, str) or not container.strip()):
            err("container must be an image reference")
            continue
        out.append(
            Override(
                index,
                at,
                dict(when),
                dict(defaults),
                {str(k): v for k, v in env.items()},
                container.strip() if isinstance(container, str) else None,
            )
        )
    if errors:
        raise InputErrors(errors)
    return out


def launch_facts(
    defaults: dict[str, Any], runtime: str, solo: bool
) -> tuple[dict[str, int], str, str]:
    """(shape, runtime, runtime_family) of the launch a recipe describes on DGX Sparks."""

    def as_int(value: Any) -> int:
        try:
            return int(str(value)) if value is not None else 1
        except ValueError:
            return 1

    shape = {short: as_int(defaults.get(long)) for long, short in PARALLELISM}
    world = shape["tp"] * shape["pp"] * shape["dp"]
    shape["gpus_per_node"] = 1  # one GB10 per Spark
    shape["nodes"] = 1 if solo else max(1, math.ceil(world / shape["gpus_per_node"]))
    family = "sglang" if runtime == "sglang" else "vllm"
    return shape, runtime, family


def _norm(selector: str, value: Any) -> Any:
    if value is None:
        return None
    if selector == "arch":
        text = str(value).strip().lower()
        m = _ARCH.fullmatch(text)
        if m:
            return f"sm_{m.group(1)}"
        cc = re.fullmatch(r"(\d+)\.(\d)", text)  # a compute capability ("12.1")
        return f"sm_{cc.group(1)}{cc.group(2)}" if cc else text
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        return text.lower()


def _test(selector: str, op: str, operand: Any, actual: Any, absent_is_value: bool) -> bool:
    if actual is None:
        return absent_is_value and op in ("ne", "not_in")
    if isinstance(actual, (set, frozenset)):
        have = {_norm(selector, v) for v in actual}
        want = {_norm(selector, v) for v in (operand if isinstance(operand, list) else [operand])}
        if op in ("eq", "in"):
            return bool(have & want)
        if op in ("ne", "not_in"):
            return not have & want
        return False
    a = _norm(selector, actual)
    if op in ("eq", "ne", "in", "not_in"):
        candidates = operand if op in ("in", "not_in") and isinstance(operand, list) else [operand]
        hit = any(
            isinstance(a, bool) == isinstance(c, bool) and a == c
            for c in (_norm(selector, c) for c in candidates)
        )
        return hit if op in ("eq", "in") else not hit
    b = _norm(selector, operand)
    if not isinstance(a, float) or not isinstance(b, float):
        return False
    return {"gt": a > b, "gte": a >= b, "lt": a < b, "lte": a <= b}[op]


def _predicates(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [(str(op), operand) for op, operand in value.items()]
    if isinstance(value, list):
        return [("in", value)]
    return [("eq", value)]


def unevaluable(override: Override) -> list[str]:
    """Why sparkrun 0.4.2 cannot evaluate this `when` (it then never matches)."""
    reasons: list[str] = []

    def check(selector: str, value: Any) -> None:
        preds = _predicates(value)
        bad = sorted(op for op, _ in preds if op not in OPERATORS)
        if bad:
            reasons.append(f"{selector}: unknown operator {', '.join(map(repr, bad))}")
        elif selector in _UNORDERED and any(op in _ORDERED_OPS for op, _ in preds):
            reasons.append(f"{selector}: an ordering operator needs a numeric selector")

    for selector, value in override.when.items():
        if selector not in SELECTORS:
            reasons.append(f"unknown selector {selector!r}")
        elif selector == "config":
            for key, predicate in value.items():
                check(f"config.{key}", predicate)
        else:
            check(selector, value)
    return reasons


def evaluate(
    overrides: list[Override],
    config: dict[str, Any],
    shape: dict[str, int],
    runtime: str,
    family: str,
) -> list[Decision]:
    """Each entry decided for this launch: `config` is the recipe's settings before any
    override (so overrides cannot feed each other)."""
    facts: dict[str, Any] = {**shape, "runtime": runtime, "runtime_family": family, **DGX_SPARK}
    out: list[Decision] = []
    for o in overrides:
        why = unevaluable(o)
        if why:
            out.append(Decision(o, False, "; ".join(why) + " (sparkrun 0.4.2 cannot evaluate it)"))
            continue
        failed: list[str] = []
        for selector, value in o.when.items():
            if selector == "config":
                for key, predicate in value.items():
                    actual = config.get(str(key))
                    if not all(
                        _test(f"config.{key}", op, x, actual, True)
                        for op, x in _predicates(predicate)
                    ):
                        failed.append(f"config.{key} is {actual!r}")
                continue
            actual = facts.get(selector)
            if not all(_test(selector, op, x, actual, False) for op, x in _predicates(value)):
                shown = sorted(actual) if isinstance(actual, frozenset) else actual
                failed.append(f"{selector} is {shown}")
        out.append(
            Decision(o, not failed, "all conditions hold" if not failed else f"{', '.join(failed)}")
        )
    return out
