"""The engine command a container runs: `vllm serve …`, `python -m sglang.launch_server …`,
`python -m vllm.entrypoints.openai.api_server …`, parsed into a ServeSpec."""

from __future__ import annotations

from dataclasses import dataclass

from spark_tui.sim.options import parse_options


@dataclass
class ServeSpec:
    """A parsed `vllm serve …` / `python -m sglang.launch_server …` command."""

    kind: str  # vllm | sglang
    model: str
    args: dict[str, object]
    env: dict[str, str]

    def arg(self, *names: str, default: object = None) -> object:
        for n in names:
            if n in self.args:
                return self.args[n]
        return default

    def num(self, *names: str, default: float) -> float:
        v = self.arg(*names)
        try:
            return float(str(v)) if v is not None and v is not True else default
        except ValueError:
            return default

    @property
    def tp(self) -> int:
        return int(self.num("--tensor-parallel-size", "-tp", "--tp", "--tp-size", default=1))

    @property
    def port(self) -> int:
        return int(self.num("--port", default=8000 if self.kind == "vllm" else 30000))

    @property
    def cuda_graphs(self) -> bool:
        if self.kind == "sglang":
            return "--disable-cuda-graph" not in self.args
        if "--enforce-eager" in self.args:
            return False
        text = " ".join(f"{k} {v}" for k, v in self.args.items()).lower().replace('"', "")
        compact = text.replace(" ", "")
        return not any(
            w in compact
            for w in ("cudagraph_mode:none", "cudagraph_mode=none", "cudagraph_mode':'none")
        )


def parse_serve(argv: list[str], env: dict[str, str]) -> ServeSpec | None:
    """The engine command in argv, or None when argv is not one."""
    if not argv:
        return None
    kind = None
    rest: list[str] = []
    if argv[0] == "vllm" and len(argv) > 1 and argv[1] == "serve":
        kind, rest = "vllm", argv[2:]
    elif argv[0].startswith("python") and len(argv) > 2 and argv[1] == "-m":
        mod = argv[2]
        if mod == "sglang.launch_server":
            kind, rest = "sglang", argv[3:]
        elif mod == "vllm.entrypoints.openai.api_server":
            kind, rest = "vllm", argv[3:]
    if kind is None:
        return None
    args, words = parse_options(rest)
    model = next((w for w in words if w), "")  # the first word: the model
    model = str(args.get("--model") or args.get("--model-path") or model)
    return ServeSpec(kind, model, args, dict(env))
