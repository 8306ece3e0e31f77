"""knowledge/, recipes/, the docs the product cites and the JSON Schema ship inside the wheel: a non-editable install, run elsewhere, finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from .conftest import ROOT


@pytest.mark.slow
def test_wheel_install_finds_knowledge_and_recipes(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # --no-deps/--no-build-isolation: the dependencies are already on this machine
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(ROOT)],
        check=True,
        cwd=tmp_path,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "import spark_tui.paths as p, sys;"
        "k, r = p.builtin_knowledge_dir(), p.builtin_recipes_dir();"
        "print(k); print(r);"
        "from spark_tui.event_lines import schema;"
        "docs = [p.doc(n) for n in ('cluster-yaml.md', 'json.md', 'recipes.md')];"
        "print(docs[0]);"
        "sys.exit(0 if '_data' in str(k) and any(k.glob('*.yaml')) and r.is_dir()"
        " and (r / 'SCHEMA.md').is_file() and all(d.is_file() for d in docs)"
        " and schema()['$defs']['event'] else 1)"
    )
    proc = subprocess.run(
        [str(py), "-I", "-c", code], capture_output=True, text=True, cwd=elsewhere, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert str(ROOT) not in proc.stdout
    lint = subprocess.run(
        [str(env_dir / "bin" / "spark-tui"), "kb", "lint"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert lint.returncode == 0 and "all valid" in lint.stdout, lint.stderr
    assert sys.executable != str(py)
