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

A recipe or cluster.yaml refers to a secret as `${NAME}`; what spark-tui writes keeps the
reference (a recipe revision writes a secret's value as one: `as_reference`), and the
value goes into a command only when it runs on the node (`expand`): from spark-tui's
environment, else the value the user's own recipe holds for that name.
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
_by_name: dict[str, str] = {}  # name -> the secret value last remembered for it
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


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
        _by_name[name] = value
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


def known_values(text: str) -> str:
    """`text` with every value known to be secret shown as ${NAME} (and nothing else changed)."""
    rx = _known_rx
    if not text or rx is None:
        return text
    return rx.sub(lambda m: "${" + _known.get(m.group(), "SECRET") + "}", text)


def redact(text: str) -> str:
    """`text` with every secret in it shown as ${NAME} (see the module docstring)."""
    if not text:
        return text
    text = known_values(text)
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


def as_reference(name: str, value: object) -> object:
    """What a written recipe holds for a secret variable or flag: `${NAME}` for a value
    (a reference stays as it is); anything that is no secret, unchanged."""
    if isinstance(value, str) and value and not REFERENCE.fullmatch(value):
        return "${" + name + "}"
    return value


def references(text: str) -> list[str]:
    """The names a text refers to as ${NAME}, in order, once each."""
    return list(dict.fromkeys(REFERENCE.findall(text)))


def value_of(name: str) -> str | None:
    """A reference's value now: spark-tui's environment, else the value the recipe the
    user wrote holds under that name (its env, or its secret flag's), else None."""
    if name in os.environ:
        return os.environ[name]
    with _lock:
        return _by_name.get(name)


def unresolved(text: str) -> list[str]:
    """The ${NAME} references in a text that have no value now."""
    return [n for n in references(text) if value_of(n) is None]


class UnresolvedReference(ValueError):
    """A ${NAME} in a command with no value, or one that cannot be passed as written."""


def expand(command: str) -> str:
    """The command as it runs on the node: each `${NAME}` replaced by its value (value_of).
    Every command word is single-quoted by spark_tui.shell, so a reference sits inside
    single quotes (at every level of a nested `sh -c`); a value with no single quote in it
    is then passed as it is. A reference outside single quotes, an unset one or a value
    holding a single quote raises UnresolvedReference (nothing runs)."""
    if "${" not in command:
        return command
    out: list[str] = []
    quoted = double = False
    i = 0
    while i < len(command):
        ch = command[i]
        m = REFERENCE.match(command, i) if ch == "$" else None
        if m is None:
            if ch == "'" and not double:
                quoted = not quoted
            elif ch == '"' and not quoted:
                double = not double
            elif ch == "\\" and not quoted:
                out.append(command[i : i + 2])
                i += 2
                continue
            out.append(ch)
            i += 1
            continue
        name = m.group(1)
        value = value_of(name)
        if value is None:
            raise UnresolvedReference(
                f"${{{name}}} has no value: set {name} in the environment spark-tui runs in"
            )
        if not quoted or "'" in value:
            raise UnresolvedReference(
                f"${{{name}}}: its value holds a single quote, which spark-tui does not pass "
                "through the launch's quoting"
                if quoted
                else f"${{{name}}} is not inside a quoted word: spark-tui does not expand it there"
            )
        if secret_name(name):
            remember(value, name)
        out.append(value)
        i = m.end()
    return "".join(out)
