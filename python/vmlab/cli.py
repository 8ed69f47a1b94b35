"""The ``vmlab`` console script: the Rust CLI, plus Python-only subcommands."""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

from . import _core
from ._files import OutputError
from ._signals import Terminated, exit_status, sigterm_as_interrupt

# Subcommand -> one-line help (shown under the Rust CLI's own --help).
PYTHON_COMMANDS = {
    "demo": "Run built-in workloads under a few designs and print a comparison table (--quick: seconds)",
    "sweep": "Run a sweep spec (designs x swept keys x inputs x seeds) into a results store, resuming",
    "report": "Charts (PNG, SVG) and tables in an HTML page from a results store: vmlab report STORE -o DIR",
    "export": "A results store as one flat table: vmlab export STORE -o OUT.csv|OUT.parquet",
    "reproduce": "Run a paper's experiments and regenerate its reproduction tables: vmlab reproduce PAPER|--all [--quick] [-j N] [--backend local|ray] [--address ADDR]",
}


def _python_command(cmd: str, args: list[str]) -> int:
    if cmd == "demo":
        from .demo import main as command
    elif cmd == "report":
        from .report import main as command
    elif cmd == "reproduce":
        from .reproduce import main as command
    elif cmd == "export":
        from .export import main as command
    else:
        from .sweep import main as command
    return command(args)


def _native_signals() -> None:
    # Behave like the native binary: SIGINT and SIGTERM stop the Rust command cleanly
    # (its handlers replace Python's; this process runs one command and exits), and a
    # closed stdout pipe (`vmlab workloads | head`) ends it quietly.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _core.install_signal_handlers()


def _qemu_plugin() -> None:
    # `vmlab trace --engine qemu` loads QEMU's tracing plugin from the package, where
    # scripts/setup.sh puts it, unless VMLAB_QEMU_PLUGIN names another.
    plugin = Path(__file__).with_name("libvmlab_qemu.so")
    if not os.environ.get("VMLAB_QEMU_PLUGIN") and plugin.is_file():
        os.environ["VMLAB_QEMU_PLUGIN"] = str(plugin)


def _is_panic(e: BaseException) -> bool:
    # pyo3 raises PanicException (a BaseException) for Rust panics; it is not importable.
    return type(e).__name__ == "PanicException"


class StdoutError(OutputError):
    """Standard output cannot be written (``> /dev/full``, a closed descriptor)."""

    def __init__(self, e: OSError):
        super().__init__(f"standard output: {os.strerror(e.errno)} (os error {e.errno})" if e.errno
                         else f"standard output: {e}")


class _CheckedStdout:
    """Standard output for a Python command: a write or flush that fails (a full disk,
    a closed descriptor) raises StdoutError, one line naming standard output as the Rust
    commands report it, where Python would raise OSError (a traceback) or argparse would
    drop the error (its --help exiting 0 with the text lost). A closed pipe stays a
    BrokenPipeError."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        if self.stream is None:  # started with descriptor 1 closed: Python drops what print writes
            raise StdoutError(OSError(errno.EBADF, os.strerror(errno.EBADF)))
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutError(e) from None

    def flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutError(e) from None

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _discard_stdout() -> None:
    """Point descriptor 1 at /dev/null: after a failed write to standard output, what
    Python still holds for it is dropped at exit instead of failing a second time (an
    "Exception ignored" message and status 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def _run_python_command(cmd: str, args: list[str]) -> int:
    stdout = sys.stdout
    checked = _CheckedStdout(stdout)
    sys.stdout = checked
    try:
        try:
            with sigterm_as_interrupt():
                try:
                    code = _python_command(cmd, args)
                except SystemExit:  # argparse: --help, or a usage error; what it printed must reach stdout
                    checked.flush()
                    raise
                checked.flush()
                return code
        except _core.VmlabError as e:
            print(f"vmlab: error: {e}", file=sys.stderr)
            if isinstance(e, StdoutError):
                _discard_stdout()
            return 1
        except KeyboardInterrupt as e:
            print(f"vmlab: interrupted by {'SIGTERM' if isinstance(e, Terminated) else 'SIGINT'}", file=sys.stderr)
            return exit_status(e)
        except BrokenPipeError:
            _discard_stdout()
            return 141
    finally:
        sys.stdout = stdout


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    argv[0] = "vmlab"
    cmd = argv[1] if len(argv) > 1 else None
    if cmd in PYTHON_COMMANDS:
        return _run_python_command(cmd, argv[2:])

    _native_signals()
    _qemu_plugin()
    if sys.stdout is not None:
        sys.stdout.flush()
    try:
        code = _core.cli_main(argv)
    except BaseException as e:  # noqa: BLE001 - only a Rust panic lands here
        if not _is_panic(e):
            raise
        # The panic hook has already printed the message; exit like the native binary.
        return 101
    if code == 0 and (cmd in (None, "-h", "--help", "help") and len(argv) <= 2):
        out = _CheckedStdout(sys.stdout)
        try:
            print("\nPython-only commands (this `vmlab` script):", file=out)
            for name, text in PYTHON_COMMANDS.items():
                print(f"  {name:<10} {text}", file=out)
            out.flush()
        except StdoutError as e:
            print(f"vmlab: error: {e}", file=sys.stderr)
            _discard_stdout()
            return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
