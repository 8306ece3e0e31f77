"""Library logging kept out of the terminal.

paramiko logs a traceback for every failed handshake (a node that accepts TCP but never
speaks SSH, a paused sshd) and Python prints a logger's errors to stderr when nobody
configured logging. spark-tui reports such a node in one line of its own; the library's
log goes to a debug log the user turns on with `--debug-log FILE` or
SPARK_TUI_DEBUG_LOG=FILE, and nowhere otherwise. Warnings from libraries go there too.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

from spark_tui.errors import InputError

ENV = "SPARK_TUI_DEBUG_LOG"
_FORMAT = "%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s"
_handler: logging.Handler | None = None
log = logging.getLogger("spark_tui")


def setup(path: str | None = None) -> Path | None:
    """Route every logger to the debug log (`path`, else $SPARK_TUI_DEBUG_LOG), or to
    nowhere when there is none. Returns the log's path. Safe to call again."""
    global _handler
    path = path or os.environ.get(ENV) or None
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
        _handler.close()
        _handler = None
    handler: logging.Handler
    if path:
        try:
            handler = _open_log(Path(path))
        except OSError as exc:
            raise InputError(f"cannot write the debug log: {exc.strerror or exc}", path) from None
        handler.setFormatter(_RedactingFormatter(_FORMAT))
        root.setLevel(logging.DEBUG)
    else:
        handler = logging.NullHandler()  # a handler at all keeps Python's stderr fallback quiet
    root.addHandler(handler)
    _handler = handler
    logging.captureWarnings(True)
    threading.excepthook = _thread_excepthook
    return Path(path) if path else None


class _LogHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic only in the stubs
    """Appends to the debug log's file (opened by _open_log); closing it closes the file."""

    def close(self) -> None:
        try:
            self.acquire()
            try:
                if not self.stream.closed:
                    self.stream.close()
            finally:
                self.release()
        finally:
            super().close()


def _open_log(path: Path) -> logging.Handler:
    """The debug log opened as spark-tui's own files are: never through a symlink, never a
    blocking open (a FIFO at its name hung every command), only a regular file of this user
    (UnsafeFile, an OSError, otherwise)."""
    from spark_tui.safefile import open_state

    fd = open_state(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.set_blocking(fd, True)
    return _LogHandler(os.fdopen(fd, "a", encoding="utf-8"))


class _RedactingFormatter(logging.Formatter):
    """The debug log's lines, secrets as ${NAME} (a traceback's too)."""

    def format(self, record: logging.LogRecord) -> str:
        from spark_tui.redact import redact

        return redact(super().format(record))


def enabled() -> bool:
    """True when a debug log is being written."""
    return isinstance(_handler, logging.FileHandler)


def where() -> str:
    """How to see the details: the debug log's path, or how to turn it on."""
    if isinstance(_handler, logging.FileHandler):
        return f"details in {_handler.baseFilename}"
    # --debug-log is spark-tui's own option: before the command, never after it
    return f"for the details run it again as 'spark-tui --debug-log FILE COMMAND …' (or with {ENV}=FILE)"


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    """A thread that dies of an unexpected error: one line on stderr, the traceback in the
    debug log."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "a thread"
    log.error(
        "uncaught exception in %s",
        name,
        exc_info=args.exc_value if args.exc_value is not None else True,
    )
    print(
        f"spark-tui: internal error in {name}: {args.exc_type.__name__}: {args.exc_value} "
        f"({where()})",
        file=sys.stderr,
    )
