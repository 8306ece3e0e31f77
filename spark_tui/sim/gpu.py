"""`nvidia-smi` as it prints on a GB10 (memory [N/A]: Syllo/nvtop#426; the layout of real H200 captures kept with the tests):
name `NVIDIA GB10`, memory columns `[N/A]` / `Not Supported`, dmon memory % at 0 whatever
the load, per-process memory that does work."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.sim.node import SimNode
    from spark_tui.sim.shell import Out
    from spark_tui.sim.world import SimWorld

DRIVER = "580.95.05"
CUDA = "13.0"
BUS_ID = "0000000F:01:00.0"

QUERY_HEADERS = {
    "index": "index",
    "name": "name",
    "uuid": "uuid",
    "utilization.gpu": "utilization.gpu [%]",
    "utilization.memory": "utilization.memory [%]",
    "memory.used": "memory.used [MiB]",
    "memory.total": "memory.total [MiB]",
    "memory.free": "memory.free [MiB]",
    "temperature.gpu": "temperature.gpu",
    "power.draw": "power.draw [W]",
    "clocks.sm": "clocks.current.sm [MHz]",
    "clocks.current.sm": "clocks.current.sm [MHz]",
    "pci.bus_id": "pci.bus_id",
    "driver_version": "driver_version",
}
APP_HEADERS = {
    "gpu_uuid": "gpu_uuid",
    "pid": "pid",
    "process_name": "process_name",
    "used_memory": "used_gpu_memory [MiB]",
    "used_gpu_memory": "used_gpu_memory [MiB]",
}


def uuid_of(node: SimNode) -> str:
    h = hashlib.sha256(f"gb10:{node.name}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def reading(world: SimWorld, node: SimNode, now: float) -> dict[str, float]:
    sm = 0.0
    power = 11.2
    for e in world.engines:
        if node.name in e.members:
            sm = max(sm, e.sm_pct(node.name, now))
            power = max(power, e.power_w(node.name, now))
    temp = 38.0 + sm * 0.22
    clock = 2405.0 if sm > 5 else 1185.0
    return {"sm": round(sm), "power": power, "temp": round(temp), "clock": clock}


def processes(world: SimWorld, node: SimNode, now: float) -> list[tuple[int, str, float]]:
    out = []
    for e in world.engines:
        m = e.members.get(node.name)
        if m is None or not e.alive(now) or now < e.start:
            continue
        gib = e.usage_on(node.name, now)[0]
        out.append((e.pid if m.rank == 0 else e.pid + 50 + m.rank, "python3", gib * 1024.0))
    return out


def _query(
    fields: list[str],
    values: dict[str, str],
    noheader: bool,
    nounits: bool,
    headers: dict[str, str],
) -> tuple[str, str]:
    head = ", ".join(headers.get(f, f) for f in fields)
    if nounits:
        head = ", ".join(headers.get(f, f).split(" [")[0] for f in fields)
    row = []
    for f in fields:
        v = values.get(f, "[N/A]")
        if nounits:
            v = v.replace(" MiB", "").replace(" %", "").replace(" W", "").replace(" MHz", "")
        row.append(v)
    return head, ", ".join(row)


def nvidia_smi(argv: list[str], world: SimWorld, node: SimNode) -> Out:
    from spark_tui.sim.shell import Out

    now = world.clock.now()
    args = argv[1:]
    query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    apps = next((a.split("=", 1)[1] for a in args if a.startswith("--query-compute-apps=")), None)
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "")
    noheader = "noheader" in fmt
    nounits = "nounits" in fmt
    r = reading(world, node, now)
    if query is not None:
        if "csv" not in fmt:
            return Out(2, "", "Option --format must be used with --query-gpu\n")
        fields = [f.strip() for f in query.split(",") if f.strip()]
        values = {
            "index": "0",
            "name": "NVIDIA GB10",
            "uuid": uuid_of(node),
            "utilization.gpu": f"{int(r['sm'])} %",
            "utilization.memory": "0 %",
            "memory.used": "[N/A]",
            "memory.total": "[N/A]",
            "memory.free": "[N/A]",
            "temperature.gpu": str(int(r["temp"])),
            "power.draw": f"{r['power']:.2f} W",
            "clocks.sm": f"{int(r['clock'])} MHz",
            "clocks.current.sm": f"{int(r['clock'])} MHz",
            "pci.bus_id": BUS_ID,
            "driver_version": DRIVER,
        }
        bad = [f for f in fields if f not in values]
        if bad:
            return Out(2, "", f'Field "{bad[0]}" is not a valid field to query.\n\n')
        head, row = _query(fields, values, noheader, nounits, QUERY_HEADERS)
        return Out(0, ("" if noheader else head + "\n") + row + "\n")
    if apps is not None:
        fields = [f.strip() for f in apps.split(",") if f.strip()]
        head = ", ".join(
            APP_HEADERS.get(f, f).split(" [")[0] if nounits else APP_HEADERS.get(f, f)
            for f in fields
        )
        lines = [] if noheader else [head]
        for pid, pname, mib in processes(world, node, now):
            vals = {
                "gpu_uuid": uuid_of(node),
                "pid": str(pid),
                "process_name": pname,
                "used_memory": f"{int(mib)} MiB",
                "used_gpu_memory": f"{int(mib)} MiB",
            }
            lines.append(
                ", ".join(
                    vals.get(f, "[N/A]").replace(" MiB", "") if nounits else vals.get(f, "[N/A]")
                    for f in fields
                )
            )
        return Out(0, "".join(line + "\n" for line in lines))
    if args and args[0] == "dmon":
        count = 1
        if "-c" in args:
            try:
                count = int(args[args.index("-c") + 1])
            except (ValueError, IndexError):
                count = 1
        lines = dmon_header(args)
        for i in range(count):
            lines.append(dmon_line(world, node, now + i, args))
        return Out(0, "".join(line + "\n" for line in lines))
    if args and args[0] in ("-L", "--list-gpus"):
        return Out(0, f"GPU 0: NVIDIA GB10 (UUID: {uuid_of(node)})\n")
    if args and args[0] == "-q":
        return Out(
            0,
            f"\n==============NVSMI LOG==============\n\nDriver Version                                         : {DRIVER}\n"
            f"CUDA Version                                           : {CUDA}\n\nAttached GPUs                                          : 1\n"
            f"GPU {BUS_ID}\n    Product Name                                       : NVIDIA GB10\n"
            "    FB Memory Usage\n        Total                                          : [N/A]\n"
            "        Used                                           : [N/A]\n        Free                                           : [N/A]\n",
        )
    return Out(0, table(world, node, now, r))


def dmon_header(args: list[str]) -> list[str]:
    return [
        "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa ",
        "# Idx      W      C      C      %      %      %      %      %      % ",
    ]


def dmon_line(world: SimWorld, node: SimNode, t: float, args: list[str]) -> str:
    r = reading(world, node, t)
    return f"    0 {int(r['power']):>6} {int(r['temp']):>6}      - {int(r['sm']):>6} {0:>6} {0:>6} {0:>6} {0:>6} {0:>6} "


def table(world: SimWorld, node: SimNode, now: float, r: dict[str, float]) -> str:
    stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
    procs = processes(world, node, now)
    rows = [
        f"{stamp}       ",
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {DRIVER}              Driver Version: {DRIVER}      CUDA Version: {CUDA}     |",
        "+-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        f"|   0  NVIDIA GB10                    On  |   {BUS_ID} Off |                  N/A |",
        f"| N/A   {int(r['temp'])}C    P0             {int(r['power']):>2}W /  N/A  |          Not Supported |    {int(r['sm']):>3}%      Default |",
        "|                                         |                        |                  N/A |",
        "+-----------------------------------------+------------------------+----------------------+",
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
    ]
    if not procs:
        rows.append(
            "|  No running processes found                                                             |"
        )
    for pid, name, mib in procs:
        rows.append(f"|    0   N/A  N/A          {pid:>7}      C   {name:<34}{int(mib):>7}MiB |")
    rows.append(
        "+-----------------------------------------------------------------------------------------+"
    )
    return "\n".join(rows) + "\n"
