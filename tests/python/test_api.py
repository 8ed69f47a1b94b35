import json
import math

import pytest

import vmlab


def test_run_returns_a_versioned_document():
    r = vmlab.run("tiny", workload="gups", accesses="20k", footprint="16M")
    d = r.to_dict()
    assert d["schema"] == "vmlab.stats/1"
    assert d["totals"]["accesses"] == 20000
    # The counting rule: every walk comes from a last-level TLB miss.
    assert d["walks"]["count"] == d["tlb_levels"][-1]["misses"]
    assert d["source"]["params"]["footprint"] == "16M"
    s = r.summary()
    assert 0 < s["l1_dtlb_miss_rate"] <= 1
    assert "gups" in repr(r)


def test_a_stat_has_one_name_its_dotted_path():
    r = vmlab.run("skylake", workload="stream", accesses="50k")
    d = r.to_dict()
    s = r.to_pandas()
    assert s.index.name == "stat" and s.name == "skylake"
    # Every TLB structure's counters, the per-level records and nested sections, each
    # under its path, with the document's value.
    for name, counters in d["tlb"].items():
        assert s[f"tlb.{name}.lookups"] == counters["lookups"] == r.get(f"tlb.{name}.lookups")
    assert s["tlb_levels.0.misses"] == d["tlb_levels"][0]["misses"] == r.get("tlb_levels.0.misses")
    assert s["walks.latency.p99"] == d["walks"]["latency"]["p99"] == r.get("walks.latency.p99")
    assert s["page_sizes.4K"] == d["page_sizes"]["4K"]
    assert dict(s) == pytest.approx(r.stats())
    # Not statistics: the config, the input's description, lists of plain numbers, flags.
    assert not [k for k in s.index if k.startswith(("config.", "source.")) or ".histogram" in k]
    assert "warmup.completed" not in s.index and isinstance(r.get("warmup.completed"), bool)
    # get reaches what is not a scalar statistic too, and says NaN (or the default) for a missing path.
    assert r.get("walks.latency.histogram") == d["walks"]["latency"]["histogram"]
    assert math.isnan(r.get("walks.latency.p42")) and r.get("tlb_levels.9.misses", None) is None
    assert set(r.tlb_table().index) == set(d["tlb"])
    assert "walk_accesses" in r.cache_table().columns


def test_a_slash_path_is_refused_with_the_dotted_spelling():
    r = vmlab.Result({"walks": {"latency": {"p99": 7}}})
    with pytest.raises(vmlab.ArgumentError, match=r"'walks\.latency\.p99', not 'walks/latency/p99'"):
        r.get("walks/latency/p99")
    with pytest.raises(vmlab.ArgumentError, match="`path`"):
        r.get(["walks"])
    with pytest.raises(vmlab.ArgumentError, match="`doc`"):
        vmlab.Result("{}")


def test_overrides_as_dict_or_list_are_equivalent():
    a = vmlab.run("tiny", workload="pchase", accesses="5k", footprint="4M", overrides={"tlb.l1d.entries": 4, "tlb.l1d.ways": 4})
    b = vmlab.run("tiny", workload="pchase", accesses="5k", footprint="4M", overrides=["tlb.l1d.entries=4", "tlb.l1d.ways=4"])
    assert a.to_dict() == b.to_dict()
    assert a["config"]["tlb"]["l1d"]["entries"] == 4


def test_runs_are_deterministic_to_the_byte():
    a = vmlab.run("skylake", workload="kv", keys="50k", accesses="30k")
    b = vmlab.run("skylake", workload="kv", keys="50k", accesses="30k")
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def test_the_memory_thread_changes_nothing_but_wall_time(monkeypatch):
    # Read at each run: the cache hierarchy inline, then on its own thread.
    docs = []
    for mode in ("off", "on"):
        monkeypatch.setenv("VMLAB_MEMORY_THREAD", mode)
        docs.append(vmlab.run("skylake", overrides={"memory.data_refs": True}, workload="gups", accesses="60k", footprint="64M").to_dict())
    assert docs[0]["walks"]["count"] > 0 and docs[0]["cycles"]["walk"] > 0
    assert docs[0] == docs[1]


def test_bad_input_raises_vmlab_error_with_the_key():
    with pytest.raises(vmlab.VmlabError, match=r"tlb\.l1d\.entriez"):
        vmlab.run("tiny", workload="gups", accesses="1k", overrides={"tlb.l1d.entriez": 3})
    with pytest.raises(vmlab.VmlabError, match="no-such.vmt"):
        vmlab.run("tiny", trace="no-such.vmt")
    with pytest.raises(vmlab.VmlabError, match="unknown workload"):
        vmlab.run("tiny", workload="nope")
    with pytest.raises(vmlab.VmlabError, match="tlb.l1d.entries"):
        vmlab.run("tiny", workload="gups", overrides={"tlb.l1d.entries": 0})


def test_page_table_bytes_for_a_dense_gigabyte():
    r = vmlab.run("skylake", workload="stream", footprint="1G", stride=4096, accesses=262144)
    assert r["page_table"]["nodes"] == 515
    assert r["page_table"]["bytes"] == 515 * 4096


def test_summary_is_tolerant_of_missing_sections():
    s = vmlab.Result({"schema": "vmlab.stats/1"}).summary()
    assert math.isnan(s["walks"])


def test_catalogues():
    assert "skylake" in vmlab.presets() and "tiny" in vmlab.presets()
    names = {w["name"] for w in vmlab.workloads()}
    assert {"gups", "stream", "stride", "pchase", "sparse", "shared"} <= names


def test_int_params_are_stringified():
    a = vmlab.run("tiny", workload="gups", accesses=3000, footprint="8M")
    b = vmlab.run("tiny", workload="gups", accesses="3k", footprint="8M")
    assert a["source"]["params"]["accesses"] == "3000"  # the text as given is kept
    strip = lambda d: {k: v for k, v in d.items() if k != "source"}
    assert strip(a.to_dict()) == strip(b.to_dict())
    assert a["totals"]["accesses"] == 3000


def test_source_must_be_exactly_one_of_trace_or_workload(tmp_path):
    with pytest.raises(vmlab.VmlabError, match="exactly one"):
        vmlab.run("tiny")
    with pytest.raises(vmlab.VmlabError, match="exactly one"):
        vmlab.run("tiny", trace=tmp_path / "t.vmt", workload="gups")
    with pytest.raises(vmlab.VmlabError, match="workload parameters"):
        vmlab.run("tiny", trace=tmp_path / "t.vmt", accesses="1k")


def test_vmlab_error_is_an_exception_named_for_the_package():
    assert issubclass(vmlab.VmlabError, Exception)
    assert vmlab.VmlabError.__module__ == "vmlab"


def test_summary_rebuilds_the_l1_data_tlb_from_structures():
    # A document without tlb_levels_by_side: per-size L1 structures probed together.
    doc = {
        "tlb": {
            "l1d_4k": {"level": 1, "serves": "data", "lookups": 100, "hits": 60, "misses": 40},
            "l1d_2m": {"level": 1, "serves": "data", "lookups": 100, "hits": 10, "misses": 90},
            "l1i": {"level": 1, "serves": "instr", "lookups": 50, "hits": 50, "misses": 0},
            "stlb": {"level": 2, "serves": "unified", "lookups": 30, "hits": 5, "misses": 25},
        },
        "tlb_levels": [{"level": 1}, {"level": 2, "lookups": 30, "hits": 5, "misses": 25}],
    }
    s = vmlab.Result(doc).summary()
    assert s["l1_dtlb_lookups"] == 100 and s["l1_dtlb_misses"] == 30
    assert s["l1_dtlb_miss_rate"] == pytest.approx(0.3)
    assert s["last_level_tlb_misses"] == 25
    assert math.isnan(s["walk_latency_mean"])
    repr(vmlab.Result(doc))  # NaNs print, no crash


def test_summary_matches_the_document():
    r = vmlab.run("skylake", workload="gups", accesses="20k", footprint="64M")
    d, s = r.to_dict(), r.summary()
    by_side = d["tlb_levels_by_side"]["data"][0]
    assert s["l1_dtlb_misses"] == by_side["misses"]
    assert s["walks"] == d["walks"]["count"] == s["last_level_tlb_misses"]
    assert s["page_table_bytes"] == d["page_table"]["bytes"]
    # The structures agree with the engine's own per-level count.
    del d["tlb_levels_by_side"]
    assert vmlab.Result(d).summary()["l1_dtlb_misses"] == by_side["misses"]


def test_pt_compare_table():
    df = vmlab.pt_compare(workload="sparse", pages=256, accesses="10k", designs=["radix", "guarded2", "hashed"])
    assert list(df.index) == ["radix", "guarded2", "hashed"]
    # Liedtke's small GPT: at most 2(k-1) 16-byte node entries plus a root entry per
    # mapped page, i.e. about 32 B/page, far below the radix table on a sparse space.
    assert df.loc["guarded2", "bytes_per_mapped_page"] < df.loc["radix", "bytes_per_mapped_page"] / 10
    assert df.loc["guarded2", "refs_per_walk"] > df.loc["hashed", "refs_per_walk"]
    with pytest.raises(vmlab.VmlabError, match="nosuch"):
        vmlab.pt_compare(workload="gups", designs=["nosuch"])


def test_compare_reports_speedups_over_the_baseline():
    # 1G pages against 4K pages on GUPS over 1 GiB: the TLB stops missing, so the big
    # pages run faster, and the time the 4K run lost is translation.
    df = vmlab.compare(["4k:os.page_size=4K", "1g:os.page_size=1G"], baseline="4k", workload="gups",
                       footprint="1G", accesses="50k")
    assert list(df.index) == ["4k", "1g"]
    assert df.loc["4k", "speedup"] == 1.0
    assert df.loc["1g", "speedup"] > 1.5
    assert df.loc["1g", "cycles"] * df.loc["1g", "speedup"] == pytest.approx(df.loc["4k", "cycles"])
    assert df.loc["4k", "cpi_translation"] > df.loc["1g", "cpi_translation"]
    assert (df["cpi_error"] == 0).all()
    # Sampled timing: the speed-up stands, and each row says how sure its CPI is.
    sampled = vmlab.compare(["4k:os.page_size=4K", "1g:os.page_size=1G"], baseline="4k", workload="gups",
                            footprint="1G", accesses="50k",
                            overrides=["time.sampling.period=2500", "time.sampling.unit=500", "time.sampling.warmup=500"])
    assert (sampled["cpi_error"] > 0).all() and (sampled["cpi_error"] < 0.2).all()
    assert sampled.loc["1g", "speedup"] == pytest.approx(df.loc["1g", "speedup"], rel=0.1)
    one = vmlab.run("skylake", workload="gups", footprint="1G", accesses="50k",
                    overrides=["memory.data_refs=true", "time.model=ooo", "os.page_size=1G"])
    assert one["time"]["cycles"] == df.loc["1g", "cycles"]
    assert one.summary()["ipc"] == df.loc["1g", "ipc"]
    assert math.isnan(vmlab.run("tiny", workload="gups", accesses="1k").summary()["ipc"])
    with pytest.raises(vmlab.VmlabError, match="baseline"):
        vmlab.compare(["radix", "ecpt"], baseline="nosuch", workload="gups", accesses="1k")


def test_run_many_equals_separate_runs_and_fails_per_config():
    configs = ["tiny", ("tiny", {"tlb.l1d.entries": 4}), ("skylake", ["page_table.kind=hashed"]),
               ("tiny", {"tlb.l1d.entriez": 4})]
    got = vmlab.run_many(configs, workload="gups", footprint="8M", accesses="20k", threads=2)
    assert isinstance(got, vmlab.Results) and isinstance(got, list) and len(got) == 4
    assert got[0].to_dict() == vmlab.run("tiny", workload="gups", footprint="8M", accesses="20k").to_dict()
    assert got[1].to_dict() == vmlab.run("tiny", workload="gups", footprint="8M", accesses="20k",
                                         overrides={"tlb.l1d.entries": 4}).to_dict()
    assert got[2]["page_table"]["kind"] == "hashed"
    assert isinstance(got[3], vmlab.VmlabError) and "tlb.l1d.entriez" in str(got[3])
    # Each run is named by its config and overrides, as run() names it.
    assert got.labels == ["tiny", "tiny:tlb.l1d.entries=4", "skylake:page_table.kind=hashed", "tiny:tlb.l1d.entriez=4"]
    assert got[1].label == vmlab.run("tiny", workload="gups", accesses="1k", overrides={"tlb.l1d.entries": 4}).label
    assert got.ok == [got[0], got[1], got[2]]
    assert got.errors == [("tiny:tlb.l1d.entriez=4", got[3])]
    with pytest.raises(vmlab.VmlabError, match="no_such.vmt"):
        vmlab.run_many(["tiny"], trace="no_such.vmt")


def test_results_make_one_tidy_table():
    designs = {"small": ("tiny", {"tlb.l1d.entries": 4}), "large": ("tiny", {"tlb.l1d.entries": 16}),
               "broken": ("tiny", {"tlb.l1d.entriez": 4})}
    rs = vmlab.run_many(designs, workload="gups", footprint="8M", accesses="20k")
    assert rs.labels == ["small", "large", "broken"] and [label for label, _ in rs.errors] == ["broken"]
    df = rs.to_pandas()
    assert list(df.columns[:5]) == ["design", "config", "seed", "workload", "trace"]
    assert list(df["design"]) == ["small", "large"] and list(df["config"]) == ["tiny", "tiny"]
    assert list(df["workload"]) == ["gups", "gups"] and df["trace"].isna().all()
    # Workload parameters typed as the engine reads them (sizes in bytes, counts as
    # integers), defaults included; the seed is the config's.
    assert df["param.footprint"].tolist() == [8 << 20] * 2 and str(df["param.footprint"].dtype) == "Int64"
    assert df["param.accesses"].tolist() == [20000] * 2 and df["param.base"].tolist() == [0x7F0000000000] * 2
    assert df["seed"].tolist() == [rs[0]["config"]["mmu"]["seed"]] * 2
    # Each stat column holds the stat of that run, under its one name.
    for i, r in enumerate(rs.ok):
        assert df.loc[i, "walks.latency.p99"] == r.get("walks.latency.p99")
        assert df.loc[i, "tlb.l1d.misses"] == r["tlb"]["l1d"]["misses"]
    assert df.loc[0, "tlb.l1d.misses"] > df.loc[1, "tlb.l1d.misses"]  # 4 entries miss more than 16
    # Failed runs on request: a row each with the error, what it ran on, and no stats.
    full = rs.to_pandas(include_errors=True)
    assert list(full["status"]) == ["ok", "ok", "error"] and "tlb.l1d.entriez" in full.loc[2, "error"]
    assert full.loc[2, "design"] == "broken" and full.loc[2, "workload"] == "gups" and full.loc[2, "param.accesses"] == 20000
    assert math.isnan(full.loc[2, "walks.count"]) and full.loc[0, "walks.count"] == df.loc[0, "walks.count"]
    # The long form holds the same values, one row per run and stat.
    long = rs.to_pandas(form="long")
    assert list(long.columns[-2:]) == ["stat", "value"]
    stat_cols = [c for c in df.columns if c not in long.columns]
    assert len(long) == 2 * len(stat_cols)
    wide_again = long.pivot(index="design", columns="stat", values="value")
    for design in ("small", "large"):
        row = df[df["design"] == design].iloc[0]
        assert all(wide_again.loc[design, c] == pytest.approx(row[c]) for c in stat_cols)


def test_to_frame_joins_runs_of_several_inputs(tmp_path):
    trace = tmp_path / "g.vmt"
    a = vmlab.run("tiny", workload="gups", footprint="8M", accesses="2k")
    b = vmlab.run("tiny", workload="stream", footprint="4M", accesses="3k", label="streaming")
    subprocess_generate(trace, "gups", "accesses=2k", "footprint=8M")
    c = vmlab.run_many(["tiny"], trace=trace)
    df = vmlab.to_frame([a, b] + c)
    joined = vmlab.Results([a]) + vmlab.Results([b]) + c
    assert isinstance(joined, vmlab.Results) and isinstance(joined[1:], vmlab.Results) and joined[1] is b
    assert joined.to_pandas().equals(df)
    assert list(df["design"]) == ["tiny", "streaming", "tiny"]
    # A trace run's workload is its trace file's name, so grouping by workload keeps it.
    assert list(df["workload"]) == ["gups", "stream", "g.vmt"] and df.loc[2, "trace"] == str(trace)
    assert df.groupby("workload").size().to_dict() == {"g.vmt": 1, "gups": 1, "stream": 1}
    assert df["param.footprint"].tolist()[:2] == [8 << 20, 4 << 20] and df["param.footprint"].isna().tolist()[2]
    assert df["param.stride"].isna().tolist() == [True, False, True]  # stream's own parameter
    assert df.loc[2, "totals.accesses"] == 2000
    # A Result built from a bare document is named by its config hash.
    bare = vmlab.Result(a.to_dict())
    assert vmlab.Results([bare]).labels == [a["config_hash"]]
    with pytest.raises(vmlab.ArgumentError, match="`runs`"):
        vmlab.to_frame([a, "b"])
    with pytest.raises(vmlab.ArgumentError, match="`runs`"):
        vmlab.to_frame(a)
    with pytest.raises(vmlab.ArgumentError, match="`form`"):
        vmlab.to_frame([a], form="tall")
    with pytest.raises(vmlab.ArgumentError, match="`label`"):
        vmlab.run("tiny", workload="gups", accesses="1k", label=3)


def subprocess_generate(out, workload, *params):
    import subprocess

    from conftest import vmlab_cmd

    subprocess.run(vmlab_cmd() + ["generate", workload, *params, "-o", str(out)], check=True, capture_output=True)


def test_html_views_show_the_headline_stats_escaped():
    rs = vmlab.run_many({"<b>4K</b>": "tiny", "bad": ("tiny", {"tlb.l1d.entriez": 1})}, workload="gups",
                        footprint="8M", accesses="2k")
    one = rs[0]._repr_html_()
    assert "&lt;b&gt;4K&lt;/b&gt;" in one and "<b>4K</b>" not in one
    assert "walks.latency.p99" in one and f"{rs[0].get('walks.count'):,}" in one
    assert "time.ipc" not in one  # no time model in this run: no row for it
    many = rs._repr_html_()
    assert "1 run, 1 failed" in many and "tlb.l1d.entriez" in many and "&lt;b&gt;4K&lt;/b&gt;" in many
    assert f"{rs[0].get('page_table.bytes'):,}" in many


def test_mrc_table_matches_a_direct_run():
    df = vmlab.mrc(workload="kv", keys="100k", accesses="20k", sets=[8], max_ways=4, max_entries=256)
    fa = df[df["geometry"] == "fully-associative"]
    assert list(fa["entries"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert fa["misses"].is_monotonic_decreasing and df.attrs["references"] > 0
    assert list(df[df["geometry"] == "8 sets"]["ways"]) == [1, 2, 3, 4]
    # The 8-set, 2-way point is what tiny's L1 DTLB (8 entries x 2 ways = 4 sets) is not;
    # check the 16-entry 2-way (8 sets) one against the engine with only 4K pages mapped.
    row = df[(df["sets"] == 8) & (df["ways"] == 2)].iloc[0]
    r = vmlab.run("tiny", workload="kv", keys="100k", accesses="20k",
                  overrides={"tlb.l1d.entries": 16, "tlb.l1d.ways": 2, "tlb.l1d.page_sizes": ["4K"]})
    assert r["tlb"]["l1d"]["misses"] == row["misses"]
    with pytest.raises(vmlab.VmlabError, match="--sets"):
        vmlab.mrc(workload="kv", accesses="10", sets=[3])
