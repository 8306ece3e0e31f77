"""`doctor`'s host-kernel check: a node booted into a kernel the knowledge base knows breaks
NCCL over RoCE (eugr/spark-vllm-docker #392: 7.0.0-1019-nvidia, ibv_reg_mr_iova2 ENOMEM;
6.17.0-1032-nvidia works) is a failed check naming the working release and the report, read
over the simulated cluster with `uname -r` as on a real node."""

from __future__ import annotations

from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes.doctor import known_host_breakage, run_doctor
from spark_tui.sim import SteppedClock, build_sim_cluster


def host_kernel_checks(kernels: dict[str, str]) -> dict[str, tuple[str, str]]:
    with build_sim_cluster("healthy", clock=SteppedClock()) as c:
        for name, release in kernels.items():
            c.world.nodes[name].kernel = release  # what the node was booted into
        report = run_doctor(c.config, c.transports, load_knowledge(), c.clock)
    return {ch.node or "": (ch.status, ch.detail) for ch in report.checks if ch.id == "host-kernel"}


def test_the_known_breaking_kernel_fails_on_the_node_that_runs_it() -> None:
    checks = host_kernel_checks({"spark2": "7.0.0-1019-nvidia"})
    assert checks["spark1"][0] == "pass" and "6.17.0-1032-nvidia" in checks["spark1"][1]
    status, detail = checks["spark2"]
    assert status == "fail"
    assert "kernel 7.0.0-1019-nvidia breaks NCCL over RoCE" in detail
    assert "ibv_reg_mr_iova2" in detail and "works: 6.17.0-1032-nvidia" in detail
    assert "https://github.com/eugr/spark-vllm-docker/issues/392" in detail


def test_every_entry_names_a_release_a_fix_and_public_reports() -> None:
    entries = known_host_breakage()
    assert entries
    for e in entries:
        assert e.get("kernel") or e.get("driver")
        assert e.get("breaks") and e.get("fix")
        refs = e.get("references") or []
        assert refs and all(" — https://" in str(r) for r in refs)


def test_a_node_output_that_is_no_release_is_not_trusted() -> None:
    checks = host_kernel_checks({"spark1": "7.0.0-1019-nvidia\x1b[2J; rm -rf /"})
    assert checks["spark1"][0] != "fail"  # not a release: never matched, never echoed raw
    assert "\x1b" not in checks["spark1"][1]
