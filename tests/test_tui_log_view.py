"""The log pane and the hand-over from engine threads: bounded, batched, cheap."""

from __future__ import annotations

import asyncio
import threading

from textual.app import App, ComposeResult

from spark_tui.events import LogLines, NodeSampled
from spark_tui.nodes.state import NodeState
from spark_tui.tui.event_pump import EventPump
from spark_tui.tui.widgets.log_view import LONG_LINE, LogView


class _LogApp(App[None]):
    def __init__(self, max_lines: int) -> None:
        super().__init__()
        self.max_lines = max_lines

    def compose(self) -> ComposeResult:
        yield LogView(self.max_lines, id="log")


def test_scrollback_is_bounded_and_filters_by_node() -> None:
    async def scenario() -> None:
        app = _LogApp(max_lines=100)
        async with app.run_test(size=(80, 20)) as pilot:
            log = app.query_one(LogView)
            for i in range(30):
                node = "spark1" if i % 3 else "spark2"
                log.add_lines(node, [f"line {i}.{j}" for j in range(10)])
            await pilot.pause()
            assert log.total_lines == 300
            texts = log.visible_texts()
            assert len(texts) == 100  # only the newest 100 lines are kept
            assert texts[-1] == "spark1: line 29.9"
            log.source = "spark2"
            await pilot.pause()
            assert all(t.startswith("spark2:") for t in log.visible_texts())
            log.add_lines("spark2", ["late"])
            log.add_lines("spark1", ["other"])
            assert log.visible_texts()[-1] == "spark2: late"
            assert log.virtual_size.height == len(log.visible_texts())

    asyncio.run(scenario())


def test_follow_keeps_the_newest_line_in_view_and_search_scrolls_to_a_hit() -> None:
    async def scenario() -> None:
        app = _LogApp(max_lines=10_000)
        async with app.run_test(size=(80, 20)) as pilot:
            log = app.query_one(LogView)
            log.add_lines("spark1", [f"line {i}" for i in range(1000)])
            await pilot.pause()
            assert log.scroll_offset.y >= 1000 - log.size.height
            row = log.find_next("line 17", backwards=True)
            await pilot.pause()
            assert row == 179  # the last row containing "line 17" before the bottom
            assert log.follow is False
            log.add_lines("spark1", ["more"])
            await pilot.pause()
            assert log.scroll_offset.y == 179  # not following: the view stays

    asyncio.run(scenario())


def test_matched_lines_are_styled_and_huge_lines_are_not_highlighted() -> None:
    async def scenario() -> None:
        app = _LogApp(max_lines=100)
        async with app.run_test(size=(80, 10)) as pilot:
            log = app.query_one(LogView)
            huge = "x" * (LONG_LINE + 5000)
            log.add_lines("spark1", ["plain", "bad thing", huge], marks=((1, "wall", "error"),))
            await pilot.pause()
            error_style = log.get_component_rich_style("logview--error")
            bad = log._render_entry(log._entries[1])
            assert any(seg.style and seg.style.bgcolor == error_style.bgcolor for seg in bad)
            big = log._render_entry(log._entries[2])
            assert big.cell_length <= LONG_LINE + 10  # cut, rendered plain
            log.search = "x"
            assert len(list(log._render_entry(log._entries[2]))) == 2  # still no highlighting

    asyncio.run(scenario())


def test_event_pump_is_bounded_and_wakes_once_per_batch() -> None:
    wakes: list[int] = []
    pump = EventPump(lambda: wakes.append(1), max_pending_lines=1000)
    lines = tuple(f"l{i}" for i in range(100))

    def produce(node: str) -> None:
        for i in range(50):
            pump.emit(LogLines(node, "serve", lines, i * 100 + 1))

    threads = [threading.Thread(target=produce, args=(f"spark{n}",)) for n in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pump.emit(NodeSampled("spark1", NodeState("spark1", 0.0)))
    assert len(wakes) == 1  # one wake until the UI drains
    batch = pump.drain()
    kept = sum(len(b.lines) for b in batch.logs)
    assert kept <= 1000 and kept + batch.dropped_lines == 15_000
    assert len(batch.events) == 1
    pump.emit(NodeSampled("spark1", NodeState("spark1", 1.0)))
    assert len(wakes) == 2  # drained: the next emit wakes again
