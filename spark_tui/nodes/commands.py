"""The exact command lines spark-tui sends to a node to read it.

A contract between the probes (spark_tui.nodes, which parse the output) and
the simulator (spark_tui.sim, which must answer every one of them the way a
DGX Spark does). Add commands here, never inline in a probe.

Everything here is read-only. The sampling round joins the SAMPLE sections
into ONE small `sh` script (one remote process per round): each section is
printed after a marker line `@@spark-tui <section>` and ends with
`@@spark-tui-rc <exit code>`; a missing tool shows as exit code 127.
"""

from __future__ import annotations

from spark_tui import shell

MARKER = "@@spark-tui"
MARKER_RC = "@@spark-tui-rc"

GPU_QUERY_FIELDS = (
    "index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,"
    "temperature.gpu,power.draw,clocks.sm"
)

# section name -> command; all of them run in every sampling round (cheap reads only)
SAMPLE: dict[str, str] = {
    "meminfo": "cat /proc/meminfo",
    "gpu": f"nvidia-smi --query-gpu={GPU_QUERY_FIELDS} --format=csv",
    "gpu-apps": "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
    "containers": "docker ps -a --format '{{json .}}'",
    "drm-override": "ls /etc/modprobe.d/zz-nvidia-drm-override.conf",
    "boot": "cat /proc/sys/kernel/random/boot_id /proc/uptime",
    "links": "ip -o link",
    "addrs": "ip -br addr",
    # RestartCount and restart policy of every container (restart-loop); no container, no call
    "restarts": (
        'ids=$(docker ps -aq); [ -z "$ids" ] || docker inspect --format '
        "'{{.Name}} {{.RestartCount}} {{.HostConfig.RestartPolicy.Name}}' $ids"
    ),
    "route": "ip route show default",  # the default route's interface (Wi-Fi / management NIC)
    # who runs the serving stack, whoever started it: Ray's daemons and the engine's command line
    # with its owner (after our own uid: an engine is attached only when root's or ours)
    "procs": "id -u; ps -ww -eo pid=,uid=,args= | grep -E '[r]aylet|[g]cs_server|[v]llm|[s]glang'",
}

# The serving engine's Prometheus counters, read on the head over its own loopback in the same
# round (a section added to the head's script; {port}: the recipe's serve port). Only the lines
# the stall detector needs: vLLM's and SGLang's running requests, waiting requests, tokens.
METRICS = (
    "curl -s -m 2 http://127.0.0.1:{port}/metrics | grep -E "
    "'^(vllm|sglang):(num_requests_running|num_requests_waiting|generation_tokens_total"
    "|num_running_reqs|num_queue_reqs)[{ ]'"
)
METRICS_SECTION = "metrics"

# Read once per launch (a new serving container), not per round: every libnccl.so.2 file in
# the serving container, "SIZE PATH" per file, then "SHA256  PATH" per file (nccl-dual-build).
# One find, no shell loop inside the container. {container}: quoted by fill.
NCCL_LIBRARIES = (
    "docker exec {container} find / -xdev -type f -name 'libnccl.so.2*' "
    "-printf '%s %p\\n' -exec sha256sum {} +"
)

# read less often (every few rounds, or on demand)
SLOW: dict[str, str] = {
    # {container}: the container Ray's head runs in (chosen from the last round, quoted)
    "ray": "docker exec {container} ray status",
    "roce": "ibdev2netdev",
    "nvrm": "dmesg --ctime 2>/dev/null | grep NVRM | tail -n 50",
    "ports": "ss -ltnH",
    "speeds": "grep -H . /sys/class/net/*/speed 2>/dev/null",  # link speed, Mb/s
}

# read once for the incident report (`spark-tui report`): software versions
VERSIONS: dict[str, str] = {
    "os": '. /etc/os-release && echo "$PRETTY_NAME"',
    "kernel": "uname -r",
    "driver": "nvidia-smi --query-gpu=driver_version --format=csv,noheader",
    # the node's Docker Engine (its daemon), not the client binary `docker --version` names
    "docker": "docker version --format '{{.Server.Version}}'",
}

# Once per engine process found running (ps): its executable, which container or systemd
# unit it belongs to, and where its output goes (a file, a pipe to docker's log or journald).
# The kernel's cgroup lines come first; the names (the executable's, the fd's target) after
# markers: a file name (a newline in it included) can never pass for a cgroup line.
ENGINE_OUTPUT = (
    "cat /proc/{pid}/cgroup 2>/dev/null; echo @@spark-tui exe; readlink /proc/{pid}/exe; "
    "echo @@spark-tui fd1; readlink /proc/{pid}/fd/1"
)
# Before an engine is adopted: our user, the process's owner, and its argument vector as the
# kernel keeps it (NUL-separated: a word holding a space stays one word, where ps joins the
# words with spaces).
ENGINE_ARGV = "id -u; stat -c %u /proc/{pid}; base64 -w0 /proc/{pid}/cmdline"
# An engine's output file outside a container is read through its open descriptor, never by
# a name someone could replace (a symlink planted at `… (deleted)`, a renamed file).
ENGINE_FD_TAIL = "tail -n 200 -F /proc/{pid}/fd/1"

# continuous streams, each a long-lived channel
DMON = "nvidia-smi dmon -s pu"  # power + SM %, memory-bandwidth %, once a second
SERVE_LOG_TAIL = "docker logs -f --tail 200 {container}"  # {container}: quoted by the caller
# the other kinds of log a node may have (cluster.yaml `logs:`, an engine found running)
FILE_TAIL = "tail -n 200 -F {path}"
CONTAINER_FILE_TAIL = "docker exec {container} tail -n 200 -F {path}"
UNIT_TAIL = "journalctl -u {unit} -f -n 200 -o cat"


# `spark-tui doctor` (read-only; templates filled by spark_tui.shell.fill, values quoted)
SSH_CHECK = "ssh -o BatchMode=yes -o ConnectTimeout=5 {target} true"  # run on the head
SSH_CHECK_PORT = "ssh -o BatchMode=yes -o ConnectTimeout=5 -p {port} {target} true"
PING = "ping -c1 -W1 {ip}"  # run on the head
IMAGE_ID = "docker image inspect --format '{{.Id}}' {image}"
MODEL_SIZE = "du -sbL -- {path}"  # bytes under a model directory (HF caches are symlinks)


def sudo_check(root_commands: list[list[str]]) -> str:
    """Ask sudo, without running anything, whether each command may run as root without a
    password (`sudo -n -l CMD`); prints `missing: CMD` for each it refuses, exits 127
    without sudo. (`sudo -n true` would fail under a rule that allows exactly these.)"""
    checks = [
        f"{shell.join(['sudo', '-n', '-l', *argv])} >/dev/null 2>&1 || "
        f"echo {shell.quote('missing: ' + shell.join(argv))}"
        for argv in root_commands
    ]
    return "; ".join(["command -v sudo >/dev/null || exit 127", *checks])


# `spark-tui discover`: what a candidate node is (one round, read-only)
DISCOVER: dict[str, str] = {
    "gpu": SAMPLE["gpu"],
    "addrs": SAMPLE["addrs"],
    "links": SAMPLE["links"],
    "roce": SLOW["roce"],
    "hostname": "uname -n",
}
NEIGHBOURS = "ip neigh show"  # run on this machine: the ARP/neighbour table


def sample_script(sections: dict[str, str]) -> str:
    """One sh script that prints every section behind its marker, whatever fails."""
    parts = []
    for name, command in sections.items():
        parts.append(f"echo '{MARKER} {name}'; {command} 2>&1; echo \"{MARKER_RC} $?\"")
    return "; ".join(parts)


def split_sections(output: str) -> dict[str, tuple[int, str]]:
    """Split a sampling round's output into section -> (exit code, text)."""
    out: dict[str, tuple[int, str]] = {}
    name: str | None = None
    lines: list[str] = []
    for line in output.splitlines():
        if line.startswith(MARKER_RC + " ") and name is not None:
            try:
                rc = int(line[len(MARKER_RC) + 1 :].strip())
            except ValueError:
                rc = -1
            out[name] = (rc, "\n".join(lines))
            name, lines = None, []
        elif line.startswith(MARKER + " "):
            name, lines = line[len(MARKER) + 1 :].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:  # cut off mid-section
        out[name] = (-1, "\n".join(lines))
    return out
