#!/usr/bin/env python3
"""One pass vs run by run: the figure in docs/performance.md ("One pass, many configurations").

Simulates one .vmt trace under N configs that differ in MMU parameters (L1 DTLB and
STLB sizes), once run by run (`vmlab.run`, decoding the trace N times) and once in one
pass (`vmlab.run_many`, decoding it once) on 1 and 2 threads; checks the documents are
identical and prints the wall times.

    .venv/bin/python scripts/bench_one_pass.py [--accesses 5M] [--configs 8]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import vmlab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accesses", default="5M")
    ap.add_argument("--configs", type=int, default=8)
    ap.add_argument("--workload", default="kv")
    a = ap.parse_args()
    sizes = [(16 << (i % 4), 768 << (i // 4)) for i in range(a.configs)]
    configs = [("skylake", {"tlb.l1d_4k.entries": l1, "tlb.stlb.entries": l2}) for l1, l2 in sizes]
    with tempfile.TemporaryDirectory() as d:
        t = Path(d) / "t.vmt"
        subprocess.run([sys.executable, "-m", "vmlab.cli", "generate", a.workload, f"accesses={a.accesses}", "-o", str(t)],
                       check=True, capture_output=True)
        t0 = time.perf_counter()
        separate = [vmlab.run(c, trace=t, overrides=o).to_dict() for c, o in configs]
        t_sep = time.perf_counter() - t0
        rows = [("run by run", t_sep)]
        for threads in (1, 2):
            t0 = time.perf_counter()
            one = vmlab.run_many(configs, trace=t, threads=threads)
            rows.append((f"one pass, {threads} thread(s)", time.perf_counter() - t0))
            assert [r.to_dict() for r in one] == separate, "one pass must equal run by run"
        records = vmlab.trace_info(t)["counts"]["records"]
    print(f"{a.configs} configs x {a.workload} trace ({records:,} records, {a.accesses} accesses)")
    for name, secs in rows:
        print(f"  {name:<22} {secs:7.2f} s   {t_sep / secs:5.2f}x")


if __name__ == "__main__":
    main()
