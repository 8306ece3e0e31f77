"""The house has no circle across rooms: files that import each other in a loop (at run
time, lazy imports inside functions included) all live in one package. A room is a
sub-package of spark_tui (kb, nodes, remedy, …) or one top-level module (session.py)."""

from __future__ import annotations

import sys

import grimp

from spark_tui.action_schemas import SCHEMAS


def room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def loops(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected sets of modules (Tarjan): every loop of imports."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            loop = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                loop.add(w)
                if w == v:
                    break
            if len(loop) > 1:
                found.append(loop)

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def crossing(loop: set[str], graph: grimp.ImportGraph) -> list[str]:
    return sorted(
        f"{a} -> {b}"
        for a in loop
        for b in graph.find_modules_directly_imported_by(a) & loop
        if room(a) != room(b)
    )


def test_no_import_loop_crosses_rooms() -> None:
    graph = grimp.build_graph("spark_tui", exclude_type_checking_imports=True)
    bad = [crossing(loop, graph) for loop in loops(graph) if len({room(m) for m in loop}) > 1]
    assert not bad, bad


def test_the_check_sees_a_loop_that_crosses_rooms() -> None:
    graph = grimp.ImportGraph()
    for m in ("spark_tui.kb.loader", "spark_tui.remedy.actions", "spark_tui.kb.schema"):
        graph.add_module(m)
    graph.add_import(importer="spark_tui.kb.loader", imported="spark_tui.remedy.actions")
    graph.add_import(importer="spark_tui.remedy.actions", imported="spark_tui.kb.schema")
    graph.add_import(importer="spark_tui.kb.schema", imported="spark_tui.kb.loader")
    (loop,) = loops(graph)
    assert crossing(loop, graph) == [
        "spark_tui.kb.loader -> spark_tui.remedy.actions",
        "spark_tui.remedy.actions -> spark_tui.kb.schema",
    ]


def test_the_knowledge_base_validates_against_the_kinds_the_remedy_runs() -> None:
    """One registry: every kind the remedy runs has the schema the knowledge base checks,
    and a schema's root promise matches the commands the kind plans (KB fixes)."""
    from spark_tui.kb.loader import load_knowledge
    from spark_tui.remedy.actions import REGISTRY
    from spark_tui.remedy.sudoers import planned_commands

    assert set(REGISTRY) == set(SCHEMAS)
    assert all(REGISTRY[name].schema is SCHEMAS[name] for name in SCHEMAS)
    seen = set()
    for wall in load_knowledge():
        for fix in wall.fixes:
            for action in fix.actions:
                schema = SCHEMAS[action.type]
                planned_root = any(c.root for c in planned_commands(action))
                if planned_commands(action):
                    assert schema.runs_root(action.params) == planned_root, (fix.id, action)
                    seen.add(action.type)
    assert {"run", "move-aside", "reboot"} <= seen
