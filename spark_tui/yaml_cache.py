"""Parsed YAML kept by content, so that a start does not parse the same files again.

Pure-Python YAML costs ~14 ms a file; the knowledge base and the recipes are 130 files,
read at every start and again by each loader. A file's parse result (line numbers
included) is kept in memory and on disk under ~/.cache/spark-tui/yaml/, keyed by the
file's bytes and by the parser's own source, so an edit to either makes a new entry. Only
successful parses are kept: a refused file is parsed, and refused, every time. A cache
that cannot be read or written is simply not used.

The cache directory is not trusted: an entry is used only when its HMAC (SHA-256, with a
random key kept in the state directory, 0600, never in the cache) matches, checked before
a byte of it is unmarshalled. So an entry planted by someone who can write the cache (but
not the state directory) cannot change a wall's fix, and a marshal reference bomb in it is
never loaded. Entries are opened as spark-tui's own files (no symlink, no FIFO, a regular
file of this user, at most MAX_ENTRY bytes: spark_tui.safefile).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

from spark_tui import paths
from spark_tui.safefile import open_state, read_state

_MEMORY: dict[str, Any] = {}
_MAX_MEMORY = 512
_MAGIC = b"spark-tui yaml 2\n"
MAX_ENTRY = 4 << 20  # the largest shipped file's entry is ~20 KB
_KEYS: dict[Path, bytes] = {}  # the HMAC key of each state directory, once read


def _parser_digest() -> bytes:
    """The parser's own source (yamlfile.py, beside this file; read, not imported: the
    parser imports this cache), so a changed parser never reads an old entry."""
    try:
        return hashlib.sha256(Path(__file__).with_name("yamlfile.py").read_bytes()).digest()
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


def _hmac_key() -> bytes | None:
    """The cache's HMAC key (32 random bytes in the state directory, made on first use);
    None when it cannot be read or made (then the disk cache is not used)."""
    path = paths.state_dir() / "yaml-cache.key"
    kept = _KEYS.get(path)
    if kept is not None:
        return kept
    try:
        data = read_state(path, 64)
        if data is None:
            from spark_tui import policy

            if policy.read_only():  # --read-only writes nothing to the state directory
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
            new = os.urandom(32)
            fd = open_state(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, new)
                os.fsync(fd)
            finally:
                os.close(fd)
            data = new
    except OSError:  # a planted symlink or FIFO is an OSError too (UnsafeFile)
        return None
    if len(data) != 32:
        return None
    _KEYS[path] = data
    return data


def _mac(secret: bytes, key: str, body: bytes) -> bytes:
    return hmac.new(secret, key.encode() + b"\n" + body, hashlib.sha256).digest()


def seal(name: str, body: bytes) -> bytes | None:
    """`body` with the cache's HMAC before it, for another cache file of ours (the matcher's
    compiled database); None when there is no key (then nothing is kept on disk)."""
    secret = _hmac_key()
    return None if secret is None else _MAGIC + _mac(secret, name, body) + body


def unseal(name: str, data: bytes) -> bytes | None:
    """The body `seal(name, …)` wrote, or None: not ours (a planted file is never used)."""
    secret = _hmac_key()
    if secret is None or not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 32:
        return None
    mac, body = data[len(_MAGIC) : len(_MAGIC) + 32], data[len(_MAGIC) + 32 :]
    return body if hmac.compare_digest(mac, _mac(secret, name, body)) else None


def get(key: str) -> Any | None:
    """The encoded parse kept under this key, or None."""
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    secret = _hmac_key()
    if secret is None:
        return None
    try:
        data = read_state(_directory() / key, MAX_ENTRY)
    except OSError:
        return None
    if data is None or not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 32:
        return None
    mac, body = data[len(_MAGIC) : len(_MAGIC) + 32], data[len(_MAGIC) + 32 :]
    if not hmac.compare_digest(mac, _mac(secret, key, body)):
        return None  # not written by us with this key: never unmarshalled
    try:
        entry = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    if not (type(entry) is tuple and len(entry) == 2 and entry[0] == key):
        return None
    _remember(key, entry[1])
    return entry[1]


def put(key: str, encoded: Any) -> None:
    """Keep an encoded parse (in memory, and on disk when the cache can be written)."""
    _remember(key, encoded)
    secret = _hmac_key()
    if secret is None:
        return
    directory = _directory()
    with contextlib.suppress(OSError, ValueError):
        body = marshal.dumps((key, encoded))
        if len(body) + len(_MAGIC) + 32 > MAX_ENTRY:
            return
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_MAGIC + _mac(secret, key, body) + body)
            os.replace(tmp, directory / key)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _remember(key: str, encoded: Any) -> None:
    if len(_MEMORY) >= _MAX_MEMORY:
        _MEMORY.clear()
    _MEMORY[key] = encoded
