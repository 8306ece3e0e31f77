"""sparkrun's recipe format (https://github.com/spark-arena/sparkrun, RECIPES.md) read as a
spark-tui Recipe: `recipe_version: "2"`, `model`, `runtime`, `container`, `min_nodes`/
`max_nodes`, `defaults`, `env` (container environment), `command` (optional: without it the
runtime's flag map builds one from `defaults`), `metadata`, `executor_config`, hooks. vLLM
without a Ray hint runs natively (`--nnodes/--node-rank/--master-addr`, master port 25000);
SGLang with `--dist-init-addr HEAD:25000`. Shared reading (format detection, placeholders,
per-node flags) is spark_tui.recipes.community; eugr's format is spark_tui.recipes.eugr.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from spark_tui import redact
from spark_tui.engine_command import ParsedCommand, command_words, parse_command
from spark_tui.errors import InputError, InputErrors
from spark_tui.recipes import sparkrun_include, sparkrun_keys, sparkrun_overrides
from spark_tui.recipes.community import (
    NODE_FLAGS,
    READY_LINES,
    SPARKRUN,
    SPARKRUN_INIT_PORT,
    _line,
    fill_placeholders,
)
from spark_tui.recipes.model import (
    ModelSpec,
    RaySpec,
    Recipe,
    ServeSpec,
    Source,
    Unmapped,
)
from spark_tui.recipes.sparkrun_settings import (
    RUNTIME_CACHE,
    check_min_version,
    family_of,
    readiness,
    runtime_cache,
    runtime_name,
)
from spark_tui.yamlfile import LDict, line_of

# sparkrun's recipe-key maps, switches and always-set env: sparkrun_keys (from sparkrun itself)
VLLM_FLAG_MAP = sparkrun_keys.flag_map("vllm")
SGLANG_FLAG_MAP = sparkrun_keys.flag_map("sglang")


def with_layer(defaults: dict, layer: dict, line: int) -> dict:
    """`defaults` with an override's values over them, each key keeping its line (a value an
    override set is on the `overrides:` line)."""
    out = LDict({**defaults, **layer})
    out.line = getattr(defaults, "line", line)
    out.key_lines = {k: line_of(defaults, k) or line for k in defaults}
    out.key_lines.update(dict.fromkeys(layer, line))
    return out


def parse_sparkrun(data: Any, file: str) -> Recipe:
    """A sparkrun recipe as a spark-tui Recipe (status untested); its id is the file name.
    Raises InputErrors for what makes it unusable, every error with its line. (eugr's files
    are read by spark_tui.recipes.eugr, as eugr's own launcher reads them.)"""
    from pathlib import Path

    from spark_tui.recipes.loader import ENV_NAME, ID, IMAGE

    kind = SPARKRUN
    errors: list[InputError] = []
    notes: list[Unmapped] = []
    include_line = _line(data, "include") if isinstance(data, dict) else None
    data, chain = sparkrun_include.resolve(data, file)  # include: merged in first

    def err(message: str, key: str | None = None) -> None:
        errors.append(InputError(message, file, (_line(data, key) if key else None) or 1))

    def unmapped(key: str, reason: str, line: int | None = None, kind: str = "not mapped") -> None:
        notes.append(Unmapped(line or _line(data, key) or None, key, reason, kind))

    rid = Path(file).stem
    if not ID.fullmatch(rid):
        err(
            f"the file name {rid!r} is the recipe's id: use lower-case letters, digits, "
            "'.', '_' and '-' (rename the file)"
        )
    launcher = "sparkrun"
    if chain:
        unmapped(
            "include",
            "built on " + " <- ".join(p.name for p in chain) + " (sparkrun's include: merged)",
            include_line,
            kind="note",
        )
    check_min_version(data, file)
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        err("defaults must be a mapping", "defaults")
        defaults = {}
    model_id = data.get("model")
    if model_id is not None and not isinstance(model_id, str):
        err("model must be a model id (org/name)", "model")
        model_id = None
    revision = data.get("model_revision")
    if revision is not None and (not isinstance(revision, (str, int)) or not str(revision).strip()):
        err(
            "model_revision must be a revision of the model (a commit, a branch, a tag)",
            "model_revision",
        )
        revision = None
    revision = str(revision).strip() if revision is not None else ""
    runtime = str(data.get("runtime") or "")
    if runtime and runtime not in ("vllm", "vllm-ray", "vllm-distributed", "eugr-vllm", "sglang"):
        err(
            f"runtime {runtime!r}: spark-tui launches vLLM and SGLang only "
            "(vllm, vllm-ray, vllm-distributed, eugr-vllm, sglang)",
            "runtime",
        )
    command_text = data.get("command")
    if command_text is not None and not isinstance(command_text, str):
        err("command must be text (a shell command)", "command")
        command_text = None

    # ---- overrides: the conditional layers, for the launch this recipe describes ---------
    image_over: str | None = None
    env_over: dict[str, Any] = {}
    layers = sparkrun_overrides.parse(data.get("overrides"), file, _line(data, "overrides") or 1)
    if layers and not errors:
        declared = {**defaults, "model": model_id}
        if revision:
            declared["model_revision"] = revision
        declared.setdefault("resolved_model_path", model_id)
        solo = (
            str(data.get("mode") or "") == "solo"
            or bool(data.get("solo_only"))
            or (data.get("max_nodes") == 1 and str(data.get("mode") or "auto") == "auto")
        )
        shape, rt_name, family = sparkrun_overrides.launch_facts(
            defaults, runtime_name(runtime, defaults, command_text), solo
        )
        applied: dict[str, Any] = {}
        for d in sparkrun_overrides.evaluate(layers, declared, shape, rt_name, family):
            o = d.override
            unevaluable = "cannot evaluate" in d.reason
            unmapped(
                f"overrides[{o.index}]",
                ("applied: " if d.matched else "not applied: ")
                + d.reason
                + (
                    ""
                    if unevaluable
                    else f" (for {shape['nodes']} node{'s' if shape['nodes'] != 1 else ''}"
                    f" of DGX Spark, {rt_name})"
                ),
                o.line,
                "warning" if unevaluable else "note",
            )
            if d.matched:
                applied.update(o.defaults)
                env_over.update(o.env)
                image_over = o.container or image_over
        if applied:
            defaults = with_layer(defaults, applied, _line(data, "overrides") or 1)

    values: dict[str, Any] = {k: v for k, v in defaults.items() if not isinstance(v, (dict, list))}
    if model_id:
        values.setdefault("model", model_id)
    if revision:  # sparkrun fills {model_revision} only when the recipe pins one
        values.setdefault("model_revision", revision)
    if model_id:
        values.setdefault("resolved_model_path", model_id)
    engine = "sglang" if runtime == "sglang" else "vllm"
    parsed = ParsedCommand()
    cmd_line = _line(data, "command")
    if command_text:
        filled, missing = fill_placeholders(command_text, values, format_escapes=False)
        if missing:
            err(
                "command: no value for "
                + ", ".join("{" + m + "}" for m in missing)
                + " (add it to defaults)",
                "command",
            )
        try:
            words = command_words(filled)
        except ValueError as exc:
            err(f"command: not a shell command ({exc})", "command")
            words = []
        parsed = parse_command(words)
        if words and not parsed.engine:
            err(
                f"command: {' '.join(words[:3])!r}… is not `vllm serve`, `sglang serve` or "
                "`python3 -m sglang.launch_server`: spark-tui launches vLLM and SGLang only",
                "command",
            )
        engine = parsed.engine or engine
        for reason in parsed.dropped:
            unmapped("command", f"{reason} — left out", cmd_line)
    else:
        if not model_id:
            err("a recipe without a command needs a model", "model" if "model" in data else None)
        parsed.engine = engine
        parsed.model = model_id
        if engine == "sglang":
            parsed.prefix = ["sglang", "serve"]
        known = sparkrun_keys.all_keys(engine) | {"distributed_executor_backend"}
        for key in defaults:
            if key not in known:
                unmapped(
                    f"defaults.{key}",
                    f"sparkrun {sparkrun_keys.version()} passes no flag for it without a "
                    "command template; left out",
                    _line(defaults, key),
                )
        if (
            revision
            and engine == "vllm"
            and model_id
            and not model_id.startswith("/")
            and (":" not in model_id)
        ):
            parsed.args["--revision"] = revision  # sparkrun's vLLM runtimes pass a pin
        flags_from = dict(defaults)
        pin = defaults.get("revision")
        if engine == "sglang" and isinstance(pin, str) and "{model_revision}" in pin:
            # sparkrun's SGLang runtime fills {model_revision} in defaults.revision
            filled, missing = fill_placeholders(pin, values, format_escapes=False)
            if missing:
                err(
                    "defaults.revision: {model_revision} has no value: pin the model with "
                    "model_revision (sparkrun passes the text as written, and the engine "
                    "finds no such revision)",
                    "defaults",
                )
            flags_from["revision"] = filled
        parsed.args.update(sparkrun_keys.defaults_flags(engine, flags_from))
    if errors:
        raise InputErrors(errors)

    args = dict(parsed.args)
    model_path = parsed.model or model_id or ""
    if not model_path:
        raise InputErrors([InputError("the command names no model", file, cmd_line or 1)])
    if not model_id:
        model_id = model_path

    # ---- nodes ------------------------------------------------------------------
    def as_int(v: Any) -> int | None:
        try:
            return int(str(v))
        except (TypeError, ValueError):
            return None

    tp = as_int(args.get("--tensor-parallel-size", args.get("--tp-size", args.get("--tp"))))
    pp = as_int(args.get("--pipeline-parallel-size", args.get("--pp-size")))
    nodes = max(1, (tp or 1) * (pp or 1))  # one GB10 GPU per Spark
    min_nodes = as_int(data.get("min_nodes"))
    max_nodes = as_int(data.get("max_nodes"))
    if data.get("cluster_only"):
        min_nodes = max(min_nodes or 0, 2)
    if data.get("solo_only"):
        max_nodes = 1
    if min_nodes and nodes < min_nodes:
        nodes = min_nodes
    if max_nodes and nodes > max_nodes:
        unmapped(
            "max_nodes",
            f"the command's parallelism needs {nodes} nodes; max_nodes {max_nodes} kept it at {max_nodes}",
        )
        nodes = max_nodes

    # ---- executor ---------------------------------------------------------------
    backend = str(
        args.get("--distributed-executor-backend")
        or defaults.get("distributed_executor_backend", "")
    ).lower()
    if engine == "sglang":
        executor = "mp"
    elif nodes == 1:
        executor = "mp"
        if "--distributed-executor-backend" in args and backend == "ray":
            # eugr's --solo does the same: one node needs no Ray
            args.pop("--distributed-executor-backend")
            unmapped(
                "command",
                "--distributed-executor-backend ray on one node: left out (as eugr's --solo does)",
                cmd_line,
            )
    elif backend == "ray" or runtime in ("vllm-ray", "eugr-vllm"):
        executor = "ray"
        args["--distributed-executor-backend"] = "ray"
    else:
        executor = "mp"  # sparkrun's vllm-distributed: vLLM's own multi-node launch
    node_args: dict[str, Any] = {}
    worker_args: dict[str, Any] = {}
    for flag in NODE_FLAGS & set(args):
        args.pop(flag)
        unmapped("command", f"{flag} is written per node by spark-tui: left out", cmd_line)
    if executor == "mp" and nodes > 1:
        if engine == "vllm":
            args.setdefault("--distributed-executor-backend", "mp")
            node_args = {
                "--nnodes": "{cluster.size}",
                "--node-rank": "{node.rank}",
                "--master-addr": "{head.fabric_ip}",
                "--master-port": SPARKRUN_INIT_PORT,
            }
            worker_args = {"--headless": True}
        else:
            node_args = {
                "--nnodes": "{cluster.size}",
                "--node-rank": "{node.rank}",
                "--dist-init-addr": f"{{head.fabric_ip}}:{SPARKRUN_INIT_PORT}",
            }
    served = defaults.get("served_model_name")
    if served and "--served-model-name" not in args and command_text:
        args["--served-model-name"] = served  # sparkrun appends it when the template has none
    elif engine == "vllm" and kind == SPARKRUN and "--served-model-name" not in args:
        # sparkrun's vLLM runtimes always name the served model: the recipe's model id
        args["--served-model-name"] = served or model_id

    # ---- environment --------------------------------------------------------------
    env_raw = data.get("env") or {}
    env: dict[str, str] = {}
    if not isinstance(env_raw, dict):
        raise InputErrors(
            [
                InputError(
                    "env must be a mapping of VARIABLE -> value", file, _line(data, "env") or 1
                )
            ]
        )
    launch = {"model_revision": revision or None}
    cache = runtime_cache(data.get("runtime_cache"), file, _line(data, "runtime_cache") or 1)
    uses_cache = False
    for name, value in {**parsed.env, **env_raw, **env_over}.items():
        line = _line(env_raw, name) if name in env_raw else cmd_line
        if name in env_over:
            line = _line(data, "overrides")
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise InputErrors(
                [InputError(f"env: {name!r} is not an environment variable name", file, line or 1)]
            )
        if isinstance(value, (dict, list)) or value is None:
            raise InputErrors([InputError(f"env.{name} must be text or a number", file, line or 1)])
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        if kind == SPARKRUN and "{launch." in text:
            for field in re.findall(r"(?<![{$])\{launch\.([^{}]*)\}", text):
                if field not in sparkrun_keys.LAUNCH_PLACEHOLDERS:
                    raise InputErrors(
                        [
                            InputError(
                                f"env.{name}: unknown launch field {{launch.{field}}} (sparkrun "
                                f"knows {', '.join(sorted(sparkrun_keys.LAUNCH_PLACEHOLDERS))})",
                                file,
                                line or 1,
                            )
                        ]
                    )
                if field == "runtime_cache_dir":
                    if not cache.enabled:
                        raise InputErrors(
                            [
                                InputError(
                                    f"env.{name}: {{launch.runtime_cache_dir}} needs the runtime "
                                    "cache, which runtime_cache turns off",
                                    file,
                                    line or 1,
                                )
                            ]
                        )
                    uses_cache = True
                    launch["runtime_cache_dir"] = RUNTIME_CACHE
        if kind == SPARKRUN and "{" in text:
            text, no_value = sparkrun_keys.render_env_template(text, values, launch)
            for field in no_value:
                unmapped(
                    f"env.{name}",
                    f"{{{field}}} has no spark-tui equivalent (or no value in defaults); "
                    "left as written",
                    line,
                )
        # ${NAME} is filled in from spark-tui's environment when the launch runs, as sparkrun
        # fills it from its own; any other `$` is not
        if "$" in redact.REFERENCE.sub("", text) and kind == SPARKRUN:
            unmapped(
                f"env.{name}",
                f"{text!r} is expanded from sparkrun's own environment; spark-tui passes it "
                "as written (only ${NAME} is filled in from spark-tui's environment)",
                line,
            )
        env[name] = text
    serve_env: dict[str, str] = {}
    # sparkrun: its always-set env, then the recipe's, in every container
    docker_env: dict[str, str] = {**sparkrun_keys.always_env(engine, nodes), **env}
    ray = RaySpec()
    fabric = {
        "NCCL_SOCKET_IFNAME": "{node.fabric_if}",
        "GLOO_SOCKET_IFNAME": "{node.fabric_if}",
    }
    if executor == "ray":
        # what eugr's run-cluster-node.sh exports in every Ray container
        ray = RaySpec(
            port=6379,
            args={"--object-store-memory": 1073741824},
            env={
                "VLLM_HOST_IP": "{node.fabric_ip}",
                **fabric,
                "RAY_memory_monitor_refresh_ms": "0",
            },
        )
    elif nodes > 1:
        docker_env = {
            **fabric,
            **({"VLLM_HOST_IP": "{node.fabric_ip}"} if engine == "vllm" else {}),
            **docker_env,
        }

    # ---- image, docker ----------------------------------------------------------------
    image = image_over or data.get("container")
    image_note = ""
    if image is not None and (not isinstance(image, str) or not IMAGE.fullmatch(image)):
        where = "overrides" if image_over else "container"
        raise InputErrors(
            [
                InputError(
                    f"{where}: container {image!r} is not an image name",
                    file,
                    _line(data, where) or 1,
                )
            ]
        )
    if kind == SPARKRUN and image:
        build_args = data.get("build_args") or []
        pulled = sparkrun_keys.pulled_image(
            image,
            str(data.get("builder") or ""),
            [str(a) for a in build_args] if isinstance(build_args, list) else [],
        )
        if pulled != image:
            image_note = f"sparkrun's eugr builder runs {pulled} for {image}"
            image = pulled
    docker_args: dict[str, Any] = {"--privileged": True}  # both launchers run privileged
    execfg = data.get("executor_config") or {}
    if isinstance(execfg, dict):
        for key, value in execfg.items():
            line = _line(execfg, key)
            if key == "shm_size" and value:
                docker_args["--shm-size"] = str(value)
            elif key == "privileged":
                if value is False:
                    docker_args.pop("--privileged", None)
            elif key == "entrypoint" and value is not None:
                docker_args["--entrypoint"] = str(value)
            elif key in ("gpus", "ipc", "network") and str(value) in ("all", "host"):
                continue  # what spark-tui always renders
            else:
                unmapped(
                    f"executor_config.{key}",
                    "spark-tui never renders --rm or a restart policy, and always runs "
                    "--gpus all --ipc=host --network host"
                    if key in ("auto_remove", "restart_policy", "gpus", "ipc", "network")
                    else "no spark-tui equivalent",
                    line,
                )

    # ---- what has no equivalent -----------------------------------------------------
    handled = {
        "recipe_version",
        "sparkrun_version",
        "name",
        "description",
        "model",
        "container",
        "defaults",
        "env",
        "command",
        "cluster_only",
        "solo_only",
        "min_nodes",
        "max_nodes",
        "runtime",
        "metadata",
        "executor_config",
        "include",
        "overrides",
        "min_sparkrun_version",
        "model_revision",
        "readiness",
        "runtime_cache",
    }
    reasons = {
        "mods": "patches applied inside the container by the launcher; use an image that has them",
        "build_args": "image build options (build-and-copy.sh); build the image first",
        "pre_exec": "commands sparkrun runs in every container before serving",
        "post_exec": "commands sparkrun runs in the head container once serving",
        "post_commands": "commands sparkrun runs on its own machine once serving",
        "stop_after_post": "sparkrun's one-shot mode",
        "benchmark": "sparkrun's benchmark settings",
        "builder": "sparkrun's image builder",
        "builder_config": "sparkrun's image builder settings",
        "distribution_config": "sparkrun copies models and images to the nodes itself",
        "capabilities": "what the served model can do, for an inference gateway to admit "
        "requests by; spark-tui sends none it would gate",
        "unsupported_capabilities": "what the served model cannot do, for an inference gateway",
        "containers": "sparkrun's per-host images; spark-tui runs one image on every node",
        "layout": "sparkrun's explicit placement; spark-tui places one rank per node",
        "scheduler": "sparkrun's placement policy",
        "cluster_config": "sparkrun's internal launch overrides",
        "runtime_version": "informational",
        "runtime_config": "sparkrun runtime settings",
        "mode": "derived from the node count",
    }
    for key, value in data.items():
        if key in handled or value in (None, [], {}, ""):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, (dict, list)) else str(value)
        unmapped(key, f"{shown} — {reasons.get(key, 'not known to spark-tui')}")

    # ---- model config from sparkrun's metadata ---------------------------------------
    meta = data.get("metadata") or {}
    cfg: dict[str, int] = {}
    if isinstance(meta, dict):
        for src, dst in (
            ("num_layers", "layers"),
            ("num_kv_heads", "kv_heads"),
            ("head_dim", "head_dim"),
        ):
            if as_int(meta.get(src)) is not None:
                cfg[dst] = as_int(meta.get(src))  # type: ignore[assignment]  # not None: checked on the line above
    description = str(
        data.get("description") or (meta.get("description") if isinstance(meta, dict) else "") or ""
    )
    name = str(data.get("name") or "")
    title = " — ".join(t for t in (name, description) if t) or f"{model_id} ({launcher} recipe)"

    if revision and command_text and "--revision" not in args:
        unmapped(
            "model_revision",
            f"{revision} is pinned, but the command passes no --revision: the engine loads "
            "the model as the hub cache names it, not the pinned commit (sparkrun's own "
            "check says the same) — add `--revision {model_revision}`",
            kind="warning",
        )
    smoke, startup_s = readiness(data, file, notes)

    port = as_int(args.get("--port")) or (30000 if engine == "sglang" else 8000)
    serve = ServeSpec(
        args=args,
        env=serve_env,
        command=(),
        node_args=node_args,
        worker_args=worker_args,
        log="/tmp/sglang-serve.log" if engine == "sglang" else "/tmp/vllm-serve.log",
        ready_line=READY_LINES[engine],
        port=port,
        startup_timeout_s=startup_s,
    )
    if parsed.prefix[:2] == ["sglang", "serve"]:
        serve = replace(serve, command=("sglang", "serve", "--model-path", "{model.path}"))
    return Recipe(
        id=rid,
        title=title,
        engine=engine,
        executor=executor,
        model=ModelSpec(
            id=model_id,
            path=model_path,
            revision=revision,
            layers=cfg.get("layers"),
            kv_heads=cfg.get("kv_heads"),
            head_dim=cfg.get("head_dim"),
            config_source=f"sparkrun metadata in {Path(file).name}" if cfg else "",
        ),
        nodes=nodes,
        serve=serve,
        image=image,
        image_note=image_note,
        head_container="ray-head" if executor == "ray" else f"{engine}-head",
        worker_container="ray-worker" if executor == "ray" else f"{engine}-worker",
        volumes=(
            "{cluster.models_dir}:/root/.cache/huggingface",
            *([cache.volume(family_of(runtime), model_id, revision, image)] if uses_cache else []),
        ),
        docker_args=docker_args,
        docker_env=docker_env,
        ray=ray,
        smoke=smoke,
        status="untested",
        notes=(f"Read from {launcher}'s recipe format ({Path(file).name}).",),
        sources=(
            Source(f"{Path(file).name} ({launcher} recipe)", file),
            *(Source(f"{b.name} ({launcher} recipe it includes)", str(b)) for b in reversed(chain)),
        ),
        source=file,
        origin=kind,
        unmapped=tuple(notes),
    )
