"""`--set KEY=VALUE` overrides of a recipe, for one rendering (nothing is stored).

Each override goes through the same validation as a recipe file (loader.validate_recipe):
`--set image=--rm`, `--set 'env.A B=1'` or `--set containers.head='h$(x)'` are refused.

Keys (recipes/SCHEMA.md lists them):
  image=NAME                model.path=PATH           nodes=N
  drop_caches=true|false    containers.head=NAME      containers.worker=NAME
  serve.log=PATH            serve.ready_line=TEXT     serve.port=N
  serve.--flag=VALUE        (true: a bare flag; null: remove the flag)
  env.VAR=VALUE             (the serve process; null: remove)
  ray.--flag=VALUE          ray.env.VAR=VALUE
  docker.--flag=VALUE       docker.env.VAR=VALUE
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from spark_tui.errors import InputError
from spark_tui.recipes.model import Recipe, patch_mapping, patch_serve

_REMOVE = ("null", "~")


def parse_set(item: str) -> tuple[str, str]:
    """Split `KEY=VALUE` (the first '=' after the key's flag part)."""
    # serve.--max-model-len=4096: the key may itself hold no '=', the value may
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InputError(f"--set {item!r}: expected KEY=VALUE (e.g. serve.--max-model-len=4096)")
    return key, value  # not stripped: a key with blanks or a newline is refused, not mended


def _flag_value(value: str) -> Any:
    return True if value == "true" else value


def apply_set(recipe: Recipe, item: str) -> Recipe:
    """One override applied; InputError (exit 2) for an unknown key."""
    key, value = parse_set(item)
    remove = value in _REMOVE
    if key == "image":
        return replace(recipe, image=None if remove else value)
    if key == "model.path":
        return replace(recipe, model=replace(recipe.model, path=value))
    if key == "nodes":
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"--set {item!r}: nodes must be a whole number >= 1")
        return replace(recipe, nodes=int(value))
    if key == "drop_caches":
        if value not in ("true", "false"):
            raise InputError(f"--set {item!r}: drop_caches is true or false")
        return replace(recipe, drop_caches=value == "true")
    if key in ("containers.head", "containers.worker"):
        if key.endswith("head"):
            return replace(recipe, head_container=value)
        return replace(recipe, worker_container=value)
    if key == "serve.log":
        return replace(recipe, serve=replace(recipe.serve, log=value))
    if key == "serve.ready_line":
        return replace(recipe, serve=replace(recipe.serve, ready_line=value))
    if key == "serve.port":
        if not value.isdigit():
            raise InputError(f"--set {item!r}: a port is a number")
        return replace(recipe, serve=replace(recipe.serve, port=int(value)))
    if key.startswith("serve.-"):
        flag = key[len("serve.") :]
        serve = (
            patch_serve(recipe.serve, unset_args=[flag])
            if remove
            else patch_serve(recipe.serve, set_args={flag: _flag_value(value)})
        )
        if flag == "--port" and not remove and value.isdigit():
            serve = replace(serve, port=int(value))
        return replace(recipe, serve=serve)
    if key.startswith("env."):
        var = key[len("env.") :]
        serve = (
            patch_serve(recipe.serve, unset_env=[var])
            if remove
            else patch_serve(recipe.serve, set_env={var: value})
        )
        return replace(recipe, serve=serve)
    if key.startswith("ray.env."):
        var = key[len("ray.env.") :]
        env = patch_mapping(
            recipe.ray.env, None if remove else {var: value}, [var] if remove else None
        )
        return replace(recipe, ray=replace(recipe.ray, env=env))
    if key.startswith("ray.-"):
        flag = key[len("ray.") :]
        args = patch_mapping(
            recipe.ray.args,
            None if remove else {flag: _flag_value(value)},
            [flag] if remove else None,
        )
        return replace(recipe, ray=replace(recipe.ray, args=args))
    if key.startswith("docker.env."):
        var = key[len("docker.env.") :]
        env = patch_mapping(
            recipe.docker_env, None if remove else {var: value}, [var] if remove else None
        )
        return replace(recipe, docker_env=env)
    if key.startswith("docker.-"):
        flag = key[len("docker.") :]
        args = patch_mapping(
            recipe.docker_args,
            None if remove else {flag: _flag_value(value)},
            [flag] if remove else None,
        )
        return replace(recipe, docker_args=args)
    raise InputError(
        f"--set {item!r}: unknown key {key!r} (image, model.path, nodes, drop_caches, "
        "containers.head|worker, serve.log|ready_line|port, serve.--FLAG, env.VAR, "
        "ray.--FLAG, ray.env.VAR, docker.--FLAG, docker.env.VAR)"
    )


def apply_sets(recipe: Recipe, items: list[str] | tuple[str, ...]) -> Recipe:
    """Every override, in order, each through the validation of a recipe file: the first
    that makes the recipe invalid is refused with one line (InputError, exit 2)."""
    from spark_tui.recipes.loader import validate_recipe

    for item in items:
        changed = apply_set(recipe, item).with_consistent_profiles()
        recipe = validate_recipe(changed, f"--set {item!r}")
    return recipe
