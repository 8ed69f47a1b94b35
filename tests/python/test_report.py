"""`vmlab report`: charts, tables and an HTML page from a results store, without re-simulating."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import matplotlib
import pandas as pd
import pytest

import vmlab
from vmlab.report import (FIG_WIDTH_PX, RC, NoPlotsWarning, _fmt, _frame, _html, _percentile, _pooled, bar_plot, draw,
                          latency_cdf_plot, miss_ratio_plot, sections)

from test_sweep import write_spec

VMLAB = [sys.executable, "-m", "vmlab.cli"]
BAR_SECTIONS = ["l1_dtlb_miss_rate", "walks_per_kilo_access", "walks_refs_per_walk",
                "cycles_translation_per_kilo_instruction", "page_table_bytes_at_peak",
                "page_table_bytes_per_mapped_page_at_peak"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """2 designs (4K and 2M pages) x 2 L1 sizes x 2 seeds of a tiny gups, plus a second workload."""
    d = tmp_path_factory.mktemp("report")
    spec = write_spec(d, extra='\n[[workload]]\nname = "stream"\nparams = { accesses = "2k" }\n')
    c = vmlab.sweep(spec, quiet=True, jobs=2)
    assert c["failed"] == 0 and c["ran"] == 16
    return d / "s.sqlite"


@pytest.fixture(scope="module")
def page(store, tmp_path_factory):
    """The report of `store`: its directory and index.html's text."""
    out = tmp_path_factory.mktemp("out") / "r"
    index = vmlab.report(store, out)
    assert index == out / "index.html"
    return out, index.read_text()


def svg_text(path) -> set[str]:
    return {"".join(t.itertext()).strip() for t in ET.parse(path).iter() if t.tag.endswith("text")}


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


class Page(HTMLParser):
    """The page's sections: for each, its <img> attributes and the text of its table cells."""

    def __init__(self, text):
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.cur = None
        self.cell = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.cur = self.sections.setdefault(a["id"], {"imgs": [], "rows": []})
        elif self.cur is not None and tag == "img":
            self.cur["imgs"].append(a)
        elif self.cur is not None and tag == "tr":
            self.cur["rows"].append([])
        elif self.cur is not None and tag in ("td", "th"):
            self.cell = []
        elif tag == "br" and self.cell is not None:
            self.cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.cur["rows"][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "section":
            self.cur = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def test_report_writes_a_chart_and_a_table_per_section_at_the_page_width(page):
    out, text = page
    secs = Page(text).sections
    # Four headline bars, one miss-ratio curve (tlb.l1d.entries is swept), the CDF, two page-table charts, the runs.
    assert list(secs) == [*BAR_SECTIONS[:4], "mrc_l1d", "walk_latency_cdf", *BAR_SECTIONS[4:], "runs"]
    for name, s in secs.items():
        if name == "runs":
            assert s["imgs"] == []
            continue
        [img] = s["imgs"]
        assert img["src"] == f"{name}.png" and (out / f"{name}.svg").exists()
        # Shown 1:1: the <img> has the PNG's own size, and the PNG is the page's chart column wide.
        w, h = png_size(out / img["src"])
        assert (int(img["width"]), int(img["height"])) == (w, h) and w == FIG_WIDTH_PX
        assert len(s["rows"]) > 1, f"{name}: no table"
    assert f"figure{{margin:0;width:{FIG_WIDTH_PX}px" in text
    assert not list(out.glob(".*vmlab-tmp*")), "temporary files left behind"


def test_numbers_read_alike_whole_or_not():
    # Thousands separators on every number from 1,000 on, not only whole ones.
    assert [_fmt(x) for x in (3758, 3773.4, 3773.6, -12345.5, 999.94, 0.012345, 1e16)] == \
        ["3,758", "3,773", "3,774", "-12,346", "999.9", "0.01235", "1e+16"]
    assert _fmt(float("nan")) == _fmt(None) == "–" and _fmt("gups") == "gups"


def test_the_run_table_lists_every_run(store, page):
    _, text = page
    rows = Page(text).sections["runs"]["rows"]
    df = vmlab.load(store)
    assert len(rows) == len(df) + 1 and sorted(r[-1] for r in rows[1:]) == sorted(df["key"])


def test_bar_tables_hold_the_seed_mean_and_range_of_the_stored_stats(store, page):
    _, text = page
    df = vmlab.load(store)
    rows = Page(text).sections["walks_refs_per_walk"]["rows"]
    assert rows[0] == ["design", "tlb.l1d.entries", "gups", "stream"]
    assert len(rows) == 1 + 4  # 2 designs x 2 sizes
    for row in rows[1:]:
        design, entries = row[0], int(row[1])
        for inp, cell in zip(["gups", "stream"], row[2:]):
            v = df[(df["design"] == design) & (df["axis.tlb.l1d.entries"] == entries) & (df["workload"] == inp)]
            v = v["walks.refs_per_walk"]
            assert len(v) == 2
            want = _fmt(v.mean()) + (f" {_fmt(v.min())}–{_fmt(v.max())}")
            assert cell == want, (row, inp)


def test_page_table_memory_is_the_peak_not_the_end_of_run(store, page):
    _, text = page
    df = _frame(store)
    rows = Page(text).sections["page_table_bytes_at_peak"]["rows"]
    g = df.groupby(["design", "axis.tlb.l1d.entries", "input"])["page_table.bytes_at_peak"].mean()
    assert rows[1][2].split()[0] == _fmt(g[(rows[1][0], int(rows[1][1]), "gups")])
    # A program that exits ends with empty tables: the chart still shows the peak.
    exited = df.copy()
    exited["page_table.bytes"] = 0
    exited["page_table.bytes_per_mapped_page"] = 0.0
    sec = {s.name: s for s in sections(exited)}["page_table_bytes_at_peak"]
    assert "bytes_at_peak" in sec.caption
    ax = draw(sec).axes[0]
    assert sorted(round(b.get_width()) for b in ax.patches) == sorted(round(v) for v in g)
    assert min(b.get_width() for b in ax.patches) > 0
    # Stats without the peak fields (an older store): the end of the run, and the caption says so.
    old = df.drop(columns=[c for c in df.columns if c.endswith("_at_peak")])
    sec = {s.name: s for s in sections(old)}["page_table_bytes_at_peak"]
    assert "end of the run" in sec.caption and "no page_table.bytes_at_peak" in sec.caption
    assert sec.table.rows[0][2][0] == pytest.approx(
        old[(old["design"] == sec.table.rows[0][0]) & (old["input"] == "gups")
            & (old["axis.tlb.l1d.entries"] == sec.table.rows[0][1])]["page_table.bytes"].mean())


def test_bars_are_seed_means_with_min_max_whiskers(store):
    df = _frame(store)
    fig = bar_plot(df, "walks.refs_per_walk", "t", "y")
    ax = fig.axes[0]
    g = df.groupby(["design", "variant", "input"])["walks.refs_per_walk"]
    assert sorted(round(b.get_width(), 9) for b in ax.patches) == sorted(round(v, 9) for v in g.mean())
    # Whiskers: each bar's error segment runs from the seeds' minimum to their maximum.
    bars_with_errors = [c for c in ax.containers if getattr(c, "errorbar", None)]
    segments = [seg for c in bars_with_errors for seg in c.errorbar.lines[2][0].get_segments()]
    assert sorted((round(s[0][0], 9), round(s[1][0], 9)) for s in segments) == \
        sorted((round(lo, 9), round(hi, 9)) for lo, hi in zip(g.min(), g.max()))
    assert any(lo != hi for lo, hi in zip(g.min(), g.max())), "the seeds should differ somewhere"
    # One seed: no whiskers.
    one = bar_plot(df[df["seed"] == 1], "walks.refs_per_walk", "t", "y").axes[0]
    assert not any(getattr(c, "errorbar", None) for c in one.containers)


def test_log_axis_only_where_values_span_decades(store):
    df = _frame(store)
    wpka = df.groupby(["design", "variant", "input"])["walks_per_kilo_access"].mean()
    refs = df.groupby(["design", "variant", "input"])["walks.refs_per_walk"].mean()
    assert wpka.max() / wpka.min() > 100 and refs.max() / refs.min() < 100  # what the store holds
    log = bar_plot(df, "walks_per_kilo_access", "t", "y").axes[0]
    assert log.get_xscale() == "log" and "log scale" in log.get_xlabel()
    # Every bar, the 2M-page ones included, has at least a decade of axis to itself.
    assert log.get_xlim()[0] <= wpka.min() / 10 ** 0.3
    lin = bar_plot(df, "walks.refs_per_walk", "t", "y").axes[0]
    assert lin.get_xscale() == "linear" and "log" not in lin.get_xlabel()
    caps = {s.name: s.caption for s in sections(df)}
    assert "Log scale" in caps["walks_per_kilo_access"] and "Log scale" not in caps["walks_refs_per_walk"]
    assert "minimum to maximum across seeds" in caps["walks_refs_per_walk"]


def _outside(fig, legend) -> bool:
    fig.draw_without_rendering()  # lays the figure out
    lb = legend.get_window_extent()
    return all(not lb.overlaps(ax.get_window_extent()) for ax in fig.axes if ax.get_visible())


def test_cdf_has_a_panel_per_workload_a_legend_outside_and_room_above_one(store):
    df = _frame(store)
    with matplotlib.rc_context(RC):
        fig = latency_cdf_plot(df)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["gups", "stream"]
    for ax in axes:
        assert ax.get_ylim()[1] > 1.0  # lines at 1.0 are not on the frame's edge
        assert len(ax.lines) == 4  # 2 designs x 2 sizes
        for line in ax.lines:
            ys = line.get_ydata()
            assert ys[0] == 0 and ys[-1] == pytest.approx(1.0) and all(a <= b for a, b in zip(ys, ys[1:]))
    [legend] = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [f"{d} [tlb.l1d.entries={e}]" for d in ("tiny", "tiny-2m")
                                                          for e in (4, 8)]
    assert _outside(fig, legend)
    # Lines of one design share a colour; its swept values differ by dash.
    lines = {l.get_label(): l for l in axes[0].lines}
    assert lines["tiny [tlb.l1d.entries=4]"].get_color() == lines["tiny [tlb.l1d.entries=8]"].get_color()
    assert lines["tiny [tlb.l1d.entries=4]"].get_linestyle() != lines["tiny [tlb.l1d.entries=8]"].get_linestyle()
    assert lines["tiny [tlb.l1d.entries=4]"].get_color() != lines["tiny-2m [tlb.l1d.entries=4]"].get_color()


def test_many_lines_keep_the_legend_off_the_data(store):
    df = _frame(store)
    # 12 designs x 2 sizes = 24 lines per workload.
    many = pd.concat([df.assign(design=df["design"] + f" copy {k}") for k in range(6)], ignore_index=True)
    fig = latency_cdf_plot(many)
    [legend] = fig.legends
    assert len(legend.get_texts()) == 24 and _outside(fig, legend)
    assert fig.get_size_inches()[0] * fig.dpi == FIG_WIDTH_PX


def test_cdf_table_percentiles_match_the_engine(store):
    df = _frame(store)
    one = df[df["seed"] == 1]
    table = {s.name: s for s in sections(one)}["walk_latency_cdf"].table
    assert table.headers == ["design", "tlb.l1d.entries", "workload", "seeds", "walks", "mean", "p50", "p90", "p99",
                             "max"]
    assert len(table.rows) == 8
    for design, entries, inp, seeds, walks, mean, p50, p90, p99, mx in table.rows:
        r = one[(one["design"] == design) & (one["axis.tlb.l1d.entries"] == entries) & (one["input"] == inp)].iloc[0]
        assert seeds == 1 and walks == r["walks.latency.count"]
        assert (mean, p50, p90, p99, mx) == pytest.approx((r["walks.latency.mean"], r["walks.latency.p50"],
                                                           r["walks.latency.p90"], r["walks.latency.p99"],
                                                           r["walks.latency.max"]))
    # Pooled over seeds: the percentile of the summed histograms.
    both = df[(df["design"] == "tiny") & (df["input"] == "gups") & (df["axis.tlb.l1d.entries"] == 4)]
    counts = _pooled(both["latency_histogram"])
    assert _percentile(counts, 0.5) in counts and sum(counts.values()) == both["walks.latency.count"].sum()


def test_miss_ratio_curves_per_workload_with_the_sizes_as_ticks(store):
    df = _frame(store)
    fig = miss_ratio_plot(df, "axis.tlb.l1d.entries")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["gups", "stream"]
    for ax in axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8"]
        curves = [l for l in ax.lines if len(l.get_xdata()) == 2 and l.get_marker() == "o"]
        assert len(curves) == 2  # one per design
        for line in curves:
            xs, ys = line.get_data()
            assert list(xs) == [4, 8] and ys[0] >= ys[1]
    [legend] = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["tiny", "tiny-2m"] and _outside(fig, legend)


def test_svg_keeps_labels_as_text(page):
    out, _ = page
    mrc = svg_text(out / "mrc_l1d.svg")
    assert any(t.startswith("miss rate (misses / lookups)") for t in mrc)
    assert any(t.startswith("l1d entries") for t in mrc)
    cdf = svg_text(out / "walk_latency_cdf.svg")
    assert "walk latency (cycles, log scale)" in cdf and "fraction of walks at or below" in cdf
    bars = svg_text(out / "cycles_translation_per_kilo_instruction.svg")
    assert {"design", "workload", "gups", "stream"} <= bars
    assert any(t.startswith("cycles per 1000 instructions") for t in bars)


def test_everything_on_the_page_is_escaped(store):
    df = _frame(store)
    evil = '<img src=x onerror="alert(1)">&'
    df["design"] = [evil if d == "tiny" else d for d in df["design"]]
    df["input"] = ["<b>gups</b>" if i == "gups" else i for i in df["input"]]
    text = _html(evil, df, sections(df), plots=False)
    assert "<img" not in text and "<b>" not in text
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in text and "&lt;b&gt;gups&lt;/b&gt;" in text
    parsed = Page(text).sections
    assert parsed["walks_refs_per_walk"]["rows"][1][0] == evil  # the text a reader sees is the name as given


def test_without_matplotlib_the_report_has_the_tables_and_says_how_to_get_plots(store, tmp_path):
    # matplotlib made unimportable (as if not installed), in a fresh interpreter.
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(block), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = tmp_path / "r"
    p = subprocess.run([*VMLAB, "report", str(store), "-o", str(out)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out / "index.html")
    assert p.stderr.strip().splitlines() == [
        "vmlab report: no plots: matplotlib is not installed (pip install 'vmlab[plots]'); "
        "the report has the tables only"]
    text = (out / "index.html").read_text()
    secs = Page(text).sections
    assert all(not s["imgs"] for s in secs.values()) and not list(out.glob("*.png"))
    assert len(secs["walks_refs_per_walk"]["rows"]) == 5 and "pip install &#x27;vmlab[plots]&#x27;" in text


def test_without_matplotlib_the_python_api_warns(store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.warns(NoPlotsWarning, match=r"pip install 'vmlab\[plots\]'"):
        index = vmlab.report(store, tmp_path / "r")
    assert index.exists() and "<img" not in index.read_text()


def _chromium() -> str | None:
    return next(filter(None, map(shutil.which, ["chromium", "chromium-browser", "google-chrome"])), None)


# After every image has loaded or failed (the load event), list each one's natural size.
CHECK = ('<script>addEventListener("load", () => { const p = document.createElement("pre"); p.id = "img-check";'
         ' p.textContent = JSON.stringify([...document.images].map(i => [i.getAttribute("src"), i.naturalWidth,'
         ' i.naturalHeight])); document.body.append(p); });</script>')


def _render(browser, page, tmp_path) -> list:
    check = page.parent / "chromium-check.html"
    check.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                        check.as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="img-check">(.*?)</pre>', p.stdout, re.S)
    assert m, (p.returncode, p.stderr[-2000:])
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_the_page_renders_in_headless_chromium_with_every_image_loaded(page, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    out = tmp_path / "r"
    shutil.copytree(page[0], out)
    imgs = _render(browser, out / "index.html", tmp_path)
    html_imgs = [a for s in Page(page[1]).sections.values() for a in s["imgs"]]
    assert len(imgs) == len(html_imgs) == 8
    for (src, w, h), a in zip(imgs, html_imgs):
        assert src == a["src"] and (w, h) == (int(a["width"]), int(a["height"])), src
    # The check sees a broken image: one PNG gone.
    (out / "mrc_l1d.png").unlink()
    broken = {src: w for src, w, _ in _render(browser, out / "index.html", tmp_path)}
    assert broken["mrc_l1d.png"] == 0 and broken["walk_latency_cdf.png"] == FIG_WIDTH_PX


# After the page's own scripts have run (the load event): click the Runs table's header
# buttons, recording the run keys' order and the headers' aria-sort after each click.
SORT_CHECK = """<script>addEventListener("load", () => {
  const table = document.querySelector("#runs table"), heads = [...table.tHead.rows[0].cells];
  const col = name => heads.findIndex(th => th.textContent.trim() === name);
  const keys = () => [...table.tBodies[0].rows].map(r => r.cells[col("key")].textContent.trim());
  const clicks = [["%s", "first"], ["%s", "second"], ["design", "first"]].map(([name]) => {
    heads[col(name)].querySelector("button").click();
    return {name, keys: keys(), sort: heads.map(th => th.getAttribute("aria-sort"))};
  });
  const p = document.createElement("pre"); p.id = "sort-check"; p.textContent = JSON.stringify(clicks);
  document.body.append(p);
});</script>"""


def _chromium_run(browser, page: str, tmp_path, *flags) -> subprocess.CompletedProcess:
    """Headless chromium on `page`, logging the page's console messages on stderr. A
    browser that crashes (killed by a signal: it has segfaulted on a loaded host) runs
    once more: its crash is not the page's behaviour under test."""
    for attempt in range(2):
        p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / f'profile{attempt}'}",
                            "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0", *flags, page],
                           capture_output=True, text=True, timeout=120)
        if p.returncode >= 0:
            break
    return p


def _console(stderr: str) -> list[str]:
    """The page's console messages (errors included: uncaught ones read "Uncaught ...")."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_the_run_table_sorts_by_a_clicked_header_in_headless_chromium(store, page, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    from PIL import Image

    out = tmp_path / "r"
    shutil.copytree(page[0], out)
    stat = "walks.refs_per_walk"
    check = out / "sort-check.html"
    check.write_text(page[1].replace("</body>", SORT_CHECK % (stat, stat) + "</body>"))
    shot = tmp_path / "report.png"
    p = _chromium_run(browser, check.as_uri(), tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", "--dump-dom")
    assert _console(p.stderr) == [], "console messages"
    m = re.search(r'<pre id="sort-check">(.*?)</pre>', p.stdout, re.S)
    assert m, (p.returncode, p.stderr[-2000:])
    clicks = json.loads(html.unescape(m.group(1)))

    df = vmlab.load(store).set_index("key")
    heads = Page(page[1]).sections["runs"]["rows"][0]
    i_stat, i_design = heads.index(stat), heads.index("design")
    # In the page's order before sorting: the store's.
    before = [r[-1] for r in Page(page[1]).sections["runs"]["rows"][1:]]
    assert sorted(before) == sorted(df.index)
    up, down, by_design = clicks
    # First click: ascending by the full value (not the 4 digits shown), ties in page order.
    assert up["keys"] == sorted(before, key=lambda k: df.loc[k, stat])
    assert up["sort"][i_stat] == "ascending" and sum(s is not None for s in up["sort"]) == 1
    # Second click on the same header: descending, ties still in the order they had.
    assert down["keys"] == sorted(up["keys"], key=lambda k: -df.loc[k, stat])
    assert down["sort"][i_stat] == "descending"
    # Text columns sort as text; the stat's arrow moves to the design header.
    assert by_design["keys"] == sorted(down["keys"], key=lambda k: df.loc[k, "design"])
    assert by_design["sort"][i_design] == "ascending" and by_design["sort"][i_stat] is None
    assert df[stat].nunique() > 1 and df["design"].nunique() > 1, "nothing to sort"

    # The screenshot is the page, drawn: the window's size, not one flat colour.
    with Image.open(shot) as img:
        assert img.size == (1400, 1000)
        assert len(img.convert("RGB").getcolors(maxcolors=img.width * img.height)) > 16

    # The console check sees an error in the page.
    bad = out / "bad.html"
    bad.write_text(page[1].replace("</body>", "<script>undefinedFunction();</script></body>"))
    assert any("Uncaught ReferenceError" in line for line in _console(_chromium_run(browser, bad.as_uri(), tmp_path,
                                                                                       "--dump-dom").stderr))


def test_cli_report_and_missing_store(store, tmp_path):
    p = subprocess.run([*VMLAB, "report", str(store), "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(tmp_path / "out" / "index.html") and p.stderr == ""
    assert (tmp_path / "out" / "index.html").exists()
    missing = tmp_path / "nope.sqlite"
    p = subprocess.run([*VMLAB, "report", str(missing), "-o", str(tmp_path / "o2")], capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [f"vmlab: error: no results store at {missing}"]
    assert not missing.exists()
