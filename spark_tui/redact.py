"""Secrets out of everything spark-tui writes or prints: one function, `redact`.

A secret shows as `${NAME}` — the environment variable it comes from — in the journal,
a report, the TUI, `--json`, the debug log and every line the headless commands print:

  * the value of an environment variable whose name says it is a secret (it holds TOKEN,
    KEY, SECRET, PASSWORD, PASSWD or CREDENTIAL): `HF_TOKEN=hf_abc` → `HF_TOKEN=${HF_TOKEN}`,
    in a command line, a YAML or JSON text (`HF_TOKEN: hf_abc`);
  * the value after a secret flag (`--api-key VALUE`, `--hf-token=VALUE`, `--password …`);
  * any value known to be secret wherever it appears, alone: the values of such variables
    in this process's environment and in the recipe in use (`remember_env`), the values of
    secret flags in a recipe's serve arguments, and the variables cluster.yaml's `secrets:`
    names (docs/cluster-yaml.md) whatever they are called.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
SECRET_FLAGS = ("--api-key", "--hf-token", "--token", "--password", "--secret")
MIN_VALUE = 6  # a shorter value is too likely to be an ordinary word or number

# an environment variable's name (upper case: HF_TOKEN, AWS_SECRET_ACCESS_KEY; TOKENS, KEYS
# are counts, and a PER_TOKEN size is no secret: `recipes fit --json`'s kv_bytes_per_token), or
# one of the lower-case names engines print their secrets under (vLLM's `api_key=`): a plain
# "key:" in a log line (`key: store_based_barrier_key:32`) is no secret
_NAME = (
    r"(?:[A-Z0-9_]*(?:(?<!PER_)TOKEN(?!S)|KEY(?!S)|SECRET|PASSWORD|PASSWD|CREDENTIAL)(?:_[A-Z0-9_]*)?"
    r"|(?:api|hf|access|auth|secret|client_secret|private)_(?:key|token)|password|passwd"
    r"|secret|(?<!per_)token)"
)
# NAME=value, NAME: value, "NAME": "value" (a JSON or YAML text), -e NAME=value
_ASSIGN = re.compile(
    rf"""(?<![A-Za-z0-9_])({_NAME})(["']?\s*[=:]\s*)"""
    r"""(?:"(?!\$\{)[^"\n]*"|'(?!\$\{)[^'\n]*'|(?![\s"'$])[^\s"',;}\]]+)"""
)
_FLAG = re.compile(
    r"(?<![\w-])("
    + "|".join(re.escape(f) for f in SECRET_FLAGS)
    + r""")([= ]["']?)(?!\$\{)([^\s"',;]+)"""
)

_lock = threading.Lock()
_known: dict[str, str] = {}  # secret value -> the name it shows as
_known_rx: re.Pattern[str] | None = None
_marked: set[str] = set()  # variable names marked secret (cluster.yaml `secrets:`)


def secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    upper = name.upper().replace("PER_TOKEN", "")
    return name in _marked or any(w in upper for w in SECRET_WORDS)


def flag_name(flag: str) -> str:
    """The name a secret flag's value shows as: `--api-key` → API_KEY."""
    return flag.lstrip("-").replace("-", "_").upper()


def written_forms(value: str) -> set[str]:
    """The ways a value appears in what we write: as is, quoted for a shell, quoted again
    inside a quoted `sh -c '…'` script (a rendered docker run), escaped in a JSON string.
    A value with a space or a quote in it shows in none of them as it is."""
    once = shlex.quote(value)
    nested = once.replace("'", "'\"'\"'")
    forms = {value, once, nested}
    forms |= {json.dumps(f)[1:-1] for f in forms}
    return {f for f in forms if len(f) >= MIN_VALUE}


def remember(value: object, name: str) -> None:
    """Treat `value` as a secret, shown as ${name} wherever it appears (in any of its
    written forms)."""
    global _known_rx
    if not isinstance(value, str) or len(value) < MIN_VALUE or value.startswith("${"):
        return
    with _lock:
        if _known.get(value) == name:
            return
        for form in written_forms(value):
            _known[form] = name
        values = sorted(_known, key=len, reverse=True)
        _known_rx = re.compile("|".join(re.escape(v) for v in values))


def remember_env(env: Mapping[str, object]) -> None:
    """Remember the values of the secret variables of an environment (a recipe's, ours)."""
    for name, value in env.items():
        if secret_name(str(name)):
            remember(value, str(name))


def remember_args(args: Mapping[str, object]) -> None:
    """Remember the values of secret flags in an argument mapping (`--api-key: X`)."""
    for flag, value in args.items():
        if str(flag) in SECRET_FLAGS:
            remember(value, flag_name(str(flag)))


def mark_secret(names: Iterable[str]) -> None:
    """Variables the user marked secret (cluster.yaml `secrets:`): their values here, now
    and in any recipe, are secrets whatever their names."""
    for name in names:
        _marked.add(name)
        if name in os.environ:
            remember(os.environ[name], name)


def remember_environment() -> None:
    """This process's secret variables (HF_TOKEN exported in the shell that runs us)."""
    remember_env(os.environ)


def redact(text: str) -> str:
    """`text` with every secret in it shown as ${NAME} (see the module docstring)."""
    if not text:
        return text
    rx = _known_rx
    if rx is not None:
        text = rx.sub(lambda m: "${" + _known.get(m.group(), "SECRET") + "}", text)
    if "-" in text:
        text = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}${{{flag_name(m.group(1))}}}", text)
    return _ASSIGN.sub(_assignment, text)


def _assignment(m: re.Match[str]) -> str:
    value = m.group(0)[m.end(2) - m.start() :]
    quote = value[0] if value[0] in "\"'" else ""
    return f"{m.group(1)}{m.group(2)}{quote}${{{m.group(1)}}}{quote}"


def redact_data(value: Any) -> Any:
    """A JSON-like value with every string in it redacted (keys kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what goes through it, a line at a time (the rest when
    flushed): the headless commands' stdout and stderr."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""

    def write(self, s: str) -> int:
        self._pending += s
        if "\n" in self._pending:
            done, _, self._pending = self._pending.rpartition("\n")
            self.inner.write(redact(done + "\n"))
        return len(s)

    def flush(self) -> None:
        if self._pending:
            self.inner.write(redact(self._pending))
            self._pending = ""
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIO's attribute, read here from the wrapped stream
        return getattr(self.inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True
