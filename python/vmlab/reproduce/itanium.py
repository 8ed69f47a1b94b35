"""Chapman et al., Linux on Itanium: short vs long VHPT (docs/reproductions/itanium.md).

`vmlab pt compare` on the `itanium2` preset with the short-format VHPT (a virtually
mapped linear table), the long-format VHPT as a hashed cache in front of the
multi-level table (Linux's port), and the long format as the page table itself, on
traced real programs and multi-process workloads.
"""

from __future__ import annotations

from .. import api as vmlab
from ._common import Batch, md_table

DOC = "docs/reproductions/itanium.md"
NOT_BUILT = [
    "The short VHPT's per-region page size (needs region registers).",
    "Sharing of executable text through a per-program RID for region 2 (§3.2); only mmap()-ed shared objects "
    "get global RIDs.",
]

DESIGNS = ["short-vhpt", "long-vhpt", "long-vhpt-pt"]


def table(title: str, df) -> str:
    rows = [[d, int(r["walks"]), f"{r['refs_per_walk']:.2f}", int(r["nested_misses"]), f"{r['cycles_per_walk']:.1f}",
             f"{r['translation_cpki']:.1f}", f"{r['pt_bytes'] / 1024:.0f}"] for d, r in df.iterrows()]
    return md_table(["design", "refills", "refs/refill", "nested misses", "cycles/refill",
                     "translation cycles / 1000 instr", "PT KiB"], rows, title)


def tables(quick: bool, traces: list[tuple[str, str]]) -> str:
    n = "300k" if quick else "2M"
    parts = [f"Synthetic runs: {n} accesses each.\n"]
    for label, path in traces:
        parts.append(table(label, vmlab.pt_compare("itanium2", trace=path, designs=DESIGNS)))
    inputs = [
        (f"GUPS over 64 MiB, {n} accesses", {"workload": "gups", "footprint": "64M"}),
        ("pointer chase over 256 MiB", {"workload": "pchase", "footprint": "256M"}),
        ("extreme: 10 processes × 256 shared pages", {"workload": "shared", "procs": "10", "pages": "256"}),
    ]
    for title, src in inputs:
        parts.append(table(title, vmlab.pt_compare("itanium2", designs=DESIGNS, accesses=n, **src)))
    parts.append(extreme_sharing(n))
    return "\n".join(parts)


def extreme_sharing(n: str) -> str:
    """Figure 2's shape: the extreme DTLB benchmark (10 processes) with and without
    protection-key TLB sharing, as the shared working set grows past the TLB."""
    pages = [16, 32, 64, 128, 256, 512, 1024]
    b = Batch()
    for p in pages:
        src = {"workload": "shared", "procs": "10", "pages": str(p), "accesses": n}
        for share in (False, True):
            b.add((p, share), "itanium2", {"mmu.regions.share": str(share).lower()}, src)
    b.run()
    rows = []
    for p in pages:
        a, s = b[(p, False)], b[(p, True)]
        ca, cs = (d["cycles"]["translation_per_kilo_instruction"] for d in (a, s))
        rows.append([p, a["walks"]["count"], s["walks"]["count"], a["tlb_levels_by_side"]["data"][0]["misses"],
                     s["tlb_levels_by_side"]["data"][0]["misses"], f"{ca:.1f}", f"{cs:.1f}",
                     f"{ca / cs:.2f}×" if cs else "–", s["regions"]["key_misses"]])
    return md_table(["shared pages p", "walks (ASIDs)", "walks (sharing)", "L1 DTLB misses (ASIDs)",
                     "L1 DTLB misses (sharing)", "translation CPKI (ASIDs)", "translation CPKI (sharing)",
                     "ASIDs / sharing", "key misses"], rows,
                    f"extreme: 10 processes × p shared pages, long-format VHPT, {n} accesses, without and with "
                    "protection-key TLB sharing (Figure 2 shape)")
