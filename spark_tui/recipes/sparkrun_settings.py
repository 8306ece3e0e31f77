"""sparkrun 0.4's launch settings of a recipe, read as sparkrun 0.4.2 reads them:

- `min_sparkrun_version`: the oldest sparkrun that runs the recipe. spark-tui reads recipes as
  the sparkrun its rules come from (sparkrun_keys.version()); a recipe asking for a newer one
  is refused, as that sparkrun refuses to run it — it may use what this reading lacks.
- `readiness`: how long sparkrun waits for the port and the health check (1800 s and 900 s
  unless set), and its inference probe (prompt, time limit): spark-tui's wait for the engine
  and its smoke request.
- `runtime_cache`: sparkrun's per-model kernel cache, mounted at /cache/runtime (host side
  `~/.cache/sparkrun/runtime-cache/FAMILY/MODEL-HASH`, or under `dir`). spark-tui mounts it —
  the same host directory, so the two launchers share it — when the recipe's env names
  `{launch.runtime_cache_dir}`.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any

from spark_tui.errors import InputError, InputErrors
from spark_tui.recipes import sparkrun_keys
from spark_tui.recipes.model import SmokeSpec, Unmapped
from spark_tui.yamlfile import line_of

RUNTIME_CACHE = "/cache/runtime"  # sparkrun's RUNTIME_CACHE_CONTAINER_PATH
CACHE_ROOT = "~/.cache/sparkrun/runtime-cache"  # sparkrun's cache dir + RUNTIME_CACHE_SUBDIR
PORT_TIMEOUT_S = 1800.0  # sparkrun's DEFAULT_PORT_READY_TIMEOUT_S
HEALTH_TIMEOUT_S = 900.0  # sparkrun's DEFAULT_HEALTH_READY_TIMEOUT_S
NO_LIMIT_S = 86400.0  # sparkrun's "0: no limit", as long as spark-tui waits
UNSET_STARTUP_S = 3600.0  # spark-tui's wait when the recipe gives no readiness
READINESS_KEYS = {
    "port_timeout_s",
    "health_timeout_s",
    "inference",
    "inference_style",
    "inference_timeout_s",
    "inference_prompt",
}
INFERENCE_STYLES = {
    "auto",
    "openai-chat-stream-v1",
    "openai-responses-stream-v1",
    "anthropic-messages-stream-v1",
}
_VERSION = re.compile(
    r"v?(\d+(?:\.\d+)*)((?:a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?", re.I
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _version(text: str) -> tuple[tuple[int, ...], bool] | None:
    """(release numbers, is a final release) of a PEP 440 version; None when it is not one."""
    m = _VERSION.fullmatch(text.strip())
    if m is None:
        return None
    release = tuple(int(x) for x in m.group(1).split("."))
    release += (0,) * (4 - len(release))
    return release, not (m.group(2) or m.group(4))


def check_min_version(data: dict, file: str) -> None:
    """Refuse a recipe that asks for a sparkrun newer than the one spark-tui reads as."""
    if "min_sparkrun_version" not in data or data["min_sparkrun_version"] is None:
        return
    raw = data["min_sparkrun_version"]
    line = line_of(data, "min_sparkrun_version") or 1
    wanted = _version(raw) if isinstance(raw, str) else None
    if wanted is None:
        raise InputErrors(
            [
                InputError(
                    f'min_sparkrun_version {raw!r} must be a version such as "0.4.0" (not a range)',
                    file,
                    line,
                )
            ]
        )
    ours = sparkrun_keys.version()
    have = _version(ours)
    assert have is not None  # the version sparkrun_keys.json was written from
    if wanted > have:
        raise InputErrors(
            [
                InputError(
                    f"min_sparkrun_version {raw}: the recipe needs sparkrun {raw} or newer; "
                    f"spark-tui reads recipes as sparkrun {ours} does, and that sparkrun "
                    "refuses it too (it may use what that reading lacks)",
                    file,
                    line,
                )
            ]
        )


def runtime_name(runtime: str, defaults: dict, command: str | None) -> str:
    """The runtime sparkrun resolves a recipe to (its `resolve_runtime`): a bare `vllm`, or
    none, is vllm-ray with a Ray hint, else vllm-distributed; an `sglang` command is sglang."""
    cmd = (command or "").strip()
    if not runtime and re.match(r"(?:sglang\s+serve|python3?\s+-m\s+sglang\.launch_server)\b", cmd):
        return "sglang"
    if runtime in ("vllm", ""):
        if str(defaults.get("distributed_executor_backend", "")).lower() == "ray":
            return "vllm-ray"
        if re.search(r"--distributed-executor-backend\s+ray\b", cmd):
            return "vllm-ray"
        return "vllm-distributed"
    return runtime


def family_of(runtime: str) -> str:
    return "sglang" if runtime == "sglang" else "vllm"


def _coerce_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "yes", "on", "1"):
            return True
        if lowered in ("false", "no", "off", "0"):
            return False
    if isinstance(value, int):
        return bool(value)
    return None


def _label(text: str) -> str:
    """sparkrun's sanitize_key_component: a readable, shell-safe path component."""
    cleaned = _UNSAFE.sub("-", text.strip().replace("/", "__"))
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-._")
    return cleaned[:48].strip("-._") or "unknown"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:8]


@dataclass(frozen=True)
class RuntimeCache:
    enabled: bool = True
    dir: str = ""
    key_by_image: bool = False
    key_by_model: bool = True

    def volume(self, family: str, model: str, revision: str, image: str | None) -> str:
        """`HOST:/cache/runtime`, the host directory sparkrun mounts for this model (its
        build_runtime_cache_mounts: root/family[/image key][/model key])."""
        parts = [(self.dir.rstrip("/") if self.dir else CACHE_ROOT), _label(family)]
        if self.key_by_image:
            tag = (image or "").rsplit("/", 1)[-1]
            parts.append(f"{_label(tag)}-{_hash(image or '')}")
        if self.key_by_model:
            label = model.rstrip("/").rsplit("/", 1)[-1] if model.startswith("/") else model
            parts.append(f"{_label(label)}-{_hash(f'{model}@{revision}')}")
        return "/".join(parts) + f":{RUNTIME_CACHE}"


def runtime_cache(raw: Any, file: str, line: int) -> RuntimeCache:
    """The recipe's `runtime_cache:` (true/false, or {enabled, dir, key_by_image,
    key_by_model, prune}); a value sparkrun ignores is ignored."""
    if isinstance(raw, bool):
        return RuntimeCache(enabled=raw)
    if not isinstance(raw, dict):
        return RuntimeCache()
    settings: dict[str, Any] = {}
    for key in ("enabled", "key_by_image", "key_by_model"):
        value = _coerce_bool(raw.get(key)) if key in raw else None
        if value is not None:
            settings[key] = value
    if raw.get("dir"):
        settings["dir"] = str(raw["dir"])
    return RuntimeCache(**settings)


def readiness(data: dict, file: str, notes: list[Unmapped]) -> tuple[SmokeSpec, float]:
    """(the smoke request, the seconds to wait for the engine) from the recipe's `readiness:`,
    checked as sparkrun checks it at load; what has no spark-tui equivalent goes to `notes`."""
    raw = data.get("readiness")
    if raw is None:
        return SmokeSpec(), UNSET_STARTUP_S
    line = line_of(data, "readiness") or 1

    def refuse(message: str, key: str | None = None) -> InputErrors:
        at = (line_of(raw, key) if key else None) or line
        return InputErrors([InputError(f"readiness: {message}", file, at)])

    if not isinstance(raw, dict):
        raise refuse("must be a mapping")
    for key in raw:
        if key not in READINESS_KEYS:
            raise refuse(
                f"unknown setting {key!r} (sparkrun knows {', '.join(sorted(READINESS_KEYS))})",
                key,
            )

    def seconds(key: str, default: float) -> float:
        if key not in raw:
            return default
        value = raw[key]
        try:
            s = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError, OverflowError):
            s = math.nan
        if math.isnan(s) or (key == "inference_timeout_s" and (not math.isfinite(s) or s <= 0)):
            raise refuse(f"{key} must be a timeout in seconds", key)
        return s if s > 0 else math.inf

    port = seconds("port_timeout_s", PORT_TIMEOUT_S)
    health = seconds("health_timeout_s", HEALTH_TIMEOUT_S)
    probe_s = seconds("inference_timeout_s", 1200.0)
    if "inference" in raw and not isinstance(raw["inference"], bool):
        raise refuse("inference must be true or false", "inference")
    style = raw.get("inference_style", "auto")
    if style not in INFERENCE_STYLES:
        raise refuse(f"inference_style must be one of {', '.join(sorted(INFERENCE_STYLES))}")
    prompt = raw.get("inference_prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise refuse("inference_prompt must be text", "inference_prompt")

    startup = port + health
    if math.isinf(startup):
        startup = NO_LIMIT_S
        notes.append(
            Unmapped(
                line,
                "readiness",
                "a timeout of 0 is no limit in sparkrun: spark-tui waits for the engine at most "
                f"{NO_LIMIT_S:.0f} s",
                "note",
            )
        )
    else:
        notes.append(
            Unmapped(
                line,
                "readiness",
                f"spark-tui waits for the engine port_timeout_s + health_timeout_s = "
                f"{startup:.0f} s (sparkrun's two waits, one after the other)",
                "note",
            )
        )
    if raw.get("inference") is False:
        notes.append(
            Unmapped(
                line_of(raw, "inference") or line,
                "readiness.inference",
                "false: spark-tui still sends its smoke request (its tok/s, and the record a "
                "rollback returns to)",
            )
        )
    if style not in ("auto", "openai-chat-stream-v1"):
        notes.append(
            Unmapped(
                line_of(raw, "inference_style") or line,
                "readiness.inference_style",
                f"{style}: spark-tui's smoke request is a chat completion",
            )
        )
    smoke = SmokeSpec(
        prompt=prompt if isinstance(prompt, str) else SmokeSpec.prompt,
        timeout_s=probe_s if "inference_timeout_s" in raw else SmokeSpec.timeout_s,
    )
    return smoke, startup
