"""A pasted excerpt has no startup banner: a signature that waits for one (`after`) is judged
at the end of the file on the excerpt's own shape (`excerpt_times`), named as suspected with
the reason; a log with its banner, and a live stream, keep waiting as before."""

from __future__ import annotations

import json
import subprocess
import sys

from spark_tui.kb.diagnosis import DiagnosisBook
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher

KB = load_knowledge(use_user=False)
STALL = (
    "(EngineCore_DP0 pid=323) INFO 09-21 11:{m:02d}:53 [shm_broadcast.py:466] No available shared"
    " memory broadcast block found in 60 seconds. This typically happens when some processes are"
    " hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization)."
)
SERVING = "(APIServer pid=1) INFO 09-21 11:{m:02d}:10 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s"


def _excerpt(n: int) -> list[str]:
    out = []
    for m in range(n):
        out += [SERVING.format(m=m), STALL.format(m=m)]
    return out


def _walls(lines: list[str], finish: bool = True) -> dict[str, tuple[str, str]]:
    matcher = Matcher(KB)
    stream = matcher.stream()
    book = DiagnosisBook()
    for line in lines:
        for hit in stream.feed_line("paste", line):
            book.add_hit(hit)
    if finish:
        for hit in stream.finish("paste"):
            book.add_hit(hit)
    return {d.wall.id: (d.confidence, d.reason) for d in book}


def test_an_excerpt_is_judged_on_its_shape_and_says_so() -> None:
    found = _walls(_excerpt(3))
    confidence, reason = found["serving-stall"]
    assert confidence == "suspected"
    assert "no startup banner" in reason and "3 matching lines" in reason


def test_too_few_lines_name_nothing() -> None:
    assert "serving-stall" not in _walls(_excerpt(2))


def test_a_log_with_its_banner_waits_for_the_server_to_serve() -> None:
    banner = (
        "(APIServer pid=1) INFO 09-21 11:00:01 [api_server.py:1896] vLLM API server version 0.11.0"
    )
    assert "serving-stall" not in _walls([banner, *_excerpt(4)])
    ready = "(APIServer pid=1) INFO 09-21 11:00:09 [launcher.py:46] Application startup complete."
    confidence, reason = _walls([banner, ready, *_excerpt(2)])["serving-stall"]
    assert (confidence, reason) == ("suspected", "")  # the live rule, no excerpt reason


def test_a_live_stream_never_guesses() -> None:
    assert "serving-stall" not in _walls(_excerpt(5), finish=False)


def test_triage_json_carries_the_reason(tmp_path) -> None:
    log = tmp_path / "excerpt.log"
    log.write_text("\n".join(_excerpt(3)) + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "spark_tui", "triage", "--json", str(log)],
        capture_output=True,
        text=True,
        check=False,
    )
    diags = {d["wall"]: d for d in json.loads(out.stdout)["diagnoses"]}
    assert diags["serving-stall"]["confidence"] == "suspected"
    assert "no startup banner" in diags["serving-stall"]["reason"]
