"""The simulated GB10's nvidia-smi (tests/real/gpu/nvidia_smi.py) as the nodes run it."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import IN_CI
from tests.real.conftest import HERE

pytestmark = pytest.mark.real


def test_dmon_prints_once_a_second_with_no_engine() -> None:
    """With no engine process in the node's PID namespace, `dmon` still prints one line a
    second (it used to print as fast as it could: 15 % of a core on every idle node, and a
    flood of lines for the reader)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if IN_CI:
            pytest.fail("the real tier needs root and unshare: .ci/run must provide them")
        pytest.skip("needs root and unshare (a PID namespace of its own, no engine in it)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    res = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable,
         str(HERE / "gpu" / "nvidia_smi.py"), "dmon", "-s", "pu", "-c", "3"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == 3, res.stdout
    assert all(row.split()[4] == "0" for row in rows), res.stdout  # SM 0 %: nothing runs
    assert wall >= 2.9, f"3 lines in {wall:.2f} s"
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu < 1.0, f"{cpu:.2f} CPU-s for 3 lines"
