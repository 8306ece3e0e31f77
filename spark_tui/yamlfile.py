"""YAML that remembers where every key came from, so errors can name file and line.

Used by every loader (knowledge base, recipes, cluster config).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from spark_tui.errors import InputError, InputErrors


class LDict(dict):
    """A mapping from YAML with the line of the mapping and of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LList(list):
    """A sequence from YAML with its line and the line of each item (1-based)."""

    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LDict:
    loader.flatten_mapping(node)
    result = LDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a plain value", key_node.start_mark
            )
        skey = str(key) if not isinstance(key, str) else key
        if isinstance(key, bool) and isinstance(key_node, yaml.ScalarNode):
            # YAML 1.1 reads a bare `on:` / `yes:` key as a boolean; keys are names, so keep
            # the text as written (SCHEMA.md's actions use `on: all`).
            skey = key_node.value
        if skey in result:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {skey!r}", key_node.start_mark
            )
        result[skey] = loader.construct_object(value_node, deep=True)
        result.key_lines[skey] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LList:
    result = LList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def parse_yaml(text: str, file: str) -> Any:
    """Parse YAML text; a syntax error becomes an InputError naming file and line."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        reason = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise InputError(f"invalid YAML: {reason}", file, line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file) from None


def load_yaml(path: Path) -> Any:
    """Read and parse one YAML file, naming the file in every error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", str(path)) from None
    return parse_yaml(text, str(path))


def line_of(container: Any, key: str | int) -> int | None:
    """The line of a key (mapping) or index (sequence), when the container knows it."""
    if isinstance(container, LDict) and isinstance(key, str):
        return container.line_of(key)
    if isinstance(container, LList) and isinstance(key, int):
        return container.line_of(key)
    return getattr(container, "line", None)


class _Identified(Protocol):
    id: str
    source: str


T = TypeVar("T", bound=_Identified)


def load_id_dir(directory: Path, parse: Callable[[Any, str], T], kind: str) -> dict[str, T]:
    """Every *.yaml / *.yml in a directory, each one item named after its id: all the
    errors at once (file:line), or nothing — a bad file never leaves a half-loaded set."""
    items, errors = load_id_files(directory, parse, kind)
    if errors:
        raise InputErrors(errors)
    return items


def load_id_files(
    directory: Path, parse: Callable[[Any, str], T], kind: str
) -> tuple[dict[str, T], list[InputError]]:
    """Every *.yaml / *.yml in a directory that loads, and the errors (file:line) of those
    that do not: one bad file never hides the others (recipes load this way)."""
    if not directory.is_dir():
        raise InputError("not a directory", str(directory))
    items: dict[str, T] = {}
    errors: list[InputError] = []
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml")):
        try:
            item = parse(load_yaml(path), str(path))
        except InputErrors as exc:
            errors.extend(exc.errors)
            continue
        except InputError as exc:
            errors.append(exc)
            continue
        if item.id in items:
            also = items[item.id].source
            errors.append(
                InputError(f"duplicate {kind} id {item.id!r} (also in {also})", str(path), 1)
            )
        elif path.stem != item.id:
            errors.append(
                InputError(
                    f"the {kind} {item.id!r} must be in {item.id}{path.suffix}", str(path), 1
                )
            )
        else:
            items[item.id] = item
    return items, errors
