"""Guvenilir & Patt, Tailored Page Sizes (docs/reproductions/tps.md).

Reservation THP (100%; the `skylake` preset with `thp-reserve`) against TPS at a 100%
and a 50% promotion threshold, and at 50% with aggressive rounding (`tps` preset) on GUPS, a BFS graph, an XSBench-like
lookup kernel and traced real programs: L1 DTLB misses and page-walk references, the
share of each TPS removes, bloat and the largest page mapped; once on unfragmented
memory and once with half of memory taken and 90% of the free memory in blocks < 2M.
"""

from __future__ import annotations

from ._common import Batch, md_table

DOC = "docs/reproductions/tps.md"
NOT_BUILT: list[str] = []

CONFIGS = {
    "THP reserve 100%": ("skylake", {"os.policy.kind": "thp-reserve"}),
    "TPS 100%": ("tps", {}),
    "TPS 50%": ("tps", {"os.policy.threshold": "0.5"}),
    "TPS 50% aggressive": ("tps", {"os.policy.threshold": "0.5", "os.policy.tps.rounding": "aggressive"}),
}
FRAGMENTED = {"machine.fragmentation.free": "0.5", "machine.fragmentation.level": "0.9", "machine.fragmentation.order": "9"}


def _bytes(size: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size.rstrip("B"))


def tables(quick: bool, traces: list[tuple[str, str]]) -> str:
    n = "2M" if quick else "16M"
    sources = {
        "gups 256M": {"workload": "gups", "footprint": "256M", "accesses": n},
        "graph 1M": {"workload": "graph", "vertices": "1M", "accesses": n},
        "xsbench": {"workload": "xsbench", "accesses": n},
    }
    sources.update({label: {"trace": path} for label, path in traces})
    b = Batch()
    for frag in (False, True):
        for w, src in sources.items():
            for c, (preset, o) in CONFIGS.items():
                b.add((frag, w, c), preset, {**o, **(FRAGMENTED if frag else {})}, src)
    b.run()
    parts = [f"Synthetic runs: {n} accesses each (first touches included).\n"]
    for frag in (False, True):
        rows = []
        for w in sources:
            base = b[(frag, w, "THP reserve 100%")]
            for c in CONFIGS:
                d = b[(frag, w, c)]
                l1 = d["tlb_levels_by_side"]["data"][0]["misses"]
                refs = d["walks"]["refs"]
                l1_0 = base["tlb_levels_by_side"]["data"][0]["misses"]
                refs_0 = base["walks"]["refs"]
                removed = (lambda x, x0: "–" if c.startswith("THP") else f"{100 * (1 - x / x0):.1f}%" if x0 else "n/a")
                largest = max(d["page_sizes"], key=_bytes) if d["page_sizes"] else "–"
                rows.append([w, c, f"{l1:,}", f"{refs:,}", removed(l1, l1_0), removed(refs, refs_0),
                             f"{100 * d['policy']['bloat_fraction']:.1f}", largest])
        title = ("Fragmented (half of memory taken, 90% of the free memory in blocks < 2M)" if frag else "Unfragmented")
        parts.append(md_table(["workload", "config", "L1 DTLB misses", "walk refs", "L1 misses removed vs THP",
                               "walk refs removed vs THP", "bloat %", "largest page"], rows, title))
    return "\n".join(parts)
