"""``vmlab report STORE -o DIR``: plots and an HTML page from a results store.

Reads the store only (nothing is re-simulated): headline stats per design, miss-ratio
curves over swept TLB sizes, walk-latency CDFs and page-table memory per mapped page,
each as PNG and SVG, and DIR/index.html embedding the PNGs with a table of the runs.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _core
from ._files import atomic_path, make_dir, write_text
from .store import Store, load


class ReportError(_core.VmlabError):
    """A store that cannot be reported on (missing, or without successful runs)."""


@dataclass
class Plot:
    name: str      # file stem: NAME.png, NAME.svg
    caption: str
    figure: Any    # matplotlib Figure


# Headline bar charts: (column, title, y label, caption). The first two are derived in
# _derive because `load` leaves out list-valued stats and per-access ratios.
HEADLINES = [
    ("l1_dtlb_miss_rate", "L1 data-TLB miss rate", "miss rate (misses / lookups)",
     "Level-1 data-side TLB misses per lookup (tlb_levels_by_side.data[0])."),
    ("walks_per_kilo_access", "Page walks per kilo-access", "walks per 1000 accesses",
     "Page walks (one per last-level TLB miss) per 1000 memory accesses."),
    ("walks.refs_per_walk", "Page-walk memory references per walk", "references per walk",
     "Page-table entries read per walk, after walk caches."),
    ("cycles.translation_per_kilo_instruction", "Translation cycles per kilo-instruction",
     "cycles per 1000 instructions", "TLB lookup plus page-walk cycles per 1000 instructions."),
]
PT_MEMORY = ("page_table.bytes_per_mapped_page", "Page-table memory per mapped page", "bytes per mapped page",
             "Page-table bytes at the end of the run divided by the pages mapped then.")


def _frame(store: str | os.PathLike):
    """The store's successful runs (via `load`) plus the list-valued stats the plots need."""
    if not os.path.exists(store):
        raise ReportError(f"no results store at {os.fspath(store)}")
    df = load(store)
    if df.empty:
        raise ReportError(f"{os.fspath(store)}: no successful runs to report on")
    derived: dict[str, dict] = {}
    with Store(store) as st:
        for r in st.rows():
            if r["status"] == "ok":
                derived[r["key"]] = _derive(json.loads(r["stats"]))
    for col in ("l1_dtlb_miss_rate", "walks_per_kilo_access", "latency_histogram"):
        df[col] = [derived[k][col] for k in df["key"]]
    df["input"] = [w if isinstance(w, str) else Path(t).name for w, t in zip(df["workload"], df["trace"])]
    axes = [c for c in df.columns if c.startswith("axis.")]
    # Plots keep this order (groupby sort=False): swept values ascend as numbers, not as strings.
    df = df.sort_values(["design", *axes, "input", "seed"], kind="stable").reset_index(drop=True)
    df["variant"] = [", ".join(f"{c[5:]}={row[c]}" for c in axes if _varies(df, c)) for _, row in df.iterrows()]
    return df


def _derive(stats: dict) -> dict:
    l1 = stats["tlb_levels_by_side"]["data"][0]
    accesses = stats["totals"]["accesses"]
    return {
        "l1_dtlb_miss_rate": l1["misses"] / l1["lookups"] if l1["lookups"] else 0.0,
        "walks_per_kilo_access": 1000 * stats["walks"]["count"] / accesses if accesses else 0.0,
        "latency_histogram": stats["walks"]["latency"]["histogram"],
    }


def _varies(df, col: str) -> bool:
    return df[col].astype(str).nunique() > 1


def _design_label(design: str, variant: str) -> str:
    return f"{design} [{variant}]" if variant else design


def bar_plot(df, column: str, title: str, ylabel: str, name: str, caption: str) -> Plot:
    """Bars per design (and swept variant), one bar per input side by side; mean over seeds."""
    import matplotlib.pyplot as plt
    import numpy as np

    g = df.groupby(["design", "variant", "input"], sort=False)[column].mean()
    groups = list(dict.fromkeys((d, v) for d, v, _ in g.index))
    inputs = sorted({i for _, _, i in g.index})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups) * max(1, len(inputs)) / 2 + 2), 4.5))
    width = 0.8 / len(inputs)
    x = np.arange(len(groups))
    for j, inp in enumerate(inputs):
        ys = [g.get((d, v, inp), np.nan) for d, v in groups]
        ax.bar(x + (j - (len(inputs) - 1) / 2) * width, ys, width, label=inp)
    ax.set_xticks(x, [_design_label(d, v) for d, v in groups], rotation=20 if len(groups) > 3 else 0, ha="right" if len(groups) > 3 else "center")
    ax.set_title(title)
    ax.set_xlabel("design")
    ax.set_ylabel(ylabel)
    ax.legend(title="workload")
    fig.tight_layout()
    seeds = df["seed"].nunique()
    return Plot(name, caption + (f" Mean over {seeds} seeds." if seeds > 1 else ""), fig)


def _size_axes(df) -> list[str]:
    """Swept TLB size keys (`tlb.NAME.entries`) whose TLB reports a miss rate."""
    return [c for c in df.columns if c.startswith("axis.tlb.") and c.endswith(".entries") and _varies(df, c)
            and f"{c[5:-len('.entries')]}.miss_rate" in df.columns]


def miss_ratio_plot(df, axis_col: str) -> Plot:
    """Miss rate of the swept TLB against its entries: one line per design/input (and any
    other swept key), mean over seeds."""
    import matplotlib.pyplot as plt

    tlb = axis_col[5:-len(".entries")]
    others = [c for c in df.columns if c.startswith("axis.") and c != axis_col and _varies(df, c)]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, g in df.groupby(["design", "input", *others], sort=False):
        curve = g.groupby(axis_col)[f"{tlb}.miss_rate"].mean().sort_index()
        label = " / ".join(str(k) for k in key[:2]) + "".join(f", {c[5:]}={v}" for c, v in zip(others, key[2:]))
        ax.plot(curve.index, curve.values, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_title(f"Miss-ratio curve: {tlb[4:]}")
    ax.set_xlabel(f"{tlb[4:]} entries (count, log scale)")
    ax.set_ylabel("miss rate (misses / lookups)")
    ax.legend(title="design / workload", fontsize="small")
    fig.tight_layout()
    return Plot(f"mrc_{tlb[4:]}", f"Miss rate of `{tlb}` as its size (`{axis_col[5:]}`) is swept; runs that differ "
                                 "only in that size form one line.", fig)


def latency_cdf_plot(df) -> Plot:
    """CDF of walk latency per design/input/variant, from the stats' histograms summed over seeds."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = 0
    for (design, variant, inp), g in df.groupby(["design", "variant", "input"], sort=False):
        counts: dict[int, int] = {}
        for hist in g["latency_histogram"]:
            for value, n in hist:  # [value, count]; above 4096, [power-of-two upper bound, count]
                counts[value] = counts.get(value, 0) + n
        if not counts:
            continue  # no walks
        xs = np.array(sorted(counts))
        cdf = np.cumsum([counts[v] for v in xs]) / sum(counts.values())
        # Past the 10 default colours, change the dash so no two lines look alike.
        ax.step(xs, cdf, where="post", linestyle=["-", "--", ":", "-."][lines // 10 % 4],
                label=f"{_design_label(design, variant)} / {inp}")
        lines += 1
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_title("Page-walk latency CDF")
    ax.set_xlabel("walk latency (cycles, log scale)")
    ax.set_ylabel("fraction of walks at or below")
    if lines:
        ax.legend(title="design / workload", fontsize="small")
    fig.tight_layout()
    return Plot("walk_latency_cdf", "Cumulative distribution of page-walk latency (walks.latency.histogram: "
                                    "exact below 4096 cycles, power-of-two buckets above), seeds pooled.", fig)


def build_plots(df) -> list[Plot]:
    """Every plot the report shows, for the frame `_frame` makes."""
    plots = [bar_plot(df, col, title, ylabel, col.replace(".", "_"), caption)
             for col, title, ylabel, caption in HEADLINES]
    plots += [miss_ratio_plot(df, c) for c in _size_axes(df)]
    plots.append(latency_cdf_plot(df))
    col, title, ylabel, caption = PT_MEMORY
    plots.append(bar_plot(df, col, title, ylabel, "page_table_bytes_per_mapped_page", caption))
    return plots


def report(store: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Write OUT_DIR/index.html and the plots (PNG and SVG) for a results store; returns
    the index path."""
    try:
        import matplotlib
    except ImportError:
        raise ReportError("vmlab report draws with matplotlib, which is not installed (pip install matplotlib)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = _frame(store)
    out = make_dir(out_dir)
    # Text stays text in the SVGs (searchable, and checkable by the tests).
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plots = build_plots(df)
        for p in plots:
            # Each file whole or not at all; an unwritable directory is one error naming it.
            with atomic_path(out / f"{p.name}.png") as tmp:
                p.figure.savefig(tmp, dpi=110, format="png")
            with atomic_path(out / f"{p.name}.svg") as tmp:
                p.figure.savefig(tmp, format="svg")
            plt.close(p.figure)
    index = out / "index.html"
    write_text(index, _html(store, df, plots))
    return index


def _html(store, df, plots: list[Plot]) -> str:
    e = html.escape
    figs = "\n".join(f'<figure><img src="{e(p.name)}.png" alt="{e(p.name)}">'
                     f'<figcaption>{e(p.caption)} (<a href="{e(p.name)}.svg">SVG</a>)</figcaption></figure>'
                     for p in plots)
    axes = [c for c in df.columns if c.startswith("axis.")]
    head = "".join(f"<th>{e(h)}</th>" for h in ["design", "workload", "seed", *(c[5:] for c in axes), "key"])
    rows = "\n".join("<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in [r["design"], r["input"], r["seed"],
                                                                          *(r[c] for c in axes), r["key"]]) + "</tr>"
                     for _, r in df.iterrows())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>vmlab report: {e(os.fspath(store))}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:auto}} img{{max-width:100%}}
table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:2px 6px;font-size:small}}</style></head>
<body><h1>vmlab report</h1>
<p>Store <code>{e(os.fspath(store))}</code>: {len(df)} successful runs, {df['design'].nunique()} designs,
{df['input'].nunique()} workloads, {df['seed'].nunique()} seeds.</p>
{figs}
<h2>Runs</h2>
<table><tr>{head}</tr>
{rows}
</table></body></html>
"""


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="vmlab report", description="Plots and an HTML page from a results store (docs/sweeps.md).")
    ap.add_argument("store")
    ap.add_argument("-o", "--out", required=True, help="output directory (created if missing)")
    args = ap.parse_args(argv)
    print(report(args.store, args.out))
    return 0
