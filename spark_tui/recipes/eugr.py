"""eugr/spark-vllm-docker's recipe format read as a spark-tui Recipe, meaning what eugr's own
launcher makes of it (https://github.com/eugr/spark-vllm-docker: run-recipe.py writes a launch
script from the recipe, launch-cluster.sh starts one container per node and runs it):

- `command` is filled by Python's own `str.format(**defaults)` (so `{{`/`}}` are braces);
- solo (one node) forces `tensor_parallel` to 1 and strips `--distributed-executor-backend`;
- multi-node runs without Ray by default: every node runs the same `vllm serve` with
  `--nnodes N --node-rank R --master-addr HEAD --master-port 29501` (`--headless` on ranks
  above 0) and the backend flag stripped; `--ray` (our profile `ray`) starts a Ray head and
  workers and adds `--distributed-executor-backend ray`;
- the node count is tp x pp x dp of the command (launch-cluster.sh's parse_parallelism);
- the container is `vllm_node` on every node, with eugr's environment, ulimit, cleared
  entrypoint and cache mounts, so eugr's `launch-cluster.sh stop` and ours stop each other's;
- `env` is exported in the launch script; `mods` are copied into the container and their
  run.sh run before the engine starts, from the eugr tree the recipe came from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from spark_tui.engine_command import command_words, parse_command
from spark_tui.errors import InputError, InputErrors
from spark_tui.recipes.community import EUGR, EUGR_URL, NODE_FLAGS, READY_LINES, _line
from spark_tui.recipes.model import (
    ArgValue,
    ModelSpec,
    Profile,
    RaySpec,
    Recipe,
    ServeSpec,
    Source,
    Unmapped,
)

CONTAINER = "vllm_node"  # launch-cluster.sh's DEFAULT_CONTAINER_NAME
WARNING = "warning"
READ_AS = "read as eugr runs it"
NOTE = "note"
MASTER_PORT = 29501  # launch-cluster.sh's MASTER_PORT (the Ray head port with --ray)
NOFILE_LIMIT = 1048576  # launch-cluster.sh's VLLM_SPARK_NOFILE_LIMIT default
# run-recipe.py's DISTRIBUTED_EXECUTOR_RE
_BACKEND = re.compile(r"--distributed-executor-backend(?:=|\s+)\S+")
# launch-cluster.sh's get_env_flags and DOCKER_ARGS: every node's container environment
CONTAINER_ENV = {
    "VLLM_HOST_IP": "{node.fabric_ip}",
    "RAY_NODE_IP_ADDRESS": "{node.fabric_ip}",
    "RAY_OVERRIDE_NODE_IP_ADDRESS": "{node.fabric_ip}",
    "MN_IF_NAME": "{node.fabric_if}",
    "UCX_NET_DEVICES": "{node.fabric_if}",
    "NCCL_SOCKET_IFNAME": "{node.fabric_if}",
    "NCCL_IB_HCA": "{node.fabric_hca}",
    "NCCL_IB_DISABLE": "0",
    "OMPI_MCA_btl_tcp_if_include": "{node.fabric_if}",
    "GLOO_SOCKET_IFNAME": "{node.fabric_if}",
    "TP_SOCKET_IFNAME": "{node.fabric_if}",
    "RAY_memory_monitor_refresh_ms": "0",
    "RAY_num_prestart_python_workers": "0",
    "RAY_object_store_memory": "1073741824",
    "NCCL_IGNORE_CPU_AFFINITY": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
}
VOLUMES = (
    "{cluster.models_dir}:/root/.cache/huggingface",
    "~/.cache/vllm:/root/.cache/vllm",
    "~/.cache/flashinfer:/root/.cache/flashinfer",
    "~/.triton:/root/.triton",
    "~/.tilelang:/root/.tilelang",
)
DOCKER_ARGS: dict[str, ArgValue] = {
    "--privileged": True,
    "--ulimit": f"nofile={NOFILE_LIMIT}:{NOFILE_LIMIT}",
    "--entrypoint": "",
}
# launch-cluster.sh's start_ray_head / start_ray_worker (inside the node's container)
RAY_HEAD = (
    "ray start --block --head --port {port} --object-store-memory 1073741824 --num-cpus 2 "
    "--node-ip-address {{node.fabric_ip}} --include-dashboard=false --disable-usage-stats"
)
RAY_WORKER = (
    "ray start --block --object-store-memory 1073741824 --num-cpus 2 --disable-usage-stats "
    "--address={{head.fabric_ip}}:{port} --node-ip-address {{node.fabric_ip}}"
)


def strip_backend(command: str) -> str:
    """run-recipe.py's strip_distributed_executor_backend."""
    command = _BACKEND.sub("", command)
    return "\n".join(ln for ln in command.split("\n") if ln.strip() not in ("", "\\"))


def ensure_ray(command: str) -> str:
    """run-recipe.py's ensure_ray_backend."""
    if "vllm serve" not in command or _BACKEND.search(command):
        return command
    return command.rstrip() + " --distributed-executor-backend ray"


def launch_command(data: dict, solo: bool, ray: bool) -> str:
    """The command line of run-recipe.py's generate_launch_script (str.format, the trailing
    backslash dropped, the backend stripped or ensured). Raises KeyError for a placeholder
    without a value, ValueError/IndexError for a brace str.format refuses."""
    params = dict(data.get("defaults") or {})
    if solo:
        params["tensor_parallel"] = 1  # run-recipe.py: solo defaults tensor_parallel to 1
    command = str(data["command"]).format(**params).rstrip()
    if command.endswith("\\"):
        command = command.rstrip("\\\n").rstrip()
    command = strip_backend(command) if solo or not ray else ensure_ray(command)
    # launch-cluster.sh drops a backslash left at the end (the stripped flag's line was last)
    return re.sub(r"\s*\\\s*$", "", command)


def parallelism(words: list[str]) -> int:
    """The nodes a command asks for: tp x pp x dp (launch-cluster.sh's
    parse_parallelism_from_text, which trims the cluster to it), each spelling of the flags
    vLLM accepts (`-tp 2`, `--tensor-parallel-size=2`, `--tensor_parallel_size 2`)."""
    args = parse_command(words).args
    total = 1
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"):
        value = args.get(flag)
        if value is not None and str(value).isdigit():
            total *= int(str(value))
    return total


def _file_line(file: str, text: str) -> int | None:
    """The first line of the file that holds `text` (a flag inside a multi-line command)."""
    try:
        lines = Path(file).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((i for i, line in enumerate(lines, 1) if text in line), None)


def tree_root(file: str, mods: list[str]) -> Path | None:
    """The eugr checkout a recipe file is in: the nearest parent holding its mods (run-recipe.py
    resolves a mod against its own directory, the tree's root)."""
    here = Path(file).resolve().parent
    for d in (here, *here.parents[:3]):
        if (d / "run-recipe.py").is_file() or (mods and all((d / m).exists() for m in mods)):
            return d
    return None


def recipes_folder(file: str) -> tuple[str, ...]:
    """The folders between an eugr checkout's `recipes/` and the file (`4x-spark-cluster`):
    () for a file directly in `recipes/`, or in no checkout (no run-recipe.py above it)."""
    path = Path(file).resolve()
    for d in path.parents:
        if (d / "run-recipe.py").is_file():
            try:
                return path.relative_to(d / "recipes").parts[:-1]
            except ValueError:
                return ()
    return ()


def recipe_id(file: str) -> str:
    """An eugr file's id: its name lower-cased (eugr runs any name), after the folders it is
    in under its checkout's `recipes/` (`3x-spark-cluster/` and `4x-spark-cluster/` hold files
    of the same name: `4x-spark-cluster-qwen3.5-397b-int4-autoround`)."""
    return "-".join((*recipes_folder(file), Path(file).stem)).lower()


def parse_eugr(data: Any, file: str) -> Recipe:
    """An eugr recipe as a spark-tui Recipe (status untested): id from the file name and its
    folder in the checkout (recipe_id), InputErrors for what eugr itself would refuse."""
    from spark_tui.recipes.loader import ENV_NAME, ID, IMAGE

    errors: list[InputError] = []
    notes: list[Unmapped] = []

    def err(message: str, key: str | None = None) -> None:
        errors.append(InputError(message, file, (_line(data, key) if key else None) or 1))

    def note(key: str, reason: str, line: int | None = None, kind: str = "not mapped") -> None:
        notes.append(Unmapped(line or _line(data, key) or None, key, reason, kind))

    def read_as(key: str, reason: str, line: int | None = None) -> None:
        note(key, reason, line, READ_AS)

    for key, line in getattr(data, "duplicates", ()):
        note(
            key,
            "the key is given twice: eugr's YAML reader keeps the last, so does spark-tui",
            line,
            WARNING,
        )
    version = str(data.get("recipe_version", "") or "")
    if version not in ("", "1"):
        read_as(
            "recipe_version",
            f'"{version}" is not eugr\'s recipe version ("1"), but the keys make it eugr\'s '
            "format (a command from defaults, no sparkrun key): read as eugr reads it, "
            "`{{`/`}}` braces as str.format makes them",
        )
    stem = Path(file).stem
    folder = recipes_folder(file)
    rid = recipe_id(file)
    if not ID.fullmatch(rid):
        err(
            f"the file name {stem!r} is the recipe's id: use letters, digits, '.', '_' and '-' "
            "(rename the file)"
        )
    else:
        if stem.lower() != stem:
            note("file name", f"{stem!r} has upper-case letters: its id is {rid!r}", kind=WARNING)
        if folder:
            note(
                "file name",
                f"in recipes/{'/'.join(folder)}/ of its eugr checkout: its id is {rid!r} "
                "(the folder keeps it apart from a file of the same name in another folder)",
                kind=NOTE,
            )
    command = data.get("command")
    if not isinstance(command, str) or not command.strip():
        err("command: eugr's run-recipe.py needs a command (a `vllm serve …` line)", "command")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        err("defaults must be a mapping", "defaults")
    mods_raw = data.get("mods") or []
    if not isinstance(mods_raw, list) or not all(isinstance(m, str) for m in mods_raw):
        err("mods must be a list of mod directories (mods/NAME)", "mods")
        mods_raw = []
    if errors:
        raise InputErrors(errors)

    solo_only = bool(data.get("solo_only"))
    cluster_only = bool(data.get("cluster_only"))
    cmd_line = _line(data, "command")

    def variant(solo: bool, ray: bool) -> tuple[str, list[str]]:
        try:
            text = launch_command(data, solo, ray)
        except KeyError as exc:
            raise InputErrors(
                [
                    InputError(
                        f"command: no value for {{{exc.args[0]}}} (add it to defaults)",
                        file,
                        cmd_line or 1,
                    )
                ]
            ) from None
        except (ValueError, IndexError, AttributeError) as exc:
            raise InputErrors(
                [
                    InputError(
                        f"command: Python's str.format refuses it ({exc})", file, cmd_line or 1
                    )
                ]
            ) from None
        try:
            return text, command_words(text)
        except ValueError as exc:
            raise InputErrors(
                [InputError(f"command: not a shell command ({exc})", file, cmd_line or 1)]
            ) from None

    _, cluster_words = variant(solo=False, ray=False)
    need = 1 if solo_only else parallelism(cluster_words)
    if cluster_only and need < 2:
        need = 2  # run-recipe.py refuses solo; launch-cluster.sh uses every node it has
        note("cluster_only", "the command asks for one node: rendered on two")
    solo_default = need == 1
    tp_default = (defaults or {}).get("tensor_parallel")
    if solo_only and str(tp_default).isdigit() and int(str(tp_default)) > 1:
        read_as(
            "solo_only",
            f"defaults.tensor_parallel is {tp_default}: eugr runs a solo_only recipe on one "
            "node with tensor_parallel 1, so does spark-tui",
        )
    if need > 1 and "--distributed-executor-backend" in str(data.get("command")):
        read_as(
            "command",
            "--distributed-executor-backend is stripped: eugr runs a multi-node recipe without "
            "Ray by default (--nnodes/--node-rank per node); --profile ray runs it as eugr's "
            "--ray (the backend flag set to ray)",
            _file_line(file, "--distributed-executor-backend") or cmd_line,
        )
    _, words = variant(solo=solo_default, ray=False)
    parsed = parse_command(words)
    if not parsed.engine:
        raise InputErrors(
            [
                InputError(
                    f"command: {' '.join(words[:3])!r}… is not `vllm serve`, `sglang serve` or "
                    "`python3 -m sglang.launch_server`: spark-tui launches vLLM and SGLang only",
                    file,
                    cmd_line or 1,
                )
            ]
        )
    engine = parsed.engine
    for reason in parsed.dropped:
        note("command", f"{reason} — left out", cmd_line)
    args = dict(parsed.args)
    for flag in NODE_FLAGS & set(args):
        args.pop(flag)
        note(
            "command", f"{flag} is written per node (as launch-cluster.sh does): left out", cmd_line
        )
    model_path = parsed.model or ""
    model_id = data.get("model") if isinstance(data.get("model"), str) else None
    if not model_path:
        raise InputErrors([InputError("the command names no model", file, cmd_line or 1)])

    node_args: dict[str, ArgValue] = {}
    worker_args: dict[str, ArgValue] = {}
    if need > 1 and engine == "vllm":
        node_args = {
            "--nnodes": "{cluster.size}",
            "--node-rank": "{node.rank}",
            "--master-addr": "{head.fabric_ip}",
            "--master-port": MASTER_PORT,
        }
        worker_args = {"--headless": True}

    # ---- profiles: the other ways eugr runs the same file ------------------------------
    profiles: dict[str, Profile] = {}

    def diff(other_words: list[str]) -> tuple[dict[str, ArgValue], tuple[str, ...]]:
        other = dict(parse_command(other_words).args)
        for flag in NODE_FLAGS:
            other.pop(flag, None)
        set_args = {k: v for k, v in other.items() if args.get(k, object()) != v}
        return set_args, tuple(k for k in args if k not in other)

    if need > 1 and not cluster_only:
        set_args, unset = diff(variant(solo=True, ray=False)[1])
        profiles["solo"] = Profile(
            name="solo",
            description="one node, as eugr's --solo runs it (tensor_parallel 1)",
            set_args=set_args,
            unset_args=unset,
            nodes=1,
        )
    if need > 1 and engine == "vllm":
        set_args, unset = diff(variant(solo=False, ray=True)[1])
        profiles["ray"] = Profile(
            name="ray",
            description="Ray across the nodes, as eugr's --ray runs it",
            set_args=set_args,
            unset_args=unset,
            executor="ray",
        )

    # ---- environment, container ---------------------------------------------------------
    env_raw = data.get("env") or {}
    if not isinstance(env_raw, dict):
        raise InputErrors(
            [
                InputError(
                    "env must be a mapping of VARIABLE -> value", file, _line(data, "env") or 1
                )
            ]
        )
    serve_env: dict[str, str] = dict(parsed.env)
    for name, value in env_raw.items():
        line = _line(env_raw, name)
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise InputErrors(
                [InputError(f"env: {name!r} is not an environment variable name", file, line or 1)]
            )
        if isinstance(value, (dict, list)):
            raise InputErrors([InputError(f"env.{name} must be text or a number", file, line or 1)])
        serve_env[name] = str(value)  # run-recipe.py writes f'export {key}="{value}"'
    image = data.get("container")
    if image is not None and (not isinstance(image, str) or not IMAGE.fullmatch(image)):
        raise InputErrors(
            [
                InputError(
                    f"container {image!r} is not an image name", file, _line(data, "container") or 1
                )
            ]
        )
    image_note = ""
    if image and "/" not in image:
        build = data.get("build_args")
        image_note = (
            f"{image} is built locally by eugr/spark-vllm-docker's build-and-copy.sh"
            + (f" ({' '.join(map(str, build))})" if isinstance(build, list) and build else "")
            + f", {EUGR_URL}; build it on every node, or --set image=NAME"
        )

    # ---- mods, from the eugr tree the file is in --------------------------------------
    root = tree_root(file, mods_raw)
    mods: list[str] = []
    for mod in mods_raw:
        path = (root / mod) if root else None
        if path is None or not (path / "run.sh").is_file():
            note(
                "mods",
                f"{mod}: not found beside the recipe (keep the file in its eugr/spark-vllm-docker "
                "checkout, or apply the mod with an image that has it) — left out",
            )
            continue
        mods.append(str(path.resolve()))

    # ---- what has no equivalent ---------------------------------------------------------
    handled = {
        "recipe_version",
        "name",
        "description",
        "model",
        "container",
        "defaults",
        "env",
        "command",
        "cluster_only",
        "solo_only",
        "mods",
    }
    for key, value in data.items():
        if key in handled or value in (None, [], {}, ""):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, (dict, list)) else str(value)
        reason = (
            "image build options (build-and-copy.sh); build the image first"
            if key == "build_args"
            else "not read by eugr's run-recipe.py"
        )
        note(key, f"{shown} — {reason}")

    name = str(data.get("name") or "")
    description = str(data.get("description") or "")
    model_id = model_id or model_path
    title = " — ".join(t for t in (name, description) if t) or f"{model_id} (eugr recipe)"
    port_value = args.get("--port", 8000)
    try:
        port = int(str(port_value))
    except ValueError:
        port = 8000
    return Recipe(
        id=rid,
        title=title,
        engine=engine,
        executor="mp",
        model=ModelSpec(id=model_id, path=model_path),
        nodes=need,
        serve=ServeSpec(
            args=args,
            env=serve_env,
            node_args=node_args,
            worker_args=worker_args,
            log="/tmp/sglang-serve.log" if engine == "sglang" else "/tmp/vllm-serve.log",
            ready_line=READY_LINES[engine],
            port=port,
            startup_timeout_s=3600.0,
        ),
        image=image,
        image_note=image_note,
        head_container=CONTAINER,
        worker_container=CONTAINER,
        volumes=VOLUMES,
        docker_args=dict(DOCKER_ARGS),
        docker_env=dict(CONTAINER_ENV),
        ray=RaySpec(
            port=MASTER_PORT,
            head_command=tuple(RAY_HEAD.format(port=MASTER_PORT).split()),
            worker_command=tuple(RAY_WORKER.format(port=MASTER_PORT).split()),
        )
        if need > 1
        else RaySpec(),
        profiles=profiles,
        status="untested",
        notes=(f"Read from eugr/spark-vllm-docker's recipe format ({Path(file).name}).",),
        sources=(Source(f"{Path(file).name} (eugr/spark-vllm-docker recipe)", file),),
        source=file,
        origin=EUGR,
        unmapped=tuple(notes),
        mods=tuple(mods),
    )


def adopted_recipe(
    words: list[str], model: str | None, image: str | None, rid: str, node: str
) -> Recipe:
    """A running engine's command line (`recipes adopt`) read as an eugr recipe would be, with
    the executor it runs under kept: `--distributed-executor-backend ray` stays a Ray launch,
    a no-Ray one (`--nnodes …`, eugr's default) stays no-Ray; the per-node flags it was
    started with are written per node again."""
    import shlex
    from dataclasses import replace

    data = {
        "recipe_version": "1",
        "name": f"adopted from what runs on {node}",
        "model": model,
        "container": image or "unknown-image",
        # the words as they ran: a brace in one (`--compilation-config '{"level":3}'`, `${X}`)
        # is a brace, not a str.format field of eugr's format
        "command": shlex.join(words).replace("{", "{{").replace("}", "}}"),
    }
    recipe = parse_eugr(data, f"{rid}.yaml")
    backend = ""
    for i, w in enumerate(words):
        name, eq, value = w.partition("=")
        if name == "--distributed-executor-backend":
            backend = value if eq else (words[i + 1] if i + 1 < len(words) else "")
    if backend == "ray" and recipe.executor != "ray" and "ray" in recipe.profiles:
        others = {k: p for k, p in recipe.profiles.items() if k != "ray"}
        recipe = replace(recipe.with_profile("ray"), profile=None, profiles=others)
    return recipe
