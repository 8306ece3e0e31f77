"""`spark-tui doctor`: a read-only preflight of every node before a launch.

Each node is sampled once (the same one-process round as the live monitor);
the metric and check walls that make sense before a launch are evaluated by
the same RuleEngine over the same knowledge (durations ignored: a preflight
cannot wait minutes), and a few checks that need a command of their own run
too: passwordless SSH from the head to each worker, fabric reachability from
the head, the same container image and model files on every node, sudo -n.
Nothing here changes a node. Values from config or a recipe reach a shell
only through spark_tui.shell (quoted).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from spark_tui import shell
from spark_tui.clock import Clock
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.loader import parse_wall
from spark_tui.kb.schema import Wall
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.model_paths import model_size
from spark_tui.nodes.rules import CLUSTER, RECIPE, RuleEngine, cluster_facts
from spark_tui.nodes.sampler import fabric_address, sample
from spark_tui.nodes.state import NodeState, ServingState
from spark_tui.nodes.transport import NodeUnreachable, Transport
from spark_tui.yamlfile import parse_yaml

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
# metric walls whose readings mean something before a launch (check walls always count)
PREFLIGHT_METRIC_WALLS = ("page-cache-hog", "node-memory-asymmetry", "unified-memory-leak")
# ports a launch needs free: the serve API, Ray's GCS, dashboard and client server
DEFAULT_PORTS = {8000: "serve API", 6379: "Ray GCS", 8265: "Ray dashboard", 10001: "Ray client"}

# Used only when the knowledge base has no wall of that id (a user's trimmed copy):
# the same rules as data, never an if-statement per check.
FALLBACK_WALLS = {
    "page-cache-hog": """
id: page-cache-hog
title: The page cache holds the last run's weights
severity: warning
kind: metric
engines: [any]
summary: Cached pages look free but are not free to CUDA on unified memory.
signatures: [{when: ['memory.cached_gib >= 20']}]
fixes:
  - {id: drop-page-caches, title: Drop the page cache on every node, risk: safe, root: true,
     actions: [{type: run, on: all, command: sync},
               {type: run, on: all, root: true, command: 'sysctl -w vm.drop_caches=3'}]}
references: ["Getting MiniMax M2.7 Running on 2× DGX Spark: Every Wall We Hit — https://al-engr.com/minimax-sglang-debug.html"]
""",
    "node-memory-asymmetry": """
id: node-memory-asymmetry
title: Nodes start with unequal free memory
severity: warning
kind: metric
engines: [any]
summary: One node has less memory than the others; it swaps and loads slower.
signatures: [{when: ['cluster.available_spread_gib > 5'], scope: cluster}]
fixes:
  - {id: drop-page-caches, title: Drop the page cache on every node, risk: safe, root: true,
     actions: [{type: run, on: all, command: sync},
               {type: run, on: all, root: true, command: 'sysctl -w vm.drop_caches=3'}]}
references: ["Getting MiniMax M2.7 Running on 2× DGX Spark: Every Wall We Hit — https://al-engr.com/minimax-sglang-debug.html"]
""",
    "drm-override-halves-memory": """
id: drm-override-halves-memory
title: The nvidia-drm override file halves CUDA memory
severity: error
kind: check
engines: [any]
summary: /etc/modprobe.d/zz-nvidia-drm-override.conf makes CUDA see about 62 GB.
signatures: [{when: ['files.drm_override == true']}]
fixes:
  - {id: move-override-aside-and-reboot, title: Move the file aside and reboot, risk: destructive,
     root: true, actions: [{type: move-aside, path: /etc/modprobe.d/zz-nvidia-drm-override.conf}]}
references: ["DeepSeek V4 Flash on SGLang across two DGX Sparks, and the pivot to MiniMax M2.7 (al-engr.com) — https://al-engr.com/sglang-deepseek-spark-pivot.html"]
""",
}


@dataclass(frozen=True)
class Check:
    """One line of the preflight: {"id", "node", "status", "detail"} (docs/json.md)."""

    id: str
    node: str | None  # None for a check over the whole cluster
    status: str  # pass | warn | fail | skip
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "node": self.node, "status": self.status, "detail": self.detail}


@dataclass
class DoctorReport:
    cluster: ClusterConfig
    states: dict[str, NodeState]
    checks: list[Check] = field(default_factory=list)
    # the walls its readings predict a launch would hit (durations not waited for): the
    # driver fixes them before the launch
    predicted: list[Diagnosis] = field(default_factory=list)

    @property
    def reachable(self) -> list[str]:
        return [n for n, s in self.states.items() if s.reachable]

    def node_json(self, name: str) -> dict[str, object]:
        s = self.states[name]
        memory = None
        if s.memory is not None:
            memory = {
                "total_bytes": s.memory.total_bytes,
                "available_bytes": s.memory.available_bytes,
                "cached_bytes": s.memory.cached_bytes,
            }
        gpus = [
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "sm_pct": g.sm_pct,
                "memory_total_bytes": g.memory_total_bytes,
                "memory_used_bytes": g.memory_used_bytes,
                "temp_c": g.temp_c,
                "power_w": g.power_w,
            }
            for g in s.gpus
        ]
        return {"name": name, "reachable": s.reachable, "memory": memory, "gpus": gpus}

    def to_json(self) -> dict[str, object]:
        """`doctor --json` object (docs/json.md)."""
        return {
            "nodes": [self.node_json(n.name) for n in self.cluster.nodes],
            "checks": [c.to_json() for c in self.checks],
        }


def preflight_walls(kb: Iterable[Wall]) -> list[Wall]:
    """The walls doctor evaluates: every check wall, the preflight metric walls,
    and the fallbacks for those the knowledge base lacks."""
    walls = {
        w.id: w for w in kb if w.rules and (w.kind == "check" or w.id in PREFLIGHT_METRIC_WALLS)
    }
    for wid, text in FALLBACK_WALLS.items():
        if wid not in walls and not any(w.id == wid for w in kb):
            walls[wid] = parse_wall(parse_yaml(text, f"<doctor:{wid}>"), f"<doctor:{wid}>")
    return [walls[k] for k in sorted(walls)]


def run_doctor(
    cluster: ClusterConfig,
    transports: Mapping[str, Transport],
    kb: Iterable[Wall],
    clock: Clock,
    *,
    recipe_facts: Mapping[str, object] | None = None,
    image: str | None = None,
    model_paths: Iterable[str] = (),
    ports: Mapping[int, str] | None = None,
    fit_recipe: object | None = None,
    serving: Mapping[str, ServingState] | None = None,
) -> DoctorReport:
    """Sample every node once and run every check; never changes a node.
    With `fit_recipe` (a Recipe), a `fit` check per node: does the model fit its memory.
    `serving`: each node's serving phase as a live monitor follows it from the engine's log.
    One read cannot tell it: a node whose stack runs reads as starting (never as stopped),
    so the walls of an idle node (a full page cache between runs) are not predicted beside
    a running engine."""
    nodes = list(cluster.nodes)
    kb = list(kb)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(nodes)))) as pool:
        states = dict(
            zip(
                [n.name for n in nodes],
                pool.map(lambda n: sample(transports[n.name], n, clock), nodes),
                strict=True,
            )
        )
    for name, st in states.items():
        live = (serving or {}).get(name, st.serving)
        if st.reachable and st.stack_up and live.phase == "stopped":
            live = ServingState(phase="starting")  # something of the stack runs: not idle
        if live is not st.serving:
            states[name] = dataclasses.replace(st, serving=live)
    report = DoctorReport(cluster, states)
    add = report.checks.append
    for n in nodes:
        s = states[n.name]
        add(
            Check("reachable", n.name, PASS, f"answered ({_where(n)})")
            if s.reachable
            else Check("reachable", n.name, FAIL, s.unavailable.get("node", "no answer"))
        )
    head = cluster.head
    head_t = transports[head.name]
    head_up = states[head.name].reachable
    for n in cluster.workers:
        if states[n.name].reachable:
            add(_ssh_from_head(head, head_up, head_t, n))
        else:  # its own reachable check says why; ssh's timeout would only repeat it
            add(Check("ssh-from-head", n.name, SKIP, f"{n.name} is unreachable"))
    for n in nodes:
        s = states[n.name]
        if not s.reachable:
            continue
        add(_gpu_check(n, s))
        add(_fabric_link(n, s))
        add(_leftovers(n, s))
        add(_ports(n, s, ports or _ports_wanted(recipe_facts)))
        add(_sudo(n, transports[n.name], kb, s.facts()))
        add(_host_kernel(n, transports[n.name], known_host_breakage()))
    add(_fabric_mtu(states))
    for n in cluster.workers:
        add(_fabric_ping(head, head_up, head_t, n, states[n.name]))
    if image:
        add(
            _same_everywhere(
                "container-image",
                image,
                nodes,
                states,
                transports,
                shell.fill(commands.IMAGE_ID, {"image": image}),
            )
        )
    paths = list(model_paths)
    if paths:  # the places one model may be: found in any of them
        add(_model_files(paths, nodes, states, transports))
    report.checks.extend(_wall_checks(kb, states, clock.now(), recipe_facts, report.predicted))
    if fit_recipe is not None:
        wanted = getattr(fit_recipe, "nodes", 1)
        if wanted > len(nodes):
            rid = getattr(fit_recipe, "id", "the recipe")
            add(
                Check(
                    "recipe-nodes",
                    None,
                    FAIL,
                    f"{rid} needs {wanted} nodes; the cluster has {len(nodes)}: add nodes to "
                    "cluster.yaml or choose a recipe for this many",
                )
            )
        report.checks.extend(_fit_checks(fit_recipe, cluster, states))
    return report


def _fit_checks(recipe: object, cluster: ClusterConfig, states: Mapping[str, NodeState]) -> list:
    """`spark-tui recipes fit` as doctor checks, one per node the recipe uses."""
    from spark_tui.recipes.fit import fit_nodes

    report = fit_nodes(recipe, cluster, states)  # type: ignore[arg-type]  # the doctor's NodeState of each reachable node
    gib = 1 << 30
    out = []
    for n in report.nodes:
        if n.available_bytes is None:
            out.append(Check("fit", n.name, SKIP, n.reason))
            continue
        used = (n.budget_bytes or 0) + n.object_store_bytes
        head = f"{report.recipe.id}: needs {used / gib:.1f} of {n.available_bytes / gib:.1f} GiB"
        if n.fits:
            left = (n.available_bytes - used) / gib
            out.append(Check("fit", n.name, PASS, f"{head}; {left:.1f} GiB headroom"))
        else:
            wall = f" (a launch would hit {n.wall})" if n.wall else ""
            out.append(Check("fit", n.name, FAIL, f"{n.reason}{wall}"))
    if report.cluster_wall:
        out.append(Check("fit", None, FAIL, report.advice[-1]))
    return out


# ---------------------------------------------------------------- wall checks


def _wall_checks(
    kb: Iterable[Wall],
    states: Mapping[str, NodeState],
    now: float,
    recipe_facts: Mapping[str, object] | None,
    predicted: list[Diagnosis] | None = None,
) -> list[Check]:
    walls = preflight_walls(kb)
    engine = RuleEngine(walls)
    firings = engine.evaluate_states(states, now, recipe_facts, ignore_durations=True)
    fired = {(f.diagnosis.wall.id, f.subject): f.diagnosis for f in firings}
    if predicted is not None:
        predicted.extend(fired.values())
    reachable = {name: s.facts() for name, s in states.items() if s.reachable}
    cluster_f = cluster_facts(states)
    recipe = dict(recipe_facts or {})
    out: list[Check] = []
    for wall in walls:
        subjects: dict[str, dict[str, object]] = {}
        for rule in wall.rules:
            if rule.scope == "node":
                subjects.update({n: {**recipe, **cluster_f, **f} for n, f in reachable.items()})
            elif rule.scope == "cluster":
                subjects[CLUSTER] = {**recipe, **cluster_f}
            elif recipe_facts is not None:
                subjects[RECIPE] = {**cluster_f, **recipe}
        for subject, facts in subjects.items():
            node = None if subject in (CLUSTER, RECIPE) else subject
            diag = fired.get((wall.id, subject))
            if diag is not None:
                fixes = wall.fixes_for(facts)
                fix = f" Fix: {fixes[0].title}." if fixes else ""
                status = FAIL if wall.severity == "error" else WARN
                out.append(Check(wall.id, node, status, f"{wall.title}: {diag.evidence}.{fix}"))
                continue
            readable = [r for r in wall.rules if _readable(r.when, facts)]
            if not readable:
                missing = sorted(
                    {c.path for r in wall.rules for c in r.when if c.path not in facts}
                )
                out.append(
                    Check(wall.id, node, SKIP, f"not readable here ({', '.join(missing[:4])})")
                )
            else:
                out.append(Check(wall.id, node, PASS, f"not seen ({wall.title})"))
    return out


def _readable(conditions, facts: Mapping[str, object]) -> bool:
    return all(c.path in facts or c.op in ("is set", "is unset") for c in conditions)


# ---------------------------------------------------------------- command checks


def _where(n: NodeConfig) -> str:
    return "this machine" if n.is_local else n.host


def _run(t: Transport, command: str, timeout: float = 20.0):
    try:
        return t.run(command, timeout=timeout)
    except NodeUnreachable:
        return None


HOST_KERNELS = "host-kernels.yaml"  # in the knowledge base's data/ directory
_RELEASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}")


def known_host_breakage() -> list[dict[str, object]]:
    """The knowledge base's host kernels and drivers known to break NCCL over RoCE."""
    from spark_tui import paths
    from spark_tui.yamlfile import load_yaml

    data = load_yaml(paths.builtin_knowledge_dir() / "data" / HOST_KERNELS)
    return [e for e in data or [] if isinstance(e, dict)]


def _host_kernel(n: NodeConfig, t: Transport, known: list[dict[str, object]]) -> Check:
    """The node's kernel release and GPU driver against the known NCCL-over-RoCE breakers."""
    r = _run(t, f"{commands.VERSIONS['kernel']}; {commands.VERSIONS['driver']}")
    words = r.stdout.split() if r is not None else []
    kernel = words[0] if words and _RELEASE.fullmatch(words[0]) else ""
    driver = words[1] if len(words) > 1 and _RELEASE.fullmatch(words[1]) else ""
    if not kernel:
        return Check("host-kernel", n.name, SKIP, "uname -r gave no kernel release")
    for e in known:
        if e.get("kernel") and str(e["kernel"]) != kernel:
            continue
        if e.get("driver") and str(e["driver"]) != driver:
            continue
        if not (e.get("kernel") or e.get("driver")):
            continue
        refs = [str(x) for x in e.get("references") or []]  # type: ignore[attr-defined]  # the entry is a mapping read from YAML
        what = f"kernel {kernel}" + (f", driver {e['driver']}" if e.get("driver") else "")
        return Check(
            "host-kernel",
            n.name,
            FAIL,
            f"{what} breaks NCCL over RoCE ({e.get('breaks')}); {e.get('fix')}"
            + (f" (works: {e['works']})" if e.get("works") else "")
            + (f" — {refs[0]}" if refs else ""),
        )
    return Check(
        "host-kernel",
        n.name,
        PASS,
        f"kernel {kernel}"
        + (f", driver {driver}" if driver else "")
        + ": none known to break NCCL over RoCE",
    )


def _ssh_from_head(head: NodeConfig, head_up: bool, head_t: Transport, n: NodeConfig) -> Check:
    if not head_up:
        return Check("ssh-from-head", n.name, SKIP, f"the head {head.name} is unreachable")
    if n.is_local:
        return Check("ssh-from-head", n.name, SKIP, "the worker is 'local'")
    target = f"{n.user}@{n.host}" if n.user else n.host
    template = commands.SSH_CHECK_PORT if n.port else commands.SSH_CHECK
    command = shell.fill(template, {"target": target, "port": n.port})
    r = _run(head_t, command, timeout=20)
    if r is None:
        return Check("ssh-from-head", n.name, SKIP, f"the head {head.name} dropped")
    if r.ok:
        return Check(
            "ssh-from-head", n.name, PASS, f"{head.name} reaches {target} without a password"
        )
    said = f"{r.stdout}\n{r.stderr}"
    tail = r.tail(2) or f"exit {r.exit_code}"
    if "Host key verification failed" in said or "HOST IDENTIFICATION HAS CHANGED" in said:
        why = (
            f"{head.name} refuses {target}'s host key (unknown or changed): check it, then "
            f"accept it once from the head (ssh {target}) or add it to the head's known_hosts"
        )
    elif "Permission denied" in said:
        why = (
            f"{head.name} cannot ssh to {target} without a password (ssh-copy-id from the "
            "head fixes it)"
        )
    else:
        why = f"{head.name} cannot ssh to {target}"
    return Check("ssh-from-head", n.name, FAIL, f"{why}: {tail}")


def _gpu_check(n: NodeConfig, s: NodeState) -> Check:
    if s.gpus:
        names = ", ".join(sorted({g.name for g in s.gpus}))
        return Check("gpu", n.name, PASS, f"{len(s.gpus)} × {names}")
    # every node of the cluster serves on its GPU: none readable is a failure, not a warning
    why = s.unavailable.get("gpu", "nvidia-smi shows no GPU")
    return Check("gpu", n.name, FAIL, f"no GPU readable ({why}): the engine needs one here")


def _fabric_link(n: NodeConfig, s: NodeState) -> Check:
    fab = s.fabric()
    if fab is None:
        why = f"{n.fabric_if} not found" if n.fabric_if else "no fabric interface found"
        return Check("fabric-link", n.name, WARN, f"{why} (set fabric_if in cluster.yaml)")
    parts = [f"{fab.name} {fab.state}", f"MTU {fab.mtu}" if fab.mtu else ""]
    if fab.speed_mbps:
        parts.append(f"{fab.speed_mbps // 1000} Gb/s")
    if fab.roce_devices:
        parts.append("RoCE " + ",".join(fab.roce_devices))
    detail = ", ".join(p for p in parts if p)
    return Check("fabric-link", n.name, PASS if fab.state == "UP" else FAIL, detail)


def _fabric_mtu(states: Mapping[str, NodeState]) -> Check:
    mtus = {
        name: fab.mtu
        for name, s in states.items()
        if s.reachable and (fab := s.fabric()) is not None and fab.mtu is not None
    }
    if len(mtus) < 2:
        return Check("fabric-mtu", None, SKIP, "fewer than two fabric MTUs known")
    detail = ", ".join(f"{n} {m}" for n, m in mtus.items())
    if len(set(mtus.values())) > 1:
        return Check("fabric-mtu", None, FAIL, f"MTUs differ: {detail} (set the same, 9000)")
    return Check("fabric-mtu", None, PASS if min(mtus.values()) >= 9000 else WARN, detail)


def _fabric_ping(
    head: NodeConfig, head_up: bool, head_t: Transport, n: NodeConfig, s: NodeState
) -> Check:
    ip = fabric_address(s, n) if s.reachable else n.fabric_ip
    if ip is None:
        return Check("fabric-ping", n.name, SKIP, "no fabric IP known (set fabric_ip)")
    if not head_up:
        return Check("fabric-ping", n.name, SKIP, f"the head {head.name} is unreachable")
    r = _run(head_t, shell.fill(commands.PING, {"ip": ip}), timeout=10)
    if r is None:
        return Check("fabric-ping", n.name, SKIP, f"the head {head.name} dropped")
    if r.ok:
        return Check("fabric-ping", n.name, PASS, f"{head.name} reaches {ip}")
    if r.exit_code == 127:
        return Check("fabric-ping", n.name, SKIP, f"no ping on {head.name}")
    return Check("fabric-ping", n.name, FAIL, f"{head.name} cannot reach {ip} over the fabric")


def _leftovers(n: NodeConfig, s: NodeState) -> Check:
    found = []
    running = [c.name for c in s.containers if c.state == "running"]
    if running:
        found.append("containers " + ", ".join(running))
    if s.ray is not None:
        found.append(f"Ray ({s.ray.nodes_alive} nodes alive)")
    if s.gpu_processes:
        found.append(
            "GPU processes " + ", ".join(f"{p.name} (pid {p.pid})" for p in s.gpu_processes)
        )
    if found:
        return Check(
            "leftovers", n.name, WARN, "still running from an earlier launch: " + "; ".join(found)
        )
    unread = [k for k in ("containers", "gpu-apps") if k in s.unavailable]
    detail = "no containers, Ray or GPU processes"
    if len(unread) == 2:
        return Check("leftovers", n.name, SKIP, "; ".join(s.unavailable[k] for k in unread))
    if unread:
        detail += " (not read: " + ", ".join(f"{k}: {s.unavailable[k]}" for k in unread) + ")"
    return Check("leftovers", n.name, PASS, detail)


def _ports_wanted(recipe_facts: Mapping[str, object] | None) -> dict[int, str]:
    wanted = dict(DEFAULT_PORTS)
    port = (recipe_facts or {}).get("recipe.serve_args.--port")
    if isinstance(port, (int, float, str)) and str(port).isdigit():
        wanted.pop(8000, None)
        wanted[int(port)] = "serve API"
    return wanted


def _ports(n: NodeConfig, s: NodeState, wanted: Mapping[int, str]) -> Check:
    if "ports" in s.unavailable:
        return Check("ports", n.name, SKIP, s.unavailable["ports"])
    busy = [f"{p} ({wanted[p]})" for p in sorted(wanted) if p in s.listening_ports]
    if busy:
        return Check("ports", n.name, WARN, "in use: " + ", ".join(busy))
    return Check("ports", n.name, PASS, "free: " + ", ".join(str(p) for p in sorted(wanted)))


def _sudo(
    n: NodeConfig, t: Transport, kb: list[Wall], facts: Mapping[str, object] | None = None
) -> Check:
    """Does sudo -n allow every command spark-tui runs as root on this node (asked with
    `sudo -l`, nothing is run)? Else the sudoers rule that allows exactly them. An undo that
    sets back a value read on the node (its MTU) is asked with the value it reads now."""
    from spark_tui.remedy.sudoers import root_commands, sudoers_hint

    values = n.placeholder_values()
    now = {**values, **(facts or {})}
    wanted = [c for c in root_commands(kb, now) if not any(w.startswith("<") for w in c)]
    r = _run(t, commands.sudo_check(wanted), timeout=20)
    if r is None:
        return Check("sudo", n.name, SKIP, "the node dropped")
    if r.exit_code == 127:
        return Check("sudo", n.name, SKIP, "no sudo on this node")
    missing = [ln[len("missing: ") :] for ln in r.stdout.splitlines() if ln.startswith("missing: ")]
    if r.ok and not missing:
        return Check(
            "sudo",
            n.name,
            PASS,
            f"sudo -n allows the {len(wanted)} commands spark-tui runs as root",
        )
    user = getattr(getattr(t, "target", None), "user", None) or n.user or "USER"
    hint = sudoers_hint(kb, values, user)
    if missing and len(missing) < len(wanted):
        return Check("sudo", n.name, WARN, f"sudo -n does not allow {', '.join(missing)}. {hint}")
    return Check("sudo", n.name, WARN, "sudo needs a password (NOPASSWD rule missing). " + hint)


def _same_everywhere(
    check_id: str,
    what: str,
    nodes: list[NodeConfig],
    states: Mapping[str, NodeState],
    transports: Mapping[str, Transport],
    command: str,
) -> Check:
    answers: dict[str, str | None] = {}
    causes: dict[str, str] = {}
    for n in nodes:
        if not states[n.name].reachable:
            continue
        r = _run(transports[n.name], command)
        answers[n.name] = (
            r.stdout.strip().split()[0] if r is not None and r.ok and r.stdout.strip() else None
        )
        if answers[n.name] is None and r is not None:
            causes[n.name] = _missing_because(r)
    missing = [n for n, v in answers.items() if v is None]
    if missing:
        absent = [n for n in missing if not causes.get(n)]
        parts = [f"{what} missing on {', '.join(absent)}"] if absent else []
        parts += [f"{n}: {causes[n]}" for n in missing if causes.get(n)]
        return Check(check_id, None, FAIL, "; ".join(parts))
    if len(set(answers.values())) > 1:
        detail = ", ".join(f"{n} {v[:19]}" for n, v in answers.items() if v)
        return Check(check_id, None, WARN, f"{what} differs between nodes: {detail}")
    if not answers:
        return Check(check_id, None, SKIP, "no node reachable")
    return Check(check_id, None, PASS, f"{what}: the same on {len(answers)} nodes")


def _missing_because(r: object) -> str:
    """Why a command that reads something found nothing: the tool itself missing (exit 127),
    its daemon down, or the thing really absent ("" then)."""
    said = f"{getattr(r, 'stdout', '')}\n{getattr(r, 'stderr', '')}"
    if getattr(r, "exit_code", None) == 127 or "command not found" in said:
        return "docker is not installed (or not on the PATH of the SSH login)"
    if "Cannot connect to the Docker daemon" in said or "permission denied" in said.lower():
        return "docker's daemon cannot be reached by this user (is it running; is the user in the docker group?)"
    return ""


def _model_files(
    paths: list[str],
    nodes: list[NodeConfig],
    states: Mapping[str, NodeState],
    transports: Mapping[str, Transport],
) -> Check:
    sizes: dict[str, int | None] = {}
    where: dict[str, str] = {}
    for n in nodes:
        if not states[n.name].reachable:
            continue
        sizes[n.name], where[n.name] = model_size(transports[n.name], n, paths)
    shown = " or ".join(paths)
    missing = [n for n, v in sizes.items() if v is None]
    if missing:
        return Check("model-files", None, FAIL, f"{shown}: missing on {', '.join(missing)}")
    if len(set(sizes.values())) > 1:
        detail = ", ".join(f"{n} {v:,} bytes" for n, v in sizes.items() if v is not None)
        return Check(
            "model-files", None, FAIL, f"{shown}: sizes differ ({detail}): a copy is incomplete"
        )
    if not sizes:
        return Check("model-files", None, SKIP, f"{shown}: no node reachable")
    size = next(iter(sizes.values())) or 0
    found = sorted(set(where.values()))
    text = f"{', '.join(found)}: {size / (1 << 30):.1f} GiB on every node"
    if len(paths) > 1 and paths[0] not in found:  # a plain copy, not the hub layout
        return Check(
            "model-files",
            None,
            PASS,
            text + "; a plain directory, not the hub layout: the launch loads that directory "
            "(its path in the container) and serves it under the model's id",
        )
    return Check("model-files", None, PASS, text)


def doctor_summary(report: DoctorReport) -> str:
    """'26 passed, 2 warnings, 1 failed — reachable on spark2: …' (no 'doctor:' prefix)."""
    counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
    for c in report.checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    words = {"pass": "passed", "warn": "warnings", "fail": "failed", "skip": "skipped"}
    summary = ", ".join(f"{n} {words[k]}" for k, n in counts.items() if n)
    failed = [
        f"{c.id}{' on ' + c.node if c.node else ''}: {c.detail}"
        for c in report.checks
        if c.status == "fail"
    ]
    return summary + (" — " + "; ".join(failed) if failed else "")
