"""Looks of every screen, as SVG snapshots (`pytest --snapshot-update` re-makes them;
a change is reviewed like code). All on tests/tui_snapshot_app.py: frozen clock,
no live threads, no cursor blink; three nodes or one, at 80x24, 120x40 and 160x48."""

from __future__ import annotations

import pytest

from spark_tui.bringup import BRINGUP_STEPS
from tests.tui_snapshot_app import SnapshotApp, bringup_step, freeze_stamps, select_first_diagnosis


@pytest.fixture(autouse=True)
def _frozen_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    freeze_stamps(monkeypatch)


SIZES = [(80, 24), (120, 40), (160, 48)]


class TestMainScreen:
    @pytest.mark.parametrize("nodes", [3, 1])
    @pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
    def test_main_screen(self, snap_compare, size: tuple[int, int], nodes: int) -> None:
        assert snap_compare(SnapshotApp(nodes=nodes), terminal_size=size)

    def test_diagnosis_details(self, snap_compare) -> None:
        assert snap_compare(
            SnapshotApp(), terminal_size=(120, 40), run_before=select_first_diagnosis
        )

    def test_help(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), press=["question_mark"])

    def test_log_warnings_and_errors_only(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), press=["v"])

    def test_log_wrapped_on_one_node(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(nodes=1), terminal_size=(80, 24), press=["w"])

    def test_next_wall_line(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), press=["g", "n"])


class TestFixModal:
    @pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
    def test_preview_modal(self, snap_compare, size: tuple[int, int]) -> None:
        assert snap_compare(
            SnapshotApp(), terminal_size=size, run_before=select_first_diagnosis, press=["a"]
        )

    def test_preview_modal_read_only(self, snap_compare) -> None:
        assert snap_compare(
            SnapshotApp(read_only=True),
            terminal_size=(120, 40),
            run_before=select_first_diagnosis,
            press=["a"],
        )

    def test_relaunch_preview(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), press=["r"])


class TestBringUp:
    @pytest.mark.parametrize("step", [s for s, _t in BRINGUP_STEPS])
    def test_step(self, snap_compare, step: str) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), run_before=bringup_step(step))

    def test_recipe_step_at_80x24(self, snap_compare) -> None:
        assert snap_compare(
            SnapshotApp(), terminal_size=(80, 24), run_before=bringup_step("recipe")
        )
