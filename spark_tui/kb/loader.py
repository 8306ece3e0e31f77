"""Load and validate the knowledge base: every error names file and line, and
nothing is half-loaded (one bad file → no knowledge base at all)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_tui import paths
from spark_tui.errors import InputError, InputErrors
from spark_tui.facts import unknown_fact_reason
from spark_tui.kb.conditions import Condition, parse_condition
from spark_tui.kb.safety import check_fix
from spark_tui.kb.schema import (
    ENGINES,
    FROM_LOG,
    KINDS,
    PLACEHOLDERS,
    RISKS,
    SEVERITIES,
    SUSPECTED,
    TARGETS,
    Action,
    Cause,
    Fix,
    LogSignature,
    MessageSource,
    ReadingRule,
    Wall,
    lone_brace,
    placeholders,
)
from spark_tui.yamlfile import LDict, LList, is_dir, line_of, load_id_dir

_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9.]+)*")  # fullmatch: `$` takes a trailing newline
WALL_FIELDS = {
    "id": True,
    "title": True,
    "severity": True,
    "kind": True,
    "engines": True,
    "summary": True,
    "signatures": True,
    "causes": False,
    "fixes": True,
    "references": True,
    "explain": False,
    "sources": False,
}
LOG_SIG_FIELDS = {
    "log",
    "then",
    "within",
    "ignore_case",
    "after",
    "reset",
    "unless",
    "times",
    "confidence",
    "confirm",
    "excerpt_times",
    "only_when",
}
RULE_FIELDS = {"when", "for", "scope"}
CAUSE_FIELDS = {"id", "title", "when", "fixes"}
SOURCE_FIELDS = ("message", "project", "versions", "at")
FIX_FIELDS = {"id", "title", "risk", "root", "actions", "verify", "note"}


class _Collector:
    """Gathers errors for one file so the user sees all of them at once."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[InputError] = []

    def err(self, message: str, container: Any = None, key: str | int | None = None) -> None:
        line = None
        if container is not None:
            line = line_of(container, key) if key is not None else getattr(container, "line", None)
        self.errors.append(InputError(message, self.file, line))

    def fields(
        self, data: Any, allowed: Iterable[str], what: str, required: Iterable[str] = ()
    ) -> bool:
        if not isinstance(data, dict):
            self.err(f"{what} must be a mapping", data)
            return False
        allowed = set(allowed)
        for key in data:
            if key not in allowed:
                self.err(
                    f"unknown field {key!r} in {what} (allowed: {', '.join(sorted(allowed))})",
                    data,
                    key,
                )
        for key in required:
            if key not in data:
                self.err(f"missing field {key!r} in {what}", data)
        return True

    def text(self, data: dict, key: str, what: str, required: bool = True) -> str:
        value = data.get(key)
        if value is None:
            if required:
                self.err(f"missing field {key!r} in {what}", data)
            return ""
        if not isinstance(value, str) or not value.strip():
            self.err(f"{what}: {key!r} must be non-empty text", data, key)
            return ""
        return value.strip()

    def choice(
        self, data: dict, key: str, choices: tuple[str, ...], what: str, default: str | None = None
    ) -> str:
        value = data.get(key, default)
        if value not in choices:
            self.err(
                f"{what}: {key!r} is {value!r}, expected one of {', '.join(choices)}", data, key
            )
            return choices[0]
        return value

    def regex(self, pattern: Any, container: Any, key: str | int, flags: int = 0) -> str:
        if not isinstance(pattern, str) or not pattern:
            self.err("a log signature must be a non-empty regex string", container, key)
            return ""
        try:
            re.compile(pattern, flags)
        except re.error as exc:
            self.err(f"regex does not compile: {exc} in {pattern!r}", container, key)
            return ""
        from spark_tui.kb.engines import engine_rejects

        reason = engine_rejects(pattern)
        if reason:
            self.err(f"regex not supported by the matcher: {reason} in {pattern!r}", container, key)
            return ""
        return pattern

    def conditions(
        self, raw: Any, container: Any, key: str | int, what: str
    ) -> tuple[Condition, ...]:
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not raw:
            self.err(f"{what} must be a list of conditions like 'gpu.sm_pct >= 90'", container, key)
            return ()
        out = []
        for i, text in enumerate(raw):
            where_c, where_k = (raw, i) if isinstance(raw, LList) else (container, key)
            try:
                cond = parse_condition(text)
            except ValueError as exc:
                self.err(f"{what}: {exc}", where_c, where_k)
                continue
            for path in (cond.path, getattr(cond.value, "path", None)):
                reason = unknown_fact_reason(path) if path else None
                if reason:
                    self.err(f"{what}: {reason}", where_c, where_k)
            out.append(cond)
        return tuple(out)


def _signatures(
    c: _Collector, raw: Any, data: dict
) -> tuple[tuple[LogSignature, ...], tuple[ReadingRule, ...]]:
    logs: list[LogSignature] = []
    rules: list[ReadingRule] = []
    if not isinstance(raw, list):
        c.err("'signatures' must be a list", data, "signatures")
        return (), ()
    for i, sig in enumerate(raw):
        where = f"signature {i + 1}"
        if not isinstance(sig, dict):
            c.err(f"{where} must be a mapping with 'log' or 'when'", raw, i)
            continue
        if "log" in sig:
            c.fields(sig, LOG_SIG_FIELDS, where)
            ignore_case = bool(sig.get("ignore_case", False))
            flags = re.IGNORECASE if ignore_case else 0
            pattern = c.regex(sig.get("log"), sig, "log", flags)
            then = c.regex(sig["then"], sig, "then", flags) if "then" in sig else None
            after = c.regex(sig["after"], sig, "after", flags) if "after" in sig else None
            reset = c.regex(sig["reset"], sig, "reset", flags) if "reset" in sig else None
            unless = c.regex(sig["unless"], sig, "unless", flags) if "unless" in sig else None
            if reset and not after:
                c.err(f"{where}: 'reset' only means something with 'after'", sig, "reset")
            within = sig.get("within", 30)
            if not isinstance(within, int) or isinstance(within, bool) or within < 1:
                c.err(f"{where}: 'within' must be a positive number of lines", sig, "within")
                within = 30
            times = sig.get("times", 1)
            if not isinstance(times, int) or isinstance(times, bool) or times < 1:
                c.err(f"{where}: 'times' must be a positive number of lines", sig, "times")
                times = 1
            excerpt = sig.get("excerpt_times", 0)
            if not isinstance(excerpt, int) or isinstance(excerpt, bool) or excerpt < 0:
                c.err(f"{where}: 'excerpt_times' must be a number of lines", sig, "excerpt_times")
                excerpt = 0
            elif excerpt and not after:
                c.err(
                    f"{where}: 'excerpt_times' only means something with 'after'",
                    sig,
                    "excerpt_times",
                )
            elif excerpt and sig.get("then"):
                c.err(f"{where}: 'excerpt_times' cannot go with 'then'", sig, "excerpt_times")
            confidence = c.choice(sig, "confidence", (FROM_LOG, SUSPECTED), where, FROM_LOG)
            confirm = (
                c.conditions(sig["confirm"], sig, "confirm", f"{where} confirm")
                if "confirm" in sig
                else ()
            )
            only_when = (
                c.conditions(sig["only_when"], sig, "only_when", f"{where} only_when")
                if "only_when" in sig
                else ()
            )
            if pattern:
                logs.append(
                    LogSignature(
                        pattern,
                        then or None,
                        within,
                        ignore_case,
                        line_of(raw, i) or 0,
                        after=after or None,
                        reset=reset or None,
                        unless=unless or None,
                        times=times,
                        confidence=confidence,
                        confirm=confirm,
                        excerpt_times=excerpt,
                        only_when=only_when,
                    )
                )
        elif "when" in sig:
            c.fields(sig, RULE_FIELDS, where)
            when = c.conditions(sig.get("when"), sig, "when", where)
            for_s = sig.get("for", 0)
            if not isinstance(for_s, (int, float)) or isinstance(for_s, bool) or for_s < 0:
                c.err(f"{where}: 'for' must be a number of seconds", sig, "for")
                for_s = 0
            scope = c.choice(sig, "scope", ("node", "cluster", "recipe"), where, default="node")
            if when:
                rules.append(ReadingRule(when, float(for_s), scope, line_of(raw, i) or 0))  # type: ignore[arg-type]  # scope is one of SCOPES, checked above
        else:
            c.err(f"{where} needs 'log' (a regex) or 'when' (conditions over readings)", raw, i)
    return tuple(logs), tuple(rules)


def _sources(c: _Collector, raw: Any, data: dict) -> tuple[MessageSource, ...]:
    """The source map: the upstream messages that say this wall, each with its project,
    the releases that print it and where (file:line at a tag)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        c.err("'sources' must list the upstream messages that say this wall", data, "sources")
        return ()
    out = []
    for i, src in enumerate(raw):
        where = f"source {i + 1}"
        if not c.fields(src, SOURCE_FIELDS, where, SOURCE_FIELDS):
            continue
        texts = {k: c.text(src, k, where) for k in SOURCE_FIELDS}
        message = texts["message"]
        unknown = sorted({n for n in placeholders(message) if n not in PLACEHOLDERS})
        if unknown:
            c.err(
                f"{where}: unknown placeholder(s) {', '.join(unknown)} in the message"
                f" (known: {', '.join(PLACEHOLDERS)}; write a brace as {{{{ or }}}})",
                src,
                "message",
            )
        elif lone_brace(message):
            c.err(
                f"{where}: a lone brace in the message (write it as {{{{ or }}}})", src, "message"
            )
        message, project, versions, at = (texts[k] for k in SOURCE_FIELDS)
        out.append(MessageSource(message, project, versions, at, line=line_of(raw, i) or 0))
    return tuple(out)


def _action(c: _Collector, raw: Any, container: Any, index: int, where: str) -> Action | None:
    """One action, checked against its kind's schema (spark_tui.action_schemas)."""
    from spark_tui.action_schemas import SCHEMAS

    if not isinstance(raw, dict) or "type" not in raw:
        c.err(
            f"{where}: an action is a mapping with a 'type' ({', '.join(SCHEMAS)})",
            container,
            index,
        )
        return None
    kind = SCHEMAS.get(raw["type"]) if isinstance(raw["type"], str) else None
    if kind is None:
        c.err(
            f"{where}: unknown action type {raw['type']!r} (known: {', '.join(SCHEMAS)})",
            raw,
            "type",
        )
        return None
    c.fields(raw, kind.required | kind.optional | {"type"}, f"{where} ({kind.name})", kind.required)
    params = {k: v for k, v in raw.items() if k != "type"}
    if "on" in params and params["on"] not in TARGETS:
        c.err(f"{where}: 'on' is {params['on']!r}, expected one of {', '.join(TARGETS)}", raw, "on")
    for message, key in kind.validate(params):
        c.err(f"{where}: {message}", raw, key)
    return Action(kind.name, _plain(params))


def _plain(value: Any) -> Any:
    """Strip the line-tracking containers so actions are ordinary data."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _fixes(c: _Collector, raw: Any, data: dict) -> tuple[Fix, ...]:
    if not isinstance(raw, list):
        c.err("'fixes' must be a list (empty for walls that need no fix)", data, "fixes")
        return ()
    fixes: list[Fix] = []
    seen: set[str] = set()
    for i, fx in enumerate(raw):
        where = f"fix {i + 1}"
        errors_before = len(c.errors)
        if not c.fields(fx, FIX_FIELDS, where, ("id", "title", "risk", "actions")):
            continue
        fid = c.text(fx, "id", where)
        if fid and not _ID.fullmatch(fid):
            c.err(f"{where}: id {fid!r} must be kebab-case", fx, "id")
        if fid in seen:
            c.err(f"{where}: duplicate fix id {fid!r}", fx, "id")
        seen.add(fid)
        actions_raw = fx.get("actions")
        actions: list[Action] = []
        if not isinstance(actions_raw, list) or not actions_raw:
            c.err(
                f"{where} ({fid}): a fix needs at least one action",
                fx,
                "actions" if "actions" in fx else None,
            )
        else:
            for j, a in enumerate(actions_raw):
                act = _action(c, a, actions_raw, j, f"{where} ({fid}) action {j + 1}")
                if act:
                    actions.append(act)
        verify = (
            c.conditions(fx["verify"], fx, "verify", f"{where} verify") if "verify" in fx else ()
        )
        root = fx.get("root", False)
        if not isinstance(root, bool):
            c.err(f"{where}: 'root' must be true or false", fx, "root")
        fixes.append(
            Fix(
                fid,
                c.text(fx, "title", where),
                c.choice(fx, "risk", RISKS, where),  # type: ignore[arg-type]  # one of RISKS: c.choice checked it
                bool(root),
                tuple(actions),
                verify,
                str(fx.get("note", "") or "").strip(),
            )
        )
        if len(c.errors) == errors_before:  # risk and root against what the actions do
            for problem in check_fix(fixes[-1]):
                at = (fx, problem.key) if problem.action is None else (actions_raw, problem.action)
                if problem.action is not None and isinstance(actions_raw[problem.action], LDict):
                    at = (actions_raw[problem.action], problem.key)
                c.err(f"{where} ({fid}): {problem.message}", *at)
    return tuple(fixes)


def _causes(c: _Collector, raw: Any, data: dict, fix_ids: set[str]) -> tuple[Cause, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        c.err("'causes' must be a list", data, "causes")
        return ()
    causes = []
    for i, cs in enumerate(raw):
        where = f"cause {i + 1}"
        if not c.fields(cs, CAUSE_FIELDS, where, ("id", "title", "fixes")):
            continue
        when = c.conditions(cs["when"], cs, "when", where) if "when" in cs else ()
        fixes = cs.get("fixes")
        if not isinstance(fixes, list) or not fixes:
            c.err(f"{where}: 'fixes' must list the fix ids this cause calls for", cs, "fixes")
            fixes = []
        for fid in fixes:
            if not isinstance(fid, str) or fid not in fix_ids:
                c.err(f"{where}: names fix {fid!r}, which this wall does not define", cs, "fixes")
        causes.append(
            Cause(
                c.text(cs, "id", where),
                c.text(cs, "title", where),
                when,
                tuple(str(f) for f in fixes),
            )
        )
    return tuple(causes)


def parse_wall(data: Any, file: str) -> Wall:
    """Validate one wall's YAML data; raise InputErrors listing every problem."""
    c = _Collector(file)
    if not isinstance(data, LDict):
        raise InputError(
            "a wall file must hold one mapping (id, title, severity, …)",
            file,
            getattr(data, "line", 1),
        )
    c.fields(data, WALL_FIELDS, "the wall", [k for k, req in WALL_FIELDS.items() if req])
    wid = c.text(data, "id", "the wall")
    if wid and not _ID.fullmatch(wid):
        c.err(f"id {wid!r} must be kebab-case", data, "id")
    engines = data.get("engines", [])
    if not isinstance(engines, list) or not engines or any(e not in ENGINES for e in engines):
        c.err(f"'engines' must list some of {', '.join(ENGINES)}", data, "engines")
        engines = []
    errors_before = len(c.errors)
    logs, rules = _signatures(c, data.get("signatures", []), data)
    kind = c.choice(data, "kind", KINDS, "the wall")
    if len(c.errors) > errors_before:
        pass  # the signature errors say enough
    elif "signatures" in data and not logs and not rules:
        c.err("a wall needs at least one signature", data, "signatures")
    if kind == "log" and not logs and "signatures" in data:
        c.err("a log wall needs at least one 'log' signature", data, "signatures")
    if kind in ("metric", "check") and not rules and "signatures" in data:
        c.err(f"a {kind} wall needs at least one 'when' signature", data, "signatures")
    fixes = _fixes(c, data.get("fixes", []), data)
    causes = _causes(c, data.get("causes"), data, {f.id for f in fixes})
    refs = data.get("references")
    if (
        not isinstance(refs, list)
        or not refs
        or not all(isinstance(r, str) and r.strip() for r in refs)
    ):
        c.err(
            "'references' must list the write-ups and upstream issues this wall comes from",
            data,
            "references",
        )
        refs = []
    sources = _sources(c, data.get("sources"), data)
    severity = c.choice(data, "severity", SEVERITIES, "the wall")
    if not fixes and severity != "info" and "fixes" in data and not data.get("explain"):
        c.err("a wall with no fix must say why in 'explain'", data, "fixes")
    if c.errors:
        raise InputErrors(c.errors)
    return Wall(
        id=wid,
        title=c.text(data, "title", "the wall"),
        severity=severity,  # type: ignore[arg-type]  # one of SEVERITIES, checked above
        kind=kind,  # type: ignore[arg-type]  # one of the kinds, checked above
        engines=tuple(engines),
        summary=" ".join(c.text(data, "summary", "the wall").split()),
        signatures=logs,
        rules=rules,
        causes=causes,
        fixes=fixes,
        references=tuple(r.strip() for r in refs),
        explain=" ".join(str(data.get("explain") or "").split()),
        source=file,
        sources=sources,
    )


@dataclass(frozen=True)
class KnowledgeBase:
    """All walls by id, in a stable order (by id)."""

    walls: dict[str, Wall]

    def __iter__(self):
        return iter(self.walls.values())

    def __len__(self) -> int:
        return len(self.walls)

    def get(self, wall_id: str) -> Wall:
        try:
            return self.walls[wall_id]
        except KeyError:
            raise InputError(f"unknown wall id {wall_id!r} (see 'spark-tui kb list')") from None


def load_dir(directory: Path) -> dict[str, Wall]:
    """Load every *.yaml in one directory; all errors at once, or nothing."""
    return load_id_dir(directory, parse_wall, "wall")


def load_knowledge(
    builtin: Path | None = None, user: Path | None = None, use_user: bool = True
) -> KnowledgeBase:
    """The built-in walls, then the user's (~/.config/spark-tui/knowledge/), which
    add walls or replace built-in ones with the same id."""
    walls = load_dir(builtin or paths.builtin_knowledge_dir())
    user_dir = user or paths.user_knowledge_dir()
    if use_user and is_dir(user_dir):
        walls.update(load_dir(user_dir))
    return KnowledgeBase(dict(sorted(walls.items())))
