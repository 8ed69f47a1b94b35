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


def test_to_pandas_has_every_structure():
    r = vmlab.run("skylake", workload="stream", accesses="50k")
    df = r.to_pandas()
    assert list(df.columns) == ["section", "name", "metric", "value"]
    tlb_names = set(df[df.section == "tlb"].name)
    assert tlb_names == set(r.to_dict()["tlb"])
    lookups = df[(df.section == "tlb") & (df.name == "l1d_4k") & (df.metric == "lookups")].value.item()
    assert lookups == r["tlb"]["l1d_4k"]["lookups"]
    assert set(r.tlb_table().index) == tlb_names
    assert "walk_accesses" in r.cache_table().columns


def test_overrides_as_dict_or_list_are_equivalent():
    a = vmlab.run("tiny", workload="pchase", accesses="5k", footprint="4M", overrides={"tlb.l1d.entries": 4, "tlb.l1d.ways": 4})
    b = vmlab.run("tiny", workload="pchase", accesses="5k", footprint="4M", overrides=["tlb.l1d.entries=4", "tlb.l1d.ways=4"])
    assert a.to_dict() == b.to_dict()
    assert a["config"]["tlb"]["l1d"]["entries"] == 4


def test_runs_are_deterministic_to_the_byte():
    a = vmlab.run("skylake", workload="kv", keys="50k", accesses="30k")
    b = vmlab.run("skylake", workload="kv", keys="50k", accesses="30k")
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


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
