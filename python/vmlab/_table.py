"""Tidy tables of runs: the one naming of statistics (dotted paths into the stats
document), workload parameters as the engine reads them, and the frame that
:meth:`vmlab.Results.to_pandas` and :func:`vmlab.load` both build."""

from __future__ import annotations

import math
import re
from pathlib import PurePath
from typing import Any, Iterable, Mapping

# --- Statistics: one name each, the dotted path into the stats document.

# Sections of the stats document that describe the run rather than count anything.
NOT_STATS = ("config", "source")


def lookup(doc: Any, path: str, default: Any = math.nan) -> Any:
    """The value at dotted ``path`` in ``doc`` (a list is indexed by position), or
    ``default`` when the document has no such path."""
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isascii() and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return default
    return cur


def stats(doc: Mapping[str, Any]) -> dict[str, int | float]:
    """Every scalar statistic of a stats document by its dotted path.

    Numbers (not booleans) nested in objects, and in lists of objects (per-level
    records such as ``tlb_levels.0.misses``); lists of plain numbers (histograms,
    distributions) and the ``config`` and ``source`` sections are left out."""
    out: dict[str, int | float] = {}
    for k, v in doc.items():
        if k not in NOT_STATS:
            _flatten(v, str(k), out)
    return out


def _flatten(v: Any, path: str, out: dict) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            _flatten(x, f"{path}.{k}", out)
    elif isinstance(v, list):
        if v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                _flatten(x, f"{path}.{i}", out)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out[path] = v


# --- Workload parameters, typed as the engine reads them.
#
# How each built-in workload reads each parameter (crates/vmlab-core/src/trace/synth/:
# Params::bytes, count, int, float and choice). The kind decides what a suffix means:
# "4K" is 4096 bytes but 4000 accesses. tests/python/test_export.py checks this table
# against the Rust sources.
COMMON_PARAM_KINDS = {"accesses": "count", "seed": "int", "instrs_per_access": "int", "pid": "int", "code": "bytes",
                      "base": "int"}
PARAM_KINDS: dict[str, dict[str, str]] = {
    "gups": {"footprint": "bytes"},
    "stream": {"footprint": "bytes", "stride": "bytes", "size": "int", "write_ratio": "float"},
    "stride": {"footprint": "bytes", "stride": "bytes", "streams": "int", "size": "int", "write_ratio": "float"},
    "pchase": {"footprint": "bytes", "node": "bytes"},
    "sparse": {"pages": "count", "space": "bytes", "layout": "choice", "order": "choice"},
    "shared": {"procs": "int", "pages": "count", "side": "choice", "burst": "count"},
    "graph": {"vertices": "count", "degree": "count"},
    "graph500": {"scale": "int", "edgefactor": "count", "kernel": "choice"},
    "kv": {"keys": "count", "theta": "float", "value_size": "bytes", "write_ratio": "float"},
    "xsbench": {"size": "choice", "gridpoints": "count"},
    "ycsb": {"rows": "count", "theta": "float", "read_ratio": "float", "requests": "int", "index": "choice", "btree_order": "int"},
    "sysbench": {"block_size": "bytes", "total_size": "bytes", "scope": "choice", "oper": "choice", "mode": "choice", "threads": "int"},
    "strawman": {"pages": "int", "spacing": "bytes", "line": "bytes", "fetch": "int"},
}

U64_MAX = (1 << 64) - 1
# Rust's str::trim: the Unicode White_Space characters (Python's str.strip() also takes
# U+001C..U+001F).
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
               "\u2028\u2029\u202f\u205f\u3000"
# Rust's u64 and f64 grammars (ASCII digits only; Python's int() and float() also take
# other digits, underscores and surrounding spaces).
_U64 = re.compile(r"\+?[0-9]+")
_HEX = re.compile(r"\+?[0-9a-fA-F]+")
_F64 = re.compile(r"[+-]?(?:(?i:inf|infinity|nan)|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _u64(s: str, radix: int = 10) -> int | None:
    if not (_U64 if radix == 10 else _HEX).fullmatch(s):
        return None
    n = int(s, radix)
    return n if n <= U64_MAX else None


def _f64(s: str) -> float | None:
    return float(s) if _F64.fullmatch(s) else None


def parse_bytes(text: str) -> int | None:
    """A byte size as the engine reads it (addr::parse_bytes): 4096, 4K, 2M, 1G, 4GiB,
    16kb; K/M/G/T/P are powers of 1024, any case. None if it is not one."""
    lower = text.strip(_WHITE_SPACE).translate(_ASCII_LOWER)
    stripped = lower[:-2] if lower.endswith("ib") else lower[:-1] if lower.endswith("b") else lower
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}.get(stripped[-1:], 1)
    n = _u64((stripped[:-1] if mult > 1 else stripped).strip(_WHITE_SPACE))
    return n * mult if n is not None and n * mult <= U64_MAX else None


def parse_count(text: str) -> int | None:
    """A count as the engine reads it (Params::count): 1000, 10k or 10K (10^3), 5M
    (10^6), 2G (10^9), 1e6. None if it is not one."""
    s = text.strip(_WHITE_SPACE)
    mult = {"k": 1000, "K": 1000, "M": 1_000_000, "G": 1_000_000_000}.get(s[-1:], 1)
    num = s[:-1] if mult > 1 else s
    n = _u64(num)
    if n is not None:
        return n * mult if n * mult <= U64_MAX else None
    f = _f64(num)
    if f is not None and f >= 0.0 and f.is_integer() and f * mult < 1.8e19:
        return int(f * mult)
    return None


def parse_int(text: str) -> int | None:
    """An integer as the engine reads it (Params::int): decimal or 0x hex, underscores
    ignored. None if it is not one."""
    s = text.strip(_WHITE_SPACE).replace("_", "")
    return _u64(s[2:], 16) if s.startswith("0x") else _u64(s)


def parse_float(text: str) -> float | None:
    """A finite number as the engine reads it (Params::float). None if it is not one."""
    f = _f64(text.strip(_WHITE_SPACE))
    return f if f is not None and math.isfinite(f) else None


_PARSERS = {"bytes": parse_bytes, "count": parse_count, "int": parse_int, "float": parse_float,
            "choice": lambda s: s.strip(_WHITE_SPACE)}


def param_kind(workload: str | None, name: str) -> str | None:
    """How the engine reads parameter ``name`` of ``workload``: "bytes", "count",
    "int", "float", "choice", or None for a parameter it does not know."""
    own = PARAM_KINDS.get(workload or "")
    if own is None:
        return None
    return own.get(name) or COMMON_PARAM_KINDS.get(name)


def typed_param(workload: str | None, name: str, value: Any) -> Any:
    """A workload parameter's value as the engine reads it (an int for sizes and counts,
    a float for fractions, the text for choices). A value that is not text, or that the
    engine would refuse, or of a parameter it does not know, is returned unchanged."""
    kind = param_kind(workload, name)
    if kind is None or not isinstance(value, str):
        return value
    typed = _PARSERS[kind](value)
    return value if typed is None else typed


# --- The frame.

def input_columns(source: Mapping[str, Any]) -> dict[str, Any]:
    """The columns naming a run's input: ``workload`` (a trace's file name for a trace
    run, so that grouping by workload keeps trace runs), ``trace`` (the trace's path) and
    one typed ``param.NAME`` column per workload parameter. ``source`` is
    ``{"workload": name, "params": {...}}`` or ``{"trace": path}``."""
    if source.get("trace") is not None:
        trace = str(source["trace"])
        return {"workload": PurePath(trace).name or trace, "trace": trace}
    workload = source.get("workload")
    cols: dict[str, Any] = {"workload": workload, "trace": None}
    for k, v in (source.get("params") or {}).items():
        cols[f"param.{k}"] = typed_param(workload, k, v)
    return cols


def doc_source(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A stats document's input in the results store's form: ``{"workload": name,
    "params": {...}}`` or ``{"trace": path}``."""
    src = doc.get("source") or {}
    if src.get("kind") == "trace":
        return {"trace": src.get("name")}
    return {"workload": src.get("name"), "params": dict(src.get("params") or {})}


def frame(records: Iterable[tuple[dict[str, Any], dict[str, Any]]], first: list[str], form: str = "wide"):
    """A DataFrame from (description, stats) pairs, one per run.

    Columns: ``first`` (always present, in that order), then the other description
    columns in order of appearance, then every stat by its dotted name. The ``seed``
    and ``param.*`` columns are typed: nullable ``Int64`` when every value is an
    integer, ``float64`` when every value is a number. ``form="long"`` gives one row per run and stat instead:
    the description columns, ``stat`` and ``value``; a stat a run lacks has no row."""
    import pandas as pd

    records = list(records)
    described: dict[str, None] = dict.fromkeys(first)
    stat_names: dict[str, None] = {}
    for desc, st in records:
        described.update(dict.fromkeys(desc))
        stat_names.update(dict.fromkeys(st))
    desc_cols = list(described)
    stat_cols = [k for k in stat_names if k not in described]
    if form == "long":
        pairs = [(i, k, v) for i, (_, st) in enumerate(records) for k, v in st.items() if k not in described]
        rows = [i for i, _, _ in pairs]
        stat_part = {"stat": pd.Series([k for _, k, _ in pairs], dtype=object),
                     "value": pd.Series([v for _, _, v in pairs], dtype="float64")}
    else:
        rows = list(range(len(records)))
        stat_part = {k: pd.Series([st.get(k) for _, st in records], dtype=None if any(st.get(k) is not None for _, st in records)
                                  else "float64") for k in stat_cols}
    columns = {}
    for c in desc_cols:
        values = [records[i][0].get(c) for i in rows]
        columns[c] = _typed_column(values) if c == "seed" or c.startswith("param.") else pd.Series(values, dtype=object if not values else None)
    columns.update(stat_part)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)))


def _typed_column(values: list):
    """Integers (and gaps) as nullable Int64, numbers as float64, anything else as is."""
    import pandas as pd

    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if present and all(isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63 for v in present):
        return pd.array(values, dtype="Int64")
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pd.Series(values, dtype="float64")
    return pd.Series(values, dtype=object)
