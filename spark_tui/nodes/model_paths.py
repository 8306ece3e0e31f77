"""Where a recipe's model lives on the nodes: the host paths of the path its serve
command loads inside the container (doctor's model-files check, verify-model-copies and
the simulated nodes read it)."""

from __future__ import annotations

from collections.abc import Iterable

from spark_tui.nodes.cluster import DEFAULT_MODELS_DIR


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
    if not model_path.startswith("/"):
        if model_path.count("/") != 1:
            return []
        hub = "/root/.cache/huggingface/hub/models--" + model_path.replace("/", "--")
        plain = "/root/.cache/huggingface/" + model_path
        return [
            p for inside in (hub, plain) for p in recipe_model_paths(inside, volumes, models_dir)
        ]
    volumes = [v.replace("{cluster.models_dir}", models_dir) for v in volumes]
    inside = model_path
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
        return [inside]
    host_path = best[1]
    for home in ("$HOME/", "${HOME}/"):
        if host_path.startswith(home):
            host_path = "~/" + host_path[len(home) :]
    return [host_path]
