"""`vmlab report`: plots and an HTML page from a results store, without re-simulating."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import matplotlib
import pytest

import vmlab
from vmlab.report import _frame, bar_plot, build_plots, latency_cdf_plot, miss_ratio_plot

matplotlib.use("Agg")

from test_sweep import write_spec

VMLAB = [sys.executable, "-m", "vmlab.cli"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """2 designs x 2 L1 sizes x 2 seeds of a tiny gups, plus a second workload."""
    d = tmp_path_factory.mktemp("report")
    spec = write_spec(d, extra='\n[[workload]]\nname = "stream"\nparams = { accesses = "2k" }\n')
    c = vmlab.sweep(spec, quiet=True, jobs=2)
    assert c["failed"] == 0 and c["ran"] == 16
    return d / "s.sqlite"


def svg_text(path) -> set[str]:
    return {"".join(t.itertext()).strip() for t in ET.parse(path).iter() if t.tag.endswith("text")}


def test_report_writes_index_and_plots_with_labels(store, tmp_path):
    out = tmp_path / "r"
    index = vmlab.report(store, out)
    assert index == out / "index.html"
    page = index.read_text()
    imgs = re.findall(r'<img src="([^"]+)\.png"', page)
    # Four headline bars, one miss-ratio curve (tlb.l1d.entries is swept), the CDF, page-table memory.
    assert len(imgs) == 7 and "mrc_l1d" in imgs and "walk_latency_cdf" in imgs
    for name in imgs:
        assert (out / f"{name}.png").stat().st_size > 1000
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / f"{name}.svg").exists()
    assert page.count("<figcaption>") == 7
    # The run table: one row per run, each key listed.
    df = vmlab.load(store)
    assert page.count("<tr>") == len(df) + 1 and all(k in page for k in df["key"])
    # Axis labels (with units) and legends made it into the files.
    mrc = svg_text(out / "mrc_l1d.svg")
    assert "miss rate (misses / lookups)" in mrc and any(t.startswith("l1d entries") for t in mrc)
    cdf = svg_text(out / "walk_latency_cdf.svg")
    assert "walk latency (cycles, log scale)" in cdf and "fraction of walks at or below" in cdf
    bars = svg_text(out / "cycles_translation_per_kilo_instruction.svg")
    assert {"design", "cycles per 1000 instructions", "workload", "gups", "stream"} <= bars


def test_figures_carry_title_labels_and_one_legend_entry_per_line(store):
    df = _frame(store)
    for p in build_plots(df):
        ax = p.figure.axes[0]
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), p.name
        assert ax.get_legend() is not None, p.name
    mrc = miss_ratio_plot(df, "axis.tlb.l1d.entries").figure.axes[0]
    # 2 designs x 2 workloads, each a curve over the 2 swept sizes, decreasing or flat.
    assert len(mrc.lines) == 4
    for line in mrc.lines:
        xs, ys = line.get_data()
        assert list(xs) == [4, 8] and ys[0] >= ys[1]
    cdf = latency_cdf_plot(df).figure.axes[0]
    for line in cdf.lines:
        ys = line.get_ydata()
        assert ys[-1] == pytest.approx(1.0) and all(a <= b for a, b in zip(ys, ys[1:]))


def test_bars_are_the_seed_means_of_the_stored_stats(store):
    df = _frame(store)
    ax = bar_plot(df, "walks.refs_per_walk", "t", "y", "n", "c").figure.axes[0]
    heights = sorted(round(b.get_height(), 9) for b in ax.patches)
    want = sorted(round(v, 9) for v in df.groupby(["design", "variant", "input"])["walks.refs_per_walk"].mean())
    assert heights == want


def test_cli_report_and_missing_store(store, tmp_path):
    p = subprocess.run([*VMLAB, "report", str(store), "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "index.html").exists()
    missing = tmp_path / "nope.sqlite"
    p = subprocess.run([*VMLAB, "report", str(missing), "-o", str(tmp_path / "o2")], capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [f"vmlab: error: no results store at {missing}"]
    assert not missing.exists()
