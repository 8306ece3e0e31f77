"""The `spark-tui` command: the TUI by default, a headless twin for everything else.

Kept light: `spark-tui --help` imports argparse and the small command modules
only; the engines and Textual are imported when a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Iterator

from spark_tui import __version__

# name -> module under spark_tui.cli with add_parser(subparsers) and run(args) -> int
COMMANDS = (
    "demo",
    "triage",
    "doctor",
    "recipes",
    "kb",
    "fix",
    "watch",
    "discover",
    "report",
    "trust",
    "up",
    "stop",
    "status",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark-tui",
        description=(
            "Bring up LLM serving across DGX Spark nodes: live panes for every node, "
            "log triage against a knowledge base of known walls, one-key fixes, relaunch. "
            "With no command: the TUI on ./cluster.yaml or ~/.config/spark-tui/cluster.yaml, "
            "or on a built-in simulated cluster when there is none."
        ),
    )
    parser.add_argument("--version", action="version", version=f"spark-tui {__version__}")
    parser.add_argument("--config", metavar="FILE", help="cluster.yaml to use")
    parser.add_argument(
        "--read-only", action="store_true", help="refuse every action that changes a node"
    )
    parser.add_argument(
        "--debug-log",
        metavar="FILE",
        help="append the libraries' log (SSH handshakes, errors with their traceback) to FILE "
        "(also: SPARK_TUI_DEBUG_LOG=FILE); otherwise it is not kept",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"spark_tui.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from spark_tui.errors import SparkTuiError
    from spark_tui.redact import redact, remember_environment

    remember_environment()  # HF_TOKEN exported in this shell shows only as ${HF_TOKEN}
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.read_only:  # the engine refuses every change from here on, whoever asks
        from spark_tui import policy

        policy.set_read_only(True)
    try:
        from spark_tui import debuglog

        debuglog.setup(args.debug_log)
        if args.command is None:
            from spark_tui.tui.launch import run_tui

            return run_tui(config=args.config, read_only=args.read_only, scenario=None)
        module = importlib.import_module(f"spark_tui.cli.{args.command}")
        with redacted_output():
            result = module.run(args)
        from spark_tui.cli import OpenTui

        if isinstance(result, OpenTui):
            from spark_tui.tui.launch import run_tui

            return run_tui(
                config=result.config,
                read_only=result.read_only,
                scenario=result.scenario,
                keep_state=result.keep_state,
            )
        return int(result or 0)
    except SparkTuiError as exc:
        print(redact(f"spark-tui: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # last resort: a file or directory spark-tui could not use (read-only, full, gone);
        # the places that know better say more, this keeps a traceback from the user
        return _last_resort(exc, _os_error_line(exc))
    except RecursionError as exc:
        return _last_resort(exc, "input nested too deep to handle")
    except Exception as exc:
        return _last_resort(exc, f"internal error: {type(exc).__name__}: {exc}", details=True)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """A headless command's stdout and stderr with every secret shown as ${NAME}."""
    from spark_tui import redact

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = redact.RedactingStream(out), redact.RedactingStream(err)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = out, err


def _os_error_line(exc: OSError) -> str:
    from spark_tui import paths

    reason = exc.strerror or str(exc) or type(exc).__name__
    files = [str(f) for f in (exc.filename, exc.filename2) if f]
    if not files:
        return reason
    line = f"{' -> '.join(files)}: {reason}"
    state = str(paths.state_dir())
    if any(f == state or f.startswith(state + "/") for f in files):
        line += " (spark-tui's state directory: make it writable, or set XDG_STATE_HOME)"
    return line


def _last_resort(exc: BaseException, line: str, details: bool = False) -> int:
    """One line on stderr (the traceback goes to the debug log when there is one), exit 1."""
    from spark_tui import debuglog

    debuglog.log.error("%s", line, exc_info=exc)
    suffix = f" ({debuglog.where()})" if details or debuglog.enabled() else ""
    from spark_tui.redact import redact

    print(redact(f"spark-tui: {line}{suffix}"), file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
