"""What the simulator knows about the models of the Spark write-ups: size on disk, shards, speed.

Sizes and decode rates are the Spark write-ups' figures; an unknown model gets middling ones.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class ModelInfo:
    total_gb: float  # weights on disk, all ranks together
    shards: int
    tok_s: float  # measured decode rate on 2-3 Sparks
    arch: str


# (substring of the model id, lower case) -> figures; first match wins
KNOWN: tuple[tuple[str, ModelInfo], ...] = (
    ("minimax-m2.7-nvfp4", ModelInfo(130.6, 29, 36.6, "MiniMaxM2ForCausalLM")),  # a Spark write-up
    ("minimax-m2.7-mxfp4", ModelInfo(115.0, 26, 30.0, "MiniMaxM2ForCausalLM")),  # a Spark write-up
    ("minimax-m2.7", ModelInfo(229.0, 48, 26.0, "MiniMaxM2ForCausalLM")),  # FP8, a Spark write-up
    ("minimax-m3", ModelInfo(243.0, 50, 6.0, "MiniMaxM3ForCausalLM")),  # a Spark write-up
    ("minimax-m2.5", ModelInfo(126.0, 26, 17.0, "MiniMaxM2ForCausalLM")),  # a Spark write-up
    ("deepseek-v4", ModelInfo(160.0, 46, 44.0, "DeepseekV4ForCausalLM")),  # a Spark write-up
    # one Spark alone: MXFP4 weights, ~65 GB (openai/gpt-oss-120b's model card)
    ("gpt-oss-120b", ModelInfo(65.3, 15, 38.0, "GptOssForCausalLM")),
)
DEFAULT = ModelInfo(100.0, 20, 20.0, "AutoModelForCausalLM")
# GB10 reads weights at ~0.22 GB/s per node in these stories (67 GB in ~5 minutes, a Spark write-up)
LOAD_GB_PER_S = 0.22


def info(model: str) -> ModelInfo:
    low = model.lower()
    for key, mi in KNOWN:
        if key in low:
            return mi
    return DEFAULT
