"""Shim tools for running launch plans and fixes for real through LocalTransport.

A temp bin dir holds `docker`, `ray`, `vllm`, `sudo`, `curl`, `cat` and `tail` scripts
that record every call (node, argv) to calls.log and behave just enough like
the real tools: `docker run` registers a Ray member, `docker exec` runs its
command on this machine (so `sh -c` payloads are parsed by a real shell),
`ray status` counts the members' GPUs, `vllm` writes a startup log (and each other Ray
member's worker log, which `tail` reads from that node's state dir), `sudo -n`
refuses when SUDO_NEEDS_PASSWORD is set, fakes drop_caches and reboot (a new
boot id) and runs anything else (mv), `curl` answers a chat completion.

Each node gets its own LocalTransport(env=…) with NODE, NODE_STATE,
SHIM_SHARED and SHIM_LOG set, so the shims know which node they run on.

`run_env` is what a session hands `run_fix`: the transports, the journal, the recipe
revisions and the lock of a state directory (the test's private real one by default),
and a clock (`StepClock`: waits pass at once).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spark_tui.clock import Clock
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.local import LocalTransport
from spark_tui.nodes.transport import CommandResult, Transport
from spark_tui.recipes.revisions import RevisionStore
from spark_tui.remedy.fixes import RunEnvironment
from spark_tui.remedy.journal import Journal
from spark_tui.state import StateDir

REAL_CAT = "/bin/cat" if Path("/bin/cat").exists() else "/usr/bin/cat"

SHIMS = {
    "docker": r"""
printf '%s\t%s\n' "$NODE" "docker $*" >> "$SHIM_LOG"
case "$1" in
  run)
    name=""; prev=""
    for a in "$@"; do [ "$prev" = "--name" ] && name="$a"; prev="$a"; done
    mkdir -p "$NODE_STATE/containers"; : > "$NODE_STATE/containers/$name"
    echo "$NODE $name $NODE_STATE" >> "$SHIM_SHARED/ray-members"
    echo 0123456789abcdef ;;
  stop) exit 0 ;;
  rename)
    if [ -f "$NODE_STATE/containers/$2" ]; then mv "$NODE_STATE/containers/$2" "$NODE_STATE/containers/$3";
    else echo "Error response from daemon: No such container: $2" >&2; exit 1; fi ;;
  ps) ls "$NODE_STATE/containers" 2>/dev/null; exit 0 ;;
  logs) echo "ray: started" ;;
  exec)
    shift
    if [ "$1" = "-d" ]; then shift; shift; "$@" >/dev/null 2>&1 & exit 0; fi
    shift; exec "$@" ;;
  *) exit 0 ;;
esac
""",
    "ray": r"""
printf '%s\t%s\n' "$NODE" "ray $*" >> "$SHIM_LOG"
n=$(wc -l < "$SHIM_SHARED/ray-members" 2>/dev/null || echo 0)
n=$((n + 0))
if [ "$n" -eq 0 ]; then echo "ConnectionError: could not find any running Ray instance" >&2; exit 1; fi
printf '======== Autoscaler status ========\nResources\n---------------------------------------------------------------\nUsage:\n 0.0/%s.0 GPU\n 0B/1.86GiB object_store_memory\n' "$n"
""",
    "vllm": r"""
printf '%s\t%s\n' "$NODE" "vllm $*" >> "$SHIM_LOG"
for a in "$@"; do printf '%s\n' "$a"; done > "$SHIM_SHARED/vllm-argv"
env > "$SHIM_SHARED/vllm-env"
echo "INFO Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]"
if [ -f "$SHIM_SHARED/crash" ]; then
  echo "Traceback (most recent call last):"
  echo "RuntimeError: Unsupported architecture for sparse decode fwd"
  exit 1
fi
echo "INFO Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00]"
# each Ray worker on another node logs its own load in Ray's worker log on that node
while read -r member _name state; do
  [ "$member" = "$NODE" ] && continue
  mkdir -p "$state/ray-logs"
  echo "INFO Loading weights took 1.00 seconds" >> "$state/ray-logs/worker-1.out"
done < "$SHIM_SHARED/ray-members" 2>/dev/null
echo "INFO:     Application startup complete."
""",
    "tail": r"""
# Ray's worker logs (/tmp/ray/session_latest/logs) are the node's own: kept in its state dir
set -- $(for a in "$@"; do
  case "$a" in
    /tmp/ray/session_latest/logs/*) ls "$NODE_STATE"/ray-logs/*.out 2>/dev/null || echo "$a" ;;
    *) printf '%s\n' "$a" ;;
  esac
done)
exec /usr/bin/tail "$@"
""",
    "sudo": r"""
printf '%s\t%s\n' "$NODE" "sudo $*" >> "$SHIM_LOG"
if [ -n "$SUDO_NEEDS_PASSWORD" ]; then echo "sudo: a password is required" >&2; exit 1; fi
[ "$1" = "-n" ] || { echo "sudo: shim only knows -n" >&2; exit 2; }
shift
# `sudo -n sh -c CMD` or `sudo -n PROGRAM ARGS…`
if [ "$1" = sh ] && [ "$2" = -c ]; then cmd="$3"; else cmd="$*"; fi
case "$cmd" in
  *drop_caches*) exit 0 ;;
  reboot) echo "boot-$(date +%s%N)" > "$NODE_STATE/boot_id"; exit 0 ;;
  *) exec sh -c "$cmd" ;;
esac
""",
    "curl": r"""
printf '%s\t%s\n' "$NODE" "curl $*" >> "$SHIM_LOG"
printf '{"id":"cmpl-1","choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"completion_tokens":64}}\n2.000000\n'
""",
    "cat": rf"""
if [ "$1" = /proc/sys/kernel/random/boot_id ] && [ -f "$NODE_STATE/boot_id" ]; then
  exec {REAL_CAT} "$NODE_STATE/boot_id"
fi
exec {REAL_CAT} "$@"
""",
}


class RecordingTransport(LocalTransport):
    """LocalTransport that also keeps the exact command lines it was given."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        super().__init__(name, env=env)
        self.commands: list[str] = []

    def run(self, command: str, timeout: float = 30.0, input: bytes | None = None) -> CommandResult:
        self.commands.append(command)
        return super().run(command, timeout=timeout, input=input)


@dataclass
class ShimWorld:
    """The shim bin dir, per-node state and the call log."""

    root: Path
    bin: Path
    shared: Path
    log: Path
    transports: dict[str, RecordingTransport] = field(default_factory=dict)

    def calls(self, node: str | None = None) -> list[str]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            n, _, call = line.partition("\t")
            if node is None or n == node:
                out.append(call)
        return out

    def node_state(self, node: str) -> Path:
        return self.root / "nodes" / node

    def env(self, node: str, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PATH=f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            NODE=node,
            NODE_STATE=str(self.node_state(node)),
            SHIM_SHARED=str(self.shared),
            SHIM_LOG=str(self.log),
        )
        env.update(extra)
        return env


def make_world(root: Path, cluster: ClusterConfig, **extra_env: str) -> ShimWorld:
    """Shims in root/bin and one RecordingTransport per cluster node."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in SHIMS.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body.lstrip("\n"))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    shared = root / "shared"
    shared.mkdir()
    world = ShimWorld(root, bin_dir, shared, root / "calls.log")
    for node in cluster.nodes:
        state = world.node_state(node.name)
        state.mkdir(parents=True)
        (state / "boot_id").write_text(f"boot-initial-{node.name}\n")
        world.transports[node.name] = RecordingTransport(
            node.name, world.env(node.name, **extra_env)
        )
    return world


class StepClock:
    """Simulated time for waits: sleep() moves now() on at once (no real waiting)."""

    def __init__(self) -> None:
        self.t = 1_000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds

    def wait(self, seconds: float, stop) -> bool:
        self.sleep(seconds)
        return stop.is_set()

    def real_seconds(self, seconds: float) -> float:
        return 0.0  # its waits move now() on at once

    @property
    def rate(self) -> float:
        return 1.0


def run_env(
    transports: Mapping[str, Transport],
    clock: Clock | None = None,
    state: StateDir | None = None,
) -> RunEnvironment:
    """The environment a session gives a run: `state` (default: the real state directory,
    private to each test) holds the journal, revisions and lock."""
    state = state or StateDir.real()
    return RunEnvironment(
        transports,
        Journal(state.journal_path, simulated=state.simulated),
        RevisionStore(state.revisions_dir),
        state,
        clock or StepClock(),
    )


def journal() -> Journal:
    """The real journal (private to each test)."""
    return Journal(StateDir.real().journal_path)


def revisions() -> RevisionStore:
    """The real recipe revisions (private to each test)."""
    return RevisionStore(StateDir.real().revisions_dir)
