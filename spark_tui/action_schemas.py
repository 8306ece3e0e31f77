"""What each fix action kind accepts and promises: its parameters, where it runs, its risk
floor, whether it runs as root — the floor both the knowledge base (which validates fixes
against it) and the remedy (whose registry runs them, spark_tui.remedy.actions) stand on.
It imports nothing of spark_tui: a kind's schema is data and small checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Problems = list[tuple[str, str | None]]  # (message, the field it is about)

EVIDENCE_ITEMS: tuple[str, ...] = (
    "log-tail",
    "py-spy",
    "readings",
    "kernel-log-previous-boot",
    "pstore",
    "nvidia-bug-report",
    "nccl-libraries",
)
PATCH_TARGETS: tuple[str, ...] = ("serve", "ray", "docker")
PATCH_KEYS: tuple[str, ...] = ("set_args", "unset_args", "set_env", "unset_env")


def _nothing(_params: Mapping[str, Any]) -> Problems:
    return []


@dataclass(frozen=True)
class ActionSchema:
    """One kind of action, as a fix declares it."""

    name: str
    summary: str
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    default_target: str = "seen"
    min_risk: str = "safe"  # a fix with this action is at least this risky
    needs_root: bool = False  # always runs as root
    root_default: bool | None = None  # the `root:` parameter's default (None: it has none)
    relaunches: bool = False  # ends in a running engine (a launch plan)
    changes_recipe: bool = False
    replaces_recipe: bool = False  # another recipe from now on (not a revision)
    collects_evidence: bool = False  # read-only evidence gathering
    on_nodes: bool = True  # runs commands on nodes (the preview names where)
    check: Callable[[Mapping[str, Any]], Problems] = _nothing

    def validate(self, params: Mapping[str, Any]) -> Problems:
        """Problems with an action's parameters beyond the field names."""
        return self.check(params)

    def runs_root(self, params: Mapping[str, Any]) -> bool:
        """Whether an action with these parameters runs something as root (sudo -n)."""
        if self.needs_root:
            return True
        root = self.root_default is not None and bool(params.get("root", self.root_default))
        undo = params.get("undo")
        return root or (isinstance(undo, Mapping) and bool(undo.get("root", root)))


UNDO_FIELDS: frozenset[str] = frozenset({"command", "before", "root", "restores"})


def _check_command(params: Mapping[str, Any]) -> Problems:
    command = params.get("command")
    if not (isinstance(command, str) and command.strip()):
        return [("'command' must be a non-empty shell command", "command")]
    return _check_undo(params) if "undo" in params else []


def _check_undo(params: Mapping[str, Any]) -> Problems:
    """`undo:` on a run: how to set a node back when a later step or the fix's check fails
    (`command`, with `{before}`: the value of the node fact `before` read on that node just
    before the change; `root`, default the action's; `restores`: what it sets back, in words,
    e.g. `MTU {before}`). Which facts exist is the knowledge base's to check."""
    undo = params["undo"]
    if not isinstance(undo, Mapping):
        return [("'undo' must be a mapping (command, before, root, restores)", "undo")]
    unknown = sorted(str(k) for k in undo if k not in UNDO_FIELDS)
    if unknown:
        return [
            (
                f"'undo' has unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(UNDO_FIELDS))})",
                "undo",
            )
        ]
    command = undo.get("command")
    if not (isinstance(command, str) and command.strip()):
        return [("'undo' needs 'command', a non-empty shell command", "undo")]
    before = undo.get("before")
    if before is not None and not (isinstance(before, str) and before.strip()):
        return [("'undo': 'before' must name a node fact (e.g. net.fabric_mtu)", "undo")]
    uses = "{before}" in command or "{before}" in str(undo.get("restores", ""))
    if uses and before is None:
        return [("'undo' uses {before} but names no 'before' fact to read", "undo")]
    if "root" in undo and not isinstance(undo["root"], bool):
        return [("'undo': 'root' must be true or false", "undo")]
    if "restores" in undo and not (isinstance(undo["restores"], str) and undo["restores"].strip()):
        return [("'undo': 'restores' must say what it sets back (e.g. 'MTU {before}')", "undo")]
    return []


def _check_path(params: Mapping[str, Any]) -> Problems:
    path = params.get("path")
    if not (isinstance(path, str) and path.startswith("/") and "\n" not in path):
        return [("'path' must be an absolute path", "path")]
    return []


def _check_dir(params: Mapping[str, Any]) -> Problems:
    d = params.get("dir")
    if d is not None and not (
        isinstance(d, str) and d.startswith(("/", "~/", "$HOME/")) and "\n" not in d
    ):
        return [("'dir' must be an absolute path or start with ~/", "dir")]
    return []


def _check_items(params: Mapping[str, Any]) -> Problems:
    items = params.get("items")
    if not isinstance(items, list) or not items or any(i not in EVIDENCE_ITEMS for i in items):
        return [(f"'items' must list some of {', '.join(EVIDENCE_ITEMS)}", "items")]
    return []


def _check_patch(params: Mapping[str, Any]) -> Problems:
    problems: Problems = []
    if not any(k in params for k in PATCH_KEYS):
        problems.append(("a recipe patch must set or unset something", None))
    if params.get("target", "serve") not in PATCH_TARGETS:
        problems.append((f"'target' must be one of {', '.join(PATCH_TARGETS)}", "target"))
    for key in ("set_args", "set_env"):
        if key in params and not isinstance(params[key], dict):
            problems.append((f"{key!r} must be a mapping", key))
    for key in ("unset_args", "unset_env"):
        if key in params and not isinstance(params[key], list):
            problems.append((f"{key!r} must be a list", key))
    return problems


SCHEMAS: dict[str, ActionSchema] = {
    s.name: s
    for s in (
        ActionSchema(
            "run",
            "run a shell command on nodes ({node.fabric_if}, {head.fabric_ip}, {model.id}… "
            "filled and quoted)",
            required=frozenset({"command"}),
            optional=frozenset({"on", "root", "undo"}),
            root_default=False,
            check=_check_command,
        ),
        ActionSchema(
            "reboot",
            "reboot nodes and wait until they answer with a new boot id",
            optional=frozenset({"on"}),
            min_risk="destructive",
            needs_root=True,
        ),
        ActionSchema(
            "move-aside",
            "move a file aside to PATH.spark-tui-backup-<timestamp> (never delete)",
            required=frozenset({"path"}),
            optional=frozenset({"on", "root"}),
            min_risk="destructive",
            root_default=True,
            check=_check_path,
        ),
        ActionSchema(
            "stop-stack",
            "stop the serving containers and Ray, whoever started them (their logs stay readable)",
            optional=frozenset({"on"}),
            default_target="all",
            min_risk="disruptive",
        ),
        ActionSchema(
            "verify-model-copies",
            "compare the model's shards on every node (size and sha256) and repair a node's copy "
            "from a node whose copy agrees (the old file moved aside)",
            optional=frozenset({"on", "dir"}),
            default_target="all",
            min_risk="disruptive",
            check=_check_dir,
        ),
        ActionSchema(
            "collect-evidence",
            "gather evidence into the incident report before anything restarts (read-only)",
            required=frozenset({"items"}),
            optional=frozenset({"on"}),
            collects_evidence=True,
            check=_check_items,
        ),
        ActionSchema(
            "patch-recipe",
            "a new revision of the recipe with a diff (undo restores the previous one)",
            optional=frozenset({"target", *PATCH_KEYS}),
            changes_recipe=True,
            on_nodes=False,
            check=_check_patch,
        ),
        ActionSchema(
            "switch-recipe",
            "use another recipe from now on (default: the one the current recipe names instead)",
            optional=frozenset({"to"}),
            changes_recipe=True,
            replaces_recipe=True,
            on_nodes=False,
        ),
        ActionSchema(
            "restart-ray",
            "stop and start Ray on every node with these arguments and daemon environment",
            optional=frozenset({"args", "env"}),
            default_target="all",
            min_risk="disruptive",
            changes_recipe=True,
        ),
        ActionSchema(
            "relaunch",
            "stop the stack, drop caches, run the launch plan again (smoke request, tok/s)",
            optional=frozenset({"clean"}),
            default_target="all",
            min_risk="disruptive",
            relaunches=True,
        ),
    )
}
