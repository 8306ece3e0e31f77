"""A fix that fails sets the nodes back: fabric-mtu-9000 on the simulated cluster, with a
switch port left at 1500, fails its 9000-byte ping and puts each node back at the MTU it
had (its own, read on it just before the change), with a journal record before and after
each undo command; the preview shows what would set each node back; the lint checks an
undo like any command; --read-only refuses it; the sudoers rule allows the undo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui import policy
from spark_tui.errors import InputErrors
from spark_tui.events import ActionProgress
from spark_tui.kb.loader import load_knowledge
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.journal import JournalUnwritable
from spark_tui.remedy.render import preview_lines
from spark_tui.remedy.sudoers import root_commands, sudoers_line
from spark_tui.session import Session, open_cluster
from spark_tui.sim import SteppedClock
from tests.test_remedy_fixes import fix_from

IF = "enp1s0f0np0"  # the simulated nodes' fabric interface


def mtu_fix():
    fix = load_knowledge(use_user=False).get("fabric-slow").fix("fabric-mtu-9000")
    assert fix is not None
    return fix


@pytest.fixture
def session() -> Iterator[Session]:
    with open_cluster(scenario="healthy", clock=SteppedClock()) as s:
        yield s


def mtus(session: Session) -> dict[str, int]:
    return {n: node.fabric_mtu for n, node in session.sim.world.nodes.items()}


def since_start(session: Session) -> list[dict]:
    entries = session.journal.entries()
    start = max(i for i, e in enumerate(entries) if e["event"] == "fix-start")
    return entries[start:]


def test_a_failed_ping_sets_each_node_back_to_its_own_mtu_journaled(session: Session) -> None:
    """spark1 at 1500, spark2 at 1450, spark2's switch port at 1500: both set to 9000, then
    spark1's 9000-byte ping to spark2 is lost on the way: the fix fails, and each node is set
    back to what it had — spark2 first (the last change first), each undo journaled."""
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 1450
    world["spark2"].switch_port_mtu = 1500
    plan = plan_fix(mtu_fix(), session.config, seen="spark2", wall="fabric-slow")
    progress: list[ActionProgress] = []
    result = session.apply(plan, progress=progress.append, yes=True)

    assert not result.ok and result.failed_node == "spark1", result.message
    assert mtus(session) == {"spark1": 1500, "spark2": 1450}
    assert "100% packet loss" in result.message
    assert result.message.endswith("spark1 set back to MTU 1500; spark2 set back to MTU 1450")
    assert [(d.node, d.command) for d in result.undone] == [
        ("spark2", f"sudo -n ip link set dev {IF} mtu 1450"),
        ("spark1", f"sudo -n ip link set dev {IF} mtu 1500"),
    ]
    assert [p.node for p in progress if p.step == "undo" and p.status == "ok"][:2] == [
        "spark2",
        "spark1",
    ]

    entries = since_start(session)
    shape = [
        (e["event"], e.get("node"), e.get("action"), e.get("command") or e.get("undo"))
        for e in entries
        if e["event"] in ("undo-saved", "started", "finished")
    ]
    set_9000, ping = f"sudo -n ip link set dev {IF} mtu 9000", "ping -M do -s 8972 -c 1 -W 3"
    back1, back2 = (f"sudo -n ip link set dev {IF} mtu {m}" for m in (1500, 1450))
    assert shape == [
        # what sets the node back, read and written down before the node is changed
        ("undo-saved", "spark1", None, back1),
        ("started", "spark1", "run", set_9000),
        ("finished", "spark1", "run", set_9000),
        ("undo-saved", "spark2", None, back2),
        ("started", "spark2", "run", set_9000),
        ("finished", "spark2", "run", set_9000),
        ("started", "spark1", "run", f"{ping} 10.10.10.2"),
        ("finished", "spark1", "run", f"{ping} 10.10.10.2"),
        ("started", "spark2", "undo", back2),
        ("finished", "spark2", "undo", back2),
        ("started", "spark1", "undo", back1),
        ("finished", "spark1", "undo", back1),
    ]
    saved = [e for e in entries if e["event"] == "undo-saved"]
    assert [(e["fact"], e["value"]) for e in saved] == [
        ("net.fabric_mtu", 1500),
        ("net.fabric_mtu", 1450),
    ]
    assert all(
        e["exit_code"] == 0 for e in entries if e.get("action") == "undo" and "exit_code" in e
    )
    end = entries[-1]
    assert end["event"] == "fix-end" and end["status"] == "failed"
    assert [u["node"] for u in end["undone"]] == ["spark2", "spark1"] and end["not_undone"] == []


def test_a_fix_whose_check_fails_is_set_back_too(session: Session) -> None:
    """The verify step is the last check: a condition that does not hold on fresh readings
    after the change (here MTU >= 9100: the node took 9000) fails the fix and sets both
    nodes back, the check named."""
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 4000
    fix = fix_from(
        """
        - id: mtu-9000-checked
          title: MTU 9000, checked against more than it can take
          risk: disruptive
          root: true
          actions:
            - type: run
              on: all
              command: ip link set dev {node.fabric_if} mtu 9000
              root: true
              undo:
                before: net.fabric_mtu
                command: ip link set dev {node.fabric_if} mtu {before}
                restores: MTU {before}
          verify: [net.fabric_mtu >= 9100]
        """
    )
    result = session.apply(plan_fix(fix, session.config, wall="t"), yes=True)
    assert not result.ok and result.verified is False
    assert mtus(session) == {"spark1": 1500, "spark2": 4000}
    assert "spark1: the check net.fabric_mtu >= 9100 failed" in result.message
    assert "spark1 set back to MTU 1500; spark2 set back to MTU 4000" in result.message


def test_a_fix_that_holds_is_not_undone(session: Session) -> None:
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 1500
    result = session.apply(plan_fix(mtu_fix(), session.config, wall="fabric-slow"), yes=True)
    assert result.ok and result.verified, result.message
    assert mtus(session) == {"spark1": 9000, "spark2": 9000}
    assert result.undone == [] and result.undo_failed == []
    assert not [e for e in since_start(session) if e.get("action") == "undo"]


def test_a_value_that_cannot_be_read_leaves_that_node_unchanged(session: Session) -> None:
    """No reading of spark2's MTU before the change: spark2 is not changed (its undo could
    not be known), the fix fails, and spark1, already changed, is set back."""
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 1450
    plan = plan_fix(mtu_fix(), session.config, wall="fabric-slow")

    def facts(node: str | None) -> dict[str, object]:
        return session.fresh_facts(node) if node == "spark1" else {}

    result = run_fix(plan, session.environment(), yes=True, verify_facts=facts)
    assert not result.ok and result.failed_node == "spark2"
    assert "cannot read net.fabric_mtu on spark2 before the change" in result.message
    assert "nothing changed on spark2" in result.message
    assert result.message.endswith("spark1 set back to MTU 1500")
    assert mtus(session) == {"spark1": 1500, "spark2": 1450}


def test_an_undo_that_fails_says_what_to_run_by_hand(session: Session) -> None:
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 1500
    world["spark2"].switch_port_mtu = 1500
    fix = fix_from(
        """
        - id: mtu-9000-bad-undo
          title: MTU 9000 with an undo naming no such device
          risk: disruptive
          root: true
          actions:
            - type: run
              on: all
              command: ip link set dev {node.fabric_if} mtu 9000
              root: true
              undo:
                before: net.fabric_mtu
                command: ip link set dev nosuchdev mtu {before}
            - type: run
              on: all
              command: ping -M do -s 8972 -c 1 -W 3 {peer.fabric_ip}
        """
    )
    result = session.apply(plan_fix(fix, session.config, wall="t"), yes=True)
    assert not result.ok
    assert "spark1 NOT set back" in result.message and "Cannot find device" in result.message
    assert "run 'sudo -n ip link set dev nosuchdev mtu 1500' there" in result.message
    end = since_start(session)[-1]
    assert [u["node"] for u in end["not_undone"]] == ["spark2", "spark1"]


def test_a_journal_that_cannot_be_written_stops_the_undo(session: Session) -> None:
    """The journal becomes unwritable as the ping fails (a directory where the file was):
    no undo command runs unjournaled; the error says what ran."""
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 1500
    world["spark2"].switch_port_mtu = 1500
    path = session.journal.path

    def progress(p: ActionProgress) -> None:
        if p.status == "failed" and p.step == "run" and path.is_file():
            path.rename(path.with_name("journal.old"))
            path.mkdir()

    plan = plan_fix(mtu_fix(), session.config, wall="fabric-slow")
    with pytest.raises(JournalUnwritable) as info:
        session.apply(plan, progress=progress, yes=True)
    assert "the change stopped there, after running" in str(info.value)
    assert mtus(session) == {"spark1": 9000, "spark2": 9000}  # nothing ran unjournaled
    ran = [c for t in session.transports.values() for c in getattr(t, "commands", [])]
    assert not any(c.endswith("mtu 1500") for c in ran)


def test_read_only_refuses_it_and_nothing_changes(session: Session) -> None:
    world = session.sim.world.nodes
    world["spark1"].fabric_mtu = world["spark2"].fabric_mtu = 1500
    world["spark2"].switch_port_mtu = 1500
    plan = plan_fix(mtu_fix(), session.config, wall="fabric-slow")
    policy.set_read_only(True)
    with pytest.raises(policy.ReadOnlyRefused, match="read-only: refused to run fabric-mtu-9000"):
        session.apply(plan, yes=True)
    assert mtus(session) == {"spark1": 1500, "spark2": 1500}
    assert not [e for e in session.journal.entries() if e["event"] in ("undo-saved", "started")]


def test_the_preview_shows_what_sets_each_node_back(session: Session) -> None:
    """The exact undo command per node, commented (a preview pasted into a shell never runs
    it): with the value the readings at hand show, else a mark for the value read then."""
    plan = plan_fix(
        mtu_fix(),
        session.config,
        wall="fabric-slow",
        facts={"spark1": {"net.fabric_mtu": 1500}, "spark2": {"net.fabric_mtu": 1450}},
    )
    lines = plan.preview_lines()
    at = lines.index(
        "# if a later step or the check fails, each node is set back to its net.fabric_mtu "
        "as read on it just before this step (now: spark1 1500, spark2 1450):"
    )
    assert lines[at - 4 : at + 3] == [
        "# on spark1:",
        f"sudo -n ip link set dev {IF} mtu 9000",
        "# on spark2:",
        f"sudo -n ip link set dev {IF} mtu 9000",
        lines[at],
        f"#   on spark1: sudo -n ip link set dev {IF} mtu 1500",
        f"#   on spark2: sudo -n ip link set dev {IF} mtu 1450",
    ]
    bare = plan_fix(mtu_fix(), session.config, wall="fabric-slow").preview_lines()
    assert f"#   on spark2: sudo -n ip link set dev {IF} mtu <net.fabric_mtu before>" in bare
    # the cluster-free form (kb show, triage)
    assert (
        "# if a later step or the check fails: "
        "sudo -n ip link set dev <node.fabric_if> mtu <net.fabric_mtu before>"
    ) in preview_lines(mtu_fix())


def test_the_sudoers_rule_allows_the_undo_and_only_an_mtu_for_the_value() -> None:
    argv = ["ip", "link", "set", "dev", "<node.fabric_if>", "mtu", "<net.fabric_mtu>"]
    assert argv in root_commands(None)
    # the doctor asks a node's sudo with what it reads there now (its MTU)
    now = {"node.fabric_if": "enp1s0f1np1", "net.fabric_mtu": 1480}
    assert ["ip", "link", "set", "dev", "enp1s0f1np1", "mtu", "1480"] in root_commands(None, now)
    line = sudoers_line(argv)
    assert line == "/usr/sbin/ip ^link set dev [A-Za-z0-9_.\\:-]{1\\,15} mtu [1-9][0-9]{2\\,3}$"
    # sudo's regular expressions are POSIX ERE: the value word read as such
    value = re.compile(r"[1-9][0-9]{2,3}")
    assert all(value.fullmatch(v) for v in ("1500", "1480", "9000", "9216"))
    assert not any(value.fullmatch(v) for v in ("90000", "9000 down", "-1", "eth0", ""))


def _wall(fix_yaml: str) -> str:
    return textwrap.dedent(
        """
        id: undo-wall
        title: a wall
        severity: warning
        kind: log
        engines: [any]
        summary: A wall.
        signatures:
          - log: 'undo wall line'
        references: [tests/test_remedy_undo.py]
        fixes:
        """
    ) + textwrap.indent(textwrap.dedent(fix_yaml), "  ")


UNDO_FIX = """
- id: f
  title: a fix
  risk: {risk}
  root: {root}
  actions:
    - type: run
      on: all
      command: ip link set dev {{node.fabric_if}} mtu 9000
      root: true
      undo:
{undo}
"""


@pytest.mark.parametrize(
    ("undo", "risk", "problem"),
    [
        (
            "before: net.fabric_mtu\ncommand: sudo ip link set dev {node.fabric_if} mtu {before}",
            "disruptive",
            "the command calls sudo itself",
        ),
        (
            "before: net.fabric_mtu\ncommand: ip link set dev {node.fabric_if} mtu {before}\n"
            "root: false",
            "disruptive",
            "the command needs root (ip link set): set root: true on the undo",
        ),
        (
            "before: net.fabric_mtu\n"
            "command: ip link set dev {node.fabric_if} mtu {before}; rm -f /tmp/x",
            "destructive",
            "a command run as root must be one program and its arguments",
        ),
        (
            "before: net.mtu\ncommand: ip link set dev {node.fabric_if} mtu {before}",
            "disruptive",
            "'before' is 'net.mtu', not a node fact",
        ),
        (
            "command: ip link set dev {node.fabric_if} mtu {before}",
            "disruptive",
            "'undo' uses {before} but names no 'before' fact to read",
        ),
        (
            "before: net.fabric_mtu\ncommand: ip link set dev {node.fabric_if} mtu {before}\n"
            "after: x",
            "disruptive",
            "'undo' has unknown field(s) after",
        ),
        (
            "before: net.fabric_mtu\ncommand: reboot",
            "disruptive",
            "action 1's undo runs reboot: it must be destructive",
        ),
    ],
)
def test_the_lint_checks_an_undo_like_any_command(
    tmp_path: Path, undo: str, risk: str, problem: str
) -> None:
    from spark_tui.kb.loader import load_dir

    text = UNDO_FIX.format(risk=risk, root="true", undo=textwrap.indent(undo, " " * 8))
    (tmp_path / "undo-wall.yaml").write_text(_wall(text))
    with pytest.raises(InputErrors) as info:
        load_dir(tmp_path)
    assert problem in str(info.value), str(info.value)
    # `kb lint`: the same problem, with the file and line, exit code 2
    r = subprocess.run(
        [sys.executable, "-m", "spark_tui", "kb", "lint", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and problem in r.stdout + r.stderr and "undo-wall.yaml:" in r.stderr


def test_an_undo_run_as_root_makes_the_fix_say_root() -> None:
    """A non-root action whose undo runs as root: the fix must say root: true."""
    text = textwrap.dedent(
        """
        - id: f
          title: a fix
          risk: disruptive
          root: false
          actions:
            - type: run
              command: touch /tmp/marker
              undo:
                command: ip link set dev {node.fabric_if} mtu 1500
                root: true
        """
    )
    with pytest.raises(InputErrors, match="action 1 runs as root: say root: true on the fix"):
        fix_from(text)


def test_an_interrupted_fix_says_how_to_set_each_node_back(session: Session) -> None:
    """Ctrl-C as the ping starts: nothing more runs (no undo after an interrupt), and the
    journal says what would set each node back; after a hard kill (no end record) the next
    start's note says it too."""
    from spark_tui.remedy.journal import unfinished

    world = session.sim.world.nodes
    world["spark1"].fabric_mtu, world["spark2"].fabric_mtu = 1500, 1450

    def progress(p: ActionProgress) -> None:
        if p.status == "running" and "ping" in (p.command or ""):
            raise KeyboardInterrupt

    plan = plan_fix(mtu_fix(), session.config, wall="fabric-slow")
    with pytest.raises(KeyboardInterrupt):
        session.apply(plan, progress=progress, yes=True)
    assert mtus(session) == {"spark1": 9000, "spark2": 9000}
    back1, back2 = (f"sudo -n ip link set dev {IF} mtu {m}" for m in (1500, 1450))
    end = since_start(session)[-1]
    assert end["event"] == "fix-interrupted"
    assert end["not_undone"] == [
        {"node": "spark2", "command": back2},
        {"node": "spark1", "command": back1},
    ]
    assert f"to set the nodes back: spark2: {back2}; spark1: {back1}" in end["message"]
    # a hard kill: the end record never written, the process gone
    path = session.journal.path
    lines = path.read_text().splitlines()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    start = json_record(lines, "fix-start")
    lines[start] = lines[start].replace(f'"pid": {os.getpid()}', f'"pid": {dead.stdout.strip()}')
    path.write_text("\n".join(lines[:-1]) + "\n")
    (run,) = unfinished(session.journal)
    assert f"to set the nodes back as they were before it: spark2: {back2}; spark1: {back1}" in (
        run.describe()
    )


def json_record(lines: list[str], event: str) -> int:
    import json

    return max(i for i, line in enumerate(lines) if json.loads(line)["event"] == event)


def test_up_never_changes_the_fabric_for_a_warning_and_the_fix_is_still_offered() -> None:
    """fabric-slow is a warning (NCCL runs, slower): `up --yes` launches without setting
    MTU 9000 on the nodes (a disruptive root change nobody asked for), and the driver's
    offer — the TUI's one key, asked for — is still that fix."""
    from spark_tui.driver import Driver
    from spark_tui.up import bring_up

    events: list[dict] = []
    with open_cluster(scenario="fabric-slow", speed=240.0) as s:
        bring_up(s, events.append, None, yes=True)
        assert s.sim.world.nodes["spark2"].fabric_mtu == 1500
        offer = Driver(s).offer()
        assert offer is not None and offer.fix is not None
        assert (offer.wall, offer.fix.id) == ("fabric-slow", "fabric-mtu-9000")
    fixes = [e.get("fix") for e in events if e["event"] == "fix"]
    assert "fabric-mtu-9000" not in fixes
    assert [e["event"] for e in events if e["event"] in ("launch", "serving")][-1] == "serving"


def test_up_in_words_says_the_warning_it_left_for_the_user() -> None:
    """`spark-tui up` without --json on fabric-slow: serves, says each launch and how it
    ended in words, and names the warning still active (its fix is the user's to ask)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_tui",
            "up",
            "--demo",
            "fabric-slow",
            "--yes",
            "--speed",
            "240",
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "launch 1 of minimax-m2.7-nvfp4-vllm-tp2" in proc.stdout
    assert "serving: the first request answered at" in proc.stdout
    assert "still active: fabric-slow@spark2" in proc.stdout
    assert "mtu 9000" not in proc.stdout


def test_the_result_groups_the_nodes_set_back_to_the_same_value() -> None:
    from spark_tui.remedy.actions.base import PlannedUndo, UndoDue
    from spark_tui.remedy.undo import said

    def due(node: str, value: int) -> UndoDue:
        undo = PlannedUndo(
            node, "ip link set dev x mtu {before}", True, "net.fabric_mtu", "MTU {before}"
        )
        return UndoDue(0, undo, value)

    # undone last change first; said in the order the changes were made
    undone = [due("spark3", 1450), due("spark2", 1500), due("spark1", 1500)]
    assert said(undone, []) == "spark1 and spark2 set back to MTU 1500; spark3 set back to MTU 1450"
    assert said([], [(due("spark1", 1500), "connection lost")]) == (
        "spark1 NOT set back (connection lost): run 'sudo -n ip link set dev x mtu 1500' there"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="binding /etc/sudoers needs root")
def test_sudo_itself_allows_setting_an_mtu_back_and_nothing_else(tmp_path: Path) -> None:
    """By sudo's own reading of the rule spark-tui proposes: the undo with the MTU a node
    had, yes; another word where the value stands, no."""
    from spark_tui.remedy.sudoers import PATHS, sudoers_rule
    from tests.test_hostile_commands import _sudo_allows

    rule = sudoers_rule(root_commands(), user="nobody")
    ip = [PATHS["ip"], "link", "set", "dev", "enp1s0f1np1", "mtu"]
    assert _sudo_allows(rule, tmp_path, [*ip, "1500"])
    assert _sudo_allows(rule, tmp_path, [*ip, "1480"])
    for value in ("90000", "1500 down", "-1", "1500\n", "eth0"):
        assert not _sudo_allows(rule, tmp_path, [*ip, value]), value
    assert not _sudo_allows(rule, tmp_path, [*ip, "1500", "down"])


def test_a_change_sudo_would_not_let_be_set_back_is_not_made(tmp_path: Path) -> None:
    """Before changing a node, its sudo is asked (`sudo -n -l`, nothing run) whether the undo
    would be allowed: here sudo wants a password, so no node is changed and the fix stops,
    saying why and what to do."""
    from tests.remedy_shims import make_world, run_env
    from tests.test_remedy_fixes import CLUSTER

    world = make_world(tmp_path / "w", CLUSTER, SUDO_NEEDS_PASSWORD="1")
    plan = plan_fix(mtu_fix(), CLUSTER, wall="fabric-slow")
    result = run_fix(
        plan,
        run_env(world.transports),
        yes=True,
        verify_facts=lambda node: {"net.fabric_mtu": 1500},
    )
    assert not result.ok and result.failed_node == "spark1"
    assert "sudo on spark1 would not let spark-tui set it back with " in result.message
    assert "a password is required" in result.message and "nothing changed on spark1" in (
        result.message
    )
    ran = [c for t in world.transports.values() for c in t.commands]
    assert ran == ["sudo -n -l ip link set dev enP7s7 mtu 1500"], ran
