"""Files written whole or not at all: a temporary file beside the target, renamed over
it once complete (the same rule as the engine's files::AtomicFile)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from . import _core


class OutputError(_core.VmlabError):
    """An output file or directory that cannot be written; the message names it."""


def _fail(path: os.PathLike | str, e: OSError) -> OutputError:
    return OutputError(f"{os.fspath(path)}: cannot write: {e.strerror or e}")


@contextlib.contextmanager
def atomic_path(target: os.PathLike | str) -> Iterator[Path]:
    """A temporary path to write instead of ``target``; it replaces ``target`` when the
    block ends without an exception, and is removed otherwise."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.vmlab-tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as e:
        raise _fail(target, e) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_text(target: os.PathLike | str, text: str) -> None:
    """Write ``text`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text)


def make_dir(path: os.PathLike | str) -> Path:
    """Create an output directory (and its parents) or fail naming it."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fail(path, e) from None
    return Path(path)
