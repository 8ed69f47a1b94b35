"""Romer's thesis, chapter 3 and §6.5: online superpage promotion (docs/reproductions/romer.md).

Each page-size policy on the `romer` preset (32-entry fully associative I/D TLBs for
4K-8M pages, 30-cycle misses, 3000 cycles/KB copies) over TLB-bound workloads, in the
shape of Table 3-4 (TLB misses), Figure 3-3 (TLBMCPI), Table 3-5 (estimated
execution-time improvement over FIXED 4K, at CPI = 1 + TLBMCPI) and Figure 3-4 (memory
overhead), and THROTTLE's windows (§6.5). The cache chapters (4-6) are in romer_cache.py.
"""

from __future__ import annotations

from ._common import Batch, md_table, pattern_headline, scale_program_traces

DOC = "docs/reproductions/romer.md"
NOT_BUILT: list[str] = []

POLICIES = ["fixed", "fixed-16k", "fixed-64k", "offline", "asap", "asap-4-64", "online", "approx-online", "throttle"]

WORKLOADS = {
    "gups-16M": ("gups", {"footprint": "16M"}),
    "kv-200K": ("kv", {"keys": "200K"}),
    "graph-256K": ("graph", {"vertices": "256K", "degree": "8"}),
    "stride-8K": ("stride", {"footprint": "16M", "stride": "8192"}),
    "sparse-4096": ("sparse", {"pages": "4096", "space": "64G"}),
}


def overrides(policy: str) -> dict:
    if policy.startswith("fixed-"):
        return {"os.policy.kind": "fixed", "os.page_size": policy.split("-")[1].upper()}
    return {"os.policy.kind": policy}


def misses(d: dict) -> int:
    return sum(v["misses"] for v in d["tlb"].values())


# THROTTLE's window w, in instructions (the `romer` preset's romer.throttle_window).
THROTTLE_WINDOW = 10_000_000


def tables(quick: bool, traces: list[tuple[str, str]]) -> str:
    acc = "1M" if quick else "20M"
    sources = {n: {"workload": w, "accesses": acc, **p} for n, (w, p) in WORKLOADS.items()}
    notes: list[str] = []
    at_scale = scale_program_traces(quick, notes)  # the real programs at scale
    sources.update({label: {"trace": path} for label, path in traces + at_scale})
    b = Batch()
    for n, src in sources.items():
        for p in POLICIES:
            b.add((n, p), "romer", overrides(p), src)
    b.run()

    patterns(b, list(WORKLOADS), [label for label, _ in at_scale])

    def table(title: str, cell) -> str:
        rows = [[n] + [cell(b[(n, p)], b[(n, "fixed")]) for p in POLICIES] for n in sources]
        return md_table(["workload"] + POLICIES, rows, title)

    return "\n".join([
        f"Synthetic runs: {acc} accesses each.\n",
        table("TLB misses (Table 3-4 shape; I + D)", lambda d, f: f"{misses(d):,}"),
        table("TLBMCPI = (30 × misses + bookkeeping + copy cycles) / instructions (Figure 3-3 shape)",
              lambda d, f: f"{d['policy']['tlbmcpi']:.3f}"),
        table("Estimated execution-time improvement over FIXED 4K, % (Table 3-5 shape; CPI = 1 + TLBMCPI)",
              lambda d, f: f"{100 * (1 - (1 + d['policy']['tlbmcpi']) / (1 + f['policy']['tlbmcpi'])):.1f}"),
        table("Memory overhead vs 4K pages, % (Figure 3-4 shape: data frames never touched / touched)",
              lambda d, f: f"{100 * d['policy']['bloat_fraction']:.1f}"),
        throttle_table(b, list(sources)),
        *[f"- {n}" for n in notes],
    ])


def throttle_table(b: Batch, names: list[str]) -> str:
    """THROTTLE's windows (§6.5.1) on each input: how many of its windows the run spans,
    how often a window's miss frequency switched bookkeeping and promotion off, and the
    misses it spent switched off (the stats' policy.details.throttle)."""
    rows = []
    for n in names:
        d, approx, fixed = b[(n, "throttle")], b[(n, "approx-online")], b[(n, "fixed")]
        t, instructions = d["policy"]["details"]["throttle"], d["totals"]["instructions"]
        rows.append([n, f"{instructions:,}", instructions // THROTTLE_WINDOW, t["activations"],
                     "yes" if t["active_at_end"] else "no", f"{t['suspended_misses']:,}",
                     f"{100 * t['suspended_misses'] / max(1, misses(d)):.0f}%",
                     " / ".join(f"{x['policy']['tlbmcpi']:.3f}" for x in (d, approx, fixed))])
    return md_table(["workload", "instructions", "windows of 10 M", "activations", "active at the end",
                     "misses while active", "of its misses", "TLBMCPI: throttle / approx-online / fixed"], rows,
                    "THROTTLE (§6.5): its 10 M-instruction windows, and the misses it spent with bookkeeping "
                    "and promotion switched off")


def improvement(d: dict, fixed: dict) -> float:
    """Table 3-5's estimated execution-time improvement over FIXED 4K, in percent."""
    return 100 * (1 - (1 + d["policy"]["tlbmcpi"]) / (1 + fixed["policy"]["tlbmcpi"]))


def patterns(b: Batch, names: list[str], programs: list[str]) -> None:
    """The patterns §3.6 reports, checked on every synthetic workload and, except
    OFFLINE's, on the real programs at scale (``programs``); OFFLINE's gap on those is
    in romer.md's traced-programs row."""
    gap = lambda n: improvement(b[(n, "offline")], b[(n, "fixed")]) - improvement(b[(n, "approx-online")], b[(n, "fixed")])
    pattern_headline("APPROX-ONLINE comes within a few % of OFFLINE's improvement", "Table 3-5", "within a few % on most programs",
                     names, lambda n: gap(n) <= 5.0, lambda n: f"{gap(n):.1f} pts",
                     "OFFLINE's foresight gains more there than in the thesis's programs (romer.md, \"Theirs next to ours\")")
    misses_close = lambda n: abs(misses(b[(n, "online")]) - misses(b[(n, "approx-online")])) <= 0.05 * max(1, misses(b[(n, "approx-online")]))
    slower = lambda n: b[(n, "online")]["policy"]["tlbmcpi"] > b[(n, "approx-online")]["policy"]["tlbmcpi"]
    pattern_headline("ONLINE removes as many misses as APPROX-ONLINE but costs more (capacity bookkeeping)", "§3.6, Table 3-4",
                     "yes", names + programs, lambda n: misses_close(n) and slower(n),
                     lambda n: f"{misses(b[(n, 'online')]) / max(1, misses(b[(n, 'approx-online')])):.2f}× misses, TLBMCPI "
                               f"{b[(n, 'online')]['policy']['tlbmcpi']:.2f} vs {b[(n, 'approx-online')]['policy']['tlbmcpi']:.2f}",
                     "the two part ways there (romer.md, \"Our numbers\")")
    bloat = lambda n: 100 * b[(n, "approx-online")]["policy"]["bloat_fraction"]
    pattern_headline("The online policies' memory overhead stays within a few %", "Fig. 3-4", "≤ 4%", names + programs,
                     lambda n: bloat(n) <= 4.0,
                     lambda n: f"{bloat(n):.1f}%", "every 8K-stride superpage is half untouched (the stride skips every other page)")
