"""Run sparkrun's own `run --dry-run` on recipe files and record, per node, what it would send.

Run it with the Python of a venv where sparkrun is installed (sparkrun needs Python >= 3.12):

    python3.12 -m venv /tmp/srvenv && /tmp/srvenv/bin/pip install sparkrun==0.4.2
    HOME=$(mktemp -d) /tmp/srvenv/bin/python tools/sparkrun_dryrun.py OUT.json RECIPE.yaml...

For each recipe it calls sparkrun's command line (`sparkrun run FILE --hosts ... --dry-run
--no-auto-detect --no-sync-tuning`) in this process, and for a recipe built with sparkrun 0.4's
`include:` or `overrides:` also `sparkrun export recipe FILE --realize --no-pin --hosts ...`
(the plain recipe sparkrun would launch there, recorded as `realized`), with one change: no SSH session is ever
opened (a probe that would open one fails at once, as an unreachable host would), and every
script sparkrun would pipe to a host in the dry run is recorded with the host it was meant for.
From those scripts the per-node `docker run` (image, -e env, options) and the serve command are
cut out and written to OUT.json, with sparkrun's version. Nothing here reads sparkrun's source.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

HOSTS = (
    "10.77.0.1",
    "10.77.0.2",
    "10.77.0.3",
    "10.77.0.4",
    "10.77.0.5",
    "10.77.0.6",
    "10.77.0.7",
    "10.77.0.8",
)


def _install_recorder(scripts: list[tuple[str, str]]) -> None:
    import sparkrun.orchestration.ssh as ssh

    original = ssh.run_remote_script

    def recording(host: str, script: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("dry_run"):
            scripts.append((host, script))
        return original(host, script, *args, **kwargs)

    def unreachable(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        host = kwargs.get("host", "")
        return ssh.RemoteResult(host=host, returncode=255, stdout="", stderr="unreachable")

    ssh._run_subprocess = unreachable  # type: ignore[attr-defined]
    for mod in list(sys.modules.values()):
        if mod is None or not getattr(mod, "__name__", "").startswith("sparkrun"):
            continue
        for name in ("run_remote_script",):
            if getattr(mod, name, None) is original:
                setattr(mod, name, recording)


def _docker_run(script: str) -> list[str] | None:
    """The words of the `docker run` line in a container launch script."""
    for line in script.splitlines():
        line = line.strip()
        if line.startswith("docker run ") or " docker run " in line:
            text = line[line.index("docker run ") :]
            # sparkrun's seccomp profile and the /dev/infiniband probe are shell, not words
            text = re.sub(
                r"--security-opt seccomp=<\(printf '%s' '[^']*'\)",
                "--security-opt seccomp=PROFILE",
                text,
            )
            text = re.sub(
                r"\$\( \[ -e /dev/infiniband \] && printf -- '--device /dev/infiniband' \)",
                "",
                text,
            )
            try:
                return shlex.split(text)
            except ValueError:
                return text.split()
    return None


def _serve_words(script: str) -> tuple[dict[str, str], list[str]] | None:
    """(exported env, serve command words) of sparkrun's exec script: the command travels
    base64-encoded (`printf '%s' '<b64>' | base64 -d`) as `export K=V; ...; <command>`."""
    import base64

    for m in re.finditer(r"printf '%s' '([A-Za-z0-9+/=]{16,})'", script):
        try:
            inner = base64.b64decode(m.group(1)).decode()
        except Exception:
            continue
        try:
            words = shlex.split(inner.replace("\\\n", " "))
        except ValueError:
            continue
        env: dict[str, str] = {}
        while len(words) >= 2 and words[0] == "export":
            k, _, v = words[1].rstrip(";").partition("=")
            env[k] = v
            words = words[2:]
        if words:
            return env, words
    return None


def _node(words: list[str]) -> dict[str, Any]:
    env: dict[str, str] = {}
    opts: list[str] = []
    image = ""
    name = ""
    i = 2
    while i < len(words):
        w = words[i]
        if w == "-e" and i + 1 < len(words):
            k, _, v = words[i + 1].partition("=")
            env[k] = v
            i += 2
            continue
        if w == "--label":  # sparkrun's bookkeeping (recipe path, job ids)
            i += 2
            continue
        if w == "--name":
            name = words[i + 1]
            i += 2
            continue
        if w.startswith("-"):
            if (
                i + 1 < len(words)
                and not words[i + 1].startswith("-")
                and "=" not in w
                and w
                not in (
                    "-d",
                    "--rm",
                    "--privileged",
                    "--init",
                )
            ):
                opts += [w, words[i + 1]]
                i += 2
            else:
                opts.append(w)
                i += 1
            continue
        image = w
        break
    home = str(Path.home())
    opts = [o.replace(home, "~") for o in opts]
    return {"image": image, "container": name, "env": env, "docker_options": opts}


def dry_run(path: Path, nodes: int) -> dict[str, Any]:
    from sparkrun.cli import main as cli

    scripts: list[tuple[str, str]] = []
    _install_recorder(scripts)
    hosts = ",".join(HOSTS[:nodes])
    args = [
        "-vvv",
        "run",
        str(path),
        "--hosts",
        hosts,
        "--dry-run",
        "--no-auto-detect",
        "--no-sync-tuning",
    ]
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            cli.main(args=args, standalone_mode=False)
        except SystemExit as exc:
            code = int(exc.code or 0)
        except Exception as exc:
            code = 1
            print(f"{type(exc).__name__}: {exc}", file=out)
    per_host: dict[str, dict[str, Any]] = {}
    for host, script in scripts:
        words = _docker_run(script)
        if words and " run" in " ".join(words[:2]):
            per_host.setdefault(host, {}).update(_node(words))
        serve = _serve_words(script)
        if serve and "serve" not in per_host.get(host, {}):
            per_host.setdefault(host, {}).update(serve_env=serve[0], serve=serve[1])
    text = out.getvalue()
    result: dict[str, Any] = {"exit": code, "nodes": []}
    for rank, host in enumerate(HOSTS[:nodes]):
        if host in per_host:
            result["nodes"].append({"rank": rank, "host": host, **per_host[host]})
    m = re.search(r"Runtime:\s+(\S+)", text)
    result["runtime"] = m.group(1) if m else ""
    if code:
        result["error"] = [ln for ln in text.splitlines() if ln.strip()][-3:]
    return result


def realize(path: Path, nodes: int) -> str:
    """sparkrun's own `export recipe FILE --realize --no-pin --hosts …`: the plain v2 recipe
    it would launch on those hosts (include: merged, overrides: resolved), as YAML."""
    from sparkrun.cli import main as cli

    args = [
        "export",
        "recipe",
        str(path),
        "--realize",
        "--no-pin",
        "--hosts",
        ",".join(HOSTS[:nodes]),
    ]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(args=args, standalone_mode=False)
        except SystemExit:
            pass
        except Exception as exc:  # recorded, not raised: the dry run says more
            print(f"{type(exc).__name__}: {exc}", file=err)
    text = out.getvalue()
    start = text.find("recipe_version:")
    return text[start:] if start >= 0 else ""


def _no_ssh() -> None:
    """An `ssh` first on PATH that fails at once, as an unreachable host does."""
    import os
    import tempfile

    shim = Path(tempfile.mkdtemp(prefix="no-ssh-"))
    (shim / "ssh").write_text(
        "#!/bin/sh\necho 'ssh: connect: Network is unreachable' >&2\nexit 255\n"
    )
    (shim / "ssh").chmod(0o755)
    os.environ["PATH"] = f"{shim}:{os.environ.get('PATH', '')}"


def main(argv: list[str]) -> int:
    import sparkrun

    _no_ssh()
    import os

    os.environ["SPARKRUN_NO_TELEMETRY"] = "1"  # its run event asks the Hugging Face Hub

    out_path = Path(argv[0])
    results: dict[str, Any] = {"sparkrun": getattr(sparkrun, "__version__", ""), "recipes": {}}
    for arg in argv[1:]:
        path = Path(arg)
        import yaml

        data = yaml.safe_load(path.read_text())
        try:  # a recipe built with include: counts its nodes from the merged recipe
            from sparkrun.core.recipe_include import resolve_recipe_includes

            data = resolve_recipe_includes(data, path)[0]
        except Exception:  # a chain sparkrun refuses: its run says why
            pass
        nodes = int(data.get("min_nodes") or 1)
        defaults = data.get("defaults") or {}
        tp = int(defaults.get("tensor_parallel") or 1) * int(defaults.get("pipeline_parallel") or 1)
        nodes = max(nodes, tp if tp <= 8 else 1)
        if data.get("max_nodes"):
            nodes = min(nodes, int(data["max_nodes"]))
        entry = {"hosts": nodes, **dry_run(path, nodes)}
        raw = yaml.safe_load(path.read_text()) or {}
        if entry["exit"] == 0 and ("include" in raw or "overrides" in raw):
            entry["realized"] = realize(path, nodes)  # sparkrun 0.4's own flattening
        results["recipes"][str(path)] = entry
        print(
            path,
            results["recipes"][str(path)]["exit"],
            len(results["recipes"][str(path)]["nodes"]),
            file=sys.stderr,
        )
    out_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
