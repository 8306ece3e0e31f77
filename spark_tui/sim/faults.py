"""What a scenario breaks beyond the nodes' memory and files: data from scenarios.yaml's
`faults:` that the engine and the commands read (the walls beyond the first write-ups)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

OS_NCCL = "/usr/lib/aarch64-linux-gnu/libnccl.so.2.28.9"
WHEEL_NCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"
OS_NCCL_BYTES = 253847384
WHEEL_NCCL_BYTES = 261928192


@dataclass(frozen=True)
class Faults:
    """The cluster-wide faults of a scenario (none by default)."""

    # serving wedges this long after it starts, under a client's steady load (serving-stall):
    # tokens frozen, power ~22 W, SM ~96 %, /health still answering
    wedge_after_s: float | None = None
    # libnccl.so.2 builds in the serving image: 2 = the OS's and the pip wheel's (nccl-dual-build)
    nccl_builds: int = 1
    # (k, n): shard k of n is truncated on one node's disk, so every weight load dies there
    corrupt_shard: tuple[int, int] | None = None
    corrupt_node: str | None = None  # the node whose copy is truncated (None: the last node)

    def wedge_at(self, serving_from: float, env: dict[str, str]) -> float | None:
        """When an engine serving from `serving_from` with `env` wedges (None: never).

        With two NCCL builds the wedge is theirs: a process that preloads the OS build has one
        build and does not wedge (vllm-project/vllm#42354)."""
        if self.wedge_after_s is None:
            return None
        if self.nccl_builds >= 2 and "libnccl.so.2" in env.get("LD_PRELOAD", ""):
            return None
        return serving_from + self.wedge_after_s

    def nccl_files(self) -> list[tuple[str, int, str]]:
        """(path, size, sha256) of every libnccl.so.2 file in the serving image."""
        wheel = (WHEEL_NCCL_BYTES, "wheel") if self.nccl_builds >= 2 else (OS_NCCL_BYTES, "os")
        files = [(OS_NCCL, OS_NCCL_BYTES, "os"), (WHEEL_NCCL, *wheel)]
        return [(path, size, _digest(build)) for path, size, build in files]


def _digest(build: str) -> str:
    return hashlib.sha256(f"{build}:libnccl".encode()).hexdigest()
