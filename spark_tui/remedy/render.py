"""Render a fix's typed actions to the exact commands they run.

`preview_lines(fix)` is the cluster-free rendering (placeholders shown as
<node.fabric_if>); the remediation engine renders the same actions per node
with real values through the same functions, so preview == run.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_tui import shell
from spark_tui.kb.schema import Action, Fix
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.model import Recipe

BACKUP_SUFFIX = ".spark-tui-backup-{stamp}"
# Stop every container spark-tui started (they carry the label), whatever the recipe.
GENERIC_STOP_STACK = (
    "ids=$(docker ps -q --filter label=spark-tui.recipe); "
    'if [ -n "$ids" ]; then docker stop -t 30 $ids; fi'
)
_TARGET_WORDS = {
    "all": "every node",
    "head": "the head",
    "workers": "every worker",
    "seen": "the node where it was seen",
}


def _placeholder_values(values: Mapping[str, object] | None, command: str) -> dict[str, object]:
    out: dict[str, object] = dict(values or {})
    for name in shell.placeholders(command):
        out.setdefault(name, f"<{name}>")
    return out


def render_run(action: Action, values: Mapping[str, object] | None = None) -> str:
    """The command line of a `run` action (sudo -n when it needs root)."""
    template = str(action.params["command"])
    if values is not None:
        command = shell.fill(template, values)
        return shell.as_root(command) if action.params.get("root") else command
    command = shell._PLACEHOLDER.sub(lambda m: f"<{m.group(1)}>", template)
    if not action.params.get("root"):
        return command
    # cluster-free: <node.fabric_if> stands where a quoted value will, not a redirection
    if shell.simple_words(shell._PLACEHOLDER.sub("X", template)) is not None:
        return "sudo -n " + command
    return shell.as_root(command)


def render_action(
    action: Action, values: Mapping[str, object] | None = None, stamp: str = "<timestamp>"
) -> list[str]:
    """Exact commands (or recipe changes, as comments) for one action."""
    p = action.params
    kind = action.type
    if kind == "run":
        return [render_run(action, values)]
    if kind == "reboot":
        return [shell.as_root("reboot")]
    if kind == "move-aside":
        path = str(p["path"])
        cmd = (
            f"mv -n -- {shell.quote(path)} {shell.quote(path + BACKUP_SUFFIX.format(stamp=stamp))}"
        )
        return [shell.as_root(cmd) if p.get("root", True) else cmd]
    if kind == "patch-recipe":
        target = p.get("target", "serve")
        lines = [
            f"# recipe ({target}): set {k} {'' if v is True else v}".rstrip()
            for k, v in (p.get("set_args") or {}).items()
        ]
        lines += [f"# recipe ({target}): remove {k}" for k in p.get("unset_args") or []]
        lines += [f"# recipe ({target}): env {k}={v}" for k, v in (p.get("set_env") or {}).items()]
        lines += [f"# recipe ({target}): unset env {k}" for k in p.get("unset_env") or []]
        return lines
    if kind == "restart-ray":
        args = " ".join(
            f"{k} {shell.quote(v)}" if v is not True else k
            for k, v in (p.get("args") or {}).items()
        )
        env = shell.env_prefix({k: v for k, v in (p.get("env") or {}).items()})
        return ["ray stop --force", f"{env}ray start {args}".rstrip()]
    if kind == "switch-recipe":
        return [
            f"# switch to recipe {p.get('to') or '(the one the recipe names as its replacement)'}"
        ]
    if kind == "stop-stack":
        return [GENERIC_STOP_STACK]
    if kind == "relaunch":
        return ["# stop the stack on every node, drop caches, run the launch plan again"]
    if kind == "collect-evidence":
        return [f"# collect into the incident report: {', '.join(p.get('items', []))}"]
    return [f"# {kind}"]


def preview_lines(fix: Fix) -> list[str]:
    """Every command of a fix, cluster-free, with where it runs."""
    lines: list[str] = []
    for action in fix.actions:
        where = _TARGET_WORDS.get(action.on, action.on)
        commands = render_action(action)
        if action.type in ("run", "reboot", "move-aside", "restart-ray", "stop-stack"):
            lines.append(f"# on {where}:")
        lines.extend(commands)
    return lines


# ---- per node, with real values (the engine's rendering; preview == run) ----------


def node_values(cluster: ClusterConfig, node: NodeConfig) -> dict[str, object]:
    """Placeholder values for one node: {node.*} and {head.*}."""
    values = node.placeholder_values(cluster.head)
    values["head.fabric_if"] = cluster.head.fabric_if
    return values


BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
PSTORE_TAIL = "find /sys/fs/pstore -maxdepth 1 -type f -exec tail -v -n 400 {} +"


def evidence_command(item: str, recipe: Recipe | None, stamp: str) -> str:
    """The read-only command that collects one evidence item on a node."""
    from spark_tui.nodes.commands import SAMPLE, sample_script

    head = recipe.head_container if recipe else "ray-head"
    if item == "log-tail":
        if recipe is not None:
            return shell.join(["docker", "exec", head, "tail", "-n", "500", recipe.serve.log])
        return 'for c in $(docker ps -aq --filter label=spark-tui.recipe); do docker logs --tail 500 "$c" 2>&1; done'
    if item == "py-spy":
        return shell.join(
            [
                "docker",
                "exec",
                head,
                "sh",
                "-c",
                'for p in $(pgrep -f "vllm|sglang|ray::"); do py-spy dump --pid "$p"; done',
            ]
        )
    if item == "readings":
        return sample_script(SAMPLE)
    if item == "kernel-log-previous-boot":
        return shell.as_root("journalctl -b -1 -k -n 300 --no-pager")
    if item == "pstore":
        # one program, so a sudoers rule can allow exactly it (tail -v names each file)
        return shell.as_root(PSTORE_TAIL)
    if item == "nvidia-bug-report":
        # not run for the user (minutes of work, a large file): the report says what to run
        out = f"/tmp/nvidia-bug-report-{stamp}.log.gz"
        command = f"sudo nvidia-bug-report.sh --output-file {out}"
        return "echo " + shell.quote(f"Run this on the node for NVIDIA's bug report: {command}")
    if item == "nccl-libraries":
        return shell.join(
            [
                "docker",
                "exec",
                head,
                "sh",
                "-c",
                "find / -xdev -name 'libnccl.so.2*' -type f 2>/dev/null | xargs -r sha256sum",
            ]
        )
    raise ValueError(f"unknown evidence item {item!r}")
