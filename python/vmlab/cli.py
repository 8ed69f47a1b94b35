"""The ``vmlab`` console script: the Rust CLI, plus Python-only subcommands."""

from __future__ import annotations

import signal
import sys

from . import _core

# Subcommand -> one-line help (shown under the Rust CLI's own --help).
PYTHON_COMMANDS = {
    "demo": "Run built-in workloads under a few designs and print a comparison table (--quick: seconds)",
    "sweep": "Run a sweep spec (designs x swept keys x inputs x seeds) into a results store, resuming",
    "report": "Plots (PNG, SVG) and an HTML page from a results store: vmlab report STORE -o DIR",
    "reproduce": "Run a paper's experiments and regenerate its reproduction tables: vmlab reproduce PAPER [--quick]",
}


def _python_command(cmd: str, args: list[str]) -> int:
    if cmd == "demo":
        from .demo import main as command
    elif cmd == "report":
        from .report import main as command
    elif cmd == "reproduce":
        from .reproduce import main as command
    else:
        from .sweep import main as command
    return command(args)


def _native_signals() -> None:
    # The engine runs with the GIL released and never returns to Python's signal
    # handlers mid-run, so behave like the native binary: Ctrl-C ends the process
    # and a closed stdout pipe (`vmlab workloads | head`) ends it quietly.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _is_panic(e: BaseException) -> bool:
    # pyo3 raises PanicException (a BaseException) for Rust panics; it is not importable.
    return type(e).__name__ == "PanicException"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    argv[0] = "vmlab"
    cmd = argv[1] if len(argv) > 1 else None
    if cmd in PYTHON_COMMANDS:
        try:
            return _python_command(cmd, argv[2:])
        except _core.VmlabError as e:
            print(f"vmlab: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return 141

    _native_signals()
    sys.stdout.flush()
    try:
        code = _core.cli_main(argv)
    except BaseException as e:  # noqa: BLE001 - only a Rust panic lands here
        if not _is_panic(e):
            raise
        # The panic hook has already printed the message; exit like the native binary.
        return 101
    if code == 0 and (cmd in (None, "-h", "--help", "help") and len(argv) <= 2):
        print("\nPython-only commands (this `vmlab` script):")
        for name, text in PYTHON_COMMANDS.items():
            print(f"  {name:<10} {text}")
    return code


if __name__ == "__main__":
    sys.exit(main())
