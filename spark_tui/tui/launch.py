"""Start the TUI (imported by spark_tui.entry only when the TUI is wanted)."""

from __future__ import annotations


def run_tui(config: str | None, read_only: bool, scenario: str | None) -> int:
    from spark_tui.tui.app import SparkTuiApp

    app = SparkTuiApp(config=config, read_only=read_only, scenario=scenario)
    app.run()
    return app.return_code or 0
