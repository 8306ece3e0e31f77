"""Launch without Ray: every vLLM seed recipe's `no-ray` profile, rendered and read back.

Each node's command is parsed back (shlex) into its container environment, its exported
serve environment and the `vllm serve` argv, then checked flag by flag against the seed
recipe: exactly the right --nnodes/--node-rank/--master-addr/--master-port/--headless, and
every other flag and environment variable of the seed kept. The Ray-only check walls do not
fire on an mp recipe; the fixes of the walls of that path render their placeholders per node.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from spark_tui.entry import main
from spark_tui.kb.loader import load_knowledge
from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
from spark_tui.nodes.rules import RECIPE, RuleEngine
from spark_tui.recipes.loader import load_recipes
from spark_tui.recipes.model import render_value
from spark_tui.recipes.render import render_plan
from spark_tui.remedy.fixes import plan_fix

NODE_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless")
MP_PORT = "29501"  # vLLM's ParallelConfig.master_port default, written out in every profile


def cluster_of(n: int) -> ClusterConfig:
    """n nodes whose fabric interface names differ, so a head value on a worker shows."""
    return ClusterConfig(
        nodes=tuple(
            NodeConfig(
                f"spark{i}",
                f"10.0.0.{i}",
                "head" if i == 1 else "worker",
                fabric_if=f"enp{i}s0f0np0",
                fabric_ip=f"10.10.10.{i}",
            )
            for i in range(1, n + 1)
        ),
        source="test-cluster.yaml",
    )


def vllm_recipes() -> list:
    return [
        r
        for r in load_recipes(use_user=False, use_revisions=False)
        if r.engine == "vllm" and r.executor == "ray"
    ]


def parse_serve(command: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """`docker run … -e K=V … IMAGE sh -c 'export …; exec vllm serve … > LOG 2>&1'` →
    (container env, exported env, serve argv)."""
    words = shlex.split(command)
    assert words[:2] == ["docker", "run"]
    container_env: dict[str, str] = {}
    for i, w in enumerate(words):
        if w == "-e":
            k, _, v = words[i + 1].partition("=")
            container_env[k] = v
    assert words[-3:-1] == ["sh", "-c"], command
    script = shlex.split(words[-1])
    exported: dict[str, str] = {}
    if script[0] == "export":
        end = next(i for i, w in enumerate(script) if w.endswith(";"))
        for w in script[1 : end + 1]:
            k, _, v = w.rstrip(";").partition("=")
            exported[k] = v
        script = script[end + 1 :]
    assert script[-3:] == [">", script[-2], "2>&1"]
    # the engine replaces the shell (PID 1 in the container, so `docker stop` signals it)
    assert script[0] == "exec", script
    return container_env, exported, script[1:-3]


def flags_of(argv: list[str]) -> list[tuple[str, str | None]]:
    """(flag, value or None for a bare flag), in order, after `vllm serve MODEL`."""
    assert argv[:2] == ["vllm", "serve"]
    out: list[tuple[str, str | None]] = []
    rest = argv[3:]
    i = 0
    while i < len(rest):
        flag = rest[i]
        assert flag.startswith("-"), (flag, argv)
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            out.append((flag, rest[i + 1]))
            i += 2
        else:
            out.append((flag, None))
            i += 1
    return out


def fill(value: str, node: NodeConfig, head: NodeConfig) -> str:
    return (
        value.replace("{node.fabric_ip}", node.fabric_ip or "")
        .replace("{node.fabric_if}", node.fabric_if or "")
        .replace("{head.fabric_ip}", head.fabric_ip or "")
        .replace("{head.fabric_if}", head.fabric_if or "")
    )


def test_every_vllm_ray_recipe_has_a_no_ray_profile():
    recipes = vllm_recipes()
    assert len(recipes) >= 4
    for r in recipes:
        assert r.executor == "ray", r.id
        assert "no-ray" in r.profiles, r.id
        assert r.with_profile("no-ray").executor == "mp"


@pytest.mark.parametrize("recipe", vllm_recipes(), ids=lambda r: r.id)
def test_no_ray_render_flag_by_flag(recipe):
    seed = recipe
    cluster = cluster_of(seed.nodes)
    head = cluster.head
    plan = render_plan(seed, cluster, profile="no-ray", sets=["image=test/vllm:1"])
    assert plan.recipe.executor == "mp"
    ids = [s.id for s in plan.steps]
    # no Ray anywhere: no ray start, no `ray status` wait
    assert not {"ray-head", "ray-worker", "wait-ray"} & set(ids)
    assert all("ray start" not in s.command and "ray status" not in s.command for s in plan.steps)
    serves = [s for s in plan.steps if s.id == "serve"]
    assert [s.node for s in serves] == [n.name for n in cluster.nodes]
    seed_flags = [(f, None if v is True else render_value(v)) for f, v in seed.serve.args.items()]
    profile = seed.profiles["no-ray"]
    for rank, (step, node) in enumerate(zip(serves, cluster.nodes, strict=True)):
        container_env, exported, argv = parse_serve(step.command)
        assert argv[2] == seed.model.path
        flags = flags_of(argv)
        names = [f for f, _ in flags]
        # exactly once each, with this node's values
        want = {
            "--nnodes": str(seed.nodes),
            "--node-rank": str(rank),
            "--master-addr": head.fabric_ip,
            "--master-port": MP_PORT,
        }
        for flag, value in want.items():
            assert names.count(flag) == 1, (flag, node.name)
            assert dict(flags)[flag] == value, (flag, node.name)
        assert names.count("--headless") == (0 if rank == 0 else 1), node.name
        if rank:
            assert dict(flags)["--headless"] is None
        # every other flag of the seed, in the seed's order, unchanged; the executor backend is mp
        others = [(f, v) for f, v in flags if f not in NODE_FLAGS]
        expected = [
            (f, "mp" if f == "--distributed-executor-backend" else v) for f, v in seed_flags
        ]
        assert others == expected, node.name
        # environment: the seed's container env + Ray daemon env (RAY_* dropped) on every node,
        # the serve env exported (profile changes applied), each value this node's
        env_want = dict(seed.docker_env)
        env_want.update({k: v for k, v in seed.ray.env.items() if not k.startswith("RAY_")})
        assert container_env == {k: fill(v, node, head) for k, v in env_want.items()}, node.name
        serve_env = {**seed.serve.env, **profile.set_env}
        for k in profile.unset_env:
            serve_env.pop(k)
        assert exported == {k: fill(v, node, head) for k, v in serve_env.items()}, node.name
        # the variables that say where this rank lives name this node, never the head's
        for var in ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            value = exported.get(var, container_env.get(var))
            if value is not None:
                assert value in (node.fabric_ip, node.fabric_if), (var, node.name, value)
        assert "RAY_ADDRESS" not in exported and "RAY_ADDRESS" not in container_env


@pytest.mark.parametrize("recipe", vllm_recipes(), ids=lambda r: r.id)
def test_no_ray_waits_for_every_ranks_join_line(recipe):
    cluster = cluster_of(recipe.nodes)
    plan = render_plan(recipe, cluster, profile="no-ray", sets=["image=test/vllm:1"])
    ids = [s.id for s in plan.steps]
    joins = [s for s in plan.steps if s.id == "wait-join"]
    assert [s.node for s in joins] == [n.name for n in cluster.nodes]
    world = recipe.tp
    for rank, step in enumerate(joins):
        # vllm/distributed/parallel_state.py's line, printed once every rank reached the store
        assert step.kind == "wait-line"
        assert step.expect == f"rank {rank} in world size {world} is assigned as"
        assert step.command.startswith("docker exec ")
    # every serve starts before any wait; every join before the ready line
    assert max(i for i, s in enumerate(ids) if s == "serve") < ids.index("wait-join")
    assert max(i for i, s in enumerate(ids) if s == "wait-join") < ids.index("wait-ready")


def test_sglang_mp_waits_for_every_rank_too():
    r = load_recipes(use_user=False, use_revisions=False).get("minimax-m2.7-fp8-sglang-tp2")
    plan = render_plan(r, cluster_of(2), sets=["image=test/sglang:1"])
    joins = [s for s in plan.steps if s.id == "wait-join"]
    assert [s.expect for s in joins] == ["Init torch distributed ends"] * 2
    serve = [s for s in plan.steps if s.id == "serve"]
    _, _, argv = parse_serve(serve[1].command.replace("python3 -m sglang", "vllm serve x"))
    assert "--dist-init-addr" in argv and "10.10.10.1:20000" in argv


def test_profile_render_through_the_cli(capsys):
    rc = main(
        [
            "recipes",
            "render",
            "minimax-m2.7-nvfp4-vllm-tp2",
            "--profile",
            "no-ray",
            "--set",
            "serve.--max-model-len=65536",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "(profile no-ray)" in out
    assert "--nnodes 2 --node-rank 1 --master-addr 10.10.10.1 --master-port 29501 --headless" in out
    assert "--max-model-len 65536" in out
    assert "ray start" not in out and "ray status" not in out
    assert main(["recipes", "render", "minimax-m2.7-nvfp4-vllm-tp2", "--profile", "nope"]) == 2


def _fired(walls, facts) -> set[str]:
    engine = RuleEngine(walls)
    return {
        f.diagnosis.wall.id
        for f in engine.evaluate({}, 0.0, recipe_facts=facts, ignore_durations=True)
        if f.subject == RECIPE
    }


def test_ray_only_check_walls_do_not_fire_on_mp():
    kb = {w.id: w for w in load_knowledge()}
    ray_only = [kb["ray-object-store-oversized"], kb["ray-prestart-race"]]
    from spark_tui.recipes.revisions import apply_patch

    seed = load_recipes(use_user=False, use_revisions=False).get("minimax-m2.7-nvfp4-vllm-tp2")
    # the seed without its launcher's object-store cap, and no prestart setting, raises both ...
    r = apply_patch(seed, target="ray", unset_args=["--object-store-memory"])
    assert _fired(ray_only, r.facts()) == {"ray-object-store-oversized", "ray-prestart-race"}
    mp = r.with_profile("no-ray")
    assert mp.facts()["recipe.executor"] == "mp"
    # ... its no-ray rendering raises neither
    assert _fired(ray_only, mp.facts()) == set()


@pytest.mark.parametrize(
    ("wall", "fix", "needle"),
    [
        ("gloo-interface", "set-gloo-socket-ifname", "GLOO_SOCKET_IFNAME={if}"),
        ("nccl-interface", None, "NCCL_SOCKET_IFNAME={if}"),
        ("dist-init-timeout", "drop-page-caches", None),
    ],
)
def test_walls_of_the_mp_path_render_on_mp_plans(wall, fix, needle):
    kb = {w.id: w for w in load_knowledge()}
    assert wall in kb
    base = load_recipes(use_user=False, use_revisions=False).get("minimax-m2.7-nvfp4-vllm-tp2")
    # the seed without the interface variables, so the fix has something to add
    recipe = base.with_profile("no-ray")
    recipe = replace(
        recipe,
        docker_env={k: v for k, v in recipe.docker_env.items() if k not in ("GLOO_SOCKET_IFNAME",)},
    )
    cluster = cluster_of(2)
    w = kb[wall]
    chosen = next(f for f in w.fixes if fix is None or f.id == fix)
    plan = plan_fix(chosen, cluster, recipe, seen="spark2", wall=wall, stamp="T")
    launches = [a.launch for a in plan.actions if a.launch is not None]
    commands = [c.command for c in plan.commands()]
    if needle is None:  # a run action on every node
        assert {c.node for c in plan.commands()} == {"spark1", "spark2"}
        assert sorted(commands) == ["sudo -n sysctl -w vm.drop_caches=3"] * 2 + ["sync"] * 2
        return
    assert launches, "the fix relaunches"
    launch = launches[-1]
    assert launch.recipe.executor == "mp"
    for node in cluster.nodes:
        serve = next(s for s in launch.steps if s.id == "serve" and s.node == node.name)
        assert needle.format(**{"if": node.fabric_if}) in serve.command, node.name
        assert "{node." not in serve.command


def test_profiles_survive_a_revision_round_trip():
    from spark_tui.recipes.loader import parse_recipe_text
    from spark_tui.recipes.revisions import recipe_to_yaml

    for r in vllm_recipes():
        back = parse_recipe_text(recipe_to_yaml(r), "rev.yaml")
        assert back.profiles["no-ray"] == r.profiles["no-ray"], r.id
        assert back.model.max_position_embeddings == r.model.max_position_embeddings


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("    executor: bogus\n", "executor must be one of ray, mp"),
        ("    executor: mp\n", "needs node_args"),
    ],
)
def test_bad_mp_profiles_name_file_and_line(tmp_path, profile, message):
    from spark_tui.errors import InputErrors
    from spark_tui.recipes.loader import parse_recipe_text

    text = (
        "id: t\ntitle: t\nstatus: works\nmodel: {id: org/m}\nengine: vllm\nexecutor: ray\n"
        "nodes: 2\nserve:\n  args: {--tensor-parallel-size: 2}\n  log: /tmp/s.log\n"
        "  ready_line: up\nprofiles:\n  no-ray:\n" + profile
    )
    with pytest.raises(InputErrors) as err:
        parse_recipe_text(text, "t.yaml")
    found = [e for e in err.value.errors if message in str(e)]
    assert found and found[0].file == "t.yaml" and found[0].line and found[0].line >= 13


@pytest.mark.parametrize("profile", [None, "no-ray"], ids=["ray", "no-ray"])
def test_the_simulator_launches_the_recipe_each_way(profile):
    from spark_tui.remedy.launch import LaunchRunner
    from spark_tui.sim import SteppedClock, build_sim_cluster

    r = load_recipes(use_user=False, use_revisions=False).get("minimax-m2.7-nvfp4-vllm-tp2")
    with build_sim_cluster("healthy", clock=SteppedClock()) as c:
        plan = render_plan(r, c.config, profile=profile)
        result = LaunchRunner(c.transports, c.clock).run_steps(plan.steps)
        assert result.ok, result.describe()
        assert result.tok_s and result.tok_s > 0
        ids = [s.step.id for s in result.steps]
        if profile is None:
            assert "wait-ray" in ids and "wait-join" not in ids
        else:
            assert ids.count("wait-join") == 2 and "wait-ray" not in ids
            assert not any("ray" in s.step.command.split()[:4] for s in result.steps)
            worker = c.transports["spark2"].run(
                "docker exec ray-worker tail -n 200 /tmp/vllm-serve.log"
            )
            assert "rank 1 in world size 2 is assigned as" in worker.stdout


def test_an_engine_per_node_waits_for_each_nodes_own_rank_0():
    """tiny-llama-cpu-vllm-2node: tensor x pipeline parallel 1 on two nodes, no group across
    them (vLLM's CPU build serves no dense model across nodes): each node's engine prints its
    own 'rank 0 in world size 1' (the real engine's line, tests/real)."""
    r = load_recipes(use_user=False, use_revisions=False).get("tiny-llama-cpu-vllm-2node")
    plan = render_plan(r, cluster_of(2))
    joins = [s for s in plan.steps if s.id == "wait-join"]
    assert [(s.node, s.expect) for s in joins] == [
        (n, "rank 0 in world size 1 is assigned as") for n in ("spark1", "spark2")
    ]
    assert all("own engine" in s.title for s in joins)
    serves = [s for s in plan.steps if s.id == "serve"]
    assert len(serves) == 2 and all("--nnodes" not in s.command for s in serves)
