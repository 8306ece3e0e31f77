"""The walls beyond the seeds (issue 8): their probes' parsers on real-format output and
fuzzed, the stall detector driven through the one rules engine, the facts the checks read.

Everything goes through the same engines as the first walls: a NodeState's facts() into
RuleEngine over the knowledge base; no code here knows a wall by name except to assert.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.parsers.containers import parse_restarts
from spark_tui.nodes.parsers.links import parse_default_route, parse_roce_up
from spark_tui.nodes.parsers.metrics import parse_metrics
from spark_tui.nodes.parsers.nccl import distinct_builds, parse_nccl_libraries
from spark_tui.nodes.parsers.serving import ServingTracker
from spark_tui.nodes.rules import RuleEngine
from spark_tui.nodes.sampler import read_sections
from spark_tui.nodes.state import EngineMetrics, GpuReading, NodeState, ServingState

from .conftest import TESTS, require_tool

FIX = TESTS / "fixtures"
LATE = FIX / "late"
KB = load_knowledge(use_user=False)


def text(name: str) -> str:
    return (LATE / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- parsers


def test_vllm_metrics_running_waiting_tokens() -> None:
    m = parse_metrics(text("vllm-metrics-wedged.txt"))
    assert isinstance(m, EngineMetrics)
    assert (m.requests_running, m.requests_waiting, m.generation_tokens_total) == (
        2.0,
        0.0,
        184311.0,
    )


def test_sglang_metrics_names_and_exponent_counters() -> None:
    m = parse_metrics(text("sglang-metrics-docs.txt"))
    assert isinstance(m, EngineMetrics)
    assert m.generation_tokens_total == 7.557572e06
    assert m.requests_running == 28.0 and m.requests_waiting == 0.0


def test_sglang_tp_ranks_are_not_added_twice_but_vllm_engines_are() -> None:
    sg = parse_metrics(
        'sglang:num_running_reqs{tp_rank="0",model_name="m"} 3\n'
        'sglang:num_running_reqs{tp_rank="1",model_name="m"} 3\n'
    )
    vl = parse_metrics(
        'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 2\n'
    )
    assert isinstance(sg, EngineMetrics) and sg.requests_running == 3
    assert isinstance(vl, EngineMetrics) and vl.requests_running == 5


def test_metrics_without_counters_or_a_refused_curl_is_unparseable() -> None:
    assert isinstance(parse_metrics(""), Unparseable)
    assert isinstance(parse_metrics("# HELP vllm:x\nvllm:kv_cache_usage_perc 0.3\n"), Unparseable)


def test_docker_inspect_restarts_and_policies() -> None:
    r = parse_restarts(text("docker-inspect-restarts.txt"))
    assert r == {
        "vllm_node": (35, "unless-stopped"),
        "ray-head": (0, "no"),
        "open-webui": (2, "always"),
    }
    assert parse_restarts("/c 0 ") == {"c": (0, "no")}  # docker prints "" for no policy
    assert isinstance(parse_restarts("Cannot connect to the Docker daemon at unix://"), Unparseable)


def test_default_route_interface() -> None:
    assert parse_default_route(text("ip-route-default.txt")) == "wlP9s9"
    assert parse_default_route("") is None


def test_roce_devices_up_from_real_gb10_ibdev2netdev() -> None:
    up = parse_roce_up((FIX / "gb10" / "ibdev2netdev.txt").read_text())
    assert up == ("rocep1s0f0",)


def test_nccl_libraries_two_builds() -> None:
    libs = parse_nccl_libraries(text("nccl-libraries-two-builds.txt"))
    assert not isinstance(libs, Unparseable) and len(libs) == 2
    assert distinct_builds(libs) == 2
    assert libs[1].path.endswith("nvidia/nccl/lib/libnccl.so.2") and libs[1].size == 261928192


def test_the_real_nccl_command_line_reads_path_size_and_hash(tmp_path: Path) -> None:
    """The exact command spark-tui sends into the container, run by a real find over two
    builds (the container's `/` pointed at a temp dir): identical files are one build."""
    require_tool("sha256sum")
    for sub, content in (("os", b"A" * 100), ("wheel", b"B" * 120), ("copy", b"A" * 100)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "libnccl.so.2").write_bytes(content)
    argv = shlex.split(commands.NCCL_LIBRARIES.replace("{container}", "c"))
    assert argv[:4] == ["docker", "exec", "c", "find"]
    argv = argv[3:]
    argv[1] = str(tmp_path)  # find / → find TMP
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    libs = parse_nccl_libraries(out)
    assert not isinstance(libs, Unparseable) and len(libs) == 3
    assert distinct_builds(libs) == 2
    assert {lib.size for lib in libs} == {100, 120}
    # LD_PRELOAD of one of them: the engine loads that build only
    assert distinct_builds(libs, preload=str(tmp_path / "os" / "libnccl.so.2")) == 1


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_late_parsers_never_raise(blob: str) -> None:
    for parse in (parse_metrics, parse_restarts, parse_default_route, parse_nccl_libraries):
        parse(blob)
    parse_roce_up(blob)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([*sorted(commands.SAMPLE), "metrics", "roce", "speeds"]),
            st.integers(-1, 255),
            st.text(max_size=200),
        ),
        max_size=8,
    )
)
def test_fuzz_round_with_the_new_sections_never_raises(sections) -> None:
    outputs = {name: (rc, body) for name, rc, body in sections}
    state = read_sections(NodeConfig("n1", "h", role="head"), 0.0, outputs)
    state.facts()


def test_round_with_new_sections_gives_the_facts() -> None:
    outputs = {
        "containers": (
            0,
            '{"ID":"a1","Names":"vllm_node","Image":"vllm-node","State":"running","Status":"Up"}',
        ),
        "restarts": (0, text("docker-inspect-restarts.txt")),
        "route": (0, text("ip-route-default.txt")),
        "roce": (0, (FIX / "gb10" / "ibdev2netdev.txt").read_text()),
        "metrics": (0, text("vllm-metrics-wedged.txt")),
    }
    f = read_sections(NodeConfig("n1", "h", role="head"), 10.0, outputs).facts()
    assert f["containers.restart_count"] == 35
    assert f["containers.restart_policy"] == "unless-stopped"
    assert f["net.default_route_if"] == "wlP9s9"
    assert f["net.roce_devices_up"] == 1
    assert f["serving.requests_running"] == 2.0
    assert f["serving.generation_tokens_total"] == 184311.0


def test_a_stopped_containers_restart_count_is_history() -> None:
    """Only a serving container that is up can be looping: an exited one's count is old."""
    restarts = (0, text("docker-inspect-restarts.txt"))
    for state, looping in (("running", True), ("restarting", True), ("exited", False)):
        container = json.dumps(
            {"ID": "a1", "Names": "vllm_node", "Image": "vllm-node", "State": state, "Status": "x"}
        )
        outputs = {"containers": (0, container), "restarts": restarts}
        f = read_sections(NodeConfig("n1", "h", role="head"), 10.0, outputs).facts()
        assert ("containers.restart_count" in f) is looping, state
        assert ("containers.restart_policy" in f) is looping, state
        engine = RuleEngine(KB)
        walls = {x.diagnosis.wall.id for x in engine.evaluate({"n1": f}, 10.0)}
        assert ("restart-loop" in walls) is looping, (state, walls)


def test_spark_tuis_own_metrics_reads_do_not_break_the_log_silence() -> None:
    t = ServingTracker()
    t.feed("(APIServer pid=57) INFO:     Application startup complete.", 0.0)
    for i, line in enumerate(
        [
            '(APIServer pid=851) INFO:     127.0.0.1:59146 - "GET /metrics HTTP/1.1" 200 OK',
            "(EngineCore pid=1154) INFO 07-15 15:33:47 [shm_broadcast.py:705] No available shared "
            "memory broadcast block found in 60 seconds. This typically happens when some "
            "processes are hanging or doing some time-consuming work (e.g. compilation, "
            "weight/kv cache quantization).",
            "(APIServer pid=605) INFO 07-15 15:32:57 [loggers.py:273] Engine 000: Avg prompt "
            "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 3 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 0.7%, Prefix cache hit rate: 0.0%",
        ]
    ):
        t.feed(line, 30.0 + i)
    assert t.state.last_log_at == 0.0
    assert t.state.requests_running == 3.0
    t.feed('(APIServer pid=57) INFO:     192.168.1.129:4921 - "POST /v1/chat/completions" 200', 50)
    assert t.state.last_log_at == 50


# ---------------------------------------------------------------- the stall detector


def node(
    t: float,
    *,
    running: float,
    tokens_moved_at: float,
    power_w: float,
    last_log_at: float,
    sm_pct: float = 96.0,
) -> NodeState:
    return NodeState(
        "spark1",
        t,
        gpus=(GpuReading(0, "NVIDIA GB10", sm_pct=sm_pct, power_w=power_w, sm_clock_mhz=2400),),
        serving=ServingState(phase="serving", last_log_at=last_log_at),
        metrics=EngineMetrics(running, 0.0, 1000.0, tokens_moved_at),
    )


def stall_times(engine: RuleEngine, rounds) -> list[float]:
    out = []
    for state in rounds:
        for f in engine.evaluate_states({"spark1": state}, state.time):
            if f.diagnosis.wall.id == "serving-stall":
                out.append(state.time)
    return out


def test_a_wedge_fires_serving_stall_once_the_counter_is_frozen_for_60_s() -> None:
    engine = RuleEngine(KB)
    # serving until t=100, then wedged: counter and log frozen, power down to ~20 W
    rounds = [
        node(
            t,
            running=2,
            tokens_moved_at=min(t, 100),
            power_w=45 if t <= 100 else 20,
            last_log_at=min(t, 100),
        )
        for t in range(0, 200, 2)
    ]
    fired = stall_times(engine, rounds)
    assert fired and fired[0] == 160  # exactly 60 s after the last token
    diag = engine.book.get("serving-stall", "spark1:readings")
    assert diag is not None and "serving.tokens_age_s >= 60 (is 60)" in diag.evidence
    assert diag.fix_ids[0] == "capture-stall-evidence"  # evidence before any restart


def test_a_quiet_minute_with_no_request_never_fires() -> None:
    engine = RuleEngine(KB)
    rounds = [
        node(t, running=0, tokens_moved_at=0, power_w=18, last_log_at=0) for t in range(0, 600, 5)
    ]
    assert stall_times(engine, rounds) == []


def test_a_long_prefill_with_high_power_never_fires() -> None:
    engine = RuleEngine(KB)
    rounds = [
        node(t, running=1, tokens_moved_at=0, power_w=46, last_log_at=0) for t in range(0, 600, 5)
    ]
    assert stall_times(engine, rounds) == []


def test_the_60_s_is_data_in_the_wall_file(tmp_path: Path) -> None:
    src = (TESTS.parent / "knowledge" / "serving-stall.yaml").read_text()
    assert "serving.tokens_age_s >= 60" in src
    (tmp_path / "serving-stall.yaml").write_text(
        src.replace("tokens_age_s >= 60", "tokens_age_s >= 120")
    )
    kb = load_knowledge(tmp_path, use_user=False)
    engine = RuleEngine(kb)
    rounds = [
        node(
            t,
            running=2,
            tokens_moved_at=min(t, 100),
            power_w=20 if t > 100 else 45,
            last_log_at=min(t, 100),
        )
        for t in range(0, 260, 2)
    ]
    assert stall_times(engine, rounds)[0] == 220


def test_the_nccl_dual_build_cause_is_chosen_by_the_readings() -> None:
    engine = RuleEngine(KB)
    wedged = node(300, running=2, tokens_moved_at=100, power_w=20, last_log_at=100)
    wedged = dataclasses.replace(wedged, extra_facts={"nccl.library_builds": 2})
    engine.evaluate_states({"spark1": wedged}, 300)
    stall = engine.book.get("serving-stall", "spark1:readings")
    dual = engine.book.get("nccl-dual-build", "spark1:readings")
    assert stall is not None and stall.cause == "nccl-dual-build"
    assert dual is not None
    assert KB.walls["nccl-timeout"].choose_cause({"nccl.library_builds": 2}).id == "nccl-dual-build"


# ---------------------------------------------------------------- the other checks


@pytest.mark.parametrize(
    ("facts", "wall"),
    [
        ({"containers.restart_count": 3}, "restart-loop"),
        ({"containers.restart_policy": "unless-stopped"}, "restart-loop"),
        ({"boot.changed_unasked": True}, "node-unexpected-reboot"),
        ({"net.fabric_up": True, "net.fabric_mtu": 1500}, "fabric-slow"),
        ({"net.fabric_up": True, "net.fabric_speed_mbps": 100000}, "fabric-slow"),
        ({"net.nccl_ib_hca_count": 1, "net.roce_devices_up": 2}, "fabric-slow"),
        ({"nccl.library_builds": 2}, "nccl-dual-build"),
    ],
)
def test_check_walls_fire_on_their_readings(facts: dict, wall: str) -> None:
    engine = RuleEngine(KB)
    fired = {f.diagnosis.wall.id for f in engine.evaluate({"spark1": facts}, 0.0)}
    assert wall in fired


@pytest.mark.parametrize(
    "facts",
    [
        {"containers.restart_count": 0, "containers.restart_policy": "no"},
        {"boot.changed_unasked": False},
        {"net.fabric_up": True, "net.fabric_mtu": 9000, "net.fabric_speed_mbps": 200000},
        {"net.nccl_ib_hca_count": 2, "net.roce_devices_up": 2},
        {"nccl.library_builds": 1},
    ],
)
def test_healthy_readings_raise_none_of_them(facts: dict) -> None:
    late = {
        "restart-loop",
        "node-unexpected-reboot",
        "fabric-slow",
        "nccl-dual-build",
        "serving-stall",
        "gpu-clock-stuck",
        "weight-load-stall",
    }
    engine = RuleEngine(KB)
    fired = {f.diagnosis.wall.id for f in engine.evaluate({"spark1": facts}, 0.0)}
    assert not fired & late


def test_gpu_clock_stuck_needs_two_minutes_of_low_clock_under_load() -> None:
    engine = RuleEngine(KB)
    seen = []
    for t in range(0, 200, 10):
        facts = {"gpu.sm_pct": 96.0, "gpu.sm_clock_mhz": 702.0, "serving.phase": "serving"}
        seen += [f.diagnosis.wall.id for f in engine.evaluate({"spark1": facts}, float(t))]
    assert "gpu-clock-stuck" in seen
    engine2 = RuleEngine(KB)
    ok = {"gpu.sm_pct": 96.0, "gpu.sm_clock_mhz": 2405.0, "serving.phase": "serving"}
    assert not [
        f
        for t in range(0, 300, 10)
        for f in engine2.evaluate({"s": ok}, float(t))
        if f.diagnosis.wall.id == "gpu-clock-stuck"
    ]


def test_nccl_ib_hca_count_is_a_recipe_fact() -> None:
    from spark_tui.recipes.loader import load_recipes

    recipe = next(iter(load_recipes()))
    patched = dataclasses.replace(
        recipe,
        serve=dataclasses.replace(
            recipe.serve, env={**recipe.serve.env, "NCCL_IB_HCA": "=rocep1s0f1,roceP2p1s0f1"}
        ),
    )
    assert patched.facts()["net.nccl_ib_hca_count"] == 2


def test_weight_load_stall_needs_stuck_progress_and_falling_memory_for_30_s() -> None:
    stuck = {
        "serving.phase": "loading",
        "serving.progress_age_s": 240.0,
        "memory.available_gib": 6.0,
        "recipe.serve_args.--load-format": "fastsafetensors",
    }
    engine = RuleEngine(KB)
    seen = [
        (t, f.diagnosis)
        for t in (0.0, 10.0, 20.0, 30.0)
        for f in engine.evaluate({"spark1": stuck}, t)
        if f.diagnosis.wall.id == "weight-load-stall"
    ]
    assert [t for t, _ in seen] == [30.0]
    assert seen[0][1].cause == "fastsafetensors"
    assert seen[0][1].fixes()[0] == "switch-load-format"
    moving = dict(stuck, **{"serving.progress_age_s": 20.0})
    engine2 = RuleEngine(KB)
    assert not [
        f
        for t in range(0, 300, 10)
        for f in engine2.evaluate({"spark1": moving}, float(t))
        if f.diagnosis.wall.id == "weight-load-stall"
    ]


def test_safetensors_cause_follows_the_load_format() -> None:
    wall = KB.walls["safetensors-corrupt-shard"]
    fast = {"recipe.serve_args.--load-format": "fastsafetensors"}
    assert wall.choose_cause(fast).id == "fastsafetensors-loader"
    assert wall.choose_cause({}).id == "truncated-shard"
    # a truncated shard: copy it from a node whose copy agrees (checksums compared), else
    # fetch it again, then find the short one, then the other loader
    assert [f.id for f in wall.fixes_for({})] == [
        "repair-from-peer",
        "refetch-checkpoint",
        "list-shard-sizes",
        "plain-safetensors-loader",
    ]
    assert wall.fixes_for(fast)[0].id == "plain-safetensors-loader"
