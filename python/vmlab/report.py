"""``vmlab report STORE -o DIR``: charts, tables and an HTML page from a results store.

Reads the store only (nothing is re-simulated). For each headline stat, the miss-ratio
curve of each swept TLB size, the walk-latency CDF and the page-table memory at its peak,
DIR/index.html shows a chart (PNG, drawn at the page's size; SVG beside it) and a table
of the numbers behind it, then a table of every run. docs/reports.md describes the page.
Without matplotlib the page has the tables only.
"""

from __future__ import annotations

import html
import json
import math
import numbers
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import _core
from ._files import path_arg, staged_dir
from .store import Store, load


class ReportError(_core.VmlabError):
    """A store that cannot be reported on (missing, or without successful runs)."""


class NoPlotsWarning(UserWarning):
    """`vmlab.report` wrote the tables only: matplotlib is not installed."""


NO_PLOTS = "no plots: matplotlib is not installed (pip install 'vmlab[plots]'); the report has the tables only"

# Charts are drawn for the page: FIG_WIDTH_PX wide at DPI, shown 1:1 (the <img> carries
# the PNG's own size). The page's chart column is FIG_WIDTH_PX wide.
FIG_WIDTH_PX = 800
DPI = 100
# A log axis when the plotted values span more than this factor (two decades).
LOG_SPAN = 100.0
RC = {"font.size": 10, "axes.titlesize": 11, "legend.fontsize": 9, "legend.title_fontsize": 9,
      "svg.fonttype": "none"}  # SVG text stays text: searchable, and checkable by the tests
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2))]

# Headline bar charts: (column, title, axis label, caption). The first two are derived in
# _derive because `load` leaves out list-valued stats and per-access ratios.
HEADLINES = [
    ("l1_dtlb_miss_rate", "L1 data-TLB miss rate", "miss rate (misses / lookups)",
     "Level-1 data-side TLB misses per lookup (tlb_levels_by_side.data[0])."),
    ("walks_per_kilo_access", "Page walks per kilo-access", "walks per 1000 accesses",
     "Page walks (one per last-level TLB miss) per 1000 memory accesses (walks.count, totals.accesses)."),
    ("walks.refs_per_walk", "Page-walk memory references per walk", "references per walk",
     "Page-table entries read per walk, after walk caches (walks.refs_per_walk)."),
    ("cycles.translation_per_kilo_instruction", "Translation cycles per kilo-instruction",
     "cycles per 1000 instructions",
     "TLB lookup plus page-walk cycles per 1000 instructions (cycles.translation_per_kilo_instruction)."),
]
# Page-table memory: the peak (meaningful also for programs that exit, whose tables end
# empty), or, for stores whose stats predate the peak fields, the end of the run.
PT_MEMORY = [
    (("page_table.bytes_at_peak", "page_table.bytes"), "page_table_bytes_at_peak",
     "Page-table memory at peak", "page-table bytes",
     "Simulated memory held by page-table structures when the most pages were mapped "
     "(page_table.bytes_at_peak).",
     "Simulated memory held by page-table structures at the end of the run (page_table.bytes; "
     "this store's stats have no page_table.bytes_at_peak)."),
    (("page_table.bytes_per_mapped_page_at_peak", "page_table.bytes_per_mapped_page"),
     "page_table_bytes_per_mapped_page_at_peak", "Page-table memory per mapped page at peak",
     "page-table bytes per mapped page",
     "Page-table bytes divided by the pages mapped, both when the most pages were mapped "
     "(page_table.bytes_per_mapped_page_at_peak).",
     "Page-table bytes divided by the pages mapped, both at the end of the run "
     "(page_table.bytes_per_mapped_page; this store's stats have no page_table.bytes_per_mapped_page_at_peak)."),
]
PERCENTILES = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]


@dataclass
class Table:
    """A table of numbers: `rows` hold text, numbers, or (mean, min, max, seeds) tuples."""
    headers: list[str]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Section:
    """One chart of the page and the table of its numbers; `draw` makes the matplotlib Figure."""
    name: str      # file stem: NAME.png, NAME.svg; the section's id
    title: str
    caption: str
    table: Table
    draw: Callable[[], Any] = field(repr=False)
    size: tuple[int, int] | None = None  # the PNG's pixels, once drawn


# --- The data -------------------------------------------------------------------------

def _frame(store: str | os.PathLike):
    """The store's successful runs (via `load`) plus the list-valued stats the charts need."""
    if not os.path.exists(store):
        raise ReportError(f"no results store at {os.fspath(store)}")
    df = load(store)
    if df.empty:
        raise ReportError(f"{os.fspath(store)}: no successful runs to report on")
    derived: dict[str, dict] = {}
    with Store(store, readonly=True) as st:
        for r in st.rows():
            if r["status"] == "ok":
                derived[r["key"]] = _derive(json.loads(r["stats"]))
    for col in ("l1_dtlb_miss_rate", "walks_per_kilo_access", "latency_histogram"):
        df[col] = [derived[k][col] for k in df["key"]]
    df["input"] = [w if isinstance(w, str) else Path(t).name for w, t in zip(df["workload"], df["trace"])]
    axes = [c for c in df.columns if c.startswith("axis.")]
    # Charts keep this order (groupby sort=False): swept values ascend as numbers, not as strings.
    df = df.sort_values(["design", *axes, "input", "seed"], kind="stable").reset_index(drop=True)
    df["variant"] = [", ".join(f"{c[5:]}={row[c]}" for c in axes if _varies(df, c)) for _, row in df.iterrows()]
    return df


def _derive(stats: dict) -> dict:
    data = stats.get("tlb_levels_by_side", {}).get("data") or [{}]
    lookups, misses = data[0].get("lookups", 0), data[0].get("misses", 0)
    accesses = stats["totals"]["accesses"]
    return {
        "l1_dtlb_miss_rate": misses / lookups if lookups else math.nan,
        "walks_per_kilo_access": 1000 * stats["walks"]["count"] / accesses if accesses else math.nan,
        "latency_histogram": stats["walks"]["latency"]["histogram"],
    }


def _varies(df, col: str) -> bool:
    return df[col].astype(str).nunique() > 1


def _swept(df) -> list[str]:
    """The swept-key columns whose value differs between runs."""
    return [c for c in df.columns if c.startswith("axis.") and _varies(df, c)]


def _design_label(design: str, variant: str) -> str:
    return f"{design} [{variant}]" if variant else design


def _seed_stats(df, keys: list[str], column: str):
    """mean, min, max and number of (non-missing) values of `column` per group, groups in frame order."""
    return df.groupby(keys, sort=False)[column].agg(["mean", "min", "max", "count"])


def _multi_seed(stats) -> bool:
    return bool((stats["count"] > 1).any())


def _use_log(values) -> bool:
    """Whether positive `values` span more than LOG_SPAN (zeros and NaN do not count)."""
    pos = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    return len(pos) >= 2 and max(pos) / min(pos) > LOG_SPAN


def _pooled(hists) -> dict[int, int]:
    counts: dict[int, int] = {}
    for hist in hists:
        for value, n in hist:  # [value, count]; from 4096 up, [power-of-two upper bound, count]
            counts[value] = counts.get(value, 0) + n
    return counts


def _percentile(counts: dict[int, int], q: float) -> int:
    """The smallest value with at least q of the walks at or below it (docs/metrics.md)."""
    total, seen = sum(counts.values()), 0
    for v in sorted(counts):
        seen += counts[v]
        if seen >= q * total:
            return v
    return max(counts)


def _caption_seeds(stats) -> str:
    seeds = int(stats["count"].max()) if len(stats) else 0
    if seeds <= 1:
        return ""
    n = f"{seeds}" if stats["count"].nunique() == 1 else f"up to {seeds}"
    return f" Bars: mean over {n} seeds; whiskers: minimum to maximum across seeds."


# --- Charts ---------------------------------------------------------------------------

def _figure(height_px: float, nrows: int = 1, ncols: int = 1, **kw):
    # A bare Figure, not pyplot: no global state, nothing to close, the caller's backend untouched.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIG_WIDTH_PX / DPI, round(height_px) / DPI), dpi=DPI, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def _legend_columns(labels: list[str], width_px: float = FIG_WIDTH_PX - 40) -> int:
    """As many legend columns as fit the figure's width (about 6.5 px per character at 9 pt)."""
    longest = max((len(s) for s in labels), default=1)
    return max(1, min(len(labels), int(width_px // (longest * 6.5 + 45))))


def _legend_height_px(n: int, ncols: int, title: bool = True) -> float:
    return (math.ceil(n / ncols) + (1 if title else 0)) * 17 + 14


def _styles(keys: list[tuple]) -> dict[tuple, dict]:
    """Colour by the first element (the design), dash by the rest (the swept values): lines
    of one design share a colour. Past 10 designs the dash changes too."""
    designs = list(dict.fromkeys(k[0] for k in keys))
    rests = list(dict.fromkeys(k[1:] for k in keys))
    out = {}
    for k in keys:
        d, r = designs.index(k[0]), rests.index(k[1:])
        out[k] = {"color": f"C{d % 10}", "linestyle": LINESTYLES[(r + d // 10) % len(LINESTYLES)]}
    return out


def bar_plot(df, column: str, title: str, label: str) -> Any:
    """Horizontal bars: one group per design (and swept variant), one bar per input; the bar
    is the mean over seeds, the whiskers the minimum and maximum. Log axis when the bars span
    more than two decades."""
    import numpy as np

    stats = _seed_stats(df, ["design", "variant", "input"], column)
    groups = list(dict.fromkeys((d, v) for d, v, _ in stats.index))
    inputs = list(dict.fromkeys(i for _, _, i in stats.index))
    group_px = max(26, 14 * len(inputs) / 0.8)  # bars 14 px thick
    fig, axs = _figure(max(95 + len(groups) * group_px, 60 + _legend_height_px(len(inputs), 1)))
    ax = axs[0][0]
    height = 0.8 / len(inputs)
    y = np.arange(len(groups))
    means = stats["mean"]
    log = _use_log(means)
    errors = _multi_seed(stats)
    for j, inp in enumerate(inputs):
        rows = [stats.loc[(d, v, inp)] if (d, v, inp) in stats.index else None for d, v in groups]
        m = np.array([r["mean"] if r is not None else np.nan for r in rows])
        xerr = None
        if errors:
            lo = np.array([r["mean"] - r["min"] if r is not None else np.nan for r in rows])
            hi = np.array([r["max"] - r["mean"] if r is not None else np.nan for r in rows])
            xerr = np.maximum(np.vstack([lo, hi]), 0)  # a mean can round a hair past min or max
        ax.barh(y + (j - (len(inputs) - 1) / 2) * height, m, height, xerr=xerr, label=inp, color=f"C{j % 10}",
                error_kw={"elinewidth": 0.9, "capsize": 2, "ecolor": "0.2"})
    ax.set_yticks(y, [_design_label(d, v) for d, v in groups])
    ax.invert_yaxis()  # the first design on top
    ax.set_ylim(len(groups) - 0.5, -0.5)
    if log:
        ax.set_xscale("log")
        # A decade or so below the smallest bar: on a log axis a bar starts at the axis' edge.
        ax.set_xlim(left=10 ** math.floor(math.log10(min(v for v in means if v > 0)) - 0.3))
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(title)
    ax.set_xlabel(label + (" (log scale)" if log else ""))
    ax.set_ylabel("design")
    # Beside the top of the bars: a tall chart's legend stays in view with its top.
    fig.legend(title="workload", loc="outside right upper", frameon=False)
    return fig


def _bar_table(df, column: str, vary: list[str]) -> Table:
    stats = _seed_stats(df, ["design", *vary, "input"], column)
    inputs = list(dict.fromkeys(k[-1] for k in stats.index))
    rows = []
    for group in dict.fromkeys(k[:-1] for k in stats.index):
        row: list[Any] = list(group)
        for inp in inputs:
            k = (*group, inp)
            row.append(tuple(stats.loc[k]) if k in stats.index else None)
        rows.append(row)
    return Table(["design", *(c[5:] for c in vary), *inputs], rows)


def _size_axes(df) -> list[str]:
    """Swept TLB size keys (`tlb.NAME.entries`) whose TLB reports a miss rate."""
    return [c for c in df.columns if c.startswith("axis.tlb.") and c.endswith(".entries") and _varies(df, c)
            and f"{c[5:-len('.entries')]}.miss_rate" in df.columns]


def _panels(n: int) -> tuple[int, int]:
    ncols = 1 if n == 1 else 2
    return math.ceil(n / ncols), ncols


def miss_ratio_plot(df, axis_col: str) -> Any:
    """Miss rate of the swept TLB against its entries, one panel per input, one line per
    design (and value of any other swept key): mean over seeds, whiskers min to max."""
    import numpy as np

    tlb = axis_col[5:-len(".entries")]
    rate = f"{tlb}.miss_rate"
    others = [c for c in _swept(df) if c != axis_col]
    inputs = list(dict.fromkeys(df["input"]))
    sizes = sorted(set(df[axis_col]))
    keys = list(dict.fromkeys(tuple(r) for r in df[["design", *others]].itertuples(index=False)))
    labels = [k[0] + "".join(f", {c[5:]}={v}" for c, v in zip(others, k[1:])) for k in keys]
    style = _styles(keys)
    nrows, ncols = _panels(len(inputs))
    legend_cols = _legend_columns(labels)
    fig, axs = _figure(60 + nrows * 300 + _legend_height_px(len(keys), legend_cols), nrows, ncols, sharey=True)
    log = _use_log(df[rate])
    for i, inp in enumerate(inputs):
        ax = axs[i // ncols][i % ncols]
        for key, label in zip(keys, labels):
            g = df[(df["input"] == inp)]
            for c, v in zip(["design", *others], key):
                g = g[g[c] == v]
            if g.empty:
                continue
            s = g.groupby(axis_col)[rate].agg(["mean", "min", "max", "count"]).sort_index()
            yerr = None
            if (s["count"] > 1).any():
                yerr = np.maximum(np.vstack([s["mean"] - s["min"], s["max"] - s["mean"]]), 0)
            ax.errorbar(s.index, s["mean"], yerr=yerr, marker="o", markersize=4, capsize=2, elinewidth=0.9,
                        label=label, **style[key])
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(v) for v in sizes])
        ax.minorticks_off()
        if log:
            ax.set_yscale("log")
        ax.set_title(inp)
        ax.grid(alpha=0.3)
        ax.set_xlabel(f"{tlb[4:]} entries (log scale)")
        if i % ncols == 0:
            ax.set_ylabel("miss rate (misses / lookups)" + (" (log scale)" if log else ""))
    for j in range(len(inputs), nrows * ncols):
        axs[j // ncols][j % ncols].set_visible(False)
    fig.suptitle(f"Miss-ratio curve: {tlb[4:]}")
    fig.legend(_handles(axs, labels), labels, title="design", loc="outside lower center",
               ncols=legend_cols, frameon=False)
    return fig


def _handles(axs, labels: list[str]) -> list:
    """One legend handle per label, from whichever panel drew it."""
    found: dict[str, Any] = {}
    for row in axs:
        for ax in row:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                found.setdefault(lab, h)
    return [found[lab] for lab in labels]


def _mrc_table(df, axis_col: str, vary: list[str]) -> Table:
    tlb = axis_col[5:-len(".entries")]
    others = [c for c in vary if c != axis_col]
    stats = _seed_stats(df, ["design", *others, "input", axis_col], f"{tlb}.miss_rate")
    sizes = sorted(dict.fromkeys(k[-1] for k in stats.index))
    rows = []
    for group in dict.fromkeys(k[:-1] for k in stats.index):
        rows.append([*group, *(tuple(stats.loc[(*group, s)]) if (*group, s) in stats.index else None for s in sizes)])
    return Table(["design", *(c[5:] for c in others), "workload", *(f"{s} entries" for s in sizes)], rows)


def latency_cdf_plot(df) -> Any:
    """CDF of walk latency, one panel per input, one line per design (and swept variant),
    from the stats' histograms pooled over seeds."""
    import numpy as np

    inputs = list(dict.fromkeys(df["input"]))
    keys = list(dict.fromkeys(zip(df["design"], df["variant"])))
    labels = [_design_label(d, v) for d, v in keys]
    style = _styles(keys)
    nrows, ncols = _panels(len(inputs))
    legend_cols = _legend_columns(labels)
    fig, axs = _figure(60 + nrows * 300 + _legend_height_px(len(keys), legend_cols), nrows, ncols, sharey=True)
    for i, inp in enumerate(inputs):
        ax = axs[i // ncols][i % ncols]
        sub = df[df["input"] == inp]
        for key, label in zip(keys, labels):
            g = sub[(sub["design"] == key[0]) & (sub["variant"] == key[1])]
            counts = _pooled(g["latency_histogram"])
            if not counts:
                continue  # no runs of this design on this input, or no walks
            xs = np.array(sorted(counts))
            cdf = np.cumsum([counts[v] for v in xs]) / sum(counts.values())
            # Start at 0 just left of the first value: every line climbs from the bottom.
            ax.step(np.concatenate([[xs[0]], xs]), np.concatenate([[0.0], cdf]), where="post", label=label,
                    linewidth=1.4, **style[key])
        ax.set_xscale("log")
        ax.set_ylim(0, 1.05)  # headroom: lines that reach 1.0 stay visible above the grid line
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.grid(alpha=0.3)
        ax.set_title(inp)
        ax.set_xlabel("walk latency (cycles, log scale)")
        if i % ncols == 0:
            ax.set_ylabel("fraction of walks at or below")
    for j in range(len(inputs), nrows * ncols):
        axs[j // ncols][j % ncols].set_visible(False)
    fig.suptitle("Page-walk latency CDF")
    drawn = set()
    for row in axs:
        for ax in row:
            drawn.update(ax.get_legend_handles_labels()[1])
    shown = [lab for lab in labels if lab in drawn]
    if shown:
        fig.legend(_handles(axs, shown), shown, title="design", loc="outside lower center", ncols=legend_cols,
                   frameon=False)
    return fig


def _cdf_table(df, vary: list[str]) -> Table:
    rows = []
    for key, g in df.groupby(["design", *vary, "input"], sort=False):
        counts = _pooled(g["latency_histogram"])
        walks = sum(counts.values())
        if walks and "walks.latency.mean" in g and "walks.latency.count" in g:
            mean = float((g["walks.latency.mean"] * g["walks.latency.count"]).sum() / g["walks.latency.count"].sum())
        elif walks:
            mean = sum(v * n for v, n in counts.items()) / walks
        else:
            mean = math.nan
        pct = [_percentile(counts, q) if walks else None for _, q in PERCENTILES]
        rows.append([*key, len(g), walks, mean, *pct, max(counts) if walks else None])
    return Table(["design", *(c[5:] for c in vary), "workload", "seeds", "walks", "mean",
                  *(n for n, _ in PERCENTILES), "max"], rows,
                 note="Cycles; seeds pooled. Percentile q: the smallest latency with at least q of the walks at or "
                      "below it; from 4096 cycles up the histogram has power-of-two buckets, and a value there is "
                      "the bucket's upper bound.")


def sections(df) -> list[Section]:
    """Every chart and table of the page, for the frame `_frame` makes (nothing drawn yet)."""
    vary = _swept(df)
    out = []
    for col, title, label, caption in HEADLINES:
        out.append(_bar_section(df, vary, col, col.replace(".", "_"), title, label, caption))
    for axis_col in _size_axes(df):
        tlb = axis_col[5:-len(".entries")]
        out.append(Section(
            f"mrc_{tlb[4:]}", f"Miss-ratio curve: {tlb[4:]}",
            f"Miss rate of {tlb} ({tlb}.miss_rate) as its size ({axis_col[5:]}) is swept: one panel per workload, "
            "one line per design (and value of any other swept key); x and, where the rates span more than two "
            "decades, y on a log scale." + (
                " Points: mean over seeds; whiskers: minimum to maximum across seeds."
                if int(df.groupby(["design", *vary, "input"])["seed"].count().max()) > 1 else ""),
            _mrc_table(df, axis_col, vary), lambda c=axis_col: miss_ratio_plot(df, c)))
    out.append(Section(
        "walk_latency_cdf", "Page-walk latency CDF",
        "Cumulative distribution of page-walk latency (walks.latency.histogram: exact below 4096 cycles, "
        "power-of-two buckets above), seeds pooled: one panel per workload, one line per design.",
        _cdf_table(df, vary), lambda: latency_cdf_plot(df)))
    for (peak, end), name, title, label, caption, end_caption in PT_MEMORY:
        col = peak if peak in df.columns and df[peak].notna().any() else end
        out.append(_bar_section(df, vary, col, name, title, label, caption if col == peak else end_caption))
    return out


def _bar_section(df, vary, col, name, title, label, caption) -> Section:
    if col not in df.columns:
        df[col] = math.nan  # a stat this store's runs do not have: an empty table says so
    stats = _seed_stats(df, ["design", "variant", "input"], col)
    log = _use_log(stats["mean"])
    extra = _caption_seeds(stats)
    if log:
        extra += " Log scale: the values span more than two decades."
        if (stats["mean"] == 0).any():
            extra += " Zero values have no bar on a log scale (the table has them)."
    return Section(name, title, caption + extra, _bar_table(df, col, vary),
                   lambda: bar_plot(df, col, title, label))


def draw(section: Section) -> Any:
    """The section's matplotlib Figure, drawn with the report's fonts (needs matplotlib)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        return section.draw()


def build_plots(df) -> list[tuple[Section, Any]]:
    """Every section with its figure drawn (needs matplotlib)."""
    return [(s, draw(s)) for s in sections(df)]


# --- The page -------------------------------------------------------------------------

def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _write(store, out_dir) -> tuple[Path, bool]:
    """Write the page (and the charts, if matplotlib is installed); returns the index path
    and whether charts were drawn. Every file is written apart first and moved into
    ``out_dir`` once all are (the page last): a failed or interrupted report leaves
    ``out_dir`` as it was."""
    store = path_arg("store", store)
    out_dir = path_arg("out_dir", out_dir)
    plots = have_matplotlib()
    df = _frame(store)
    secs = sections(df)
    with staged_dir(out_dir, last=("index.html",)) as out:
        if plots:
            import matplotlib

            with matplotlib.rc_context(RC):  # at save time too: SVG text stays text
                for s in secs:
                    fig = draw(s)
                    fig.savefig(out / f"{s.name}.png", dpi=DPI, format="png")
                    fig.set_layout_engine("none")  # the SVG keeps the PNG's layout (laying out again is slow)
                    fig.savefig(out / f"{s.name}.svg", format="svg")
                    w, h = fig.get_size_inches() * DPI
                    s.size = (round(w), round(h))
        (out / "index.html").write_text(_html(store, df, secs, plots))
    return Path(out_dir) / "index.html", plots


def report(store: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Write OUT_DIR/index.html with a chart (PNG and SVG) and a table per section for a
    results store; returns the index path. Without matplotlib the page has the tables
    only, and a NoPlotsWarning says so. The store is only read; OUT_DIR is changed only
    when the whole report is written (its other files are left alone).

    Raises
    ------
    StoreError, ReportError
        The store is missing, is not a results store, or has no successful runs (named).
    OutputError
        OUT_DIR cannot be written (named).
    ArgumentError
        An argument of the wrong type (named; also a TypeError).
    """
    index, plots = _write(store, out_dir)
    if not plots:
        warnings.warn(NO_PLOTS, NoPlotsWarning, stacklevel=2)
    return index


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _fmt(v: Any) -> str:
    """A number to 4 significant digits; from 1,000 on, its whole part in full with
    thousands separators, whether or not it has a fraction ("3,758" and "3,773", not
    "3773" for 3773.4)."""
    if v is None or _is_number(v) and math.isnan(v):
        return "–"
    if not _is_number(v):
        return str(v)
    f = float(v)
    if abs(f) < 1e15 and (f.is_integer() or abs(f) >= 1000):
        return f"{f:,.0f}"
    return f"{f:.4g}"


def _cell(v: Any) -> str:
    """A table cell; a number's cell carries its full value in ``data-v`` (the sort key,
    "" when missing)."""
    e = html.escape
    if isinstance(v, tuple):  # (mean, min, max, seeds)
        mean, lo, hi, n = v
        if not n:
            return '<td class="num" data-v="">–</td>'
        text = e(_fmt(mean))
        if n > 1:
            text += (f'<br><span class="range" title="min–max over {int(n)} seeds">'
                     f'{e(_fmt(lo))}–{e(_fmt(hi))}</span>')
        return f'<td class="num" data-v="{_sort_key(mean)}">{text}</td>'
    if _is_number(v):
        return f'<td class="num" data-v="{_sort_key(v)}">{e(_fmt(v))}</td>'
    return f"<td>{e(_fmt(v))}</td>"


def _sort_key(v: Any) -> str:
    f = float(v)
    return "" if math.isnan(f) else repr(f)


def _table_html(t: Table, ranges: bool) -> str:
    e = html.escape
    head = "".join(f'<th><button type="button" title="sort by {e(str(h))}">{e(str(h))}</button></th>' for h in t.headers)
    body = "\n".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in t.rows)
    notes = [t.note] if t.note else []
    if ranges:
        notes.append("Each cell: the mean over seeds, and below it the minimum–maximum across seeds.")
    note = f'<p class="note">{e(" ".join(notes))}</p>' if notes else ""
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>{note}'


# Sorts a table by the column whose header button is clicked: ascending, then descending
# on a second click. Numbers by their full value (data-v), text in natural order
# ("2" before "10"); missing values ("–") last either way; ties keep their order. The
# header carries aria-sort. vmlabSort(table, column, "ascending"|"descending") is the
# same from a script.
SORT_JS = """
function vmlabSort(table, col, dir) {
  const key = row => {
    const c = row.cells[col];
    if (!c) return null;
    if (c.dataset.v !== undefined) return c.dataset.v === "" ? null : Number(c.dataset.v);
    const t = c.textContent.trim();
    return t === "" || t === "\u2013" ? null : t;
  };
  const sign = dir === "descending" ? -1 : 1;
  const body = table.tBodies[0];
  [...body.rows].map((row, i) => [key(row), i, row]).sort(([a, i], [b, j]) => {
    if (a === null || b === null) return (a === null) - (b === null) || i - j;
    const d = typeof a === "number" && typeof b === "number" ? a - b
      : String(a).localeCompare(String(b), undefined, {numeric: true});
    return sign * d || i - j;
  }).forEach(([, , row]) => body.append(row));
  [...table.tHead.rows[0].cells].forEach((th, k) => k === col ? th.setAttribute("aria-sort", dir)
                                                               : th.removeAttribute("aria-sort"));
}
document.querySelectorAll("table.sortable").forEach(table => {
  [...table.tHead.rows[0].cells].forEach((th, col) => th.querySelector("button").addEventListener("click", () =>
    vmlabSort(table, col, th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending")));
});
"""


CSS = f"""
body{{font-family:system-ui,sans-serif;max-width:{FIG_WIDTH_PX + 700}px;margin:1em auto;padding:0 1em;color:#222}}
.chart{{display:flex;flex-wrap:wrap;gap:1em 1.5em;align-items:flex-start}}
figure{{margin:0;width:{FIG_WIDTH_PX}px;max-width:100%}}
figure img{{display:block;max-width:100%;height:auto}}
figcaption{{font-size:0.9em;color:#444;margin-top:0.3em}}
.numbers{{flex:1 1 360px;min-width:0;overflow-x:auto}}
table{{border-collapse:collapse;font-size:0.85em}}
td,th{{border:1px solid #ccc;padding:2px 6px;vertical-align:top}}
th{{background:#f3f3f3;text-align:left;white-space:nowrap}}
th button{{font:inherit;color:inherit;background:none;border:0;padding:0;margin:0;cursor:pointer;text-align:left}}
th button::after{{content:"\\2195";color:#999;padding-left:0.25em;font-size:0.85em}}
th[aria-sort=ascending] button::after{{content:"\\25B2";color:#222}}
th[aria-sort=descending] button::after{{content:"\\25BC";color:#222}}
td{{white-space:nowrap}}
td.num{{text-align:right;font-variant-numeric:tabular-nums}}
.range{{color:#666;font-size:0.85em;white-space:nowrap}}
.note{{font-size:0.85em;color:#444}}
.warning{{background:#fff4d6;border:1px solid #e0c060;padding:0.5em 1em}}
nav li{{display:inline;margin-right:1em}}
"""


def _html(store, df, secs: list[Section], plots: bool) -> str:
    e = html.escape
    parts = []
    for s in secs:
        ranges = any(isinstance(v, tuple) and v[3] > 1 for row in s.table.rows for v in row)
        if plots and s.size:
            w, h = s.size
            fig = (f'<figure><img src="{e(s.name)}.png" width="{w}" height="{h}" alt="{e(s.title)}">'
                   f'<figcaption>{e(s.caption)} (<a href="{e(s.name)}.svg">SVG</a>)</figcaption></figure>')
        else:
            fig = f'<p class="note">{e(s.caption)}</p>'
        parts.append(f'<section id="{e(s.name)}"><h2>{e(s.title)}</h2>\n<div class="chart">{fig}\n'
                     f'<div class="numbers">{_table_html(s.table, ranges)}</div></div></section>')
    nav = "".join(f'<li><a href="#{e(s.name)}">{e(s.title)}</a></li>' for s in secs)
    warn = "" if plots else f'<p class="warning">{e(NO_PLOTS[0].upper() + NO_PLOTS[1:])}.</p>'
    axes = [c for c in df.columns if c.startswith("axis.")]
    stats = [c for c, *_ in HEADLINES]
    runs = Table(["design", "workload", "seed", *(c[5:] for c in axes), *stats, "key"],
                 [[r["design"], r["input"], str(r["seed"]), *(r[c] for c in axes), *(r[c] for c in stats), r["key"]]
                  for _, r in df.iterrows()])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>vmlab report: {e(os.fspath(store))}</title>
<style>{CSS}</style></head>
<body><h1>vmlab report</h1>
<p>Store <code>{e(os.fspath(store))}</code>: {len(df)} successful runs, {df['design'].nunique()} designs,
{df['input'].nunique()} workloads, {df['seed'].nunique()} seeds.</p>
{warn}
<nav><ul>{nav}<li><a href="#runs">Runs</a></li></ul></nav>
{chr(10).join(parts)}
<section id="runs"><h2>Runs</h2>
<div class="numbers">{_table_html(runs, False)}</div></section>
<script>{SORT_JS}</script>
</body></html>
"""


def main(argv: list[str]) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="vmlab report", description="Charts, tables and an HTML page from a results "
                                                                  "store (docs/reports.md).")
    ap.add_argument("store")
    ap.add_argument("-o", "--out", required=True, help="output directory (created if missing)")
    args = ap.parse_args(argv)
    index, plots = _write(args.store, args.out)
    if not plots:
        print(f"vmlab report: {NO_PLOTS}", file=sys.stderr)
    print(index)
    return 0
