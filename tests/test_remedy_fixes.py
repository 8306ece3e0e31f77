"""Fixes as typed actions, run for real through LocalTransport with shim tools.

Preview == run byte for byte; dry runs and refused confirmations run nothing;
read-only refuses; one fix at a time; failures and interruptions leave a whole,
readable journal that says which nodes got what; verify is checked and journaled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spark_tui import paths, policy
from spark_tui.entry import main
from spark_tui.kb.loader import parse_wall
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.recipes.loader import load_recipes
from spark_tui.remedy.actions import REGISTRY
from spark_tui.remedy.fixes import ReadOnlyRefused, plan_fix, run_fix
from spark_tui.remedy.journal import FixAlreadyRunning, FixLock, JournalUnwritable, unfinished
from spark_tui.remedy.render import BOOT_ID_COMMAND, STACK_UP
from spark_tui.state import StateDir
from spark_tui.yamlfile import parse_yaml
from tests.conftest import ROOT
from tests.remedy_shims import journal, make_world, revisions, run_env

CLUSTER = ClusterConfig(
    nodes=(
        NodeConfig("spark1", "local", "head", fabric_if="enP7s7", fabric_ip="10.10.10.1"),
        NodeConfig("spark2", "local", "worker", fabric_if="enp1s0f1np1", fabric_ip="10.10.10.2"),
    ),
    recipe="minimax-m2.7-mxfp4-vllm-tp2",
    source="test",
)


def fix_from(yaml_fix: str, wall_id: str = "test-wall") -> Fix:
    """A Fix parsed by the real knowledge-base loader from a wall's YAML."""
    text = textwrap.dedent(
        f"""
        id: {wall_id}
        title: test wall
        severity: error
        kind: log
        engines: [any]
        summary: A test wall. It has one fix.
        signatures:
          - log: 'test wall line'
        references: [tests/test_remedy_fixes.py]
        fixes:
        """
    ) + textwrap.indent(textwrap.dedent(yaml_fix), "  ")
    return parse_wall(parse_yaml(text, "test.yaml"), "test.yaml").fixes[0]


RUN_FIX = """
- id: set-fabric
  title: Tell each node its fabric interface
  risk: safe
  root: false
  actions:
    - type: run
      on: all
      command: echo {node.fabric_if} {node.fabric_ip} {head.fabric_ip} > /dev/null
"""


def recipe():
    return load_recipes().get("minimax-m2.7-mxfp4-vllm-tp2")


def test_every_action_type_renders_with_real_values() -> None:
    actions = {
        "run": "command: 'ip link show {node.fabric_if}'\n      on: workers",
        "patch-recipe": "target: serve\n      set_args: {--max-num-seqs: 64}\n      unset_env: [OMP_NUM_THREADS]",
        "restart-ray": "args: {--object-store-memory: 1073741824}\n      env: {RAY_memory_monitor_refresh_ms: '0'}",
        "reboot": "on: seen",
        "move-aside": "path: /etc/modprobe.d/zz-nvidia-drm-override.conf\n      on: all",
        "switch-recipe": "to: minimax-m2.7-nvfp4-vllm-tp2",
        "stop-stack": "on: all",
        "relaunch": "clean: true",
        "collect-evidence": "items: [log-tail, py-spy, readings, kernel-log-previous-boot, pstore, nvidia-bug-report, nccl-libraries]\n      on: head",
        "verify-model-copies": "on: all",
    }
    assert set(actions) == set(REGISTRY)
    body = "\n".join(f"    - type: {t}\n      {p}" for t, p in actions.items())
    fix = fix_from(
        f"- id: all\n  title: every action\n  risk: destructive\n  root: true\n  actions:\n{body}\n"
    )
    plan = plan_fix(
        fix, CLUSTER, recipe(), seen="spark2", stamp="S1", recipes=load_recipes().recipes
    )
    by_type = {a.type: a for a in plan.actions}
    assert by_type["run"].commands[0].command == "ip link show enp1s0f1np1"
    assert by_type["patch-recipe"].diff.count("+    --max-num-seqs: 64") == 1
    assert "-    OMP_NUM_THREADS: '8'" in by_type["patch-recipe"].diff
    assert [c.node for c in by_type["reboot"].commands] == ["spark2"]
    assert by_type["reboot"].commands[0].command == "sudo -n reboot"
    mv = by_type["move-aside"].commands[0].command
    assert mv == (
        "sudo -n mv -n -- /etc/modprobe.d/zz-nvidia-drm-override.conf "
        "/etc/modprobe.d/zz-nvidia-drm-override.conf.spark-tui-backup-S1"
    )
    ray = by_type["restart-ray"].launch
    assert ray is not None and [s.id for s in ray.steps][-1] == "wait-ray"
    assert any("--object-store-memory=1073741824" in s.command for s in ray.steps)
    assert by_type["switch-recipe"].switch_to == "minimax-m2.7-nvfp4-vllm-tp2"
    # the relaunch after the patches and the switch launches the switched-to recipe
    relaunch = by_type["relaunch"].launch
    assert relaunch is not None and relaunch.recipe.id == "minimax-m2.7-nvfp4-vllm-tp2"
    assert len(by_type["collect-evidence"].commands) == 7
    # every node reads its copy; the node where the wall was seen is compared last
    copies = by_type["verify-model-copies"]
    assert [c.node for c in copies.commands][-1] == "spark2"
    assert all("sha256sum" in c.command for c in copies.commands)
    text = "\n".join(plan.preview_lines())
    assert "<node." not in text and "{node." not in text
    for action in plan.actions:
        for c in action.commands:
            assert c.command in text


def test_preview_equals_run_byte_for_byte(tmp_path: Path) -> None:
    victim = tmp_path / "zz-override.conf"
    victim.write_text("options nvidia-drm modeset=1\n")
    fix = fix_from(
        f"""
        - id: mixed
          title: Run, move aside, stop the stack
          risk: destructive
          root: true
          actions:
            - type: run
              on: all
              command: echo {{node.fabric_if}} {{node.name}} {{head.fabric_ip}}
            - type: move-aside
              path: {victim}
              on: seen
            - type: stop-stack
              on: all
        """
    )
    world = make_world(tmp_path / "w", CLUSTER)
    plan = plan_fix(fix, CLUSTER, recipe(), seen="spark1", stamp="S2")
    preview = plan.preview_lines()
    result = run_fix(plan, run_env(world.transports), yes=True)
    assert result.ok, result.message
    for node, transport in world.transports.items():
        # besides the plan: the read-only check that the stack is down (stop-stack's verify)
        ran = [c for c in transport.commands if c not in (BOOT_ID_COMMAND, STACK_UP)]
        planned = [c.command for c in plan.commands() if c.node == node]
        assert ran == planned  # the same strings, byte for byte
        assert all(c in preview for c in ran)
    assert not victim.exists()
    assert (tmp_path / "zz-override.conf.spark-tui-backup-S2").read_text().startswith("options")
    assert [(v.node, v.holds) for v in result.verify] == [("spark1", True), ("spark2", True)]
    # each action once per node (stop-stack runs two commands per node: still one action)
    assert result.done == {
        "spark1": ["run", "move-aside", "stop-stack"],
        "spark2": ["run", "stop-stack"],
    }


def test_dry_run_executes_and_journals_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    _user_wall(RUN_FIX)
    config = _cluster_file(tmp_path)
    monkeypatch.setenv("PATH", world.env("spark1")["PATH"])
    for key in ("NODE", "NODE_STATE", "SHIM_SHARED", "SHIM_LOG"):
        monkeypatch.setenv(key, world.env("spark1")[key])
    assert main(["fix", "test-wall", "--dry-run", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "echo enP7s7 10.10.10.1 10.10.10.1 > /dev/null" in out
    assert "dry run: nothing was executed" in out
    assert not (paths.state_dir() / "journal.jsonl").exists()
    assert world.calls() == []


def test_cli_fix_runs_verifies_and_journals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    _user_wall(RUN_FIX + "  verify: [memory.total_gib > 0]\n")
    config = _cluster_file(tmp_path)
    env = world.env("spark1")
    for key in ("PATH", "NODE", "NODE_STATE", "SHIM_SHARED", "SHIM_LOG"):
        monkeypatch.setenv(key, env[key])
    assert main(["fix", "test-wall", "--yes", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "verify [spark1] memory.total_gib > 0: holds" in out
    entries = journal().entries()
    events = [e["event"] for e in entries]
    assert events == ["fix-start", "started", "finished", "verify", "fix-end"]
    started, finished = entries[1], entries[2]
    assert started["cmd"] == finished["cmd"] and started["node"] == "spark1"
    assert started["command"] == "echo enP7s7 10.10.10.1 10.10.10.1 > /dev/null"
    assert finished["outcome"] == "exit" and finished["exit_code"] == 0


def test_refused_confirmation_executes_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    fix = fix_from(RUN_FIX.replace("risk: safe", "risk: disruptive"))
    asked: list[tuple[str, tuple[str, ...]]] = []

    def refuse(prompt: str, nodes: tuple[str, ...]) -> bool:
        asked.append((prompt, nodes))
        return False

    result = run_fix(plan_fix(fix, CLUSTER), run_env(world.transports), confirm=refuse)
    assert not result.ok and "nothing ran" in result.message
    assert asked and asked[0][1] == ("spark1", "spark2")
    assert "spark1" in asked[0][0] and "spark2" in asked[0][0]
    assert world.calls() == [] and all(not t.commands for t in world.transports.values())
    assert journal().entries() == []


def test_read_only_refuses_every_action(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    policy.set_read_only(True)
    with pytest.raises(ReadOnlyRefused, match="read-only"):
        run_fix(plan_fix(fix_from(RUN_FIX), CLUSTER), run_env(world.transports), yes=True)
    policy.set_read_only(False)  # never loosens: still refused
    with pytest.raises(ReadOnlyRefused, match="read-only"):
        run_fix(plan_fix(fix_from(RUN_FIX), CLUSTER), run_env(world.transports), yes=True)
    assert all(not t.commands for t in world.transports.values())
    assert journal().entries() == []


def test_a_fix_already_running_cannot_start_again(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    with FixLock(StateDir.real().lock_path) as held:
        held.acquire("fix other (test)")
        with pytest.raises(FixAlreadyRunning, match="fix other"):
            run_fix(plan_fix(fix_from(RUN_FIX), CLUSTER), run_env(world.transports), yes=True)
    assert all(not t.commands for t in world.transports.values())
    # released: it runs now
    assert run_fix(plan_fix(fix_from(RUN_FIX), CLUSTER), run_env(world.transports), yes=True).ok


def test_failure_names_node_and_leaves_the_journal_whole(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER, SUDO_NEEDS_PASSWORD="1")
    fix = fix_from(
        """
        - id: drop
          title: Drop caches
          risk: safe
          root: true
          actions:
            - type: run
              on: all
              command: sysctl -w vm.drop_caches=3
              root: true
        """
    )
    result = run_fix(plan_fix(fix, CLUSTER), run_env(world.transports), yes=True)
    assert not result.ok and result.failed_node == "spark1"
    assert "run failed on spark1" in result.message and "sudo needs a password" in result.message
    entries = journal().entries()
    assert [e["event"] for e in entries] == ["fix-start", "started", "finished", "fix-end"]
    assert entries[1]["cmd"] == entries[2]["cmd"] and entries[1]["node"] == "spark1"
    assert entries[2]["outcome"] == "exit" and entries[2]["exit_code"] == 1
    assert "password is required" in entries[2]["output_tail"]
    assert entries[3]["status"] == "failed"
    assert world.transports["spark2"].commands == []  # stopped at the first failure


def test_interrupted_fix_says_which_nodes_got_it(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)

    def interrupt_on_spark2(ev) -> None:
        if ev.node == "spark2" and ev.status == "running":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_fix(
            plan_fix(fix_from(RUN_FIX), CLUSTER),
            run_env(world.transports),
            yes=True,
            emit=interrupt_on_spark2,
        )
    entries = journal().entries()
    events = [e["event"] for e in entries]
    assert events == ["fix-start", "started", "finished", "fix-interrupted"]
    assert entries[-1]["done"] == {"spark1": ["run"]}
    assert world.transports["spark2"].commands == []  # interrupted before it started there
    # a hard crash (no interrupt record, a torn last line) is still readable
    path = StateDir.real().journal_path
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + '\n{"event": "fini')
    found = unfinished(journal())
    assert len(found) == 1 and found[0].done == {"spark1": ["run"]} and found[0].cut == ()
    assert "finished on spark1 (run); not reached: spark2" in found[0].describe()


def test_verify_runs_on_fresh_facts_and_is_journaled(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    fix = fix_from(RUN_FIX + "  verify: [memory.cached_gib < 5]\n")
    cached = {"spark1": 2.0, "spark2": 30.0}
    result = run_fix(
        plan_fix(fix, CLUSTER),
        run_env(world.transports),
        yes=True,
        verify_facts=lambda node: {"memory.cached_gib": cached[node]},
    )
    assert [(v.node, v.holds) for v in result.verify] == [("spark1", True), ("spark2", False)]
    assert result.verified is False and "does not hold" in result.summary()
    assert "memory.cached_gib < 5 on spark2: NO" in result.summary()
    verifies = [e for e in journal().entries() if e["event"] == "verify"]
    assert [(e["node"], e["holds"]) for e in verifies] == [("spark1", True), ("spark2", False)]


def test_patch_recipe_makes_a_revision_and_verifies_recipe_facts(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    fix = fix_from(
        """
        - id: lower-util
          title: Lower --gpu-memory-utilization
          risk: safe
          root: false
          actions:
            - type: patch-recipe
              target: serve
              set_args: {--gpu-memory-utilization: 0.78}
          verify: ["recipe.serve_args.--gpu-memory-utilization <= 0.8"]
        """
    )
    result = run_fix(plan_fix(fix, CLUSTER, recipe()), run_env(world.transports), yes=True)
    assert result.ok and result.verified is True
    assert result.recipe is not None and result.recipe.revision == 1
    assert load_recipes().get(recipe().id).serve.args["--gpu-memory-utilization"] == 0.78
    revs = revisions().revisions(recipe().id)
    assert [r.number for r in revs] == [0, 1]
    assert "+    --gpu-memory-utilization: 0.78" in revs[1].diff
    assert world.calls() == []  # a recipe patch touches no node


def test_reboot_waits_for_the_node_with_a_countdown(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    fix = fix_from(
        """
        - id: reboot
          title: Reboot the node
          risk: destructive
          root: true
          actions:
            - type: reboot
              on: seen
        """
    )
    events = []
    result = run_fix(
        plan_fix(fix, CLUSTER, seen="spark2"),
        run_env(world.transports),
        confirm=lambda prompt, nodes: nodes == ("spark2",),
        emit=events.append,
    )
    assert result.ok, result.message
    assert world.calls("spark2") == ["sudo -n reboot"] and world.calls("spark1") == []
    countdown = [e.detail for e in events if e.step == "reboot" and "come back" in e.detail]
    assert countdown and countdown[0] == "waiting for spark2 to come back: 900 s"
    back = [e for e in journal().entries() if e["event"] == "reboot-back"]
    assert [e["node"] for e in back] == ["spark2"] and back[0]["boot_id"].startswith("boot-")
    assert result.rebooted == {"spark2"}
    assert [(v.node, v.condition, v.holds) for v in result.verify] == [
        ("spark2", "boot id changed", True)
    ]


def test_restart_ray_patches_and_restarts_every_node(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    fix = fix_from(
        """
        - id: cap-object-store
          title: Cap Ray's object store
          risk: disruptive
          root: false
          actions:
            - type: restart-ray
              args: {--object-store-memory: 1073741824}
          verify: ["recipe.ray.args.--object-store-memory <= 2147483648"]
        """
    )
    result = run_fix(plan_fix(fix, CLUSTER, recipe()), run_env(world.transports), yes=True)
    assert result.ok, result.message
    assert result.verified is True
    worker = [c for c in world.calls("spark2") if c.startswith("docker run")]
    assert worker and "--object-store-memory=1073741824" in worker[0]
    assert revisions().current(recipe().id).ray.args["--object-store-memory"] == 1073741824


def _user_wall(fix_yaml: str) -> None:
    d = paths.user_knowledge_dir()
    d.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(
        """
        id: test-wall
        title: test wall
        severity: error
        kind: log
        engines: [any]
        summary: A test wall. It has one fix.
        signatures:
          - log: 'test wall line'
        references: [tests/test_remedy_fixes.py]
        fixes:
        """
    ) + textwrap.indent(textwrap.dedent(fix_yaml), "  ")
    (d / "test-wall.yaml").write_text(text)


def _cluster_file(tmp_path: Path) -> Path:
    p = tmp_path / "cluster.yaml"
    p.write_text(
        textwrap.dedent(
            """
            nodes:
              - name: spark1
                host: local
                role: head
                fabric_if: enP7s7
                fabric_ip: 10.10.10.1
            """
        )
    )
    assert os.path.exists(p)
    return p


def test_every_fix_of_the_knowledge_base_plans_or_says_why() -> None:
    """Each built-in fix renders per node for a working and a known-broken recipe, or
    refuses with an InputError that says what is missing (never another exception)."""
    from spark_tui.errors import InputError
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.recipes.clusters import simulated_cluster

    book = load_recipes()
    cluster = simulated_cluster(2)
    planned = 0
    for wall in load_knowledge():
        for fix in wall.fixes:
            for rid in ("minimax-m2.7-mxfp4-vllm-tp2", "minimax-m2.7-fp8-sglang-tp2"):
                try:
                    plan = plan_fix(
                        fix,
                        cluster,
                        book.get(rid),
                        seen="spark2",
                        wall=wall.id,
                        recipes=book.recipes,
                        stamp="S",
                    )
                except InputError as exc:
                    assert str(exc)
                    continue
                commands = [c.command for c in plan.commands()]
                commands += [s.command for a in plan.actions if a.launch for s in a.launch.steps]
                text = "\n".join(plan.preview_lines())
                for command in commands:  # recipe diffs keep their {templates}; commands never
                    assert "{node." not in command and "<node." not in command
                    assert command in text
                planned += 1
    assert planned > 0


# ---- the write-ahead journal: nothing runs unrecorded -----------------------------------


def test_started_is_on_disk_before_the_command_runs(tmp_path: Path) -> None:
    """The command reads the journal: its own `started` record is already there."""
    path = StateDir.real().journal_path
    world = make_world(tmp_path / "w", CLUSTER)
    fix = fix_from(
        f"""
        - id: read-journal
          title: Read the journal from the node
          risk: safe
          root: false
          actions:
            - type: run
              on: all
              command: 'tail -n 1 {path}'
        """
    )
    result = run_fix(plan_fix(fix, CLUSTER), run_env(world.transports), yes=True)
    assert result.ok, result.message
    finished = [e for e in journal().entries() if e["event"] == "finished"]
    assert [e["node"] for e in finished] == ["spark1", "spark2"]
    for e in finished:
        seen = json.loads(e["output_tail"])  # the last record when the command ran
        assert seen["event"] == "started" and seen["cmd"] == e["cmd"]
        assert seen["node"] == e["node"] and seen["command"] == e["command"]


def test_a_journal_that_cannot_be_written_stops_the_fix_before_anything_runs(
    tmp_path: Path,
) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    state = StateDir(tmp_path / "state")
    state.journal_path.mkdir(parents=True)  # a directory where the journal file should be
    plan = plan_fix(fix_from(RUN_FIX), CLUSTER)
    with pytest.raises(JournalUnwritable, match="nothing was run"):
        run_fix(plan, run_env(world.transports, state=state), yes=True)
    assert world.calls() == [] and all(not t.commands for t in world.transports.values())
    # the lock was let go: once the journal can be written, the fix runs
    state.journal_path.rmdir()
    assert run_fix(plan, run_env(world.transports, state=state), yes=True).ok
    assert [len(t.commands) for t in world.transports.values()] == [1, 1]


FULL_DISK_SCRIPT = """
import json, resource, sys
from pathlib import Path
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.journal import JournalUnwritable
from spark_tui.state import StateDir
from tests.remedy_shims import make_world, run_env
from tests.test_remedy_fixes import CLUSTER, fix_from

out = Path(sys.argv[1])
fix = fix_from(sys.argv[2])
world = make_world(out / "w", CLUSTER)
journal = StateDir.real().journal_path

def full_disk(ev):
    # the disk fills up just before the first command: room for 10 more bytes
    if ev.status == "running":
        size = journal.stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))

try:
    run_fix(plan_fix(fix, CLUSTER), run_env(world.transports), yes=True, emit=full_disk)
except JournalUnwritable as exc:
    print(json.dumps({"refused": str(exc), "ran": [c for t in world.transports.values() for c in t.commands]}))
"""


def test_a_full_disk_mid_fix_stops_it_before_the_command_and_keeps_the_journal_whole(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    fix_yaml = textwrap.dedent(
        f"""
        - id: touch
          title: Touch a file
          risk: disruptive
          root: false
          actions:
            - type: run
              on: all
              command: 'touch {marker}-{{node.name}}'
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK_SCRIPT, str(tmp_path), fix_yaml],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "cannot write the journal" in got["refused"] and "nothing was run" in got["refused"]
    assert got["ran"] == [] and not list(tmp_path.glob("ran-*"))
    # the torn record was cut off again: every line of the journal is whole
    lines = StateDir.real().journal_path.read_text().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["fix-start"]


KILLED_SCRIPT = """
import sys
from spark_tui.remedy.fixes import plan_fix, run_fix
from tests.remedy_shims import make_world, run_env
from pathlib import Path
from tests.test_remedy_fixes import CLUSTER, fix_from

world = make_world(Path(sys.argv[1]) / "w", CLUSTER)
run_fix(plan_fix(fix_from(sys.argv[2]), CLUSTER), run_env(world.transports), yes=True)
"""


def test_a_run_in_progress_is_not_interrupted_and_a_killed_one_names_the_cut_command(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    started = tmp_path / "started"
    fix_yaml = textwrap.dedent(
        f"""
        - id: slow
          title: Slow on spark2
          risk: disruptive
          root: false
          actions:
            - type: run
              on: all
              command: 'touch {started}-{{node.name}}; [ {{node.name}} = spark1 ] || while [ ! -e {go} ]; do sleep 0.1; done'
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_SCRIPT, str(tmp_path), fix_yaml],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{started}-spark2").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        # another process runs it now: not interrupted, and no second change may start
        assert unfinished(journal()) == []
        world = make_world(tmp_path / "mine", CLUSTER)
        with pytest.raises(FixAlreadyRunning, match="slow"):
            run_fix(plan_fix(fix_from(RUN_FIX), CLUSTER), run_env(world.transports), yes=True)
        proc.kill()  # a hard kill: no record of the end
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        go.touch()  # the orphaned command on "spark2" ends by itself
    (run,) = unfinished(journal())
    assert run.fix == "slow" and run.done == {"spark1": ["run"]}
    assert [n for n, _c in run.cut] == ["spark2"] and run.cut[0][1].startswith("touch ")
    text = run.describe()
    assert "finished on spark1 (run)" in text
    assert "started and never finished: spark2: touch" in text and "may have half-run" in text
    assert "not reached" not in text
    # the kernel dropped the dead process's lock: the next change runs
    assert run_fix(plan_fix(fix_from(RUN_FIX), CLUSTER), run_env(world.transports), yes=True).ok
