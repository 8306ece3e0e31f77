"""ForceCommand entry point: run $SSH_ORIGINAL_COMMAND on a simulated node.

In sshd_config:  ForceCommand /path/python -m spark_tui.sim.remote_shell --socket S --node N
It relays stdout, stderr and the exit code; `-f` commands (docker logs -f, tail -F,
nvidia-smi dmon) stream until the client closes the channel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from spark_tui.sim.server import request
from spark_tui.sim.transport import is_stream_command


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_tui.sim.remote_shell")
    p.add_argument("--socket", required=True)
    p.add_argument("--node", required=True)
    args = p.parse_args(argv)
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    if not command.strip():
        print("spark-tui simulated node: interactive shells are not simulated", file=sys.stderr)
        return 1
    if is_stream_command(command):
        conn = request(args.socket, {"op": "stream", "node": args.node, "command": command})
        with conn, conn.makefile("r", encoding="utf-8") as answers:
            for raw in answers:
                msg = json.loads(raw)
                if "line" in msg:
                    try:
                        sys.stdout.write(msg["line"] + "\n")
                        sys.stdout.flush()
                    except BrokenPipeError:
                        return 0
                elif "unreachable" in msg:
                    print(f"ssh: {msg['unreachable']}", file=sys.stderr)
                    return 255
                elif msg.get("end"):
                    return 0
        return 0
    stdin = sys.stdin.buffer.read().decode("utf-8", "replace") if not sys.stdin.isatty() else ""
    conn = request(
        args.socket,
        {"op": "run", "node": args.node, "command": command, "stdin": stdin, "timeout": 3600},
    )
    with conn, conn.makefile("r", encoding="utf-8") as answers:
        msg = json.loads(answers.readline() or "{}")
    if "unreachable" in msg:
        print(f"ssh: {msg['unreachable']}", file=sys.stderr)
        return 255
    if "exit_code" not in msg:
        print("spark-tui simulated node: no answer from the simulator", file=sys.stderr)
        return 255
    sys.stdout.write(msg["stdout"])
    sys.stderr.write(msg["stderr"])
    sys.stdout.flush()
    sys.stderr.flush()
    return 124 if msg.get("timed_out") else int(msg["exit_code"]) & 0xFF


if __name__ == "__main__":
    raise SystemExit(main())
