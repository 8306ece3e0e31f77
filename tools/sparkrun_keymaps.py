"""Write spark_tui/recipes/sparkrun_keys.json from an installed sparkrun's own source.

    python3.12 -m venv /tmp/srvenv && /tmp/srvenv/bin/pip install sparkrun==0.4.2
    /tmp/srvenv/bin/python tools/sparkrun_keymaps.py spark_tui/recipes/sparkrun_keys.json

What a command-less sparkrun recipe becomes depends on sparkrun's recipe-key -> flag maps
(`defaults.max_model_len` -> `--max-model-len`), which keys are on/off switches, and the
environment sparkrun sets in every container. spark-tui reads them from this data file, so
updating to a new sparkrun is running this script against it, never editing a hand copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: str) -> int:
    import sparkrun
    from sparkrun.builders import eugr as eugr_builder
    from sparkrun.core import env_templates
    from sparkrun.platforms import dgx_spark
    from sparkrun.runtimes import _vllm_common as vllm
    from sparkrun.runtimes import sglang
    from sparkrun.runtimes.sglang import SglangRuntime
    from sparkrun.runtimes.vllm_distributed import VllmDistributedRuntime

    def runtime_env(cls: type) -> dict[str, dict[str, str]]:
        rt = cls.__new__(cls)  # the env methods read no instance state
        return {
            "common": dict(rt.get_common_env()),
            "cluster": dict(rt.get_cluster_env("HEAD", 2)),
        }

    data = {
        "sparkrun": sparkrun.__version__,
        "source": f"https://pypi.org/project/sparkrun/{sparkrun.__version__}/",
        "generated_by": "tools/sparkrun_keymaps.py",
        "vllm": {
            "flags": dict(vllm.VLLM_FLAG_MAP),
            "bool": sorted(vllm.VLLM_BOOL_FLAGS),
            "negatable": sorted(vllm.VLLM_NEGATABLE_BOOL_FLAGS),
            "env": runtime_env(VllmDistributedRuntime),
        },
        "sglang": {
            "flags": dict(sglang._SGLANG_FLAG_MAP),
            "bool": sorted(sglang._SGLANG_BOOL_FLAGS),
            "negatable": [],
            "env": runtime_env(SglangRuntime),
        },
        "platform_env": {k: dict(v) for k, v in dgx_spark._DGX_SPARK_RUNTIME_ENV.items()},
        "env_template_launch_fields": sorted(env_templates.LAUNCH_FIELDS),
        # eugr's nightly ":latest" images sparkrun's eugr builder replaces by its own pull
        # (unless build_args ask for a build)
        "image_substitutes": {
            **{
                i: eugr_builder.GHCR_EUGR_NIGHTLY_LATEST
                for i in eugr_builder.EUGR_NIGHTLY_LATEST_SENTINELS
            },
            **{
                i: eugr_builder.GHCR_EUGR_NIGHTLY_B12X_LATEST
                for i in eugr_builder.EUGR_B12X_LATEST_SENTINELS
            },
        },
        "pull_compatible_build_args": sorted(eugr_builder._PULL_COMPATIBLE_BUILD_ARGS),
    }
    Path(out).write_text(json.dumps(data, indent=1) + "\n")
    print(
        f"sparkrun {data['sparkrun']}: {len(data['vllm']['flags'])} vLLM keys, "
        f"{len(data['sglang']['flags'])} SGLang keys -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
