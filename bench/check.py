"""Compare the figures the benches wrote (bench/out/*.json) with bench/baseline.json.

    python bench/check.py              # exit 1 naming every figure past its margin
    python bench/check.py --targets    # also exit 1 for every target not met
    python bench/check.py --update     # take the current figures as the new baselines

Each entry of bench/baseline.json names a figure by file and dotted path
("small_file.tools.spark-tui.seconds" in triage.json), says which way is better
("lower" or "higher"; "true" for a check that must hold, "empty" for a list of
problems that must stay empty), and holds:
- baseline: the figure when it was last accepted (bench/README.md has that run);
- margin:   how far it may move the wrong way before it counts as a regression, as a
            fraction of the baseline (0.25: 25 % worse). These machines are shared
            2-core VMs; the margins are set from the spread of three runs;
- target:   optional, the goal the issue or the README states (reported; with
            --targets, a miss fails too).

A figure whose file is missing (that bench was not run) is reported as not measured
and fails, unless --present-only. Exit codes: 0 all within margin, 1 a regression (or
a missing figure, or with --targets a missed target), 2 bad usage or an unreadable file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baseline.json"
OUT = HERE / "out"


def lookup(data: object, dotted: str) -> object:
    """data["a"]["b"]… for "a.b…" (keys may hold dots only at the top level: none do)."""
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            raise KeyError(dotted)
        data = data[part]
    return data


def judge(entry: dict, value: object) -> tuple[bool, str, bool | None]:
    """(within margin, how it compares, target met or None when there is no target)."""
    better = entry["better"]
    if better == "true":
        ok = value is True
        return ok, "holds" if ok else "does NOT hold", None
    if better == "empty":  # a list of problems (missed lines, wrong counts): none
        ok = value in ([], 0)
        return (
            ok,
            "none" if ok else f"{len(value) if isinstance(value, list) else value}: {value!r:.200}",
            None,
        )
    if not isinstance(value, (int, float)):
        return False, f"not a number: {value!r}", None
    base = float(entry["baseline"])
    margin = float(entry["margin"])
    if better == "lower":
        limit = base * (1 + margin)
        ok = value <= limit
        target = entry.get("target")
        met = None if target is None else value <= target
    else:
        limit = base * (1 - margin)
        ok = value >= limit
        target = entry.get("target")
        met = None if target is None else value >= target
    sign = "<=" if better == "lower" else ">="
    how = f"{value:.4g} (baseline {base:.4g}, must be {sign} {limit:.4g})"
    return ok, how, met


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    ap.add_argument("--out", type=Path, default=OUT, help="where the benches wrote their JSON")
    ap.add_argument("--targets", action="store_true", help="a missed target fails too")
    ap.add_argument("--present-only", action="store_true", help="skip figures not measured")
    ap.add_argument("--update", action="store_true", help="current figures become baselines")
    args = ap.parse_args(argv)
    try:
        spec = json.loads(args.baseline.read_text())
    except (OSError, ValueError) as exc:
        print(f"{args.baseline}: {exc}", file=sys.stderr)
        return 2
    files: dict[str, object] = {}
    failed: list[str] = []
    missed_targets: list[str] = []
    for entry in spec["figures"]:
        name = f"{entry['file']}:{entry['path']}"
        if entry["file"] not in files:
            path = args.out / entry["file"]
            try:
                files[entry["file"]] = json.loads(path.read_text()) if path.exists() else None
            except ValueError as exc:
                print(f"{path}: not JSON ({exc})", file=sys.stderr)
                return 2
        data = files[entry["file"]]
        try:
            value = lookup(data, entry["path"]) if data is not None else None
        except KeyError:
            value = None
        if value is None:
            if not args.present_only:
                failed.append(f"{name}: not measured (run the bench that writes {entry['file']})")
            print(f"?    {name}: not measured")
            continue
        if args.update and entry["better"] in ("lower", "higher"):
            entry["baseline"] = round(float(value), 4)  # type: ignore[arg-type]
        ok, how, met = judge(entry, value)
        mark = "ok  " if ok else "FAIL"
        tgt = ""
        if met is not None:
            tgt = f"; target {entry['target']}: {'met' if met else 'NOT met'}"
            if not met:
                missed_targets.append(f"{name}: {value:.4g}, target {entry['target']}")
        print(f"{mark} {name} ({entry['what']}): {how}{tgt}")
        if not ok:
            failed.append(f"{name}: {how}")
    if args.update:
        args.baseline.write_text(json.dumps(spec, indent=1, ensure_ascii=False) + "\n")
        print(f"baselines written to {args.baseline}")
        return 0
    for f in failed:
        print(f"regressed: {f}", file=sys.stderr)
    if args.targets:
        for m in missed_targets:
            print(f"target not met: {m}", file=sys.stderr)
    return 1 if failed or (args.targets and missed_targets) else 0


if __name__ == "__main__":
    raise SystemExit(main())
