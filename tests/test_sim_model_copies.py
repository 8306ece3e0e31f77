"""The simulated nodes answer verify-model-copies' commands as coreutils/findutils do, the
corrupt shard sits on one node only, and the copy from a peer repairs it."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from spark_tui.remedy.actions.model_copies import compare, copy_command, list_command, parse_listing
from spark_tui.remedy.render import BACKUP_SUFFIX
from spark_tui.sim.cluster import build_sim_cluster

MODEL_DIR = "$HOME/.cache/huggingface/MiniMax-M2.7-NVFP4-GB10-AC"


@pytest.fixture
def cluster():
    c = build_sim_cluster("safetensors-corrupt-shard", speed=0.0)
    yield c
    c.close()


def _listing(cluster, node: str) -> dict[str, tuple[int, str]]:
    r = cluster.transports[node].run(list_command([MODEL_DIR]))
    assert r.exit_code == 0, r.stderr
    return parse_listing(r.stdout)


def test_xargs_and_sort_z_pass_nul_separated_names(cluster) -> None:
    t = cluster.transports["spark1"]
    assert t.run("printf 'b c\\0a\\0' | sort -z | xargs -0r echo").stdout == "a b c\n"
    # the transport hands NULs on cleaned away: seen through xargs, the records' order
    assert t.run("printf 'b\\0a\\0' | sort -z | xargs -0 echo").stdout == "a b\n"
    assert t.run("printf '' | xargs -0r echo x").stdout == ""  # -r: nothing to run
    assert t.run("printf '' | xargs -0 echo x").stdout == "x\n"  # without -r: once, no args
    assert t.run("printf 'a\\0' | xargs -0 nosuchcmd").exit_code == 127
    assert t.run("printf 'a\\0' | xargs -0 false").exit_code == 123


def test_stat_and_sha256sum_read_a_file_as_coreutils(cluster) -> None:
    t = cluster.transports["spark1"]
    assert t.run("printf 'hello\\n' > /tmp/f").exit_code == 0
    digest = hashlib.sha256(b"hello\n").hexdigest()
    assert t.run("sha256sum /tmp/f").stdout == f"{digest}  /tmp/f\n"
    assert t.run("stat -Lc 'size %s %n' /tmp/f").stdout == "size 6 /tmp/f\n"
    r = t.run("stat -Lc '%s' /tmp/none")
    assert r.exit_code == 1 and "cannot statx '/tmp/none'" in r.stderr
    ok = t.run(f"echo '{digest}  /tmp/f' | sha256sum -c --quiet -")
    assert (ok.exit_code, ok.stdout) == (0, "")
    assert t.run(f"echo '{digest}  /tmp/f' | sha256sum -c -").stdout == "/tmp/f: OK\n"
    bad = t.run(f"echo '{'0' * 64}  /tmp/f' | sha256sum -c --quiet -")
    assert bad.exit_code == 1 and bad.stdout == "/tmp/f: FAILED\n"
    assert "1 computed checksum did NOT match" in bad.stderr
    gone = t.run(f"echo '{digest}  /tmp/none' | sha256sum -c --quiet -")
    assert gone.exit_code == 1 and "could not be read" in gone.stderr


def test_cd_enters_a_directory_the_node_has_and_find_names_from_it(cluster) -> None:
    t = cluster.transports["spark1"]
    r = t.run("cd /nowhere && echo in")
    assert r.exit_code == 2 and r.stdout == "" and "can't cd to /nowhere" in r.stderr
    find = "find -L . -type f -name '*.safetensors' -print0 | sort -z | xargs -0r echo"
    r = t.run(f"cd {MODEL_DIR} && {find}")
    names = r.stdout.split()
    assert len(names) == 29 and names == sorted(names)
    assert names[0] == "./model-00001-of-00029.safetensors"
    # the shard's content and its sha256 agree, as cat and sha256sum do on a real node
    one = names[0]
    text = t.run(f"cd {MODEL_DIR} && cat -- {one}").stdout
    line = t.run(f"cd {MODEL_DIR} && sha256sum {one}").stdout
    assert line == f"{hashlib.sha256(text.encode()).hexdigest()}  {one}\n"


def test_the_truncated_shard_is_on_the_named_node_only(cluster) -> None:
    one, two = _listing(cluster, "spark1"), _listing(cluster, "spark2")
    assert one.keys() == two.keys() and len(one) == 29
    differ = [f for f in one if one[f] != two[f]]
    assert len(differ) == 1
    f = differ[0]
    assert one[f][0] < two[f][0]  # spark1's copy is short
    sizes = {n for n, _ in two.values()}
    assert len(sizes) == 1  # spark2's shards are whole


def test_without_a_named_node_the_last_node_has_the_short_copy(cluster) -> None:
    world = cluster.transports["spark1"].world
    world.faults = replace(world.faults, corrupt_node=None)
    one, two = _listing(cluster, "spark1"), _listing(cluster, "spark2")
    assert len({n for n, _ in one.values()}) == 1
    assert len({n for n, _ in two.values()}) == 2


def test_copying_from_the_peer_repairs_the_copy_and_keeps_the_old_one(cluster) -> None:
    listings = {"spark2": _listing(cluster, "spark2"), "spark1": _listing(cluster, "spark1")}
    repairs, unsure = compare(listings)
    assert unsure == [] and len(repairs) == 1
    rep = repairs[0]
    assert (rep.node, rep.source) == ("spark1", "spark2")
    t = cluster.transports["spark1"]
    r = t.run(copy_command([MODEL_DIR], rep.file, rep.sha, rep.source, "20260101T000000"))
    assert r.exit_code == 0, r.stderr
    assert _listing(cluster, "spark1") == listings["spark2"]
    # the short copy was moved aside, not deleted, and the partial file is gone
    backup = rep.file + BACKUP_SUFFIX.format(stamp="20260101T000000")
    old = t.run(f"cd {MODEL_DIR} && stat -Lc '%s' {backup}")
    assert old.exit_code == 0, old.stderr
    assert int(old.stdout) == listings["spark1"][rep.file][0]
    assert t.run(f"cd {MODEL_DIR} && test -e {rep.file}.spark-tui-partial").exit_code == 1


def test_a_copy_whose_sha256_differs_is_not_put_in_place(cluster) -> None:
    listings = {"spark2": _listing(cluster, "spark2"), "spark1": _listing(cluster, "spark1")}
    rep = compare(listings)[0][0]
    t = cluster.transports["spark1"]
    r = t.run(copy_command([MODEL_DIR], rep.file, "0" * 64, rep.source, "20260101T000000"))
    assert r.exit_code == 1 and "FAILED" in r.stdout
    assert _listing(cluster, "spark1") == listings["spark1"]  # the short copy is untouched
