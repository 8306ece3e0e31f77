"""curl on a simulated node: requests to an engine's real local HTTP server, found from
the node and port the command names."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request

from spark_tui.sim.shell.context import Command, Ctx, Out
from spark_tui.sim.shell.network import find_node


def _curl(argv: list[str], ctx: Ctx, stdin: str) -> Out:
    from urllib.parse import urlsplit

    args = argv[1:]
    method = None
    data: str | None = None
    headers: dict[str, str] = {}
    url = ""
    write_out = ""
    fail = False
    timeout = 30.0
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a in ("-X", "--request"):
            method, i = nxt, i + 2
        elif a in ("-d", "--data", "--data-raw", "--data-binary"):
            data, i = (stdin if nxt == "@-" else nxt), i + 2
        elif a in ("-H", "--header"):
            if ":" in nxt:
                k, v = nxt.split(":", 1)
                headers[k.strip()] = v.strip()
            i += 2
        elif a in ("-w", "--write-out"):
            write_out, i = nxt, i + 2
        elif a in ("-m", "--max-time", "--connect-timeout"):
            with contextlib.suppress(ValueError):
                timeout = float(nxt)
            i += 2
        elif a in ("-o", "--output", "-u", "--user"):
            i += 2
        elif a.startswith("-"):
            fail = fail or a in ("-f", "--fail") or ("f" in a[1:] and not a.startswith("--"))
            i += 1
        else:
            url, i = a, i + 1
    parts = urlsplit(url if "://" in url else "http://" + url)
    host, port = parts.hostname or "", parts.port or 80
    node = ctx.node if host in ("127.0.0.1", "localhost", "0.0.0.0") else find_node(ctx.world, host)
    endpoint = (
        ctx.world.http_endpoint(node.name, port) if node is not None and node.is_up() else None
    )
    if endpoint is None:
        return Out(
            7,
            "",
            f"curl: (7) Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server\n",
        )
    full = endpoint + (parts.path or "/") + (("?" + parts.query) if parts.query else "")
    body = data.encode() if data is not None else None
    req = urllib.request.Request(
        full, data=body, method=method or ("POST" if body else "GET"), headers=headers
    )
    start = ctx.world.clock.now()
    try:
        with urllib.request.urlopen(
            req, timeout=max(1.0, timeout / max(ctx.world.clock.speed, 1.0) + 5)
        ) as resp:
            text = resp.read().decode("utf-8", "replace")
            status = resp.status
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        status = exc.code
    except (urllib.error.URLError, OSError, TimeoutError):
        return Out(
            28,
            "",
            f"curl: (28) Operation timed out after {int(timeout * 1000)} milliseconds with 0 bytes received\n",
        )
    elapsed = ctx.world.clock.now() - start
    if fail and status >= 400:
        return Out(22, "", f"curl: (22) The requested URL returned error: {status}\n")
    if write_out:
        w = write_out.replace("%{time_total}", f"{elapsed:.6f}").replace(
            "%{http_code}", str(status)
        )
        text += w.encode().decode("unicode_escape")
    return Out(0, text)


COMMANDS = {"curl": Command(_curl)}
