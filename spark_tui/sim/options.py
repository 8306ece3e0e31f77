"""Command-line options as the engines and Ray read them."""

from __future__ import annotations


def parse_options(args: list[str], short: bool = True) -> tuple[dict[str, object], list[str]]:
    """(options, other words): `--name=value`, `--name value`, `--flag` (True) and, with
    `short`, `-n value` / `-f`; a value never starts with `--`."""
    opts: dict[str, object] = {}
    words: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") or (short and a.startswith("-") and len(a) > 1):
            if "=" in a and a.startswith("--"):
                k, v = a.split("=", 1)
                opts[k] = v
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                opts[a] = args[i + 1]
                i += 1
            else:
                opts[a] = True
        else:
            words.append(a)
        i += 1
    return opts, words
