"""Start the TUI (imported by spark_tui.entry only when the TUI is wanted)."""

from __future__ import annotations

import os


def scrollback_lines() -> int:
    """Lines the log pane keeps ($SPARK_TUI_SCROLLBACK, default 100,000)."""
    raw = os.environ.get("SPARK_TUI_SCROLLBACK", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else 100_000


def run_tui(
    config: str | None, read_only: bool, scenario: str | None, keep_state: bool = False
) -> int:
    """The TUI on cluster.yaml, or on the simulated cluster (with `scenario`, or when
    there is no cluster.yaml)."""
    from spark_tui.session import open_cluster
    from spark_tui.tui.app import SparkTuiApp

    with open_cluster(
        config, scenario=scenario, read_only=read_only, keep_state=keep_state
    ) as session:
        app = SparkTuiApp(session, autoplay=session.plays_launch, scrollback=scrollback_lines())
        app.run()
    return app.return_code or 0
