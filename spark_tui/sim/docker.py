"""Containers on a simulated node, and the `docker` command that manages them."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.sim.timedlog import TimedLog

if TYPE_CHECKING:
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.ray import RayDaemon


@dataclass
class SimContainer:
    node: SimNode
    name: str
    image: str
    command: list[str]
    env: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    restart_policy: str = "no"
    auto_remove: bool = False
    network: str = "default"
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    state: str = "created"  # created | running | exited
    exit_code: int = 0
    restart_count: int = 0
    stopped_by_user: bool = False
    log: TimedLog = field(default_factory=TimedLog)
    files: dict[str, TimedLog | str] = field(default_factory=dict)
    ray: RayDaemon | None = None
    main_blocks: bool = True  # the main process keeps running (sleep, ray --block, a server)
    main_engine: object = None  # the engine when it is the main process: the container ends with it
    # the main process (PID 1) is a shell running the program as its child (`sh -c '…'` without
    # `exec`): PID 1 has no default action for SIGTERM, so `docker stop` waits out its timeout
    # and then kills (SIGKILL) the shell and the program with it
    main_is_shell: bool = False
    id: str = ""
    image_id: str = ""  # the image it was created from (a tag moved later does not change it)

    def __post_init__(self) -> None:
        if not self.image_id:
            self.image_id = image_id(self.node, self.image) or default_image_id(self.image)
        if not self.id:
            self.id = hashlib.sha256(
                f"{self.node.name}:{self.name}:{self.created_at}".encode()
            ).hexdigest()

    @property
    def running(self) -> bool:
        self.settle()
        return self.state == "running"

    def settle(self) -> None:
        """A container whose main process (an engine) died has exited (code 1)."""
        e = self.main_engine
        if self.state == "running" and e is not None:
            now = self.node.world.clock.now()
            if not e.alive(now):  # type: ignore[attr-defined]  # a started main engine is an Engine (a PendingRank never runs)
                self.state = "exited"
                self.exit_code = 1
                self.finished_at = e.dead_at  # type: ignore[attr-defined]  # a started main engine is an Engine (a PendingRank never runs)
                self.main_engine = None

    def start(self, at: float) -> None:
        from spark_tui.sim.shell import run_main_process

        self.main_engine = None
        self.state = "running"
        self.started_at = at
        self.finished_at = None
        run_main_process(self)

    def stop(self, at: float, code: int, hard: bool) -> None:
        world = self.node.world
        for e in world.engines_in(self):
            e.kill(at, hard=hard, reason="container stopped")
        if self.ray is not None:
            from spark_tui.sim.ray import ray_stop

            ray_stop(world, self.node, self)
        self.state = "exited"
        self.exit_code = code
        self.finished_at = at

    def on_host_reboot(self, at: float) -> None:
        if self.running:
            self.ray = None
            self.state = "exited"
            self.exit_code = 255
            self.finished_at = at

    def status(self, now: float) -> str:
        self.settle()
        if self.state == "running":
            return f"Up {_ago(now - (self.started_at or now))}"
        if self.state == "created":
            return "Created"
        return f"Exited ({self.exit_code}) {_ago(now - (self.finished_at or now))} ago"

    def ps_json(self, now: float) -> str:
        self.settle()
        created = dt.datetime.fromtimestamp(self.created_at, dt.timezone.utc)
        cmd = " ".join(self.command)
        return json.dumps(
            {
                "Command": json.dumps(cmd[:20] + "…" if len(cmd) > 20 else cmd),
                "CreatedAt": created.strftime("%Y-%m-%d %H:%M:%S +0000 UTC"),
                "ID": self.id[:12],
                "Image": self.image,
                "Labels": ",".join(f"{k}={v}" for k, v in self.labels.items()),
                "LocalVolumes": "0",
                "Mounts": "",
                "Names": self.name,
                "Networks": self.network,
                "Ports": "",
                "RunningFor": f"{_ago(now - self.created_at)} ago",
                "Size": "0B",
                "State": self.state,
                "Status": self.status(now),
            },
            separators=(",", ":"),
        )

    def inspect(self, now: float) -> dict[str, object]:
        self.settle()

        def iso(t: float | None) -> str:
            if t is None:
                return "0001-01-01T00:00:00Z"
            return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

        return {
            "Id": self.id,
            "Created": iso(self.created_at),
            "Path": self.command[0] if self.command else "",
            "Args": self.command[1:],
            "State": {
                "Status": self.state,
                "Running": self.running,
                "Paused": False,
                "Restarting": False,
                "OOMKilled": False,
                "Dead": False,
                "Pid": 0 if not self.running else 4242,
                "ExitCode": self.exit_code,
                "Error": "",
                "StartedAt": iso(self.started_at),
                "FinishedAt": iso(self.finished_at),
            },
            "Image": self.image_id,
            "Name": "/" + self.name,
            "RestartCount": self.restart_count,
            "HostConfig": {
                "NetworkMode": self.network,
                "RestartPolicy": {"Name": self.restart_policy, "MaximumRetryCount": 0},
                "AutoRemove": self.auto_remove,
            },
            "Config": {
                "Image": self.image,
                "Env": [f"{k}={v}" for k, v in self.env.items()],
                "Cmd": self.command,
                "Labels": self.labels,
            },
        }

    def read_file(self, path: str, now: float) -> str | None:
        f = self.files.get(path)
        if f is None:
            return None
        return f if isinstance(f, str) else f.text(now)


def default_image_id(ref: str) -> str:
    """The ID a simulated image reference has until a test moves its tag."""
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()


def image_id(node: SimNode, ref: str) -> str | None:
    """The ID of the image `ref` names on the node: a tag (first used: its default ID), or an
    image ID (`sha256:…`) the node holds; None for an ID it does not hold."""
    if ref.startswith("sha256:"):
        return ref if ref in node.image_ids else None
    if ref not in node.images:
        node.images[ref] = default_image_id(ref)
    node.image_ids.add(node.images[ref])
    return node.images[ref]


def move_tag(node: SimNode, ref: str, new_id: str) -> None:
    """A pull or build that points `ref` at another image: the old one stays on the node."""
    image_id(node, ref)
    node.images[ref] = new_id
    node.image_ids.add(new_id)


def _ago(s: float) -> str:
    s = max(0.0, s)
    if s < 1:
        return "Less than a second"
    if s < 60:
        return f"{int(s)} seconds"
    if s < 3600:
        m = int(s // 60)
        return "About a minute" if m == 1 else f"{m} minutes"
    h = int(s // 3600)
    if h < 48:
        return "About an hour" if h == 1 else f"{h} hours"
    return f"{int(h // 24)} days"


# ---------------------------------------------------------------------------- the CLI --

_RUN_VALUE_OPTS = {
    "--name",
    "-e",
    "--env",
    "-v",
    "--volume",
    "--network",
    "--net",
    "--gpus",
    "--ipc",
    "--shm-size",
    "--restart",
    "-l",
    "--label",
    "--entrypoint",
    "--ulimit",
    "--device",
    "-w",
    "--workdir",
    "--cap-add",
    "--pid",
    "-p",
    "--publish",
    "--memory",
    "-m",
    "--env-file",
    "--user",
    "-u",
    "--runtime",
    "--hostname",
    "--add-host",
    "--security-opt",
    "--cpus",
    "--log-driver",
    "--log-opt",
    "--stop-timeout",
    "--mount",
}
_RUN_FLAGS = {
    "-d",
    "--detach",
    "-i",
    "-t",
    "-it",
    "-ti",
    "-itd",
    "-dit",
    "--rm",
    "--privileged",
    "--init",
    "--interactive",
    "--tty",
}


def parse_run(args: list[str]) -> tuple[dict[str, list[str]], set[str], list[str]] | str:
    """docker run's options, flags and the image + command; or an error message."""
    opts: dict[str, list[str]] = {}
    flags: set[str] = set()
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            return opts, flags, args[i:]
        val: str | None = None
        key, val = a.split("=", 1) if a.startswith("--") and "=" in a else (a, None)
        if key in _RUN_VALUE_OPTS:
            if val is None:
                if i + 1 >= len(args):
                    return f"flag needs an argument: {key}"
                val = args[i + 1]
                i += 1
            opts.setdefault(key, []).append(val)
        elif key in _RUN_FLAGS or (
            key.startswith("-") and not key.startswith("--") and set(key[1:]) <= set("dit")
        ):
            flags.add(key)
        else:
            return f"unknown flag: {key}"
        i += 1
    return opts, flags, []


def env_from_opts(opts: dict[str, list[str]], host_env: dict[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in opts.get("-e", []) + opts.get("--env", []):
        if "=" in item:
            k, v = item.split("=", 1)
            env[k] = v
        elif item in host_env:
            env[item] = host_env[item]
    return env


def find(node: SimNode, ref: str) -> SimContainer | None:
    if ref in node.containers:
        return node.containers[ref]
    for c in node.containers.values():
        if len(ref) >= 4 and c.id.startswith(ref):
            return c
    return None


def no_such(ref: str) -> str:
    return f"Error response from daemon: No such container: {ref}\n"
