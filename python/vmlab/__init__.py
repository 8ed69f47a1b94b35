"""vmlab: a laboratory for virtual-memory address translation.

    >>> import vmlab
    >>> r = vmlab.run("skylake", workload="gups", accesses="1M", footprint="1G")
    >>> r.summary()["l1_dtlb_miss_rate"]

The engine is Rust (``vmlab._core``); this package is its front door: ``run`` returns a
:class:`Result` with ``to_dict()`` and ``to_pandas()``.
"""

from ._core import VmlabError, TraceReader, version as _version
from .api import ArgumentError, Result, run, run_many, mrc, presets, workloads, trace_info, read_trace, pt_compare, compare
from .store import StoreError, load
from .sweep import sweep
from .report import report

__version__ = _version()
__all__ = ["run", "run_many", "mrc", "Result", "VmlabError", "ArgumentError", "StoreError", "presets", "workloads", "trace_info", "read_trace", "TraceReader", "pt_compare", "compare", "sweep", "load", "report"]
