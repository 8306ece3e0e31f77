"""The headless command line: one module per command. Never imports Textual.

A command that ends in the TUI (`demo SCENARIO`) returns an OpenTui request;
spark_tui.entry, which sits outside the headless core, opens it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpenTui:
    """Ask the entry point to open the TUI (on a cluster file, or a simulated scenario)."""

    config: str | None = None
    read_only: bool = False
    scenario: str | None = None
    keep_state: bool = False  # a simulated scenario's journal and revisions outlive it
