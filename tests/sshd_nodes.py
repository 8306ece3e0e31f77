"""Real OpenSSH sshd processes on loopback addresses, as cluster nodes for tests.

Each node is `/usr/sbin/sshd -D -e -f CONFIG` on its own address (127.0.0.2,
127.0.0.3, …) and free port, with a throw-away host key; the client side is a
private HOME with its own key pair, ~/.ssh/config (one Host alias per node) and
known_hosts. sshd's `SetEnv PATH=…` puts a node-specific bin directory first,
holding shim tools that print real captured output (nvidia-smi, docker, ip,
ibdev2netdev, dmesg, ps, sudo, ping, ssh) and record every call to the node's
commands.log.

Use from any test file:

    from tests.sshd_nodes import sshd_cluster  # noqa: F401  (the pytest fixture)

    def test_x(sshd_cluster):
        t = sshd_cluster.transport("spark1")
        ...

API
- fixture `sshd_cluster` → SshdCluster with two nodes, spark1 (head, 127.0.0.2) and
  spark2 (worker, 127.0.0.3); HOME is pointed at the cluster's private home.
- start_sshd_cluster(base_dir, names=("spark1", "spark2"), addresses=(...)) → SshdCluster
  (call .stop() yourself).
- SshdCluster: .home, .ssh_config, .known_hosts, .identity, .nodes (name → SshdNode),
  .node(name), .cluster_config(), .write_cluster_yaml(path), .transport(name, **kw),
  .forget_host_key(name), .stop().
- SshdNode: .name, .address, .port, .dir, .bin_dir, .data_dir (shim answers: write files
  here to change what a tool prints), .commands() (calls recorded by the shims),
  .start(), .stop() (kills sshd and every session: the node drops), .restart(),
  .pause() / .resume() (SIGSTOP/SIGCONT: connected but silent, like a pulled cable),
  .set_file(name, text), .remove_tool(name), .sshd_log().
  Data files the shims read: query-gpu.csv, query-apps.csv, nvidia-smi.txt, dmon.txt,
  docker-ps.jsonl, ray-status.txt, image-id.txt, serve.log (docker logs), ip-o-link.txt,
  ip-br-addr.txt, ibdev2netdev.txt, dmesg.txt, ps.txt (`ps -ww -eo pid=,uid=,args=`; none by
  default; a file ps-real: this machine's real `ps`), meminfo.txt and boot.txt (boot id + uptime; else the real /proc files),
  ping-reachable, sudo-needs-password (present = sudo -n refuses), sudo-allows (present:
  the only command lines `sudo -n -l CMD` allows, one a line, like a narrow sudoers rule).
- shim_node(dir, name) → an SshdNode set up but not started: its bin_dir on a
  LocalTransport's PATH gives the same shims without SSH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from tests.conftest import require_tool

FIX = Path(__file__).parent / "fixtures"
SSHD = "/usr/sbin/sshd"

# data file → where its default content comes from (real captures where they exist)
DEFAULT_DATA = {
    "query-gpu.csv": FIX / "gb10" / "query-gpu.csv",
    "query-apps.csv": FIX / "real" / "h200" / "query-apps-idle.csv",
    "nvidia-smi.txt": FIX / "real" / "h200" / "nvidia-smi.txt",
    "dmon.txt": FIX / "real" / "h200" / "dmon-copy.txt",
    "ip-o-link.txt": FIX / "gb10" / "ip-o-link.txt",
    "ip-br-addr.txt": FIX / "gb10" / "ip-br-addr.txt",
    "ibdev2netdev.txt": FIX / "gb10" / "ibdev2netdev.txt",
}

SHIMS = {
    "nvidia-smi": r"""
case "$*" in
  *--query-gpu*) /bin/cat "$D/query-gpu.csv" ;;
  *--query-compute-apps*) /bin/cat "$D/query-apps.csv" ;;
  *dmon*) while :; do /bin/cat "$D/dmon.txt" || exit 1; sleep 1; done ;;
  *) /bin/cat "$D/nvidia-smi.txt" ;;
esac
""",
    "docker": r"""
case "$1" in
  ps)
    f="$D/docker-ps.jsonl"; [ -f "$f" ] || exit 0
    case " $* " in
      *" -q "*|*" -aq "*|*" -qa "*) sed -n 's/.*"ID": *"\([^"]*\)".*/\1/p' "$f" ;;
      *"{{.Names}}"*) sed -n 's/.*"Names": *"\([^"]*\)".*/\1/p' "$f" ;;
      *) /bin/cat "$f" ;;
    esac ;;
  stop|kill)
    # a stopped container is no longer listed by `docker ps` (filters are not simulated)
    shift; f="$D/docker-ps.jsonl"
    for a in "$@"; do
      case "$a" in -*|[0-9]|[0-9][0-9]) continue ;; esac
      [ -f "$f" ] && grep -v -e "\"ID\": *\"$a\"" -e "\"Names\": *\"$a\"" "$f" > "$f.tmp"; mv -f "$f.tmp" "$f" 2>/dev/null
      echo "$a"
    done ;;
  rename|update) exit 0 ;;
  exec) if [ -f "$D/ray-status.txt" ]; then /bin/cat "$D/ray-status.txt"; else
        echo "Error response from daemon: No such container: $2" >&2; exit 1; fi ;;
  image) if [ -f "$D/image-id.txt" ]; then /bin/cat "$D/image-id.txt"; else
         echo "Error response from daemon: No such image: $5" >&2; exit 1; fi ;;
  logs) /bin/cat "$D/serve.log" 2>/dev/null; exec sleep 3600 ;;
  *) echo "docker shim: $*" >&2; exit 1 ;;
esac
""",
    "ip": r"""
case "$*" in
  "-o link"*) /bin/cat "$D/ip-o-link.txt" ;;
  "-br addr"*) /bin/cat "$D/ip-br-addr.txt" ;;
  *) exec /usr/sbin/ip "$@" ;;
esac
""",
    "ibdev2netdev": r"""/bin/cat "$D/ibdev2netdev.txt" """,
    # the node's processes are its data, never this machine's (ps -ww -eo pid=,uid=,args=),
    # unless the test asks for the real ones (a file `ps-real`)
    "ps": r"""[ -f "$D/ps-real" ] && exec /bin/ps "$@"; /bin/cat "$D/ps.txt" 2>/dev/null; exit 0""",
    "dmesg": r"""/bin/cat "$D/dmesg.txt" 2>/dev/null; exit 0""",
    "sudo": r"""
if [ -f "$D/sudo-needs-password" ]; then echo "sudo: a password is required" >&2; exit 1; fi
[ "$1" = "-n" ] && shift
if [ "$1" = "-l" ]; then
  shift
  if [ -f "$D/sudo-allows" ] && ! grep -qxF -- "$*" "$D/sudo-allows"; then exit 1; fi
  echo "/usr/bin/$*"; exit 0
fi
exec "$@"
""",
    # /proc/meminfo as the node's data says (the real file otherwise)
    "cat": r"""
if [ "$*" = "/proc/meminfo" ] && [ -f "$D/meminfo.txt" ]; then exec /bin/cat "$D/meminfo.txt"; fi
case "$*" in /proc/sys/kernel/random/boot_id*) [ -f "$D/boot.txt" ] && exec /bin/cat "$D/boot.txt" ;; esac
exec /bin/cat "$@"
""",
    # never sends a packet: the answer comes from $D/ping-reachable (one address a line)
    "ping": r"""
for a in "$@"; do last="$a"; done
if grep -qxF -- "$last" "$D/ping-reachable" 2>/dev/null; then echo "1 packets transmitted, 1 received"; exit 0; fi
echo "1 packets transmitted, 0 received, 100% packet loss"; exit 1
""",
}


class _PortTaken(RuntimeError):
    """sshd could not bind its port: another process holds it."""


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "spark-tui-test", "-f", str(path)],
        check=True,
    )


@dataclass
class SshdNode:
    name: str
    address: str
    port: int
    dir: Path
    client_home: Path
    proc: subprocess.Popen | None = None
    host_key_line: str = ""  # "ssh-ed25519 AAAA…"

    @property
    def bin_dir(self) -> Path:
        return self.dir / "bin"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log(self) -> Path:
        return self.dir / "commands.log"

    def setup(self, authorized_key: str) -> None:
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        key = self.dir / "ssh_host_ed25519_key"
        _keygen(key)
        self.host_key_line = " ".join(Path(str(key) + ".pub").read_text().split()[:2])
        (self.dir / "authorized_keys").write_text(authorized_key + "\n")
        for name, src in DEFAULT_DATA.items():
            self.set_file(name, src.read_text())
        for tool, body in SHIMS.items():
            self._write_shim(tool, body)
        real_ssh = shutil.which("ssh") or "/usr/bin/ssh"
        # the head's ssh to a worker: real ssh with the test client's config and key
        self._write_shim("ssh", f'exec {real_ssh} -F {self.client_home / ".ssh" / "config"} "$@"')
        path = f"{self.bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        # sessions get a HOME of their own with empty rc files: bash sources ~/.bashrc for
        # ssh commands, and this machine's (pyenv init, with a rehash lock that a killed
        # session leaves behind) must never run inside a test node
        home = self.dir / "home"
        home.mkdir(exist_ok=True)
        for rc in (".bashrc", ".profile", ".bash_profile"):
            (home / rc).write_text("")
        (self.dir / "sshd_config").write_text(
            f"""Port {self.port}
ListenAddress {self.address}
HostKey {key}
PidFile {self.dir / "sshd.pid"}
AuthorizedKeysFile {self.dir / "authorized_keys"}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PrintMotd no
MaxSessions 50
MaxStartups 50
LogLevel VERBOSE
SetEnv PATH={path} HOME={home}
"""
        )

    def _write_shim(self, tool: str, body: str) -> None:
        shim = self.bin_dir / tool
        shim.write_text(
            f'#!/bin/sh\nD={self.data_dir}\necho "{tool} $*" >> {self.log}\n{body.strip()}\n'
        )
        shim.chmod(0o755)

    def set_file(self, name: str, text: str) -> None:
        """What a shim prints: e.g. set_file('docker-ps.jsonl', …), set_file('sudo-needs-password', '')."""
        (self.data_dir / name).write_text(text)

    def remove_tool(self, tool: str) -> None:
        """Take a shim off the node's PATH (the real tool must not exist here either)."""
        (self.bin_dir / tool).unlink(missing_ok=True)

    def commands(self) -> list[str]:
        """Every shim call so far, as 'tool args…'."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def sshd_log(self) -> str:
        p = self.dir / "sshd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def start(self, *, new_port_if_taken: bool = False) -> None:
        """Start sshd and wait until it listens. `new_port_if_taken`: before any client knows
        the port, a port another process took meanwhile (tests run in parallel) is replaced by
        a free one."""
        for _ in range(5):
            try:
                self._start()
                return
            except _PortTaken:
                if not new_port_if_taken:
                    raise
                self.port = _free_port(self.address)
                config = self.dir / "sshd_config"
                lines = config.read_text().splitlines(keepends=True)
                config.write_text(
                    "".join(f"Port {self.port}\n" if ln.startswith("Port ") else ln for ln in lines)
                )
        raise RuntimeError(f"sshd for {self.name}: no free port on {self.address}")

    def _start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log_path = self.dir / "sshd.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0

        def said() -> str:  # what this sshd wrote to its log
            return log_path.read_bytes()[log_start:].decode(errors="replace")

        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() kills every session too
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                if "Address already in use" in said():
                    raise _PortTaken(said())
                raise RuntimeError(f"sshd for {self.name} exited:\n{said()[-2000:]}")
            # its own words, not a connection: under parallel tests another sshd may answer
            if f"Server listening on {self.address} port {self.port}." in said():
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd for {self.name} did not listen on {self.address}:{self.port}")

    def stop(self) -> None:
        """Kill sshd and every session it forked: the node drops off the network."""
        if self.proc is None:
            return
        # session children leave sshd's process group (setsid), so find them by parentage too
        children = _descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP sshd and its sessions: connections stay open but nothing answers
        (a pulled cable, a hung box)."""
        self._signal_tree(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_tree(signal.SIGCONT)

    def _signal_tree(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        for pid in [self.proc.pid, *_descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def restart(self) -> None:
        self.stop()
        self.start()

    def node_config(self, role: str = "worker") -> NodeConfig:
        return NodeConfig(name=self.name, host=self.name, role=role)  # type: ignore[arg-type]


def shim_node(base: Path, name: str = "box") -> SshdNode:
    """A node's shim tools and data without starting sshd (for LocalTransport(env=…))."""
    node = SshdNode(name, "127.0.0.1", 0, base / name, base / "home")
    node.dir.mkdir(parents=True, exist_ok=True)
    node.setup("")
    return node


def shim_env(node: SshdNode) -> dict[str, str]:
    return {"PATH": f"{node.bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@dataclass
class SshdCluster:
    base: Path
    nodes: dict[str, SshdNode] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def ssh_config(self) -> Path:
        return self.home / ".ssh" / "config"

    @property
    def known_hosts(self) -> Path:
        return self.home / ".ssh" / "known_hosts"

    @property
    def identity(self) -> Path:
        return self.home / ".ssh" / "id_ed25519"

    def node(self, name: str) -> SshdNode:
        return self.nodes[name]

    def cluster_config(self) -> ClusterConfig:
        nodes = [
            n.node_config("head" if i == 0 else "worker") for i, n in enumerate(self.nodes.values())
        ]
        return ClusterConfig(nodes=tuple(nodes), source=str(self.base / "cluster.yaml"))

    def write_cluster_yaml(self, path: Path | None = None, extra: str = "") -> Path:
        """A cluster.yaml naming every node by its ~/.ssh/config alias (first = head)."""
        path = path or self.base / "cluster.yaml"
        lines = ["nodes:"]
        for i, n in enumerate(self.nodes.values()):
            lines += [
                f"  - name: {n.name}",
                f"    host: {n.name}",
                f"    role: {'head' if i == 0 else 'worker'}",
            ]
        path.write_text("\n".join(lines) + "\n" + extra)
        return path

    def transport(self, name: str, **kw: object):
        """An SSHTransport to the node through the test ~/.ssh/config, with short back-off."""
        from spark_tui.nodes.ssh import SSHTransport

        kw.setdefault("ssh_config", self.ssh_config)
        kw.setdefault("known_hosts", self.known_hosts)
        kw.setdefault("backoff_s", (0.2, 0.5, 1.0))
        kw.setdefault("watch_s", 0.2)
        kw.setdefault("connect_timeout", 5.0)
        return SSHTransport(self.nodes[name].node_config(), **kw)  # type: ignore[arg-type]

    def forget_host_key(self, name: str) -> None:
        n = self.nodes[name]
        entry = f"[{n.address}]:{n.port} "
        lines = [ln for ln in self.known_hosts.read_text().splitlines() if not ln.startswith(entry)]
        self.known_hosts.write_text("".join(ln + "\n" for ln in lines))

    def stop(self) -> None:
        for n in self.nodes.values():
            n.stop()


def start_sshd_cluster(
    base: Path,
    names: tuple[str, ...] = ("spark1", "spark2"),
    addresses: tuple[str, ...] = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"),
) -> SshdCluster:
    """Start one sshd per name; the caller stops them (cluster.stop())."""
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    cluster = SshdCluster(base)
    ssh_dir = cluster.home / ".ssh"
    ssh_dir.mkdir(parents=True, mode=0o700)
    _keygen(cluster.identity)
    client_pub = Path(str(cluster.identity) + ".pub").read_text().strip()
    import getpass

    user = getpass.getuser()
    config_lines: list[str] = []
    known: list[str] = []
    for i, name in enumerate(names):
        address = addresses[i]
        node = SshdNode(name, address, _free_port(address), base / name, cluster.home)
        node.dir.mkdir(parents=True)
        node.setup(client_pub)
        node.set_file("ping-reachable", "")
        # each node's fabric address in the GB10 interface listing: 10.10.10.<i+1>
        node.set_file(
            "ip-br-addr.txt",
            node.data_dir.joinpath("ip-br-addr.txt")
            .read_text()
            .replace("10.10.10.1/24", f"10.10.10.{i + 1}/24"),
        )
        node.start(new_port_if_taken=True)
        cluster.nodes[name] = node
        config_lines += [
            f"Host {name}",
            f"  HostName {address}",
            f"  Port {node.port}",
            f"  User {user}",
            f"  IdentityFile {cluster.identity}",
            f"  UserKnownHostsFile {cluster.known_hosts}",
            "  StrictHostKeyChecking yes",
            "  BatchMode yes",
            "",
        ]
        known.append(f"[{address}]:{node.port} {node.host_key_line}")
    cluster.ssh_config.write_text("\n".join(config_lines))
    cluster.known_hosts.write_text("\n".join(known) + "\n")
    # every node can reach every other node's fabric address
    fabric = "".join(f"10.10.10.{i + 1}\n" for i in range(len(names)))
    for node in cluster.nodes.values():
        node.set_file("ping-reachable", fabric)
    return cluster


@pytest.fixture
def sshd_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshdCluster]:
    """Two real sshd nodes (spark1 head, spark2 worker); HOME points at their client side."""
    require_tool("sshd")
    require_tool("ssh-keygen")
    cluster = start_sshd_cluster(tmp_path / "sshd")
    monkeypatch.setenv("HOME", str(cluster.home))
    try:
        yield cluster
    finally:
        cluster.stop()
