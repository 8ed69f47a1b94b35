"""The engine against an independent reference model on real programs' traces (one taken
with `vmlab trace`, one with DynamoRIO's drmemtrace).

A single-level LRU TLB with 4 KiB pages (fully and set associative, set index = VPN mod
sets) must give exactly the reference's lookup and miss counts. The reference below
knows nothing of the engine: it reads the trace's records and applies the documented
rules (docs/metrics.md, docs/config.md): each 4 KiB page an access touches is one
lookup; entries are tagged with the process; munmap, mprotect, mmap-over, brk shrink
and exit remove the pages they affect.
"""

import subprocess
from collections import OrderedDict

import pytest

import vmlab
from conftest import ROOT, vmlab_cmd


def reference(trace, entries, ways):
    sets = entries // ways
    lru = [OrderedDict() for _ in range(sets)]  # key (pid, vpn), most recent last
    heap = {}
    lookups = misses = 0

    def drop(pid, start, end):
        for vpn in range(start >> 12, (end + 4095) >> 12):
            lru[vpn % sets].pop((pid, vpn), None)

    for r in vmlab.read_trace(trace):
        kind = r[0]
        if kind in ("read", "write", "fetch"):
            _, va, size, pid = r
            for vpn in range(va >> 12, ((va + max(size, 1) - 1) >> 12) + 1):
                s = lru[vpn % sets]
                lookups += 1
                key = (pid, vpn)
                if key in s:
                    s.move_to_end(key)
                else:
                    misses += 1
                    if len(s) == ways:
                        s.popitem(last=False)
                    s[key] = True
        elif kind in ("munmap", "mprotect", "mmap"):
            pid, start, length = r[1], r[2], r[3]
            drop(pid, start & ~4095, start + length)
        elif kind == "brk":
            pid, end = r[1], (r[2] + 4095) & ~4095
            if pid not in heap:
                heap[pid] = (end, end)
            else:
                hs, he = heap[pid]
                new_end = max(end, hs)
                if new_end < he:
                    drop(pid, new_end, he)
                heap[pid] = (hs, new_end)
        elif kind == "exit":
            pid = r[1]
            for s in lru:
                for key in [k for k in s if k[0] == pid]:
                    del s[key]
            heap.pop(pid, None)
        elif kind == "fork":
            parent, child = r[1], r[2]
            if parent in heap:
                heap[child] = heap[parent]
    return lookups, misses


@pytest.fixture(scope="session")
def dynamorio_trace(tmp_path_factory):
    """Nine threads of a real program traced by another tool (DynamoRIO's drmemtrace;
    its test data, crates/vmlab-core/tests/data/drmemtrace), converted."""
    out = tmp_path_factory.mktemp("traces") / "threadsig.vmt"
    tracedir = ROOT / "crates/vmlab-core/tests/data/drmemtrace/drmemtrace.threadsig.x64.tracedir"
    subprocess.run(vmlab_cmd() + ["convert", "--from", "drmemtrace", str(tracedir), "-o", str(out)], check=True,
                   stderr=subprocess.DEVNULL)
    return out


@pytest.mark.parametrize("entries,ways", [(64, 64), (64, 4), (48, 3), (16, 1)])
@pytest.mark.parametrize("which", ["real_trace", "dynamorio_trace"])
def test_single_level_lru_tlb_matches_reference(request, which, entries, ways):
    trace = request.getfixturevalue(which)
    overrides = [
        f'tlb={{u={{level=1,serves="unified",entries={entries},ways={ways},page_sizes=["4K"]}}}}',
        "machine.phys_mem=4G",
    ]
    r = vmlab.run("tiny", trace=trace, overrides=overrides)
    lookups, misses = reference(trace, entries, ways)
    assert r["tlb"]["u"]["lookups"] == lookups
    assert r["tlb"]["u"]["misses"] == misses
    assert r["walks"]["count"] == misses
