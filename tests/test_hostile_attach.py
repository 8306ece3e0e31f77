"""Attack: attach trusts any local user's process (issue 22, attack 1).

An unprivileged user's process calls itself `vllm serve` and swaps its stdout file for a
symlink named `… (deleted)` pointing at a root-only file; another names its stdout file so
that a newline in it forges a cgroup line naming a container; `up --yes` with no recipe
would adopt such a command line. spark-tui attaches only to an engine of root or of the
user it is on the node as, started by its entry point, reads an engine's output through its
open descriptor (never by a name), reads cgroup lines before any name and anchored, and
follows only a container `docker ps` lists. The processes here are real (a real user made
by useradd, real /proc, real `ps`) on real sshd nodes."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui import shell
from spark_tui.entry import main
from spark_tui.events import LogLines
from spark_tui.monitor import engine_log_command
from spark_tui.nodes import commands
from spark_tui.nodes.parsers.processes import (
    parse_engine_argv,
    parse_engine_output,
    parse_processes,
    starts_engine,
)
from spark_tui.nodes.state import Container, NodeState
from spark_tui.session import open_cluster
from tests.conftest import IN_CI, require_tool
from tests.sshd_nodes import start_sshd_cluster

USER = "sparkhostile"
SECRET = "ROOT-ONLY-SECRET-7f3a"
VICTIM_ID = "abcdef012345" + "6789abcdef" * 5 + "01"  # 64 hex digits

# a stand-in engine (the real one needs a GPU): prints a line, then makes its stdout file
# a symlink named "<file> (deleted)" to the file it wants read, and keeps printing
FAKE_ENGINE = """\
import os, sys, time
out = os.readlink("/proc/self/fd/1")
print("INFO Starting vLLM API server", flush=True)
os.unlink(out)
os.symlink(sys.argv[-1], out + " (deleted)")
while True:
    print("INFO real line from the engine's own output", flush=True)
    time.sleep(0.3)
"""


@pytest.fixture
def hostile_user() -> str:
    """A real unprivileged user (made with useradd; the suite runs as root in CI)."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("the hostile attach tests need root (useradd) under CI")
        pytest.skip("needs root to make an unprivileged user")
    require_tool("useradd")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER], check=True
        )
    return USER


@pytest.fixture
def one_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    require_tool("sshd")
    cluster = start_sshd_cluster(tmp_path / "sshd", names=("spark1",))
    monkeypatch.setenv("HOME", str(cluster.home))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "root-only.txt"
    path.write_text(f"{SECRET}\n" * 5)
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def fake_engine(user: str | None, secret: Path, out_name: str = "serve.log") -> Iterator[int]:
    """Run FAKE_ENGINE as `user` (None: root) from a directory it owns, its stdout a file
    there; yields its pid."""
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        script = work / "vllm"
        script.write_text(FAKE_ENGINE)
        uid = pwd.getpwnam(user).pw_uid if user else 0
        os.chown(work, uid, -1)
        os.chmod(work, 0o755)
        out = work / out_name
        out.parent.mkdir(parents=True, exist_ok=True)  # a name's directories are names too
        os.chown(out.parent, uid, -1)
        python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        argv = [python, str(script), "serve", "evil/model", "--port", "18777"]
        argv += ["--trust-remote-code", str(secret)]
        cmd = f"exec {shell.join(argv)} > {shell.quote(str(out))} 2>&1"
        proc = subprocess.Popen(["/bin/sh", "-c", cmd], user=user, cwd=work, start_new_session=True)
        deadline = time.monotonic() + 10
        planted = Path(f"{out} (deleted)")
        while time.monotonic() < deadline and not planted.is_symlink():
            time.sleep(0.05)
        assert planted.is_symlink(), "the stand-in engine did not start"
        try:
            yield proc.pid
        finally:
            os.killpg(proc.pid, 9)
            proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ps_line(pid: int) -> str:
    """What `ps -ww -eo pid=,uid=,args=` prints for this process (the real ps)."""
    return subprocess.run(
        ["ps", "-ww", "-o", "pid=,uid=,args=", "-p", str(pid)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _watch(config: Path, seconds: float = 6.0) -> tuple[list[LogLines], object]:
    events: list = []
    with open_cluster(config) as session:
        session.start(events.append)
        time.sleep(seconds)
        state = session.states()["spark1"]
    return [e for e in events if isinstance(e, LogLines)], state


def test_another_users_process_calling_itself_vllm_is_not_attached_nor_adopted(
    one_node, hostile_user: str, secret_file: Path, capsys
) -> None:
    node = one_node.node("spark1")
    with fake_engine(hostile_user, secret_file) as pid:
        node.set_file("ps.txt", _ps_line(pid))
        assert "vllm serve evil/model" in _ps_line(pid)
        config = one_node.write_cluster_yaml()
        batches, state = _watch(config)
        assert state.engine is None  # not root's, not ours: not an engine of this cluster
        assert not any(b.source.startswith("engine:") for b in batches)
        assert not any(SECRET in line for b in batches for line in b.lines)
        # `up --yes` with no recipe: nothing to adopt, nothing launched
        assert main(["up", "--config", str(config), "--yes", "--json"]) != 0
        out = capsys.readouterr()
        assert "no engine running to adopt" in out.out + out.err, out  # the stuck event
        assert "--trust-remote-code" not in out.out + out.err
        assert not any(c.startswith("docker run") for c in node.commands())


def test_a_root_engines_deleted_stdout_is_read_through_its_descriptor_not_the_planted_name(
    one_node, secret_file: Path
) -> None:
    """Variant: the same trick by an engine we do trust. Its output is still followed (its
    own lines), through /proc/PID/fd/1: the planted `… (deleted)` symlink is never read."""
    node = one_node.node("spark1")
    with fake_engine(None, secret_file) as pid:
        node.set_file("ps.txt", _ps_line(pid))
        batches, state = _watch(one_node.write_cluster_yaml())
    assert state.engine is not None and state.engine.pid == pid
    mine = [line for b in batches if b.source == f"engine:{pid}" for line in b.lines]
    assert any("real line from the engine's own output" in line for line in mine), batches
    assert not any(SECRET in line for b in batches for line in b.lines)


def test_a_newline_in_the_stdout_file_name_forges_no_cgroup_line(
    one_node, secret_file: Path
) -> None:
    node = one_node.node("spark1")
    node.set_file(
        "docker-ps.jsonl",
        '{"ID":"abcdef012345","Names":"victim","Image":"ubuntu:24.04","State":"running",'
        '"Status":"Up 1 minute"}\n',
    )
    # directories named "log\n0::" and "system.slice": the fd's target then holds the
    # line "0::/system.slice/docker-<id>.scope", the old parser's container line
    forged = f"log\n0::/system.slice/docker-{VICTIM_ID}.scope"
    with fake_engine(None, secret_file, out_name=forged) as pid:
        node.set_file("ps.txt", _ps_line(pid))
        t = one_node.transport("spark1")
        try:
            res = t.run(shell.fill(commands.ENGINE_OUTPUT, {"pid": pid}))
        finally:
            t.close()
        out = parse_engine_output(res.stdout)
        assert out.container_id is None and out.unit is None  # the kernel's line: none
        assert out.target is not None and out.target.endswith(" (deleted)")
        victim = Container("abcdef012345", "victim", "i", "running", "Up")
        st = NodeState("spark1", 0.0, containers=(victim,))
        st.engine = parse_processes(f"0\n{_ps_line(pid)}").engine
        assert st.engine is not None
        assert engine_log_command(out, st) == f"tail -n 200 -F /proc/{pid}/fd/1"
        batches, _state = _watch(one_node.write_cluster_yaml(), seconds=5)
    assert not any("victim" in c for c in node.commands() if c.startswith("docker exec"))
    assert not any(SECRET in line for b in batches for line in b.lines)


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m"], True),
        (["vllm", "serve", "m"], True),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], True),
        (["python3", "-m", "sglang.launch_server", "--model-path", "m"], True),
        (["/bin/sh", "/opt/x/vllm", "serve", "m"], True),
        (["sleep", "1000", "vllm", "serve", "m"], False),
        (["bash", "-c", "vllm serve m"], False),
        (["python3", "-c", "import time", "vllm", "serve", "m"], False),
        (["tail", "-F", "/x/vllm", "serve"], False),
        (["docker", "run", "img", "vllm", "serve", "m"], False),
        (["env", "A=1", "vllm", "serve", "m"], False),
    ],
)
def test_an_engine_is_its_program_not_a_word_in_its_argv(argv: list[str], engine: bool) -> None:
    assert starts_engine(argv) is engine


def test_only_root_or_our_own_users_processes_are_believed() -> None:
    ps = (
        "1000\n"
        "  4242  1001 /usr/bin/python3 /usr/local/bin/vllm serve evil --port 9\n"
        "  4243     0 /usr/bin/python3 /usr/local/bin/vllm serve root-model --port 8000\n"
    )
    got = parse_processes(ps).engine
    assert got is not None and got.pid == 4243
    mine = parse_processes("1001\n" + ps.split("\n", 1)[1]).engine
    assert mine is not None and mine.pid == 4242  # we are that user: it is ours
    assert parse_processes("1000\n  4242  1001 vllm serve x\n").engine is None


# ---------------------------------------------------------------- this stop's variants

SLEEPER = "import sys, time\nprint('INFO up', flush=True)\ntime.sleep(120)\n"


@contextlib.contextmanager
def engine_with_argv(user: str | None, words: list[str]) -> Iterator[int]:
    """A real process run as `user` (None: root) whose argv is python3 SCRIPT WORDS…; its
    script is named vllm. Yields its pid once it has printed its first line."""
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        (work / "vllm").write_text(SLEEPER)
        os.chmod(work, 0o755)
        python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        out = work / "out.log"
        with out.open("w") as f:
            if user:
                os.chown(out, pwd.getpwnam(user).pw_uid, -1)
            proc = subprocess.Popen(
                [python, str(work / "vllm"), *words],
                user=user,
                stdout=f,
                stderr=subprocess.STDOUT,
                cwd=work,
                start_new_session=True,
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "INFO up" not in out.read_text():
            time.sleep(0.05)
        try:
            yield proc.pid
        finally:
            proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_newline_in_another_users_argv_forges_no_root_engine_line(
    one_node, hostile_user: str, capsys
) -> None:
    """The user's argv holds a newline and what a root engine's ps line looks like; the real
    ps prints it on one line (procps turns the newline into a space), and the line is
    theirs: nothing is attached, nothing adopted."""
    node = one_node.node("spark1")
    forged = "\n  4243     0 /usr/bin/python3 /usr/local/bin/vllm serve evil/model --port 18777"
    with engine_with_argv(hostile_user, ["serve", "evil/model", "--port", "18777", forged]) as pid:
        line = _ps_line(pid)  # the real ps's line for it (the machine's others left out)
        assert line.count("\n") == 1 and line.split()[1] != "0", line
        node.set_file("ps.txt", line)
        assert parse_processes(f"0\n{line}").engine is None
        config = one_node.write_cluster_yaml()
        batches, state = _watch(config, seconds=4)
        assert state.engine is None
        assert not any(b.source.startswith("engine:") for b in batches)
        assert main(["up", "--config", str(config), "--yes", "--json"]) != 0
        out = capsys.readouterr()
        assert "no engine running to adopt" in out.out + out.err, out
        assert "evil/model" not in out.out + out.err
    assert not any(c.startswith("docker run") for c in node.commands())


def test_adopting_a_root_engine_with_shell_and_docker_words_in_its_argv(
    one_node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A root engine (root's, so it is adopted) whose argv holds command substitutions, a
    `;`, backquotes, a quote, and docker's own flags (`--privileged`, `-v /:/host`, `--pid
    host`). Adopted, the argv is shown whole on one line, saved as the engine's words, and
    the command that would relaunch it — run by a real shell with a `docker` that records
    its argv — hands every one of them to the engine as one word: nothing runs, none of
    them becomes an option of docker."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    pwn = tmp_path / "pwned"
    hostile = [
        f"$(touch${{IFS}}{pwn}-1)",
        f";touch${{IFS}}{pwn}-2",
        f"`touch${{IFS}}{pwn}-3`",
        "--served-model-name",
        "it's my model",  # one word with spaces: ps shows three
        "--api-server-args",
        "a\nimage: evil/pwn",  # a line break: the shown comment must not end early
        "-v",
        "/:/host",
        "--privileged",
        "--pid",
        "host",
    ]
    words = ["serve", "evil/model", "--port", "18777", *hostile]
    node = one_node.node("spark1")
    with engine_with_argv(None, words) as pid:
        node.set_file("ps.txt", _ps_line(pid))
        config = one_node.write_cluster_yaml()
        config.write_text(
            config.read_text().replace(
                "role: head", "role: head\n    fabric_ip: 10.9.9.1\n    fabric_if: enp1s0f0np0"
            )
        )
        assert main(["recipes", "adopt", "--config", str(config), "--yes"]) == 0
        shown = capsys.readouterr().out
    saved = list((tmp_path / "config" / "spark-tui" / "recipes").glob("adopted-*.yaml"))
    assert len(saved) == 1, shown
    text = saved[0].read_text()
    argv_lines = [ln for ln in text.splitlines() if "evil/model" in ln and ln.startswith("#")]
    assert len(argv_lines) == 1, text
    shown = argv_lines[0].replace("\\n", "\n")  # the line break shown as its escape
    assert all(shlex_in(w, shown) for w in words), text
    assert not [ln for ln in text.splitlines() if ln.startswith("image:") and "pwn" in ln]
    assert f"(pid {pid}" in text
    rid = saved[0].stem
    assert main(["recipes", "render", rid, "--config", str(config), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    runs = [s["command"] for s in plan["steps"] if s["command"].startswith("docker run")]
    assert runs, plan
    fake = tmp_path / "bin"
    fake.mkdir()
    record = tmp_path / "docker-argv"
    (fake / "docker").write_text(
        f'#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > {record}\n'
    )
    (fake / "docker").chmod(0o755)
    subprocess.run(
        ["/bin/sh", "-c", runs[0]], env={"PATH": f"{fake}:/usr/bin:/bin"}, check=True, timeout=30
    )
    got = [a.decode() for a in record.read_bytes().split(b"\0")[:-1]]
    image_at = got.index("unknown-image")  # docker's options end at the image
    assert "/:/host" not in got[:image_at] and "--pid" not in got[:image_at], got
    assert got[image_at + 1 : image_at + 3] == ["sh", "-c"], got
    # what the container's shell then runs: the same string, run by a real sh, with a
    # `vllm` that records its argv (its log file moved into the test's directory)
    inner = got[image_at + 3].replace("/tmp/vllm-serve.log", str(tmp_path / "serve.log"))
    (fake / "vllm").write_text(
        f'#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > {record}\n'
    )
    (fake / "vllm").chmod(0o755)
    subprocess.run(
        ["/bin/sh", "-c", inner], env={"PATH": f"{fake}:/usr/bin:/bin"}, check=True, timeout=30
    )
    engine_argv = [a.decode() for a in record.read_bytes().split(b"\0")[:-1]]
    assert engine_argv == words, engine_argv  # each word whole, as it ran before
    assert not list(tmp_path.glob("pwned*")), "a word of the argv ran as a command"


def shlex_in(word: str, line: str) -> bool:
    import shlex

    return shlex.quote(word) in line


def test_the_argv_adopted_is_the_kernels_and_only_for_a_process_we_believe(
    one_node, hostile_user: str
) -> None:
    """ENGINE_ARGV on a real node: root's engine gives its words as they ran (a space or a
    line break inside a word kept); another user's process (a pid reused between ps and the
    adoption) gives [] — nothing is adopted from it."""
    words = ["serve", "m", "--served-model-name", "my model", "--x", "a\nb"]
    t = one_node.transport("spark1")
    try:
        with engine_with_argv(None, words) as pid:
            res = t.run(shell.fill(commands.ENGINE_ARGV, {"pid": pid}))
            got = parse_engine_argv(res.stdout)
            assert got is not None and got[2:] == words, got
        with engine_with_argv(hostile_user, words) as pid:
            res = t.run(shell.fill(commands.ENGINE_ARGV, {"pid": pid}))
            assert parse_engine_argv(res.stdout) == []
        # a node that does not answer in that form: the words ps showed stand
        assert parse_engine_argv("") is None
    finally:
        t.close()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/tmp/vllm-serve.log", "docker exec victim tail -n 200 -F /tmp/vllm-serve.log"),
        # the file inside the container deleted and a symlink planted at "… (deleted)"
        ("/tmp/vllm-serve.log (deleted)", "docker logs -f --tail 200 victim"),
        ("/tmp/x\n/etc/shadow", "docker logs -f --tail 200 victim"),
        ("/tmp/$(reboot).log", "docker exec victim tail -n 200 -F '/tmp/$(reboot).log'"),
        ("pipe:[123456]", "docker logs -f --tail 200 victim"),
    ],
    ids=["file", "deleted", "newline", "substitution", "pipe"],
)
def test_an_engine_in_a_container_is_followed_by_a_name_only_when_it_is_a_plain_file(
    target: str, expected: str
) -> None:
    """This stop's variants of the "(deleted)" attack inside a container (all held): the
    container's file is followed by its name only when it is a live plain path (quoted);
    a deleted one, a name with a line break or not a file at all: the container's output."""
    cid = VICTIM_ID
    text = (
        f"0::/system.slice/docker-{cid}.scope\n@@spark-tui exe\n/usr/bin/python3.12\n"
        f"@@spark-tui fd1\n{target}\n"
    )
    out = parse_engine_output(text)
    assert out.container_id == cid
    victim = Container(cid[:12], "victim", "vllm/vllm-openai", "running", "Up 1 minute")
    st = NodeState("spark1", 0.0, containers=(victim,))
    st.engine = parse_processes(
        "0\n  77     0 python3 -m vllm.entrypoints.openai.api_server\n"
    ).engine
    assert engine_log_command(out, st) == expected
