"""``vmlab export STORE -o OUT.csv|OUT.parquet``: a results store as one flat table.

The table is :func:`vmlab.load`'s: one row per run, every statistic a column named by
its dotted path, workload parameters typed. The file is written whole or not at all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Iterator

from . import _core
from ._files import OutputError, atomic_path
from .api import _bool_arg, _expect, _form_arg, _path_arg
from .store import load

FORMATS = ("csv", "parquet")
# Output suffixes that name a format; a CSV file may also be compressed.
_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}


class ExportError(_core.VmlabError):
    """A results store that cannot be exported as asked; the message names the file."""


def _format_of(out: Path, fmt: str | None) -> tuple[str, str | None]:
    """(format, CSV compression) from ``fmt`` or the output's suffixes."""
    suffixes = [s.lower() for s in out.suffixes[-2:]]
    compression = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    named = _SUFFIXES.get(suffixes[-2] if compression and len(suffixes) == 2 else (suffixes[-1] if suffixes else ""))
    if fmt is None:
        if named is None:
            raise ExportError(f"{out}: cannot tell the format from the file name: end it in .csv or .parquet, "
                              "or give the format (--format csv|parquet)")
        fmt = named
    if fmt == "parquet" and compression:
        raise ExportError(f"{out}: a Parquet file is compressed inside; drop the {suffixes[-1]} suffix")
    return fmt, compression if fmt == "csv" else None


def _for_parquet(df):
    """Columns Parquet can hold: a column of mixed values (a swept key given both as a
    number and as a string, a parameter the engine would refuse) or of values Parquet
    has no type for (lists, integers beyond 64 bits) becomes text throughout."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object:
            present = [v for v in df[c] if not _absent(v)]
            kinds = {type(v) for v in present}
            if len(kinds) > 1 or not kinds <= {str, int, float, bool} or not all(
                    -(1 << 63) <= v < 1 << 63 for v in present if type(v) is int):
                df[c] = [None if _absent(v) else str(v) for v in df[c]]
    return df


def _absent(v) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


@contextlib.contextmanager
def _output(target: Path) -> Iterator[Path]:
    """Where to write ``target``: beside it, renamed over it when complete
    (:func:`atomic_path`); a device or FIFO (``/dev/stdout``), which cannot be renamed
    over, is written in place, as the engine's files::AtomicFile does."""
    if target.exists() and not target.is_file() and not target.is_dir():
        try:
            yield target
        except BrokenPipeError:
            raise  # a reader that stopped (`vmlab export ... -o /dev/stdout | head`): the CLI ends quietly
        except OSError as e:
            raise OutputError(f"{target}: cannot write: {e.strerror or e}") from None
    else:
        with atomic_path(target) as tmp:
            yield tmp


def export(store: str | os.PathLike, out: str | os.PathLike, *, format: str | None = None, form: str = "wide",
           include_errors: bool = False) -> Path:
    """Write a results store's runs to a CSV or Parquet file.

    Parameters
    ----------
    store : str or os.PathLike
        A results store written by :func:`vmlab.sweep` (only read).
    out : str or os.PathLike
        The file to write: replaced whole once complete, never left half-written (a
        device or FIFO such as ``/dev/stdout`` is written in place).
    format : {"csv", "parquet"}, optional
        Default: from ``out``'s suffix (``.csv``, ``.csv.gz``, ``.csv.bz2``,
        ``.csv.xz``, ``.parquet``, ``.pq``).
    form : {"wide", "long"}
        One row per run (``"wide"``) or per run and statistic (``"long"``), as
        :func:`vmlab.load`.
    include_errors : bool
        Keep the failed runs (``status`` ``"error"``, the message in ``error``).

    Returns
    -------
    pathlib.Path
        ``out``.

    Raises
    ------
    ExportError
        No format given or named by the suffix, Parquet without pyarrow installed
        (``pip install 'vmlab[parquet]'``), ``out`` is the store itself, or the
        Parquet writer refuses the table (named).
    StoreError
        The store is missing, not a results store, or damaged (named).
    OutputError
        ``out`` cannot be written (named).
    ArgumentError
        An argument of the wrong type or value (named).
    """
    store_path = _path_arg("store", store, optional=False)
    target = Path(_path_arg("out", out, optional=False))
    if format is not None:
        _expect("format", format, isinstance(format, str) and format in FORMATS, '"csv" or "parquet"')
    fmt, compression = _format_of(target, format)
    form = _form_arg(form)
    include_errors = _bool_arg("include_errors", include_errors)
    if os.path.exists(store_path) and os.path.exists(target) and os.path.samefile(store_path, target):
        raise ExportError(f"{target}: is the results store itself; choose another output file")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ExportError(f"{target}: writing Parquet needs pyarrow: pip install 'vmlab[parquet]'") from None
    df = load(store_path, include_errors=include_errors, form=form)
    with _output(target) as tmp:
        if fmt == "csv":
            df.to_csv(tmp, index=False, compression=compression)
        else:
            import pyarrow as pa

            try:
                _for_parquet(df).to_parquet(tmp, index=False, engine="pyarrow")
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as e:
                raise ExportError(f"{target}: cannot write Parquet: {e}") from None
    return target


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other vmlab error
        self.exit(2, f"vmlab: error: export: {message} (try `vmlab export --help`)\n")


def main(argv: list[str]) -> int:
    ap = _Parser(prog="vmlab export", description="A results store as one flat table, CSV or Parquet: one row per run, "
                                                  "every statistic a column named by its dotted path (docs/python.md).")
    ap.add_argument("store", help="results store (written by vmlab sweep)")
    ap.add_argument("-o", "--out", required=True, help="output file: .csv (.csv.gz, .csv.bz2, .csv.xz) or .parquet")
    ap.add_argument("--format", choices=FORMATS, help="default: from the output's suffix")
    ap.add_argument("--long", action="store_true", help="one row per run and statistic (columns stat, value)")
    ap.add_argument("--include-errors", action="store_true", help="keep the failed runs (status, error)")
    args = ap.parse_args(argv)
    out = export(args.store, args.out, format=args.format, form="long" if args.long else "wide",
                 include_errors=args.include_errors)
    if out.is_file():  # not into the table written to /dev/stdout
        print(out)
    return 0

