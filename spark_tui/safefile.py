"""Opening spark-tui's own files (state, cache) and the files it reads, safely.

spark-tui often runs as root, in directories another user may be able to write. So a file
of its own is opened without following a symlink (O_NOFOLLOW: a planted `fix.lock -> /etc/
shadow` is refused, not truncated), without blocking (O_NONBLOCK: a FIFO planted as the
journal answers at once instead of hanging every command), and then checked on the open
descriptor (fstat: a regular file, owned by the user running spark-tui). A file spark-tui
replaces is written to a fresh temporary name (O_EXCL: never a planted symlink) and renamed
into place. Every file read as text goes through `read_capped` (a size limit, a regular
file, no blocking open), so no input can take unbounded memory or time.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from spark_tui.errors import SparkTuiError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafeFile(OSError, SparkTuiError):
    """A state or cache file that is not what spark-tui wrote: a symlink, a FIFO, a device,
    a directory, or a file of another user. Refused, never followed. An OSError, so a
    reader that treats an unreadable file as absent does the same with this one."""


def open_state(path: Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor on one of spark-tui's own files: never through a symlink, never a
    blocking open, only a regular file owned by this user (UnsafeFile otherwise; OSError
    for the ordinary failures: missing, no permission, full disk)."""
    check_directory(path.parent)
    try:
        fd = os.open(path, flags | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # ELOOP: the last component is a symlink
            raise UnsafeFile(f"{path} is a symbolic link: refused (remove it)") from None
        if exc.errno == errno.ENXIO and os.path.exists(path):  # ENXIO: a FIFO opened for writing
            raise UnsafeFile(f"{path} is not a regular file: refused (remove it)") from None
        raise
    try:
        check_fd(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _owners() -> set[int]:
    """Whose files spark-tui may take as its own: the user it runs as, and under `sudo -E`
    (root, the user's own home) the user who ran sudo: that user can already run anything as
    root, so their own files give them nothing new. Symlinks and hard links stay refused."""
    owners = {os.geteuid()}
    sudo_uid = os.environ.get("SUDO_UID", "")
    if os.geteuid() == 0 and sudo_uid.isdigit():
        owners.add(int(sudo_uid))
    return owners


def check_directory(directory: Path) -> None:
    """The directory a state file lives in: a real directory (not a symlink to another
    place) of this user or of root. A missing one is left for the caller (FileNotFound)."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFile(f"{directory} is a symbolic link: refused (make it a directory)")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{directory} is not a directory: refused")
    if st.st_uid not in _owners() | {0}:
        raise UnsafeFile(
            f"{directory} belongs to uid {st.st_uid}, not to the user running spark-tui "
            f"(uid {os.geteuid()}): refused"
        )


def check_fd(fd: int, path: Path) -> os.stat_result:
    """fstat on an open descriptor: a regular file of this user (UnsafeFile otherwise)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{path} is not a regular file: refused (remove it)")
    if st.st_uid not in _owners():
        raise UnsafeFile(
            f"{path} belongs to uid {st.st_uid}, not to the user running spark-tui "
            f"(uid {os.geteuid()}): refused (remove it, or run as its owner)"
        )
    if st.st_nlink > 1:  # a hard link planted to another file (one spark-tui wrote has one)
        raise UnsafeFile(f"{path} has {st.st_nlink} hard links: refused (remove it)")
    return st


def read_state(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of one of spark-tui's own files (None: it does not exist); at most
    max_bytes (more: UnsafeFile). Unsafe files raise UnsafeFile."""
    try:
        fd = open_state(path)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{path} is larger than {max_bytes} bytes: refused")
        data = _read_all(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UnsafeFile(f"{path} is larger than {max_bytes} bytes: refused")
    return data


def read_state_text(path: Path, max_bytes: int = 1 << 20) -> str:
    """read_state as text (UTF-8, bad bytes replaced); FileNotFoundError when absent."""
    data = read_state(path, max_bytes)
    if data is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    return data.decode("utf-8", "replace")


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.read(fd, min(1 << 20, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write_atomic(path: Path, data: bytes | str, mode: int = 0o600, *, own: bool = True) -> None:
    """Replace `path` with `data`: written to a fresh temporary file of the same directory
    (created with O_EXCL, so never a planted symlink), fsync'ed, then renamed over it (a
    symlink at `path` itself is replaced, not followed). `own`: one of spark-tui's state
    files, whose directory is checked too (False: a file the user asked for, anywhere)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if own:
        check_directory(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_capped(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most max_bytes, without a blocking open (a FIFO or a
    device is refused). OSError for the ordinary failures; ValueError naming what is wrong
    (not a regular file, too large) for the rest. A symlink the user made is followed:
    this is for input files, not for spark-tui's own state."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ValueError("it is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > max_bytes:
            raise ValueError(f"larger than {max_bytes // 1024} KiB: refused")
        data = _read_all(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes // 1024} KiB: refused")
    return data
