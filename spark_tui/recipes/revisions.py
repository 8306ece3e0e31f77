"""Recipe revisions: a fix's patch-recipe action makes a new revision with a unified diff.

Stored under <state>/recipes/<id>/: rev-NNNN.yaml (the whole recipe),
rev-NNNN.diff (against the revision it was made from), rev-NNNN.json (when,
why). Revision 0 is the recipe as shipped (written at the first patch).
`current` names the revision in use: undo moves it back one; every revision
stays on disk. `launched` names the revision the last launch used, so a
relaunch knows which patches are pending.

Several sessions may patch the same recipe at once: a commit holds the recipe's
lock and applies its patch to the revision in use at that moment (not to the one
its plan was made from), so no session drops another's change.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from spark_tui import policy, redact
from spark_tui.errors import InputError
from spark_tui.recipes.model import RaySpec, Recipe, patch_mapping, patch_serve
from spark_tui.safefile import open_state, read_state_text, write_atomic

TARGETS = ("serve", "ray", "docker")


def recipe_to_data(r: Recipe) -> dict[str, Any]:
    """The recipe as plain YAML-able data, in the field order of recipes/SCHEMA.md."""
    m = r.model
    data: dict[str, Any] = {"id": r.id, "title": r.title, "status": r.status}
    if r.blocked_by:
        data["blocked_by"] = list(r.blocked_by)
    if r.instead:
        data["instead"] = r.instead
    if r.instead_note:
        data["instead_note"] = r.instead_note
    if r.workarounds:
        data["workarounds"] = [
            {"title": w.title, **({"detail": w.detail} if w.detail else {})} for w in r.workarounds
        ]
    if r.sources:
        data["sources"] = [
            {"title": src.title, **({"url": src.url} if src.url else {})} for src in r.sources
        ]
    model: dict[str, Any] = {"id": m.id, "path": m.path}
    if m.revision:
        model["revision"] = m.revision
    if m.checkpoint_bytes is not None:
        model["checkpoint_bytes"] = m.checkpoint_bytes
    if m.checkpoint_source:
        model["checkpoint_source"] = m.checkpoint_source
    cfg = {
        k: v
        for k, v in (
            ("layers", m.layers),
            ("attention_heads", m.attention_heads),
            ("kv_heads", m.kv_heads),
            ("head_dim", m.head_dim),
            ("max_position_embeddings", m.max_position_embeddings),
        )
        if v is not None
    }
    if cfg:
        model["config"] = {**cfg, "source": m.config_source}
    data["model"] = model
    data.update({"engine": r.engine, "executor": r.executor})
    if r.image is not None:
        data["image"] = r.image
    if r.image_note:
        data["image_note"] = r.image_note
    data["nodes"] = r.nodes
    data["containers"] = {"head": r.head_container, "worker": r.worker_container}
    if r.volumes:
        data["volumes"] = list(r.volumes)
    if r.docker_args or r.docker_env:
        data["docker"] = {"args": dict(r.docker_args), "env": _env(r.docker_env)}
    if r.executor == "ray" or r.ray != RaySpec():  # an mp recipe's `ray` profile uses it
        ray: dict[str, Any] = {"port": r.ray.port, "args": dict(r.ray.args), "env": _env(r.ray.env)}
        if r.ray.head_env:
            ray["head_env"] = _env(r.ray.head_env)
        if r.ray.worker_env:
            ray["worker_env"] = _env(r.ray.worker_env)
        if r.ray.head_command:
            ray["head_command"] = list(r.ray.head_command)
        if r.ray.worker_command:
            ray["worker_command"] = list(r.ray.worker_command)
        data["ray"] = ray
    s = r.serve
    serve: dict[str, Any] = {}
    if s.command:
        serve["command"] = list(s.command)
    serve["args"] = _args(s.args)
    serve["env"] = _env(s.env)
    if s.node_args:
        serve["node_args"] = _args(s.node_args)
    if s.worker_args:
        serve["worker_args"] = _args(s.worker_args)
    serve.update(
        {
            "log": s.log,
            "ready_line": s.ready_line,
            "port": s.port,
            "startup_timeout_s": s.startup_timeout_s,
        }
    )
    data["serve"] = serve
    data["smoke"] = {
        "prompt": r.smoke.prompt,
        "max_tokens": r.smoke.max_tokens,
        "path": r.smoke.path,
        "timeout_s": r.smoke.timeout_s,
    }
    data["drop_caches"] = r.drop_caches
    data["measured"] = _measured(r.measured)
    if r.profiles:
        data["profiles"] = {
            name: {
                k: v
                for k, v in (
                    ("description", p.description),
                    ("set_args", _args(p.set_args)),
                    ("unset_args", list(p.unset_args)),
                    ("set_env", _env(p.set_env)),
                    ("unset_env", list(p.unset_env)),
                    ("measured", _measured(p.measured) if p.measured else None),
                    ("stability", p.stability),
                    ("executor", p.executor),
                    ("node_args", _args(p.node_args) if p.node_args is not None else None),
                    ("worker_args", _args(p.worker_args) if p.worker_args is not None else None),
                    ("nodes", p.nodes),
                )
                if v
            }
            for name, p in r.profiles.items()
        }
    if r.notes:
        data["notes"] = list(r.notes)
    if r.mods:
        data["mods"] = list(r.mods)
    return data


def _env(env: Mapping[str, str]) -> dict[str, Any]:
    """An env mapping as written: a secret variable's value as ${NAME} (redact.expand fills
    it in when the launch runs), never the value."""
    return {k: redact.as_reference(k, v) if redact.secret_name(k) else v for k, v in env.items()}


def _args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments as written: a secret flag's value (`--api-key`) as ${API_KEY}."""
    return {
        k: redact.as_reference(redact.flag_name(k), v) if k in redact.SECRET_FLAGS else v
        for k, v in args.items()
    }


def _measured(m: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if m.tok_s is not None:
        out["tok_s"] = m.tok_s
    if m.startup_s is not None:
        out["startup_s"] = m.startup_s
    if m.notes:
        out["notes"] = list(m.notes)
    if m.source:
        out["source"] = m.source
    return out


def recipe_to_yaml(r: Recipe) -> str:
    """The recipe as a revision holds it: its secrets as ${NAME}, whatever else the text
    holds of a known secret's value too (a revision, a diff, the served record, an export)."""
    text = yaml.safe_dump(recipe_to_data(r), sort_keys=False, allow_unicode=True, width=100)
    return redact.known_values(text)


def apply_patch(
    recipe: Recipe,
    target: str = "serve",
    set_args: dict[str, Any] | None = None,
    unset_args: list[str] | tuple[str, ...] | None = None,
    set_env: dict[str, Any] | None = None,
    unset_env: list[str] | tuple[str, ...] | None = None,
) -> Recipe:
    """The recipe with a patch-recipe action's changes (pure; nothing stored), through the
    validation of a recipe file: a change that makes it invalid is an InputError."""
    from spark_tui.recipes.loader import validate_recipe

    if target not in TARGETS:
        raise InputError(f"patch-recipe target must be one of {', '.join(TARGETS)}")
    set_args = {k: v for k, v in (set_args or {}).items()}
    set_env = {k: str(v) for k, v in (set_env or {}).items()}
    if target == "serve":
        out = replace(
            recipe, serve=patch_serve(recipe.serve, set_args, unset_args, set_env, unset_env)
        ).with_consistent_profiles()
    elif target == "ray":
        ray = replace(
            recipe.ray,
            args=patch_mapping(recipe.ray.args, set_args, unset_args),
            env=patch_mapping(recipe.ray.env, set_env, unset_env),
        )
        out = replace(recipe, ray=ray)
    else:
        out = replace(
            recipe,
            docker_args=patch_mapping(recipe.docker_args, set_args, unset_args),
            docker_env=patch_mapping(recipe.docker_env, set_env, unset_env),
        )
    return validate_recipe(out, f"patch-recipe ({target})")


def unified_diff(before: Recipe, after: Recipe, label: str = "") -> str:
    a = recipe_to_yaml(before).splitlines(keepends=True)
    b = recipe_to_yaml(after).splitlines(keepends=True)
    name = label or after.id
    return "".join(
        difflib.unified_diff(a, b, f"{name}@{before.revision}", f"{name}@{after.revision}", n=2)
    )


@dataclass(frozen=True)
class Revision:
    """One stored revision of a recipe."""

    recipe_id: str
    number: int
    path: Path
    diff: str
    note: str
    time: float
    base: int | None  # the revision it was made from


def _read_or_empty(path: Path) -> str:
    try:
        return read_state_text(path)
    except OSError:
        return ""


def _write_atomic(path: Path, text: str) -> None:
    write_atomic(path, text)


class RevisionStore:
    """Revisions of every patched recipe, under `root` (a session's state directory)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextlib.contextmanager
    def _locked(self, recipe_id: str) -> Iterator[None]:
        """One writer per recipe at a time, across processes."""
        d = self._dir(recipe_id)
        d.mkdir(parents=True, exist_ok=True)
        fd = open_state(d / ".lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _dir(self, recipe_id: str) -> Path:
        return self.root / recipe_id

    def _pointer(self, recipe_id: str, name: str) -> int | None:
        p = self._dir(recipe_id) / name
        try:
            return int(read_state_text(p, 64).strip())
        except (OSError, ValueError):
            return None

    def numbers(self, recipe_id: str) -> list[int]:
        d = self._dir(recipe_id)
        if not d.is_dir():
            return []
        return sorted(int(p.stem[4:]) for p in d.glob("rev-*.yaml") if p.stem[4:].isdigit())

    def load(self, recipe_id: str, number: int) -> Recipe:
        from spark_tui.recipes.loader import parse_recipe_text

        path = self._dir(recipe_id) / f"rev-{number:04d}.yaml"
        try:
            text = read_state_text(path)
        except OSError as exc:
            raise InputError(f"cannot read revision: {exc}", str(path)) from None
        return replace(parse_recipe_text(text, str(path)), revision=number)

    def current_number(self, recipe_id: str) -> int | None:
        return self._pointer(recipe_id, "current")

    def current(self, recipe_id: str) -> Recipe | None:
        """The revision in use, or None when the recipe was never patched."""
        n = self.current_number(recipe_id)
        return self.load(recipe_id, n) if n is not None else None

    def revisions(self, recipe_id: str) -> list[Revision]:
        out = []
        d = self._dir(recipe_id)
        for n in self.numbers(recipe_id):
            meta_path = d / f"rev-{n:04d}.json"
            try:
                meta = json.loads(read_state_text(meta_path))
            except (OSError, ValueError):
                meta = {}
            diff_path = d / f"rev-{n:04d}.diff"
            out.append(
                Revision(
                    recipe_id,
                    n,
                    d / f"rev-{n:04d}.yaml",
                    _read_or_empty(diff_path),
                    str(meta.get("note", "")),
                    float(meta.get("time", 0.0)),
                    meta.get("base"),
                )
            )
        return out

    def _write(self, recipe: Recipe, number: int, diff: str, note: str, base: int | None) -> None:
        d = self._dir(recipe.id)
        d.mkdir(parents=True, exist_ok=True)
        _write_atomic(d / f"rev-{number:04d}.yaml", recipe_to_yaml(recipe))
        _write_atomic(d / f"rev-{number:04d}.diff", diff)
        _write_atomic(
            d / f"rev-{number:04d}.json",
            json.dumps({"note": note, "time": time.time(), "base": base}),
        )

    def commit_patch(
        self, base: Recipe, patch: Mapping[str, object], note: str
    ) -> tuple[Revision, Recipe]:
        """Apply a patch-recipe change to the revision in use now (`base` when the recipe was
        never patched) and store it: (the new revision, the recipe it holds)."""
        policy.refuse_if_read_only(f"change recipe {base.id}")
        with self._locked(base.id):
            current = self.current(base.id) or base
            after = apply_patch(current, **patch)  # type: ignore[arg-type]  # a patch-recipe's params, checked by its action schema
            if current.revision != base.revision:
                note += f" (rebased on revision {current.revision})"
            rev = self._commit(current, after, note)
        return rev, self.load(base.id, rev.number)

    def commit(self, before: Recipe, after: Recipe, note: str) -> Revision:
        """Store `after` as a new revision made from `before` (revision 0 written first)."""
        policy.refuse_if_read_only(f"change recipe {before.id}")
        with self._locked(before.id):
            return self._commit(before, after, note)

    def _commit(self, before: Recipe, after: Recipe, note: str) -> Revision:
        numbers = self.numbers(before.id)
        if not numbers:
            base = replace(before, revision=0)
            self._write(base, 0, "", "as shipped", None)
            numbers = [0]
            before = base
        number = numbers[-1] + 1
        after = replace(after, revision=number, profile=None)
        diff = unified_diff(before, after)
        self._write(after, number, diff, note, before.revision)
        _write_atomic(self._dir(before.id) / "current", str(number))
        return self.revisions(before.id)[-1]

    def patch(self, recipe: Recipe, note: str = "", **changes: Any) -> Revision:
        """A patch-recipe action: the current revision (or `recipe`) with `changes`."""
        return self.commit_patch(recipe, changes, note)[0]

    def undo(self, recipe_id: str) -> Recipe:
        """Go back to the revision the current one was made from (all stay on disk)."""
        policy.refuse_if_read_only(f"undo the last patch of recipe {recipe_id}")
        with self._locked(recipe_id):
            n = self.current_number(recipe_id)
            if n is None or n == 0:
                raise InputError(f"recipe {recipe_id!r} has no patch to undo")
            meta = {r.number: r for r in self.revisions(recipe_id)}
            base = meta[n].base if n in meta else None
            back = base if base is not None else n - 1
            _write_atomic(self._dir(recipe_id) / "current", str(back))
        return self.load(recipe_id, back)

    def pending(self, recipe_id: str) -> bool:
        """Whether the revision in use was not launched yet."""
        n = self.current_number(recipe_id)
        return n is not None and n != self._pointer(recipe_id, "launched")

    def mark_launched(self, recipe: Recipe) -> None:
        d = self._dir(recipe.id)
        if d.is_dir():
            _write_atomic(d / "launched", str(recipe.revision))


IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Served:
    """A launch that served: the whole recipe it ran (image included), when, its tok/s, and the
    image ID each node's container ran (`docker inspect`): what the tag named then."""

    recipe: Recipe
    time: float
    revision: int
    image: str
    tok_s: float | None
    image_id: str = ""  # the head's: what a rollback pins ("" when it could not be read)
    image_ids: Mapping[str, str] = field(default_factory=dict)  # node -> image ID

    @property
    def mixed_images(self) -> bool:
        """Whether the nodes ran different images (drift between them)."""
        return len(set(self.image_ids.values())) > 1


SERVED = "served.jsonl"


def _served_path(store: RevisionStore, recipe_id: str) -> Path:
    return store._dir(recipe_id) / SERVED


def mark_served(
    store: RevisionStore,
    recipe: Recipe,
    tok_s: float | None = None,
    image_ids: Mapping[str, str] | None = None,
) -> None:
    """Record that `recipe` (the revision and image launched) served: a smoke request answered.
    Every record keeps the whole recipe, so a rollback can return to it whatever changed, and
    the image ID each node ran (`image_ids`, head first), so it returns to that image even
    when the tag has moved since."""
    d = store._dir(recipe.id)
    d.mkdir(parents=True, exist_ok=True)
    ids = {n: i for n, i in (image_ids or {}).items() if IMAGE_ID.fullmatch(i)}
    record = {
        "time": time.time(),
        "revision": recipe.revision,
        "image": recipe.image or "",
        "image_id": next(iter(ids.values()), ""),
        "image_ids": ids,
        "tok_s": tok_s,
        "recipe": recipe_to_yaml(recipe),
    }
    path = _served_path(store, recipe.id)
    with store._locked(recipe.id):
        old = _read_or_empty(path)
        _write_atomic(path, old + json.dumps(record) + "\n")


def served_launches(store: RevisionStore, recipe_id: str) -> list[Served]:
    """Every launch of this recipe that served, oldest first (a torn line is left out)."""
    from spark_tui.recipes.loader import parse_recipe_text

    path = _served_path(store, recipe_id)
    out: list[Served] = []
    for line in _read_or_empty(path).splitlines():
        try:
            rec = json.loads(line)
            recipe = parse_recipe_text(str(rec["recipe"]), str(path))
        except (ValueError, KeyError, TypeError, InputError):
            continue  # a line spark-tui did not write whole
        tok = rec.get("tok_s")
        raw_ids = rec.get("image_ids")
        ids = {
            str(n): str(i)
            for n, i in (raw_ids.items() if isinstance(raw_ids, dict) else ())
            if IMAGE_ID.fullmatch(str(i))
        }
        head_id = str(rec.get("image_id") or "")
        out.append(
            Served(
                replace(recipe, revision=int(rec.get("revision") or 0)),
                float(rec.get("time") or 0.0),
                int(rec.get("revision") or 0),
                str(rec.get("image") or ""),
                float(tok) if isinstance(tok, (int, float)) else None,
                head_id if IMAGE_ID.fullmatch(head_id) else "",
                ids,
            )
        )
    return out


def last_served(store: RevisionStore, recipe_id: str) -> Served | None:
    """The newest launch of this recipe that served (None: none did)."""
    launches = served_launches(store, recipe_id)
    return launches[-1] if launches else None


def served_line(served: Served) -> str:
    """One launch that served, in words: when, the image and the ID it ran, its tok/s."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(served.time))
    image = served.image or "(no image)"
    if served.image_id and served.image_id != served.image:
        image += f" = {served.image_id}"
    tok = f", {served.tok_s:.1f} tok/s" if served.tok_s else ""
    mixed = " (the nodes ran different images)" if served.mixed_images else ""
    return f"served at {when} on {image}{tok}{mixed}"


def pinned(served: Served) -> Recipe:
    """The recipe that served, its image pinned to the image ID it ran (not the tag, which may
    name another image now); as it was when the ID is not known (a record from before)."""
    r = served.recipe
    if not served.image_id or r.image == served.image_id:
        return r
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(served.time))
    note = (
        f"pinned by a rollback: the image {served.image} was when revision {served.revision} "
        f"served at {when} (--set image={served.image} runs what the tag names now)"
    )
    return replace(r, image=served.image_id, image_note=note)


def rollback(store: RevisionStore, current: Recipe, served: Served) -> Recipe:
    """A new revision holding the recipe that last served, its image pinned to the image ID
    it served on (pinned); every revision stays on disk. Returns the recipe now in use."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(served.time))
    image = f"{served.image} = {served.image_id}" if served.image_id else served.image
    note = f"rollback to what served at {when} (revision {served.revision}, image {image})"
    rev = store.commit(current, pinned(served), note)
    return store.load(current.id, rev.number)
