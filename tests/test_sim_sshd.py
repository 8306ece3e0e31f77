"""A simulated node behind real OpenSSH sshd: paramiko (SSHTransport) → sshd → ForceCommand
(spark_tui.sim.remote_shell) → unix socket → the SimCluster in this process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spark_tui.sim import build_sim_cluster
from spark_tui.sim.server import SimServer
from tests.sshd_nodes import start_sshd_cluster


@pytest.mark.sshd
def test_simulated_node_through_real_sshd_and_paramiko(tmp_path: Path) -> None:
    sim = build_sim_cluster("page-cache-hog", speed=50.0)
    sock = str(tmp_path / "sim.sock")
    server = SimServer(sim, sock).start()
    cluster = start_sshd_cluster(tmp_path / "sshd", names=("spark1",))
    try:
        node = cluster.node("spark1")
        with (node.dir / "sshd_config").open("a") as fh:
            fh.write(
                f"ForceCommand {sys.executable} -m spark_tui.sim.remote_shell --socket {sock} --node spark1\n"
            )
        node.restart()
        t = cluster.transport("spark1")
        try:
            r = t.run("grep -c . /proc/meminfo; cat /proc/meminfo | grep Cached; exit 3")
            assert r.exit_code == 3
            cached_kb = int(r.stdout.splitlines()[1].split()[1])
            assert cached_kb > 90 * (1 << 20)  # the scenario's page cache, read through SSH
            r = t.run("sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'")
            assert r.exit_code == 0, r.stderr
            assert sim.nodes["spark1"].memory().cached < 1  # the command changed the node
            assert t.run("nosuchtool").exit_code == 127
            assert t.run("cat", input=b"piped\n").stdout == "piped\n"
            with t.stream("nvidia-smi dmon -s pu") as s:
                it = iter(s)
                assert next(it).startswith("# gpu") and next(it).startswith("# Idx")
                assert next(it).split()[0] == "0"
        finally:
            t.close()
    finally:
        cluster.stop()
        server.close()
        sim.close()


def test_sim_server_process_and_remote_shell_without_sshd(tmp_path: Path) -> None:
    import os
    import subprocess
    import time

    sock = str(tmp_path / "s.sock")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spark_tui.sim.server",
            "--socket",
            sock,
            "--scenario",
            "drm-override",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(sock).exists() and time.monotonic() < deadline:
            time.sleep(0.05)

        def remote(command: str, node: str = "spark2") -> subprocess.CompletedProcess:
            env = {**os.environ, "SSH_ORIGINAL_COMMAND": command}
            return subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "spark_tui.sim.remote_shell",
                    "--socket",
                    sock,
                    "--node",
                    node,
                ],
                env=env,
                input=b"",
                capture_output=True,
                timeout=60,
            )

        r = remote("ls /etc/modprobe.d/zz-nvidia-drm-override.conf && hostname")
        assert r.returncode == 0 and r.stdout.decode().splitlines()[-1] == "spark2"
        r = remote("cat /nope")
        assert r.returncode == 1 and b"No such file" in r.stderr
        r = remote("sudo -n reboot && echo asked")
        assert r.returncode == 0
        time.sleep(0.2)
        r = remote("true")
        assert r.returncode == 255 and b"rebooting" in r.stderr  # the node is down
        assert remote("true", node="spark1").returncode == 0
    finally:
        server.terminate()
        server.wait(timeout=10)
