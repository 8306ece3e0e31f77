"""YAML that remembers where every key came from, so errors can name file and line.

Used by every loader (knowledge base, recipes, cluster config, scenarios). The files are
read from places a user or a download may fill, so the loader refuses what would make it
hang or blow up, naming file and line: more than MAX_BYTES, nesting deeper than
MAX_DEPTH, more than MAX_ALIASES aliases or MAX_NODES values once aliases are expanded
(an alias bomb: a few hundred bytes that expand to billions), a recursive alias, a
control character in a value (a terminal escape), and anything but a regular file (a
FIFO would block the read for ever).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from spark_tui import yaml_cache
from spark_tui.errors import InputError, InputErrors

MAX_BYTES = 1 << 20  # the largest shipped file is 6 KB
MAX_DEPTH = 32  # a wall nests 7 levels, a recipe 5
MAX_ALIASES = 64  # no shipped file uses one
MAX_NODES = 50_000  # values after aliases are expanded (a wall has ~200)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tab and newline are text


class LDict(dict):
    """A mapping from YAML with the line of the mapping and of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]
    duplicates: list[tuple[str, int]] = []  # noqa: RUF012 - set per instance by parse_yaml

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LList(list):
    """A sequence from YAML with its line and the line of each item (1-based)."""

    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line


class _Refused(yaml.composer.ComposerError):
    """Valid YAML past one of the limits above."""


def _refuse(problem: str, mark: yaml.Mark | None) -> _Refused:
    return _Refused(None, None, problem, mark)


class _Loader(yaml.SafeLoader):
    """SafeLoader with limits on depth, aliases and expanded size, checked while the
    document is composed (before anything is built from it)."""

    def __init__(self, stream: str, last_key_wins: bool = False) -> None:
        super().__init__(stream)
        # PyYAML's own reading of a key given twice (the last value wins), for files of a
        # tool that reads them so (eugr's recipes): each such key and its line is kept
        self.last_key_wins = last_key_wins
        self.duplicates: list[tuple[str, int]] = []
        self._depth = 0
        self._aliases = 0
        self._nodes = 0
        # node → (values under it once aliases are expanded, its depth): known once composed
        self._extent: dict[yaml.Node, tuple[int, int]] = {}

    def _grow(self, count: int, mark: yaml.Mark) -> None:
        self._nodes += count
        if self._nodes > MAX_NODES:
            raise _refuse(
                f"more than {MAX_NODES} values once aliases are expanded (an alias bomb?)", mark
            )

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _refuse(f"more than {MAX_ALIASES} aliases (*name)", event.start_mark)
            target = self.anchors.get(event.anchor)
            if target is not None:
                extent = self._extent.get(target)
                if extent is None:
                    raise _refuse(
                        f"alias *{event.anchor} inside the value it names (a recursive structure)",
                        event.start_mark,
                    )
                self._grow(extent[0], event.start_mark)
                if self._depth + extent[1] > MAX_DEPTH:
                    raise _refuse(
                        f"nested more than {MAX_DEPTH} levels deep once aliases are expanded",
                        event.start_mark,
                    )
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _refuse(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._grow(1, event.start_mark)
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        extents = [self._extent[c] for c in children]
        self._extent[node] = (
            1 + sum(e[0] for e in extents),
            1 + max((e[1] for e in extents), default=0),
        )
        return node

    def construct_scalar(self, node: yaml.ScalarNode) -> Any:
        value = super().construct_scalar(node)
        # "\e[2J", "\r": escapes YAML allows in quoted text, which would reach a terminal
        # (or a shell) from a downloaded file; raw control characters the reader refuses
        bad = _CONTROL.search(value) if isinstance(value, str) else None
        if bad:
            raise yaml.constructor.ConstructorError(
                None, None, f"control character {bad.group()!r} in a value", node.start_mark
            )
        return value

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # a value PyYAML resolves but cannot build (`2024-13-45` as a date, bad base64 in
        # !!binary) raises ValueError/TypeError: make it a YAML error at that value's line
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value ({exc})", node.start_mark
            ) from None


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
        if skey in result and loader.last_key_wins:
            loader.duplicates.append((skey, key_node.start_mark.line + 1))
        elif skey in result:
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


def parse_yaml(text: str, file: str, last_key_wins: bool = False) -> Any:
    """Parse YAML text; a syntax error, or input past the limits above, becomes an
    InputError naming file and line. A text parsed before (the same bytes, the same
    parser) is taken from the cache (spark_tui.yaml_cache) instead. A key given twice is
    an error, unless `last_key_wins`: then the last value is kept and the top mapping's
    `duplicates` lists (key, line) of each repeat."""
    if len(text) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES // 1024} KiB: refused", file, 1)
    if last_key_wins:
        return _parse(text, file, last_key_wins=True)
    key = yaml_cache.key_of(f"{MAX_DEPTH},{MAX_ALIASES},{MAX_NODES}\n{text}")
    kept = yaml_cache.get(key)
    if kept is not None:
        return _decode(kept)
    data = _parse(text, file)
    try:
        encoded = _encode(data)
    except _NotKept:
        return data
    from spark_tui.redact import redact

    if redact(text) == text:  # a text holding a secret (a recipe's HF_TOKEN) is not copied
        yaml_cache.put(key, encoded)
    return data


class _NotKept(Exception):
    """A value the cache does not keep (a timestamp, a set, bytes)."""


def _encode(value: Any) -> Any:
    """LDict / LList / scalars as plain tuples marshal can store, lines included."""
    kind = type(value)
    if kind is LDict:
        keys = tuple(value)
        return (
            0,
            value.line,
            keys,
            tuple(value.key_lines.get(k, value.line) for k in keys),
            tuple(_encode(v) for v in value.values()),
        )
    if kind is LList:
        return (1, value.line, tuple(value.item_lines), tuple(_encode(v) for v in value))
    if value is None or kind in (str, int, float, bool):
        return value
    raise _NotKept(kind.__name__)


def _decode(value: Any) -> Any:
    if type(value) is not tuple:
        return value
    if value[0] == 0:
        _, line, keys, key_lines, values = value
        d = LDict(zip(keys, map(_decode, values), strict=True))
        d.line = line
        d.key_lines = dict(zip(keys, key_lines, strict=True))
        return d
    _, line, item_lines, items = value
    items_list = LList(map(_decode, items))
    items_list.line = line
    items_list.item_lines = list(item_lines)
    return items_list


def _parse(text: str, file: str, last_key_wins: bool = False) -> Any:
    loader = None
    try:
        loader = _Loader(text, last_key_wins)  # checks every character first (a ReaderError)
        data = loader.get_single_data()
        if isinstance(data, LDict):
            data.duplicates = list(loader.duplicates)
        return data
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        reason = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        what = "refused" if isinstance(exc, _Refused) else "invalid YAML"
        raise InputError(f"{what}: {reason}", file, line) from None
    except yaml.reader.ReaderError as exc:
        # a character YAML does not allow (a NUL, a control character)
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        raise InputError(f"invalid YAML: character {char!r} is not allowed", file, line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file, 1) from None
    except RecursionError:  # the limits above should make this unreachable
        raise InputError(f"invalid YAML: nested too deep (limit {MAX_DEPTH})", file, 1) from None
    finally:
        if loader is not None:
            loader.dispose()


def read_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """A regular file's text (UTF-8), at most max_bytes: an InputError naming the file
    for anything else (missing, unreadable, a FIFO or device, too large, not UTF-8)."""
    from spark_tui.safefile import read_capped

    try:
        data = read_capped(path, max_bytes)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", str(path)) from None
    except ValueError as exc:
        why = str(exc)
        raise InputError(why if "refused" in why else f"cannot read: {why}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError("cannot read: not UTF-8 text", str(path), line) from None


def load_yaml(path: Path) -> Any:
    """Read and parse one YAML file, naming the file in every error."""
    return parse_yaml(read_text(path), str(path))


def line_of(container: Any, key: str | int) -> int | None:
    """The line of a key (mapping) or index (sequence), when the container knows it."""
    if isinstance(container, LDict) and isinstance(key, str):
        return container.line_of(key)
    if isinstance(container, LList) and isinstance(key, int):
        return container.line_of(key)
    return getattr(container, "line", None)


class _Identified(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def source(self) -> str: ...


T = TypeVar("T", bound=_Identified)


def is_dir(path: Path) -> bool:
    """Whether a directory is there; an InputError naming it when it cannot be looked at
    (a parent without permission), where Path.is_dir would raise PermissionError."""
    try:
        return path.is_dir()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", str(path)) from None


def is_file(path: Path) -> bool:
    """Whether a file is there; an InputError naming it when it cannot be looked at."""
    try:
        return path.is_file()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", str(path)) from None


def _with_line(error: InputError, path: Path) -> InputError:
    """An error about a whole file (a field it lacks) points at its first line."""
    if error.file and error.line:
        return error
    return InputError(error.reason, error.file or str(path), error.line or 1)


def load_id_dir(directory: Path, parse: Callable[[Any, str], T], kind: str) -> dict[str, T]:
    """Every *.yaml / *.yml in a directory, each one item named after its id: all the
    errors at once (file:line), or nothing — a bad file never leaves a half-loaded set."""
    items, errors = load_id_files(directory, parse, kind)
    if errors:
        raise InputErrors(errors)
    return items


def load_id_files(
    directory: Path,
    parse: Callable[[Any, str], T],
    kind: str,
    load: Callable[[Path], Any] | None = None,
) -> tuple[dict[str, T], list[InputError]]:
    """Every *.yaml / *.yml in a directory that loads, and the errors (file:line) of those
    that do not: one bad file never hides the others (recipes load this way)."""
    if not is_dir(directory):
        raise InputError("not a directory", str(directory))
    try:
        paths = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError as exc:
        raise InputError(f"cannot list: {exc.strerror or exc}", str(directory)) from None
    items: dict[str, T] = {}
    errors: list[InputError] = []
    for path in paths:
        try:
            data = (load or load_yaml)(path)
        except InputError as exc:
            errors.append(exc)
            continue
        try:
            item = parse(data, str(path))
        except InputErrors as exc:
            errors.extend(_with_line(e, path) for e in exc.errors)
            continue
        except InputError as exc:
            errors.append(_with_line(exc, path))
            continue
        if item.id in items:
            also = items[item.id].source
            errors.append(
                InputError(f"duplicate {kind} id {item.id!r} (also in {also})", str(path), 1)
            )
        elif path.stem != item.id and getattr(item, "origin", "") != "eugr":
            # (an eugr recipe's id is its file name, lower-cased: eugr runs any file name)
            errors.append(
                InputError(
                    f"the {kind} {item.id!r} must be in {item.id}{path.suffix}", str(path), 1
                )
            )
        else:
            items[item.id] = item
    return items, errors
