"""verify-model-copies: compare the model's shards across nodes (size and sha256 per shard) and
repair a node's copy from a node whose copy agrees.

Every node reads its own copy (`find` + `stat` + `sha256sum`, read-only). For each shard the
copies that agree (same size and sha256) and are the most are the reference; on a tie, the copy
of the node listed first wins, and the node where the wall was seen is listed last. A node whose
shard differs or is missing fetches the reference over SSH from a node that has it (the nodes'
own SSH, as eugr's launcher copies between nodes), checks its sha256, moves its own file aside
(never deleted) and puts the fetched one in its place. Every command is journaled before it
runs; the preview shows the read commands and the form of each copy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_tui import shell
from spark_tui.action_schemas import SCHEMAS
from spark_tui.errors import InputError
from spark_tui.events import ActionProgress
from spark_tui.kb.schema import Action
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.model_paths import recipe_model_paths
from spark_tui.nodes.transport import NodeUnreachable
from spark_tui.recipes.model import Recipe
from spark_tui.recipes.render import HomePath, word
from spark_tui.remedy.actions.base import (
    ActionKind,
    PlanContext,
    PlannedAction,
    PlannedCommand,
    RunContext,
    VerifyResult,
    per_node_lines,
)
from spark_tui.remedy.render import BACKUP_SUFFIX

PATTERN = "*.safetensors"
PARTIAL = ".spark-tui-partial"
LIST_TIMEOUT_S = 3600.0  # sha256 of a 100+ GB checkpoint on every node
COPY_TIMEOUT_S = 7200.0
_SIZE = re.compile(r"^size (\d+) \./(.+)$")
_SHA = re.compile(r"^([0-9a-f]{64})  \./(.+)$")


def model_dirs(
    recipe: Recipe | None, cluster: ClusterConfig, override: str | None = None
) -> list[str]:
    """Where the recipe's model may be on a node's disk, most likely first (the same places the
    doctor's model-files check reads: spark_tui.nodes.model_paths.recipe_model_paths)."""
    if override:
        return [override]
    if recipe is None:
        return [cluster.models_dir]
    paths = recipe_model_paths(
        recipe.model.path or recipe.model.id, recipe.volumes, cluster.models_dir
    )
    return paths or [cluster.models_dir]


def _dir_word(path: str) -> str:
    if path.startswith(("~/", "$HOME/")):
        return word(HomePath("$HOME/" + path.split("/", 1)[1]))
    return word(path)


def _cd(paths: list[str]) -> str:
    """Enter the first of the model's places that exists on this node."""
    if len(paths) == 1:
        return f"cd {_dir_word(paths[0])}"
    return "{ " + " || ".join(f"cd {_dir_word(p)}" for p in paths) + "; } 2>/dev/null"


def list_command(paths: list[str]) -> str:
    """Every shard under the model directory: `size N ./REL` lines, then `SHA256  ./REL`."""
    find = f"find -L . -type f -name {shell.quote(PATTERN)} -print0 | sort -z"
    return (
        f"{_cd(paths)} && {find} | xargs -0r stat -Lc 'size %s %n' && {find} | xargs -0r sha256sum"
    )


def copy_command(paths: list[str], rel: str, sha: str, source: str, stamp: str) -> str:
    """On the damaged node: fetch REL from SOURCE over SSH, check it, move the old one aside."""
    remote = f"{_cd(paths)} && cat -- {shell.quote(rel)}"
    f = shell.quote(rel)
    part = shell.quote(rel + PARTIAL)
    backup = shell.quote(rel + BACKUP_SUFFIX.format(stamp=stamp))
    return (
        f"{_cd(paths)} && ssh -o BatchMode=yes {shell.quote(source)} {shell.quote(remote)}"
        f" > {part} && echo {shell.quote(f'{sha}  {rel}{PARTIAL}')} | sha256sum -c --quiet - && "
        f"{{ [ ! -e {f} ] && [ ! -L {f} ] || mv -- {f} {backup}; }} && mv -- {part} {f}"
    )


def parse_listing(text: str) -> dict[str, tuple[int, str]]:
    """`size`/sha256 lines → {relative path: (size, sha256)} (a file without both is left out)."""
    sizes: dict[str, int] = {}
    shas: dict[str, str] = {}
    for line in text.splitlines():
        if m := _SIZE.match(line):
            sizes[m.group(2)] = int(m.group(1))
        elif m := _SHA.match(line):
            shas[m.group(2)] = m.group(1)
    return {f: (sizes[f], shas[f]) for f in sizes if f in shas}


@dataclass(frozen=True)
class Repair:
    node: str
    file: str
    source: str  # the node whose copy is the reference
    size: int
    sha: str
    had: tuple[int, str] | None  # the damaged node's (size, sha256), None: missing


def compare(
    listings: Mapping[str, Mapping[str, tuple[int, str]]],
) -> tuple[list[Repair], list[str]]:
    """Repairs needed (nodes in preference order) and files no copy can be trusted for."""
    order = list(listings)
    files = sorted({f for v in listings.values() for f in v})
    repairs: list[Repair] = []
    unsure: list[str] = []
    for f in files:
        groups: dict[tuple[int, str], list[str]] = {}
        for node in order:
            if f in listings[node]:
                groups.setdefault(listings[node][f], []).append(node)
        best = max(groups.items(), key=lambda kv: (len(kv[1]), -order.index(kv[1][0])))
        ref, holders = best
        if len(groups) > 1 and len(holders) == 1 and len(order) > 2:
            unsure.append(f)  # three or more nodes and no two agree
            continue
        for node in order:
            if node not in holders:
                had = listings[node].get(f)
                repairs.append(Repair(node, f, holders[0], ref[0], ref[1], had))
    return repairs, unsure


def _ssh_target(node: NodeConfig) -> str:
    """How the other nodes reach this one over SSH (as `spark-tui doctor` checks from the head)."""
    return f"{node.user}@{node.host}" if node.user else node.host


class VerifyModelCopies(ActionKind):
    schema = SCHEMAS["verify-model-copies"]

    def generic_lines(self, params: Mapping[str, Any]) -> list[str]:
        return [
            list_command([params.get("dir") or "<model directory>"]),
            "# then on a node whose shard differs: fetch it from a node whose copy agrees",
        ]

    def plan(self, index: int, action: Action, ctx: PlanContext) -> PlannedAction:
        on = str(action.params.get("on", self.schema.default_target))
        nodes = list(ctx.cluster.select(on, ctx.seen))
        if ctx.seen in [n.name for n in nodes] and len(nodes) > 1:
            nodes = [n for n in nodes if n.name != ctx.seen] + [ctx.cluster.node(ctx.seen)]
        if len(nodes) < 2:
            raise InputError(f"fix {ctx.fix_id}: comparing model copies needs two nodes or more")
        paths = model_dirs(ctx.recipe, ctx.cluster, action.params.get("dir"))
        cmds = tuple(PlannedCommand(n.name, list_command(paths)) for n in nodes)
        targets = {n.name: _ssh_target(n) for n in nodes}
        return PlannedAction(
            index,
            self.name,
            cmds,
            patch={"dirs": paths, "stamp": ctx.stamp, "targets": targets},
        )

    def preview_lines(self, planned: PlannedAction) -> list[str]:
        paths = planned.patch["dirs"]
        return [
            f"# {planned.index + 1}. {self.name} on {', '.join(planned.nodes)}: "
            "every shard's size and sha256 (read-only)",
            *per_node_lines(planned.commands),
            "# then, on a node whose shard differs from the copies that agree (or lacks it):",
            copy_command(paths, "<SHARD>", "<SHA256>", "<NODE WITH THE GOOD COPY>", "<stamp>"),
        ]

    def _listings(
        self, planned: PlannedAction, ctx: RunContext
    ) -> dict[str, dict[str, tuple[int, str]]] | None:
        out: dict[str, dict[str, tuple[int, str]]] = {}
        for cmd in planned.commands:
            res = ctx.run_command(cmd, self.name, timeout=LIST_TIMEOUT_S)
            if res is None:
                ctx.fail(cmd.node, f"{self.name} on {cmd.node}: connection lost", self.name)
                return None
            if not res.ok:
                why = ctx.failure_text(res)
                ctx.fail(cmd.node, f"cannot read the model on {cmd.node}: {why}", self.name)
                return None
            out[cmd.node] = parse_listing(res.stdout)
        return out

    def run(self, planned: PlannedAction, ctx: RunContext) -> bool:
        listings = self._listings(planned, ctx)
        if listings is None:
            return False
        if not any(listings.values()):
            where = " or ".join(planned.patch["dirs"])
            return ctx.fail(None, f"no {PATTERN} under {where} on any node", self.name)
        repairs, unsure = compare(listings)
        if unsure:
            return ctx.fail(
                None, f"no two nodes agree on {', '.join(unsure)}: nothing copied", self.name
            )
        if not repairs:
            for node in listings:
                ctx.result.did(node, self.name)
            ctx.emit(ActionProgress(self.name, None, None, "ok", "every node's copy agrees"))
            return True
        paths, stamp = planned.patch["dirs"], planned.patch["stamp"]
        for r in repairs:
            was = f"size {r.had[0]}, sha256 {r.had[1][:12]}…" if r.had else "missing"
            ctx.emit(
                ActionProgress(
                    self.name,
                    r.node,
                    None,
                    "running",
                    f"{r.file} on {r.node} ({was}) differs from {r.source}'s "
                    f"(size {r.size}, sha256 {r.sha[:12]}…): copying it from {r.source}",
                )
            )
            cmd = PlannedCommand(
                r.node,
                copy_command(paths, r.file, r.sha, planned.patch["targets"][r.source], stamp),
            )
            res = ctx.run_command(cmd, self.name, timeout=COPY_TIMEOUT_S)
            if res is None:
                return ctx.fail(r.node, f"{self.name} on {r.node}: connection lost", self.name)
            if not res.ok:
                why = ctx.failure_text(res)
                return ctx.fail(
                    r.node, f"copying {r.file} from {r.source} to {r.node} failed: {why}", self.name
                )
            ctx.result.did(r.node, self.name)
            ctx.emit(ActionProgress(self.name, r.node, cmd.command, "ok"))
        return True

    def verify(self, planned: PlannedAction, ctx: RunContext) -> list[VerifyResult]:
        out = []
        listings: dict[str, dict[str, tuple[int, str]]] = {}
        for cmd in planned.commands:
            try:
                res = ctx.transports[cmd.node].run(cmd.command, timeout=LIST_TIMEOUT_S)
            except NodeUnreachable:
                out.append(VerifyResult(cmd.node, "its model copy could be read", False))
                continue
            listings[cmd.node] = parse_listing(res.stdout) if res.ok else {}
        repairs, unsure = compare(listings) if listings else ([], [])
        for node in listings:
            bad = [r.file for r in repairs if r.node == node] + unsure
            what = "every shard agrees with the other nodes' copies" + (
                f" (differs: {', '.join(bad)})" if bad else ""
            )
            out.append(VerifyResult(node, what, not bad))
        return out


KINDS: tuple[type[ActionKind], ...] = (VerifyModelCopies,)
