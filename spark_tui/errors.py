"""Errors that carry where they come from, so the user can fix their input."""

from __future__ import annotations


class SparkTuiError(Exception):
    """Base of every error spark-tui reports to the user (never a traceback)."""

    exit_code = 1


class InputError(SparkTuiError):
    """Bad usage or bad input: an unreadable file, invalid YAML, an unknown id (exit code 2)."""

    exit_code = 2

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        self.file = file
        self.line = line
        self.reason = message
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        super().__init__(f"{where}{message}")


class InputErrors(InputError):
    """Several input errors found in one pass (the loader reports them all, then loads nothing)."""

    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(first.reason, first.file, first.line)
        self.args = ("\n".join(str(e) for e in errors),)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)
