"""Re-make the README's screenshots: `python screenshots/make.py` (from the repository root).

The same app as the snapshot tests (tests/tui_snapshot_app.py: a three-node cluster,
frozen clock, a fixed replay of readings, real vLLM log lines and the diagnoses
the knowledge base makes of them), exported as SVG.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual._doc import take_svg_screenshot  # noqa: E402

from tests.tui_snapshot_app import (  # noqa: E402
    SnapshotApp,
    bringup_step,
    freeze_stamps,
    select_first_diagnosis,
)

freeze_stamps()

SHOTS = {
    "main.svg": dict(terminal_size=(120, 40)),
    "diagnosis.svg": dict(terminal_size=(120, 40), run_before=select_first_diagnosis),
    "fix-preview.svg": dict(
        terminal_size=(120, 40), run_before=select_first_diagnosis, press=["a"]
    ),
    "bringup-recipe.svg": dict(terminal_size=(120, 40), run_before=bringup_step("recipe")),
    "bringup-launch.svg": dict(terminal_size=(120, 40), run_before=bringup_step("launch")),
    "narrow-80x24.svg": dict(terminal_size=(80, 24)),
    "one-node-160x48.svg": dict(terminal_size=(160, 48), nodes=1),
}


def main() -> int:
    out = Path(__file__).resolve().parent
    for name, options in SHOTS.items():
        options = dict(options)
        app = SnapshotApp(nodes=options.pop("nodes", 3))
        svg = take_svg_screenshot(app=app, title="spark-tui", **options)
        (out / name).write_text(svg, encoding="utf-8")
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
