"""Recipe + cluster (+ profile, + --set overrides) → LaunchPlan.

Every value reaches the shell through spark_tui.shell (quoted). Containers run
with --network host, --gpus all, --ipc=host, never --rm (the crash log would
go with the container) and never a restart policy (a crashed engine restarted
blindly leaks unified memory). The serve command runs inside the Ray head
container (`docker exec`), never as a Ray client from a new container.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

from spark_tui import paths, shell
from spark_tui.errors import InputError
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.model import ArgValue, Recipe, render_value
from spark_tui.recipes.plan import LaunchPlan, LaunchStep

_TEMPLATE = re.compile(r"\{([a-z_]+(?:\.[a-z_]+)+)\}")
LOG_TAIL_LINES = 200
STACK_LABEL = "spark-tui.recipe"


class HomePath(str):
    """A host path under the remote user's home: `$HOME` expands, the rest is quoted."""


def word(value: object) -> str:
    """Quote one command word; a HomePath keeps `"$HOME"` live and quotes the rest."""
    if isinstance(value, HomePath):
        rest = str(value).split("/", 1)[1] if "/" in value else ""
        return '"$HOME"' + (shell.quote("/" + rest) if rest else "")
    return shell.quote(value)


def words(argv: list[object]) -> str:
    return " ".join(word(a) for a in argv)


_stamp_lock = threading.Lock()
_stamp_last: tuple[str, int] = ("", 0)  # the second last stamped, and stamps given in it


def stamp_now() -> str:
    """A timestamp for backups and renamed containers (UTC, sortable), never the same twice
    in one process: two launches in one second (a fast relaunch) would rename their
    containers to the same name, and the second rename, then the new container, would fail."""
    global _stamp_last
    second = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    with _stamp_lock:
        n = _stamp_last[1] + 1 if _stamp_last[0] == second else 1
        _stamp_last = (second, n)
    return second if n == 1 else f"{second}-{n}"


def template_values(
    cluster: ClusterConfig, node: NodeConfig, rank: int, size: int
) -> dict[str, object]:
    """Values for {node.fabric_ip}, {node.fabric_if}, {head.fabric_ip}, {node.rank}, …"""
    values = node.placeholder_values(cluster.head)
    values["head.fabric_if"] = cluster.head.fabric_if
    values["node.rank"] = rank
    values["cluster.size"] = size
    values["cluster.models_dir"] = cluster.models_dir
    values["node.fabric_hca"] = node.fabric_hca or ""  # eugr's IB_IF (NCCL_IB_HCA): may be empty
    return values


def substitute(text: str, values: Mapping[str, object], recipe: Recipe, node: str) -> str:
    """Fill {…} placeholders in one value (unquoted: the whole word is quoted later)."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in values and values[key] is not None:
            return str(values[key])
        if key not in values and not key.startswith(("node.", "head.", "cluster.", "model.")):
            return m.group(0)  # not ours (e.g. JSON in an argument): leave it
        field = key.split(".", 1)[1]
        raise InputError(
            f"recipe {recipe.id!r} needs {key} for {node}: set {field} for that node in cluster.yaml"
        )

    return _TEMPLATE.sub(sub, text)


def arg_words(
    args: Mapping[str, ArgValue], values: Mapping[str, object], recipe: Recipe, node: str
) -> list[str]:
    """flag → value mapping as argv words (True = bare flag), in order."""
    out: list[str] = []
    for flag, value in args.items():
        out.append(flag)
        if isinstance(value, list):  # one word per value
            out += [substitute(render_value(v), values, recipe, node) for v in value]
        elif value is not True:
            out.append(substitute(render_value(value), values, recipe, node))
    return out


def env_words(
    env: Mapping[str, str], values: Mapping[str, object], recipe: Recipe, node: str
) -> dict[str, str]:
    return {k: substitute(str(v), values, recipe, node) for k, v in env.items()}


def docker_run_args(
    recipe: Recipe,
    name: str,
    env: Mapping[str, str],
    values: Mapping[str, object] | None = None,
    check: bool = True,
) -> list[object]:
    """The words after `docker run` up to the image (unquoted; HomePath for $HOME volumes).
    With check, refuses --rm and a restart policy (InputError)."""
    for flag in recipe.docker_args if check else ():
        if flag == "--rm" or flag.startswith("--restart"):
            raise InputError(
                f"recipe {recipe.id!r} asks docker for {flag}: spark-tui never renders it "
                "(--rm deletes the crash log, a restart policy restarts a crash blindly); "
                "remove it from docker.args",
                recipe.source or None,
            )
    argv: list[object] = ["-d", "--name", name, "--network", "host", "--gpus", "all", "--ipc=host"]
    # the label lets stop-stack find our containers when no recipe is at hand
    argv += ["--label", f"{STACK_LABEL}={recipe.id}"]
    volumes = list(recipe.volumes)
    if recipe.mods:
        volumes.append(f"{mods_node_dir(recipe)}:{MODS_MOUNT}:ro")
    for vol in volumes:
        filled = substitute(vol, values or {}, recipe, name) if values is not None else vol
        if filled.startswith(("~/", "$HOME/")):
            argv += ["-v", HomePath("$HOME/" + filled.split("/", 1)[1])]
        else:
            argv += ["-v", filled]
    for key, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise InputError(f"recipe {recipe.id!r}: {key!r} is not an environment variable name")
        argv += ["-e", f"{key}={value}"]
    for flag, value in recipe.docker_args.items():
        argv += [flag] if value is True else [flag, render_value(value)]
    return argv


def serve_argv(recipe: Recipe, values: Mapping[str, object], node: str) -> list[str]:
    """The serve command's words: engine command, model, arguments (+ per-node args)."""
    vals = dict(values)
    vals["model.path"] = recipe.model.path
    vals["model.id"] = recipe.model.id
    if recipe.serve.command:
        base = [substitute(w, vals, recipe, node) for w in recipe.serve.command]
    elif recipe.engine == "vllm":
        base = ["vllm", "serve", recipe.model.path]
    else:
        base = ["python3", "-m", "sglang.launch_server", "--model-path", recipe.model.path]
    base += arg_words(recipe.serve.args, vals, recipe, node)
    base += arg_words(recipe.serve.node_args, vals, recipe, node)
    if recipe.executor == "mp" and vals.get("node.rank", 0) != 0:
        base += arg_words(recipe.serve.worker_args, vals, recipe, node)
    return base


def join_line(recipe: Recipe, rank: int, size: int) -> str:
    """The log line a rank prints once every rank has joined torch.distributed (mp executor).

    vLLM (vllm/distributed/parallel_state.py, initialize_model_parallel, every version with
    the multi-node mp executor): "rank R in world size W is assigned as DP rank …, TP rank …"
    — written after init_process_group returned, i.e. after all W ranks reached the store.
    SGLang (srt/model_executor/model_runner.py, init_torch_distributed): "Init torch
    distributed ends. mem usage=… GB", prefixed with the rank's "[… TP<r>]".
    """
    if recipe.engine == "vllm":
        world = (recipe.tp or 1) * (recipe.pp or 1)
        if world < size:
            # a group smaller than the cluster: every node runs an engine of its own (replicas),
            # each with its own rank 0
            return f"rank 0 in world size {world} is assigned as"
        per_node = max(1, world // max(1, size))  # one GPU per GB10 node: rank == node rank
        return f"rank {rank * per_node} in world size {world} is assigned as"
    return "Init torch distributed ends"


def node_ready_line(recipe: Recipe, size: int) -> str:
    """The line a follower (node rank > 0, mp executor) prints in its own log once its own
    share of the engine is up: the launch waits for it on that node, together with the head's
    ready line (a follower serves no API of its own, except one engine per node).

    vLLM, a group across the nodes (the follower runs `--headless`: vllm/entrypoints/cli/
    serve.py, run_headless, starts a MultiprocExecutor whose workers load the model before
    they report ready): "Loading weights took N seconds" — DefaultModelLoader.load_weights
    (vllm/model_executor/model_loader/default_loader.py; the loader of the safetensors,
    fastsafetensors and instanttensor formats), logged once per node by its first local rank.
    vLLM, one engine per node (replicas): that node's own ready line (its own API server).
    SGLang, node rank >= 1 (srt/entrypoints/engine.py, _launch_subprocesses): once every
    scheduler of the node reported ready, it starts the dummy health server and logs
    "Dummy health check server started in background thread at H:P" (srt/utils/common.py,
    launch_dummy_health_check_server; "Starting dummy health check server at H:P" in earlier
    releases): the words both share.
    """
    if recipe.engine == "vllm":
        if (recipe.tp or 1) * (recipe.pp or 1) < size:
            return recipe.serve.ready_line
        return "Loading weights took"
    return "health check server"


READY_GROUP = "ready"  # every node's own ready wait, waited for together
JOIN_GROUP = "join"  # every node's join wait, waited for together
# Ray keeps every worker's stdout and stderr in its session's log directory on the worker's own
# node ("worker-[worker_id]-[job_id]-[pid].out"; /tmp/ray/session_latest links the newest
# session: Ray's "Configuring Logging" guide): a vLLM worker on a Ray node logs there
RAY_WORKER_LOGS = "/tmp/ray/session_latest/logs/worker-*.out"


MODS_MOUNT = "/workspace/spark-tui-mods"  # the node's copy of the recipe's mods, read-only
MODS_DIR = "/workspace/mods"  # where eugr's launch-cluster.sh puts a mod in the container


def mod_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def mods_node_dir(recipe: Recipe) -> HomePath:
    """Where a node keeps the copies of a recipe's mods (one directory per recipe)."""
    return HomePath(f"$HOME/.cache/spark-tui/mods/{recipe.id}")


def mods_script(recipe: Recipe) -> str:
    """eugr's apply_mod_to_container, in the container before the engine starts: each mod
    copied to /workspace/mods/NAME and its run.sh run there with WORKSPACE_DIR set to the
    container's working directory, in order; a failing mod stops the launch."""
    parts = []
    for mod in recipe.mods:
        name = shell.quote(mod_name(mod))
        dest = f"{MODS_DIR}/{mod_name(mod)}"
        parts.append(
            f"mkdir -p {shell.quote(dest)} && cp -r {shell.quote(MODS_MOUNT)}/{name}/. "
            f'{shell.quote(dest)}/ && (export WORKSPACE_DIR="$PWD" && cd {shell.quote(dest)} '
            "&& chmod +x run.sh && ./run.sh) || exit 1; "
        )
    return "".join(parts)


def serve_script(recipe: Recipe, values: Mapping[str, object], node: str) -> str:
    """`export K=V …; exec <serve command> > LOG 2>&1`: the text run by `sh -c` in the
    container (mp: after the recipe's mods, which the container applies first). `exec`: the
    engine replaces the shell, so `docker stop` signals the engine itself (SIGTERM, a graceful
    shutdown) instead of a shell that ignores it until docker kills both 30 s later."""
    env = env_words(recipe.serve.env, values, recipe, node)
    prefix = f"export {shell.env_prefix(env).strip()}; " if env else ""
    mods = mods_script(recipe) if recipe.executor == "mp" else ""
    serve = shell.join(serve_argv(recipe, values, node))
    return f"{mods}{prefix}exec {serve} > {shell.quote(recipe.serve.log)} 2>&1"


def stop_leftovers_command(recipe: Recipe, stamp: str) -> str:
    """Stop this recipe's containers and rename them aside (their logs stay readable)."""
    names = list(dict.fromkeys([recipe.head_container, recipe.worker_container]))
    parts = [f"docker stop -t 30 {shell.join(names)} >/dev/null 2>&1"]
    for n in names:
        parts.append(
            f"docker rename {shell.quote(n)} {shell.quote(f'{n}.spark-tui-{stamp}')} >/dev/null 2>&1"
        )
    return "; ".join(parts) + "; true"


def log_tail_command(recipe: Recipe, follow: bool) -> str:
    """Read the serve log inside the head container (-F: follow, for the monitor)."""
    cmd = ["docker", "exec", recipe.head_container, "tail", "-n", str(LOG_TAIL_LINES)]
    if follow:
        cmd.append("-F")
    return shell.join([*cmd, recipe.serve.log])


def smoke_command(recipe: Recipe) -> str:
    """One chat completion on the head; curl prints the body, then time_total on its own line."""
    body = json.dumps(
        {
            "model": recipe.served_name,
            "messages": [{"role": "user", "content": recipe.smoke.prompt}],
            "max_tokens": recipe.smoke.max_tokens,
        },
        separators=(",", ":"),
    )
    url = f"http://127.0.0.1:{recipe.serve.port}{recipe.smoke.path}"
    return shell.join(
        [
            "curl",
            "-sS",
            "-m",
            f"{recipe.smoke.timeout_s:g}",
            "-w",
            "\\n%{time_total}\\n",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            url,
        ]
    )


def _nodes_for(recipe: Recipe, cluster: ClusterConfig) -> tuple[list[NodeConfig], list[str]]:
    warnings: list[str] = []
    if len(cluster.nodes) < recipe.nodes:
        raise InputError(
            f"recipe {recipe.id!r} needs {recipe.nodes} nodes; the cluster "
            f"({cluster.source}) has {len(cluster.nodes)}"
        )
    nodes = [cluster.head, *cluster.workers][: recipe.nodes]
    if len(cluster.nodes) > recipe.nodes:
        unused = [n.name for n in cluster.nodes if n not in nodes]
        warnings.append(f"the recipe uses {recipe.nodes} nodes; left out: {', '.join(unused)}")
    return nodes, warnings


def render_plan(
    recipe: Recipe,
    cluster: ClusterConfig,
    profile: str | None = None,
    sets: list[str] | tuple[str, ...] = (),
    stamp: str | None = None,
) -> LaunchPlan:
    """The launch plan of a recipe on a cluster: stop leftovers, drop caches, Ray head
    and workers, wait for every GPU, serve in the head container, wait for the
    startup line, smoke request. Raises InputError for what the user must supply."""
    from spark_tui.recipes.overrides import apply_sets

    recipe = apply_sets(recipe.with_profile(profile), sets)
    plain = cluster.weights_at.get(recipe.model.path)
    if plain:  # the nodes hold the weights in a plain directory, not the hub layout
        recipe = recipe.loading_from(plain)
    if recipe.image is None:
        raise InputError(
            f"recipe {recipe.id!r} names no container image"
            + (f" ({recipe.image_note})" if recipe.image_note else "")
            + f"; name one: `image: NAME` in a copy of it in {paths.user_recipes_dir()}/, "
            f"or for one rendering 'spark-tui recipes render {recipe.id} --set image=NAME'"
        )
    stamp = stamp or stamp_now()
    nodes, warnings = _nodes_for(recipe, cluster)
    head = nodes[0]
    size = len(nodes)
    if plain:
        warnings.append(
            f"the weights are in a plain directory ({plain} in the container), not the hub "
            f"cache layout: the serve command loads that directory, served as {recipe.served_name}"
        )
    if recipe.status == "broken":
        warnings.insert(
            0,
            f"this recipe is broken ({', '.join(recipe.blocked_by)})"
            + (f": use {recipe.instead}" if recipe.instead else ""),
        )
    elif recipe.status == "untested":
        warnings.insert(0, "this recipe is untested: no source reports it working")
    steps: list[LaunchStep] = []
    vals = {n.name: template_values(cluster, n, rank, size) for rank, n in enumerate(nodes)}
    container = {
        n.name: recipe.head_container if n is head else recipe.worker_container for n in nodes
    }
    for n in nodes:
        steps.append(
            LaunchStep(
                "stop-leftovers",
                "preflight",
                n.name,
                "stop leftover containers (renamed aside, logs kept)",
                "run",
                stop_leftovers_command(recipe, stamp),
                timeout_s=90,
                may_fail=True,
            )
        )
    if recipe.drop_caches:
        for n in nodes:
            steps.append(
                LaunchStep(
                    "drop-caches",
                    "preflight",
                    n.name,
                    "drop the page cache (root, sudo -n)",
                    "run",
                    shell.drop_caches(),
                    timeout_s=120,
                )
            )
    for mod in recipe.mods:
        from pathlib import Path

        if not Path(mod).is_dir() or not (Path(mod) / "run.sh").is_file():
            raise InputError(
                f"recipe {recipe.id!r} applies the mod {mod}, which is not a directory with "
                "a run.sh on this machine (keep the eugr/spark-vllm-docker tree it came from)",
                recipe.source or None,
            )
    for n in nodes if recipe.mods else ():
        for mod in recipe.mods:
            dest = f"{mods_node_dir(recipe)}/{mod_name(mod)}"
            steps.append(
                LaunchStep(
                    "copy-mod",
                    "preflight",
                    n.name,
                    f"copy the mod {mod_name(mod)} to the node ({dest})",
                    "copy",
                    f"rm -rf {word(HomePath(dest))} && mkdir -p {word(HomePath(dest))} && "
                    f"tar -xzf - -C {word(HomePath(dest))}",
                    timeout_s=300,
                    source=mod,
                )
            )
    image = recipe.image
    logs: dict[str, tuple[str, ...]] = {}
    if recipe.executor == "ray":
        for n in nodes:
            is_head = n is head
            v = vals[n.name]
            env = env_words(recipe.docker_env, v, recipe, n.name)
            env.update(env_words(recipe.ray.env, v, recipe, n.name))
            env.update(
                env_words(
                    recipe.ray.head_env if is_head else recipe.ray.worker_env, v, recipe, n.name
                )
            )
            custom = recipe.ray.head_command if is_head else recipe.ray.worker_command
            if custom:
                inner = [substitute(w, v, recipe, n.name) for w in custom]
            else:
                role = (
                    ["--head", f"--port={recipe.ray.port}"]
                    if is_head
                    else [f"--address={v['head.fabric_ip']}:{recipe.ray.port}"]
                )
                extra = [
                    f"{k}={substitute(render_value(val), v, recipe, n.name)}"
                    if val is not True
                    else k
                    for k, val in recipe.ray.args.items()
                ]
                inner = ["ray", "start", *role, *extra, "--block"]
            if recipe.mods:  # eugr applies the mods on every node before Ray starts
                inner = ["sh", "-c", mods_script(recipe) + "exec " + shell.join(inner)]
            name = container[n.name]
            cmd = "docker run " + words([*docker_run_args(recipe, name, env, v), image, *inner])
            steps.append(
                LaunchStep(
                    "ray-head" if is_head else "ray-worker",
                    "ray",
                    n.name,
                    f"start the Ray {'head' if is_head else 'worker'} in container {name}",
                    "run",
                    cmd,
                    timeout_s=300,
                    log_sources=(shell.join(["docker", "logs", "-f", "--tail", "200", name]),),
                )
            )
            logs[n.name] = (shell.join(["docker", "logs", "-f", "--tail", "200", name]),)
        steps.append(
            LaunchStep(
                "wait-ray",
                "ray",
                head.name,
                f"wait until `ray status` shows {size} GPU{'s' if size != 1 else ''}",
                "wait-ray",
                shell.join(["docker", "exec", recipe.head_container, "ray", "status"]),
                timeout_s=600,
                interval_s=5,
                gpus=size,
            )
        )
        script = serve_script(recipe, vals[head.name], head.name)
        steps.append(
            LaunchStep(
                "serve",
                "launch",
                head.name,
                f"start {recipe.engine} serve inside {recipe.head_container} (log {recipe.serve.log})",
                "run",
                shell.join(["docker", "exec", "-d", recipe.head_container, "sh", "-c", script]),
                timeout_s=60,
                log_sources=(log_tail_command(recipe, follow=True),),
            )
        )
        # every Ray node's own worker: its weights loaded, in Ray's worker logs on that node
        for n in nodes[1:] if recipe.engine == "vllm" else ():
            name = container[n.name]
            steps.append(
                LaunchStep(
                    "wait-node-ready",
                    "launch",
                    n.name,
                    f"wait for {n.name}'s own Ray worker to load its weights "
                    f"('Loading weights took' in Ray's worker logs in {name})",
                    "wait-line",
                    shell.join(
                        ["docker", "exec", name, "sh", "-c", f"tail -q -n 200 {RAY_WORKER_LOGS}"]
                    ),
                    timeout_s=recipe.serve.startup_timeout_s,
                    interval_s=10,
                    expect="Loading weights took",
                    group=READY_GROUP,
                )
            )
    else:  # mp: the engine's own multi-node launch, one container per node
        for n in nodes:
            v = vals[n.name]
            env = env_words(recipe.docker_env, v, recipe, n.name)
            name = container[n.name]
            script = serve_script(recipe, v, n.name)
            cmd = "docker run " + words(
                [*docker_run_args(recipe, name, env, v), image, "sh", "-c", script]
            )
            tail = shell.join(["docker", "exec", name, "tail", "-n", "200", "-F", recipe.serve.log])
            steps.append(
                LaunchStep(
                    "serve",
                    "launch",
                    n.name,
                    f"start {recipe.engine} rank {v['node.rank']} in container {name}",
                    "run",
                    cmd,
                    timeout_s=300,
                    log_sources=(tail,),
                )
            )
            logs[n.name] = (tail,)
        # an engine on each node (tensor x pipeline parallel size below the node count)
        replicas = recipe.engine == "vllm" and (recipe.tp or 1) * (recipe.pp or 1) < size
        for n in nodes if size > 1 else ():  # one node: no group to join
            rank = int(vals[n.name]["node.rank"])  # type: ignore[call-overload]  # node.rank is an int among the placeholder values
            name = container[n.name]
            line = join_line(recipe, rank, size)
            steps.append(
                LaunchStep(
                    "wait-join",
                    "launch",
                    n.name,
                    (
                        f"wait for {n.name}'s own engine to set up its ranks "
                        if replicas
                        else f"wait for rank {rank} to join the {size}-node group "
                    )
                    + f"({line!r} in {name}'s log)",
                    "wait-line",
                    shell.join(["docker", "exec", name, "tail", "-n", "200", recipe.serve.log]),
                    timeout_s=min(900.0, recipe.serve.startup_timeout_s),
                    interval_s=5,
                    expect=line,
                    log_sources=(
                        shell.join(
                            ["docker", "exec", name, "tail", "-n", "200", "-F", recipe.serve.log]
                        ),
                    ),
                    group=JOIN_GROUP,
                )
            )
        # every follower's own ready evidence, waited for together with the head's ready line
        for n in nodes[1:]:
            name = container[n.name]
            line = node_ready_line(recipe, size)
            steps.append(
                LaunchStep(
                    "wait-node-ready",
                    "launch",
                    n.name,
                    f"wait for {n.name}'s own engine to be up ({line!r} in {name}'s log)",
                    "wait-line",
                    shell.join(["docker", "exec", name, "tail", "-n", "200", recipe.serve.log]),
                    timeout_s=recipe.serve.startup_timeout_s,
                    interval_s=10,
                    expect=line,
                    log_sources=(
                        shell.join(
                            ["docker", "exec", name, "tail", "-n", "200", "-F", recipe.serve.log]
                        ),
                    ),
                    group=READY_GROUP,
                )
            )
    # the head's serve log once: an mp head's own tail is already this command (read twice,
    # each line of it was two diagnoses, `serve` and `serve2`)
    logs[head.name] = tuple(
        dict.fromkeys((*logs.get(head.name, ()), log_tail_command(recipe, follow=True)))
    )
    together = size > 1
    steps.append(
        LaunchStep(
            "wait-ready",
            "launch",
            head.name,
            f"wait for {recipe.serve.ready_line!r} in the serve log",
            "wait-line",
            log_tail_command(recipe, follow=False),
            timeout_s=recipe.serve.startup_timeout_s,
            interval_s=10,
            expect=recipe.serve.ready_line,
            log_sources=(log_tail_command(recipe, follow=True),),
            group=READY_GROUP if together else "",
        )
    )
    steps.append(
        LaunchStep(
            "smoke",
            "smoke",
            head.name,
            f"smoke request to :{recipe.serve.port} ({recipe.smoke.max_tokens} tokens), tok/s",
            "smoke",
            smoke_command(recipe),
            timeout_s=recipe.smoke.timeout_s + 30,
        )
    )
    plan = LaunchPlan(
        recipe=recipe,
        cluster=cluster,
        steps=tuple(steps),
        warnings=tuple(warnings),
        stamp=stamp,
        log_sources=logs,
    )
    missing = plan.unresolved()
    if missing:
        refs = ", ".join("${" + n + "}" for n in missing)
        note = (
            f"{refs} has no value: set {', '.join(missing)} in the environment spark-tui runs "
            "in, or the launch stops before it starts"
        )
        plan = replace(plan, warnings=(*plan.warnings, note))
    return plan
