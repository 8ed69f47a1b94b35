"""``vmlab demo``: a few built-in workloads under a few designs, in one table."""

from __future__ import annotations

import argparse
import time

from .api import run

WORKLOADS = {
    # name: (params, quick params)
    "gups": ({"footprint": "4G", "accesses": "4M"}, {"footprint": "256M", "accesses": "200k"}),
    "stream": ({"footprint": "1G", "accesses": "20M"}, {"footprint": "64M", "accesses": "500k"}),
    "pchase": ({"footprint": "1G", "accesses": "2M"}, {"footprint": "64M", "accesses": "100k"}),
    "graph": ({"vertices": "2M", "accesses": "4M"}, {"vertices": "100k", "accesses": "200k"}),
    "kv": ({"keys": "4M", "accesses": "4M"}, {"keys": "200k", "accesses": "200k"}),
}

DESIGNS = {
    "skylake 4K": ("skylake", {}),
    "skylake 2M": ("skylake", {"os.page_size": "2M"}),
    "skylake 4K 5-level": ("skylake", {"page_table.radix.levels": 5}),
    # tiny's own 64 MiB of memory cannot hold these footprints.
    "tiny 4K": ("tiny", {"machine.phys_mem": "8G"}),
}


def table(quick: bool):
    import pandas as pd

    rows = []
    for wname, (params, quick_params) in WORKLOADS.items():
        p = quick_params if quick else params
        for dname, (config, overrides) in DESIGNS.items():
            t0 = time.perf_counter()
            r = run(config, workload=wname, overrides=overrides, **p)
            secs = time.perf_counter() - t0
            s = r.summary()
            rows.append(
                {
                    "workload": wname,
                    "design": dname,
                    "accesses": s["accesses"],
                    "L1 DTLB miss %": 100 * s["l1_dtlb_miss_rate"],
                    "LL TLB misses": s["last_level_tlb_misses"],
                    "walks": s["walks"],
                    "refs/walk": s["refs_per_walk"],
                    "walk cycles": s["walk_latency_mean"],
                    "xlat CPKI": s["translation_cpki"],
                    "PT KiB": s["page_table_bytes"] / 1024,
                    "wall s": secs,
                    "M acc/s": s["accesses"] / secs / 1e6,
                }
            )
    return pd.DataFrame(rows)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other vmlab error
        self.exit(2, f"vmlab: error: demo: {message} (try `vmlab demo --help`)\n")


def main(argv: list[str]) -> int:
    ap = _Parser(prog="vmlab demo", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small inputs (seconds)")
    args = ap.parse_args(argv)
    import pandas as pd

    t0 = time.perf_counter()
    df = table(args.quick)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:,.2f}".format):
        print(df.to_string(index=False))
    print(f"\n{len(df)} runs in {time.perf_counter() - t0:.1f} s. "
          "Columns: docs/metrics.md (xlat CPKI = translation cycles per kilo-instruction; "
          "wall s includes setup and the JSON hand-off).")
    return 0
