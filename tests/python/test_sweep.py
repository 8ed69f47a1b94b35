"""`vmlab sweep`, the results store and `vmlab.load`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vmlab
from vmlab.sweep import SpecError, load_spec

VMLAB = [sys.executable, "-m", "vmlab.cli"]

SPEC = """
[sweep]
name = "tlb-sizes"
seeds = [1, 2]

[[config]]
name = "tiny"
preset = "tiny"

[[config]]
name = "tiny-2m"
preset = "tiny"
set = {{ "os.page_size" = "2M" }}

[axes]
"tlb.l1d.entries" = {entries}

[[workload]]
name = "gups"
params = {{ footprint = "4M", accesses = "{accesses}" }}
"""


def write_spec(tmp_path: Path, entries="[4, 8]", accesses="2k", extra="") -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SPEC.format(entries=entries, accesses=accesses) + extra)
    return p


def test_spec_expands_to_the_product_with_distinct_stable_keys(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    # 2 designs x 2 axis values x 1 workload x 2 seeds.
    assert len(spec.runs) == 8
    assert len({r["key"] for r in spec.runs}) == 8
    assert [r["key"] for r in load_spec(write_spec(tmp_path)).runs] == [r["key"] for r in spec.runs]
    assert {r["axes"]["tlb.l1d.entries"] for r in spec.runs} == {4, 8}
    assert all(r["source"]["params"]["seed"] == str(r["seed"]) for r in spec.runs)


def test_zip_pairs_axes(tmp_path):
    p = tmp_path / "z.toml"
    p.write_text('[sweep]\ncombine = "zip"\n[axes]\n"tlb.l1d.entries" = [4, 8]\n"tlb.l1d.ways" = [2, 4]\n'
                 '[[workload]]\nname = "stream"\nparams = { accesses = "1k" }\n[[config]]\nname = "t"\npreset = "tiny"\n')
    runs = load_spec(p).runs
    assert sorted((r["axes"]["tlb.l1d.entries"], r["axes"]["tlb.l1d.ways"]) for r in runs) == [(4, 2), (8, 4)]


@pytest.mark.parametrize("text, key", [
    ("[sweep]\nseedz = [1]\n", "sweep.seedz"),
    ("[[workload]]\nname = \"gups\"\n[axes]\n\"tlb.l1d.entries\" = []\n", "axes.tlb.l1d.entries"),
    ("[[workload]]\nname = \"gups\"\n[[config]]\nname = \"x\"\n", "config[0]"),
    ("[sweep]\nname = \"x\"\n", "workload"),
    ("[[workload]]\nname = \"gups\"\n[[config]]\nname = \"x\"\npreset = \"tiny\"\nset = { \"tlb.l1d.entriez\" = 4 }\n", "tlb.l1d.entriez"),
])
def test_malformed_specs_name_the_key(tmp_path, text, key):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(p)
    assert key in str(e.value) and "bad.toml" in str(e.value)


def test_sweep_records_every_run_and_resumes(tmp_path):
    spec = write_spec(tmp_path)
    c = vmlab.sweep(spec, quiet=True, jobs=2)
    assert (c["total"], c["ran"], c["failed"], c["skipped"]) == (8, 8, 0, 0)
    again = vmlab.sweep(spec, quiet=True)
    assert (again["ran"], again["skipped"]) == (0, 8)
    df = vmlab.load(tmp_path / "s.sqlite")
    assert len(df) == 8 and df["key"].is_unique
    # One column per stat; smaller L1 TLBs miss at least as often, per design and seed.
    for (design, seed), g in df.groupby(["design", "seed"]):
        by_size = g.set_index("axis.tlb.l1d.entries")["tlb.l1d.misses"]
        assert by_size[4] >= by_size[8] > 0
    # Stats are what a direct run gives.
    r = df.iloc[0]
    direct = vmlab.run("tiny", workload="gups", footprint="4M", accesses="2k", seed=str(r["seed"]),
                       overrides=json.loads(sqlite3.connect(tmp_path / "s.sqlite").execute(
                           "SELECT overrides FROM runs WHERE key = ?", (r["key"],)).fetchone()[0]))
    assert direct["tlb"]["l1d"]["misses"] == r["tlb.l1d.misses"]


def test_a_failing_run_is_recorded_with_its_key_and_the_others_go_on(tmp_path):
    spec = write_spec(tmp_path, extra=f'\n[[trace]]\npath = "{tmp_path / "missing.vmt"}"\n')
    c = vmlab.sweep(spec, quiet=True)
    assert (c["total"], c["failed"]) == (16, 8)
    df = vmlab.load(tmp_path / "s.sqlite", include_errors=True)
    bad = df[df["status"] == "error"]
    assert len(bad) == 8 and bad["error"].str.contains("missing.vmt").all()
    assert (df["status"] == "ok").sum() == 8


def test_a_killed_sweep_loses_nothing_and_duplicates_nothing(tmp_path):
    # 64 runs (2 designs x 16 sizes x 2 seeds), each long enough to kill mid-sweep.
    spec = write_spec(tmp_path, entries=str([2 * i for i in range(1, 17)]), accesses="1M")
    total = len(load_spec(spec).runs)
    assert total >= 50
    store = tmp_path / "s.sqlite"
    p = subprocess.Popen([*VMLAB, "sweep", str(spec), "--quiet", "-j", "2"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    done = 0
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
        if store.exists():
            try:
                done = sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if done >= 5:
                break
    assert p.poll() is None, "the sweep finished before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    partial = sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert 5 <= partial < total
    c = vmlab.sweep(spec, quiet=True)
    assert c["skipped"] == partial and c["ran"] == total - partial and c["failed"] == 0
    keys = [k for (k,) in sqlite3.connect(store).execute("SELECT key FROM runs")]
    assert len(keys) == total == len(set(keys))
    assert sorted(keys) == sorted(r["key"] for r in load_spec(spec).runs)


def test_cli_sweep_prints_counts(tmp_path):
    spec = write_spec(tmp_path)
    p = subprocess.run([*VMLAB, "sweep", str(spec), "--quiet"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "8 runs: 0 already in" in p.stdout and "8 ran, 0 failed" in p.stdout


def test_one_pass_sweep_gives_the_run_by_run_stats_per_key(tmp_path):
    spec = write_spec(tmp_path)
    # The same spec run by run, into its own store.
    text = spec.read_text().replace('[sweep]\n', '[sweep]\none_pass = false\n', 1)
    separate = tmp_path / "separate.toml"
    separate.write_text(text)
    vmlab.sweep(spec, quiet=True, jobs=2)
    vmlab.sweep(separate, quiet=True, jobs=2)
    a = {k: json.loads(s) for k, s in sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT key, stats FROM runs")}
    b = {k: json.loads(s) for k, s in sqlite3.connect(tmp_path / "separate.sqlite").execute("SELECT key, stats FROM runs")}
    assert a.keys() == b.keys() and len(a) == 8
    assert all(a[k] == b[k] for k in a)
