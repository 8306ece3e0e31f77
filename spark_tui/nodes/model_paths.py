"""Where a recipe's model lives on the nodes: the host paths of the path its serve
command loads inside the container (doctor's model-files check, verify-model-copies and
the simulated nodes read it)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from spark_tui import shell
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import DEFAULT_MODELS_DIR
from spark_tui.nodes.transport import NodeUnreachable

if TYPE_CHECKING:
    from spark_tui.nodes.cluster import NodeConfig
    from spark_tui.nodes.transport import Transport

HF_CACHE = "/root/.cache/huggingface"  # the containers' Hugging Face cache (HF_HOME)


def recipe_model_paths(
    model_path: str, volumes: Iterable[str], models_dir: str = DEFAULT_MODELS_DIR
) -> list[str]:
    """Where a recipe's model lives on the nodes (host side), from the path the serve
    command loads inside the container and the recipe's `HOST:CONTAINER` volumes
    (`{cluster.models_dir}` is cluster.yaml's models_dir).

    A Hugging Face id is looked up in the container's HF cache: the hub layout
    `huggingface-cli download` writes (hub/models--ORG--NAME/snapshots/REV/), where the
    engine loads it from, then a plain directory ORG/NAME there (`--local-dir`, a copy).
    Both places are returned, the hub first. `$HOME/` becomes `~/`.
    """
    return [host for _inside, host in model_places(model_path, volumes, models_dir)]


def model_places(
    model_path: str, volumes: Iterable[str], models_dir: str = DEFAULT_MODELS_DIR
) -> list[tuple[str, str]]:
    """(path in the container, path on the node) of each place recipe_model_paths names."""
    volumes = list(volumes)
    if not model_path.startswith("/"):
        if model_path.count("/") != 1:
            return []
        hub = f"{HF_CACHE}/hub/models--" + model_path.replace("/", "--")
        plain = f"{HF_CACHE}/{model_path}"
        return [(inside, _host_path(inside, volumes, models_dir)) for inside in (hub, plain)]
    return [(model_path, _host_path(model_path, volumes, models_dir))]


def _host_path(inside: str, volumes: list[str], models_dir: str) -> str:
    volumes = [v.replace("{cluster.models_dir}", models_dir) for v in volumes]
    best: tuple[int, str] | None = None
    for volume in volumes:
        parts = volume.split(":")
        if len(parts) < 2:
            continue
        host, container = parts[0], parts[1].rstrip("/")
        if (inside == container or inside.startswith(container + "/")) and (
            best is None or len(container) > best[0]
        ):
            best = (len(container), host + inside[len(container) :])
    if best is None:
        return inside
    host_path = best[1]
    for home in ("$HOME/", "${HOME}/"):
        if host_path.startswith(home):
            host_path = "~/" + host_path[len(home) :]
    return host_path


def plain_model_dir(
    model_path: str,
    volumes: Iterable[str],
    models_dir: str,
    transport: Transport,
    node: NodeConfig,
) -> str | None:
    """Where in the container a Hugging Face id's weights are when the node has them only as
    a plain directory (`huggingface-cli download --local-dir`, a copy: ORG/NAME under the
    cache), not in the hub layout the engine looks the id up in; else None (the hub copy is
    there, or neither: the engine then finds, or downloads, the id itself)."""

    places = model_places(model_path, volumes, models_dir)
    if model_path.startswith("/") or len(places) != 2:
        return None
    (_hub, hub_host), (plain, plain_host) = places
    if model_size(transport, node, [hub_host])[0] is not None:
        return None
    return plain if model_size(transport, node, [plain_host])[0] is not None else None


def model_size(
    transport: Transport, node: NodeConfig, paths: Iterable[str]
) -> tuple[int | None, str]:
    """The bytes under the first of `paths` (a model's places, recipe_model_paths) that is
    on the node, and that path; (None, "") when none is."""
    for path in paths:
        # ssh sessions start in $HOME, so '~/x' is 'x' there; locally expand it here
        p = (
            os.path.expanduser(path)
            if node.is_local
            else (path[2:] if path.startswith("~/") else path)
        )
        try:
            r = transport.run(shell.fill(commands.MODEL_SIZE, {"path": p}), timeout=120)
        except NodeUnreachable:
            r = None
        first = r.stdout.split()[0] if r is not None and r.ok and r.stdout.split() else ""
        if first.isdigit():
            return int(first), path
    return None, ""
