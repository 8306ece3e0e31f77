#!/usr/bin/env python3
"""spark-tui triage against model-serving-minefield's log scanner (bench/peers.md).

    python -m venv /tmp/minefield-venv && /tmp/minefield-venv/bin/pip install model-serving-minefield
    python bench/peers.py [--minefield /tmp/minefield-venv/bin/minefield] [--out bench/out]

On the same inputs, both tools, one process each per input set:
  * every real wall example in tests/sample-logs/walls/<wall-id>/*.log: which
    examples each tool recognises as that wall (minefield names its own trap
    ids; TRAPS_FOR below says which of them are about the same problem);
  * the healthy hard negatives in tests/sample-logs/healthy/*.log: false alarms;
  * benchmark logs built like bench/triage.py's (real healthy lines, real wall
    examples planted): the largest minefield accepts (2 MiB) and 1 GiB.
`minefield guide` (symptom matching over its 166-trap registry, one process per
example, the example's text as the symptom) is scored on its top match.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import triage as tb  # noqa: E402  (bench/triage.py: the log builder)

from spark_tui.kb.loader import load_knowledge  # noqa: E402

# minefield trap ids about the same problem as a spark-tui wall (read from its
# registry titles and log rules; an empty set: minefield has no such trap)
TRAPS_FOR: dict[str, set[str]] = {
    "vllm-free-memory-low": {"119", "13", "81", "123"},
    "sglang-memory-unbalanced": {"119", "13", "81", "123"},
    "cuda-oom": {"98", "13"},
    "nvrm-oom": {"152"},
    "nccl-timeout": {"160"},
    "nccl-interface": {"139", "114"},
    "no-kernel-image": {"90", "46", "08"},
    "deepgemm-unsupported-arch": {"90", "46"},
    "flashmla-unsupported-arch": {"90", "46"},
    "jit-kernel-unsupported-arch": {"90", "46"},
    "fp4-marlin-fallback-notice": {"10"},
}


def run(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - t0, p


def spark_tui(files: list[Path]) -> tuple[float, dict[str, dict[str, int]]]:
    """Seconds, and per file {wall: first line}."""
    secs, p = run(["spark-tui", "triage", "--json", *map(str, files)])
    found: dict[str, dict[str, int]] = {str(f): {} for f in files}
    for d in json.loads(p.stdout)["diagnoses"]:
        found[d["file"]][d["wall"]] = d["line"]
    return secs, found


def minefield_scan(bin_: str, files: list[Path]) -> tuple[float, dict[str, set[str]], str]:
    """Seconds, per file the trap ids its log scanner reported, and any error."""
    secs, p = run([bin_, "scan", "--json", *map(str, files)])
    found: dict[str, set[str]] = {str(f.resolve()): set() for f in files}
    if p.returncode != 0 and not p.stdout.strip().startswith("{"):
        return secs, found, (p.stderr.strip().splitlines() or ["?"])[-1]
    report = json.loads(p.stdout)
    for f in report.get("findings", []):
        found.setdefault(f["file"], set()).add(f["trap_id"])
    skipped = [n for n in report.get("notes", []) if "skip" in str(n).lower()]
    return secs, found, "; ".join(map(str, skipped))


def minefield_guide(bin_: str, text: str) -> list[str]:
    p = subprocess.run(
        [bin_, "guide", "--json", "--limit", "3", text[:8000]], capture_output=True, text=True
    )
    try:
        return [m.get("trap_id") or m.get("id") for m in json.loads(p.stdout)["matches"]]
    except (ValueError, KeyError):
        return []


SPARKRUN_PROBE = """
import json, sys
from sparkrun.orchestration.launch_diagnostics import diagnose_launch_failure
files = sys.argv[1:]
print(json.dumps([f for f in files if diagnose_launch_failure(open(f, errors="replace").read())]))
"""


def sparkrun_launch_diagnostics(python: str, files: list[Path]) -> tuple[float, list[str] | str]:
    """sparkrun's only failure-text recogniser (docker launch errors) over the same files."""
    secs, p = run([python, "-c", SPARKRUN_PROBE, *map(str, files)])
    if p.returncode != 0:
        return secs, (p.stderr.strip().splitlines() or ["?"])[-1]
    return secs, json.loads(p.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minefield", default="/tmp/minefield-venv/bin/minefield")
    ap.add_argument("--sparkrun-python", default="/tmp/sparkrun-venv/bin/python")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--no-guide", action="store_true", help="skip minefield guide (slow)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    mf = args.minefield
    kb = load_knowledge(use_user=False)
    walls_dir = tb.SAMPLES / "walls"
    examples = sorted(p for p in walls_dir.glob("*/*.log"))
    healthy = sorted((tb.SAMPLES / "healthy").glob("*.log"))
    res: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}

    # 1. wall examples
    st_s, st_found = spark_tui(examples)
    mf_s, mf_found, mf_err = minefield_scan(mf, examples)
    rows = []
    for p in examples:
        wall = p.parent.name
        traps = mf_found.get(str(p.resolve()), set())
        guide = [] if args.no_guide else minefield_guide(mf, p.read_text(errors="replace"))
        rows.append(
            {
                "wall": wall,
                "example": p.name,
                "spark_tui": wall in st_found[str(p)],
                "spark_tui_walls": sorted(st_found[str(p)]),
                "minefield_scan": sorted(traps),
                "minefield_scan_related": bool(traps & TRAPS_FOR.get(wall, set())),
                "minefield_guide_top3": guide,
                "minefield_guide_top1_related": bool(guide[:1])
                and guide[0] in TRAPS_FOR.get(wall, set()),
            }
        )
    sr_s, sr_found = sparkrun_launch_diagnostics(args.sparkrun_python, examples)
    res["examples"] = {
        "sparkrun_launch_diagnostics": sr_found,
        "sparkrun_seconds": sr_s,
        "files": len(examples),
        "walls": len({r["wall"] for r in rows}),
        "spark_tui_seconds": st_s,
        "minefield_scan_seconds": mf_s,
        "minefield_scan_error": mf_err,
        "rows": rows,
    }

    # 2. healthy hard negatives: false alarms
    hs_s, hs_found = spark_tui(healthy)
    hm_s, hm_found, _ = minefield_scan(mf, healthy)
    res["healthy"] = {
        "files": len(healthy),
        "spark_tui_error_diagnoses": sum(
            1 for f in hs_found.values() for w in f if kb.walls[w].severity == "error"
        ),
        "spark_tui_any_diagnoses": sum(len(f) for f in hs_found.values()),
        "minefield_findings": sum(len(v) for v in hm_found.values()),
        "minefield_traps": sorted({t for v in hm_found.values() for t in v}),
        "spark_tui_seconds": hs_s,
        "minefield_seconds": hm_s,
    }

    # 3. benchmark logs: the largest minefield reads, and 1 GiB
    ref = tb.Reference(list(kb))
    logs = []
    for size, name in ((2 << 20, "peers-2m.log"), (1 << 30, "peers-1g.log")):
        path = args.out / name
        if not path.exists() or path.stat().st_size != size:
            tb.build(path, size, 1, kb, ref, tb.SAMPLES)
        tb.warm(path)  # both tools read it from the page cache
        s_s, s_found = spark_tui([path])
        m_s, m_found, m_err = minefield_scan(mf, [path])
        traps = m_found.get(str(path.resolve()), set())
        _s, p = run([mf, "inspect-logs", "--allowed-root", str(args.out), str(path)])
        inspect_err = "" if p.returncode == 0 else (p.stderr.strip().splitlines() or ["?"])[-1]
        planted = {r.parent.name for r in examples}
        logs.append(
            {
                "file": name,
                "bytes": path.stat().st_size,
                "spark_tui_seconds": s_s,
                "spark_tui_walls_found": len(set(s_found[str(path)]) & planted),
                "walls_planted": len(planted),
                "minefield_seconds": m_s,
                "minefield_traps": sorted(traps),
                "minefield_related_walls": sorted(
                    w for w in planted if traps & TRAPS_FOR.get(w, set())
                ),
                "minefield_error": m_err,
                "minefield_inspect_logs_error": inspect_err,
            }
        )
    res["logs"] = logs
    (args.out / "peers.json").write_text(json.dumps(res, indent=1))
    print(summary(res))
    return 0


def summary(res: dict) -> str:
    ex = res["examples"]
    rows = ex["rows"]
    walls = sorted({r["wall"] for r in rows})
    out = [
        f"wall examples: {ex['files']} files, {ex['walls']} walls",
        f"  spark-tui triage: {sum(r['spark_tui'] for r in rows)}/{len(rows)} examples,"
        f" {sum(any(r['spark_tui'] for r in rows if r['wall'] == w) for w in walls)}/{len(walls)} walls"
        f" in {ex['spark_tui_seconds']:.2f} s",
        f"  minefield scan (related trap): {sum(r['minefield_scan_related'] for r in rows)}/{len(rows)}"
        f" examples, {sum(any(r['minefield_scan_related'] for r in rows if r['wall'] == w) for w in walls)}"
        f"/{len(walls)} walls in {ex['minefield_scan_seconds']:.2f} s;"
        f" any finding at all: {sum(bool(r['minefield_scan']) for r in rows)}/{len(rows)}",
        f"  minefield guide top-1 related: {sum(r['minefield_guide_top1_related'] for r in rows)}/{len(rows)}",
        f"  sparkrun launch diagnostics: {ex['sparkrun_launch_diagnostics']!s:.200}",
        "",
        "| wall | examples | spark-tui | minefield scan (traps) | minefield guide top-1 |",
        "|---|---:|---:|---|---|",
    ]
    for w in walls:
        rs = [r for r in rows if r["wall"] == w]
        traps = sorted({t for r in rs for t in r["minefield_scan"]})
        g1 = sorted({r["minefield_guide_top3"][0] for r in rs if r["minefield_guide_top3"]})
        out.append(
            f"| {w} | {len(rs)} | {sum(r['spark_tui'] for r in rs)} |"
            f" {sum(r['minefield_scan_related'] for r in rs)} ({', '.join(traps) or '—'}) |"
            f" {sum(r['minefield_guide_top1_related'] for r in rs)} ({', '.join(g1) or '—'}) |"
        )
    h = res["healthy"]
    out += [
        "",
        f"healthy ({h['files']} files): spark-tui {h['spark_tui_error_diagnoses']} error diagnoses"
        f" ({h['spark_tui_any_diagnoses']} any); minefield {h['minefield_findings']} findings {h['minefield_traps']}",
    ]
    for lg in res["logs"]:
        out.append(
            f"{lg['file']} ({lg['bytes'] / 2**20:.0f} MiB): spark-tui {lg['spark_tui_seconds']:.2f} s,"
            f" {lg['spark_tui_walls_found']}/{lg['walls_planted']} walls; minefield"
            f" {lg['minefield_seconds']:.2f} s, traps {lg['minefield_traps']},"
            f" related walls {lg['minefield_related_walls']} {lg['minefield_error']}"
            f" {lg['minefield_inspect_logs_error']}"
        )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
