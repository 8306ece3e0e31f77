"""The one parser of a serving engine's command line: `vllm serve MODEL …`,
`python3 -m sglang.launch_server …`, `sglang serve …` — into the engine, the model, env
assignments and flags (both `-tp 2` and `--tensor-parallel-size 2` spellings, one name).

Used for a community recipe's `command` (spark_tui.recipes.community) and for a running
engine's command line read off a node (spark_tui.nodes.parsers.processes): one reading of
flags, whoever wrote them.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

FLAG_ALIASES = {
    "vllm": {
        "-tp": "--tensor-parallel-size",
        "-pp": "--pipeline-parallel-size",
        "-dp": "--data-parallel-size",
        "-q": "--quantization",
        "-cc": "--compilation-config",
        "-ac": "--attention-config",
    },
    "sglang": {"--tp": "--tp-size", "--pp": "--pp-size", "--dp": "--dp-size"},
}
# flags that take no value, so the word after one is never its value
BARE_FLAGS = {
    "--trust-remote-code",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--enforce-eager",
    "--enable-auto-tool-choice",
    "--enable-expert-parallel",
    "--disable-custom-all-reduce",
    "--disable-log-requests",
    "--disable-log-stats",
    "--async-scheduling",
    "--headless",
    "--disable-cuda-graph",
    "--disable-radix-cache",
    "--enable-torch-compile",
    "--enable-sleep-mode",
    "--enable-dp-attention",
    "--disable-cascade-attn",
    "--enable-log-requests",
}
_ENV_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def canonical_flag(flag: str, engine: str = "vllm") -> str:
    """`-tp` -> `--tensor-parallel-size`, `--max_model_len` -> `--max-model-len`."""
    aliases = FLAG_ALIASES.get(engine, {})
    if flag in aliases:
        return aliases[flag]
    if flag.startswith("--"):
        name, dot, rest = flag[2:].partition(".")  # --compilation-config.cudagraph_mode
        return "--" + name.replace("_", "-") + dot + rest
    return flag


def command_words(command: str) -> list[str]:
    """Shell words of a recipe command: continuation lines joined (`\\ ` before the newline
    too, as sparkrun fixes it), comments dropped, quotes removed as the shell would."""
    text = re.sub(r"\\[ \t]*\r?\n", " ", command)
    return shlex.split(text, comments=True, posix=True)


class ParsedCommand:
    """A serve command split into its parts."""

    def __init__(self) -> None:
        self.engine = ""
        self.prefix: list[str] = []  # `vllm serve` / `python3 -m sglang.launch_server`
        self.model: str | None = None
        self.env: dict[str, str] = {}
        self.args: dict[str, Any] = {}
        self.dropped: list[str] = []  # what could not be kept, one reason each


def parse_command(words: list[str]) -> ParsedCommand:
    """Engine, model, env assignments and flags (flag -> value, True for a bare flag) of a
    `vllm serve …` / `python3 -m sglang.launch_server …` / `sglang serve …` command."""
    p = ParsedCommand()
    i = 0
    while i < len(words) and words[i] in ("exec", "env"):
        i += 1
    while i < len(words) and _ENV_WORD.fullmatch(words[i]) and not words[i].startswith("-"):
        m = _ENV_WORD.fullmatch(words[i])
        assert m is not None
        p.env[m[1]] = m[2]
        i += 1
    rest = words[i:]
    if rest[:2] == ["vllm", "serve"]:
        p.engine, p.prefix, i = "vllm", ["vllm", "serve"], 2
    elif rest[:2] == ["sglang", "serve"]:
        p.engine, p.prefix, i = "sglang", ["sglang", "serve"], 2
    elif (
        len(rest) >= 3
        and rest[0].startswith("python")
        and rest[1:3] == ["-m", "sglang.launch_server"]
    ):
        p.engine, p.prefix, i = "sglang", rest[:3], 3
    elif (
        len(rest) >= 3
        and rest[0].startswith("python")
        and rest[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    ):
        p.engine, p.prefix, i = "vllm", rest[:3], 3
    else:
        return p
    argv = rest[i:]
    last: str | None = None  # the flag a following plain word may belong to (nargs)
    j = 0
    while j < len(argv):
        w = argv[j]
        if w in ("&&", "||", ";", "|") or w.startswith((">", "2>", "&")):
            p.dropped.append(f"{' '.join(argv[j:])!r} after the serve command")
            break
        if not w.startswith("-") or _NUMBER.fullmatch(w):
            if p.model is None and p.engine == "vllm" and p.prefix[-1:] == ["serve"]:
                p.model = w  # `vllm serve MODEL`: the one positional argument
            elif last is not None and p.args.get(last) is not True:
                # a flag taking several words: SGLang's --cuda-graph-bs 1 2 4 8
                prev = p.args[last]
                p.args[last] = [*(prev if isinstance(prev, list) else [prev]), typed(w)]
            else:
                p.dropped.append(f"the word {w!r} (no flag before it)")
            j += 1
            continue
        flag, eq, value = w.partition("=")
        if eq and flag.startswith("--"):
            arg: Any = value
        elif flag in BARE_FLAGS:
            arg = True
        elif j + 1 < len(argv) and (
            not argv[j + 1].startswith("-") or _NUMBER.fullmatch(argv[j + 1])
        ):
            arg = argv[j + 1]
            j += 1
        else:
            arg = True
        name = canonical_flag(flag, p.engine)
        arg = typed(arg)
        if name in ("--model", "--model-path") and arg is not True:
            p.model = str(arg)
            last = None
        else:
            if name in p.args:
                p.dropped.append(f"{flag} given twice: the last value is kept (as the engine does)")
                p.args.pop(name)
            p.args[name] = arg
            last = name
        j += 1
    return p


def typed(word: Any) -> Any:
    """A command word as a YAML number when it reads back the same ('8000' -> 8000)."""
    if not isinstance(word, str):
        return word
    for kind in (int, float):
        try:
            number = kind(word)
        except ValueError:
            continue
        if repr(number) == word:
            return number
    return word


_MODULES = ("sglang.launch_server", "vllm.entrypoints.openai.api_server")
DEFAULT_PORT = {"vllm": 8000, "sglang": 30000}


def engine_words(argv: list[str]) -> list[str] | None:
    """The engine command inside a process's argument vector, as parse_command reads it
    (`/usr/bin/python3 /usr/local/bin/vllm serve M …` → `vllm serve M …`), or None."""
    for i, word in enumerate(argv):
        base = os.path.basename(word)
        nxt = argv[i + 1 : i + 3]
        if base in ("vllm", "sglang") and nxt[:1] == ["serve"]:
            return [base, *argv[i + 1 :]]
        if base.startswith("python") and len(nxt) == 2 and nxt[0] == "-m" and nxt[1] in _MODULES:
            return ["python3", *argv[i + 1 :]]
    return None
