"""The ``vmlab`` console script: the Rust CLI, plus Python-only subcommands."""

from __future__ import annotations

import sys

from . import _core

PYTHON_COMMANDS = {"demo"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) > 1 and argv[1] in PYTHON_COMMANDS:
        try:
            if argv[1] == "demo":
                from .demo import main as demo_main

                return demo_main(argv[2:])
        except _core.VmlabError as e:
            print(f"vmlab: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
    argv[0] = "vmlab"
    sys.stdout.flush()
    code = _core.cli_main(argv)
    return code


if __name__ == "__main__":
    sys.exit(main())
