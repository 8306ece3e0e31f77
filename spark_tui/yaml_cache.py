"""Parsed YAML kept by content, so that a start does not parse the same files again.

Pure-Python YAML costs ~14 ms a file; the knowledge base and the recipes are 130 files,
read at every start and again by each loader. A file's parse result (line numbers
included) is kept in memory and on disk under ~/.cache/spark-tui/yaml/, keyed by the
file's bytes and by the parser's own source, so an edit to either makes a new entry. Only
successful parses are kept: a refused file is parsed, and refused, every time. A cache
that cannot be read or written is simply not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

from spark_tui import paths

_MEMORY: dict[str, Any] = {}
_MAX_MEMORY = 512
_MAGIC = "spark-tui yaml 1"


def _parser_digest() -> bytes:
    from spark_tui import yamlfile

    try:
        return hashlib.sha256(Path(yamlfile.__file__).read_bytes()).digest()
    except OSError:
        return b"unknown"


_PARSER: bytes | None = None


def key_of(text: str) -> str:
    global _PARSER
    if _PARSER is None:
        _PARSER = _parser_digest()
    return hashlib.sha256(_PARSER + text.encode("utf-8", "surrogatepass")).hexdigest()


def _directory() -> Path:
    return paths.cache_dir() / "yaml"


def get(key: str) -> Any | None:
    """The encoded parse kept under this key, or None."""
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    try:
        with open(_directory() / key, "rb") as fh:
            entry = marshal.load(fh)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    # a damaged file may still unmarshal: only an entry that names its own key counts
    if not (type(entry) is tuple and len(entry) == 3 and entry[:2] == (_MAGIC, key)):
        return None
    _remember(key, entry[2])
    return entry[2]


def put(key: str, encoded: Any) -> None:
    """Keep an encoded parse (in memory, and on disk when the cache can be written)."""
    _remember(key, encoded)
    directory = _directory()
    with contextlib.suppress(OSError, ValueError):
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                marshal.dump((_MAGIC, key, encoded), fh)
            os.replace(tmp, directory / key)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _remember(key: str, encoded: Any) -> None:
    if len(_MEMORY) >= _MAX_MEMORY:
        _MEMORY.clear()
    _MEMORY[key] = encoded
