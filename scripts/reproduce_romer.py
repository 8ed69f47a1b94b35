#!/usr/bin/env python3
"""Regenerate the tables of docs/reproductions/romer.md (Romer, thesis ch. 3 and §6.5).

Runs each page-size policy on the `romer` preset (32-entry fully associative I/D TLBs
for 4K-8M pages, 30-cycle misses, 3000 cycles/KB copies) over TLB-bound workloads and
prints Markdown tables in the shape of Table 3-4 (TLB misses), Figure 3-3 (TLBMCPI and
its parts), Table 3-5 (estimated execution-time improvement over FIXED 4K, from
TLBMCPI at CPI = 1 + TLBMCPI), and Figure 3-4 (memory overhead).

    .venv/bin/python scripts/reproduce_romer.py [--quick] [--trace T.vmt ...] > tables.md
"""

from __future__ import annotations

import argparse

import vmlab

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


def run_all(workloads: dict, traces: list[str], accesses: str) -> dict:
    rows = {}
    for name, (w, params) in workloads.items():
        for p in POLICIES:
            rows[(name, p)] = vmlab.run("romer", workload=w, overrides=overrides(p), accesses=accesses, **params).to_dict()
    for t in traces:
        for p in POLICIES:
            rows[(t, p)] = vmlab.run("romer", trace=t, overrides=overrides(p)).to_dict()
    return rows


def misses(d: dict) -> int:
    return sum(v["misses"] for v in d["tlb"].values())


def table(rows: dict, names: list[str], title: str, cell) -> str:
    out = [f"**{title}**", "", "| workload | " + " | ".join(POLICIES) + " |", "|---" * (len(POLICIES) + 1) + "|"]
    for n in names:
        out.append(f"| {n} | " + " | ".join(cell(rows[(n, p)], rows[(n, 'fixed')]) for p in POLICIES) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1M accesses per run instead of 20M")
    ap.add_argument("--trace", action="append", default=[], help="also run a .vmt trace")
    a = ap.parse_args()
    rows = run_all(WORKLOADS, a.trace, "1M" if a.quick else "20M")
    names = list(WORKLOADS) + a.trace
    print(table(rows, names, "TLB misses (Table 3-4 shape; I + D)", lambda d, f: f"{misses(d):,}"))
    print(table(rows, names, "TLBMCPI = (30 × misses + bookkeeping + copy cycles) / instructions (Figure 3-3 shape)",
                lambda d, f: f"{d['policy']['tlbmcpi']:.3f}"))
    print(table(rows, names, "Estimated execution-time improvement over FIXED 4K, % (Table 3-5 shape; CPI = 1 + TLBMCPI)",
                lambda d, f: f"{100 * (1 - (1 + d['policy']['tlbmcpi']) / (1 + f['policy']['tlbmcpi'])):.1f}"))
    print(table(rows, names, "Memory overhead vs 4K pages, % (Figure 3-4 shape: data frames never touched / touched)",
                lambda d, f: f"{100 * d['policy']['bloat_fraction']:.1f}"))


if __name__ == "__main__":
    main()
