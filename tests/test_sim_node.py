"""The simulated GB10's physics, driven only through commands (as a real node would be)."""

from __future__ import annotations

import pytest

from spark_tui.nodes.commands import SAMPLE, sample_script, split_sections
from spark_tui.nodes.transport import NodeUnreachable
from spark_tui.sim import build_sim_cluster
from spark_tui.sim.node import DRM_OVERRIDE, REBOOT_S


def meminfo_gib(t, key: str) -> float:
    for line in t.run("cat /proc/meminfo").stdout.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024 / (1 << 30)
    raise AssertionError(key)


@pytest.fixture
def cluster():
    c = build_sim_cluster("healthy", speed=1.0)
    yield c
    c.close()


def test_meminfo_reports_a_gb10(cluster) -> None:
    t = cluster.transports["spark1"]
    total = meminfo_gib(t, "MemTotal")
    assert 121.0 < total < 122.5  # ~127.6 M kB (GB10-FACTS.md)
    # a fresh boot: OS and services take their share, ~114 GiB free (seed 001)
    assert 112.0 < meminfo_gib(t, "MemFree") < 116.0


def test_drop_caches_empties_the_cache_only_as_root() -> None:
    with build_sim_cluster("page-cache-hog", speed=1.0) as c:
        t = c.transports["spark1"]
        assert meminfo_gib(t, "Cached") > 90
        r = t.run("sync; echo 3 > /proc/sys/vm/drop_caches")
        assert r.exit_code != 0 and "Permission denied" in r.stderr
        assert meminfo_gib(t, "Cached") > 90
        r = t.run("sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'")
        assert r.exit_code == 0, r.stderr
        assert meminfo_gib(t, "Cached") < 1
        assert meminfo_gib(t, "MemFree") > 110
        # the other node keeps its cache: nothing happened there
        assert meminfo_gib(c.transports["spark2"], "Cached") > 90


def test_leak_survives_docker_rm_and_clears_on_reboot() -> None:
    with build_sim_cluster("leaked-memory-unbalanced", speed=1.0) as c:
        t = c.transports["spark2"]
        free0 = meminfo_gib(t, "MemAvailable")
        assert free0 < 85  # 33 GiB held by the driver
        t.run("docker rm -f $(docker ps -aq) 2>/dev/null; true")
        t.run("sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'")
        assert meminfo_gib(t, "MemAvailable") == pytest.approx(free0, abs=0.5)
        boot0 = t.run("cat /proc/sys/kernel/random/boot_id").stdout
        assert t.run("sudo -n reboot").exit_code == 0
        c.clock.advance(REBOOT_S + 1)
        assert meminfo_gib(t, "MemAvailable") > 110
        assert t.run("cat /proc/sys/kernel/random/boot_id").stdout != boot0


def test_hard_killed_engine_leaks_and_graceful_stop_does_not() -> None:
    with build_sim_cluster("healthy", speed=1.0) as c:
        t = c.transports["spark1"]
        t.run(
            "docker run -d --name s1 img sh -c 'vllm serve /m --tensor-parallel-size 1 > /tmp/l 2>&1'"
        )
        c.clock.advance(400)  # loaded and serving: the engine holds its memory
        assert meminfo_gib(t, "MemAvailable") < 30
        t.run("docker kill s1")
        leaked = 114 - meminfo_gib(t, "MemAvailable")
        assert 20 < leaked < 40
        t.run(
            "docker run -d --name s2 img sh -c 'vllm serve /m --tensor-parallel-size 1 > /tmp/l 2>&1'"
        )
        before = meminfo_gib(t, "MemAvailable")
        c.clock.advance(400)
        t.run("docker stop s2")
        assert meminfo_gib(t, "MemAvailable") > before - 1


def test_drm_override_halves_cuda_memory_until_moved_aside_and_rebooted() -> None:
    with build_sim_cluster("drm-override", speed=1.0) as c:
        t, node = c.transports["spark1"], c.nodes["spark1"]
        assert t.run(f"ls {DRM_OVERRIDE}").exit_code == 0
        assert node.cuda_total_gib == pytest.approx(62.0)
        assert t.run(f"mv {DRM_OVERRIDE} /tmp/x").exit_code != 0  # not as a user
        r = t.run(f"sudo -n sh -c 'mv -n -- {DRM_OVERRIDE} {DRM_OVERRIDE}.bak'")
        assert r.exit_code == 0, r.stderr
        assert t.run(f"ls {DRM_OVERRIDE}").exit_code == 2
        assert node.cuda_total_gib == pytest.approx(62.0)  # the driver read it at boot
        t.run("sudo -n reboot")
        c.clock.advance(REBOOT_S + 1)
        assert node.cuda_total_gib == pytest.approx(119.67)


def test_reboot_takes_time_and_the_node_is_unreachable_meanwhile(cluster) -> None:
    t = cluster.transports["spark2"]
    assert t.run("reboot").exit_code != 0  # a user cannot
    boot0 = t.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert t.run("sudo -n reboot").exit_code == 0
    cluster.clock.advance(5)
    with pytest.raises(NodeUnreachable):
        t.run("true")
    st = t.state
    assert not st.reachable and st.retrying and "reboot" in st.reason
    cluster.clock.advance(REBOOT_S / 2)
    with pytest.raises(NodeUnreachable):
        t.read_file("/proc/uptime")
    cluster.clock.advance(REBOOT_S)
    assert t.state.reachable
    boot1 = t.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert boot1 != boot0
    uptime = float(t.run("cat /proc/uptime").stdout.split()[0])
    assert uptime < REBOOT_S  # counted from the new boot
    # the other node never went down
    assert cluster.transports["spark1"].run("true").exit_code == 0


def test_sample_script_answers_every_section(cluster) -> None:
    out = cluster.transports["spark1"].run(sample_script(SAMPLE))
    sections = split_sections(out.stdout)
    assert set(sections) == set(SAMPLE)
    rc, gpu = sections["gpu"]
    assert rc == 0 and "NVIDIA GB10" in gpu and "[N/A]" in gpu
    assert sections["drm-override"][0] == 2  # ls of a missing file
    assert sections["meminfo"][1].startswith("MemTotal:")
