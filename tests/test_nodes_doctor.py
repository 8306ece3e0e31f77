"""`spark-tui doctor` over two real sshd nodes (shim tools printing real captures)."""
# ruff: noqa: F811  (pytest fixtures imported from tests.sshd_nodes)

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spark_tui.clock import RealClock
from spark_tui.entry import main
from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.doctor import run_doctor
from spark_tui.nodes.model_paths import recipe_model_paths
from tests.sshd_nodes import SshdCluster, sshd_cluster  # noqa: F401
from tests.test_nodes_monitor import RAY_HEAD_PS

FIX = Path(__file__).parent / "fixtures"
LEAKED = (
    (FIX / "gb10" / "meminfo.txt")
    .read_text()
    .replace("MemAvailable:   104857600 kB", "MemAvailable:    60000000 kB")
    .replace("Cached:         93718400 kB", "Cached:          1000000 kB")
    .replace("MemFree:         9845120 kB", "MemFree:        58000000 kB")
)


def checks_of(out: dict) -> dict[tuple[str, str | None], dict]:
    return {(c["id"], c["node"]): c for c in out["checks"]}


def test_doctor_json_over_two_real_nodes(sshd_cluster: SshdCluster, capsys) -> None:
    spark1, spark2 = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    spark1.set_file("meminfo.txt", (FIX / "gb10" / "meminfo.txt").read_text())
    spark2.set_file("meminfo.txt", LEAKED)
    spark2.set_file(
        "docker-ps.jsonl",
        json.dumps(
            {
                "ID": "1",
                "Image": "lmsysorg/sglang:spark",
                "Names": "sglang_old",
                "State": "exited",
                "Status": "Exited (137) 2 hours ago",
            }
        )
        + "\n",
    )
    config = sshd_cluster.write_cluster_yaml()
    assert main(["doctor", "--json", "--config", str(config)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"nodes", "checks"}
    assert [n["name"] for n in out["nodes"]] == ["spark1", "spark2"]
    n1 = out["nodes"][0]
    assert set(n1) == {"name", "reachable", "memory", "gpus"} and n1["reachable"] is True
    assert n1["memory"] == {
        "total_bytes": 127607176 * 1024,
        "available_bytes": 104857600 * 1024,
        "cached_bytes": (93718400 + 412344) * 1024,
    }
    assert n1["gpus"][0]["name"] == "NVIDIA GB10" and n1["gpus"][0]["memory_total_bytes"] is None
    assert all(set(c) == {"id", "node", "status", "detail"} for c in out["checks"])
    assert all(c["status"] in ("pass", "warn", "fail", "skip") for c in out["checks"])
    c = checks_of(out)
    assert c[("reachable", "spark1")]["status"] == c[("reachable", "spark2")]["status"] == "pass"
    # the head really ssh'es to the worker (real ssh, real sshd) with BatchMode
    assert c[("ssh-from-head", "spark2")]["status"] == "pass"
    assert any(
        line.startswith("ssh -o BatchMode=yes -o ConnectTimeout=5 spark2 true")
        for line in spark1.commands()
    )
    assert c[("fabric-link", "spark1")]["detail"].startswith("enp1s0f0np0 UP, MTU 9000")
    assert c[("fabric-mtu", None)]["status"] == "pass"
    assert c[("fabric-ping", "spark2")]["status"] == "pass"
    assert "ping -c1 -W1 10.10.10.2" in spark1.commands()
    assert c[("leftovers", "spark2")]["status"] == "pass"  # an exited container is no leftover
    assert c[("drm-override-halves-memory", "spark1")]["status"] == "pass"
    # the knowledge base's walls, through the rules engine
    assert c[("page-cache-hog", "spark1")]["status"] == "warn"
    assert "memory.cached_gib >= 20 (is 89.8)" in c[("page-cache-hog", "spark1")]["detail"]
    assert c[("unified-memory-leak", "spark2")]["status"] == "fail"
    assert c[("unified-memory-leak", "spark1")]["status"] == "pass"
    assert c[("node-memory-asymmetry", None)]["status"] == "warn"
    assert c[("sudo", "spark1")]["status"] == "pass"
    # read-only: nothing but reads reached the nodes
    for node in (spark1, spark2):
        for line in node.commands():
            assert line.split()[0] in {
                "nvidia-smi",
                "docker",
                "ip",
                "ibdev2netdev",
                "dmesg",
                "ps",  # who runs Ray and the engine (read-only)
                "cat",
                "sudo",
                "ping",
                "ssh",
            }, line
            assert not line.startswith("docker") or line.split()[1] in {
                "ps",
                "exec",
                "image",
                "inspect",  # RestartCount and restart policy (read-only)
            }


def test_doctor_leftovers_sudo_and_a_dead_node(sshd_cluster: SshdCluster, capsys) -> None:
    spark1, spark2 = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    spark1.set_file(
        "docker-ps.jsonl",
        json.dumps(
            {
                "ID": "2",
                "Image": "vllm/vllm-openai:v0.13.0",
                "Names": "ray-head",
                "State": "running",
                "Status": "Up 2 hours",
            }
        )
        + "\n",
    )
    spark1.set_file("ray-status.txt", (FIX / "gb10" / "ray-status.txt").read_text())
    spark1.set_file("ps.txt", RAY_HEAD_PS)  # Ray's head runs in ray-head
    spark1.set_file("query-apps.csv", (FIX / "real" / "h200" / "query-apps-busy.csv").read_text())
    spark1.set_file("sudo-needs-password", "")
    spark2.stop()
    config = sshd_cluster.write_cluster_yaml()
    assert main(["doctor", "--config", str(config)]) == 0  # human output
    text = capsys.readouterr().out
    assert "spark1 (head, spark1)" in text and "1 of 2 nodes reached" in text
    assert main(["doctor", "--json", "--config", str(config)]) == 0
    c = checks_of(json.loads(capsys.readouterr().out))
    left = c[("leftovers", "spark1")]
    assert left["status"] == "warn"
    assert "ray-head" in left["detail"]
    # one round, read-only: Ray's head that ps shows is asked how many nodes it holds
    assert "Ray (2 nodes alive)" in left["detail"]
    assert "docker exec ray-head ray status" in spark1.commands()
    assert "python3 (pid 1302)" in left["detail"]
    assert (
        c[("sudo", "spark1")]["status"] == "warn" and "NOPASSWD" in c[("sudo", "spark1")]["detail"]
    )
    assert c[("reachable", "spark2")]["status"] == "fail"
    assert "nothing answers" in c[("reachable", "spark2")]["detail"]
    # the head's ssh would only time out too, and its advice (ssh-copy-id) would mislead
    assert c[("ssh-from-head", "spark2")] == {
        "id": "ssh-from-head",
        "node": "spark2",
        "status": "skip",
        "detail": "spark2 is unreachable",
    }
    spark1.stop()
    assert main(["doctor", "--json", "--config", str(config)]) == 1  # no node reached


def test_doctor_bad_config_exits_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("nodes:\n  - name: a\n    host: h\n    role: head\n    colour: red\n")
    assert main(["doctor", "--config", str(bad)]) == 2
    assert f"{bad}:5: unknown field 'colour'" in capsys.readouterr().err


def test_hostile_values_are_quoted_never_executed(sshd_cluster: SshdCluster, tmp_path) -> None:
    marker = tmp_path / "pwned"
    hostile = f"$(touch {marker})"
    spark1 = sshd_cluster.node("spark1")
    # a worker whose host came from somewhere unvalidated, and a hostile model path
    cluster = ClusterConfig(
        (
            NodeConfig("spark1", "spark1", "head"),
            NodeConfig("evil", f"x;touch {marker};{hostile}", "worker", user=f"u`touch {marker}`"),
        )
    )
    transports = {
        "spark1": sshd_cluster.transport("spark1"),
        "evil": sshd_cluster.transport("spark2"),
    }
    try:
        report = run_doctor(
            cluster,
            transports,
            load_knowledge(),
            RealClock(),
            model_paths=[f"/models/{hostile}", f"~/{hostile}`touch {marker}`"],
            image=f"img:{hostile}",
        )
    finally:
        for t in transports.values():
            t.close()
    assert not marker.exists()
    checks = {(c.id, c.node): c for c in report.checks}
    assert checks[("ssh-from-head", "evil")].status == "fail"
    assert checks[("model-files", None)].status == "fail"
    ssh_line = next(line for line in spark1.commands() if line.startswith("ssh "))
    assert f"u`touch {marker}`@x;touch {marker};{hostile}" in ssh_line  # one word, literally


def test_model_paths_from_recipe_volumes() -> None:
    vols = ["$HOME/.cache/huggingface:/root/.cache/huggingface", "/home/milo/models:/models:ro"]
    assert recipe_model_paths("MiniMaxAI/MiniMax-M2.7", vols) == [
        "~/.cache/huggingface/hub/models--MiniMaxAI--MiniMax-M2.7",  # huggingface-cli's layout
        "~/.cache/huggingface/MiniMaxAI/MiniMax-M2.7",  # a plain directory (--local-dir)
    ]
    assert recipe_model_paths("/models/M2.7-NVFP4", vols) == ["/home/milo/models/M2.7-NVFP4"]
    assert recipe_model_paths("/elsewhere/m", vols) == ["/elsewhere/m"]
    assert recipe_model_paths("not-an-hf-id", vols) == []


@pytest.mark.parametrize("missing", ["nvidia-smi", "docker"])
def test_doctor_with_a_missing_tool(sshd_cluster: SshdCluster, missing: str) -> None:
    spark2 = sshd_cluster.node("spark2")
    spark2.remove_tool(missing)
    spark2.set_file("docker-ps.jsonl", "")
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    try:
        report = run_doctor(
            cluster, transports, load_knowledge(), RealClock(), image="vllm-node:latest"
        )
    finally:
        for t in transports.values():
            t.close()
    checks = {(c.id, c.node): c for c in report.checks}
    assert checks[("reachable", "spark2")].status == "pass"
    if missing == "nvidia-smi":
        # a GPU node with no GPU readable is a failure, and says why
        gpu = checks[("gpu", "spark2")]
        assert gpu.status == "fail" and "nvidia-smi: not available" in gpu.detail
    else:  # this machine's real docker has no daemon: docker's own words
        assert "docker" in report.states["spark2"].unavailable["containers"]
        # the image check names the real cause (here the real docker without its daemon),
        # not "image missing"
        image = checks[("container-image", None)].detail
        assert "spark2: docker's daemon cannot be reached" in image, image
        assert "missing on spark2" not in image, image
    assert report.states["spark2"].memory is not None


def test_same_image_and_model_files_on_every_node(sshd_cluster: SshdCluster, tmp_path) -> None:
    model = tmp_path / "models" / "M2.7"
    model.mkdir(parents=True)
    (model / "model-00001-of-00002.safetensors").write_bytes(b"\0" * 4096)
    (model / "config.json").write_text("{}")
    spark1, spark2 = sshd_cluster.node("spark1"), sshd_cluster.node("spark2")
    spark1.set_file("image-id.txt", "sha256:1111\n")
    spark2.set_file("image-id.txt", "sha256:2222\n")
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    try:
        report = run_doctor(
            cluster,
            transports,
            load_knowledge(),
            RealClock(),
            image="vllm-node:latest",
            model_paths=[str(model)],
        )
        checks = {(c.id, c.node): c for c in report.checks}
        assert checks[("container-image", None)].status == "warn"
        assert "sha256:1111" in checks[("container-image", None)].detail
        assert checks[("model-files", None)].status == "pass"
        spark2.data_dir.joinpath("image-id.txt").unlink()
        report = run_doctor(
            cluster, transports, load_knowledge(), RealClock(), image="vllm-node:latest"
        )
        checks = {(c.id, c.node): c for c in report.checks}
        assert checks[("container-image", None)].status == "fail"
        assert "missing on spark2" in checks[("container-image", None)].detail
    finally:
        for t in transports.values():
            t.close()
    assert "docker image inspect --format {{.Id}} vllm-node:latest" in spark1.commands()


def test_a_refused_host_key_from_the_head_is_not_a_password_problem(
    sshd_cluster: SshdCluster,
) -> None:
    """The head's own ssh (real OpenSSH) knows no host key of spark2: doctor says so, and
    does not send the user to ssh-copy-id."""
    spark1 = sshd_cluster.node("spark1")
    config = spark1.client_home / ".ssh" / "config"
    real_ssh = shutil.which("ssh") or "/usr/bin/ssh"
    spark1._write_shim(
        "ssh",
        f"exec {real_ssh} -F {config} -o UserKnownHostsFile=/dev/null "
        '-o StrictHostKeyChecking=yes "$@"',
    )
    cluster = sshd_cluster.cluster_config()
    transports = {n.name: sshd_cluster.transport(n.name) for n in cluster.nodes}
    try:
        report = run_doctor(cluster, transports, load_knowledge(), RealClock())
    finally:
        for t in transports.values():
            t.close()
    check = {(c.id, c.node): c for c in report.checks}[("ssh-from-head", "spark2")]
    assert check.status == "fail", check
    assert "refuses" in check.detail and "host key" in check.detail, check.detail
    assert "password" not in check.detail and "ssh-copy-id" not in check.detail, check.detail


def test_a_two_node_recipe_on_a_one_node_cluster_is_flagged(tmp_path: Path, capsys) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "nodes:\n  - name: this-box\n    host: local\nrecipe: tiny-llama-cpu-vllm-2node\n"
    )
    main(["doctor", "--json", "--config", str(cluster)])
    c = checks_of(json.loads(capsys.readouterr().out))
    nodes = c[("recipe-nodes", None)]
    assert nodes["status"] == "fail", nodes
    assert "needs 2 nodes; the cluster has 1" in nodes["detail"], nodes
