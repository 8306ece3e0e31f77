"""What is read once per launch is read once: the serving container's NCCL libraries
(`docker exec … find / -xdev …`) run one time per container, also when the read fails,
and again only for a new container — counted on a real sshd node's shims."""

from __future__ import annotations

import json

import pytest

from spark_tui.entry import main
from tests.sshd_nodes import SshdCluster
from tests.sshd_nodes import sshd_cluster as sshd_cluster


def _container(cid: str) -> str:
    return (
        json.dumps(
            {
                "ID": cid,
                "Image": "vllm/vllm-openai:v0.13.0",
                "Names": "vllm_node",
                "State": "running",
                "Status": "Up 1 minute",
            }
        )
        + "\n"
    )


def _finds(node) -> int:
    return sum(1 for c in node.commands() if c.startswith("docker exec") and "find /" in c)


def _rounds(node) -> int:
    return sum(1 for c in node.commands() if c == "cat /proc/meminfo")


@pytest.mark.sshd
@pytest.mark.slow
def test_a_failed_nccl_read_is_not_repeated_every_round(
    sshd_cluster: SshdCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    spark1 = sshd_cluster.node("spark1")
    spark1.set_file("docker-ps.jsonl", _container("ab12"))  # `docker exec` fails in the shim
    config = sshd_cluster.write_cluster_yaml()
    watch = ["watch", "--json", "--config", str(config), "--period", "0.3", "--duration", "4"]
    assert main(watch) == 0
    capsys.readouterr()
    assert _rounds(spark1) >= 5
    assert _finds(spark1) == 1, [c for c in spark1.commands() if c.startswith("docker exec")]


@pytest.mark.sshd
@pytest.mark.slow
def test_a_serving_node_costs_one_session_a_round(
    sshd_cluster: SshdCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    spark1 = sshd_cluster.node("spark1")
    spark1.set_file("docker-ps.jsonl", _container("ab12"))
    config = sshd_cluster.write_cluster_yaml()
    watch = ["watch", "--json", "--config", str(config), "--period", "0.3", "--duration", "4"]
    assert main(watch) == 0
    capsys.readouterr()
    rounds = sum(1 for c in spark1.commands() if c == "cat /proc/meminfo")
    sessions = spark1.sshd_log().count("Starting session")
    # one script a round; beside it only the long-lived streams (dmon, the container's
    # log) and the once-per-launch reads (the NCCL libraries)
    assert rounds >= 5
    assert sessions <= rounds + 3, (sessions, rounds)
