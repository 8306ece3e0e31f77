"""Attack: what a node says reaches the operator's terminal raw (issue 22, attack 2).

A followed log, a GPU name, a container's image or status carries terminal escape
sequences: a window title (OSC 0/2), a clipboard write (OSC 52), a screen clear (CSI 2J),
DCS/APC/PM/SOS strings, their 8-bit C1 forms, a lone ESC, bidi overrides. Everything a
node says goes through the one trust boundary (spark_tui.untrusted) where it enters: the
TUI's log pane, `status`, `doctor`, `watch --json` and the log walls' evidence show the
text without any of it."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import asyncio
import json
import re
import shlex
import time
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.events import DiagnosisRaised, LogLines
from spark_tui.session import Session, open_cluster
from spark_tui.tui.app import SparkTuiApp
from spark_tui.tui.widgets.log_view import LogView
from spark_tui.untrusted import LINE_CHARS, clean, clean_line, has_controls
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401
from tests.test_tui_live import FREE_MEMORY_LINE, wait_for

# every form of escape a hostile line may carry: (name, raw text, what must remain)
ATTACKS = [
    ("OSC 0 title, BEL", "a\x1b]0;pwned-title\x07b", "ab"),
    ("OSC 2 title, ST", "a\x1b]2;pwned-title\x1b\\b", "ab"),
    ("OSC 52 clipboard", "a\x1b]52;c;cm0gLXJmIH4K\x07b", "ab"),
    ("OSC 8 hyperlink", "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\", "click"),
    ("CSI clear + home", "\x1b[2J\x1b[Hab", "ab"),
    ("CSI cursor up, erase line", "ab\x1b[1A\x1b[2K", "ab"),
    ("SGR hidden text", "a\x1b[8mb\x1b[0m", "ab"),
    ("DCS (DECRQSS)", "a\x1bP$qm\x1b\\b", "ab"),
    ("APC", "a\x1b_payload\x1b\\b", "ab"),
    ("PM", "a\x1b^payload\x1b\\b", "ab"),
    ("SOS", "a\x1bXpayload\x1b\\b", "ab"),
    ("unterminated OSC", "ab\x1b]0;title to the end", "ab"),
    ("lone ESC", "ab\x1b", "ab"),
    ("two-byte ESC c (reset)", "a\x1bcb", "ab"),
    ("8-bit CSI", "a\x9b2Jb", "ab"),
    ("8-bit OSC", "a\x9d52;c;eA==\x9cb", "ab"),
    ("C0: BEL BS VT FF SO", "a\x07\x08\x0b\x0c\x0eb", "ab"),
    ("CR overwrite", "ab\rFAKE", "abFAKE"),
    ("DEL", "a\x7fb", "ab"),
    ("NUL", "a\x00b", "ab"),
    ("bidi override", "a\u202eb\u202c", "ab"),
    ("bidi isolate", "a\u2066b\u2069", "ab"),
    ("bidi marks", "a\u200eb\u200fc\u061cd", "abcd"),
    ("8-bit OSC title", "a\x9d0;owned\x9cb", "ab"),
    ("8-bit DCS", "a\x90junk\x9cb", "ab"),
]
MARK = "hostile-marker"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


# the same, written as a JSON escape (`jq -r` would print it raw)
JSON_CONTROL = re.compile(
    r"\\u(00[01][0-9a-f]|007f|00[89][0-9a-f]|202[a-e]|206[6-9]|200[ef]|061c)", re.I
)


def _no_controls(text: str, where: str) -> None:
    escaped = JSON_CONTROL.search(text)
    assert escaped is None, f"{where}: JSON-escaped control {escaped.group()!r}"
    bad = CONTROL.search(text)
    assert bad is None, f"{where}: control {bad.group()!r} in {text[max(0, bad.start() - 40) :]!r}"


@pytest.mark.parametrize(("name", "raw", "kept"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_each_escape_form_is_removed_and_the_text_kept(name: str, raw: str, kept: str) -> None:
    assert clean_line(raw) == kept, name
    assert not has_controls(clean(raw)), name


def test_a_long_line_is_capped_saying_how_much_was_cut() -> None:
    line = "x" * (LINE_CHARS * 10)
    out = clean_line(line)
    assert out.startswith("x" * LINE_CHARS)
    assert out.endswith(f"… [{LINE_CHARS * 9} more characters]")
    assert "\n" not in clean_line("one\ntwo") and clean("one\ntwo") == "one\ntwo"


def _hostile_lines() -> list[str]:
    # each line its own words: the pane folds lines that differ only in digits
    return [f"{MARK} {name.replace(' ', '-')} {raw}" for name, raw, _k in ATTACKS]


def test_the_tui_log_pane_of_the_simulated_cluster_shows_no_escape() -> None:
    """A container whose output is a hostile log, followed as any log: the log pane and the
    exported screen hold the lines' text and none of their escapes."""
    session = Session.open(None, scenario="healthy", speed=20.0)
    try:
        t = session.transports["spark1"]
        script = "".join(f"printf '%s\\n' {shlex.quote(line)}; " for line in _hostile_lines())
        res = t.run(f"docker run -d --name vllm_hostile ubuntu sh -c {shlex.quote(script)}")
        assert res.ok, res

        async def scenario() -> None:
            app = SparkTuiApp(session)
            async with app.run_test(size=(160, 50)) as pilot:
                await wait_for(pilot, lambda: session.monitor is not None)
                session.monitor.tail(
                    "spark1", "container:vllm_hostile", "docker logs -f --tail 200 vllm_hostile"
                )
                log = app.main_screen.query_one(LogView)
                await wait_for(
                    pilot,
                    lambda: sum(MARK in x for x in log.visible_texts()) == len(ATTACKS),
                    state=lambda: log.visible_texts()[-5:],
                )
                texts = [x for x in log.visible_texts() if MARK in x]
                for x in texts:
                    _no_controls(x, "log pane")
                assert all("pwned-title" not in x and "cm0gLXJm" not in x for x in texts)
                screen = app.export_screenshot()
                _no_controls(screen, "exported screen")
                assert "\x1b" not in screen

        asyncio.run(scenario())
    finally:
        session.close()


def _hostile_node(sshd_cluster: SshdCluster) -> None:
    """spark1 says hostile things in every answer spark-tui reads."""
    node = sshd_cluster.node("spark1")
    gpu = (Path(__file__).parent / "fixtures" / "gb10" / "query-gpu.csv").read_text()
    node.set_file("query-gpu.csv", gpu.replace("NVIDIA GB10", "NVIDIA\x1b]0;pwned-title\x07 GB10"))
    row = {
        "Command": '"vllm serve x"',
        "ID": "3f2a1b0c9d8e",
        "Image": "vllm/vllm\x1b]52;c;cm0gLXJmIH4K\x07-openai",
        "Names": "vllm_node\x1b[2J\x9b2J\u202e",  # 7- and 8-bit CSI, a bidi override
        "State": "running",
        "Status": "Up 5 minutes\x1b[8m hidden\x9d0;t\x9c\u2066",
    }
    node.set_file("docker-ps.jsonl", json.dumps(row) + "\n")  # JSON: \u001b escapes
    wall = f"\x1b]0;t\x07\x1b[31m{FREE_MEMORY_LINE}\x1b[0m\x9b2J"  # a wall's line, wrapped
    node.set_file("serve.log", "\n".join([*_hostile_lines(), wall]) + "\n")


def test_status_doctor_and_watch_over_real_sshd_nodes_print_no_escape(
    sshd_cluster: SshdCluster, capsys
) -> None:
    _hostile_node(sshd_cluster)
    config = sshd_cluster.write_cluster_yaml()
    outputs = {}
    for argv in (
        ["status", "--config", str(config)],
        ["status", "--config", str(config), "--json"],
        ["doctor", "--config", str(config)],
        ["doctor", "--config", str(config), "--json"],
        ["watch", "--config", str(config), "--json", "--duration", "6"],
    ):
        main(argv)
        got = capsys.readouterr()
        outputs[" ".join(argv[:1] + argv[3:])] = got.out + got.err
    for what, text in outputs.items():
        _no_controls(text, what)
        assert "cm0gLXJm" not in text and "pwned-title" not in text, what
    assert "vllm_node" in outputs["status --json"]  # the name, cleaned, is still there
    # the container's log was followed: its wall found, its evidence clean
    watched = [json.loads(x) for x in outputs["watch --json --duration 6"].splitlines() if x]
    diags = [e for e in watched if e.get("event") == "diagnosis"]
    assert any(e["wall"] == "vllm-free-memory-low" for e in diags), watched


def test_a_followed_log_file_on_a_real_node_reaches_events_and_evidence_clean(
    sshd_cluster: SshdCluster, tmp_path: Path
) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO starting\n")
    config = sshd_cluster.write_cluster_yaml()
    config.write_text(
        config.read_text().replace(
            "    role: head\n", f"    role: head\n    logs:\n      - file: {log}\n", 1
        )
    )
    events: list = []
    with open_cluster(config) as session:
        session.start(events.append)
        time.sleep(1.5)
        with log.open("a") as fh:
            for line in _hostile_lines():
                fh.write(line + "\n")
            # a wall's line wrapped in escapes: found, its evidence clean
            fh.write(f"\x1b]0;t\x07\x1b[31m{FREE_MEMORY_LINE}\x1b[0m\x9b2J\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            isinstance(e, DiagnosisRaised) for e in events
        ):
            time.sleep(0.2)
    lines = [x for e in events if isinstance(e, LogLines) for x in e.lines]
    assert sum(MARK in x for x in lines) == len(ATTACKS), lines
    for x in lines:
        _no_controls(x, "LogLines")
    diags = [e.diagnosis for e in events if isinstance(e, DiagnosisRaised)]
    assert [d.wall.id for d in diags][:1] == ["vllm-free-memory-low"]
    _no_controls(diags[0].evidence, "evidence")
    assert diags[0].evidence.startswith("ERROR 05-12 09:14:35")
