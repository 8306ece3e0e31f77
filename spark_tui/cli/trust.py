"""`spark-tui trust NODE [--config FILE] [--yes]`: show a node's SSH host key
fingerprint and, once confirmed, add the key to ~/.ssh/known_hosts.

spark-tui never accepts an unknown host key by itself (no AutoAddPolicy): this
is the one way it writes known_hosts, and only after the user said yes.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trust",
        help="show a node's SSH host key fingerprint and add it to known_hosts once confirmed",
    )
    p.add_argument("node", metavar="NODE", help="a node name from cluster.yaml")
    p.add_argument("--config", dest="sub_config", metavar="FILE", help="cluster.yaml to use")
    p.add_argument("--yes", action="store_true", help="trust without asking (for scripts)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from spark_tui import shell
    from spark_tui.errors import SparkTuiError
    from spark_tui.nodes.config import load_cluster
    from spark_tui.nodes.ssh import (
        append_known_host,
        fetch_host_key,
        fingerprint_sha256,
        known_keys,
        resolve_target,
    )

    config = getattr(args, "sub_config", None) or getattr(args, "config", None)
    cluster = load_cluster(Path(config) if config else None)
    node = cluster.node(args.node)
    if node.is_local:
        print(f"{node.name} is this machine (host: local): no SSH, no host key to trust.")
        return 0
    target = resolve_target(node.host, user=node.user, port=node.port)
    known = known_keys(target)
    # ask for the key types known_hosts already holds first, as ssh itself does: a node
    # with RSA and Ed25519 keys must be compared on the key we know, not called "changed"
    key = fetch_host_key(target, prefer=tuple(known))
    fp = fingerprint_sha256(key)
    where = f"{target.hostname}:{target.port}"
    if known:
        same_type = known.get(key.get_name())
        if same_type is not None and same_type.asbytes() == key.asbytes():
            print(f"{node.name} ({where}) is already trusted: {key.get_name()} {fp}")
            return 0
        remove = (
            "Refusing. If the node was reinstalled, remove the old key with "
            f"'ssh-keygen -R {shell.quote(target.known_hosts_name)}' and run this again."
        )
        if same_type is not None:
            raise SparkTuiError(
                f"{node.name} ({where}) presents {key.get_name()} {fp}, but known_hosts holds "
                f"{same_type.get_name()} {fingerprint_sha256(same_type)} for it: the key "
                f"CHANGED. {remove}"
            )
        raise SparkTuiError(
            f"{node.name} ({where}) presents {key.get_name()} {fp} and none of the key types "
            f"known_hosts holds for it ({', '.join(known)}): it no longer has the key we know. "
            + remove
        )
    print(f"{node.name} ({where}) presents this host key:")
    print(f"  {key.get_name()} {fp}")
    print(
        "Compare it with the node's own, read on the node itself (console or a session you trust):\n"
        f"  ssh-keygen -lf /etc/ssh/ssh_host_{_key_file(key.get_name())}_key.pub"
    )
    path = Path(target.known_hosts[0])
    if not args.yes:
        try:
            answer = input(f"Trust it and add it to {path}? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("Not trusted; nothing written.", file=sys.stderr)
            return 1
    written = append_known_host(target, key)
    print(f"Added {target.known_hosts_name} {key.get_name()} to {written}.")
    return 0


def _key_file(key_type: str) -> str:
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(
        key_type, "ecdsa" if key_type.startswith("ecdsa") else key_type
    )
