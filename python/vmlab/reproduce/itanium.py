"""Chapman et al., Linux on Itanium: short vs long VHPT (docs/reproductions/itanium.md).

`vmlab pt compare` on the `itanium2` preset with the short-format VHPT (a virtually
mapped linear table), the long-format VHPT as a hashed cache in front of the
multi-level table (Linux's port), and the long format as the page table itself, on
traced real programs and multi-process workloads.
"""

from __future__ import annotations

from .. import api as vmlab
from ._common import md_table

DOC = "docs/reproductions/itanium.md"
NOT_BUILT = [
    "Region IDs and protection-key TLB sharing, so no 'extreme benchmark with and without sharing' table "
    "(the extreme benchmark below runs with per-process ASIDs only).",
    "The short VHPT's per-region page size (needs region registers).",
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
    return "\n".join(parts)
