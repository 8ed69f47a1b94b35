"""`vmlab.load`'s tidy table (typed parameters, trace runs named), the parameter parsers
it shares with the engine, and `vmlab export` / `vmlab.export` to CSV and Parquet."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import vmlab
from vmlab import _table
from conftest import vmlab_cmd

ROOT = Path(__file__).resolve().parents[2]
SYNTH = ROOT / "crates" / "vmlab-core" / "src" / "trace" / "synth"


# --- Parameters typed as the engine reads them.

def test_the_parameter_kinds_are_the_engines():
    """Each workload's parameters are read by Params::bytes/count/int/float/choice in its
    Rust source; the Python table must say the same, for every parameter the catalogue
    lists (a new parameter, or a changed kind, fails here)."""
    common = dict((n, k) for k, n in re.findall(r'self\.(bytes|count|int|float)\("(\w+)"\)', (SYNTH / "params.rs").read_text()))
    for name in ("accesses", "seed", "instrs_per_access", "pid", "code", "base"):
        assert _table.COMMON_PARAM_KINDS[name] == common[name], name
    helpers = {"footprint": "bytes", "base": "int", "seed": "int"}  # p.footprint(), p.base(), p.seed()
    assert all(common[n] == k for n, k in helpers.items())
    catalogue = {w["name"]: [p["name"] for p in w["params"]] for w in vmlab.workloads()}
    covered = set()
    for rs in SYNTH.glob("*.rs"):
        text = rs.read_text()
        names = re.findall(r'WorkloadInfo \{\s*name: "(\w+)"', text)
        if not names:
            continue
        kinds: dict[str, set] = {}
        for kind, name in re.findall(r'p\.(bytes|count|int|float|choice)\("(\w+)"', text):
            kinds.setdefault(name, set()).add(kind)
        for helper in re.findall(r"p\.(footprint|base|seed)\(\)", text):
            kinds.setdefault(helper, set()).add(helpers[helper])
        for w in names:
            covered.add(w)
            for param in catalogue[w]:
                assert kinds.get(param) == {_table.param_kind(w, param)}, (rs.name, w, param, kinds.get(param))
    assert covered == set(catalogue) == set(_table.PARAM_KINDS)


def test_the_reference_page_lists_each_parameter_under_its_kind():
    doc = (ROOT / "docs" / "python.md").read_text()
    section = doc[doc.index("### Typed parameters"):doc.index("## Results stores")]
    listed = {}
    for kind, names in re.findall(r"^\| (size|count|integer|number|choice) \| ([^|]+) \|", section, re.M):
        for name, where in re.findall(r"`(\w+)`(?: \(([^)]*)\))?", names):
            for w in (where.split(", ") if where else [None]):
                listed[(name, w)] = {"size": "bytes", "integer": "int", "number": "float"}.get(kind, kind)
    kinds = {**{(n, w): k for w, own in _table.PARAM_KINDS.items() for n, k in own.items()},
             **{(n, w): k for w in _table.PARAM_KINDS for n, k in _table.COMMON_PARAM_KINDS.items()}}
    for (name, w), kind in kinds.items():
        assert listed.get((name, w), listed.get((name, None))) == kind, (name, w)
    assert {n for n, _ in listed} == {n for n, _ in kinds}


@pytest.mark.parametrize("text, value", [
    ("4096", 4096), ("4K", 4096), ("4k", 4096), ("4KiB", 4096), ("16kb", 16384), ("2M", 2 << 20), ("1G", 1 << 30),
    ("1GiB", 1 << 30), ("3T", 3 << 40), (" 8M ", 8 << 20), ("+64", 64), ("0", 0),
    ("1.5G", None), ("4 K", 4096), ("K", None), ("-4K", None), ("4Q", None), ("1_000", None), ("١٢", None),
    ("\u212a4", None), ("4\u212a", None), ("16384P", None),  # the Kelvin sign is not a K; 2^64 overflows
])
def test_sizes_parse_as_addr_parse_bytes(text, value):
    assert _table.parse_bytes(text) == value


@pytest.mark.parametrize("text, value", [
    ("1000", 1000), ("10k", 10_000), ("10K", 10_000), ("5M", 5_000_000), ("2G", 2_000_000_000), ("1e6", 1_000_000),
    ("1.5e3", 1500), ("2.5k", None), (" 7 ", 7),
    ("5m", None), ("2g", None), ("1.5", None), ("-1", None), ("1e20", None), ("inf", None), ("nan", None),
    ("1_000", None), ("1e", None), ("", None), ("5 k", None),
])
def test_counts_parse_as_params_count(text, value):
    assert _table.parse_count(text) == value


def test_ints_and_floats_parse_as_params_int_and_float():
    assert _table.parse_int("0x7f0000000000") == 0x7F0000000000
    assert _table.parse_int("1_024") == 1024 and _table.parse_int("0XFF") is None and _table.parse_int("4K") is None
    assert _table.parse_float("0.99") == 0.99 and _table.parse_float(".5") == 0.5 and _table.parse_float("1e-3") == 0.001
    assert _table.parse_float("inf") is None and _table.parse_float("0.5_0") is None and _table.parse_float("") is None


def test_the_engine_agrees_with_the_typed_values():
    """What the engine makes of the spellings: a region of the typed size at the typed
    base, and the typed number of accesses."""
    for footprint, base, accesses in [("8M", "0x7f0000000000", "2k"), ("16MiB", "0x40000000", "1.5e3"), ("4096kb", "1_073_741_824", "3K")]:
        first = next(iter(vmlab.read_trace(workload="gups", footprint=footprint, base=base, accesses="1")))
        assert first[0] == "mmap"
        assert first[2] == _table.typed_param("gups", "base", base) and first[3] == _table.typed_param("gups", "footprint", footprint)
        r = vmlab.run("tiny", workload="stream", footprint="1M", accesses=accesses)
        assert r["totals"]["accesses"] == _table.typed_param("stream", "accesses", accesses)
    # A spelling the engine refuses stays text (a failed run's row shows what was given).
    assert _table.typed_param("stream", "accesses", "5m") == "5m"
    with pytest.raises(vmlab.VmlabError, match="accesses"):
        vmlab.run("tiny", workload="stream", accesses="5m")
    # A choice stays text; an unknown workload's or parameter's value is left as given.
    assert _table.typed_param("sparse", "layout", "file") == "file"
    assert _table.typed_param("nosuch", "footprint", "4K") == "4K" and _table.typed_param("gups", "nosuch", "4K") == "4K"
    # The same name is a count for one workload and an integer for another.
    assert _table.typed_param("sparse", "pages", "2k") == 2000 and _table.typed_param("strawman", "pages", "2k") == "2k"


# --- A store to load and export.

SPEC = """
[sweep]
name = "ex"
seeds = [1, 2]

[[config]]
name = "4 entries"
preset = "tiny"
set = {{ "tlb.l1d.entries" = 4 }}

[[config]]
name = "broken"
preset = "tiny"
set = {{ "tlb.l1d.entries" = 3 }}

[[workload]]
name = "gups"
params = {{ footprint = "4M", accesses = "2k" }}

[[workload]]
name = "kv"
params = {{ keys = "10k", accesses = "1k", theta = 0.5 }}

[[trace]]
path = "{trace}"
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("store")
    trace = d / "traces" / "small.vmt"
    trace.parent.mkdir()
    subprocess.run(vmlab_cmd() + ["generate", "gups", "accesses=1k", "footprint=2M", "-o", str(trace)], check=True,
                   capture_output=True)
    spec = d / "ex.toml"
    spec.write_text(SPEC.format(trace=trace))
    c = vmlab.sweep(spec, quiet=True, jobs=1)
    assert (c["total"], c["failed"]) == (12, 6)  # "broken": 3 entries do not split into tiny's ways
    return d / "ex.sqlite"


def test_load_types_parameters_and_names_trace_runs(store):
    df = vmlab.load(store)
    assert len(df) == 6 and set(df["design"]) == {"4 entries"}
    # Trace runs are grouped under their trace's file name, not dropped as NaN.
    assert df.groupby("workload").size().to_dict() == {"gups": 2, "kv": 2, "small.vmt": 2}
    traces = df[df["workload"] == "small.vmt"]
    assert traces["trace"].map(lambda t: Path(t).name).eq("small.vmt").all() and traces["param.footprint"].isna().all()
    gups = df[df["workload"] == "gups"]
    assert gups["param.footprint"].tolist() == [4 << 20] * 2 and gups["param.accesses"].tolist() == [2000] * 2
    kv = df[df["workload"] == "kv"]
    assert kv["param.keys"].tolist() == [10_000] * 2 and kv["param.theta"].tolist() == [0.5] * 2
    assert str(df["param.footprint"].dtype) == "Int64" and df["param.theta"].dtype == "float64"
    # A sweep's seed is each workload's seed too.
    synthetic = df[df["trace"].isna()]
    assert synthetic["param.seed"].tolist() == synthetic["seed"].tolist() and traces["param.seed"].isna().all()
    assert str(df["seed"].dtype) == "Int64" and sorted(df["seed"]) == [1, 1, 1, 2, 2, 2]
    # The stats of each run are its stored document's, by the names Result.get uses.
    stored = dict(sqlite3.connect(store).execute("SELECT key, stats FROM runs WHERE status = 'ok'").fetchall())
    for _, row in df.iterrows():
        r = vmlab.Result(json.loads(stored[row["key"]]))
        for name in ("walks.latency.p99", "tlb.l1d.misses", "tlb_levels_by_side.data.0.miss_rate", "page_table.bytes"):
            assert row[name] == r.get(name), name
        assert set(r.stats()) <= set(df.columns)


def test_load_and_to_frame_share_columns(store):
    df = vmlab.load(store)
    row = df[(df["workload"] == "gups") & (df["seed"] == 1)].iloc[0]
    r = vmlab.run("tiny", workload="gups", footprint="4M", accesses="2k", seed="1",
                  overrides={"tlb.l1d.entries": 4, "mmu.seed": 1}, label="4 entries")
    direct = vmlab.to_frame([r])
    shared = [c for c in direct.columns if c in df.columns]
    assert set(direct.columns) - set(shared) == set()
    assert [c for c in df.columns if c in direct.columns] == shared  # in the same order
    for c in shared:
        if c == "config":
            continue
        assert direct.loc[0, c] == row[c] or (pd.isna(direct.loc[0, c]) and pd.isna(row[c])), c


def test_load_with_errors_and_in_long_form(store):
    full = vmlab.load(store, include_errors=True)
    bad = full[full["status"] == "error"]
    assert len(bad) == 6 and bad["error"].str.contains("tlb.l1d").all() and bad["walks.count"].isna().all()
    # A failed run keeps the parameters it was given, typed.
    assert sorted(bad["workload"]) == ["gups", "gups", "kv", "kv", "small.vmt", "small.vmt"]
    assert bad[bad["workload"] == "gups"]["param.footprint"].tolist() == [4 << 20] * 2
    long = vmlab.load(store, form="long")
    wide = vmlab.load(store)
    stat_cols = [c for c in wide.columns if c not in long.columns]
    assert len(long) == int(wide[stat_cols].notna().sum().sum())
    one = long[(long["key"] == wide.loc[0, "key"]) & (long["stat"] == "walks.count")]
    assert one["value"].item() == wide.loc[0, "walks.count"]
    with pytest.raises(vmlab.ArgumentError, match="`form`"):
        vmlab.load(store, form="wider")
    with pytest.raises(vmlab.ArgumentError, match="`include_errors`"):
        vmlab.load(store, include_errors="yes")


def test_an_empty_store_loads_as_an_empty_table_with_its_columns(tmp_path):
    from vmlab.store import LOAD_COLUMNS, Store

    Store(tmp_path / "e.sqlite").close()
    df = vmlab.load(tmp_path / "e.sqlite")
    assert df.empty and list(df.columns) == LOAD_COLUMNS
    out = vmlab.export(tmp_path / "e.sqlite", tmp_path / "e.csv")
    assert out.read_text().strip() == ",".join(LOAD_COLUMNS)


# --- Export.

def test_export_csv_and_parquet_hold_the_loaded_table(store, tmp_path):
    df = vmlab.load(store)
    csv = vmlab.export(store, tmp_path / "runs.csv")
    assert csv == tmp_path / "runs.csv"
    back = pd.read_csv(csv)
    assert list(back.columns) == list(df.columns) and len(back) == len(df)
    assert back["walks.latency.p99"].tolist() == df["walks.latency.p99"].tolist()
    assert back["param.footprint"].dropna().tolist() == df["param.footprint"].dropna().tolist()
    parquet = vmlab.export(store, tmp_path / "runs.parquet", include_errors=True)
    pq = pd.read_parquet(parquet)
    full = vmlab.load(store, include_errors=True)
    # Types survive: integers with gaps stay integers, counters stay numbers.
    assert list(pq.columns) == list(full.columns) and str(pq["param.footprint"].dtype) == "Int64"
    pd.testing.assert_frame_equal(pq, full, check_dtype=False)
    long = pd.read_csv(vmlab.export(store, tmp_path / "long.csv.gz", form="long"), compression="gzip")
    assert list(long.columns[-2:]) == ["stat", "value"] and len(long) == len(vmlab.load(store, form="long"))


def test_parquet_holds_a_column_of_mixed_values_as_text(tmp_path):
    # A swept key given as a string and as a number: both are page sizes to the engine.
    spec = tmp_path / "mixed.toml"
    spec.write_text('[sweep]\nname = "m"\n[[config]]\nname = "tiny"\npreset = "tiny"\n'
                    '[axes]\n"os.page_size" = ["4K", 2097152]\n'
                    '[[workload]]\nname = "gups"\nparams = { footprint = "8M", accesses = "1k" }\n')
    assert vmlab.sweep(spec, quiet=True, jobs=1)["failed"] == 0
    df = vmlab.load(tmp_path / "mixed.sqlite")
    assert sorted(df["axis.os.page_size"], key=str) == [2097152, "4K"]
    pq = pd.read_parquet(vmlab.export(tmp_path / "mixed.sqlite", tmp_path / "m.parquet"))
    assert sorted(pq["axis.os.page_size"]) == ["2097152", "4K"]
    assert pq["walks.count"].tolist() == df["walks.count"].tolist()


def test_export_format_comes_from_the_suffix_or_the_argument(store, tmp_path):
    out = vmlab.export(store, tmp_path / "runs.data", format="parquet")
    assert out.read_bytes()[:4] == b"PAR1"
    with pytest.raises(vmlab.ExportError, match=r"runs\.txt.*\.csv or \.parquet"):
        vmlab.export(store, tmp_path / "runs.txt")
    with pytest.raises(vmlab.ArgumentError, match="`format`"):
        vmlab.export(store, tmp_path / "runs.csv", format="xlsx")
    with pytest.raises(vmlab.ExportError, match="runs.parquet.gz"):
        vmlab.export(store, tmp_path / "runs.parquet.gz")
    assert not list(tmp_path.glob("runs.txt*")) and not list(tmp_path.glob(".*vmlab-tmp*"))


def test_export_never_overwrites_the_store_or_leaves_half_a_file(store, tmp_path):
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(store.read_bytes())
    before = copy.read_bytes()
    with pytest.raises(vmlab.ExportError, match="results store itself"):
        vmlab.export(copy, copy, format="csv")
    assert copy.read_bytes() == before
    # An existing output is replaced whole only when the new one is complete.
    out = tmp_path / "runs.csv"
    out.write_text("old\n")
    with pytest.raises(vmlab.StoreError, match="missing.sqlite"):
        vmlab.export(tmp_path / "missing.sqlite", out)
    assert out.read_text() == "old\n"
    with pytest.raises(vmlab.VmlabError, match=re.escape(str(tmp_path / "no" / "dir.csv"))):
        vmlab.export(store, tmp_path / "no" / "dir.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.sqlite", "runs.csv"]


def test_export_to_a_fifo_writes_through_it(store, tmp_path):
    """A FIFO (or a device such as /dev/stdout) cannot be renamed over: it is written
    in place, and stays a FIFO."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    vmlab.export(store, fifo, format="csv")
    reader.join(timeout=30)
    assert got and got[0].splitlines()[0].startswith("key,sweep,design,config,seed")
    assert len(got[0].splitlines()) == 1 + len(vmlab.load(store))
    assert stat.S_ISFIFO(fifo.stat().st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("call, name", [
    (lambda store, out: vmlab.export(5, out), "store"),
    (lambda store, out: vmlab.export(store, None), "out"),
    (lambda store, out: vmlab.export(store, out, format=1), "format"),
    (lambda store, out: vmlab.export(store, out, form="tall"), "form"),
    (lambda store, out: vmlab.export(store, out, include_errors=1), "include_errors"),
    (lambda store, out: vmlab.load(b"s.sqlite"), "store"),
])
def test_wrong_python_types_name_the_argument(store, tmp_path, call, name):
    with pytest.raises(vmlab.ArgumentError) as e:
        call(store, tmp_path / "out.csv")
    assert f"`{name}`" in str(e.value) and isinstance(e.value, TypeError)
    assert not (tmp_path / "out.csv").exists()


def test_the_parquet_extra_is_declared_and_pinned():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(d.startswith("pyarrow") for d in meta["project"]["optional-dependencies"]["parquet"])
    assert re.search(r"^pyarrow==\S+$", (ROOT / "requirements-dev.txt").read_text(), re.M)


# --- The command: one line on any error, never a traceback.

def run_cli(*args, env=None):
    return subprocess.run(vmlab_cmd() + list(args), capture_output=True, text=True, timeout=120, env=env)


def one_error_line(p):
    assert p.returncode not in (0, 101) and p.returncode > 0, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("vmlab: error: "), p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def test_the_export_command(store, tmp_path):
    p = run_cli("export", str(store), "-o", str(tmp_path / "r.csv"))
    assert p.returncode == 0 and p.stdout.strip() == str(tmp_path / "r.csv"), p.stderr
    assert pd.read_csv(tmp_path / "r.csv").shape == vmlab.load(store).shape
    p = run_cli("export", str(store), "-o", str(tmp_path / "r.out"), "--format", "parquet", "--long", "--include-errors")
    assert p.returncode == 0, p.stderr
    long = pd.read_parquet(tmp_path / "r.out")
    assert set(long["status"]) == {"ok"} and len(long) == len(vmlab.load(store, form="long", include_errors=True))
    assert "export" in run_cli("--help").stdout


def test_export_command_errors_are_one_line_naming_the_file(store, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    cases = [
        (["export", str(text), "-o", str(tmp_path / "a.csv")], str(text)),
        (["export", str(tmp_path / "missing.sqlite"), "-o", str(tmp_path / "a.csv")], "missing.sqlite"),
        (["export", str(store), "-o", str(tmp_path / "a.txt")], "a.txt"),
        (["export", str(store), "-o", str(tmp_path / "no" / "a.csv")], str(tmp_path / "no" / "a.csv")),
        (["export", str(store), "-o", str(tmp_path)], str(tmp_path)),
        (["export", str(store), "-o", str(tmp_path / "a.csv"), "--format", "xlsx"], "xlsx"),
        (["export", str(store)], "-o"),
        (["export", str(store), "-o", str(tmp_path / "a.csv"), "--bogus"], "--bogus"),
    ]
    for args, named in cases:
        assert named in one_error_line(run_cli(*args)), args
    assert not list(tmp_path.glob("a.*"))


def test_parquet_without_pyarrow_says_what_to_install(store, tmp_path):
    # A module that fails to import stands in for the missing package.
    shadow = tmp_path / "shadow"
    (shadow / "pyarrow").mkdir(parents=True)
    (shadow / "pyarrow" / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    msg = one_error_line(run_cli("export", str(store), "-o", str(tmp_path / "r.parquet"), env=env))
    assert "r.parquet" in msg and "pip install 'vmlab[parquet]'" in msg
    assert not (tmp_path / "r.parquet").exists()
    # CSV needs nothing more.
    assert run_cli("export", str(store), "-o", str(tmp_path / "r.csv"), env=env).returncode == 0


# --- DuckDB over an export: the queries docs/sweeps.md shows, run as written.

def _duckdb_section() -> tuple[list[str], list[str]]:
    """The shell commands and Python blocks of docs/sweeps.md's DuckDB section, in order."""
    doc = (ROOT / "docs" / "sweeps.md").read_text()
    start = doc.index("## Querying with DuckDB")
    section = doc[start:doc.index("\n## ", start + 1)]
    blocks = re.findall(r"^```(sh|python)\n(.*?)^```", section, re.S | re.M)
    return [b for k, b in blocks if k == "sh"], [b for k, b in blocks if k == "python"]


def test_the_documented_duckdb_queries_answer_what_pandas_does(tmp_path, monkeypatch, capsys):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is pinned in requirements-dev.txt")
    # The example sweep, smaller, where the documentation has it: sweeps/example.sqlite.
    (tmp_path / "sweeps").mkdir()
    spec = (ROOT / "sweeps" / "example.toml").read_text()
    spec = spec.replace('accesses = "500k"', 'accesses = "5k"').replace('accesses = "2M"', 'accesses = "20k"')
    (tmp_path / "sweeps" / "example.toml").write_text(spec)
    monkeypatch.chdir(tmp_path)
    assert vmlab.sweep("sweeps/example.toml", quiet=True, jobs=2)["failed"] == 0
    store = vmlab.load("sweeps/example.sqlite")

    commands, code = _duckdb_section()
    assert commands and code
    for block in commands:
        for line in block.splitlines():
            cmd = line.split("#")[0].split()
            assert cmd[0] == "vmlab", line
            p = subprocess.run(vmlab_cmd() + cmd[1:], capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stderr
    ns: dict = {}
    for block in code:
        exec(compile(block, "docs/sweeps.md", "exec"), ns)
    shown = capsys.readouterr().out

    # The Parquet query: one row per design, workload and L1 size, the means over seeds.
    got = ns["q"].df()
    keys = ["design", "workload", "axis.tlb.l1d_4k.entries"]
    want = store.groupby(keys, as_index=False)[["tlb_levels_by_side.data.0.miss_rate", "walks.latency.p99"]].mean()
    assert len(got) == len(want) == 12 and list(got.columns[:3]) == ["design", "workload", "entries"]
    got = got.sort_values(["design", "workload", "entries"]).reset_index(drop=True)
    want = want.sort_values(keys).reset_index(drop=True)
    assert list(got["design"]) == list(want["design"]) and list(got["entries"]) == list(want[keys[2]])
    assert got["l1_miss_rate"].tolist() == pytest.approx(want["tlb_levels_by_side.data.0.miss_rate"].tolist())
    assert got["walk_p99"].tolist() == pytest.approx(want["walks.latency.p99"].tolist())
    assert "l1_miss_rate" in shown  # .show() printed the table
    # The DataFrame query: DuckDB reads vmlab.load's table in place.
    peak = ns["peak"].set_index("design")["pt_bytes"]
    assert peak.to_dict() == store.groupby("design")["page_table.bytes_at_peak"].max().to_dict()
