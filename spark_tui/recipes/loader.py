"""Load and validate launch recipes (recipes/*.yaml; recipes/SCHEMA.md is the reference).

Every error names file and line (spark_tui.yamlfile). A file that does not load is
reported and left out; every other recipe, built-in or user, still loads. User recipes
in ~/.config/spark-tui/recipes/ add recipes or replace built-in ones with the same id;
a file in eugr/spark-vllm-docker's or sparkrun's format loads too
(spark_tui.recipes.community). The newest revision of a patched recipe
(spark_tui.recipes.revisions) replaces the file's version when asked for. Overrides
(`--set`) and a fix's patches go through the same validation (validate_recipe).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui import paths
from spark_tui.errors import InputError, InputErrors
from spark_tui.recipes.model import (
    ENGINES,
    EXECUTORS,
    LEGACY_STATUSES,
    PP_FLAGS,
    STATUSES,
    TP_FLAGS,
    Measured,
    ModelSpec,
    Profile,
    RaySpec,
    Recipe,
    ServeSpec,
    SmokeSpec,
    Source,
    Workaround,
    parallel_size,
)
from spark_tui.yamlfile import is_dir, line_of, load_id_files, load_yaml, parse_yaml

if TYPE_CHECKING:
    from spark_tui.recipes.revisions import RevisionStore

# Whole-string patterns, always used with fullmatch (`$` would accept a trailing newline)
ID = re.compile(r"[a-z0-9](?:[a-z0-9._\-]*[a-z0-9])?")
_WALL_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FLAG = re.compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.\-]*")
CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# a docker image reference: registry/name:tag@digest — never an option (`--rm`), never a blank
IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-/:@+]*")

TOP_FIELDS = {
    "id",
    "title",
    "status",
    "blocked_by",
    "instead",
    "instead_note",
    "workarounds",
    "sources",
    "seeds",  # older name of sources (a list of text)
    "model",
    "engine",
    "executor",
    "image",
    "image_note",
    "nodes",
    "containers",
    "volumes",
    "docker",
    "ray",
    "serve",
    "smoke",
    "drop_caches",
    "measured",
    "profiles",
    "notes",
    "mods",
}
REQUIRED = {"id", "title", "status", "model", "engine", "executor", "nodes", "serve"}


class _Collector:
    """Gathers every error of one file (file:line), so the author sees them all at once."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[InputError] = []

    def err(self, message: str, container: Any = None, key: str | int | None = None) -> None:
        line = line_of(container, key) if key is not None else getattr(container, "line", None)
        self.errors.append(InputError(message, self.file, line))

    def mapping(
        self, data: Any, where: str, allowed: set[str], required: AbstractSet[str] = frozenset()
    ) -> dict:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.err(f"{where} must be a mapping", data)
            return {}
        for key in data:
            if key not in allowed:
                self.err(
                    f"unknown field {key!r} in {where} (allowed: {', '.join(sorted(allowed))})",
                    data,
                    key,
                )
        for key in sorted(required - set(data)):
            self.err(f"{where} needs {key!r}", data)
        return data

    def text(self, data: dict, key: str, where: str, default: str = "") -> str:
        value = data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            self.err(f"{where}.{key} must be text", data, key)
            return default
        return str(value)

    def number(self, data: dict, key: str, where: str, integer: bool = False) -> Any:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.err(f"{where}.{key} must be a number", data, key)
            return None
        if integer and not float(value).is_integer():
            self.err(f"{where}.{key} must be a whole number", data, key)
            return None
        return int(value) if integer else float(value)

    def text_list(self, data: dict, key: str, where: str) -> tuple[str, ...]:
        value = data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            self.err(f"{where}.{key} must be a list of text", data, key)
            return ()
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, (str, int, float)) or isinstance(item, bool):
                self.err(f"{where}.{key}[{i}] must be text", value, i)
                continue
            out.append(str(item))
        return tuple(out)

    def args(self, data: dict, key: str, where: str) -> dict[str, Any]:
        """An ordered mapping flag -> value | true (a mapping value is rendered as JSON)."""
        raw = data.get(key)
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.err(f"{where}.{key} must be a mapping of flag -> value (or true)", data, key)
            return {}
        out: dict[str, Any] = {}
        for flag, value in raw.items():
            if not isinstance(flag, str) or not FLAG.fullmatch(flag):
                self.err(f"{where}.{key}: {flag!r} is not a command-line flag", raw, flag)
                continue
            if value is False or value is None:
                self.err(
                    f"{where}.{key}.{flag}: leave the flag out instead of {value!r} "
                    "(true means a bare flag)",
                    raw,
                    flag,
                )
                continue
            if isinstance(value, list) and (
                not value or any(isinstance(v, (list, dict, bool)) or v is None for v in value)
            ):
                self.err(
                    f"{where}.{key}.{flag}: a list value holds words (one per value)", raw, flag
                )
                continue
            out[flag] = _plain(value)
        return out

    def env(self, data: dict, key: str, where: str) -> dict[str, str]:
        raw = data.get(key)
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.err(f"{where}.{key} must be a mapping of VARIABLE -> value", data, key)
            return {}
        out: dict[str, str] = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
                self.err(f"{where}.{key}: {name!r} is not an environment variable name", raw, name)
                continue
            if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
                self.err(
                    f'{where}.{key}.{name} must be text or a number (quote it: "1")', raw, name
                )
                continue
            out[name] = str(value)
        return out

    def measured(self, data: dict, key: str, where: str) -> Measured | None:
        raw = data.get(key)
        if raw is None:
            return None
        m = self.mapping(raw, f"{where}.{key}", {"tok_s", "startup_s", "notes", "source"})
        return Measured(
            tok_s=self.number(m, "tok_s", f"{where}.{key}"),
            startup_s=self.number(m, "startup_s", f"{where}.{key}"),
            notes=self.text_list(m, "notes", f"{where}.{key}"),
            source=self.text(m, "source", f"{where}.{key}"),
        )

    def sources(self, data: dict) -> tuple[Source, ...]:
        """`sources:` — {title, url} mappings (or plain text); `seeds:` is the older name."""
        out: list[Source] = []
        for key in ("sources", "seeds"):
            raw = data.get(key)
            if raw is None:
                continue
            if not isinstance(raw, list):
                self.err(f"{key} must be a list of {{title, url}}", data, key)
                continue
            for i, item in enumerate(raw):
                if isinstance(item, str):
                    out.append(Source(item))
                    continue
                m = self.mapping(item, f"{key}[{i}]", {"title", "url"}, {"title"})
                if m:
                    out.append(Source(self.text(m, "title", key), self.text(m, "url", key)))
        return tuple(out)


def _plain(value: Any) -> Any:
    """LDict/LList back to plain dict/list (for JSON values)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def parse_any(data: Any, file: str) -> Recipe:
    """One recipe file in spark-tui's format, or in eugr/spark-vllm-docker's or sparkrun's
    (spark_tui.recipes.community): the id of a community recipe is its file name."""
    from spark_tui.recipes import community

    if community.is_community(data):
        return community.parse_community(data, file)
    return parse_recipe(data, file)


def parse_recipe(data: Any, file: str) -> Recipe:
    """Validate one recipe document; raises InputErrors with every problem found."""
    c = _Collector(file)
    top = c.mapping(data, "the recipe", TOP_FIELDS, REQUIRED)
    if not top:
        raise InputErrors(c.errors or [InputError("empty recipe", file, 1)])
    rid = c.text(top, "id", "recipe")
    if rid and not ID.fullmatch(rid):
        c.err(f"id {rid!r} must be lower-case letters, digits, '.', '_' and '-'", top, "id")
    status = c.text(top, "status", "recipe", "works")
    status = LEGACY_STATUSES.get(status, status)
    if status not in STATUSES:
        c.err(f"status must be one of {', '.join(STATUSES)}", top, "status")
    blocked = c.text_list(top, "blocked_by", "recipe")
    for i, wall in enumerate(blocked):
        if not _WALL_ID.fullmatch(wall):
            c.err(f"blocked_by[{i}]: {wall!r} is not a wall id", top.get("blocked_by"), i)
    if status == "broken" and not blocked:
        c.err("a broken recipe names the walls that stop it in blocked_by", top, "status")
    if status == "broken" and not (top.get("instead") or top.get("instead_note")):
        c.err("a broken recipe names the recipe to use instead (or why none)", top, "status")
    if status != "broken" and blocked:
        c.err("only a broken recipe has blocked_by (set status: broken)", top, "blocked_by")
    sources = c.sources(top)
    engine = c.text(top, "engine", "recipe")
    if engine and engine not in ENGINES:
        c.err(f"engine must be one of {', '.join(ENGINES)}", top, "engine")
    executor = c.text(top, "executor", "recipe")
    if executor and executor not in EXECUTORS:
        c.err(f"executor must be one of {', '.join(EXECUTORS)}", top, "executor")
    nodes = c.number(top, "nodes", "recipe", integer=True) or 0
    if "nodes" in top and nodes < 1:
        c.err("nodes must be at least 1", top, "nodes")

    workarounds = []
    raw_w = top.get("workarounds") or []
    if not isinstance(raw_w, list):
        c.err("workarounds must be a list", top, "workarounds")
        raw_w = []
    for item in raw_w:
        w = c.mapping(item, "a workaround", {"title", "detail"}, {"title"})
        if w:
            workarounds.append(
                Workaround(c.text(w, "title", "workaround"), c.text(w, "detail", "workaround"))
            )

    m = c.mapping(
        top.get("model"),
        "model",
        {"id", "path", "revision", "checkpoint_bytes", "checkpoint_source", "config"},
        {"id"},
    )
    cfg = c.mapping(
        m.get("config"),
        "model.config",
        {"layers", "attention_heads", "kv_heads", "head_dim", "max_position_embeddings", "source"},
    )
    model_id = c.text(m, "id", "model")
    model = ModelSpec(
        id=model_id,
        path=c.text(m, "path", "model", model_id),
        revision=c.text(m, "revision", "model"),
        checkpoint_bytes=c.number(m, "checkpoint_bytes", "model", integer=True),
        checkpoint_source=c.text(m, "checkpoint_source", "model"),
        layers=c.number(cfg, "layers", "model.config", integer=True),
        attention_heads=c.number(cfg, "attention_heads", "model.config", integer=True),
        kv_heads=c.number(cfg, "kv_heads", "model.config", integer=True),
        head_dim=c.number(cfg, "head_dim", "model.config", integer=True),
        max_position_embeddings=c.number(
            cfg, "max_position_embeddings", "model.config", integer=True
        ),
        config_source=c.text(cfg, "source", "model.config"),
    )
    if cfg and any(k in cfg for k in ("layers", "kv_heads", "head_dim")) and "source" not in cfg:
        c.err("model.config figures need a source (where they were read)", cfg)

    names = c.mapping(top.get("containers"), "containers", {"head", "worker"})
    head_c = c.text(names, "head", "containers", "ray-head")
    worker_c = c.text(names, "worker", "containers", "ray-worker")
    for key, value in (("head", head_c), ("worker", worker_c)):
        if not CONTAINER.fullmatch(value):
            c.err(f"containers.{key}: {value!r} is not a container name", names, key)

    docker = c.mapping(top.get("docker"), "docker", {"args", "env"})
    ray_raw = c.mapping(
        top.get("ray"),
        "ray",
        {"port", "args", "env", "head_env", "worker_env", "head_command", "worker_command"},
    )
    ray = RaySpec(
        port=c.number(ray_raw, "port", "ray", integer=True) or 6379,
        args=c.args(ray_raw, "args", "ray"),
        env=c.env(ray_raw, "env", "ray"),
        head_env=c.env(ray_raw, "head_env", "ray"),
        worker_env=c.env(ray_raw, "worker_env", "ray"),
        head_command=c.text_list(ray_raw, "head_command", "ray"),
        worker_command=c.text_list(ray_raw, "worker_command", "ray"),
    )
    s = c.mapping(
        top.get("serve"),
        "serve",
        {
            "command",
            "args",
            "env",
            "node_args",
            "worker_args",
            "log",
            "ready_line",
            "port",
            "startup_timeout_s",
        },
        {"args", "log", "ready_line"},
    )
    serve_args = c.args(s, "args", "serve")
    port = c.number(s, "port", "serve", integer=True)
    if port is None:
        try:
            port = int(serve_args.get("--port", 8000))
        except (TypeError, ValueError):
            c.err("serve.port is needed when --port is not a number", s)
            port = 8000
    log = c.text(s, "log", "serve", "/tmp/serve.log")
    if log and not log.startswith("/"):
        c.err("serve.log must be an absolute path inside the container", s, "log")
    serve = ServeSpec(
        args=serve_args,
        env=c.env(s, "env", "serve"),
        command=c.text_list(s, "command", "serve"),
        node_args=c.args(s, "node_args", "serve"),
        worker_args=c.args(s, "worker_args", "serve"),
        log=log,
        ready_line=c.text(s, "ready_line", "serve"),
        port=port,
        startup_timeout_s=c.number(s, "startup_timeout_s", "serve") or 3600.0,
    )
    world = (parallel_size(serve.args, TP_FLAGS) or 1) * (parallel_size(serve.args, PP_FLAGS) or 1)
    if executor == "mp" and not serve.node_args and nodes > 1 and world >= nodes:
        # (a tensor × pipeline parallel size below the node count: one engine per node)
        c.err("a multi-node mp recipe needs serve.node_args (--nnodes, --node-rank, …)", s)

    sm = c.mapping(top.get("smoke"), "smoke", {"prompt", "max_tokens", "path", "timeout_s"})
    smoke = SmokeSpec(
        prompt=c.text(sm, "prompt", "smoke", SmokeSpec.prompt),
        max_tokens=c.number(sm, "max_tokens", "smoke", integer=True) or SmokeSpec.max_tokens,
        path=c.text(sm, "path", "smoke", SmokeSpec.path),
        timeout_s=c.number(sm, "timeout_s", "smoke") or SmokeSpec.timeout_s,
    )

    profiles: dict[str, Profile] = {}
    raw_p = top.get("profiles") or {}
    if not isinstance(raw_p, dict):
        c.err("profiles must be a mapping of name -> overrides", top, "profiles")
        raw_p = {}
    for name, body in raw_p.items():
        where = f"profiles.{name}"
        p = c.mapping(
            body,
            where,
            {
                "description",
                "set_args",
                "unset_args",
                "set_env",
                "unset_env",
                "measured",
                "stability",
                "executor",
                "node_args",
                "worker_args",
                "nodes",
            },
        )
        p_count = c.number(p, "nodes", where, integer=True)
        if p_count is not None and p_count < 1:
            c.err(f"{where}.nodes must be 1 or more", p, "nodes")
            p_count = None
        p_exec = c.text(p, "executor", where) or None
        if p_exec is not None and p_exec not in EXECUTORS:
            c.err(f"{where}.executor must be one of {', '.join(EXECUTORS)}", p, "executor")
            p_exec = None
        p_nodes = c.args(p, "node_args", where) if "node_args" in p else None
        p_workers = c.args(p, "worker_args", where) if "worker_args" in p else None
        if p_exec == "mp" and nodes > 1 and not (p_nodes or serve.node_args):
            c.err(f"{where}: an mp profile of a multi-node recipe needs node_args", p, "executor")
        profiles[name] = Profile(
            name=name,
            description=c.text(p, "description", where),
            set_args=c.args(p, "set_args", where),
            unset_args=c.text_list(p, "unset_args", where),
            set_env=c.env(p, "set_env", where),
            unset_env=c.text_list(p, "unset_env", where),
            measured=c.measured(p, "measured", where),
            stability=c.text(p, "stability", where),
            executor=p_exec,
            node_args=p_nodes,
            worker_args=p_workers,
            nodes=p_count,
        )
        for flag in profiles[name].unset_args:
            if flag not in serve.args:
                c.err(f"{where}.unset_args: {flag!r} is not a serve argument of the recipe", p)

    drop = top.get("drop_caches", True)
    if not isinstance(drop, bool):
        c.err("drop_caches must be true or false", top, "drop_caches")
        drop = True
    image = top.get("image")
    if image is not None and (not isinstance(image, str) or not IMAGE.fullmatch(image)):
        c.err(f"image {image!r} is not a container image name", top, "image")
        image = None
    # every field read before the check, so each of its errors is raised
    title = c.text(top, "title", "recipe")
    image_note = c.text(top, "image_note", "recipe")
    volumes = c.text_list(top, "volumes", "recipe")
    docker_args = c.args(docker, "args", "docker")
    docker_env = c.env(docker, "env", "docker")
    measured = c.measured(top, "measured", "recipe") or Measured()
    instead = c.text(top, "instead", "recipe") or None
    if instead and not ID.fullmatch(instead):
        c.err(f"instead: {instead!r} is not a recipe id", top, "instead")
    instead_note = c.text(top, "instead_note", "recipe")
    notes = c.text_list(top, "notes", "recipe")
    mods = c.text_list(top, "mods", "recipe")
    for i, mod in enumerate(mods):
        if not mod.startswith("/"):
            c.err(
                f"mods[{i}]: {mod!r} must be an absolute path (an eugr mod directory)", top, "mods"
            )
    if c.errors:
        raise InputErrors(c.errors)
    return Recipe(
        id=rid,
        title=title,
        engine=engine,
        executor=executor,
        model=model,
        nodes=nodes,
        serve=serve,
        image=image,
        image_note=image_note,
        head_container=head_c,
        worker_container=worker_c,
        volumes=volumes,
        docker_args=docker_args,
        docker_env=docker_env,
        ray=ray,
        smoke=smoke,
        drop_caches=drop,
        measured=measured,
        profiles=profiles,
        status=status,
        blocked_by=blocked,
        instead=instead,
        instead_note=instead_note,
        workarounds=tuple(workarounds),
        notes=notes,
        sources=sources,
        source=file,
        mods=mods,
    )


def parse_recipe_text(text: str, file: str) -> Recipe:
    """Parse one recipe from YAML text (revisions are stored as text)."""
    return parse_recipe(parse_yaml(text, file), file)


def load_dir(directory: Path) -> dict[str, Recipe]:
    """Every recipe file in one directory; all errors at once, or nothing (kb-style lint)."""
    recipes, errors = load_dir_partial(directory)
    if errors:
        raise InputErrors(errors)
    return recipes


def load_dir_partial(directory: Path) -> tuple[dict[str, Recipe], list[InputError]]:
    """Every recipe file in one directory that loads, and the errors of those that do not."""
    return load_id_files(directory, parse_any, "recipe", load=load_recipe_yaml)


def load_recipe_yaml(path: Path) -> Any:
    """A recipe file's YAML. A key given twice is an error, except in an eugr recipe: eugr's
    run-recipe.py reads it with yaml.safe_load, which keeps the last value, so spark-tui does
    too (and says so: parse_eugr lists each repeat)."""
    from spark_tui.recipes import community
    from spark_tui.yamlfile import read_text

    try:
        return load_yaml(path)
    except InputError as exc:
        if not exc.reason.startswith("invalid YAML: ") or "duplicate key" not in exc.reason:
            raise
        data = parse_yaml(read_text(path), str(path), last_key_wins=True)
        if community.is_community(data) and community.flavour(data) == community.EUGR:
            return data
        raise


def load_file(path: Path) -> Recipe:
    """One recipe file (either format), named after its file (an eugr one lower-cased)."""
    recipe = parse_any(load_recipe_yaml(path), str(path))
    if recipe.id != path.stem and recipe.origin != "eugr":
        raise InputError(
            f"the recipe {recipe.id!r} must be in {recipe.id}{path.suffix}", str(path), 1
        )
    return recipe


def validate_recipe(recipe: Recipe, what: str) -> Recipe:
    """A changed recipe (`--set`, a fix's patch) through the validation of a file: its first
    problem becomes one InputError naming `what` (exit 2)."""
    from dataclasses import replace

    from spark_tui.recipes.revisions import recipe_to_data

    try:
        # profiles were checked when the file loaded; an override may drop a flag one unsets
        checked = parse_recipe(recipe_to_data(replace(recipe, profiles={})), what)
    except InputErrors as exc:
        raise InputError(f"{what}: {exc.errors[0].reason}") from None
    # what the data round trip does not carry stays as it was
    return replace(
        checked,
        profiles=recipe.profiles,
        source=recipe.source,
        origin=recipe.origin,
        unmapped=recipe.unmapped,
        revision=recipe.revision,
        profile=recipe.profile,
    )


@dataclass(frozen=True)
class RecipeBook:
    """Every recipe by id, sorted, and the files that did not load (`errors`, file:line).
    `get` raises InputError (exit 2) for an unknown id, naming the file when the id's file
    did not load, and cluster.yaml's line when the id came from there."""

    recipes: dict[str, Recipe]
    errors: tuple[InputError, ...] = ()

    def __iter__(self) -> Iterator[Recipe]:
        return iter(self.recipes.values())

    def __len__(self) -> int:
        return len(self.recipes)

    def __contains__(self, recipe_id: object) -> bool:
        return recipe_id in self.recipes

    def get(self, recipe_id: str) -> Recipe:
        try:
            return self.recipes[recipe_id]
        except KeyError:
            pass
        bad = [e for e in self.errors if e.file and Path(e.file).stem == recipe_id]
        if bad:
            raise InputError(
                f"recipe {recipe_id!r} did not load: {bad[0].reason}", bad[0].file, bad[0].line
            )
        # a RecipeRef (cluster.yaml's `recipe:`) knows its file and line
        raise InputError(
            f"unknown recipe id {recipe_id!r} (see 'spark-tui recipes list')",
            getattr(recipe_id, "file", None),
            getattr(recipe_id, "line", None),
        )


def load_recipes(
    builtin: Path | None = None,
    user: Path | None = None,
    use_user: bool = True,
    use_revisions: bool = True,
    revisions: RevisionStore | None = None,
) -> RecipeBook:
    """Built-in recipes, then the user's (add or replace by id), then the revision in use
    of each patched recipe (`revisions`: a session's store; else the real state's). A file
    that does not load is in `errors` and left out; the others load."""
    recipes, errors = load_dir_partial(builtin or paths.builtin_recipes_dir())
    user_dir = user or paths.user_recipes_dir()
    if use_user and is_dir(user_dir):
        mine, user_errors = load_dir_partial(user_dir)
        recipes.update(mine)
        errors += user_errors
    for r in list(recipes.values()):
        if r.instead and r.instead not in recipes:
            errors.append(InputError(f"instead: no recipe {r.instead!r}", r.source, None))
    if use_revisions:
        from spark_tui.recipes.revisions import RevisionStore

        store = revisions or RevisionStore(paths.state_dir() / "recipes")
        for rid in list(recipes):
            try:
                current = store.current(rid)
            except InputError as exc:  # a damaged revision: the file's version stays
                errors.append(exc)
                continue
            if current is not None:
                recipes[rid] = current
    return RecipeBook(dict(sorted(recipes.items())), tuple(errors))
