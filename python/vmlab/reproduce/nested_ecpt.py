"""Stojkovic et al., elastic cuckoo page tables and nested translation
(docs/reproductions/nested-ecpt.md).

The paper's Table 1 configurations — native radix, native ECPT, nested radix, nested
ECPT (plain design) and the hybrid (guest radix over host ECPT), each with 4 KiB pages
and with THP (2 MiB pages in the guest, and in the host for nested designs) — on the
`ecpt-asplos22` preset (the paper's Table 2 machine): walk latency (mean, p99),
sequential steps and parallel references per step, translation cycles per
kilo-instruction, and page-table memory (guest / host).
"""

from __future__ import annotations

from ._common import Batch, md_table

DOC = "docs/reproductions/nested-ecpt.md"
NOT_BUILT = [
    "The advanced nested-ECPT design (shortcut translation cache, PTE-hCWT caching in step 1, adaptive "
    "PTE-hCWT caching in step 3): only the plain design is simulated, so no 'Nested ECPT (advanced)' row.",
    "A statistics warm-up window: first-touch walks are included.",
]

DESIGNS = [
    ("Radix", "radix", False),
    ("ECPT", "ecpt", False),
    ("Nested Radix", "nested-radix", True),
    ("Nested ECPT", "nested-ecpt", True),
    ("Hybrid", "hybrid", True),
]


def overrides(kind: str, nested: bool, thp: bool) -> list[str]:
    o = [f"page_table.kind={kind}"]
    if thp:
        o.append("os.page_size=2M")
        if nested:
            o.append("page_table.nested.host_page_size=2M")
    return o


def row(name: str, r: dict) -> list:
    w = r["walks"]
    pt = r["page_table"]
    d = pt.get("details") or {}
    steps = " / ".join(f"{x:.1f}" for x in w["parallel_refs_per_step"][:4])
    mem = (f"{d['guest_bytes'] / 2**20:.1f} / {d['host_bytes'] / 2**20:.1f}" if "guest_bytes" in d
           else f"{pt['bytes'] / 2**20:.1f} / –")
    return [name, w["count"], f"{w['steps_per_walk']:.2f}", steps, f"{w['latency']['mean']:.1f}", w["latency"]["p99"],
            f"{r['cycles']['translation_per_kilo_instruction']:.0f}", mem]


HEADER = ["design", "walks", "steps/walk", "parallel refs per step (1st / 2nd / 3rd / 4th)", "walk cycles mean", "p99",
          "translation CPKI", "PT MiB guest / host"]


def tables(quick: bool, traces: list[tuple[str, str]]) -> str:
    n = "300k" if quick else "2M"
    inputs: list[tuple[str, dict]] = [
        ("GUPS over 2 GiB", {"workload": "gups", "footprint": "2G", "accesses": n}),
        ("BFS on a power-law graph", {"workload": "graph", "accesses": n}),
        ("Key-value store (Zipf gets over a hash index)", {"workload": "kv", "accesses": n}),
    ]
    inputs += [(label, {"trace": path}) for label, path in traces]
    b = Batch()
    for title, src in inputs:
        for thp in (False, True):
            for name, kind, nested in DESIGNS:
                b.add((title, thp, name), "ecpt-asplos22", overrides(kind, nested, thp), src)
    b.run()
    parts = [f"Synthetic runs: {n} accesses each.\n"]
    for title, _ in inputs:
        for thp in (False, True):
            rows = [row(name + (" + THP" if thp else ""), b[(title, thp, name)]) for name, _, _ in DESIGNS]
            parts.append(md_table(HEADER, rows, f"{title}, {'THP (2 MiB)' if thp else '4 KiB pages'}"))
    return "\n".join(parts)
