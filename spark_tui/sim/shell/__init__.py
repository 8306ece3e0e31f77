"""Runs command lines on a simulated node: the interpreter (interpreter.py) and its commands,
one module per family, gathered in one registry (registry.py).

The node's state changes only here, through the commands a real node would receive.
Unknown commands exit 127 as sh would.
"""

from __future__ import annotations

from spark_tui.sim.shell.context import Ctx, Out
from spark_tui.sim.shell.files import read_path
from spark_tui.sim.shell.interpreter import dispatch, run_main_process, run_script

__all__ = ["Ctx", "Out", "dispatch", "read_path", "run_main_process", "run_script"]
