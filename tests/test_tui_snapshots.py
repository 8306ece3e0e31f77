"""Looks of every screen, as SVG snapshots (`pytest --snapshot-update` re-makes them;
a change is reviewed like code). All on tests/tui_snapshot_app.py: frozen clock,
no live threads, no cursor blink."""

from __future__ import annotations

import pytest

from spark_tui.bringup import BRINGUP_STEPS
from tests.tui_snapshot_app import SnapshotApp, bringup_step, select_first_diagnosis


class TestMainScreen:
    def test_main_screen(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40))

    def test_diagnosis_details(self, snap_compare) -> None:
        assert snap_compare(
            SnapshotApp(), terminal_size=(120, 40), run_before=select_first_diagnosis
        )

    def test_narrow_80x24(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(80, 24))

    def test_help(self, snap_compare) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), press=["question_mark"])


class TestFixModal:
    def test_preview_modal(self, snap_compare) -> None:
        assert snap_compare(
            SnapshotApp(), terminal_size=(120, 40), run_before=select_first_diagnosis, press=["a"]
        )

    def test_preview_modal_read_only(self, snap_compare) -> None:
        assert snap_compare(
            SnapshotApp(read_only=True),
            terminal_size=(120, 40),
            run_before=select_first_diagnosis,
            press=["a"],
        )


class TestBringUp:
    @pytest.mark.parametrize("step", [s for s, _t in BRINGUP_STEPS])
    def test_step(self, snap_compare, step: str) -> None:
        assert snap_compare(SnapshotApp(), terminal_size=(120, 40), run_before=bringup_step(step))
