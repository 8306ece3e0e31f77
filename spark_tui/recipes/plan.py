"""A launch plan: the ordered, exact steps that bring a recipe up on a cluster.

Built by spark_tui.recipes.render.render_plan; run step by step by
spark_tui.remedy.launch (through each node's Transport) and printed by
`spark-tui recipes render`. Every command here is final shell text, quoted by
spark_tui.shell: what is printed is what runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from spark_tui import shell
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.recipes.model import Recipe

# Step kinds: run once (ok = exit 0) | poll until Ray shows the GPUs | poll until
# the log shows a line | one chat request measured for tok/s | run once with a directory of
# this machine (`source`, an eugr mod) as a tar.gz on its standard input.
KINDS = ("run", "wait-ray", "wait-line", "smoke", "copy")
PHASES = ("preflight", "ray", "launch", "smoke")

_RAY_GPUS = re.compile(r"(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\s+GPU\b")


def ray_gpus(status_output: str) -> float | None:
    """Total GPUs in `ray status` output (`0.0/2.0 GPU`), or None when absent."""
    found = _RAY_GPUS.findall(status_output)
    return float(found[-1][1]) if found else None


@dataclass(frozen=True)
class LaunchStep:
    """One step on one node: its exact command and what it waits for."""

    id: str  # stop-leftovers | drop-caches | ray-head | ray-worker | wait-ray | serve | wait-join | wait-node-ready | wait-ready | smoke
    phase: str  # preflight | ray | launch | smoke (the bring-up's stages)
    node: str
    title: str
    kind: str  # run | wait-ray | wait-line | smoke
    command: str  # run: the command; wait-*: the poll command; smoke: the curl request
    timeout_s: float = 120.0
    interval_s: float = 5.0  # wait-*: seconds between polls
    expect: str = ""  # wait-line: the line to find in the poll output
    gpus: int = 0  # wait-ray: GPUs the Ray cluster must show
    may_fail: bool = False  # a failure is reported but does not stop the plan
    log_sources: tuple[str, ...] = ()  # commands whose output the monitor follows
    source: str = ""  # copy: the directory on this machine sent to the command's stdin
    # wait-line: consecutive steps with the same group are waited for together (every node's
    # own ready evidence, each until its own timeout): the first that fails — its container
    # stopped, a fatal line in its log — ends them all at once, naming its node
    group: str = ""

    def paste_lines(self) -> list[str]:
        """The step as shell text a person can paste (waits become `until` loops)."""
        head = f"# [{self.phase}] {self.title}"
        if self.kind == "wait-ray":
            want = shell.quote(f"/{self.gpus}(\\.0)? GPU")
            return [
                f"{head} (timeout {self.timeout_s:g} s)",
                f"until {self.command} 2>/dev/null | grep -Eq {want}; do sleep {self.interval_s:g}; done",
            ]
        if self.kind == "wait-line":
            together = (
                f"; waited for with every node's {self.group} wait: one that fails ends them all"
                if self.group
                else ""
            )
            return [
                f"{head} (timeout {self.timeout_s:g} s{together})",
                f"until {self.command} 2>/dev/null | grep -qF -- {shell.quote(self.expect)}; "
                f"do sleep {self.interval_s:g}; done",
            ]
        if self.kind == "copy":
            return [
                f"{head} (from this machine: tar -C {shell.quote(self.source)} -czf - . | this)",
                self.command,
            ]
        suffix = "  # may fail: nothing to stop" if self.may_fail else ""
        return [head, self.command + suffix]

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "phase": self.phase,
            "node": self.node,
            "title": self.title,
            "kind": self.kind,
            "command": self.command,
            "timeout_s": self.timeout_s,
            "interval_s": self.interval_s,
            "expect": self.expect,
            "gpus": self.gpus,
            "may_fail": self.may_fail,
            "log_sources": list(self.log_sources),
            "group": self.group,
            **({"source": self.source} if self.source else {}),
        }


@dataclass(frozen=True)
class LaunchPlan:
    """Ordered steps for every node of a cluster, from a recipe (+ profile, + --set)."""

    recipe: Recipe
    cluster: ClusterConfig
    steps: tuple[LaunchStep, ...]
    warnings: tuple[str, ...] = ()
    stamp: str = ""
    log_sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> commands

    @property
    def nodes(self) -> list[str]:
        """The nodes the plan uses, head first."""
        seen: list[str] = []
        for s in self.steps:
            if s.node not in seen:
                seen.append(s.node)
        return seen

    def phase(self, phase: str) -> list[LaunchStep]:
        return [s for s in self.steps if s.phase == phase]

    def references(self) -> list[str]:
        """The ${NAME} references its commands hold (a secret's value is filled in only
        when the command runs on the node)."""
        from spark_tui import redact

        return redact.references("\n".join(s.command for s in self.steps))

    def unresolved(self) -> list[str]:
        """The references with no value in spark-tui's environment now."""
        from spark_tui import redact

        return [n for n in self.references() if redact.value_of(n) is None]

    def to_text(self) -> str:
        """The whole plan as shell text, in order, with a header whenever the node changes."""
        r = self.recipe
        lines = [
            f"# spark-tui launch plan: {r.id}"
            + (f" (profile {r.profile})" if r.profile else "")
            + (f" revision {r.revision}" if r.revision else ""),
            f"# cluster: {self.cluster.source}"
            + (" (simulated: no cluster.yaml found)" if self.cluster.simulated else ""),
        ]
        if r.status == "broken":
            lines.append(
                f"# WARNING: broken ({', '.join(r.blocked_by)})"
                + (f"; use {r.instead} instead" if r.instead else "")
            )
        lines += [f"# note: {w}" for w in self.warnings]
        node = None
        roles = {n.name: n for n in self.cluster.nodes}
        for step in self.steps:
            if step.node != node:
                node = step.node
                cfg = roles.get(node)
                where = f"{cfg.role}, {cfg.fabric_ip or cfg.host}" if cfg else ""
                lines += ["", f"# ─── on {node} ({where}) ───"]
            lines += step.paste_lines()
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, object]:
        return {
            "recipe": self.recipe.id,
            "revision": self.recipe.revision,
            "profile": self.recipe.profile,
            "cluster": self.cluster.source,
            "simulated": self.cluster.simulated,
            "warnings": list(self.warnings),
            "steps": [s.to_json() for s in self.steps],
            "log_sources": {k: list(v) for k, v in self.log_sources.items()},
        }


def tar_dir(path: str) -> bytes:
    """A directory as tar.gz bytes (a copy step's standard input), its entries at the top."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(path, arcname=".")
    return buf.getvalue()
