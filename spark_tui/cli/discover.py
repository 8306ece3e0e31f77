"""`spark-tui discover [--json] [--yes] [--output FILE] [--from FILE [--no-probe]]
[HOST|SUBNET...]`: find the DGX Sparks reachable over SSH and propose (then, once confirmed,
write) cluster.yaml.

`--from FILE` reads the cluster another launcher knows — eugr/spark-vllm-docker's `.env` or
a sparkrun cluster definition (spark_tui.nodes.cluster_import) — probes its nodes over SSH as
usual and proposes them in the file's order; a node that does not answer (or every node,
with --no-probe) is proposed from the file's own values. With no Spark found and no file,
a commented cluster.yaml template is printed.

Without arguments the candidates are ~/.ssh/config's hosts, ~/.ssh/known_hosts' hosts and
this machine's neighbour table on its fabric and management interfaces. An unknown host key
is shown with its fingerprint and asked about (interactive only); `--yes` never trusts one.
The file is written only on a yes (or with --yes); an existing one is moved aside first
(timestamped backup). Unreachable hosts are reported, never fatal. Exit 0 when it ran,
1 when no Spark was found, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "discover",
        help="find the Sparks reachable over SSH and propose cluster.yaml (write once confirmed)",
        description=(
            "Candidates: HOST, USER@HOST, HOST:PORT or a subnet (at most a /24) given here; "
            "with none, ~/.ssh/config, ~/.ssh/known_hosts and the neighbour table."
        ),
    )
    p.add_argument("targets", nargs="*", metavar="HOST|SUBNET")
    p.add_argument(
        "--from",
        metavar="FILE",
        dest="from_file",
        help="an eugr/spark-vllm-docker .env or a sparkrun cluster definition to start from",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="with --from: propose from the file alone, without SSH",
    )
    p.add_argument("--json", action="store_true", help="print the proposal as JSON")
    p.add_argument(
        "--yes",
        action="store_true",
        help="write without asking (unknown host keys are still refused)",
    )
    p.add_argument(
        "--output",
        metavar="FILE",
        help="where to write (default: ~/.config/spark-tui/cluster.yaml)",
    )


def _ask_key(where: str, kind: str, fingerprint: str) -> bool:
    print(f"{where} presents an unknown host key:\n  {kind} {fingerprint}", file=sys.stderr)
    print(
        "Compare it with the node's own (on its console: ssh-keygen -lf /etc/ssh/ssh_host_*.pub).",
        file=sys.stderr,
    )
    try:
        answer = input("Trust it and add it to known_hosts? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from spark_tui import paths
    from spark_tui.errors import InputError
    from spark_tui.nodes import commands
    from spark_tui.nodes.cluster import NodeConfig
    from spark_tui.nodes.config import parse_cluster
    from spark_tui.nodes.discover import (
        CLUSTER_YAML_TEMPLATE,
        Probe,
        default_candidates,
        discover,
        expand_targets,
        neighbour_interfaces,
        read_node,
    )
    from spark_tui.nodes.ssh import default_known_hosts_path, default_ssh_config_path
    from spark_tui.nodes.transports import open_transport
    from spark_tui.yamlfile import parse_yaml

    interactive = sys.stdin.isatty() and not args.yes
    local = open_transport(NodeConfig("local", "local"))
    if args.no_probe and not args.from_file:
        raise InputError("--no-probe goes with --from FILE")
    imported = None
    if args.from_file:
        from spark_tui.nodes.cluster_import import read_cluster_file

        # read_text says what the input is when it is no file to read (missing, a FIFO, a
        # directory, a symlink loop), naming it
        imported = read_cluster_file(Path(args.from_file))
        candidates = [] if args.no_probe else imported.candidates()
        candidates += expand_targets(args.targets)
    elif args.targets:
        candidates = expand_targets(args.targets)
    else:
        me = read_node(local, NodeConfig("local", "local"), Probe(_local_candidate()))
        neigh = local.run(commands.NEIGHBOURS, timeout=10.0)
        candidates = default_candidates(
            default_ssh_config_path(),
            default_known_hosts_path(),
            neigh.stdout if neigh.ok else "",
            neighbour_interfaces(me),
        )
    if imported is not None:
        from spark_tui.nodes.cluster_import import import_proposal
        from spark_tui.nodes.discover import Proposal

        found = (
            discover(candidates, ask=_ask_key if interactive else None, local=None)
            if candidates
            else Proposal()
        )
        proposal = import_proposal(imported, found)
    else:
        proposal = discover(candidates, ask=_ask_key if interactive else None, local=local)
    doc = proposal.to_json()
    if not proposal.nodes:
        doc["cluster_yaml_template"] = CLUSTER_YAML_TEMPLATE
    output = Path(args.output) if args.output else paths.config_dir() / "cluster.yaml"
    text = proposal.cluster_yaml() if proposal.nodes else ""
    if text:
        try:  # what we write must load
            parse_cluster(parse_yaml(text, str(output)), str(output))
        except InputError as exc:
            if not args.from_file:
                raise
            # the value came from the input file: name it (the output was never written)
            raise InputError(
                f"{exc.reason} (in what it would make of it for {output})", args.from_file
            ) from None
    written = None
    if text and (args.yes or (interactive and not args.json and _confirm(output))):
        written = _write(output, text)
    doc["written"] = str(written) if written else None
    if args.json:
        json.dump(doc, sys.stdout)
        print()
    else:
        _print(proposal, text, output, written, interactive)
    return 0 if proposal.nodes else 1


def _local_candidate():
    from spark_tui.nodes.discover import Candidate

    return Candidate("local", "local")


def _confirm(output) -> bool:
    try:
        answer = input(f"Write this to {output}? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _write(output, text: str):
    """Write cluster.yaml; an existing file is moved aside (timestamped), never overwritten.
    Refused under --read-only."""
    from spark_tui import policy

    policy.refuse_if_read_only(f"write {output}")
    from spark_tui.recipes.render import stamp_now
    from spark_tui.safefile import write_atomic

    output.parent.mkdir(parents=True, exist_ok=True)
    if output.exists():
        output.rename(output.with_name(f"{output.name}.{stamp_now()}.bak"))
    write_atomic(output, text, mode=0o644, own=False)  # a fresh temporary file: no planted symlink
    return output


def _print(proposal, text: str, output, written, interactive: bool) -> None:
    out = sys.stdout
    if proposal.nodes:
        if proposal.origin:
            reached = sum(1 for _, p in proposal.nodes if p.reachable)
            out.write(
                f"{len(proposal.nodes)} node(s) from {proposal.origin}, "
                f"{reached} reached over SSH:\n"
            )
        else:
            out.write(f"Found {len(proposal.nodes)} DGX Spark(s), {proposal.topology}:\n")
        for n, p in proposal.nodes:
            where = p.where or ("this machine" if p.reachable else f"{n.host} (not reached)")
            out.write(
                f"  {n.name:<12} {n.role:<6} {where:<28} "
                f"fabric {n.fabric_if or '?'} {n.fabric_ip or '?'} "
                f"({p.fabric_ports_up} port{'s' if p.fabric_ports_up != 1 else ''} up)\n"
            )
    else:
        out.write("No DGX Spark found.\n")
        from spark_tui.nodes.discover import CLUSTER_YAML_TEMPLATE

        out.write(
            "\nWrite cluster.yaml by hand from this template (or give discover a host, a "
            "subnet, or --from an eugr .env / a sparkrun cluster file):\n\n"
            + CLUSTER_YAML_TEMPLATE
            + "\n"
        )
    for p in proposal.left_out:
        out.write(f"  left out {p.candidate.host} ({p.candidate.source}): {p.reason}\n")
    if proposal.swept:
        out.write(f"  {proposal.swept} subnet address(es) did not answer on the SSH port\n")
    if text:
        out.write(f"\ncluster.yaml ({output}):\n{text}")
        if written:
            out.write(f"Written to {written}.\n")
        else:
            out.write("Not written" + ("." if interactive else " (pass --yes to write it).") + "\n")
