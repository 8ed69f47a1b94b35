"""Files written whole or not at all: a temporary file beside the target, renamed over
it once complete (the same rule as the engine's files::AtomicFile); a directory's
files staged apart and moved in together once all are written."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from . import _core
from ._signals import signals_held


class OutputError(_core.VmlabError):
    """An output file or directory that cannot be written; the message names it."""


def _fail(path: os.PathLike | str, e: OSError) -> OutputError:
    return OutputError(f"{os.fspath(path)}: cannot write: {e.strerror or e}")


def path_arg(name: str, value: Any, optional: bool = False) -> str | None:
    """A path argument (str or os.PathLike) as text: not empty, no NUL character;
    an ArgumentError naming ``name`` otherwise."""
    from .api import _expect, _path_arg

    text = _path_arg(name, value, optional)
    if text is None:
        return None
    _expect(name, value, isinstance(text, str) and text != "" and "\0" not in text,
            "a path (a non-empty str or os.PathLike, without NUL characters)")
    return text


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


@contextlib.contextmanager
def staged_dir(target: os.PathLike | str, last: tuple[str, ...] = ()) -> Iterator[Path]:
    """A temporary directory to write ``target``'s files in. When the block ends without
    an exception they move into ``target`` (created if missing; files of the same name
    replaced, others left alone), those named in ``last`` after the rest, with SIGINT
    and SIGTERM held off meanwhile; on an exception or an interrupt ``target`` stays as
    it was and the staged files are removed.

    A missing ``target`` is staged beside it and renamed into place; an existing one
    inside it (a hidden directory), so that every move stays on its file system."""
    target = Path(target)
    try:
        exists = target.is_dir()
        if not exists and (target.exists() or target.is_symlink()):
            raise OutputError(f"{target}: cannot write: not a directory")
        if not exists:
            target.parent.mkdir(parents=True, exist_ok=True)
        where = target if exists else target.parent
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name or 'out'}.vmlab-tmp", dir=where))
    except OSError as e:
        raise _fail(target, e) from None
    try:
        yield stage
        with signals_held():
            if not exists:
                os.rename(stage, target)
                return
            names = sorted(os.listdir(stage), key=lambda n: (n in last, last.index(n) if n in last else 0, n))
            for name in names:
                os.replace(stage / name, target / name)
    except OSError as e:
        raise _fail(target, e) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
