"""Elphinstone's thesis, chapters 3-6: the page-table zoo (docs/reproductions/elphinstone.md).

Elphinstone's benchmark shapes under each page-table design with a MIPS R4700-like TLB
(48 entries, fully associative, software-refilled: no page-walk caches): page-table
bytes per mapped page, references (= cache lines) and sequential steps per refill, and
mean refill cycles through a small cache hierarchy; plus the GPT spill-over effect.
"""

from __future__ import annotations

from .. import api as vmlab

DOC = "docs/reproductions/elphinstone.md"
NOT_BUILT = ["TLB entries that map an even/odd page pair, as the R4700's do: every design here refills one 4 KiB page per TLB entry, "
             "so refill counts are those of a 4K-entry TLB (the MPT's leaves do hold PTE pairs)."]

DESIGNS = ["mpt", "radix", "hashed-h512", "hashed", "clustered", "guarded2", "guarded16", "guarded256", "guarded16+stlb", "linear", "linear+stlb", "inverted"]

# The R4700 test machine: one 48-entry fully associative TLB for both sides (its
# entries map page pairs; here 4 KiB pages), 16 KiB 2-way L1 with 32 B lines, a 512 KiB
# L2, no page-walk caches (refills are software).
R4700 = [
    'tlb={utlb={level=1,serves="unified",entries=48,ways=0,page_sizes=["4K"]}}',
    "pwc.entries=[]",
    'cache={l1d={level=1,serves="data",size="16K",ways=2,line=32,latency=2},l2={level=2,size="512K",ways=1,line=32,latency=12}}',
    "memory.latency=60",
    "machine.phys_mem=2G",
]


def table(title: str, df, thesis: dict[str, str] | None = None) -> str:
    out = [f"**{title}**", "", "| design | kind | refills | refs/refill | steps/refill | cycles/refill | PT bytes | B/page | thesis |",
           "|---|---|---|---|---|---|---|---|---|"]
    for design, r in df.iterrows():
        out.append(
            f"| {design} | {r['kind']} | {int(r['walks'])} | {r['refs_per_walk']:.2f} | {r['steps_per_walk']:.2f} | "
            f"{r['cycles_per_walk']:.1f} | {int(r['pt_bytes'])} | {r['bytes_per_mapped_page']:.1f} | {(thesis or {}).get(design, '')} |"
        )
    return "\n".join(out) + "\n"


def tables(quick: bool, traces: list[tuple[str, str]]) -> str:
    acc = "100k" if quick else "1M"
    parts = [f"Synthetic runs: {acc} accesses each.\n"]
    thesis_conventional = {"guarded2": "24.2 B/page, 224 cycles", "guarded16": "17.9 B/page, 101 cycles",
                           "guarded256": "27.4 B/page, 80 cycles", "guarded16+stlb": "32 cycles (1×128K STLB)",
                           "mpt": "MPT: 124 cycles"}
    for label, path in traces:
        df = vmlab.pt_compare(trace=path, designs=DESIGNS, overrides=R4700)
        parts.append(table(f"Conventional program: {label}", df, thesis_conventional))
    for pages in ([64, 1024] if quick else [64, 512, 4096, 8192]):
        df = vmlab.pt_compare(workload="sparse", pages=pages, space="1T", accesses=acc, designs=DESIGNS, overrides=R4700)
        thesis = {"mpt": "MPT: 5–8 KB/page", "hashed": "HPT: 33–50 B/page once populated"}
        parts.append(table(f"SPARSE-PAGE: {pages} random 4 KiB pages in 1 TiB", df, thesis))
    df = vmlab.pt_compare(workload="sparse", layout="file", pages=256, space="1T", accesses=acc, designs=DESIGNS, overrides=R4700)
    parts.append(table("SPARSE-FILE: 256 file-sized objects in 1 TiB", df))
    parts.append(spill_over(quick))
    return "\n".join(parts)


def spill_over(quick: bool) -> str:
    """GPT entry bytes per mapped page as the number of random pages grows (§4.3.2)."""
    counts = [2 ** k for k in range(4, 14 if not quick else 11)]
    sizes = [4, 16, 256]
    out = ["**Spill-over: GPT node-entry bytes per mapped page vs. mapped pages (SPARSE-PAGE, 48-bit VAs)**", "",
           "| pages | " + " | ".join(f"G{s}" for s in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for n in counts:
        row = []
        for s in sizes:
            r = vmlab.run("tiny", workload="sparse", pages=n, space="64T", accesses=n,
                          overrides=["page_table.kind=guarded", f"page_table.guarded.node_entries={s}", "machine.phys_mem=1G"])
            row.append(f"{r['page_table']['details']['entry_bytes_per_mapped_page']:.1f}")
        out.append(f"| {n} | " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"
