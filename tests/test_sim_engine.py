"""Each engine failure mode of the seeds prints its real log text; a healthy launch
serves over real HTTP at the seed's rate. Launches run the real launch plan
(spark_tui.recipes.render + spark_tui.remedy.launch) against the simulated nodes."""

from __future__ import annotations

import json
import urllib.request

import pytest

from spark_tui.recipes.overrides import apply_sets
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.launch import LaunchRunner
from spark_tui.sim import build_sim_cluster, models
from spark_tui.sim import logs as simlogs

SPEED = 4000.0


def launch(c, recipe=None, until: str = "serve") -> LaunchRunner:
    """Run the plan's steps up to and including `until` (the serve command)."""
    plan = render_plan(recipe or c.recipe, c.config)
    runner = LaunchRunner(c.transports, c.clock)
    for step in plan.steps:
        r = runner.run_step(step)
        assert r.ok, (step.id, r.detail)
        if step.id == until:
            break
    return runner


def serve_log(c, recipe=None, node: str = "spark1") -> str:
    """The serve log as the node holds it (read off the simulated container: once the
    engine dies its container exits, and `docker exec` can no longer read it)."""
    r = recipe or c.recipe
    name = r.head_container if node == c.config.head.name else r.worker_container
    cont = c.nodes[node].containers.get(name)
    return (cont.read_file(r.serve.log, c.clock.now()) or "") if cont is not None else ""


def test_log_sections_fill_every_slot() -> None:
    for kind in ("vllm", "sglang", "ray", "nvrm"):
        for section in simlogs.sections(kind):
            values = {k: "1" for k in simlogs.slots(kind, section)}
            assert simlogs.render(kind, section, **values)


def test_page_cache_hog_fails_vllm_free_memory_check() -> None:
    with build_sim_cluster("page-cache-hog", speed=SPEED) as c:
        launch(c)
        c.clock.advance(60)
        log = serve_log(c)
        assert "ValueError: Free memory on device cuda:0 (" in log
        assert (
            "/119.67 GiB) on startup is less than desired GPU memory utilization (0.82, 98.13 GiB)"
            in log
        )


def test_leak_fails_sglang_balance_check() -> None:
    with build_sim_cluster("leaked-memory-unbalanced", speed=SPEED) as c:
        _launch_all_serves(c)
        c.clock.advance(60)
        text = serve_log(c) + serve_log(c, node="spark2")
        assert "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied" in text
        # SGLang's rank exited: so did its container (docker ps shows it)
        status = c.transports["spark1"].run("docker ps -a --format '{{.Status}}'").stdout
        assert status.startswith("Exited (1)")


def _launch_all_serves(c) -> None:
    plan = render_plan(c.recipe, c.config)
    runner = LaunchRunner(c.transports, c.clock)
    for step in plan.steps:
        if step.kind == "run":
            assert runner.run_step(step).ok, step.id


def test_sglang_capture_hangs_spinning_and_silent() -> None:
    with build_sim_cluster("cuda-graph-deadlock", speed=SPEED) as c:
        _launch_all_serves(c)
        c.clock.advance(600)
        log = serve_log(c)
        assert "Capture cuda graph begin. This can take up to several minutes." in log
        assert log.rstrip().endswith("0/36 [00:00<?, ?it/s]")
        t = c.transports["spark1"]
        sm = t.run("nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits").stdout
        assert int(sm) >= 95
        dmon = t.run("nvidia-smi dmon -s pu -c 1").stdout.splitlines()[-1].split()
        assert dmon[5] == "0"  # memory % stays 0 on GB10
        c.clock.advance(34 * 60)  # 34 minutes later: still nothing (seed 000)
        assert serve_log(c) == log


def test_vllm_cuda_graphs_across_nodes_time_out_after_a_few_requests() -> None:
    with build_sim_cluster("ray-channel-timeout", speed=SPEED) as c:
        launch(c)
        c.clock.advance(900)
        url = c.http_endpoint("spark1", c.recipe.serve.port)
        assert url is not None
        codes = []
        for _ in range(10):
            try:
                _chat(url, 8)
                codes.append(200)
            except urllib.error.HTTPError as exc:
                codes.append(exc.code)
                break
        assert codes[-1] == 500 and 2 <= len(codes) <= 8
        c.clock.advance(60)
        assert (
            "ray.exceptions.RayChannelTimeoutError: System error: Timed out waiting for object available to read."
            in serve_log(c)
        )


def test_unbounded_object_store_on_the_head_hits_nvrm_during_load() -> None:
    with build_sim_cluster("head-nvrm-oom", speed=SPEED) as c:
        launch(c)
        c.clock.advance(1200)
        dmesg = (
            c.transports["spark1"].run("dmesg --ctime 2>/dev/null | grep NVRM | tail -n 50").stdout
        )
        assert "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY]" in dmesg
        assert "Application startup complete" not in serve_log(c)
        # the workers were not overcommitted
        assert c.transports["spark2"].run("dmesg").stdout == ""


def test_missing_vllm_host_ip_trips_the_unique_ip_check() -> None:
    with build_sim_cluster("host-ip-mismatch", speed=SPEED) as c:
        launch(c)
        c.clock.advance(60)
        assert (
            "RuntimeError: Every node should have a unique IP address. Got 2 nodes with 3 unique IP addresses"
            in serve_log(c)
        )


def test_ray_client_driver_sees_one_gpu() -> None:
    with build_sim_cluster("ray-client-single-gpu", speed=SPEED) as c:
        launch(c)
        c.clock.advance(60)
        assert "Tensor parallel size (2) exceeds available GPUs (1)." in serve_log(c)


def test_flashmla_fails_the_first_request() -> None:
    with build_sim_cluster("flashmla-sglang", speed=SPEED) as c:
        _launch_all_serves(c)
        c.clock.advance(900)
        url = c.http_endpoint("spark1", 30000)
        assert url is not None
        with pytest.raises(urllib.error.HTTPError):
            _chat(url, 4)
        c.clock.advance(5)
        assert "RuntimeError: Unsupported architecture for sparse decode fwd" in serve_log(c)


def test_drm_override_fails_the_weight_load() -> None:
    with build_sim_cluster("drm-override", speed=SPEED) as c:
        launch(c)
        c.clock.advance(900)
        assert "GPU 0 has a total capacity of 62.00 GiB" in serve_log(c)


def test_memory_monitor_kills_after_warmup_unless_disabled() -> None:
    with build_sim_cluster("healthy", speed=SPEED) as c:
        hot = apply_sets(c.recipe, ["serve.--gpu-memory-utilization=0.9"])
        launch(c, hot)
        c.clock.advance(900)
        assert "Worker exit type: NODE_OUT_OF_MEMORY" in serve_log(c, hot)
    with build_sim_cluster("healthy", speed=SPEED) as c:
        cool = apply_sets(
            c.recipe,
            ["serve.--gpu-memory-utilization=0.9", "ray.env.RAY_memory_monitor_refresh_ms=0"],
        )
        launch(c, cool)
        c.clock.advance(900)
        log = serve_log(c, cool)
        assert "Application startup complete" in log and "NODE_OUT_OF_MEMORY" not in log


def _chat(url: str, n: int, stream: bool = False) -> bytes:
    body = json.dumps(
        {
            "model": "x",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": n,
            "stream": stream,
        }
    )
    req = urllib.request.Request(
        url + "/v1/chat/completions", body.encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


def test_healthy_launch_serves_over_real_http_at_the_seed_rate() -> None:
    with build_sim_cluster("healthy", speed=SPEED) as c:
        steps = render_plan(c.recipe, c.config).steps
        runner = LaunchRunner(c.transports, c.clock)
        assert runner.run_steps([s for s in steps if s.kind != "smoke"]).ok
        c.clock.set_speed(5.0)  # slow enough that real-time overhead does not blur the rate
        result = runner.run_steps([s for s in steps if s.kind == "smoke"])
        assert result.ok, result.describe()
        expected = models.info(c.recipe.model.id).tok_s
        assert result.tok_s == pytest.approx(expected, rel=0.15)
        url = c.http_endpoint("spark1", 30000)
        assert url is not None and url.startswith("http://127.0.0.1:")
        models_json = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=10).read())
        assert models_json["data"][0]["id"] == "minimax-m2.7-ac"
        assert urllib.request.urlopen(url + "/health", timeout=10).status == 200
        t0 = c.clock.now()
        raw = _chat(url, 128, stream=True).decode()
        elapsed = c.clock.now() - t0
        chunks = [x for x in raw.split("\n\n") if x.startswith("data: {")]
        assert len(chunks) == 128 and raw.rstrip().endswith("data: [DONE]")
        assert 128 / elapsed == pytest.approx(expected, rel=0.25)
        metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
        assert 'vllm:num_requests_running{model_name="minimax-m2.7-ac"} 0.0' in metrics
        total = float(metrics.split("vllm:generation_tokens_total{")[1].split("} ")[1].split()[0])
        assert total >= 128 + 256
        # the simulated curl reaches the same server from the head node
        out = c.transports["spark1"].run("curl -s http://127.0.0.1:30000/v1/models").stdout
        assert "minimax-m2.7-ac" in out


def test_readings_ahead_of_the_clock_follow_the_wedge() -> None:
    """`nvidia-smi dmon -c 2` half a second before the serving-stall wedge: its second line
    (half a second after) reads the wedged engine (~22 W), the first the serving one (~45 W)."""
    from spark_tui.sim import SteppedClock

    with build_sim_cluster("serving-stall", clock=SteppedClock()) as c:
        launch(c)
        engine = c.world.engines[-1]
        wedge_at = engine.serving_from + 300.0
        c.clock.advance(wedge_at - 0.5 - c.clock.now())
        lines = c.transports["spark1"].run("nvidia-smi dmon -s pu -c 2").stdout.splitlines()
        power = [int(line.split()[1]) for line in lines[2:]]
        assert power[0] >= 45 and power[1] <= 25, power
