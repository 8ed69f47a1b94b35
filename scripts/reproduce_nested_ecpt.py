#!/usr/bin/env python3
"""Regenerate the tables of docs/reproductions/nested-ecpt.md.

Runs Stojkovic et al.'s Table 1 configurations — native radix, native ECPT, nested
radix, nested ECPT (plain design) and the hybrid (guest radix over host ECPT), each with
4 KiB pages and with THP (2 MiB pages in the guest, and in the host for nested designs)
— on the `ecpt-asplos22` preset (the paper's Table 2 machine), and prints Markdown
tables: walk latency (mean, p99), sequential steps and parallel references per step,
translation cycles per kilo-instruction, and page-table memory (guest / host).

    .venv/bin/python scripts/reproduce_nested_ecpt.py [--quick] > tables.md
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import vmlab

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


def row(name: str, r: vmlab.Result) -> str:
    w = r["walks"]
    pt = r["page_table"]
    d = pt.get("details") or {}
    steps = " / ".join(f"{x:.1f}" for x in w["parallel_refs_per_step"][:4])
    mem = (f"{d['guest_bytes'] / 2**20:.1f} / {d['host_bytes'] / 2**20:.1f}" if "guest_bytes" in d
           else f"{pt['bytes'] / 2**20:.1f} / –")
    return (f"| {name} | {w['count']} | {w['steps_per_walk']:.2f} | {steps} | {w['latency']['mean']:.1f} | "
            f"{w['latency']['p99']} | {r['cycles']['translation_per_kilo_instruction']:.0f} | {mem} |")


def table(title: str, runs: list[tuple[str, vmlab.Result]]) -> str:
    out = [f"**{title}**", "",
           "| design | walks | steps/walk | parallel refs per step (1st / 2nd / 3rd / 4th) | walk cycles mean | p99 | translation CPKI | PT MiB guest / host |",
           "|---|---|---|---|---|---|---|---|"]
    out += [row(n, r) for n, r in runs]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = "300k" if args.quick else "2M"
    inputs: list[tuple[str, dict]] = [
        ("GUPS over 2 GiB", {"workload": "gups", "footprint": "2G", "accesses": n}),
        ("BFS on a power-law graph", {"workload": "graph", "accesses": n}),
        ("Key-value store (Zipf gets over a hash index)", {"workload": "kv", "accesses": n}),
    ]
    parts = []
    with tempfile.TemporaryDirectory() as d:
        if shutil.which("valgrind") and not args.quick:
            t = Path(d) / "sort.vmt"
            subprocess.run([sys.executable, "-m", "vmlab.cli", "trace", "-o", str(t), "--", "sort", "/etc/services"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            inputs.append(("`sort /etc/services` (traced with valgrind)", {"trace": str(t)}))
        for title, src in inputs:
            for thp in (False, True):
                runs = []
                for name, kind, nested in DESIGNS:
                    src_kw = dict(src)
                    r = vmlab.run("ecpt-asplos22", overrides=overrides(kind, nested, thp), **src_kw)
                    runs.append((name + (" + THP" if thp else ""), r))
                parts.append(table(f"{title}, {'THP (2 MiB)' if thp else '4 KiB pages'}", runs))
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
