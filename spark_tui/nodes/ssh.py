"""SSHTransport: one paramiko connection per node, channels multiplexed on it.

- ~/.ssh/config is honoured through paramiko.SSHConfig (HostName, User, Port,
  IdentityFile, ProxyJump, UserKnownHostsFile); cluster.yaml's user/port win.
- Host keys are checked against known_hosts with RejectPolicy: an unknown key is
  refused (HostKeyUnknown says how to trust it: `spark-tui trust NODE`), a
  changed key is refused louder. Never AutoAddPolicy.
- Keepalives on the connection; one watcher for all nodes (spark_tui/nodes/reconnect.py)
  notices a drop and reopens the connection with back-off. Meanwhile `state` says "unreachable since …,
  retrying" and every call raises NodeUnreachable at once (no call blocks on a
  dead node, no other exception escapes).
- Root only through `sudo -n` (run_as_root): a password prompt fails with a
  SudoPasswordRequired that says what to put in sudoers.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import select
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from spark_tui import shell
from spark_tui.clock import Clock, RealClock
from spark_tui.errors import SparkTuiError
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.reconnect import RECONNECTOR
from spark_tui.nodes.transport import (
    CommandResult,
    LineSplitter,
    LineStream,
    NodeUnreachable,
    Reachability,
    Transport,
)

DEFAULT_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
KEEPALIVE_S = 15
CONNECT_TIMEOUT_S = 10.0
# After a command's timeout, a channel must open within this or the connection is dropped
# (and every command on it fails). A live sshd opens one in milliseconds, but a node that
# is swapping through a weight load, or a loaded machine, can take seconds: a connection
# dropped for being slow fails a launch that would have gone on.
PROBE_S = 15.0
_READ_BYTES = 65536


class HostKeyUnknown(NodeUnreachable):
    """The node's host key is not in known_hosts: refused, nothing was run."""


class HostKeyChanged(NodeUnreachable):
    """The node's host key differs from the one in known_hosts: refused."""


class SudoPasswordRequired(SparkTuiError):
    """`sudo -n` refused because it would have asked for a password."""

    def __init__(self, node: str, command: str) -> None:
        self.node = node
        self.command = command
        from spark_tui.remedy.sudoers import sudoers_hint

        super().__init__(
            f"{node}: sudo needs a password for this command, and spark-tui never types one.\n"
            f"{sudoers_hint()}"
        )


# ---------------------------------------------------------------- where to connect


def default_ssh_config_path() -> Path:
    return Path.home() / ".ssh" / "config"


def default_known_hosts_path() -> Path:
    return Path.home() / ".ssh" / "known_hosts"


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect, after ~/.ssh/config and cluster.yaml are merged."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    proxy_jump: tuple[str, ...] = ()  # each "user@host:port" or an alias, in order
    known_hosts: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)

    @property
    def known_hosts_name(self) -> str:
        """The name known_hosts files use: host, or [host]:port off port 22."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def _load_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    path = path or default_ssh_config_path()
    if path.is_file():
        try:
            return paramiko.SSHConfig.from_path(str(path))
        except (OSError, ValueError, paramiko.SSHException) as exc:
            raise SparkTuiError(f"{path}: cannot read the SSH config: {exc}") from None
    return paramiko.SSHConfig.from_text("")


def resolve_target(
    host: str,
    *,
    user: str | None = None,
    port: int | None = None,
    ssh_config: Path | None = None,
    known_hosts: Path | None = None,
) -> SSHTarget:
    """Merge ~/.ssh/config's answer for `host` with explicit user/port (which win)."""
    conf = _load_ssh_config(ssh_config).lookup(host)
    jumps: tuple[str, ...] = ()
    pj = conf.get("proxyjump")
    if pj and pj.lower() != "none":
        jumps = tuple(j.strip() for j in pj.split(",") if j.strip())
    if known_hosts is not None:
        kh: tuple[str, ...] = (str(known_hosts),)
    elif conf.get("userknownhostsfile"):
        kh = tuple(os.path.expanduser(p) for p in conf["userknownhostsfile"].split())
    else:
        kh = (str(default_known_hosts_path()),)
    try:
        conf_port = int(conf.get("port", 22))
    except ValueError:
        conf_port = 22
    return SSHTarget(
        alias=host,
        hostname=conf.get("hostname", host),
        port=port or conf_port,
        user=user or conf.get("user") or _local_user(),
        identity_files=tuple(os.path.expanduser(p) for p in conf.get("identityfile", [])),
        proxy_jump=jumps,
        known_hosts=kh,
        options={k: str(v) for k, v in conf.items()},
    )


def _local_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name in a stripped container: root is what ssh would try
        return "root"


def _parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    user, _, hostport = spec.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("["):  # [v6]:port
        host, _, rest = hostport[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    elif hostport.count(":") == 1:
        host, p = hostport.split(":")
        port = int(p) if p.isdigit() else None
    return (user or None), host, port


# ---------------------------------------------------------------- host keys


def fingerprint_sha256(key: paramiko.PKey) -> str:
    """OpenSSH's fingerprint: SHA256:<base64 of the key blob's SHA-256, unpadded>."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_keys(target: SSHTarget) -> dict[str, paramiko.PKey]:
    """The keys known_hosts holds for this target, by key type ("ssh-ed25519", "ssh-rsa", …),
    in the order the files list them."""
    out: dict[str, paramiko.PKey] = {}
    for path in target.known_hosts:
        keys = paramiko.HostKeys()
        with contextlib.suppress(OSError, paramiko.SSHException, ValueError):
            keys.load(path)
        entry = keys.lookup(target.known_hosts_name)
        for key_type in entry.keys() if entry else ():
            out.setdefault(key_type, entry[key_type])
    return out


# host key algorithms a client offers for a key type (an RSA key signs with SHA-2 first)
_ALGORITHMS = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")}


def prefer_key_types(transport: paramiko.Transport, key_types: Sequence[str]) -> None:
    """Offer these host key types first, as ssh and paramiko's SSHClient do for the types
    known_hosts already holds: a server with several keys then shows the one we know."""
    opts = transport.get_security_options()
    offered = tuple(opts.key_types)
    first = [a for k in key_types for a in _ALGORITHMS.get(k, (k,)) if a in offered]
    opts.key_types = tuple(dict.fromkeys(first)) + tuple(a for a in offered if a not in first)


def known_key(target: SSHTarget) -> paramiko.PKey | None:
    """The key known_hosts holds for this target of the type fetch_host_key asks for first."""
    return next(iter(known_keys(target).values()), None)


def fetch_host_key(
    target: SSHTarget, timeout: float = CONNECT_TIMEOUT_S, prefer: Sequence[str] | None = None
) -> paramiko.PKey:
    """The key the server presents (no authentication, nothing run), of the first type of
    `prefer` it has — by default the types known_hosts holds for it, so that a node with an
    RSA and an Ed25519 key shows the one we know, not a "changed" key."""
    if prefer is None:
        prefer = tuple(known_keys(target))
    jumps: list[paramiko.SSHClient] = []
    try:
        sock = _open_socket(target, timeout, jumps)
        t = paramiko.Transport(sock)
        t.banner_timeout = t.handshake_timeout = timeout
        try:
            prefer_key_types(t, prefer)
            t.start_client(timeout=timeout)
            if not t.is_active() or t.host_key is None:
                raise paramiko.SSHException("No existing session")
            return t.get_remote_server_key()
        finally:
            t.close()
    except (OSError, paramiko.SSHException, EOFError, ValueError) as exc:
        raise SparkTuiError(
            f"{target.alias}: {_explain(target.alias, target, exc, timeout).reason}"
        ) from None
    finally:
        for j in jumps:
            j.close()


def append_known_host(target: SSHTarget, key: paramiko.PKey) -> Path:
    """Append the key to the first known_hosts file (created 0600 when absent); refused
    under --read-only."""
    from spark_tui import policy

    policy.refuse_if_read_only(f"trust the host key of {target.alias} (write known_hosts)")
    path = Path(target.known_hosts[0] if target.known_hosts else default_known_hosts_path())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    line = f"{target.known_hosts_name} {key.get_name()} {key.get_base64()}\n"
    needs_newline = (
        path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(("\n" if needs_newline else "") + line)
        fh.flush()
        os.fsync(fh.fileno())
    return path


def _open_socket(target: SSHTarget, timeout: float, jumps: list[paramiko.SSHClient]):
    """A socket to the target, through its ProxyJump hosts when it has some."""
    if not target.proxy_jump:
        return socket.create_connection((target.hostname, target.port), timeout=timeout)
    via: paramiko.SSHClient | None = None
    for spec in target.proxy_jump:
        juser, jhost, jport = _parse_jump(spec)
        jt = resolve_target(jhost, user=juser, port=jport)
        jt = SSHTarget(**{**jt.__dict__, "proxy_jump": (), "known_hosts": target.known_hosts})
        client = _client_for(jt)
        sock = (
            via.get_transport().open_channel(
                "direct-tcpip", (jt.hostname, jt.port), ("127.0.0.1", 0), timeout=timeout
            )
            if via is not None
            else socket.create_connection((jt.hostname, jt.port), timeout=timeout)
        )
        _connect_client(client, jt, sock, timeout)
        jumps.append(client)
        via = client
    assert via is not None
    return via.get_transport().open_channel(
        "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=timeout
    )


def _client_for(target: SSHTarget) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    for path in target.known_hosts:
        with contextlib.suppress(OSError, paramiko.SSHException, ValueError):
            client.get_host_keys().load(path)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())  # never AutoAddPolicy
    return client


def _connect_client(client: paramiko.SSHClient, target: SSHTarget, sock, timeout: float) -> None:
    client.connect(
        target.hostname,
        port=target.port,
        username=target.user,
        key_filename=list(target.identity_files) or None,
        timeout=timeout,
        banner_timeout=timeout,
        auth_timeout=timeout,
        allow_agent=True,
        look_for_keys=True,
        sock=sock,
    )


# ---------------------------------------------------------------- the transport


# what paramiko says when the peer accepted TCP but the SSH handshake never finished
_NO_HANDSHAKE = (
    "error reading ssh protocol banner",
    "no existing session",
    "negotiation failed",
    "ssh session not active",
)


def _explain(
    node: str, target: SSHTarget, exc: BaseException, timeout: float = CONNECT_TIMEOUT_S
) -> NodeUnreachable:
    """One line naming what failed, for a connection attempt that raised `exc`."""
    where = f"{target.user}@{target.hostname}:{target.port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostKeyChanged(
            node,
            f"the host key of {where} CHANGED (got {fingerprint_sha256(exc.key)}); refused. "
            f"If the node was reinstalled, remove the old key with "
            f"'ssh-keygen -R {shell.quote(target.known_hosts_name)}', then 'spark-tui trust {node}'",
        )
    text = str(exc)
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in text:
        return HostKeyUnknown(
            node,
            f"the host key of {where} is not in known_hosts; refused, nothing was run. "
            f"Check its fingerprint and trust it with: spark-tui trust {node}",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return NodeUnreachable(
            node,
            f"{where} refused every key (agent, ~/.ssh keys, IdentityFile): {text or 'auth failed'}",
        )
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return NodeUnreachable(node, f"nothing answers on {target.hostname}:{target.port}")
    if isinstance(exc, paramiko.SSHException) and any(m in text.lower() for m in _NO_HANDSHAKE):
        return NodeUnreachable(
            node,
            f"{target.hostname}:{target.port} accepts connections but did not complete the SSH "
            f"handshake within {timeout:g} s (not an SSH server, or the node is hung)",
        )
    if isinstance(exc, EOFError):
        return NodeUnreachable(
            node, f"{target.hostname}:{target.port} closed the connection during the SSH handshake"
        )
    if isinstance(exc, ConnectionRefusedError):
        return NodeUnreachable(node, f"nothing answers on {target.hostname}:{target.port}")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return NodeUnreachable(node, f"{target.hostname}:{target.port} did not answer in time")
    if isinstance(exc, socket.gaierror):
        return NodeUnreachable(node, f"unknown host {target.hostname!r}")
    return NodeUnreachable(node, f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


_CONNECT_ERRORS = (paramiko.SSHException, OSError, EOFError, socket.timeout, ValueError)


class _ChannelLines(LineStream):
    """Lines of a long-running command on its own channel (stderr merged)."""

    def __init__(self, owner: SSHTransport, chan: paramiko.Channel) -> None:
        self._owner = owner
        self._chan = chan
        self._closed = threading.Event()
        self._ended = False
        self._lines = LineSplitter()
        self._fd: int | None = None

    def fileno(self) -> int | None:
        if self._closed.is_set() or self._ended:
            return None
        if self._fd is None:
            try:
                self._fd = self._chan.fileno()  # a pipe paramiko sets when data or EOF came
            except (OSError, ValueError, paramiko.SSHException):
                return None
        return self._fd

    def read_lines(self) -> list[str] | None:
        if self._closed.is_set() or self._ended:
            return None
        chan = self._chan
        try:
            if chan.recv_ready():
                data = chan.recv(_READ_BYTES)
            elif chan.eof_received or not self._owner._alive(chan):
                data = b""
            else:
                return []
        except (OSError, EOFError, paramiko.SSHException, ValueError):
            data = b""
        if data:
            return self._lines.feed(data)
        self._ended = True
        last = self._lines.flush()
        self._owner._check_alive()
        return [last] if last else None

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        _kill(self._chan)


def _kill(chan: paramiko.Channel) -> None:
    """Ask sshd to kill the command (RFC 4254 'signal'), then close the channel.

    OpenSSH honours the signal for ordinary users; for a root login it refuses
    ("requires privilege separation") and the command only ends when it next
    writes to its closed output (SIGPIPE), as dmon and log tails do every second.
    """
    with contextlib.suppress(Exception):
        if not chan.closed and chan.active:
            m = paramiko.Message()
            m.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
            m.add_int(chan.remote_chanid)
            m.add_string("signal")
            m.add_boolean(False)
            m.add_string("KILL")
            chan.transport._send_user_message(m)
    with contextlib.suppress(Exception):
        chan.close()


class SSHTransport(Transport):
    """One node over SSH. Thread-safe: run/stream/read_file may be called from many threads."""

    def __init__(
        self,
        node: NodeConfig,
        *,
        clock: Clock | None = None,
        ssh_config: Path | None = None,
        known_hosts: Path | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        keepalive_s: int = KEEPALIVE_S,
        backoff_s: Sequence[float] = DEFAULT_BACKOFF_S,
        watch_s: float = 1.0,
    ) -> None:
        self.name = node.name
        self.node = node
        self.target = resolve_target(
            node.host,
            user=node.user,
            port=node.port,
            ssh_config=ssh_config,
            known_hosts=known_hosts,
        )
        self._clock = clock or RealClock()
        self._connect_timeout = connect_timeout
        self._keepalive_s = keepalive_s
        self._backoff = tuple(backoff_s) or DEFAULT_BACKOFF_S
        self._watch_s = watch_s
        self._lock = threading.RLock()
        self._connect_lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self._jumps: list[paramiko.SSHClient] = []
        self._error: NodeUnreachable | None = None
        self._tried = False
        self._closed = threading.Event()
        self._state = Reachability(False, self._clock.now(), "not connected yet", retrying=False)
        self.connects = 0  # successful connections (a test and the bench read it)

    # -- connection ------------------------------------------------------------
    def connect(self) -> None:
        """Connect now (the first call does it anyway). Raises NodeUnreachable."""
        self._ensure()

    def _open(self) -> None:
        """One connection attempt; on success the client is live, else _error is set."""
        jumps: list[paramiko.SSHClient] = []
        client = _client_for(self.target)
        try:
            sock = (
                _open_socket(self.target, self._connect_timeout, jumps)
                if self.target.proxy_jump
                else None
            )
            _connect_client(client, self.target, sock, self._connect_timeout)
            transport = client.get_transport()
            assert transport is not None
            transport.set_keepalive(self._keepalive_s)
        except _CONNECT_ERRORS as exc:
            client.close()
            for j in jumps:
                j.close()
            self._set_down(_explain(self.name, self.target, exc, self._connect_timeout))
            return
        with self._lock:
            if self._closed.is_set():
                client.close()
                return
            self._client, self._jumps = client, jumps
            self._error = None
            self._state = Reachability(True, self._clock.now())
            self.connects += 1

    def _set_down(self, error: NodeUnreachable) -> None:
        with self._lock:
            was_up = self._state.reachable or not self._tried
            self._error = error
            since = self._clock.now() if was_up else self._state.since
            error.since = since
            self._state = Reachability(False, since, error.reason, retrying=True)
            old, self._client = self._client, None
            jumps, self._jumps = self._jumps, []
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        for j in jumps:
            with contextlib.suppress(Exception):
                j.close()

    def _ensure(self) -> paramiko.Transport:
        if self._closed.is_set():
            raise NodeUnreachable(self.name, "closed")
        with self._lock:
            client = self._client
            if client is not None:
                t = client.get_transport()
                if t is not None and t.is_active():
                    return t
        if not self._tried:
            with self._connect_lock:
                if not self._tried:
                    self._open()
                    self._tried = True
                    if not self._closed.is_set():
                        RECONNECTOR.add(self)
            return self._ensure_connected()
        if client is not None:  # it was up and is not active any more
            self._set_down(NodeUnreachable(self.name, "connection lost"))
            RECONNECTOR.wake(self)
        return self._ensure_connected()

    def _ensure_connected(self) -> paramiko.Transport:
        with self._lock:
            if self._client is not None:
                t = self._client.get_transport()
                if t is not None and t.is_active():
                    return t
            err = self._error or NodeUnreachable(self.name, "connection lost")
        if isinstance(err, (HostKeyUnknown, HostKeyChanged)):
            raise type(err)(self.name, err.reason, err.since)
        raise NodeUnreachable(self.name, err.reason + ", retrying", err.since)

    # -- what the shared watcher (RECONNECTOR) asks of a connection -----------------
    @property
    def watch_s(self) -> float:
        return self._watch_s

    @property
    def backoff_s(self) -> Sequence[float]:
        return self._backoff

    def alive_now(self) -> bool:
        return self._alive_now()

    def mark_lost(self) -> None:
        with self._lock:
            up = self._client is not None
        if up:
            self._set_down(NodeUnreachable(self.name, "connection lost"))

    def reopen(self) -> None:
        if self._closed.is_set():  # closed while it was being added
            RECONNECTOR.remove(self)
            return
        with self._connect_lock:
            if not self._closed.is_set() and not self._alive_now():
                self._open()

    def _alive_now(self) -> bool:
        with self._lock:
            client = self._client
        if client is None:
            return False
        t = client.get_transport()
        return t is not None and t.is_active()

    def _alive(self, chan: paramiko.Channel) -> bool:
        t = chan.get_transport()
        return t is not None and t.is_active() and not chan.closed

    def _check_alive(self) -> None:
        if not self._alive_now() and not self._closed.is_set():
            RECONNECTOR.wake(self)

    def _probe(self, transport: paramiko.Transport) -> None:
        """After a timeout: does the node still answer at all? A channel must open within
        PROBE_S, else the connection is dead though TCP has not noticed (keepalives only send)."""
        try:
            chan = transport.open_session(timeout=PROBE_S)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._dropped(exc) from None
        with contextlib.suppress(Exception):
            chan.close()

    def _dropped(self, exc: BaseException) -> NodeUnreachable:
        err = NodeUnreachable(self.name, f"connection lost ({type(exc).__name__})")
        self._set_down(err)
        RECONNECTOR.wake(self)
        return NodeUnreachable(self.name, err.reason + ", retrying", err.since)

    # -- Transport ---------------------------------------------------------------
    @property
    def state(self) -> Reachability:
        return self._state

    def run(self, command: str, timeout: float = 30.0, input: bytes | None = None) -> CommandResult:
        start = time.monotonic()
        rc, out, err, timed_out = self._exec(command, timeout, input)
        return CommandResult(
            command=command,
            exit_code=rc,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def _exec(
        self, command: str, timeout: float, input: bytes | None
    ) -> tuple[int, bytes, bytes, bool]:
        transport = self._ensure()
        deadline = time.monotonic() + timeout
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            chan = transport.open_session(timeout=self._connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._dropped(exc) from None
        try:
            chan.exec_command(command)
            if input:
                chan.sendall(input)
            chan.shutdown_write()
            while True:
                while chan.recv_ready():
                    out.append(chan.recv(_READ_BYTES))
                while chan.recv_stderr_ready():
                    err.append(chan.recv_stderr(_READ_BYTES))
                if (
                    chan.exit_status_ready()
                    and not chan.recv_ready()
                    and not chan.recv_stderr_ready()
                ) and (chan.eof_received or chan.closed):
                    break
                if time.monotonic() >= deadline:
                    _kill(chan)
                    self._probe(transport)  # a silent peer (cable pulled) raises here
                    return -9, b"".join(out), b"".join(err), True
                if not self._alive(chan) and not chan.exit_status_ready():
                    raise EOFError("connection closed")
                select.select([chan], [], [], min(0.2, max(0.0, deadline - time.monotonic())))
            rc = chan.recv_exit_status()
            if rc == -1 and not transport.is_active():
                # no exit status, and the connection is gone: the node dropped mid-command
                raise EOFError("connection lost while the command ran")
            return rc, b"".join(out), b"".join(err), False
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._dropped(exc) from None
        finally:
            with contextlib.suppress(Exception):
                chan.close()

    def stream(self, command: str) -> LineStream:
        transport = self._ensure()
        try:
            chan = transport.open_session(timeout=self._connect_timeout)
            chan.set_combine_stderr(True)
            chan.exec_command(command)
            chan.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._dropped(exc) from None
        return _ChannelLines(self, chan)

    def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        q = shell.quote(path)
        rc, out, err, _ = self._exec(
            f"test -e {q} || exit 44; head -c {int(max_bytes)} -- {q}", 30.0, None
        )
        if rc == 44:
            raise FileNotFoundError(2, "No such file or directory", path)
        if rc != 0:
            raise OSError(
                f"{self.name}: cannot read {path}: {err.decode(errors='replace').strip()}"
            )
        return out

    def close(self) -> None:
        self._closed.set()
        RECONNECTOR.remove(self)
        with self._lock:
            client, self._client = self._client, None
            jumps, self._jumps = self._jumps, []
            self._state = Reachability(False, self._clock.now(), "closed")
        if client is not None:
            client.close()
        for j in jumps:
            j.close()


# ---------------------------------------------------------------- helpers


def run_as_root(transport: Transport, command: str, timeout: float = 60.0) -> CommandResult:
    """Run `command` as root through `sudo -n sh -c '…'`; a password prompt raises
    SudoPasswordRequired (with what to put in sudoers) instead of hanging."""
    result = transport.run(shell.as_root(command), timeout=timeout)
    if not result.ok and shell.needs_sudo_password(result.stderr + "\n" + result.stdout):
        raise SudoPasswordRequired(transport.name, command)
    return result
