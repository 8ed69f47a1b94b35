"""vmlab: a laboratory for virtual-memory address translation.

    >>> import vmlab
    >>> r = vmlab.run("skylake", workload="gups", accesses="1M", footprint="1G")
    >>> r.get("walks.latency.p99")
    >>> rs = vmlab.run_many({"4K": "skylake", "2M": ("skylake", {"os.page_size": "2M"})},
    ...                     workload="gups", accesses="1M", footprint="1G")
    >>> rs.to_pandas()          # one row per run, one column per statistic

The engine is Rust (``vmlab._core``); this package is its front door. A statistic has
one name everywhere, its dotted path in the stats document (``walks.latency.p99``):
:meth:`Result.get`, :meth:`Result.to_pandas`, :meth:`Results.to_pandas`,
:func:`to_frame`, :func:`load` and :func:`export` (docs/python.md).
"""

from ._core import VmlabError, TraceReader, version as _version
from .api import (ArgumentError, Result, Results, run, run_many, to_frame, mrc, presets, workloads, trace_info, read_trace,
                  pt_compare, compare)
from .store import StoreError, load
from .export import ExportError, export
from .sweep import sweep
from .report import report

__version__ = _version()
__all__ = ["run", "run_many", "mrc", "Result", "Results", "to_frame", "VmlabError", "ArgumentError", "StoreError",
           "ExportError", "presets", "workloads", "trace_info", "read_trace", "TraceReader", "pt_compare", "compare", "sweep",
           "load", "export", "report"]
