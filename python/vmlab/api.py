"""The Python API over the Rust engine."""

from __future__ import annotations

import collections.abc as abc
import functools
import html
import json
import math
import os
from typing import Any, Iterable, Mapping, Sequence, Union

from . import _core, _progress, _table

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


# The headline statistics a Result or Results shows in a notebook (by their one name).
HEADLINE_STATS = [
    "totals.accesses",
    "tlb_levels_by_side.data.0.miss_rate",
    "walks.count",
    "walks.refs_per_walk",
    "walks.latency.mean",
    "walks.latency.p99",
    "page_table.bytes",
    "cycles.translation_per_kilo_instruction",
    "time.ipc",
]


class Result:
    """The stats document of one run (schema ``vmlab.stats/1``, docs/metrics.md).

    Every statistic has one name, its dotted path into the document:
    ``r.get("walks.latency.p99")``, ``r.to_pandas()["walks.latency.p99"]``, the
    ``walks.latency.p99`` column of :meth:`Results.to_pandas` and of :func:`vmlab.load`.

    Parameters
    ----------
    doc : dict
        The stats document (``json.loads`` of ``vmlab run --json``).
    label : str, optional
        The run's name in tables (the ``design`` column); :func:`run` and
        :func:`run_many` set it.
    config_name : str, optional
        The preset name or TOML path the run was given (the ``config`` column).

    Attributes
    ----------
    label : str or None
    config_name : str or None

    Raises
    ------
    ArgumentError
        ``doc`` is not a dict.
    """

    def __init__(self, doc: dict, label: str | None = None, config_name: str | None = None):
        _expect("doc", doc, isinstance(doc, dict), "a stats document (dict)")
        self._doc = doc
        self.label = label
        self.config_name = config_name

    def to_dict(self) -> dict:
        """The whole stats document.

        Returns
        -------
        dict
            The document itself (not a copy), as the engine wrote it.
        """
        return self._doc

    def __getitem__(self, key: str) -> Any:
        return self._doc[key]

    def get(self, path: str, default: Any = math.nan) -> Any:
        """A value of the document by its dotted path.

        Parameters
        ----------
        path : str
            Keys joined by dots, list positions as numbers: ``"walks.latency.p99"``,
            ``"tlb.l1d_4k.misses"``, ``"tlb_levels_by_side.data.0.miss_rate"``.
        default : optional
            What to return when the document has no such path (NaN).

        Returns
        -------
        Any
            The value: a number for a statistic, or the object or list there.

        Raises
        ------
        ArgumentError
            ``path`` is not a string, or is written with slashes (the message gives
            the dotted spelling).
        """
        _expect("path", path, isinstance(path, str), 'a dotted stat name (str) such as "walks.latency.p99"')
        if "/" in path:
            dotted = ".".join(p for p in path.split("/") if p)
            raise ArgumentError(f"argument `path` must be a dotted stat name: {dotted!r}, not {path!r}")
        return _table.lookup(self._doc, path, default)

    def stats(self) -> dict[str, int | float]:
        """Every scalar statistic by its dotted name.

        Returns
        -------
        dict
            ``{"totals.accesses": 20000, "walks.latency.p99": 201, ...}``: every number
            of the document, including per-level records (``tlb_levels.0.misses``),
            without the ``config`` and ``source`` sections and without lists of plain
            numbers (histograms; :meth:`get` reaches those).
        """
        return _table.stats(self._doc)

    def to_pandas(self):
        """Every scalar statistic as a pandas Series indexed by its dotted name.

        Returns
        -------
        pandas.Series
            Index ``stat`` (``"walks.latency.p99"``, ...), float values, named by the
            run's label: the names and values of :meth:`stats`, which are also the
            stat columns of :meth:`Results.to_pandas` and :func:`vmlab.load`.
        """
        import pandas as pd

        s = pd.Series(self.stats(), name=self.label, dtype="float64")
        s.index.name = "stat"
        return s

    def tlb_table(self):
        """One row per TLB structure.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``structure`` (``l1d_4k``, ``stlb``, ...), one column per field.
        """
        import pandas as pd

        tlb = self._doc.get("tlb", {})
        df = pd.DataFrame.from_dict(tlb, orient="index")
        df.index.name = "structure"
        return df

    def cache_table(self):
        """One row per cache level.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``cache`` (``l1d``, ``l2``, ``llc``), one column per counter.
        """
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
        """Headline metrics as a flat dict, for printing.

        Returns
        -------
        dict
            ``accesses``, ``instructions``, ``translations``, ``l1_dtlb_lookups``,
            ``l1_dtlb_misses``, ``l1_dtlb_miss_rate``, ``last_level_tlb_misses``,
            ``walks``, ``walk_refs``, ``refs_per_walk``, ``walk_latency_mean``,
            ``walk_latency_p99``, ``faults``, ``page_table_bytes``,
            ``translation_cpki``, and the time model's ``cycles``, ``ipc``,
            ``cpi_translation``, ``mlp``; NaN where the run has no such number. These
            are short names of a digest, several of them derived; tables and
            :meth:`get` name statistics by their dotted paths.
        """
        levels = self._doc.get("tlb_levels") or []
        last = levels[-1] if levels and isinstance(levels[-1], dict) else {}
        d_lookups, d_misses = self._l1_data_tlb()
        return {
            "accesses": self.get("totals.accesses"),
            "instructions": self.get("totals.instructions"),
            "translations": self.get("totals.translations"),
            "l1_dtlb_lookups": d_lookups,
            "l1_dtlb_misses": d_misses,
            "l1_dtlb_miss_rate": (d_misses / d_lookups) if d_lookups else math.nan,
            "last_level_tlb_misses": _num(last.get("misses")),
            "walks": self.get("walks.count"),
            "walk_refs": self.get("walks.refs"),
            "refs_per_walk": self.get("walks.refs_per_walk"),
            "walk_latency_mean": self.get("walks.latency.mean"),
            "walk_latency_p99": self.get("walks.latency.p99"),
            "faults": self.get("faults.count"),
            "page_table_bytes": self.get("page_table.bytes"),
            "translation_cpki": self.get("cycles.translation_per_kilo_instruction"),
            # The time model's (NaN unless time.model = "ooo").
            "cycles": self.get("time.cycles"),
            "ipc": self.get("time.ipc"),
            "cpi_translation": self.get("time.cpi_stack.translation"),
            "mlp": self.get("time.mlp"),
        }

    def _input_text(self) -> str:
        src = self._doc.get("source") or {}
        if src.get("kind") != "workload":
            return f"{src.get('kind')}:{src.get('name')}"
        params = _non_default_params(src.get("name"), src.get("params") or {})
        return f"workload:{src.get('name')}" + (f" ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else "")

    def __repr__(self) -> str:
        s = self.summary()
        label = f"{self.label} " if self.label else ""
        return (
            f"<vmlab.Result {label}{self._input_text()} accesses={s['accesses']} "
            f"walks={s['walks']} l1_dtlb_miss_rate={s['l1_dtlb_miss_rate']:.4f} "
            f"translation_cpki={s['translation_cpki']:.2f}>"
        )

    def _repr_html_(self) -> str:
        e = html.escape
        config = self.config_name or self._doc.get("config_hash")
        head = " &middot; ".join(e(str(x)) for x in (self.label, self._input_text(), config and f"config {config}") if x)
        rows = "".join(f"<tr><td><code>{e(k)}</code></td><td style='text-align:right'>{e(_fmt(self.get(k)))}</td></tr>"
                       for k in HEADLINE_STATS if not _missing(self.get(k)))
        return (f"<div><strong>vmlab.Result</strong> {head}<table><thead><tr><th>stat</th><th>value</th></tr></thead>"
                f"<tbody>{rows}</tbody></table><small>{len(self.stats())} stats: <code>.to_pandas()</code>, "
                f"<code>.get(&quot;walks.latency.p99&quot;)</code></small></div>")


def _num(v: Any) -> float:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or isinstance(v, (dict, list))


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.1f}" if abs(v) >= 1000 else f"{v:.4g}"


# Parameters every workload takes, with their defaults (docs/workloads.md).
_COMMON_DEFAULTS = {"accesses": "10M", "seed": "1", "instrs_per_access": "4", "pid": "1", "code": "0"}


@functools.lru_cache(maxsize=None)
def _param_defaults(workload: str) -> dict[str, str]:
    for w in workloads():
        if w["name"] == workload:
            return {**_COMMON_DEFAULTS, **{p["name"]: p["default"] for p in w["params"]}}
    return {}


def _non_default_params(workload: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    defaults = _param_defaults(str(workload))
    return {k: v for k, v in params.items() if defaults.get(k) != v}


class Results(list):
    """Several runs, in order: each a :class:`Result`, or the :class:`vmlab.VmlabError`
    that run failed with. What :func:`run_many` returns; ``vmlab.Results(runs)`` makes
    one of any runs, and ``rs1 + rs2`` joins two.

    A list, so indexing, ``len`` and iteration give the runs themselves; failed runs
    are no rows of :meth:`to_pandas` unless asked for, and are listed by
    :attr:`errors`.

    Parameters
    ----------
    runs : iterable of Result or VmlabError

    Raises
    ------
    ArgumentError
        ``runs`` is not a list, or holds something other than Results and errors.
    """

    def __init__(self, runs: Iterable[Union[Result, _core.VmlabError]] = ()):
        what = "a list of vmlab.Result (or vmlab.VmlabError)"
        _expect("runs", runs, isinstance(runs, abc.Iterable) and not isinstance(runs, (str, bytes, Mapping)), what)
        items = list(runs)
        for x in items:
            _expect("runs", x, isinstance(x, (Result, _core.VmlabError)), what)
        super().__init__(items)

    def __add__(self, other: Iterable[Union[Result, _core.VmlabError]]) -> "Results":
        return Results([*self, *other])

    def __getitem__(self, i):
        got = list.__getitem__(self, i)
        return Results(got) if isinstance(i, slice) else got

    @property
    def labels(self) -> list[str]:
        """Each run's name, its ``design`` in :meth:`to_pandas`: the label it was
        given, else its config hash, else ``#i`` (its position)."""
        return [_label_of(x, i) for i, x in enumerate(self)]

    @property
    def ok(self) -> list[Result]:
        """The runs that finished, in order."""
        return [x for x in self if isinstance(x, Result)]

    @property
    def errors(self) -> list[tuple[str, _core.VmlabError]]:
        """``(label, error)`` of each run that failed, in order."""
        return [(label, x) for label, x in zip(self.labels, self) if not isinstance(x, Result)]

    def to_pandas(self, form: str = "wide", include_errors: bool = False):
        """One tidy table of the runs.

        Parameters
        ----------
        form : {"wide", "long"}
            ``"wide"``: one row per run, one column per statistic. ``"long"``: one row
            per run and statistic, its name in ``stat`` and its value in ``value``
            (for seaborn, ``pivot_table``, plots by stat); a statistic a run lacks has
            no row.
        include_errors : bool
            Add a row for each failed run, with ``status`` ``"error"`` and the
            message in ``error`` (``status`` and ``error`` are then columns of every
            row; a finished run's status is ``"ok"``).

        Returns
        -------
        pandas.DataFrame
            Columns ``design`` (the run's label), ``config`` (preset name or TOML
            path), ``seed`` (the config's ``mmu.seed``), ``workload`` (for a trace
            run: the trace's file name), ``trace`` (a trace run's path), one
            ``param.NAME`` column per workload parameter, typed as the engine reads
            it (``footprint="1G"`` is 1073741824, ``accesses="10k"`` is 10000), then
            every statistic by its dotted name (``walks.latency.p99``): the columns of
            :func:`vmlab.load`.

        Raises
        ------
        ArgumentError
            ``form`` or ``include_errors`` is not one of the values above.
        """
        form = _form_arg(form)
        include_errors = _bool_arg("include_errors", include_errors)
        records = []
        for label, x in zip(self.labels, self):
            if isinstance(x, Result):
                doc = x.to_dict()
                desc = {"design": label, "config": x.config_name, "seed": _table.lookup(doc, "config.mmu.seed", None),
                        "status": "ok", "error": None, **_table.input_columns(_table.doc_source(doc))}
                records.append((desc, x.stats()))
            elif include_errors:
                desc = {"design": label, "config": getattr(x, "config_name", None), "seed": None, "status": "error",
                        "error": str(x), **_table.input_columns(getattr(x, "source", None) or {})}
                records.append((desc, {}))
        first = ["design", "config", "seed", "status", "error", "workload", "trace"]
        if not include_errors:
            first = [c for c in first if c not in ("status", "error")]
            records = [({k: v for k, v in d.items() if k not in ("status", "error")}, s) for d, s in records]
        return _table.frame(records, first, form)

    def _repr_html_(self) -> str:
        e = html.escape
        ok = self.ok
        stats = [k for k in HEADLINE_STATS if any(not _missing(r.get(k)) for r in ok)]
        head = "".join(f"<th>{e(h)}</th>" for h in ["design", "input", *stats])
        rows = []
        for label, x in zip(self.labels, self):
            if isinstance(x, Result):
                values = [e(_fmt(x.get(k))) if not _missing(x.get(k)) else "" for k in stats]
                rows.append(f"<tr><td>{e(label)}</td><td>{e(x._input_text())}</td>"
                            + "".join(f"<td style='text-align:right'>{v}</td>" for v in values) + "</tr>")
            else:
                rows.append(f"<tr><td>{e(label)}</td><td colspan='{1 + len(stats)}'>error: {e(str(x))}</td></tr>")
        failed = len(self) - len(ok)
        return (f"<div><strong>vmlab.Results</strong>: {len(ok)} run{'' if len(ok) == 1 else 's'}"
                + (f", {failed} failed" if failed else "")
                + f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
                "<small>every stat: <code>.to_pandas()</code></small></div>")


def _label_of(x: Any, i: int) -> str:
    label = getattr(x, "label", None)
    if label:
        return str(label)
    if isinstance(x, Result) and isinstance(x.to_dict().get("config_hash"), str):
        return x.to_dict()["config_hash"]
    return f"#{i}"


def _label(config: str, overrides: list[str]) -> str:
    """A run's default name: its config, then its overrides as in compare()'s designs."""
    return f"{config}:{';'.join(overrides)}" if overrides else config


def _form_arg(form: Any) -> str:
    _expect("form", form, isinstance(form, str) and form in ("wide", "long"), '"wide" or "long"')
    return form


def to_frame(runs: Iterable[Union[Result, _core.VmlabError]], form: str = "wide", include_errors: bool = False):
    """One tidy table of any runs: ``Results(runs).to_pandas(form, include_errors)``.

    Parameters
    ----------
    runs : iterable of Result or VmlabError
        From :func:`run` and :func:`run_many` (``rs1 + rs2`` joins two).
    form : {"wide", "long"}
        One row per run (``"wide"``) or per run and statistic (``"long"``).
    include_errors : bool
        Keep the failed runs as rows with ``status`` and ``error``.

    Returns
    -------
    pandas.DataFrame
        See :meth:`Results.to_pandas`.

    Raises
    ------
    ArgumentError
        ``runs`` holds something other than Results and errors, or ``form`` or
        ``include_errors`` is not one of the values above.
    """
    return Results(runs).to_pandas(form=form, include_errors=include_errors)


def run(
    config: str = "skylake",
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    overrides: Overrides = None,
    progress: bool = False,
    label: str | None = None,
    **params: Any,
) -> Result:
    """Simulate a trace file or a built-in workload under a preset or TOML config.

    Parameters
    ----------
    config : str or os.PathLike
        A preset name (:func:`presets`) or a TOML config file.
    trace : str or os.PathLike, optional
        A ``.vmt`` trace to simulate. Give exactly one of ``trace`` and ``workload``.
    workload : str, optional
        A built-in workload (:func:`workloads`).
    overrides : dict or list of str, optional
        Config keys to set, as ``{"tlb.l1d.entries": 32}`` or ``["tlb.l1d.entries=32"]``
        (docs/config.md).
    progress : bool
        Show progress: a bar with the total and an ETA on a terminal's stderr, a line
        every 10 s on another stderr, and in a Jupyter notebook a bar in the cell's
        output.
    label : str, optional
        The run's name in tables (:attr:`Result.label`); default: ``config``, then
        ``:key=value;...`` for the overrides.
    **params : str, int or float
        Workload parameters, e.g. ``accesses="1M"``, ``footprint="4G"``
        (docs/workloads.md).

    Returns
    -------
    Result

    Raises
    ------
    VmlabError
        One line naming the key, file or parameter at fault: an unknown preset or
        config key, an unreadable or corrupt trace, a bad workload parameter, neither
        or both of ``trace`` and ``workload``.
    ArgumentError
        An argument of the wrong type (also a TypeError).
    """
    config_text = _path_arg("config", config, optional=False)
    items = _override_list(overrides)
    if label is not None:
        _expect("label", label, isinstance(label, str), "a name (str)")
    text = _progress.call(_core.run, config_text, items, progress=_bool_arg("progress", progress),
                          **_source_kwargs(trace, workload, params))
    return Result(json.loads(text), label=label or _label(config_text, items), config_name=config_text)


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
    configs: Union[Sequence[Union[str, tuple[str, Overrides]]], Mapping[str, Union[str, tuple[str, Overrides]]]],
    trace: Union[str, os.PathLike, None] = None,
    workload: str | None = None,
    threads: int = 1,
    progress: bool = False,
    **params: Any,
) -> Results:
    """One pass, many configurations: decode the input once and simulate it under every
    config, on up to ``threads`` threads.

    Parameters
    ----------
    configs : list or dict
        Each config is a preset name or TOML path, or a ``(config, overrides)`` pair
        (overrides as in :func:`run`). As a dict, ``{label: config}``: the labels name
        the runs (the ``design`` column of :meth:`Results.to_pandas`); as a list, each
        run is named as :func:`run` names it (``"skylake"``,
        ``"skylake:os.page_size=2M"``).
    trace : str or os.PathLike, optional
        A ``.vmt`` trace. Give exactly one of ``trace`` and ``workload``.
    workload : str, optional
        A built-in workload.
    threads : int
        Simulation threads (the runs are spread over them).
    progress : bool
        Show progress: a bar with the total and an ETA on a terminal's stderr, a line
        every 10 s on another stderr, and in a Jupyter notebook a bar in the cell's
        output.
    **params : str, int or float
        Workload parameters, as in :func:`run`.

    Returns
    -------
    Results
        In the order of ``configs``: per config, a :class:`Result` (the same document
        :func:`run` gives) or the :class:`vmlab.VmlabError` that config failed with,
        whose ``label``, ``config_name`` and ``source`` attributes say which run it
        was. ``.to_pandas()`` is one table of them all.

    Raises
    ------
    VmlabError
        The input cannot be read (a config's own error is returned, not raised).
    ArgumentError
        An argument of the wrong type (also a TypeError).
    """
    what = "a list of configs, each a preset/path or a (config, overrides) pair, or a dict {label: config}"
    _expect("configs", configs, not isinstance(configs, (str, bytes)) and isinstance(configs, abc.Iterable), what)
    named = isinstance(configs, Mapping)
    entries = list(configs.items()) if named else [(None, c) for c in configs]
    pairs, labels = [], []
    for label, c in entries:
        if named:
            _expect("configs", label, isinstance(label, str), what)
        if isinstance(c, (str, os.PathLike)):
            pair = (os.fspath(c), [])
        else:
            _expect("configs", c, isinstance(c, tuple) and len(c) == 2, what)
            pair = (_path_arg("configs", c[0], optional=False), _override_list(c[1]))
        pairs.append(pair)
        labels.append(label if named else _label(*pair))
    src = _source_kwargs(trace, workload, params)
    out = _progress.call(_core.run_many, pairs, threads=_count_arg("threads", threads),
                         progress=_bool_arg("progress", progress), **src)
    source = {"trace": src["trace"]} if src["trace"] is not None else {"workload": workload, "params": src["params"]}
    results = []
    for (text, err), label, (config_text, _) in zip(out, labels, pairs):
        if text is not None:
            results.append(Result(json.loads(text), label=label, config_name=config_text))
        else:
            e = _core.VmlabError(err)
            e.label, e.config_name, e.source = label, config_text, source
            results.append(e)
    return Results(results)


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

    Pages are tagged by process; invalidations and page-size policies are not modelled.

    Parameters
    ----------
    trace : str or os.PathLike, optional
        A ``.vmt`` trace. Give exactly one of ``trace`` and ``workload``.
    workload : str, optional
        A built-in workload.
    page_size : str
        The page size references are counted in (``"4K"``, ``"2M"``, ...).
    side : {"data", "instruction", "both"}
        Which references count.
    sets : list of int
        Set counts of the set-associative curves (powers of two), besides the fully
        associative one.
    max_ways : int
        The most ways of a set-associative curve.
    max_entries : int
        The largest fully associative size.
    **params : str, int or float
        Workload parameters, as in :func:`run`.

    Returns
    -------
    pandas.DataFrame
        One row per TLB geometry: ``geometry`` (``"fully-associative"`` or ``"N
        sets"``), ``sets`` (1 and ``ways == entries`` for the fully associative curve,
        at every power-of-two size up to ``max_entries``), ``ways``, ``entries``,
        ``misses``, ``miss_rate``. ``df.attrs`` holds ``references``,
        ``distinct_pages``, ``page_size`` and ``side``.

    Raises
    ------
    VmlabError
        A bad input, page size, side or set count (named).
    ArgumentError
        An argument of the wrong type (also a TypeError).
    """
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
    """The built-in presets.

    Returns
    -------
    dict of str to str
        Preset name -> its TOML text.
    """
    return dict(_core.presets())


def workloads() -> list[dict]:
    """The built-in synthetic workloads and their parameters.

    Returns
    -------
    list of dict
        ``{"name", "description", "params": [{"name", "default", "help"}, ...]}`` per
        workload (the parameters every workload takes, such as ``accesses``, are in
        docs/workloads.md).
    """
    return json.loads(_core.workloads())


def trace_info(path: Union[str, os.PathLike]) -> dict:
    """What ``vmlab info`` prints about a trace.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.vmt`` trace.

    Returns
    -------
    dict
        ``source``, ``command``, ``counts`` (records by kind), ``instructions``,
        ``processes``, ``pages_touched``, ``footprint_bytes``.

    Raises
    ------
    VmlabError
        The file cannot be read or is not a valid trace (named, with the byte offset).
    ArgumentError
        ``path`` is not a path.
    """
    return json.loads(_core.trace_info(_path_arg("path", path, optional=False)))


def read_trace(path: Union[str, os.PathLike, None] = None, workload: str | None = None, **params: Any) -> Iterable[tuple]:
    """The records of a ``.vmt`` file or a workload, one tuple each.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A ``.vmt`` trace. Give exactly one of ``path`` and ``workload``.
    workload : str, optional
        A built-in workload.
    **params : str, int or float
        Workload parameters, as in :func:`run`.

    Yields
    ------
    tuple
        ``("read"|"write"|"fetch", vaddr, size, pid)``, ``("tick", n)``, ``("mmap",
        pid, start, len, prot, flags)``, ``("munmap", pid, start, len)``,
        ``("mprotect", pid, start, len, prot)``, ``("brk", pid, end)``, ``("fork",
        parent, child)``, ``("exit", pid)``, ``("switch", pid)``.

    Raises
    ------
    VmlabError
        The input cannot be read, or a record is corrupt (named, with the offset).
    ArgumentError
        An argument of the wrong type (also a TypeError).
    """
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
    ``memory.data_refs = true``. The input is decoded once for all of them.

    Parameters
    ----------
    designs : list of str
        Each a page-table kind (``"nested-ecpt"``), a named design of
        :func:`pt_compare`, or ``"label:key=value;key=value"``.
    baseline : str, optional
        The design the others are measured against (default: the first).
    config : str or os.PathLike
        A preset name or TOML config file.
    trace, workload, **params
        The input, as in :func:`run`.
    overrides : dict or list of str, optional
        Config keys set for every design. ``time.sampling.period`` here turns on
        sampled timing.
    threads : int
        Simulation threads.
    progress : bool
        Show progress: a bar with the total and an ETA on a terminal's stderr, a line
        every 10 s on another stderr, and in a Jupyter notebook a bar in the cell's
        output.

    Returns
    -------
    pandas.DataFrame
        Indexed by design: ``cycles``, ``instructions``, ``ipc``, ``speedup`` (the
        baseline's cycles over the design's), the CPI stack (``cpi_base``,
        ``cpi_data``, ``cpi_translation``, ``cpi_os``), ``mlp``, ``walks``,
        ``walk_latency``, ``walker_occupancy``, ``dram_gbs``, ``refs_per_walk``,
        ``pt_bytes`` and ``cpi_error`` (with sampled timing: the relative half-width
        of the 95% confidence interval of the design's CPI; else 0).

    Raises
    ------
    VmlabError
        An unknown design or baseline, a bad config key or input (named).
    ArgumentError
        An argument of the wrong type (also a TypeError).
    """
    import pandas as pd

    if baseline is not None:
        _expect("baseline", baseline, isinstance(baseline, str), "a design name (str)")
    text = _progress.call(
        _core.compare,
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
    progress: bool = False,
    **params: Any,
):
    """Elphinstone's measurements for several page-table designs on one input.

    Parameters
    ----------
    config : str or os.PathLike
        A preset name or TOML config file.
    trace, workload, **params
        The input, as in :func:`run`.
    designs : list of str
        Names (``radix``, ``radix5``, ``mpt``, ``hashed``, ``hashed-h512``,
        ``clustered``, ``inverted``, ``guardedN``, ``guardedN+stlb``) or
        ``"label:key=value;key=value"``.
    overrides : dict or list of str, optional
        Config keys set for every design.
    progress : bool
        Show progress, one bar per design (the designs run one after another), as in
        :func:`run`.

    Returns
    -------
    pandas.DataFrame
        One row per design: walks, references and sequential steps per refill (a
        reference is one cache line), mean walk cycles, and page-table bytes (and
        bytes per mapped page) when the most pages were mapped.

    Raises
    ------
    VmlabError
        An unknown design, a bad config key or input (named).
    ArgumentError
        An argument of the wrong type (also a TypeError).
    """
    import pandas as pd

    names = _names_arg("designs", designs)
    _expect("designs", designs, bool(names), "a non-empty list of design names")
    src = _source_kwargs(trace, workload, params)
    text = _progress.call(
        _core.pt_compare,
        names,
        config=_path_arg("config", config, optional=False),
        overrides=_override_list(overrides),
        trace=src["trace"],
        workload=workload,
        params=src["params"] or None,
        progress=_bool_arg("progress", progress),
    )
    return pd.DataFrame(json.loads(text)).set_index("design")
