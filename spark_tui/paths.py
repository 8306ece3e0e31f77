"""Where spark-tui finds its built-in data and the user's own files."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _builtin(name: str) -> Path:
    # In a wheel the data sits in spark_tui/_data/; in a source checkout, at the top level.
    installed = _PACKAGE / "_data" / name
    return installed if installed.is_dir() else _PACKAGE.parent / name


def builtin_knowledge_dir() -> Path:
    """The knowledge base shipped with spark-tui (one YAML file per wall)."""
    return _builtin("knowledge")


def builtin_recipes_dir() -> Path:
    """The launch recipes shipped with spark-tui."""
    return _builtin("recipes")


def doc(name: str) -> Path:
    """A page of the user documentation (shipped in the wheel: errors cite it by path)."""
    return _builtin("docs") / name


def config_dir() -> Path:
    """~/.config/spark-tui (or $XDG_CONFIG_HOME/spark-tui)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "spark-tui"


def state_dir() -> Path:
    """~/.local/state/spark-tui (or $XDG_STATE_HOME/spark-tui): journal, recipe revisions."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "spark-tui"


def cache_dir() -> Path:
    """~/.cache/spark-tui (or $XDG_CACHE_HOME/spark-tui): things that can be made again."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "spark-tui"


def user_knowledge_dir() -> Path:
    return config_dir() / "knowledge"


def user_recipes_dir() -> Path:
    return config_dir() / "recipes"
