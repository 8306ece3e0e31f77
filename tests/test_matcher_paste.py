"""What pastes do to logs, undone: colour codes without their ESC, lines a terminal or an
editor re-wrapped (matched joined, evidence on the original line numbers), and the
signature fields that need context (`after`, `reset`, `times`, `unless`), in every engine,
fed line by line or in chunks of any size."""

from __future__ import annotations

import io
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_tui.kb import paste
from spark_tui.kb.diagnosis import DiagnosisBook
from spark_tui.kb.engines import installed_engines
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.matcher import Matcher, scan_stream
from spark_tui.kb.schema import LogSignature, Wall

FREE = (
    "(EngineCore_DP0 pid=1292) ERROR 12-18 00:39:37 [core.py:708] ValueError: Free memory on "
    "device cuda:0 (22.76/24.0 GiB) on startup is less than desired GPU memory utilization "
    "(0.97, 23.28 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
    "processes."
)
HEALTHY = [
    "(APIServer pid=1) INFO 08-26 11:10:00 [api_server.py:682] Starting vLLM server on http://0.0.0.0:8000",
    "(APIServer pid=1) INFO 08-26 11:10:00 [launcher.py:46] Route: /health, Methods: GET",
    'INFO:     10.0.0.5:52382 - "GET /health HTTP/1.1" 200 OK',
    "[rank0]:[W205 16:55:27.345399482 ProcessGroupNCCL.cpp:1565] Warning: destroy_process_group() was not called",
    '  File "/usr/lib/python3.12/asyncio/runners.py", line 118, in run',
]
KB = load_knowledge(use_user=False)


def engines() -> list[str]:
    return installed_engines()


MATCHERS = {name: Matcher(KB, engine=name) for name in engines()}


def bulk(m: Matcher, data: bytes, size: int = 1 << 20) -> list[tuple[str, int]]:
    class Slow(io.BytesIO):
        def read(self, n: int = -1) -> bytes:
            return super().read(min(n, size) if n and n > 0 else size)

    return [(h.wall.id, h.line_no) for h in scan_stream(m, "f", Slow(data))]


def streamed(m: Matcher, lines: list[str]) -> list[tuple[str, int]]:
    return [(h.wall.id, h.line_no) for h in m.scan_lines("s", lines)]


# -- pieces ------------------------------------------------------------------------------


def test_colour_codes_without_esc_are_removed_and_brackets_kept() -> None:
    line = b"[2m[33m(raylet)[0m ^[[0;36m(pid=1)^[[0;0m \x1b[31mERROR\x1b[0m [rank0]: [core.py:9] x"
    assert paste.clean_line(line) == b"(raylet) (pid=1) ERROR [rank0]: [core.py:9] x"
    assert paste.clean_line(b"[2025-01-01 10:00:00] [E ProcessGroupNCCL.cpp:1]\r") == (
        b"[2025-01-01 10:00:00] [E ProcessGroupNCCL.cpp:1]"
    )


@pytest.mark.parametrize(
    ("prev", "line", "rest"),
    [
        (b"x" * 60, b"ory utilization (0.9)", b"ory utilization (0.9)"),
        (b"x" * 60, b" pressure (OOM), 0 Workers", b" pressure (OOM), 0 Workers"),
        (b"(raylet) " + b"x" * 60, b"(raylet) memory pressure", b"memory pressure"),
        (b"vllm-1  | " + b"x" * 60, b"vllm-1  | desired GPU", b"desired GPU"),
        (b"x" * 60, b"INFO 01-01 10:00:00 [a.py:1] next", None),  # a level: a new record
        (b"x" * 60, b"2025-01-01 10:00:00 next", None),  # a date
        (b"x" * 60, b"(EngineCore_DP0 pid=1) next", None),  # another process's prefix
        (b"x" * 60, b'  File "a.py", line 1, in f', None),  # a frame
        (b"x" * 60, b"RuntimeError: boom", None),  # an exception line
        (b"x" * 60, b"", None),
        (b"short", b"continues", None),  # too short to have been wrapped
        (b"x" * 40 + b"    ", b"continues", None),  # padded by a screen copy: it ended
    ],
)
def test_what_continues_a_line(prev: bytes, line: bytes, rest: bytes | None) -> None:
    assert paste.continues(prev, line) == rest


def test_joins_hard_soft_and_mixed() -> None:
    texts = [t for t, _ in paste.joins([b"x" * 10 + b" less t", b"han", b"desired"])]
    assert b"x" * 10 + b" less thandesired" in texts  # a terminal: characters run on
    assert b"x" * 10 + b" less t han desired" in texts  # an editor: spaces dropped
    assert b"x" * 10 + b" less than desired" in texts  # the widest line ran on, the rest not


# -- wrapped lines ---------------------------------------------------------------------


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("width", [40, 57, 80, 100, 120, 150])
def test_a_hard_wrapped_error_is_found_on_its_first_line(engine: str, width: int) -> None:
    m = MATCHERS[engine]
    pieces = [FREE[i : i + width] for i in range(0, len(FREE), width)]
    lines = [*HEALTHY[:3], *pieces, *HEALTHY[3:]]
    data = ("\n".join(lines) + "\n").encode()
    # the error starts on the fourth line; its words on the line that holds "Free"
    first = 4 + FREE.index("Free memory") // width
    assert ("vllm-free-memory-low", first) in bulk(m, data)
    assert bulk(m, data) == streamed(m, lines)
    # the evidence keeps every line's own number
    book = DiagnosisBook()
    for hit in m.scan_lines("s", lines):
        book.add_hit(hit)
    d = book.get("vllm-free-memory-low", "s")
    assert d is not None and d.line == first
    numbers = [n for n, _ in d.evidence_lines]
    assert numbers == list(range(first, first + len(numbers))) and len(numbers) >= 2


@pytest.mark.parametrize("engine", engines())
def test_an_editor_reflow_is_found(engine: str) -> None:
    lines = textwrap.wrap(FREE, 70)
    first = next(i for i, line in enumerate(lines, 1) if "Free memory" in line)
    assert ("vllm-free-memory-low", first) in streamed(MATCHERS[engine], lines)


@pytest.mark.parametrize("engine", engines())
def test_words_split_over_separate_records_are_not_joined(engine: str) -> None:
    lines = [
        "ERROR 12-18 00:39:37 [core.py:708] ValueError: Free memory on device cuda:0 (1/2 GiB) ok",
        "ERROR 12-18 00:39:38 [core.py:708] on startup is less than desired GPU memory utilization",
        '  File "x.py", line 1, in Free memory on device cuda:0 (1/2 GiB)',
        "RuntimeError: on startup is less than desired GPU memory utilization",
    ]
    assert streamed(MATCHERS[engine], lines) == []


@pytest.mark.parametrize("engine", engines())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    width=st.integers(min_value=45, max_value=160),
    before=st.lists(st.sampled_from(HEALTHY), max_size=6),
    after=st.lists(st.sampled_from(HEALTHY), max_size=6),
    sizes=st.integers(min_value=1, max_value=300),
)
def test_wrapped_pastes_in_chunks_of_any_size(
    engine: str, width: int, before: list[str], after: list[str], sizes: int
) -> None:
    m = MATCHERS[engine]
    pieces = [FREE[i : i + width] for i in range(0, len(FREE), width)]
    lines = [*before, *pieces, *after]
    data = ("\n".join(lines) + "\n").encode()
    expected = streamed(m, lines)
    first = len(before) + 1 + FREE.index("Free memory") // width
    assert ("vllm-free-memory-low", first) in expected
    assert bulk(m, data, sizes) == expected


# -- signatures that need context ------------------------------------------------------


def wall(wid: str, *sigs: LogSignature) -> Wall:
    return Wall(wid, wid, "error", "log", ("any",), "s", sigs, (), (), (), ("x",))


@pytest.mark.parametrize("engine", engines())
def test_after_reset_and_times(engine: str) -> None:
    sig = LogSignature("stuck", after="serving now", reset="starting up", times=2)
    m = Matcher([wall("gated", sig)], engine=engine)
    lines = [
        "starting up",
        "stuck",  # 2: before the server serves (warmup): never counted
        "stuck",
        "serving now",
        "stuck",  # 5: once is not yet a repeat
        "starting up",  # 6: a restart starts over
        "stuck",
        "serving now",
        "stuck",
        "stuck",  # 10: the second after serving
    ]
    assert streamed(m, lines) == [("gated", 10)]
    data = ("\n".join(lines) + "\n").encode()
    assert bulk(m, data, 7) == [("gated", 10)]


@pytest.mark.parametrize("engine", engines())
def test_unless_leaves_a_line_to_the_more_specific_wall(engine: str) -> None:
    m = MATCHERS[engine]
    flashmla = (
        "CUDA error (/workspace/.deps/flashmla-src/csrc/flash_fwd_mla_metadata.cu:76): "
        "no kernel image is available for execution on the device"
    )
    plain = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert [w for w, _ in streamed(m, [flashmla])] == ["flashmla-unsupported-arch"]
    assert [w for w, _ in streamed(m, [plain])] == ["no-kernel-image"]
    # also when a paste wrapped the FlashMLA path onto the line before
    wrapped = [flashmla[:70], flashmla[70:]]
    assert [w for w, _ in streamed(m, wrapped)] == ["flashmla-unsupported-arch"]


@pytest.mark.parametrize("engine", engines())
def test_shm_notice_during_warmup_is_not_a_stall(engine: str) -> None:
    m = MATCHERS[engine]
    shm = (
        "(EngineCore_DP0 pid=1) INFO 10-24 16:26:27 [shm_broadcast.py:466] No available shared "
        "memory broadcast block found in 60 seconds. This typically happens when some processes "
        "are hanging or doing some time-consuming work (e.g. compilation)."
    )
    warmup = ["flashinfer.jit: [Autotuner]: Autotuning process starts ...", shm, shm, shm]
    startup = "(APIServer pid=1) INFO:     Application startup complete."
    assert "serving-stall" not in {w for w, _ in streamed(m, warmup)}
    hits = m.scan_lines("s", [*warmup, startup, shm, shm])
    stall = [h for h in hits if h.wall.id == "serving-stall"]
    assert [(h.line_no, h.confidence, h.severity) for h in stall] == [(7, "suspected", "warning")]


# -- confidence ----------------------------------------------------------------------------


def test_confidence_and_severity_follow_the_readings() -> None:
    m = MATCHERS[engines()[0]]
    line = "WorkNCCL(SeqNum=12590, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=2, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
    hits = [h for h in m.scan_lines("s", [line]) if h.wall.id == "nccl-dual-build"]
    assert [(h.confidence, h.severity) for h in hits] == [("suspected", "warning")]
    book = DiagnosisBook()
    d, _ = book.add_hit(hits[0], node="spark1", facts_by_node={"spark1": {}})
    assert (d.confidence, d.severity) == ("suspected", "warning")
    assert d.confirm_with() == ["nccl.library_builds >= 2"]
    assert d.to_json()["confidence"] == "suspected"
    assert d.to_json()["confirm_with"] == ["nccl.library_builds >= 2"]
    # a later round finds two libnccl builds in the serving container
    assert book.confirm_with({"spark1": {"nccl.library_builds": 2}}) == [d]
    assert (d.confidence, d.severity, d.confirm_with()) == ("confirmed", "error", [])
    assert d.to_json()["severity"] == "error"


def test_a_wall_named_by_its_own_words_is_from_the_log() -> None:
    m = MATCHERS[engines()[0]]
    (hit,) = m.scan_lines("s", [FREE])
    assert (hit.confidence, hit.severity) == ("from-log", "error")
    book = DiagnosisBook()
    d, _ = book.add_hit(hit)
    assert d.to_json()["confidence"] == "from-log" and d.to_json()["confirm_with"] == []


def test_watch_json_says_when_readings_confirm_a_suspected_diagnosis() -> None:
    import json

    from spark_tui.cli.watch import EventPrinter
    from spark_tui.events import DiagnosisRaised

    m = MATCHERS[engines()[0]]
    line = "WorkNCCL(SeqNum=12590, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=2, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
    (hit,) = [h for h in m.scan_lines("spark1:serve", [line]) if h.wall.id == "nccl-dual-build"]
    book = DiagnosisBook()
    d, new = book.add_hit(hit, node="spark1")
    out = io.StringIO()
    printer = EventPrinter(as_json=True, out=out)
    printer(DiagnosisRaised(d.snapshot(), new, 0.0))
    printer(DiagnosisRaised(d.snapshot(), False, 1.0))  # seen again, as sure as before: nothing new
    book.confirm_with({"spark1": {"nccl.library_builds": 2}})
    printer(DiagnosisRaised(d.snapshot(), False, 2.0))  # the monitor's round: readings agree now
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(x["confidence"], x["severity"]) for x in lines] == [
        ("suspected", "warning"),
        ("confirmed", "error"),
    ]


def test_a_suspected_wall_does_not_fail_a_launch_step() -> None:
    from spark_tui.remedy.launch import fatal_wall

    shm = (
        "(EngineCore_DP0 pid=1) INFO 10-24 16:26:27 [shm_broadcast.py:466] No available shared "
        "memory broadcast block found in 60 seconds."
    )
    serving = "\n".join(["(APIServer pid=1) INFO:     Application startup complete.", shm, shm])
    m = MATCHERS[engines()[0]]
    # serving-stall, suspected: a warning until readings agree
    assert fatal_wall(serving, m) is None
    free = fatal_wall(FREE, m)
    assert free is not None and free.startswith("vllm-free-memory-low")
