"""The network of a simulated node: ip (and `ip link set … mtu`), ibdev2netdev, ss, and
the other nodes reached with ssh and ping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.sim.shell.context import HOST, Command, Ctx, Out
from spark_tui.sim.shell.interpreter import run_script

if TYPE_CHECKING:
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.world import SimWorld


def _ip(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    if argv[1:3] == ["link", "set"] and "mtu" in argv:
        return _ip_link_set(argv[1:], ctx)
    args = [a for a in argv[1:] if a not in ("-o", "-br", "-4", "-6", "-d", "-s")]
    brief = "-br" in argv
    obj = args[0] if args else ""
    ifs = ctx.node.interfaces()
    lines = []
    if obj in ("link", "l"):
        for n, i in enumerate(ifs, 1):
            if brief:
                lines.append(f"{i.name:<17}{i.state:<15}{i.mac} <BROADCAST,MULTICAST,UP,LOWER_UP>")
                continue
            flags = (
                "LOOPBACK,UP,LOWER_UP"
                if i.name == "lo"
                else (
                    "BROADCAST,MULTICAST,UP,LOWER_UP"
                    if i.state == "UP"
                    else "NO-CARRIER,BROADCAST,MULTICAST,UP"
                )
            )
            kind = "loopback" if i.name == "lo" else "ether"
            lines.append(
                f"{n}: {i.name}: <{flags}> mtu {i.mtu} qdisc mq state {i.state} mode DEFAULT group default qlen 1000\\"
                f"    link/{kind} {i.mac} brd ff:ff:ff:ff:ff:ff"
            )
    elif obj in ("addr", "a", "address"):
        for n, i in enumerate(ifs, 1):
            if brief:
                lines.append(f"{i.name:<17}{i.state:<15}{' '.join(i.addrs)}")
            else:
                for a in i.addrs:
                    lines.append(
                        f"{n}: {i.name}    inet {a} scope global {i.name}\\       valid_lft forever preferred_lft forever"
                    )
    elif obj in ("route", "r"):
        lines.append(
            f"default via 192.168.1.1 dev {ctx.node.mgmt_if} proto dhcp src {ctx.node.mgmt_ip} metric 100"
        )
        lines.append(
            f"10.10.10.0/24 dev {ctx.node.fabric_if} proto kernel scope link src {ctx.node.fabric_ip}"
        )
        lines.append(
            f"192.168.1.0/24 dev {ctx.node.mgmt_if} proto kernel scope link src {ctx.node.mgmt_ip} metric 100"
        )
    else:
        return Out(255, "", f'Object "{obj}" is unknown, try "ip help".\n')
    return Out(0, "".join(line + "\n" for line in lines))


def _ip_link_set(args: list[str], ctx: Ctx) -> Out:
    """`ip link set dev IF mtu N` (root) changes the fabric MTU (fabric-slow's fix)."""
    if not ctx.root:
        return Out(2, "", "RTNETLINK answers: Operation not permitted\n")
    dev = args[args.index("dev") + 1] if "dev" in args else args[2]
    mtu = int(args[args.index("mtu") + 1])
    node = ctx.node
    if dev == node.fabric_if:
        node.fabric_mtu = mtu
        return Out(0, "")
    return Out(1, "", f'Cannot find device "{dev}"\n')


def _ibdev2netdev(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    lines = [
        f"{i.roce} port 1 ==> {i.name} ({'Up' if i.state == 'UP' else 'Down'})"
        for i in ctx.node.interfaces()
        if i.roce
    ]
    return Out(0, "".join(line + "\n" for line in lines))


def _ss(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    ports = [22]
    for c in ctx.node.containers.values():
        if c.running and c.ray is not None:
            ports += [6379, 8265, 10001] if c.ray.head else []
    now = ctx.world.clock.now()
    for e in ctx.world.engines:
        if (
            e.node is ctx.node
            and e.serving_from is not None
            and now >= e.serving_from
            and e.alive(now)
        ):
            ports.append(e.spec.port)
    header = "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
    body = "".join(
        f"LISTEN 0      4096         0.0.0.0:{p:<6}      0.0.0.0:*\n" for p in sorted(set(ports))
    )
    return Out(0, body if "H" in "".join(argv[1:]) else header + body)


def find_node(world: SimWorld, host: str) -> SimNode | None:
    host = host.split("@")[-1]
    for n in world.nodes.values():
        if host in (n.name, n.fabric_ip, n.mgmt_ip):
            return n
    return None


def _ssh(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    args = argv[1:]
    target = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if target is None and a in ("-o", "-p", "-i", "-l", "-J", "-F"):
            i += 2
            continue
        if target is None and a.startswith("-"):
            i += 1
            continue
        if target is None:
            target = a
        else:
            rest.append(a)
        i += 1
    if target is None:
        return Out(255, "", "usage: ssh destination [command]\n")
    node = find_node(ctx.world, target)
    if node is None:
        return Out(
            255, "", f"ssh: Could not resolve hostname {target}: Name or service not known\n"
        )
    if not node.is_up():
        return Out(
            255,
            "",
            f"ssh: connect to host {target} port 22: {node.down_reason().split(' (')[0].capitalize()}\n",
        )
    # the remote command runs in a login shell: its own $HOME and user, in $HOME
    env = {k: v for k, v in ctx.env.items() if k in ("HOME", "USER", "PATH", "SHELL")}
    return run_script(" ".join(rest) or "true", Ctx(ctx.world, node, env=env), stdin)


def _ping(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    host = next((a for a in reversed(argv[1:]) if not a.startswith("-") and not a.isdigit()), "")
    node = find_node(ctx.world, host)
    if node is None or not node.is_up():
        return Out(
            1,
            f"PING {host} ({host}) 56(84) bytes of data.\n\n--- {host} ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n\n",
        )
    # `-M do -s N`: a packet of N + 28 bytes that may not be fragmented (iputils' wording): too
    # big for this node's fabric MTU it is refused here, too big for the peer's (or for a
    # switch port on the way) it is lost
    size = int(argv[argv.index("-s") + 1]) if "-s" in argv[:-1] else 56
    if "-M" in argv[:-1] and argv[argv.index("-M") + 1] == "do" and size + 28 > 1500:
        head = f"PING {host} ({host}) {size}({size + 28}) bytes of data.\n\n--- {host} ping statistics ---\n"
        if size + 28 > ctx.node.fabric_mtu:
            return Out(
                1,
                head
                + "1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms\n\n",
                f"ping: local error: message too long, mtu={ctx.node.fabric_mtu}\n",
            )
        if size + 28 > min(node.fabric_mtu, ctx.node.switch_port_mtu, node.switch_port_mtu):
            return Out(
                1, head + "1 packets transmitted, 0 received, 100% packet loss, time 0ms\n\n"
            )
    return Out(
        0,
        f"PING {host} ({host}) 56(84) bytes of data.\n64 bytes from {host}: icmp_seq=1 ttl=64 time=0.211 ms\n\n"
        f"--- {host} ping statistics ---\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
        "rtt min/avg/max/mdev = 0.211/0.211/0.211/0.000 ms\n",
    )


COMMANDS = {
    "ip": Command(_ip),
    "ibdev2netdev": Command(_ibdev2netdev, HOST),
    "ss": Command(_ss, HOST),
    "ssh": Command(_ssh, HOST),
    "ping": Command(_ping, HOST),
}
