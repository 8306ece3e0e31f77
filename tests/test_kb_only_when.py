"""A log signature's `only_when`: facts of the recipe and the node without which its line is
harmless. NCCL on loopback is right when every rank is on one node (one DGX Spark) and a wall
only when the launch spans nodes; not knowing the recipe keeps the line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from spark_tui.errors import InputErrors
from spark_tui.events import LogLines
from spark_tui.kb.conditions import parse_condition
from spark_tui.kb.loader import load_dir, load_knowledge
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.triage import triage_files
from spark_tui.session import open_cluster

# NVIDIA/nccl#1053 (NCCL 2.18+) and the newer bootstrap wording (NCCL 2.27+)
LO_SOCKET = "spark1:2871:2871 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>"
LO_BOOTSTRAP = "spark1:2871:2871 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>"
# no interface at all fails on one node too (NVIDIA/nccl#210): never behind the condition
NO_INTERFACE = (
    "spark1:2871:2871 [0] bootstrap.cc:130 NCCL WARN Bootstrap : no socket interface found"
)

KB = load_knowledge()
WALL = "nccl-interface"


def _watch(session, node: str, lines: list[str]) -> tuple[set[str], set[str]]:
    """Lines from a node's serving log through the session's monitor: (walls diagnosed,
    walls marked on the lines). One round is read first, so the node's facts are there."""
    seen: list[LogLines] = []
    session.subscribe(lambda e: seen.append(e) if isinstance(e, LogLines) else None)
    mon = session.start(period_s=3600.0)
    mon.sample_once(node)
    for line in lines:
        mon.feed_line(node, "serve", line)
    marked = {wall for batch in seen for _, wall, _ in batch.marks}
    return {d.wall.id for d in mon.diagnoses()}, marked


def test_a_one_node_launch_with_nccl_on_loopback_names_no_wall() -> None:
    with open_cluster(None, sim_nodes=1, recipe="tiny-llama-cpu-vllm") as session:
        assert session.recipe_facts()["recipe.nodes"] == 1
        walls, marked = _watch(session, "spark1", [LO_SOCKET, LO_BOOTSTRAP])
    assert WALL not in walls and WALL not in marked


def test_a_one_node_launch_still_names_no_interface_at_all() -> None:
    with open_cluster(None, sim_nodes=1, recipe="tiny-llama-cpu-vllm") as session:
        walls, marked = _watch(session, "spark1", [LO_SOCKET, NO_INTERFACE])
        assert session.monitor is not None
        d = next(d for d in session.monitor.diagnoses() if d.wall.id == WALL)
    assert WALL in walls and WALL in marked
    # the evidence is the line that fails, not the harmless loopback line before it
    assert "no socket interface found" in d.evidence and d.line == 2


@pytest.mark.parametrize("line", [LO_SOCKET, LO_BOOTSTRAP])
def test_a_two_node_launch_with_nccl_on_loopback_names_the_wall(line: str) -> None:
    with open_cluster(None, sim_nodes=2, recipe="tiny-llama-cpu-vllm-2node") as session:
        assert session.recipe_facts()["recipe.nodes"] == 2
        walls, marked = _watch(session, "spark2", [line])
    assert WALL in walls and WALL in marked


def test_a_stack_spark_tui_did_not_launch_keeps_the_wall() -> None:
    """Attached to a running stack with no recipe: how many nodes it spans is unknown, and a
    wall is not hidden for want of facts."""
    with open_cluster(scenario="attach-eugr", speed=0.0) as session:
        assert session.recipe() is None
        walls, _ = _watch(session, "spark1", [LO_SOCKET])
    assert WALL in walls


def test_offline_triage_has_no_recipe_and_keeps_the_wall(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text(f"{LO_SOCKET}\n")
    assert WALL in {d.wall.id for d in triage_files(Matcher(KB), [str(log)])}


def test_only_when_is_judged_on_known_facts_only() -> None:
    sig = next(s for s in KB.get(WALL).signatures if s.only_when)
    assert [str(c) for c in sig.only_when] == ["recipe.nodes >= 2"]
    one = {"recipe.id": "r", "recipe.nodes": 1}
    assert sig.ruled_out(one)
    assert not sig.ruled_out({**one, "recipe.nodes": 2})
    for unknown in (None, {}, {"cluster.nodes": 1, "memory.total_gib": 119.7}):
        assert not sig.ruled_out(unknown)  # no recipe: the line keeps its wall
    # a node fact that was not read is unknown; a recipe fact the known recipe lacks is unset
    not_read = dataclasses.replace(sig, only_when=(parse_condition("net.fabric_up == true"),))
    assert not not_read.ruled_out(one)
    assert not_read.ruled_out({**one, "net.fabric_up": False})
    unset = dataclasses.replace(
        sig, only_when=(parse_condition("recipe.env.NCCL_SOCKET_IFNAME is set"),)
    )
    assert unset.ruled_out(one) and not unset.ruled_out({})
    both = dataclasses.replace(sig, only_when=(parse_condition("recipe.nodes > net.fabric_mtu"),))
    assert not both.ruled_out(one)  # one side unknown: undecided
    assert both.ruled_out({**one, "net.fabric_mtu": 9000})


def _wall_dir(tmp_path: Path, only_when: str) -> Path:
    text = (Path(KB.get(WALL).source)).read_text()
    assert "only_when: [recipe.nodes >= 2]" in text
    d = tmp_path / "kb"
    d.mkdir()
    (d / f"{WALL}.yaml").write_text(text.replace("[recipe.nodes >= 2]", only_when))
    return d


def test_lint_refuses_an_unknown_fact_in_only_when(tmp_path: Path) -> None:
    d = _wall_dir(tmp_path, "[recipe.node_count >= 2]")
    with pytest.raises(InputErrors) as err:
        load_dir(d)
    text = str(err.value)
    assert "only_when: unknown fact 'recipe.node_count'" in text
    line = next(
        i
        for i, row in enumerate((d / f"{WALL}.yaml").read_text().splitlines(), 1)
        if "only_when" in row
    )
    assert f"{WALL}.yaml:{line}:" in text


def test_lint_refuses_an_only_when_that_is_no_condition(tmp_path: Path) -> None:
    with pytest.raises(InputErrors) as err:
        load_dir(_wall_dir(tmp_path, "[more than one node]"))
    assert "only_when: cannot read the condition" in str(err.value)


def test_a_warm_matcher_cache_cannot_lose_the_condition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled database (hyperscan) holds the regexes alone, keyed by them: a condition
    added to a signature is read from the wall each start, so a database made before the
    condition existed is reused as it is and the condition still applies."""
    pytest.importorskip("hyperscan")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = [
        dataclasses.replace(
            w, signatures=tuple(dataclasses.replace(s, only_when=()) for s in w.signatures)
        )
        for w in KB
    ]
    old = Matcher(before, engine="hyperscan")
    dbs = sorted((tmp_path / "cache").rglob("hyperscan-*.db"))
    assert dbs, "no compiled database was kept"
    hits = old.scan_lines("serve", [LO_SOCKET])
    assert [h.wall.id for h in hits] == [WALL]
    assert not hits[0].ruled_out({"recipe.id": "r", "recipe.nodes": 1})  # no condition then
    new = Matcher(KB, engine="hyperscan")
    assert sorted((tmp_path / "cache").rglob("hyperscan-*.db")) == dbs  # the same database
    hits = new.scan_lines("serve", [LO_SOCKET])
    assert [h.wall.id for h in hits] == [WALL]
    assert hits[0].ruled_out({"recipe.id": "r", "recipe.nodes": 1})


@pytest.mark.parametrize(
    ("recipe", "named"),
    [("tiny-llama-cpu-vllm", False), ("tiny-llama-cpu-vllm-2node", True), (None, True)],
)
def test_a_report_judges_its_logs_on_its_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recipe: str | None, named: bool
) -> None:
    """`report LOG…` is told the recipe (--recipe, else cluster.yaml's): the logs are judged on
    it; with no recipe at all nothing rules a line out."""
    from spark_tui.entry import main

    monkeypatch.chdir(tmp_path)  # no ./cluster.yaml
    log = tmp_path / "serve.log"
    log.write_text(f"{LO_SOCKET}\n")
    out = tmp_path / "report.md"
    args = ["report", str(log), "--offline", "-o", str(out)]
    assert main(args + (["--recipe", recipe] if recipe else [])) == 0
    md = out.read_text()
    assert (f"### {WALL} (warning)" in md) is named, md


def test_kb_show_says_when_a_signature_counts(capsys: pytest.CaptureFixture[str]) -> None:
    from spark_tui.entry import main

    assert main(["kb", "show", WALL]) == 0
    out = capsys.readouterr().out
    assert "lo:\\d/ only when recipe.nodes >= 2" in out
    assert "interface found/ only when" not in out


def test_the_launch_wait_leaves_a_conditioned_line_to_the_monitor() -> None:
    """The launch's own look at the serve log knows no facts: a line with `only_when` does
    not end the launch there (the monitor, which knows them, ends it when the wall holds)."""
    from spark_tui.remedy.launch import fatal_wall

    fatal = dataclasses.replace(KB.get(WALL), severity="error")
    assert fatal_wall(LO_SOCKET, Matcher([fatal])) is None
    plain = dataclasses.replace(
        fatal, signatures=tuple(dataclasses.replace(s, only_when=()) for s in fatal.signatures)
    )
    assert (fatal_wall(LO_SOCKET, Matcher([plain])) or "").startswith(f"{WALL}: ")
