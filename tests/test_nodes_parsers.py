"""Parsers on real captured output (tests/fixtures/real/), on GB10 inputs built from
GB10-FACTS.md (tests/fixtures/gb10/, constructed), and fuzzed: any text gives a
reading or Unparseable, never an exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_tui.nodes import commands
from spark_tui.nodes.cluster import NodeConfig
from spark_tui.nodes.parsers import Unparseable, missing_tool, number
from spark_tui.nodes.parsers.containers import parse_docker_ps
from spark_tui.nodes.parsers.dmon import DmonParser, parse_dmon
from spark_tui.nodes.parsers.gpu import parse_compute_apps, parse_gpu_query
from spark_tui.nodes.parsers.kernel import parse_boot, parse_listening_ports, parse_nvrm
from spark_tui.nodes.parsers.links import (
    parse_ibdev2netdev,
    parse_ip_br_addr,
    parse_ip_link,
    parse_speeds,
)
from spark_tui.nodes.parsers.meminfo import parse_meminfo
from spark_tui.nodes.parsers.ray import parse_ray_status
from spark_tui.nodes.parsers.serving import ServingTracker
from spark_tui.nodes.sampler import read_sections

FIX = Path(__file__).parent / "fixtures"
H200 = FIX / "real" / "h200"
LOCAL = FIX / "real" / "local"
GB10 = FIX / "gb10"
GIB = 1 << 30


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------- real captures


def test_meminfo_real_h200() -> None:
    m = parse_meminfo(text(H200 / "meminfo.txt"))
    assert not isinstance(m, Unparseable)
    assert m.total_bytes == 263998500 * 1024
    assert m.available_bytes == 263350540 * 1024
    assert m.cached_bytes == (2598768 + 26720) * 1024


def test_meminfo_real_local_machine() -> None:
    m = parse_meminfo(text(LOCAL / "meminfo.txt"))
    assert not isinstance(m, Unparseable) and m.total_bytes > m.available_bytes > 0


def test_gpu_query_real_h200_units_and_header() -> None:
    gpus = parse_gpu_query(text(H200 / "query-gpu.csv"))
    assert not isinstance(gpus, Unparseable) and len(gpus) == 2
    g = gpus[0]
    assert (g.index, g.name, g.sm_pct, g.mem_bw_pct) == (0, "NVIDIA H200", 0.0, 0.0)
    assert g.memory_total_bytes == 143771 << 20 and g.memory_used_bytes == 0
    assert (g.temp_c, g.power_w, g.sm_clock_mhz) == (33.0, 81.17, 345.0)
    assert g.uuid.startswith("GPU-6191b05a")


def test_compute_apps_real_h200() -> None:
    assert parse_compute_apps(text(H200 / "query-apps-idle.csv")) == ()
    (p,) = parse_compute_apps(text(H200 / "query-apps-busy.csv"))  # type: ignore[misc]
    assert (p.pid, p.name, p.used_bytes) == (1302, "python3", 520 << 20)


def test_dmon_real_spin_copy_idle() -> None:
    spin = parse_dmon(text(H200 / "dmon-spin.txt"))
    copy = parse_dmon(text(H200 / "dmon-copy.txt"))
    idle = parse_dmon(text(H200 / "dmon-idle.txt"))
    assert {(s.sm_pct, s.mem_bw_pct) for s in spin if s.gpu == 0} == {(100.0, 0.0)}  # type: ignore[union-attr]
    assert all(s.mem_bw_pct == 100.0 and s.sm_pct >= 98 for s in copy if s.gpu == 0)  # type: ignore[union-attr]
    assert all(s.sm_pct == 0 for s in idle)  # type: ignore[union-attr]


def test_dmon_columns_follow_the_header() -> None:
    samples = parse_dmon(text(H200 / "dmon-pucm-idle.txt"))
    assert not isinstance(samples, Unparseable)
    assert (samples[0].gpu, samples[0].power_w, samples[0].sm_pct) == (0, 81.0, 0.0)
    assert samples[1].power_w == 76.0


def test_ip_link_and_addr_real_local() -> None:
    links = parse_ip_link(text(LOCAL / "ip-o-link.txt"))
    addrs = parse_ip_br_addr(text(LOCAL / "ip-br-addr.txt"))
    assert not isinstance(links, Unparseable) and not isinstance(addrs, Unparseable)
    assert links["lo"] == ("UNKNOWN", 65536)
    assert links["eth0"] == ("UP", 1400)
    assert "127.0.0.1/8" in addrs["lo"][1]


def test_listening_ports_and_boot_real_local() -> None:
    ports = parse_listening_ports(text(LOCAL / "ss-ltnH.txt"))
    assert not isinstance(ports, Unparseable) and 2024 in ports
    boot = parse_boot(text(LOCAL / "boot.txt"))
    assert not isinstance(boot, Unparseable)
    assert len(boot[0]) == 36 and boot[1] > 0


def test_docker_without_daemon_real() -> None:
    r = parse_docker_ps(text(LOCAL / "docker-ps-no-daemon.txt"))
    assert isinstance(r, Unparseable) and "Cannot connect to the Docker daemon" in r.reason


def test_missing_tool_real_shell_message() -> None:
    lines = text(LOCAL / "ibdev2netdev-missing.txt").splitlines()
    assert missing_tool(int(lines[-1]), lines[0]) == "ibdev2netdev"
    assert missing_tool(0, "fine") is None


# ---------------------------------------------------------------- GB10 (constructed)


def test_gb10_query_accepts_na_memory() -> None:
    (g,) = parse_gpu_query(text(GB10 / "query-gpu.csv"))  # type: ignore[misc]
    assert g.name == "NVIDIA GB10" and g.sm_pct == 96.0 and g.power_w == 44.82
    assert g.memory_total_bytes is None and g.memory_used_bytes is None


def test_gb10_noheader_nounits_and_not_supported() -> None:
    line = "0, NVIDIA GB10, GPU-x, 36, 0, Not Supported, N/A, 55, [N/A], 2411\n"
    (g,) = parse_gpu_query(line)  # type: ignore[misc]
    assert (g.sm_pct, g.memory_used_bytes, g.memory_total_bytes, g.power_w) == (
        36,
        None,
        None,
        None,
    )
    assert g.sm_clock_mhz == 2411
    (p,) = parse_compute_apps("48211, python3, 19135\n")  # type: ignore[misc]
    assert p.used_bytes == 19135 << 20
    (p,) = parse_compute_apps(text(GB10 / "query-apps.csv"))  # type: ignore[misc]
    assert p.used_bytes == 19135 << 20


def test_numbers_accept_every_na_form() -> None:
    for na in ("[N/A]", "N/A", "Not Supported", "[Not Supported]", "-", ""):
        assert number(na) is None
    assert number("81.17 W") == 81.17 and number("nan") is None


def test_gb10_network_and_ray_and_docker() -> None:
    links = parse_ip_link(text(GB10 / "ip-o-link.txt"))
    assert links["enp1s0f0np0"] == ("UP", 9000)  # type: ignore[index]
    assert links["enp1s0f1np1"] == ("DOWN", 1500)  # type: ignore[index]
    roce = parse_ibdev2netdev(text(GB10 / "ibdev2netdev.txt"))
    assert roce["enp1s0f0np0"] == ("rocep1s0f0",)  # type: ignore[index]
    assert parse_speeds(text(GB10 / "speeds.txt")) == {"enP7s7": 1000, "enp1s0f0np0": 200000}
    ray = parse_ray_status(text(GB10 / "ray-status.txt"))
    assert not isinstance(ray, Unparseable)
    assert (ray.nodes_alive, ray.gpus_used, ray.gpus_total) == (2, 2.0, 2.0)
    assert ray.object_store_total_bytes == int(64.28 * GIB)
    assert isinstance(
        parse_ray_status("Error response from daemon: No such container: ray-head"), Unparseable
    )
    cs = parse_docker_ps(text(GB10 / "docker-ps.jsonl"))
    assert [(c.name, c.state) for c in cs] == [("ray-head", "running"), ("sglang_old", "exited")]  # type: ignore[union-attr]
    assert parse_docker_ps('{"Names":"x","Status":"Up 2 hours"}')[0].state == "running"  # type: ignore[index]
    assert len(parse_nvrm(text(GB10 / "dmesg-nvrm.txt"))) == 2


def test_whole_round_on_gb10_sections() -> None:
    outputs = {
        "meminfo": (0, text(GB10 / "meminfo.txt")),
        "gpu": (0, text(GB10 / "query-gpu.csv")),
        "gpu-apps": (0, text(GB10 / "query-apps.csv")),
        "containers": (0, text(GB10 / "docker-ps.jsonl")),
        "drm-override": (2, "ls: cannot access '…': No such file or directory"),
        "boot": (0, text(LOCAL / "boot.txt")),
        "links": (0, text(GB10 / "ip-o-link.txt")),
        "addrs": (0, text(GB10 / "ip-br-addr.txt")),
        "ray": (0, text(GB10 / "ray-status.txt")),
        "roce": (0, text(GB10 / "ibdev2netdev.txt")),
        "nvrm": (0, text(GB10 / "dmesg-nvrm.txt")),
        "ports": (0, text(LOCAL / "ss-ltnH.txt")),
        "speeds": (0, text(GB10 / "speeds.txt")),
    }
    s = read_sections(NodeConfig("spark1", "10.0.0.1", "head"), 100.0, outputs)
    assert s.unavailable == {}
    f = s.facts()
    assert f["net.fabric_if"] == "enp1s0f0np0" and f["net.fabric_mtu"] == 9000
    assert f["net.fabric_speed_mbps"] == 200000 and f["net.roce_devices"] == 1
    assert f["files.drm_override"] is False and f["kernel.nvrm_oom_count"] == 2
    assert round(f["memory.cached_gib"], 1) == 89.8  # type: ignore[arg-type]
    assert "gpu.cuda_total_gib" not in f  # unified memory: no framebuffer figure
    assert f["ray.gpus_total"] == 2.0 and f["containers.serving"] is True


def test_missing_tools_are_notes_and_the_rest_still_works() -> None:
    outputs = {
        "meminfo": (0, text(H200 / "meminfo.txt")),
        "gpu": (127, "sh: 1: nvidia-smi: not found"),
        "gpu-apps": (127, "sh: 1: nvidia-smi: not found"),
        "containers": (127, "sh: 1: docker: not found"),
        "links": (0, text(LOCAL / "ip-o-link.txt")),
    }
    s = read_sections(NodeConfig("n", "local"), 0.0, outputs)
    assert s.unavailable["gpu"] == "nvidia-smi: not available"
    assert s.unavailable["containers"] == "docker: not available"
    assert s.memory is not None and s.interfaces
    f = s.facts()
    assert "gpu.present" not in f and "containers.running" not in f
    assert f["memory.total_gib"] > 200  # type: ignore[operator]


def test_split_sections_round_trip_through_sh() -> None:
    from spark_tui.nodes.local import LocalTransport

    script = commands.sample_script({"a": "echo one; echo two", "b": "no-such-tool-xyz"})
    out = commands.split_sections(LocalTransport().run(script).stdout)
    assert out["a"] == (0, "one\ntwo")
    assert out["b"][0] == 127 and missing_tool(*out["b"]) == "no-such-tool-xyz"


def test_serving_tracker_reads_progress() -> None:
    t = ServingTracker()
    t.feed("Loading safetensors checkpoint shards:  50% Completed | 19/38 [00:30<00:30]", 10.0)
    assert t.state.phase == "loading" and t.state.load_pct == 50.0
    t.feed("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/36", 20.0)
    assert (t.state.phase, t.state.capture_done, t.state.capture_total) == ("capturing", 0, 36)
    t.feed("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/36", 50.0)
    assert t.state.progress_at == 20.0 and t.state.last_log_at == 50.0
    t.feed("INFO:     Application startup complete.", 60.0)
    assert t.state.phase == "serving"
    t.feed(
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 35.2 tokens/s, Running: 1 reqs",
        70.0,
    )
    assert (t.state.tok_s, t.state.requests_running, t.state.tokens_moved_at) == (35.2, 1.0, 70.0)


# ---------------------------------------------------------------- fuzzing

PARSERS = (
    parse_meminfo,
    parse_gpu_query,
    parse_compute_apps,
    parse_dmon,
    parse_docker_ps,
    parse_ray_status,
    parse_ip_link,
    parse_ip_br_addr,
    parse_ibdev2netdev,
    parse_speeds,
    parse_nvrm,
    parse_boot,
    parse_listening_ports,
)
# text that looks like the real thing, so the fuzzer reaches past the first check
_SEEDS = [
    text(p)
    for p in (
        H200 / "query-gpu.csv",
        H200 / "dmon-spin.txt",
        GB10 / "ray-status.txt",
        GB10 / "docker-ps.jsonl",
        GB10 / "ip-o-link.txt",
        H200 / "meminfo.txt",
    )
]
_fuzz_text = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda s, i, junk: s[:i] + junk + s[i:],
        st.sampled_from(_SEEDS),
        st.integers(0, 2000),
        st.text(max_size=40),
    ),
    st.lists(
        st.sampled_from(
            [
                "[N/A]",
                "N/A",
                "Not Supported",
                ",",
                " ",
                "\n",
                "%",
                "MiB",
                "0",
                "-1",
                "1e999",
                "nan",
                "#",
                "gpu",
                "sm",
                "mem",
                "LISTEN",
                ":",
                "==>",
                "{",
                "}",
                "Active:",
                "Usage:",
                "/",
                "GPU",
                "mtu",
                "state",
                "<UP>",
            ]
        ),
        max_size=60,
    ).map("".join),
)


@settings(max_examples=300, deadline=None)
@given(_fuzz_text)
def test_every_parser_returns_a_reading_or_unparseable(data: str) -> None:
    for parse in PARSERS:
        parse(data)  # any exception fails the test
    parser = DmonParser()
    tracker = ServingTracker()
    for line in data.splitlines():
        parser.feed(line)
        tracker.feed(line, 1.0)
    missing_tool(127, data)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(sorted({**commands.SAMPLE, **commands.SLOW})),
        st.tuples(st.integers(-1, 255), _fuzz_text),
        max_size=13,
    )
)
def test_any_round_output_builds_a_node_state(outputs: dict[str, tuple[int, str]]) -> None:
    s = read_sections(NodeConfig("n", "local"), 0.0, outputs)
    s.facts()
