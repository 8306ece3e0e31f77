"""Evidence before anything restarts (issue 8 §3, §5) and recovery that does not loop (§4):
real sh through LocalTransport with shim tools on PATH, the knowledge base's own fixes, the
rules engine's own diagnoses, `spark-tui report` reading what was collected."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from spark_tui.driver import decide_after_crash, unattended_fix
from spark_tui.entry import main
from spark_tui.events import DiagnosisRaised
from spark_tui.kb.diagnosis import DiagnosisBook
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.source import Source
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.local import LocalTransport
from spark_tui.nodes.rules import RuleEngine
from spark_tui.remedy.evidence import AutoEvidence, collect_evidence, evidence_only
from spark_tui.remedy.launch import AutoRelaunchGuard
from spark_tui.remedy.render import evidence_command
from spark_tui.state import StateDir

from .test_remedy_fixes import _cluster_file

KB = load_knowledge(use_user=False)
CLUSTER = ClusterConfig(
    nodes=(NodeConfig("spark1", "local", "head"), NodeConfig("spark2", "local", "worker")),
    source="test",
)
SHIMS = {
    # sudo -n sh -c '…': run it (the test is not root; the shim stands for a sudoers rule)
    "sudo": 'while [ "${1#-}" != "$1" ]; do shift; done; exec "$@"',
    "journalctl": 'echo "-- Logs begin at $*"; '
    'echo "kernel: NVRM: Xid (PCI:000f:01:00): 79, GPU has fallen off the bus."',
    "docker": 'case "$1" in ps) echo c1 ;; logs) echo "(EngineCore pid=1) last line" ;; '
    'exec) shift 2; exec "$@" ;; esac',
    "py-spy": 'echo "Thread 0x1 (active): MainThread"; echo "    wait (shm_broadcast.py:674)"',
}


def shim_transports(tmp_path: Path) -> dict[str, LocalTransport]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in SHIMS.items():
        p = bin_dir / name
        p.write_text("#!/bin/sh\n" + body + "\n")
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return {n.name: LocalTransport(n.name, env=env) for n in CLUSTER.nodes}


class Readings:
    """The monitor's view beyond one round (the ReadingsSource protocol)."""

    def recent_readings(self, node: str, seconds: float = 600.0) -> list[tuple[float, dict]]:
        return [
            (1_700_000_000.0 + i, {"gpu.power_w": 20.0, "serving.tokens_age_s": 60.0 + i})
            for i in range(3)
        ]

    def last_reading_before_silence(self, node: str) -> float | None:
        return 1_700_000_000.0


def raised(wall_id: str, facts: dict, node: str = "spark2") -> DiagnosisRaised:
    engine = RuleEngine(KB, DiagnosisBook())
    firing = next(
        f for f in engine.evaluate({node: facts}, 100.0) if f.diagnosis.wall.id == wall_id
    )
    return DiagnosisRaised(firing.diagnosis.snapshot(), firing.new, 100.0)


def test_reboot_evidence_is_collected_at_once_read_only_and_lands_in_the_report(
    tmp_path: Path, capsys
) -> None:
    got = []
    auto = AutoEvidence(
        got.append,
        CLUSTER,
        shim_transports(tmp_path),
        readings=Readings(),
        directory=StateDir.real().evidence_dir,  # where `spark-tui report` finds it
    )
    event = raised("node-unexpected-reboot", {"boot.changed_unasked": True})
    auto(event)
    auto.wait(300)  # bounded: py-spy through the shims on a loaded machine takes its time
    assert got == [event]  # the event still goes on
    (res,) = auto.results
    names = sorted(p.name for p in res.files)
    assert names == [
        "spark2-kernel-log-previous-boot.txt",
        "spark2-nvidia-bug-report.txt",
        "spark2-pstore.txt",
    ]  # only the node where it was seen
    kernel = (res.directory / "spark2-kernel-log-previous-boot.txt").read_text()
    assert "journalctl -b -1 -k -n 300" in kernel and "GPU has fallen off the bus" in kernel
    assert "last reading before the node went silent: 2023-11-14 22:13:20 UTC" in kernel
    bug = (res.directory / "spark2-nvidia-bug-report.txt").read_text()
    assert "Run this on the node for NVIDIA's bug report: sudo nvidia-bug-report.sh" in bug
    # a second raise of the same wall on the same node collects nothing more
    auto(event)
    auto.wait(300)  # bounded: py-spy through the shims on a loaded machine takes its time
    assert len(auto.results) == 1
    out = tmp_path / "report.md"
    assert (
        main(["report", "--config", str(_cluster_file(tmp_path)), "--offline", "-o", str(out)]) == 0
    )
    report = out.read_text()
    assert "## Evidence" in report and "GPU has fallen off the bus" in report
    assert "last reading before the node went silent" in report


def test_stall_evidence_first_dumps_and_readings_of_the_last_minutes(tmp_path: Path) -> None:
    event = raised(
        "serving-stall",
        {
            "serving.requests_running": 2.0,
            "serving.tokens_age_s": 75.0,
            "log.silent_s": 75.0,
            "gpu.power_w": 21.0,
        },
        node="spark1",
    )
    first = event.diagnosis.wall.fix(event.diagnosis.fixes()[0])
    assert first is not None and evidence_only(first)
    auto = AutoEvidence(
        lambda e: None,
        CLUSTER,
        shim_transports(tmp_path),
        readings=Readings(),
        directory=tmp_path / "evidence",
        # no recipe: the serving containers the session found running (an attached deployment)
        containers=lambda: {"spark1": "vllm_node", "spark2": "vllm_node"},
    )
    auto(event)
    auto.wait(300)  # bounded: py-spy through the shims on a loaded machine takes its time
    (res,) = auto.results
    assert res.directory.parent == tmp_path / "evidence"
    files = {p.name: p.read_text() for p in res.files}
    assert set(files) >= {"spark1-py-spy.txt", "spark2-py-spy.txt", "spark1-readings.txt"}
    assert "shm_broadcast.py:674" in files["spark1-py-spy.txt"]
    assert '"serving.tokens_age_s": 62.0' in files["spark1-readings.txt"]


def test_a_fix_that_restarts_is_never_run_automatically(tmp_path: Path) -> None:
    event = raised("restart-loop", {"containers.restart_count": 4})
    auto = AutoEvidence(
        lambda e: None, CLUSTER, shim_transports(tmp_path), directory=tmp_path / "evidence"
    )
    auto(event)
    auto.wait(300)  # bounded: py-spy through the shims on a loaded machine takes its time
    assert auto.results == []  # its first fix stops the stack: that one is asked for
    assert not (tmp_path / "evidence").exists()


def test_collecting_from_an_unreachable_node_says_so(tmp_path: Path) -> None:
    res = collect_evidence(["log-tail"], ["spark9"], {}, run_id="t", root=tmp_path)
    assert res.failures == {"spark9 log-tail": "no connection"}
    assert res.directory == tmp_path / "t" and res.files == []


def test_evidence_commands_are_read_only() -> None:
    for item in ("kernel-log-previous-boot", "pstore", "nvidia-bug-report"):
        cmd = evidence_command(item, None, "20260101-000000")
        assert not any(w in cmd for w in ("rm ", "mv ", "reboot", "> /", "tee "))


# ---------------------------------------------------------------- recovery that does not loop


def crash(wall_id: str, line: str, node: str = "spark1", t: float = 10.0):
    book = DiagnosisBook()
    from spark_tui.kb.matcher import Matcher

    stream = Matcher(KB).stream()
    for text in line.split("\n"):
        for hit in stream.feed_line(f"{node}:serve", text):
            book.add(
                hit.wall, Source.log(node, "serve"), hit.line_no, hit.evidence, node=node, now=t
            )
    return [d for d in book.by_first_line() if d.wall.id == wall_id]


def test_after_a_crash_one_relaunch_per_diagnosis_and_never_twice_on_the_same_wall(
    tmp_path: Path,
) -> None:
    guard = AutoRelaunchGuard(tmp_path / "guard.json")
    line = (  # mp-cross-node-semlock: a vLLM worker that could not rebuild the head's semaphore
        "self._semlock = _multiprocessing.SemLock._rebuild(*state)\n"
        "Exception: WorkerProc initialization failed"
    )
    first = decide_after_crash(crash("mp-cross-node-semlock", line, t=10), guard, 10)
    assert first.relaunch and first.wall == "mp-cross-node-semlock"
    assert first.fix == "use-ray-executor"
    # the same wall again, a new diagnosis (another launch): refused, the user is asked
    again = decide_after_crash(crash("mp-cross-node-semlock", line, t=500), guard, 500)
    assert not again.relaunch and "second automatic relaunch" in again.reason
    # it survives a restart of spark-tui
    assert not decide_after_crash(
        crash("mp-cross-node-semlock", line, t=900), AutoRelaunchGuard(tmp_path / "guard.json"), 900
    ).relaunch


def test_no_diagnosis_no_relaunch(tmp_path: Path) -> None:
    d = decide_after_crash([], AutoRelaunchGuard(tmp_path / "g.json"), 0)
    assert not d.relaunch and "blindly" in d.reason


def test_a_wall_whose_fixes_do_not_relaunch_is_asked_for(tmp_path: Path) -> None:
    line = "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"
    diags = crash("safetensors-corrupt-shard", line)
    # its first fix repairs the files on the nodes and cannot be undone: not taken with nobody
    # asked; the fix that relaunches only patches the load format (revisions can undo it)
    first = diags[0].wall.fix(diags[0].fixes()[0])
    assert first is not None and first.id != "plain-safetensors-loader"
    assert not unattended_fix(first)
    d = decide_after_crash(diags, AutoRelaunchGuard(tmp_path / "g.json"), 0)
    assert d.relaunch and d.fix == "plain-safetensors-loader"
