"""The sh subset of the simulated nodes: quoting, lists, pipes, redirections, errors."""

from __future__ import annotations

import pytest

from spark_tui import shell
from spark_tui.nodes import commands
from spark_tui.sim import build_sim_cluster


@pytest.fixture
def t():
    c = build_sim_cluster("healthy", speed=1.0)
    yield c.transports["spark1"]
    c.close()


def test_lists_and_exit_codes(t) -> None:
    assert t.run("false && echo no || echo yes").stdout == "yes\n"
    assert t.run('true; echo "rc $?"').stdout == "rc 0\n"
    assert t.run('ls /nope; echo "rc $?"').stdout.endswith("rc 2\n")
    assert t.run("exit-nothing").exit_code == 127


def test_unknown_command_is_127_like_sh(t) -> None:
    r = t.run("frobnicate --now")
    assert r.exit_code == 127 and "command not found" in r.stderr


def test_quoting_from_spark_tui_shell_round_trips(t) -> None:
    hostile = "$(reboot); `reboot` 'x' \"y\" \\ z"
    r = t.run(f"echo {shell.quote(hostile)}")
    assert r.stdout == hostile + "\n"
    assert t.run("cat /proc/uptime").exit_code == 0  # still up: nothing ran


def test_export_vars_and_substitution(t) -> None:
    assert t.run('export A=1 B=two; echo "$A-${B}"').stdout == "1-two\n"
    assert t.run("X=5 sh -c 'echo $X'").stdout == "5\n"
    assert t.run("echo $(echo inner)").stdout == "inner\n"


def test_pipes_into_grep_tail_head(t) -> None:
    assert t.run("cat /proc/meminfo | grep -E 'MemTotal|MemFree' | head -n 1").stdout.startswith(
        "MemTotal"
    )
    assert t.run("cat /proc/meminfo | tail -n 2 | wc -l").stdout == "2\n"
    assert t.run("cat /proc/meminfo | grep -q Nope").exit_code == 1


def test_redirections(t) -> None:
    assert t.run("ls /nope 2>/dev/null").stderr == ""
    r = t.run("ls /nope 2>&1")
    assert "No such file" in r.stdout and r.stderr == ""
    assert t.run("echo hi > /tmp/f; cat /tmp/f").stdout == "hi\n"
    assert t.run("echo x > /etc/forbidden").exit_code == 2


def test_every_probe_command_answers(t) -> None:
    for name, cmd in {**commands.SAMPLE, **commands.SLOW}.items():
        r = t.run(cmd)
        assert r.exit_code != 127, (name, r.stderr)
    r = t.run(commands.sample_script(commands.SAMPLE))
    assert all(rc != 127 for rc, _ in commands.split_sections(r.stdout).values())


def test_ssh_and_ping_reach_other_nodes(t) -> None:
    assert t.run("ssh -o BatchMode=yes spark2 true").exit_code == 0
    assert t.run("ping -c1 -W1 10.10.10.2").exit_code == 0
    assert t.run("ping -c1 -W1 10.10.10.9").exit_code == 1
    assert t.run("ssh -o BatchMode=yes spark2 hostname").stdout == "spark2\n"


def test_docker_lifecycle_and_ps_json(t) -> None:
    import json

    assert t.run("docker run -d --name c1 --label spark-tui=1 img sleep infinity").exit_code == 0
    rows = [json.loads(x) for x in t.run(commands.SAMPLE["containers"]).stdout.splitlines()]
    assert rows[0]["Names"] == "c1" and rows[0]["State"] == "running"
    assert t.run("docker run -d --name c1 img sleep infinity").exit_code == 125  # name in use
    assert t.run("docker stop $(docker ps -q --filter label=spark-tui)").exit_code == 0
    assert "Exited" in t.run("docker ps -a --format '{{.Status}}'").stdout
    assert t.run("docker inspect -f '{{.RestartCount}}' c1").stdout == "0\n"
    assert t.run("docker rm c1").exit_code == 0
    assert t.run("docker logs c1").exit_code == 1


def test_nvidia_smi_formats_are_gb10(t) -> None:
    apps = t.run(commands.SAMPLE["gpu-apps"]).stdout
    assert apps.splitlines()[0] == "pid, process_name, used_gpu_memory [MiB]"
    table = t.run("nvidia-smi").stdout
    assert "NVIDIA GB10" in table and "Not Supported" in table
    dmon = t.run("nvidia-smi dmon -s pu -c 2").stdout.splitlines()
    assert dmon[0].startswith("# gpu") and len(dmon) == 4
    assert dmon[2].split()[5] == "0"  # mem % is 0 on GB10 whatever the load


def test_an_assignment_takes_its_substitution_whole(t) -> None:
    """sh does not split the value of an assignment: `ids=$(docker ps -aq)` with two containers
    (the sampler's restarts section) keeps both ids, and runs no command named after one."""
    assert t.run('x=$(echo a b); echo "$x"').stdout == "a b\n"
    t.run("docker run -d --name c1 img sleep infinity; docker run -d --name c2 img sleep infinity")
    r = t.run(commands.SAMPLE["restarts"])
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    assert r.stdout.split() == ["/c1", "0", "no", "/c2", "0", "no"]


def test_a_ping_that_may_not_fragment_follows_both_ends_mtu() -> None:
    """`ping -M do -s 8972 PEER` (fabric-mtu-9000's check): refused here when this node's
    fabric MTU is smaller (iputils' "local error: message too long"), lost when the peer's
    is; through only when both take 9000. A plain ping is not affected."""
    c = build_sim_cluster("healthy", speed=1.0)
    try:
        t = c.transports["spark1"]
        one, two = c.world.nodes["spark1"], c.world.nodes["spark2"]
        big = f"ping -M do -s 8972 -c 1 -W 3 {two.fabric_ip}"
        one.fabric_mtu, two.fabric_mtu = 9000, 9000
        assert t.run(big).exit_code == 0
        one.fabric_mtu = 1500
        r = t.run(big)
        assert r.exit_code == 1 and "message too long, mtu=1500" in r.stderr
        one.fabric_mtu, two.fabric_mtu = 9000, 1500
        r = t.run(big)
        assert r.exit_code == 1 and "100% packet loss" in r.stdout
        assert t.run(f"ping -c 1 {two.fabric_ip}").exit_code == 0
    finally:
        c.close()


def test_exec_replaces_the_shell(t) -> None:
    """`exec CMD`: nothing after it runs in that shell, which ends with CMD's status."""
    assert t.run("sh -c 'exec echo a; echo b'; echo rc $?").stdout == "a\nrc 0\n"
    assert t.run("sh -c 'exec false; true'; echo rc $?").stdout == "rc 1\n"
    assert t.run("sh -c 'exec echo to-file > /tmp/x; echo b'; cat /tmp/x").stdout == "to-file\n"


@pytest.mark.parametrize(
    ("script", "waited", "code"),
    [
        # the shell is PID 1 and the engine its child: SIGTERM does nothing, docker waits out
        # -t and kills both (measured on the real tier: 30.9 s, exit 137, no shutdown line)
        ("vllm serve /m > /tmp/serve.log 2>&1", True, "137"),
        # the engine replaced the shell: it gets the SIGTERM and stops at once (real: 1.8 s)
        ("exec vllm serve /m > /tmp/serve.log 2>&1", False, "143"),
    ],
)
def test_docker_stop_signals_the_main_process(script: str, waited: bool, code: str) -> None:
    c = build_sim_cluster("healthy", speed=600.0)
    try:
        t = c.transports["spark1"]
        assert t.run(f"docker run -d --name e img sh -c {shell.quote(script)}").exit_code == 0
        assert "vllm serve" in t.run("ps -eo args").stdout
        t0 = c.clock.now()
        assert t.run("docker stop -t 30 e").exit_code == 0
        took = c.clock.now() - t0
        assert (took >= 30) if waited else (took < 5), took
        assert t.run("docker inspect -f '{{.State.ExitCode}}' e").stdout == code + "\n"
        assert "vllm serve" not in t.run("ps -eo args").stdout
    finally:
        c.close()


def test_docker_version_names_the_daemon_and_the_client_apart(t) -> None:
    """`docker --version` is the client binary; the node's Docker Engine is the server's."""
    assert t.run("docker --version").stdout.startswith("Docker version ")
    assert t.run("docker version --format '{{.Server.Version}}'").stdout == "28.3.3\n"
