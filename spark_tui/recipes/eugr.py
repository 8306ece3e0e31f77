"""eugr/spark-vllm-docker's recipe format (https://github.com/eugr/spark-vllm-docker,
run-recipe.py and launch-cluster.sh) read as a spark-tui Recipe."""

from __future__ import annotations

from typing import Any

from spark_tui.recipes.model import Recipe


def parse_eugr(data: Any, file: str) -> Recipe:
    from spark_tui.recipes.sparkrun import parse_sparkrun

    return parse_sparkrun(data, file)
