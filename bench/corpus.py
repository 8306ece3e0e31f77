#!/usr/bin/env python3
"""Precision and recall of the knowledge base per wall, on real log text.

    python bench/corpus.py [--engine E] [--variants all|posted] [--json FILE] [--wall ID]
                           [--heldout] [--write-split]

The corpus is tests/sample-logs/: walls/<wall-id>/*.log are real excerpts of that
wall (where each came from is in the folder's SOURCES.md), healthy/*.log are hard
negatives (healthy startups and serving, and other errors that look alike).
tests/sample-logs/labels.yaml says which other walls a file shows (`also`), which
it may show without counting either way (`allow`), how sure a diagnosis of
its own wall must be (`confidence`), and what is known of the launch that printed it
(`facts`, e.g. `recipe.nodes: 1`: a signature's `only_when` is judged on them, as the
monitor judges it on the recipe's; a file without them is judged as `triage` does).

Every file is scored as posted and as users re-paste it (`VARIANTS`): hard-wrapped
by a terminal at 80 columns, copied from a 120-column screen (padded), reflowed
by an editor at 100 columns (breaks at spaces), with colour codes whose ESC was
lost, with caret-notation escapes, behind a `docker compose logs` prefix,
wrapped after colouring, behind `kubectl logs --prefix`, quoted in markdown
(`> `), and inside a non-English report (a label on its first line). A wall counts as found in a file when triage names it
there (any confidence); per wall:
  TP  files of the wall (or listing it in `also`) where it is found,
  FN  such files where it is not,
  FP  other files where it is found (not listed in `allow`).
Negatives must also raise no error-severity diagnosis at all.

A second, independent check: tests/sample-logs/heldout.yaml records a third of each wall's
files (the held-out split, chosen by `choose_heldout`: per wall, the files whose name hashes
lowest) that signatures are not written from; `--heldout` scores only those files and prints
their recall per wall beside the full corpus's. `--write-split` records the split again (after
files were added).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spark_tui.kb.diagnosis import DiagnosisBook  # noqa: E402
from spark_tui.kb.loader import load_knowledge  # noqa: E402
from spark_tui.kb.matcher import Matcher  # noqa: E402

CORPUS = REPO / "tests" / "sample-logs"
HELDOUT = CORPUS / "heldout.yaml"


# ------------------------------------------------------------ how users re-paste


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _hard_wrap(text: str, width: int, pad: bool = False) -> str:
    out = []
    for line in _lines(text):
        pieces = [line[i : i + width] for i in range(0, len(line), width)] or [""]
        if pad:
            pieces = [p.ljust(width) for p in pieces]
        out.extend(pieces)
    return "\n".join(out)


def _reflow(text: str, width: int) -> str:
    out = []
    for line in _lines(text):
        if len(line) <= width:
            out.append(line)
            continue
        out.extend(
            textwrap.wrap(
                line,
                width,
                expand_tabs=False,
                replace_whitespace=False,
                drop_whitespace=True,
                break_on_hyphens=False,
            )
            or [""]
        )
    return "\n".join(out)


_LEVELS = ("ERROR", "WARNING", "INFO", "DEBUG", "CRITICAL")


def _colour(text: str, esc: str = "") -> str:
    """Colour codes as vLLM and Ray print them, with the ESC byte lost (or shown as ^[)."""

    def c(code: str) -> str:
        return f"{esc}[{code}m"

    out = []
    for line in _lines(text):
        if not line:
            out.append(line)
            continue
        for lvl in _LEVELS:
            if f" {lvl} " in line:
                line = line.replace(f" {lvl} ", f" {c('31')}{lvl}{c('0')} ", 1)
                break
        out.append(f"{c('0;36')}{line}{c('0')}" if line[:1] in "([" else f"{c('2')}{line}")
    return "\n".join(out)


def _around(text: str) -> str:
    """The text inside a non-English report: a sentence before and after, a label on
    the first line of it (as a Chinese or Japanese bug report quotes a log)."""
    body = _lines(text)
    first = next((i for i, ln in enumerate(body) if ln.strip()), 0)
    if body:
        body[first] = "报错信息：" + body[first]
    return "\n".join(
        ["启动服务时出现以下错误，请帮忙看一下：", *body, "以上です。よろしくお願いします。"]
    )


VARIANTS: dict[str, Callable[[str], str]] = {
    "as posted": lambda t: t,
    "wrapped at 80": lambda t: _hard_wrap(t, 80),
    "screen copy at 120": lambda t: _hard_wrap(t, 120, pad=True),
    "reflowed at 100": lambda t: _reflow(t, 100),
    "colour, ESC lost": _colour,
    "colour as ^[": lambda t: _colour(t, "^["),
    "compose prefix": lambda t: "\n".join(f"vllm-head-1  | {ln}" if ln else ln for ln in _lines(t)),
    "colour, wrapped at 80": lambda t: _hard_wrap(_colour(t), 80),
    "kubectl --prefix": lambda t: "\n".join(
        f"[pod/vllm-head-0/vllm] {ln}" if ln else ln for ln in _lines(t)
    ),
    "markdown quote": lambda t: "\n".join(f"> {ln}" for ln in _lines(t)),
    "non-English report": _around,
}


# ------------------------------------------------------------ scoring


@dataclass
class Example:
    path: Path
    expect: set[str]  # walls it shows
    allow: set[str]  # walls it may show without counting
    negative: bool
    confidence: str | None = None  # how sure its own wall's diagnosis must be
    own: str | None = None  # the folder's wall
    facts: dict[str, object] | None = None  # what is known of the launch (recipe.nodes, …)


@dataclass
class Score:
    tp: int = 0
    fn: int = 0
    fp: int = 0
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


# The log walls of the first bring-up stories ("seed" in the table); the others (serving
# stalls, restart loops, dual NCCL builds, corrupt shards, …) were added after them.
FIRST_LOG_WALLS = frozenset(
    {
        "vllm-free-memory-low",
        "sglang-memory-unbalanced",
        "nvrm-oom",
        "cuda-oom",
        "ray-memory-monitor-kill",
        "flashmla-unsupported-arch",
        "deepgemm-unsupported-arch",
        "no-kernel-image",
        "jit-kernel-unsupported-arch",
        "fp4-marlin-fallback-notice",
        "instanttensor-gds",
        "ray-channel-timeout",
        "nccl-timeout",
        "gloo-interface",
        "nccl-interface",
        "dist-init-timeout",
        "vllm-host-ip-mismatch",
        "ray-client-mode-single-gpu",
        "tp-not-divisible",
        "sglang-renamed-flags",
    }
)


def load_examples(corpus: Path = CORPUS) -> list[Example]:
    labels_file = corpus / "labels.yaml"
    labels = yaml.safe_load(labels_file.read_text()) if labels_file.is_file() else {}
    labels = labels or {}
    out: list[Example] = []
    for d in sorted((corpus / "walls").iterdir()):
        for p in sorted(d.glob("*.log")):
            lab = labels.get(f"walls/{d.name}/{p.name}") or {}
            out.append(
                Example(
                    p,
                    {d.name, *lab.get("also", [])},
                    set(lab.get("allow", [])),
                    False,
                    lab.get("confidence"),
                    d.name,
                    lab.get("facts"),
                )
            )
    for p in sorted((corpus / "healthy").glob("*.log")):
        lab = labels.get(f"healthy/{p.name}") or {}
        out.append(
            Example(
                p,
                set(lab.get("also", [])),
                set(lab.get("allow", [])),
                True,
                facts=lab.get("facts"),
            )
        )
    unknown = set(labels) - {
        str(e.path.relative_to(corpus)) for e in out
    }  # a label for a file that is not there is a typo
    if unknown:
        raise SystemExit(f"labels.yaml names files that do not exist: {sorted(unknown)}")
    return out


def choose_heldout(corpus: Path = CORPUS) -> dict[str, list[str]]:
    """The held-out split: per wall, a third of its files (at least one where it has two or
    more), those whose file name hashes lowest (sha256) — fixed by the names alone."""
    out: dict[str, list[str]] = {}
    for d in sorted((corpus / "walls").iterdir()):
        names = sorted(p.name for p in d.glob("*.log"))
        if len(names) < 2:
            continue
        k = max(1, len(names) // 3)
        ranked = sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
        out[d.name] = sorted(ranked[:k])
    return out


def load_heldout(path: Path = HELDOUT) -> set[str]:
    """The recorded held-out files, as paths relative to the corpus (walls/ID/FILE)."""
    data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    return {f"walls/{w}/{f}" for w, files in (data or {}).items() for f in files}


def write_heldout(path: Path = HELDOUT) -> None:
    split = choose_heldout()
    head = (
        "# The held-out split of the corpus (bench/corpus.py --heldout): per wall, a third of its\n"
        "# files, those whose file name hashes lowest (sha256; bench/corpus.py choose_heldout).\n"
        "# Signatures are not written from these files: a new wording seen only here is added to\n"
        "# its wall's source map from the project's source, never copied from the file.\n"
    )
    path.write_text(head + yaml.safe_dump(split, sort_keys=True, default_flow_style=False))


def diagnose(
    matcher: Matcher, name: str, data: bytes, facts: dict[str, object] | None = None
) -> dict[str, tuple[str, str]]:
    """wall id -> (severity, confidence) of what triage reports for this text (with `facts`:
    what the monitor reports for it, knowing the launch)."""
    book = DiagnosisBook()
    stream = matcher.stream()
    for hit in [*stream.feed_chunk(name, data), *stream.finish(name)]:
        if not hit.ruled_out(facts):
            book.add_hit(hit)
    return {d.wall.id: (d.severity, d.confidence) for d in book}


@dataclass
class Report:
    walls: dict[str, Score]
    groups: dict[str, str]  # wall -> "seed" | "beyond"
    by_variant: dict[str, dict[str, Score]]  # variant -> wall -> score
    negative_errors: list[str]  # "file (variant): wall"
    wrong_confidence: list[str]
    examples: int
    negatives: int


def score(
    engine: str | None = None,
    variants: dict[str, Callable[[str], str]] = VARIANTS,
    only: str | None = None,
    files: set[str] | None = None,
) -> Report:
    """Scores per wall; `files` (paths relative to the corpus): only those examples."""
    kb = load_knowledge(use_user=False)
    matcher = Matcher(kb, engine=engine)
    log_walls = sorted(w.id for w in kb if w.signatures)
    groups = {w.id: ("seed" if w.id in FIRST_LOG_WALLS else "beyond") for w in kb}
    examples = load_examples()
    if files is not None:
        examples = [e for e in examples if str(e.path.relative_to(CORPUS)) in files]
    walls = {w: Score() for w in log_walls}
    by_variant: dict[str, dict[str, Score]] = {v: {w: Score() for w in log_walls} for v in variants}
    negative_errors: list[str] = []
    wrong_confidence: list[str] = []
    for ex in examples:
        text = ex.path.read_bytes().decode("utf-8", "surrogateescape")
        rel = str(ex.path.relative_to(CORPUS))
        for vname, fn in variants.items():
            data = fn(text).encode("utf-8", "surrogateescape")
            found = diagnose(matcher, rel, data, ex.facts)
            where = f"{rel} ({vname})"
            for w in log_walls:
                if only and w != only:
                    continue
                for sc in (walls[w], by_variant[vname][w]):
                    if w in ex.expect:
                        if w in found:
                            sc.tp += 1
                        else:
                            sc.fn += 1
                            sc.misses.append(where)
                    elif w in found and w not in ex.allow:
                        sc.fp += 1
                        sc.false.append(where)
            if ex.negative:
                errors = [w for w, (sev, _) in found.items() if sev == "error"]
                negative_errors += [f"{where}: {w}" for w in errors if w not in ex.allow]
            own = ex.own
            if own and own in found and found[own][1] != (ex.confidence or "from-log"):
                wrong_confidence.append(
                    f"{where}: {own} is {found[own][1]}, not {ex.confidence or 'from-log'}"
                )
    return Report(
        walls,
        groups,
        by_variant,
        negative_errors,
        wrong_confidence,
        len(examples) - sum(e.negative for e in examples),
        sum(e.negative for e in examples),
    )


def _pct(x: float) -> str:
    return f"{x:.2f}"


def render(r: Report, variants: dict[str, Callable[[str], str]] = VARIANTS) -> str:
    n_var = len(variants)
    files_per_wall: dict[str, int] = {}
    for ex in load_examples():
        for w in ex.expect:
            files_per_wall[w] = files_per_wall.get(w, 0) + 1
    out = [
        f"corpus: {r.examples} wall examples, {r.negatives} hard negatives,"
        f" each as posted and in {n_var - 1} re-pasted forms ({n_var} texts per file)",
        "",
        "| wall | group | files | TP | FN | FP | precision | recall | recall as posted |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    posted = next(iter(r.by_variant))
    for w in sorted(r.walls, key=lambda w: (r.groups[w] != "seed", w)):
        s = r.walls[w]
        if not files_per_wall.get(w) and not s.fp:
            continue
        p = r.by_variant[posted][w]
        out.append(
            f"| {w} | {r.groups[w]} | {files_per_wall.get(w, 0)} | {s.tp} | {s.fn} | {s.fp}"
            f" | {_pct(s.precision)} | {_pct(s.recall)} | {_pct(p.recall)} |"
        )
    for group in ("seed", "beyond"):
        tot = Score()
        for w, s in r.walls.items():
            if r.groups[w] == group:
                tot.tp, tot.fn, tot.fp = tot.tp + s.tp, tot.fn + s.fn, tot.fp + s.fp
        out.append(
            f"| **all {group} walls** | | | {tot.tp} | {tot.fn} | {tot.fp}"
            f" | **{_pct(tot.precision)}** | **{_pct(tot.recall)}** | |"
        )
    out += ["", "| form | recall | precision |", "|---|---:|---:|"]
    for v, per in r.by_variant.items():
        tot = Score()
        for s in per.values():
            tot.tp, tot.fn, tot.fp = tot.tp + s.tp, tot.fn + s.fn, tot.fp + s.fp
        out.append(f"| {v} | {_pct(tot.recall)} | {_pct(tot.precision)} |")
    out.append("")
    out.append(f"error-severity diagnoses on hard negatives: {len(r.negative_errors)}")
    out += [f"  {e}" for e in r.negative_errors[:40]]
    if r.wrong_confidence:
        out.append(f"diagnoses at the wrong confidence: {len(r.wrong_confidence)}")
        out += [f"  {e}" for e in r.wrong_confidence[:40]]
    for w, s in sorted(r.walls.items()):
        for m in s.misses[:12]:
            out.append(f"missed {w}: {m}")
        for f in s.false[:12]:
            out.append(f"false {w}: {f}")
    return "\n".join(out)


def render_heldout(full: Report, held: Report) -> str:
    """Recall per wall on the held-out split beside the full corpus (and precision there)."""
    out = [
        f"held-out split: {held.examples} wall examples of {full.examples}"
        f" ({HELDOUT.relative_to(REPO)}), every form; full corpus beside it",
        "",
        "| wall | held-out files | held-out recall | full recall | full precision |",
        "|---|---:|---:|---:|---:|",
    ]
    per_file = {w: 0 for w in held.walls}
    for f in load_heldout():
        w = f.split("/")[1]
        per_file[w] = per_file.get(w, 0) + 1
    for w in sorted(full.walls, key=lambda w: (full.groups[w] != "seed", w)):
        h, s = held.walls[w], full.walls[w]
        if not (s.tp + s.fn):
            continue
        hr = _pct(h.recall) if h.tp + h.fn else "–"
        out.append(
            f"| {w} | {per_file.get(w, 0)} | {hr} | {_pct(s.recall)} | {_pct(s.precision)} |"
        )
    tot_h, tot_f = Score(), Score()
    for w in full.walls:
        for tot, rep in ((tot_h, held), (tot_f, full)):
            sc = rep.walls[w]
            tot.tp, tot.fn, tot.fp = tot.tp + sc.tp, tot.fn + sc.fn, tot.fp + sc.fp
    out.append(
        f"| **all** | {held.examples} | **{_pct(tot_h.recall)}** | **{_pct(tot_f.recall)}**"
        f" | **{_pct(tot_f.precision)}** |"
    )
    out.append("")
    out.append(
        f"error-severity diagnoses on hard negatives (full corpus): {len(full.negative_errors)}"
    )
    for w, sc in sorted(held.walls.items()):
        for m in sc.misses[:12]:
            out.append(f"missed (held out) {w}: {m}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=("hyperscan", "re2", "re"))
    ap.add_argument("--variants", choices=("all", "posted"), default="all")
    ap.add_argument("--wall", help="score one wall only")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument(
        "--heldout", action="store_true", help="recall on the held-out split beside the full corpus"
    )
    ap.add_argument("--write-split", action="store_true", help="record the held-out split again")
    args = ap.parse_args(argv)
    variants = VARIANTS if args.variants == "all" else {"as posted": VARIANTS["as posted"]}
    if args.write_split:
        write_heldout()
        print(f"wrote {HELDOUT.relative_to(REPO)}")
        return 0
    r = score(args.engine, variants, args.wall)
    if args.heldout:
        print(render_heldout(r, score(args.engine, variants, args.wall, load_heldout())))
        return 0
    print(render(r, variants))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    w: {
                        "group": r.groups[w],
                        "tp": s.tp,
                        "fn": s.fn,
                        "fp": s.fp,
                        "precision": s.precision,
                        "recall": s.recall,
                    }
                    for w, s in r.walls.items()
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
