"""A process (or thread) holding a SimCluster, reachable over a unix socket, so the
same simulated nodes can sit behind real sshd (see remote_shell.py).

Protocol: one JSON object per line. Request {"op": "run"|"stream", "node", "command",
"timeout", "stdin"}; a run answers {"exit_code", "stdout", "stderr", "timed_out"} or
{"unreachable": reason}; a stream answers {"line": …} per line then {"end": true}
(the client closes the connection to stop it).

    python -m spark_tui.sim.server --socket /tmp/sim.sock --scenario healthy --speed 60
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import socketserver
import threading

from spark_tui.nodes.transport import NodeUnreachable
from spark_tui.sim.cluster import DEFAULT_SPEED, SimCluster, build_sim_cluster


class SimServer:
    """Serves one SimCluster's nodes on a unix socket (in a background thread)."""

    def __init__(self, cluster: SimCluster, socket_path: str) -> None:
        self.cluster = cluster
        self.socket_path = socket_path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        handler = type("Handler", (_Handler,), {"sim": cluster})
        self._server = socketserver.ThreadingUnixStreamServer(socket_path, handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sim-server", daemon=True
        )

    def start(self) -> SimServer:
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)


class _Handler(socketserver.StreamRequestHandler):
    sim: SimCluster

    def _send(self, obj: object) -> bool:
        try:
            self.wfile.write((json.dumps(obj) + "\n").encode())
            self.wfile.flush()
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def handle(self) -> None:
        raw = self.rfile.readline()
        try:
            req = json.loads(raw)
            t = self.sim.transports[req["node"]]
        except (json.JSONDecodeError, KeyError, TypeError):
            self._send({"error": "bad request"})
            return
        command = str(req.get("command", ""))
        try:
            if req.get("op") == "stream":
                with t.stream(command) as lines:
                    for line in lines:
                        if not self._send({"line": line}):
                            return
                self._send({"end": True})
                return
            stdin = req.get("stdin")
            r = t.run(command, float(req.get("timeout", 30.0)), stdin.encode() if stdin else None)
            self._send(
                {
                    "exit_code": r.exit_code,
                    "stdout": r.stdout,
                    "stderr": r.stderr,
                    "timed_out": r.timed_out,
                }
            )
        except NodeUnreachable as exc:
            self._send({"unreachable": exc.reason})


def request(socket_path: str, payload: dict) -> socket.socket:
    """Open a connection and send one request (the caller reads the answer lines)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(socket_path)
    s.sendall((json.dumps(payload) + "\n").encode())
    return s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_tui.sim.server")
    p.add_argument("--socket", required=True)
    p.add_argument("--scenario", default="healthy")
    p.add_argument("--nodes", type=int, default=None)
    p.add_argument("--speed", type=float, default=DEFAULT_SPEED)
    args = p.parse_args(argv)
    cluster = build_sim_cluster(args.scenario, nodes=args.nodes, speed=args.speed)
    server = SimServer(cluster, args.socket)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
