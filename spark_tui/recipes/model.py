"""A launch recipe: what to run on which node to serve one model (recipes/SCHEMA.md).

Plain frozen data. `spark_tui.recipes.loader` builds it from YAML after
validating every field; `spark_tui.recipes.render` turns it into a LaunchPlan;
`spark_tui.recipes.revisions` stores patched copies. `Recipe.facts()` gives the
`recipe.*` facts of spark_tui/facts.py that the knowledge base's check walls test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

ENGINES: tuple[str, ...] = ("vllm", "sglang")
EXECUTORS: tuple[str, ...] = ("ray", "mp")
# works: a public source reports it serving; broken: a wall stops it (blocked_by, instead);
# untested: written or imported, never reported working (recipes/SCHEMA.md)
STATUSES: tuple[str, ...] = ("works", "broken", "untested")
LEGACY_STATUSES: dict[str, str] = {"known-broken": "broken"}  # older spelling, still read

# An argument value: a string/number, True for a bare flag, a mapping rendered as JSON,
# or a list of words (a flag taking several values: SGLang's --cuda-graph-bs 1 2 4).
ArgValue = Any


def render_value(value: ArgValue) -> str:
    """One argument value as the text the command line gets (dicts as compact JSON; a list,
    a flag taking several words, as those words joined by spaces)."""
    if isinstance(value, list):
        return " ".join(render_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e6:
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class Source:
    """A public write-up or file a recipe was written from: title and address."""

    title: str
    url: str = ""

    def __str__(self) -> str:
        return f"{self.title} — {self.url}" if self.url else self.title


@dataclass(frozen=True)
class Unmapped:
    """What reading a community recipe (eugr/spark-vllm-docker, sparkrun) has to say about a
    field: `not mapped` (no spark-tui equivalent), `warning` (it would not run as its author
    meant: a brace str.format leaves, a flag only a mod adds), `read as its launcher does`
    (what a plain reading would get wrong: format, solo TP, executor). Never fatal."""

    line: int | None
    field: str
    reason: str
    kind: str = "not mapped"

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.field}: {self.reason}"


@dataclass(frozen=True)
class Measured:
    """The seed's figures: tokens per second, startup time, free-text notes."""

    tok_s: float | None = None
    startup_s: float | None = None
    notes: tuple[str, ...] = ()
    source: str = ""  # where the figure was published (title and address)


@dataclass(frozen=True)
class ModelSpec:
    """The checkpoint, and the config.json figures a memory-fit estimate needs."""

    id: str
    path: str  # what the serve command loads (inside the container); default: id
    revision: str = ""  # the checkpoint's commit pinned (sparkrun's model_revision); "" unpinned
    checkpoint_bytes: int | None = None
    checkpoint_source: str = ""
    layers: int | None = None
    attention_heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    # config.json max_position_embeddings: vLLM's --max-model-len / SGLang's --context-length
    # default when the serve command gives none (the fit estimate's context)
    max_position_embeddings: int | None = None
    config_source: str = ""


@dataclass(frozen=True)
class RaySpec:
    """`ray start` on every node, inside the node's container (executor: ray)."""

    port: int = 6379
    args: dict[str, ArgValue] = field(default_factory=dict)  # every ray start
    env: dict[str, str] = field(default_factory=dict)  # the daemons' env, every node
    head_env: dict[str, str] = field(default_factory=dict)
    worker_env: dict[str, str] = field(default_factory=dict)
    # The image's own entrypoint words instead of `ray start …` (avarok/dgx-vllm's `ray-head`)
    head_command: tuple[str, ...] = ()
    worker_command: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServeSpec:
    """The serve command, run in the head container (ray) or on every node (mp)."""

    args: dict[str, ArgValue] = field(default_factory=dict)  # ordered: flag -> value | True
    env: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()  # default by engine (vllm serve MODEL / sglang.launch_server)
    node_args: dict[str, ArgValue] = field(default_factory=dict)  # mp: per-node, templated
    # mp: added on every rank but 0 (vLLM's --headless: no API server there)
    worker_args: dict[str, ArgValue] = field(default_factory=dict)
    log: str = "/tmp/serve.log"  # inside the container
    ready_line: str = "Application startup complete"
    port: int = 8000
    startup_timeout_s: float = 3600.0


@dataclass(frozen=True)
class SmokeSpec:
    """One chat request after startup; its completion tokens / time give tok/s."""

    prompt: str = "Write a haiku about two small computers."
    max_tokens: int = 128
    path: str = "/v1/chat/completions"
    timeout_s: float = 600.0


@dataclass(frozen=True)
class Profile:
    """A named variant: overrides of serve args and env, with its own figures."""

    name: str
    description: str = ""
    set_args: dict[str, ArgValue] = field(default_factory=dict)
    unset_args: tuple[str, ...] = ()
    set_env: dict[str, str] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    measured: Measured | None = None
    stability: str = ""
    # executor switch (`no-ray`: ray -> mp); node_args/worker_args replace the recipe's
    executor: str | None = None
    node_args: dict[str, ArgValue] | None = None
    worker_args: dict[str, ArgValue] | None = None
    # another node count (an eugr recipe's `solo` profile: one node, TP 1, as --solo runs it)
    nodes: int | None = None


@dataclass(frozen=True)
class Workaround:
    """A step someone took to get further on a broken recipe."""

    title: str
    detail: str = ""


TP_FLAGS = ("--tensor-parallel-size", "--tp-size", "--tp", "-tp")
PP_FLAGS = ("--pipeline-parallel-size", "--pp-size", "-pp")


def parallel_size(args: Mapping[str, ArgValue], flags: tuple[str, ...]) -> int | None:
    """The value of the first of `flags` the serve arguments give, as a number (None: none)."""
    for flag in flags:
        value = args.get(flag)
        if value is not None and value is not True:  # 1 == True: not `in`
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    return None


@dataclass(frozen=True)
class Recipe:
    """One launch recipe. Immutable: patches make new revisions (recipes.revisions)."""

    id: str
    title: str
    engine: str
    executor: str
    model: ModelSpec
    nodes: int
    serve: ServeSpec
    image: str | None = None
    image_note: str = ""
    head_container: str = "ray-head"
    worker_container: str = "ray-worker"
    volumes: tuple[str, ...] = ()
    docker_args: dict[str, ArgValue] = field(default_factory=dict)
    docker_env: dict[str, str] = field(default_factory=dict)  # container env, every node
    ray: RaySpec = field(default_factory=RaySpec)
    smoke: SmokeSpec = field(default_factory=SmokeSpec)
    drop_caches: bool = True
    measured: Measured = field(default_factory=Measured)
    profiles: dict[str, Profile] = field(default_factory=dict)
    status: str = "works"
    blocked_by: tuple[str, ...] = ()
    instead: str | None = None
    instead_note: str = ""
    workarounds: tuple[Workaround, ...] = ()
    notes: tuple[str, ...] = ()
    sources: tuple[Source, ...] = ()  # the public write-ups it was written from
    source: str = ""  # file it was loaded from
    origin: str = "spark-tui"  # the file's format: spark-tui | eugr | sparkrun
    unmapped: tuple[Unmapped, ...] = ()  # a community recipe's fields with no equivalent
    # eugr's mods: directories on this machine (each with its run.sh), copied to every node
    # and run inside the container before the engine starts, in order, as eugr applies them
    mods: tuple[str, ...] = ()
    revision: int = 0  # 0 = as shipped / as written by the user
    profile: str | None = None  # the profile applied, if any

    def __post_init__(self) -> None:
        # its secrets (HF_TOKEN in its env, --api-key's value) never show in what we write
        from spark_tui import redact

        for env in (self.docker_env, self.serve.env, self.ray.env, self.ray.head_env):
            redact.remember_env(env)
        redact.remember_env(self.ray.worker_env)
        redact.remember_args(self.serve.args)
        for p in self.profiles.values():
            redact.remember_env(p.set_env)
            redact.remember_args(p.set_args)

    # ---- views -------------------------------------------------------------
    @property
    def works(self) -> bool:
        return self.status == "works"

    @property
    def broken(self) -> bool:
        return self.status == "broken"

    def loading_from(self, path: str) -> Recipe:
        """The recipe with its serve command loading the weights from `path` in the container
        (a plain directory where the nodes have them), still served under the name clients
        use (`--served-model-name`, the id when the recipe gave none)."""
        if path == self.model.path:
            return self
        args = dict(self.serve.args)
        args.setdefault("--served-model-name", self.served_name)
        return replace(
            self, model=replace(self.model, path=path), serve=replace(self.serve, args=args)
        )

    @property
    def served_name(self) -> str:
        name = self.serve.args.get("--served-model-name")
        return str(name) if name is not None and name is not True else self.model.path

    @property
    def tp(self) -> int | None:
        return parallel_size(self.serve.args, TP_FLAGS)

    @property
    def pp(self) -> int | None:
        """Pipeline-parallel size (vLLM --pipeline-parallel-size, SGLang --pp-size)."""
        return parallel_size(self.serve.args, PP_FLAGS)

    @property
    def cuda_graphs(self) -> bool:
        """Whether the serve command leaves CUDA graphs on."""
        a = self.serve.args
        if "--enforce-eager" in a or "--disable-cuda-graph" in a:
            return False
        comp = a.get("--compilation-config")
        if isinstance(comp, str):
            try:
                comp = json.loads(comp)
            except ValueError:
                comp = None
        return not (
            isinstance(comp, dict) and str(comp.get("cudagraph_mode", "")).upper() == "NONE"
        )

    def serve_env_effective(self) -> dict[str, str]:
        """The serve process's environment: it inherits the head container's (docker -e)."""
        env = dict(self.docker_env)
        if self.executor == "ray":
            env.update(self.ray.env)
            env.update(self.ray.head_env)
        env.update(self.serve.env)
        return env

    def docker_args_text(self) -> str:
        """The docker run arguments of the head container, as one string (for facts)."""
        from spark_tui.recipes.render import docker_run_args

        return " ".join(str(a) for a in docker_run_args(self, self.head_container, {}, check=False))

    def facts(self) -> dict[str, object]:
        """The `recipe.*` facts of spark_tui/facts.py (absent when unknown)."""
        f: dict[str, object] = {
            "recipe.id": self.id,
            "recipe.engine": self.engine,
            "recipe.executor": self.executor,
            "recipe.nodes": self.nodes,
            "recipe.docker.args": self.docker_args_text(),
            "recipe.cuda_graphs": self.cuda_graphs,
        }
        if self.tp is not None:
            f["recipe.tp"] = self.tp
        for flag, value in self.serve.args.items():
            f[f"recipe.serve_args.{flag}"] = _fact_value(value)
        for var, value in self.serve_env_effective().items():
            f[f"recipe.env.{var}"] = _fact_value(value)
        if self.executor == "ray":
            for flag, value in self.ray.args.items():
                f[f"recipe.ray.args.{flag}"] = _fact_value(value)
            for env in (self.ray.env, self.ray.head_env, self.ray.worker_env, self.docker_env):
                for var, value in env.items():
                    f.setdefault(f"recipe.ray.env.{var}", _fact_value(value))
        hca = self.serve_env_effective().get("NCCL_IB_HCA")
        if hca is not None and not str(hca).lstrip().startswith("^"):  # ^… excludes devices
            # "=rocep1s0f1,roceP2p1s0f1" or "mlx5_0:1,mlx5_1:1": the devices NCCL may use
            names = [d for d in str(hca).strip().lstrip("=").split(",") if d.strip()]
            f["net.nccl_ib_hca_count"] = len(names)
        policy = self.docker_args.get("--restart")
        f["recipe.docker.restart_policy"] = "no" if policy in (None, True) else str(policy)
        if self.measured.tok_s is not None:
            f["serving.expected_tok_s"] = self.measured.tok_s
        return f

    def placeholder_values(self) -> dict[str, object]:
        """Values a fix's command may name: {model.id} (the Hugging Face id), {model.path}."""
        return {"model.id": self.model.id, "model.path": self.model.path or self.model.id}

    # ---- variants ----------------------------------------------------------
    def with_consistent_profiles(self) -> Recipe:
        """After a change removed a serve argument, a profile that unsets it has nothing
        left to unset: drop it there too, so the recipe stays valid as a file."""
        pruned = {
            name: replace(p, unset_args=tuple(f for f in p.unset_args if f in self.serve.args))
            for name, p in self.profiles.items()
        }
        if all(pruned[n].unset_args == p.unset_args for n, p in self.profiles.items()):
            return self
        return replace(self, profiles=pruned)

    def with_profile(self, name: str | None) -> Recipe:
        """This recipe with a profile's overrides applied (None: unchanged)."""
        if not name:
            return self
        if name not in self.profiles:
            from spark_tui.errors import InputError

            known = ", ".join(self.profiles) or "none"
            raise InputError(f"recipe {self.id!r} has no profile {name!r} (profiles: {known})")
        p = self.profiles[name]
        serve = patch_serve(self.serve, p.set_args, p.unset_args, p.set_env, p.unset_env)
        if p.node_args is not None:
            serve = replace(serve, node_args=dict(p.node_args))
        if p.worker_args is not None:
            serve = replace(serve, worker_args=dict(p.worker_args))
        measured = p.measured or self.measured
        out = replace(self, serve=serve, measured=measured, profile=name)
        if p.nodes is not None and p.nodes != self.nodes:
            out = replace(out, nodes=p.nodes)
            if p.nodes == 1:  # one node joins no group
                out = replace(out, serve=replace(out.serve, node_args={}, worker_args={}))
        if p.executor and p.executor != self.executor:
            out = out.with_executor(p.executor)
        return out

    def with_executor(self, executor: str) -> Recipe:
        """This recipe under another executor. Going ray -> mp, the Ray daemons' environment
        (which the serve process inherited inside the head container, and the Ray workers on
        every node) becomes every node's container environment, so NCCL_SOCKET_IFNAME,
        GLOO_SOCKET_IFNAME, VLLM_HOST_IP… still reach every rank. RAY_* variables are Ray's own
        knobs and have no reader without Ray: they are dropped, as is the `ray:` section."""
        if executor == self.executor:
            return self
        if executor == "mp" and self.executor == "ray":
            env = dict(self.docker_env)
            env.update({k: v for k, v in self.ray.env.items() if not k.startswith("RAY_")})
            return replace(self, executor="mp", docker_env=env, ray=RaySpec())
        if executor == "ray" and self.executor == "mp":
            # Ray places the ranks itself: no per-node engine flags
            serve = replace(self.serve, node_args={}, worker_args={})
            return replace(self, executor="ray", serve=serve)
        return replace(self, executor=executor)


def _fact_value(value: ArgValue) -> object:
    if value is True:
        return True
    text = render_value(value)
    # numbers compare as numbers, and an integral one also equals its text ('0' == 0)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*(?:[eE][-+]?\d+)?", text):
        return float(text)
    return text


def patch_mapping(
    base: dict[str, Any], set_: dict[str, Any] | None, unset: tuple[str, ...] | list[str] | None
) -> dict[str, Any]:
    """A copy of `base` with keys set (existing keys keep their place) and removed."""
    out = dict(base)
    for key, value in (set_ or {}).items():
        out[key] = value
    for key in unset or ():
        out.pop(key, None)
    return out


def patch_serve(
    serve: ServeSpec,
    set_args: dict[str, Any] | None = None,
    unset_args: tuple[str, ...] | list[str] | None = None,
    set_env: dict[str, Any] | None = None,
    unset_env: tuple[str, ...] | list[str] | None = None,
) -> ServeSpec:
    """The serve spec with arguments and environment changed."""
    return replace(
        serve,
        args=patch_mapping(serve.args, set_args, unset_args),
        env={k: str(v) for k, v in patch_mapping(serve.env, set_env, unset_env).items()},
    )
