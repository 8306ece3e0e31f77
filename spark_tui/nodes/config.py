"""cluster.yaml: where it is looked up, and its validation (every error names file and line).

Looked up in ./cluster.yaml, then ~/.config/spark-tui/cluster.yaml; `--config FILE`
overrides both. With none, the app runs on the simulated cluster (not here).
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from spark_tui import paths
from spark_tui.errors import InputError, InputErrors
from spark_tui.nodes.cluster import (
    DEFAULT_MODELS_DIR,
    LOG_KINDS,
    ClusterConfig,
    LogSource,
    NodeConfig,
    RecipeRef,
)
from spark_tui.yamlfile import LDict, is_file, line_of, load_yaml

CLUSTER_FIELDS = ("recipe", "models_dir", "secrets", "nodes")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
NODE_FIELDS = (
    "name",
    "host",
    "user",
    "port",
    "fabric_if",
    "fabric_ip",
    "fabric_hca",
    "role",
    "logs",
)
_HCA = re.compile(r"=?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*")
ROLES = ("head", "worker")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_LOG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._:-]{0,127}")  # a unit or container name
# a host name, an address or an ssh_config alias: no blanks, no shell or option syntax.
# Matched with fullmatch: with match, `$` also accepts a trailing newline, which would
# reach NCCL_SOCKET_IFNAME and the shell.
_HOST = re.compile(r"[A-Za-z0-9_\[\]:.%-]+")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?")
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
_RECIPE_ID = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]|[a-z0-9]")
# a directory on every node: absolute or under the user's home, no ':' (docker -v's separator)
_MODELS_DIR = re.compile(r"(?:/|~/|\$HOME/)[^:\x00-\x1f]*")


def find_cluster_config(cwd: Path | None = None) -> Path | None:
    """./cluster.yaml, else ~/.config/spark-tui/cluster.yaml, else None (use the simulator)."""
    for candidate in ((cwd or Path.cwd()) / "cluster.yaml", paths.config_dir() / "cluster.yaml"):
        if is_file(candidate):
            return candidate
    return None


def cluster_config_path(config: str | Path | None) -> Path | None:
    """The one rule every command follows: the file named (--config; it must exist), else
    ./cluster.yaml, else ~/.config/spark-tui/cluster.yaml, else None."""
    if config is not None and str(config):
        if not Path(config).exists():
            raise InputError("no such cluster file", str(config))
        return Path(config)
    return find_cluster_config()


def load_cluster(path: Path | None = None) -> ClusterConfig:
    """Load and validate a cluster.yaml (`path`, else the one find_cluster_config finds).

    Raises InputError (exit 2) naming file and line; every problem of the file at once.
    """
    if path is None:
        path = find_cluster_config()
        if path is None:
            raise InputError(
                f"no cluster.yaml in the current directory or {paths.config_dir()} "
                "(write one with 'spark-tui discover', or give --config FILE; the format is in "
                f"{paths.doc('cluster-yaml.md')})"
            )
    return parse_cluster(load_yaml(Path(path)), str(path))


def parse_cluster(data: Any, file: str) -> ClusterConfig:
    """Validate the YAML data of a cluster.yaml."""
    errors: list[InputError] = []

    def err(message: str, container: Any = None, key: str | int | None = None) -> None:
        line = None
        if container is not None:
            line = line_of(container, key) if key is not None else getattr(container, "line", None)
        errors.append(InputError(message, file, line or 1))

    if not isinstance(data, LDict):
        raise InputError("cluster.yaml must hold a mapping with 'nodes:'", file, 1)
    for key in data:
        if key not in CLUSTER_FIELDS:
            err(f"unknown field {key!r} (allowed: {', '.join(CLUSTER_FIELDS)})", data, key)
    recipe = data.get("recipe")
    if recipe is not None and (not isinstance(recipe, str) or not _RECIPE_ID.fullmatch(recipe)):
        err(
            f"'recipe' is {recipe!r}, not a recipe id (see 'spark-tui recipes list')",
            data,
            "recipe",
        )
        recipe = None
    models_dir = data.get("models_dir", DEFAULT_MODELS_DIR)
    if not isinstance(models_dir, str) or not _MODELS_DIR.fullmatch(models_dir):
        err(
            f"'models_dir' is {models_dir!r}, not a directory (absolute, or under ~/)",
            data,
            "models_dir",
        )
        models_dir = DEFAULT_MODELS_DIR
    # environment variables whose values are secrets whatever their names (a recipe's, ours)
    secrets = data.get("secrets", [])
    if not isinstance(secrets, list) or not all(
        isinstance(s, str) and _ENV_NAME.fullmatch(s) for s in secrets
    ):
        err("'secrets' must list environment variable names (MY_VAR, …)", data, "secrets")
        secrets = []
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        err("'nodes' must list at least one node (name, host, role)", data, "nodes")
        raise InputErrors(errors)
    nodes: list[NodeConfig] = []
    seen: dict[str, int] = {}
    heads: list[tuple[str, int]] = []
    for i, raw in enumerate(raw_nodes):
        where_line = line_of(raw_nodes, i) or 1
        if not isinstance(raw, LDict):
            err(f"node {i + 1} must be a mapping (name, host, role, …)", raw_nodes, i)
            continue
        node = _node(raw, i, len(raw_nodes), err)
        # names and heads are checked on the raw values, so one bad field hides nothing
        name = raw.get("name")
        if isinstance(name, str):
            if name in seen:
                err(f"duplicate node name {name!r} (also on line {seen[name]})", raw, "name")
            seen.setdefault(name, line_of(raw, "name") or where_line)
        if raw.get("role") == "head" or (node is not None and node.role == "head"):
            heads.append((str(name), line_of(raw, "role") or where_line))
        if node is not None:
            nodes.append(node)
    if not heads and not any(isinstance(r, dict) and r.get("role") == "head" for r in raw_nodes):
        err("no head: mark exactly one node with 'role: head'", data, "nodes")
    if len(heads) > 1:
        first = heads[0]
        for name, line in heads[1:]:
            errors.append(
                InputError(
                    f"two heads: {name!r} and {first[0]!r} (line {first[1]}); "
                    "exactly one node is the head",
                    file,
                    line,
                )
            )
    if errors:
        raise InputErrors(errors)
    ref = RecipeRef(recipe.strip(), file, line_of(data, "recipe")) if recipe else None
    from spark_tui import redact

    redact.mark_secret(secrets)
    return ClusterConfig(
        nodes=tuple(nodes), recipe=ref, source=file, models_dir=_trim_dir(models_dir)
    )


def _logs(raw: LDict, where: str, err) -> tuple[LogSource, ...] | None:
    """`logs: [{file: PATH} | {unit: NAME} | {container: NAME} | {command: CMD}]`; None
    (after saying why, with the line) when one is not of these."""
    items = raw.get("logs")
    if items is None:
        return ()
    if not isinstance(items, list):
        err(f"{where}: 'logs' must be a list of {{file|unit|container|command: …}}", raw, "logs")
        return None
    out: list[LogSource] = []
    for i, item in enumerate(items):
        kinds = list(item) if isinstance(item, dict) else []
        value = item.get(kinds[0]) if len(kinds) == 1 else None
        if (
            len(kinds) != 1
            or kinds[0] not in LOG_KINDS
            or not isinstance(value, str)
            or not value.strip()
            or "\n" in value
            or "\0" in value
        ):
            err(
                f"{where}: logs item {i + 1} must be one of "
                "{file: PATH}, {unit: NAME}, {container: NAME}, {command: CMD}",
                items,
                i,
            )
            return None
        kind = kinds[0]
        if kind == "file" and not value.startswith(("/", "~/")):
            err(f"{where}: logs item {i + 1}: a file path is absolute (or under ~/)", items, i)
            return None
        if kind in ("unit", "container") and not _LOG_NAME.fullmatch(value):
            err(f"{where}: logs item {i + 1}: {value!r} is not a {kind} name", items, i)
            return None
        out.append(LogSource(kind, value))
    return tuple(out)


def _trim_dir(path: str) -> str:
    """Without a trailing '/', except a bare root or home."""
    return path if path in ("/", "~/", "$HOME/") else path.rstrip("/")


def _node(raw: LDict, index: int, count: int, err) -> NodeConfig | None:
    where = f"node {index + 1}"
    ok = True
    for key in raw:
        if key not in NODE_FIELDS:
            err(f"unknown field {key!r} in {where} (allowed: {', '.join(NODE_FIELDS)})", raw, key)
            ok = False

    def text(key: str, pattern: re.Pattern[str], what: str, required: bool = False) -> str | None:
        nonlocal ok
        value = raw.get(key)
        if value is None:
            if required:
                err(f"missing field {key!r} in {where}", raw)
                ok = False
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            err(f"{where}: {key!r} must be {what}", raw, key)
            ok = False
            return None
        value = str(value)
        if not pattern.fullmatch(value) or value.startswith("-"):
            err(f"{where}: {key!r} is {value!r}, not {what}", raw, key)
            ok = False
            return None
        return value

    name = text("name", _NAME, "a name of letters, digits, '.', '_' or '-'", required=True)
    host = text("host", _HOST, "a host name, an address, a ~/.ssh/config alias or 'local'", True)
    user = text("user", _USER, "a user name")
    fabric_if = text("fabric_if", _IFNAME, "a network interface name")
    fabric_hca = text("fabric_hca", _HCA, "RDMA device names (rocep1s0f1,roceP2p1s0f1)")
    fabric_ip = raw.get("fabric_ip")
    if fabric_ip is not None:
        try:
            address = ipaddress.ip_address(str(fabric_ip))
            # an IPv6 scope (fe80::1%IF) is free text to ipaddress: it must be an interface
            scope = getattr(address, "scope_id", None)
            if isinstance(fabric_ip, bool) or (scope is not None and not _IFNAME.fullmatch(scope)):
                raise ValueError(fabric_ip)
            fabric_ip = str(address)
        except ValueError:
            err(f"{where}: 'fabric_ip' is {fabric_ip!r}, not an IP address", raw, "fabric_ip")
            ok = False
    port = raw.get("port")
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536
    ):
        err(f"{where}: 'port' is {port!r}, not a TCP port (1-65535)", raw, "port")
        ok = False
    role = raw.get("role")
    if role is None:
        role = "head" if count == 1 else None  # one node alone is the head
        if role is None:
            err(f"missing field 'role' in {where} (head or worker)", raw)
            ok = False
    elif role not in ROLES:
        err(f"{where}: 'role' is {role!r}, expected head or worker", raw, "role")
        ok = False
    logs = _logs(raw, where, err)
    if logs is None:
        ok = False
    if not ok or name is None or host is None:
        return None
    return NodeConfig(
        name=name,
        host=host,
        role=role,  # type: ignore[arg-type]  # head or worker, checked above
        logs=logs or (),
        user=user,
        port=port,
        fabric_if=fabric_if,
        fabric_ip=fabric_ip,
        fabric_hca=fabric_hca,
    )
