"""The Python API over the Rust engine."""

from __future__ import annotations

import collections.abc as abc
import json
import math
import os
from typing import Any, Iterable, Iterator, Mapping, Sequence, Union

from . import _core

Overrides = Union[None, Mapping[str, Any], Sequence[str]]


class ArgumentError(_core.VmlabError, TypeError):
    """A Python argument of the wrong type or out of range; the message names it. Also a
    TypeError, as Python's own argument errors are."""


def _expect(name: str, value: Any, ok: bool, what: str) -> None:
    if not ok:
        raise ArgumentError(f"argument `{name}` must be {what}, not {type(value).__name__} {value!r:.60}")


def _path_arg(name: str, value: Any, optional: bool = True) -> str | None:
    """A path argument (str or os.PathLike) as text."""
    if value is None and optional:
        return None
    _expect(name, value, isinstance(value, (str, os.PathLike)), "a path (str or os.PathLike)")
    return os.fspath(value)


def _bool_arg(name: str, value: Any) -> bool:
    _expect(name, value, isinstance(value, bool), "True or False")
    return value


def _count_arg(name: str, value: Any, least: int = 0) -> int:
    _expect(name, value, isinstance(value, int) and not isinstance(value, bool) and least <= value < 1 << 32,
            f"an integer from {least} to 2^32-1")
    return value


def _names_arg(name: str, value: Any) -> list[str]:
    """A list of names (a lone string is refused: it would be read letter by letter)."""
    _expect(name, value, not isinstance(value, (str, bytes)) and isinstance(value, abc.Iterable), "a list of strings")
    items = list(value)
    _expect(name, value, all(isinstance(x, (str, os.PathLike)) for x in items), "a list of strings")
    return [os.fspath(x) for x in items]


def _override_list(overrides: Overrides) -> list[str]:
    """Accept {"key": value} or ["key=value", ...]; values become TOML text."""
    if overrides is None:
        return []
    _expect("overrides", overrides, isinstance(overrides, abc.Mapping) or (not isinstance(overrides, (str, bytes)) and isinstance(overrides, abc.Iterable)),
            'a dict {"key": value} or a list of "key=value" strings')
    if isinstance(overrides, Mapping):
        out = []
        for k, v in overrides.items():
            if isinstance(v, bool):
                text = "true" if v else "false"
            elif isinstance(v, (list, tuple)):
                text = "[" + ", ".join(json.dumps(x) if isinstance(x, str) else str(x) for x in v) + "]"
            else:
                text = str(v)
            out.append(f"{k}={text}")
        return out
    items = list(overrides)
    _expect("overrides", overrides, all(isinstance(o, str) for o in items), 'a dict {"key": value} or a list of "key=value" strings')
    return items


class Result:
    """The stats document of one run (schema ``vmlab.stats/1``, docs/metrics.md)."""

    def __init__(self, doc: dict):
        self._doc = doc

    def to_dict(self) -> dict:
        return self._doc

    def __getitem__(self, key: str) -> Any:
        return self._doc[key]

    def get(self, path: str, default: float = math.nan) -> Any:
        """A value by slash path, e.g. ``r.get("walks/latency/p99")``; NaN if absent."""
        cur: Any = self._doc
        for part in path.strip("/").split("/"):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                return default
        return cur

    def to_pandas(self):
        """A long table of every numeric counter: columns section, name, metric, value."""
        import pandas as pd

        rows = []
        for section in ("totals", "walks", "faults", "page_table", "memory", "cycles"):
            for metric, value in _flatten(self._doc.get(section, {})):
                rows.append((section, section, metric, value))
        for section in ("tlb", "walk_caches", "caches"):
            for name, counters in self._doc.get(section, {}).items():
                for metric, value in _flatten(counters):
                    rows.append((section, name, metric, value))
        for lvl in self._doc.get("tlb_levels", []):
            for metric, value in _flatten(lvl):
                rows.append(("tlb_levels", f"level{lvl.get('level')}", metric, value))
        for size, n in self._doc.get("page_sizes", {}).items():
            rows.append(("page_sizes", size, "mapped_pages", n))
        return pd.DataFrame(rows, columns=["section", "name", "metric", "value"])

    def tlb_table(self):
        """One row per TLB structure."""
        import pandas as pd

        tlb = self._doc.get("tlb", {})
        df = pd.DataFrame.from_dict(tlb, orient="index")
        df.index.name = "structure"
        return df

    def cache_table(self):
        """One row per cache level."""
        import pandas as pd

        df = pd.DataFrame.from_dict(self._doc.get("caches", {}), orient="index")
        df.index.name = "cache"
        return df

    def _l1_data_tlb(self) -> tuple[float, float]:
        """(lookups, misses) of the first TLB level on the data side."""
        side = self._doc.get("tlb_levels_by_side", {}).get("data") or []
        if side and isinstance(side[0], dict):
            return _num(side[0].get("lookups")), _num(side[0].get("misses"))
        # Older documents: rebuild it from the level-1 data/unified structures. They are
        # probed together and a page lives in one of them, so the level's lookups are
        # the most any one saw and its hits add up.
        l1 = [t for t in self._doc.get("tlb", {}).values()
              if isinstance(t, dict) and t.get("level") == 1 and t.get("serves") in ("data", "unified")]
        if not l1:
            return math.nan, math.nan
        lookups = max(_num(t.get("lookups")) for t in l1)
        return lookups, lookups - sum(_num(t.get("hits")) for t in l1)

    def summary(self) -> dict:
        """Headline metrics as a flat dict (NaN where a run has no such number)."""
        levels = self._doc.get("tlb_levels") or []
        last = levels[-1] if levels and isinstance(levels[-1], dict) else {}
        d_lookups, d_misses = self._l1_data_tlb()
        return {
            "accesses": self.get("totals/accesses"),
            "instructions": self.get("totals/instructions"),
            "translations": self.get("totals/translations"),
            "l1_dtlb_lookups": d_lookups,
            "l1_dtlb_misses": d_misses,
            "l1_dtlb_miss_rate": (d_misses / d_lookups) if d_lookups else math.nan,
            "last_level_tlb_misses": _num(last.get("misses")),
            "walks": self.get("walks/count"),
            "walk_refs": self.get("walks/refs"),
            "refs_per_walk": self.get("walks/refs_per_walk"),
            "walk_latency_mean": self.get("walks/latency/mean"),
            "walk_latency_p99": self.get("walks/latency/p99"),
            "faults": self.get("faults/count"),
            "page_table_bytes": self.get("page_table/bytes"),
            "translation_cpki": self.get("cycles/translation_per_kilo_instruction"),
            # The time model's (NaN unless time.model = "ooo").
            "cycles": self.get("time/cycles"),
            "ipc": self.get("time/ipc"),
            "cpi_translation": self.get("time/cpi_stack/translation"),
            "mlp": self.get("time/mlp"),
        }

    def __repr__(self) -> str:
        s = self.summary()
        src = self._doc.get("source", {})
        return (
            f"<vmlab.Result {src.get('kind')}:{src.get('name')} accesses={s['accesses']} "
            f"walks={s['walks']} l1_dtlb_miss_rate={s['l1_dtlb_miss_rate']:.4f} "
            f"translation_cpki={s['translation_cpki']:.2f}>"
        )


def _num(v: Any) -> float:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _flatten(d: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(d, dict):
        for k, v in d.items():
            if k in ("histogram", "config", "details", "page_sizes"):
                continue
            yield from _flatten(v, f"{prefix}{k}." if not isinstance(v, (int, float)) else f"{prefix}{k}")
    elif isinstance(d, bool):
        return
    elif isinstance(d, (int, float)):
        yield prefix.rstrip("."), d


def run(
    config: str = "skylake",
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    overrides: Overrides = None,
    progress: bool = False,
    **params: Any,
) -> Result:
    """Simulate a trace file or a built-in workload under a preset or TOML config.

    ``overrides`` are config keys, as a dict or a list of ``"key=value"``;
    ``params`` are workload parameters (``accesses="1M"``, ``footprint="4G"``).
    Raises :class:`vmlab.VmlabError` with a one-line message on bad input.
    """
    text = _core.run(_path_arg("config", config, optional=False), _override_list(overrides), progress=_bool_arg("progress", progress),
                     **_source_kwargs(trace, workload, params))
    return Result(json.loads(text))


def _source_kwargs(trace, workload, params: dict) -> dict:
    """The source arguments of the _core calls, checked."""
    if (trace is None) == (workload is None):
        raise _core.VmlabError("give exactly one of trace= or workload=")
    if trace is not None and params:
        raise _core.VmlabError("workload parameters given with trace=")
    if workload is not None:
        _expect("workload", workload, isinstance(workload, str), "a workload name (str)")
    for k, v in params.items():
        _expect(k, v, isinstance(v, (str, int, float)) and not isinstance(v, bool), "a workload parameter value (str, int or float)")
    return {"trace": _path_arg("trace", trace), "workload": workload, "params": {k: str(v) for k, v in params.items()}}


def run_many(
    configs: Sequence[Union[str, tuple[str, Overrides]]],
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    threads: int = 1,
    progress: bool = False,
    **params: Any,
) -> list[Union[Result, _core.VmlabError]]:
    """One pass, many configurations: decode the input once and simulate it under every
    config, on up to ``threads`` threads. Each config is a preset/TOML path or a
    ``(config, overrides)`` pair. Returns, in order, a :class:`Result` per config (the
    same document :func:`run` gives) or the :class:`vmlab.VmlabError` that config
    failed with; an input that cannot be read raises."""
    _expect("configs", configs, not isinstance(configs, (str, bytes)) and isinstance(configs, abc.Iterable), "a list of configs")
    pairs = []
    for c in configs:
        if isinstance(c, (str, os.PathLike)):
            pairs.append((os.fspath(c), []))
        else:
            _expect("configs", c, isinstance(c, tuple) and len(c) == 2, "a list of configs, each a preset/path or a (config, overrides) pair")
            pairs.append((_path_arg("configs", c[0], optional=False), _override_list(c[1])))
    out = _core.run_many(pairs, threads=_count_arg("threads", threads), progress=_bool_arg("progress", progress),
                         **_source_kwargs(trace, workload, params))
    return [Result(json.loads(text)) if text is not None else _core.VmlabError(err) for text, err in out]


def mrc(
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    page_size: str = "4K",
    side: str = "data",
    sets: Sequence[int] = (),
    max_ways: int = 16,
    max_entries: int = 65536,
    **params: Any,
):
    """TLB miss-ratio curves in one pass, by stack distance (exact for LRU).

    Returns a DataFrame with one row per TLB geometry: ``sets`` (1 and ``ways ==
    entries`` for the fully associative curve, at every power-of-two size up to
    ``max_entries``), ``ways``, ``entries``, ``misses``, ``miss_rate``, and
    ``geometry`` ("fully-associative" or "N sets"). ``df.attrs`` holds the reference
    count, the distinct pages, the page size and the side. Pages are tagged by
    process; invalidations and page-size policies are not modelled."""
    import pandas as pd

    _expect("side", side, isinstance(side, str), '"data", "instruction" or "both"')
    _expect("sets", sets, isinstance(sets, abc.Iterable) and not isinstance(sets, (str, bytes)), "a list of positive integers")
    doc = json.loads(_core.mrc(page_size=str(page_size), side=side, sets=[_count_arg("sets", x, 1) for x in list(sets)],
                               max_ways=_count_arg("max_ways", max_ways, 1), max_entries=_count_arg("max_entries", max_entries, 1),
                               **_source_kwargs(trace, workload, params)))
    rows = [{**p, "geometry": "fully-associative"} for p in doc["fully_associative"]]
    rows += [{**p, "geometry": f"{p['sets']} sets"} for p in doc["set_associative"]]
    df = pd.DataFrame(rows, columns=["geometry", "sets", "ways", "entries", "misses", "miss_rate"])
    df.attrs.update({k: doc[k] for k in ("references", "distinct_pages", "page_size", "side")})
    return df


def presets() -> dict[str, str]:
    """Built-in presets: name -> TOML text."""
    return dict(_core.presets())


def workloads() -> list[dict]:
    """The built-in synthetic workloads and their parameters."""
    return json.loads(_core.workloads())


def trace_info(path: Union[str, os.PathLike]) -> dict:
    """What ``vmlab info`` prints, as a dict."""
    return json.loads(_core.trace_info(_path_arg("path", path, optional=False)))


def read_trace(path: Union[str, os.PathLike, None] = None, workload: str | None = None, **params: Any) -> Iterable[tuple]:
    """Iterate over the records of a .vmt file or a workload, as tuples (see TraceReader)."""
    src = _source_kwargs(path, workload, params)
    r = _core.TraceReader(trace=src["trace"], workload=workload, params=src["params"] or None)
    while True:
        batch = r.next_batch()
        if not batch:
            return
        yield from batch


def compare(
    designs: Sequence[str],
    baseline: str | None = None,
    config: str = "skylake",
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    overrides: Overrides = None,
    threads: int = 1,
    progress: bool = False,
    **params: Any,
):
    """How much faster each design runs one input, under the time model.

    Every design starts from ``config`` + ``overrides`` with ``time.model = "ooo"`` and
    ``memory.data_refs = true``; a design is a page-table kind (``"nested-ecpt"``), a
    named design of :func:`pt_compare`, or ``"label:key=value;key=value"``. The input is
    decoded once for all of them (``threads`` threads).

    Returns a DataFrame indexed by design: ``cycles``, ``instructions``, ``ipc``,
    ``speedup`` (the baseline's cycles over the design's; ``baseline`` names a design,
    the first by default), the CPI stack (``cpi_base``, ``cpi_data``,
    ``cpi_translation``, ``cpi_os``), ``mlp``, ``walks``, ``walk_latency``,
    ``walker_occupancy``, ``dram_gbs``, ``refs_per_walk``, ``pt_bytes`` and
    ``cpi_error`` (with sampled timing, ``time.sampling.period`` in ``overrides``: the
    relative half-width of the 95% confidence interval of the design's CPI; else 0).
    """
    import pandas as pd

    if baseline is not None:
        _expect("baseline", baseline, isinstance(baseline, str), "a design name (str)")
    text = _core.compare(
        _names_arg("designs", designs),
        baseline=baseline,
        config=_path_arg("config", config, optional=False),
        overrides=_override_list(overrides),
        threads=_count_arg("threads", threads),
        progress=_bool_arg("progress", progress),
        **_source_kwargs(trace, workload, params),
    )
    return pd.DataFrame(json.loads(text)).set_index("design")


DEFAULT_PT_DESIGNS = ["radix", "mpt", "hashed", "clustered", "guarded2", "guarded16", "guarded256", "inverted", "guarded16+stlb"]


def pt_compare(
    config: str = "skylake",
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    designs: Sequence[str] = DEFAULT_PT_DESIGNS,
    overrides: Overrides = None,
    **params: Any,
):
    """Elphinstone's measurements for several page-table designs on one input.

    Returns a DataFrame, one row per design: walks, references and sequential steps per
    refill (a reference is one cache line), mean walk cycles, and page-table bytes (and
    bytes per mapped page) when the most pages were mapped. Designs are names
    (``radix``, ``radix5``, ``mpt``, ``hashed``, ``hashed-h512``, ``clustered``, ``inverted``,
    ``guardedN``, ``guardedN+stlb``) or ``"label:key=value;key=value"``.
    """
    import pandas as pd

    src = _source_kwargs(trace, workload, params)
    text = _core.pt_compare(
        _names_arg("designs", designs),
        config=_path_arg("config", config, optional=False),
        overrides=_override_list(overrides),
        trace=src["trace"],
        workload=workload,
        params=src["params"] or None,
    )
    return pd.DataFrame(json.loads(text)).set_index("design")
