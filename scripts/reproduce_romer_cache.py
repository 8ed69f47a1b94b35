#!/usr/bin/env python3
"""Regenerate the tables of docs/reproductions/romer-cache.md (Romer, thesis ch. 4-6).

Runs the `romer-cache` preset (Alpha 21064 memory system, Table 4-2) and `combined`
(Table 6-2) over conflict-prone workloads and prints Markdown tables in the shape of
Table 4-6 (L2 MCPI: page coloring / bin hopping x direct-mapped / Snapshot-Miss /
two-way), Figure 4-1 (the software policies' L2 MCPI, split), Table 5-3 (MCPI: DM,
8-entry victim cache, CML) and Table 6-3 (pages copied by THROTTLE, CML, both; with
the L2 MCPI + TLBMCPI of DM, CML, THROTTLE and COMBINED).

    .venv/bin/python scripts/reproduce_romer_cache.py [--quick] [--trace T.vmt ...] > tables.md
"""

from __future__ import annotations

import argparse

import vmlab

WORKLOADS = {
    "strawman": ("strawman", {}),
    "stab": ("strawman", {"fetch": "1"}),
    "strawman-8": ("strawman", {"pages": "8", "spacing": "256K"}),
    "kv-64K": ("kv", {"keys": "64K"}),
    "graph-32K": ("graph", {"vertices": "32K", "degree": "8"}),
}

SOFTWARE = ["active-naive", "active-delay", "active-throttle", "periodic-random", "periodic-color", "snapshot", "snapshot-delay", "snapshot-miss"]


def one(config: str, src: tuple, overrides: dict, accesses: str) -> dict:
    kind, value, params = src
    if kind == "trace":
        return vmlab.run(config, trace=value, overrides=overrides).to_dict()
    return vmlab.run(config, workload=value, overrides=overrides, accesses=accesses, **params).to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1M accesses per synthetic run instead of 5M")
    ap.add_argument("--trace", action="append", default=[], help="also run a .vmt trace")
    a = ap.parse_args()
    acc = "1M" if a.quick else "5M"
    sources = {n: ("workload", w, p) for n, (w, p) in WORKLOADS.items()}
    sources.update({t.rsplit("/", 1)[-1]: ("trace", t, {}) for t in a.trace})

    def l2(d: dict) -> str:
        return f"{d['mcpi']['l2_mcpi']:.3f}"

    # Table 4-6
    out = ["**L2 MCPI (Table 4-6 shape)**", "",
           "| workload | PC: DM | PC: Snapshot-Miss | PC: two-way | BH: DM | BH: Snapshot-Miss | BH: two-way |",
           "|---|---|---|---|---|---|---|"]
    for n, s in sources.items():
        cells = []
        for place in ["page-coloring", "bin-hopping"]:
            base = {"os.placement.kind": place}
            cells += [l2(one("romer-cache", s, base, acc)),
                      l2(one("romer-cache", s, {**base, "os.recolor.kind": "snapshot-miss"}, acc)),
                      l2(one("romer-cache", s, {**base, "cache.l2.ways": "2"}, acc))]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    print("\n".join(out) + "\n")

    # Figure 4-1
    out = ["**Software policies, page coloring: L2 MCPI = L2 miss CPI + recolor CPI + TLBMCPI (Figure 4-1 shape)**", "",
           "| workload | DM | " + " | ".join(SOFTWARE) + " |", "|---" * (len(SOFTWARE) + 2) + "|"]
    for n, s in sources.items():
        cells = []
        for p in ["none"] + SOFTWARE:
            m = one("romer-cache", s, {"os.recolor.kind": p}, acc)["mcpi"]
            cells.append(f"{m['l2_mcpi']:.3f} ({m['l2_miss_cpi']:.3f}+{m['recolor_cpi']:.3f}+{m['tlbmcpi']:.3f})")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    print("\n".join(out) + "\n")

    # Table 5-3
    out = ["**MCPI (Table 5-3 shape; page coloring)**", "", "| workload | DM | victim (8 lines, +5 cycles) | CML | recolors (CML) |", "|---|---|---|---|---|"]
    for n, s in sources.items():
        dm = one("romer-cache", s, {}, acc)
        vc = one("romer-cache", s, {"cache.l2.victim.entries": "8", "cache.l2.victim.latency": "5"}, acc)
        cml = one("romer-cache", s, {"os.recolor.kind": "cml"}, acc)
        out.append(f"| {n} | {dm['mcpi']['mcpi']:.3f} | {vc['mcpi']['mcpi']:.3f} | {cml['mcpi']['mcpi']:.3f} | {cml['recolor']['pages_recolored']} |")
    print("\n".join(out) + "\n")

    # Table 6-3
    out = ["**COMBINED (Table 6-3 shape; page coloring): share of copied pages, and L2 MCPI + TLBMCPI**", "",
           "| workload | THROTTLE only % | CML only % | both % | DM | CML | THROTTLE | COMBINED | pages recolored n>=5 |",
           "|---|---|---|---|---|---|---|---|---|"]
    for n, s in sources.items():
        runs = {
            "DM": one("combined", s, {"os.policy.kind": "fixed", "os.recolor.kind": "none"}, acc),
            "CML": one("combined", s, {"os.policy.kind": "fixed"}, acc),
            "THROTTLE": one("combined", s, {"os.recolor.kind": "none"}, acc),
            "COMBINED": one("combined", s, {}, acc),
        }
        c = runs["COMBINED"]["recolor"]
        split = c["pages_copied_by"]
        total = max(1, split["promotion_only"] + split["recolor_only"] + split["both"])
        pct = [100 * split[k] / total for k in ["promotion_only", "recolor_only", "both"]]
        tot = [f"{d['mcpi']['l2_mcpi']:.3f}" for d in runs.values()]
        out.append(f"| {n} | {pct[0]:.0f} | {pct[1]:.0f} | {pct[2]:.0f} | " + " | ".join(tot) + f" | {c['pages_recolored_5_or_more']} |")
    print("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
