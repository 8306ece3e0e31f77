"""Start the TUI (imported by spark_tui.entry only when the TUI is wanted)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

    from spark_tui.session import Session


def scrollback_lines() -> int:
    """Lines the log pane keeps ($SPARK_TUI_SCROLLBACK, default 100,000)."""
    raw = os.environ.get("SPARK_TUI_SCROLLBACK", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else 100_000


def open_app(
    config: str | None, read_only: bool, scenario: str | None, keep_state: bool = False
) -> tuple[App[Any], Session | None]:
    """The app to run and the session it runs on: the TUI on cluster.yaml or the simulated
    cluster; or, when cluster.yaml cannot be read at all, an app that says why (file and
    line) — never a traceback."""
    from spark_tui.errors import SparkTuiError
    from spark_tui.session import Session
    from spark_tui.tui.app import SparkTuiApp

    try:
        session = Session.open(
            config, scenario=scenario, read_only=read_only, keep_state=keep_state
        )
    except SparkTuiError as exc:
        from spark_tui.tui.config_problem import ConfigProblemApp

        return ConfigProblemApp(str(exc), config), None
    try:
        app = SparkTuiApp(session, autoplay=session.plays_launch, scrollback=scrollback_lines())
    except BaseException:
        session.close()
        raise
    return app, session


def run_tui(
    config: str | None, read_only: bool, scenario: str | None, keep_state: bool = False
) -> int:
    """The TUI on cluster.yaml, or on the simulated cluster (with `scenario`, or when
    there is no cluster.yaml)."""
    app, session = open_app(config, read_only, scenario, keep_state)
    try:
        code = app.run()
    finally:
        if session is not None:
            session.close()
    if session is None:  # the cluster could not be opened: bad input
        return 2 if code is None else int(code)
    return app.return_code or 0
