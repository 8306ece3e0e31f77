"""What a real Spark's shell has and the fixes send: for/if compounds, sort, find over the
model checkpoints, docker update; and every fix of every scenario, applied on the simulated
cluster, ends without contradicting itself."""

from __future__ import annotations

import time

import pytest

from spark_tui.errors import InputError
from spark_tui.session import open_cluster
from spark_tui.sim import build_sim_cluster, scenario_names


@pytest.fixture
def cluster():
    c = build_sim_cluster("safetensors-corrupt-shard", speed=0.0)
    yield c
    c.close()


def test_for_and_if_run_as_sh_runs_them(cluster) -> None:
    t = cluster.transports["spark1"]
    assert t.run("for x in a b c; do echo $x; done").stdout == "a\nb\nc\n"
    nested = "for i in 1 2; do if test $i = 2; then echo two; else echo one; fi; done; echo end"
    assert t.run(nested).stdout == "one\ntwo\nend\n"
    assert t.run("if false; then echo yes; fi && echo after").stdout == "after\n"
    assert t.run("for x in $(echo p q); do echo [$x]; done").stdout == "[p]\n[q]\n"
    r = t.run("for x in a b; do echo $x")
    assert r.exit_code == 2 and "expecting 'done'" in r.stderr


def test_sort_orders_by_field_numbers_and_reverse(cluster) -> None:
    t = cluster.transports["spark1"]
    text = "printf '3 b\\n10 a\\n2 c\\n'"
    assert t.run(f"{text} | sort -k2").stdout == "10 a\n3 b\n2 c\n"
    assert t.run(f"{text} | sort -n").stdout == "2 c\n3 b\n10 a\n"
    assert t.run(f"{text} | sort -rn").stdout == "10 a\n3 b\n2 c\n"
    assert t.run("printf 'b\\na\\nb\\n' | sort -u").stdout == "a\nb\n"


def test_find_lists_every_shard_and_the_truncated_one_is_short(cluster) -> None:
    t = cluster.transports["spark1"]
    r = t.run(
        "find -L \"$HOME/.cache/huggingface\" -name '*.safetensors' -printf '%s %p\\n' | sort -k2"
    )
    assert r.exit_code == 0, r.stderr
    ours = [line for line in r.stdout.splitlines() if "/MiniMax-M2.7-NVFP4-GB10-AC/" in line]
    assert len(ours) == 29  # the checkpoint's 29 shards
    sizes = [int(line.split()[0]) for line in ours]
    assert len(set(sizes)) == 2 and sizes.count(min(sizes)) == 1  # one short shard
    assert [p.split()[1] for p in ours] == sorted(p.split()[1] for p in ours)
    assert t.run("find /nowhere -name '*.safetensors'").exit_code == 1


def test_docker_update_changes_the_restart_policy() -> None:
    c = build_sim_cluster("restart-loop", speed=0.0)
    try:
        t = c.transports["spark1"]
        policy = "docker inspect -f '{{.HostConfig.RestartPolicy.Name}}' vllm_node"
        assert t.run(policy).stdout == "unless-stopped\n"
        r = t.run('for c in $(docker ps -aq); do docker update --restart=no "$c"; done')
        assert r.exit_code == 0, r.stderr
        assert t.run(policy).stdout == "no\n"
    finally:
        c.close()


def _launched(name: str):
    """A session of the scenario with its recipe launched (and the monitor's view of it)."""
    session = open_cluster(scenario=name, speed=240.0)
    s = session.__enter__()
    s.start()
    if s.plays_launch:  # else a deployment already runs (attach-eugr): watch it
        s.apply(s.plan_launch(), yes=True)
    time.sleep(1.0 if s.plays_launch else 3.0)  # the monitor's next rounds see it
    return session, s


@pytest.mark.slow
@pytest.mark.parametrize("name", scenario_names())
def test_every_fix_of_a_scenario_applies_and_its_checks_agree(name: str) -> None:
    """Each fix on its own (as a user applies one), on the scenario just launched: a reboot
    or a switch only previews (minutes of simulated boot; the switch is the TUI's test). A
    later alternative may not get past the wall on its own; it must say so, not claim it."""
    context, session = _launched(name)
    try:
        todo = [
            (d.wall.id, d.source, fix_id)
            for d in session.diagnoses()
            if d.severity != "info"
            for fix_id in d.fixes()
        ]
    finally:
        context.__exit__(None, None, None)
    for wall, source, fix_id in dict.fromkeys(todo):
        context, session = _launched(name)
        try:
            d = next(
                (d for d in session.diagnoses() if (d.wall.id, d.source) == (wall, source)), None
            )
            if d is None:
                continue  # this launch did not meet it (a random request count, a race)
            fix = next(f for f in d.wall.fixes if f.id == fix_id)
            where = f"{name}: {wall}/{fix_id}"
            try:
                plan = session.plan_fix(d, fix)
            except InputError as exc:  # a recipe change with no recipe: said, not half-run
                assert session.recipe() is None and "recipe" in str(exc), f"{where}: {exc}"
                continue
            assert plan.preview_lines(), where
            if any(a.type in ("reboot", "switch-recipe") for a in fix.actions):
                continue
            result = session.apply(plan, yes=True)
            summary = result.summary()
            # what the fix sends, the simulated node runs (as a Spark's shell would)
            assert "command not found" not in summary, f"{where}: {summary}"
            assert "not a docker command" not in summary, f"{where}: {summary}"
            if result.ok:  # a check that held is said so; one that did not is never verified
                assert result.verified is not False, f"{where}: {summary}"
                assert ": NO" not in summary, f"{where}: {summary}"
            else:  # an alternative that does not get past the wall here says where it stopped
                assert "failed" in summary or "shows" in summary, f"{where}: {summary}"
        finally:
            context.__exit__(None, None, None)
