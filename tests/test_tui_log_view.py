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
                log.add_lines(node, [f"{'abcdefghij'[j]} line {i}" for j in range(10)])
            await pilot.pause()
            assert log.total_lines == 300
            texts = log.visible_texts()
            assert len(texts) == 100  # only the newest 100 lines are kept
            assert texts[-1] == "spark1: j line 29"
            log.node = "spark2"
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
            words = ["alpha", "beta", "gamma"]  # consecutive lines differ in more than digits
            log.add_lines("spark1", [f"line {i} {words[i % 3]}" for i in range(1000)])
            await pilot.pause()
            assert log.scroll_offset.y >= 1000 - log.size.height
            row = log.find_next("line 17", backwards=True)
            await pilot.pause()
            assert row == 179  # the last row containing "line 17" before the bottom
            assert log.follow is False
            log.add_lines("spark1", ["more"])
            await pilot.pause()
            assert 170 <= log.scroll_offset.y <= 179  # not following: the view stays
            await pilot.press("G")  # the end again, following
            assert log.follow is True

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


RAY_BANNER = [  # Ray's own words, printed again by every `ray start` the launch retries
    "Local node IP: 10.10.10.1",
    "",
    "--------------------",
    "Ray runtime started.",
    "--------------------",
    "",
    "To terminate the Ray runtime, run",
    "  ray stop",
]
PROGRESS = "Loading safetensors checkpoint shards: {p:3d}% Completed | {k}/29 [00:{k:02d}<00:51]"


def test_repeats_fold_with_a_count_and_a_matched_line_never_folds_into_a_plain_one() -> None:
    async def scenario() -> None:
        app = _LogApp(max_lines=1000)
        async with app.run_test(size=(100, 20)) as pilot:
            log = app.query_one(LogView)
            for _ in range(4):
                log.add_lines("spark2", RAY_BANNER)
            log.add_lines("spark2", [PROGRESS.format(p=k * 100 // 29, k=k) for k in range(1, 30)])
            log.add_lines("spark1", ["Ray runtime started."])  # another node: its own line
            error = "RayChannelTimeoutError: System error: Timed out waiting for object available"
            log.add_lines("spark2", [error, error], marks=((0, "ray-channel-timeout", "error"),))
            await pilot.pause()
            rows = log._rows()
            texts = [(e.node, e.text, e.repeats) for e in rows]
            assert ("spark2", "Ray runtime started.", 4) in texts
            assert [t for t in texts if t[1] == "Ray runtime started."] == [
                ("spark2", "Ray runtime started.", 4),
                ("spark1", "Ray runtime started.", 1),
            ]
            # the progress bar is one row showing its newest state and how often it moved
            progress = [e for e in rows if e.text.startswith("Loading safetensors")]
            assert len(progress) == 1 and progress[0].repeats == 29 and "29/29" in progress[0].text
            # the error stays a row of its own (its repeat, unmatched, is a row too)
            errors = [e for e in rows if e.text == error]
            assert [e.severity for e in errors] == ["error", None]
            assert log.total_lines == 4 * 8 + 29 + 1 + 2
            assert log.total_lines == sum(e.repeats for e in rows)  # nothing lost, all counted
            strip = log._render_entry(progress[0])
            assert strip.text.rstrip().endswith("×29")

    asyncio.run(scenario())


def test_filters_by_node_source_and_level_and_jump_to_wall_lines() -> None:
    async def scenario() -> None:
        app = _LogApp(max_lines=1000)
        async with app.run_test(size=(100, 10)) as pilot:
            log = app.query_one(LogView)
            log.add_lines("spark1", [f"serve line {w}" for w in "abcdefghijklmnop"], source="serve")
            log.add_lines("spark1", ["WARNING shm_broadcast: no block found"], source="serve")
            log.add_lines(
                "spark2",
                ["ray worker up", "ERROR ValueError: bad thing"],
                marks=((1, "some-wall", "error"),),
                source="container:ray-worker",
            )
            log.add_lines("spark1", [f"after line {w}" for w in "abcdefghijklmnop"], source="serve")
            await pilot.pause()
            log.origin = "container:ray-worker"
            assert [e.text for e in log._rows()] == ["ray worker up", "ERROR ValueError: bad thing"]
            log.origin = None
            log.level = "warning"
            assert [e.text for e in log._rows()] == [
                "WARNING shm_broadcast: no block found",
                "ERROR ValueError: bad thing",
            ]
            log.level = "error"
            log.node = "spark1"
            assert log._rows() == []
            log.node, log.level = None, "all"
            await pilot.pause()
            line = log.next_wall_line()
            await pilot.pause()
            assert line == 18 and log.follow is False
            top = int(log.scroll_offset.y)
            assert top <= line < top + log.size.height  # in view

    asyncio.run(scenario())


def test_wrap_shows_a_long_line_whole_on_several_rows() -> None:
    async def scenario() -> None:
        app = _LogApp(max_lines=1000)
        async with app.run_test(size=(60, 10)) as pilot:
            log = app.query_one(LogView)
            long = "ValueError: Free memory on device cuda:0 " + "x" * 150 + " END"
            log.add_lines("spark1", ["short", long])
            await pilot.pause()
            assert log.virtual_size.height == 2
            log.wrap = True
            await pilot.pause()
            assert log.virtual_size.height > 3
            shown = "".join(log.render_line(y).text for y in range(log.size.height))
            assert "END" in shown and "Free memory" in shown

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
