"""What fix actions render from: a node's placeholder values, the read-only evidence
commands, the generic stop of the stack, the backup suffix; and `preview_lines(fix)`, the
cluster-free rendering of a fix (placeholders shown as <node.fabric_if>) through the same
action kinds that render it per node (spark_tui.remedy.actions), so preview == run.
"""

from __future__ import annotations

from spark_tui import shell
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.model import Recipe

BACKUP_SUFFIX = ".spark-tui-backup-{stamp}"
# Stop every container of a serving stack that is up, whoever started it: spark-tui's (they
# carry the label) and other launchers' (named for vLLM, SGLang or Ray, as eugr's vllm_node).
# Stopped, not removed: their logs stay readable, and a restart policy does not bring them back.
# (docker ANDs filters of different keys: the label and the names are two listings.)
_STACK_IDS = (
    "docker ps -q --filter label=spark-tui.recipe; "
    "docker ps -q --filter name=vllm --filter name=sglang --filter name=ray"
)
GENERIC_STOP_STACK = f'ids=$({_STACK_IDS}); [ -z "$ids" ] || docker stop -t 30 $ids'
# what is still up of a serving stack on a node (the stop's check)
STACK_UP = (
    "docker ps --format '{{.Names}}' --filter label=spark-tui.recipe; "
    "docker ps --format '{{.Names}}' --filter name=vllm --filter name=sglang --filter name=ray"
)


def preview_lines(fix: Fix) -> list[str]:
    """Every command of a fix, cluster-free, with where it runs (kb show, triage)."""
    from spark_tui.remedy.actions import kind
    from spark_tui.remedy.actions.base import TARGET_WORDS

    lines: list[str] = []
    for action in fix.actions:
        k = kind(action.type)
        if k.on_nodes and not k.relaunches and not k.collects_evidence:
            lines.append(f"# on {TARGET_WORDS.get(action.on, action.on)}:")
        lines.extend(k.generic_lines(action.params))
    return lines


# ---- per node, with real values (the engine's rendering; preview == run) ----------


def node_values(cluster: ClusterConfig, node: NodeConfig) -> dict[str, object]:
    """Placeholder values for one node: {node.*}, {head.*} and {peer.*}, the next node in
    cluster.yaml's order (the first after the last; the node itself when it is alone), so
    that a check run on every node covers every node's fabric link."""
    values = node.placeholder_values(cluster.head)
    values["head.fabric_if"] = cluster.head.fabric_if
    names = [n.name for n in cluster.nodes]
    peer = cluster.nodes[(names.index(node.name) + 1) % len(names)] if node.name in names else node
    values["peer.name"] = peer.name
    values["peer.fabric_ip"] = peer.fabric_ip or peer.host
    return values


BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
PSTORE_TAIL = "find /sys/fs/pstore -maxdepth 1 -type f -exec tail -v -n 400 {} +"


def _no_container(item: str) -> str:
    """A command that fails, saying why: an item read inside the serving container, on a node
    where no serving container is known (never an empty success)."""
    why = f"{item}: no serving container is known on this node (no recipe, none found running)"
    return f"echo {shell.quote(why)} >&2; false"


def evidence_command(
    item: str,
    recipe: Recipe | None,
    stamp: str,
    role: str = "head",
    container: str | None = None,
) -> str:
    """The read-only command that collects one evidence item on a node (a worker's serving
    container is the recipe's worker container). Without a recipe, `container` is the serving
    container found running there (an attached deployment: eugr's vllm_node, …); with neither,
    the items read in a container fail, saying so."""
    from spark_tui.nodes.commands import SAMPLE, sample_script

    if recipe is None:
        head = container or ""
    else:
        head = recipe.head_container if role == "head" else recipe.worker_container
    if item == "log-tail":
        if recipe is not None and role == "head":
            return shell.join(["docker", "exec", head, "tail", "-n", "500", recipe.serve.log])
        if head:  # a worker has no serve log (nor an attached container): its own output
            return shell.join(["docker", "logs", "--tail", "500", head]) + " 2>&1"
        return _no_container(item)
    if item in ("py-spy", "nccl-libraries") and not head:
        return _no_container(item)
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
        # into the user's own home, never a shared /tmp where another user of the node can
        # plant a symlink at a name this predictable (root would write through it)
        out = f'"$HOME"/nvidia-bug-report-{stamp}.log.gz'
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
