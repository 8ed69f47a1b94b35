#!/usr/bin/env python3
"""End to end, a researcher's own program: trace it and simulate the trace under the
skylake preset (docs/performance.md, "Tracing a program"). Each program is traced with
each engine asked for, then `vmlab run -c skylake` runs the trace; with --drrun, the same
program also runs under DynamoRIO's drcachesim online TLB simulation, the peer tool
(built from its public repository for the comparison; not a dependency).

    scripts/trace_bench.py [--engines qemu,lackey] [--drrun PATH] [--repeat N] [-o OUT.json]

Programs: `ls -lR /usr/lib`, and bench/programs/gups.c over 1 GiB (compiled with cc -O2).
Each figure is the best of --repeat runs; every run is kept in the JSON.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def vmlab() -> list[str]:
    venv = ROOT / ".venv" / "bin" / "vmlab"
    return [str(venv)] if venv.exists() else ["vmlab"]


def timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    secs = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"trace_bench: `{' '.join(cmd)}` failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return secs, p


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="qemu", help="comma-separated: qemu, lackey")
    ap.add_argument("--drrun", help="DynamoRIO's drrun, to time drcachesim -simulator_type TLB too")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", help="programs whose name contains this")
    ap.add_argument("-o", "--output", help="write every run as JSON here (bench/runs/README.md)")
    ap.add_argument("--notes", default="", help="context for the JSON's `notes` (the peer's version, the machine's load)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="vmlab-trace-bench-"))
    try:
        gups = work / "gups"
        subprocess.run(["cc", "-O2", "-o", str(gups), str(ROOT / "bench" / "programs" / "gups.c")], check=True)
        programs = {"ls -lR /usr/lib": ["ls", "-lR", "/usr/lib"], "gups 1 GiB, 10 M updates": [str(gups), "30", "10000000"]}
        rows = []
        for name, cmd in programs.items():
            if args.only and args.only not in name:
                continue
            native = min(timed(cmd)[0] for _ in range(args.repeat))
            row = {"program": name, "command": cmd, "native_seconds": native, "engines": {}}
            for engine in args.engines.split(","):
                runs = []
                for _ in range(args.repeat):
                    trace = work / "t.vmt"
                    t_trace, p = timed(vmlab() + ["trace", "--engine", engine, "-o", str(trace), "--", *cmd])
                    records = int(re.search(r"wrote (\d+) records", p.stderr).group(1))
                    t_run, _ = timed(vmlab() + ["run", "-c", "skylake", "--no-progress", "--trace", str(trace), "-o", str(work / "stats.json")])
                    stats = json.loads((work / "stats.json").read_text())
                    runs.append({"trace_seconds": t_trace, "run_seconds": t_run, "total_seconds": t_trace + t_run, "records": records,
                                 "accesses": stats["totals"]["accesses"], "trace_bytes": trace.stat().st_size})
                    trace.unlink()
                best = min(runs, key=lambda r: r["total_seconds"])
                row["engines"][engine] = {"best": best, "runs": runs}
                print(f"{name:<28} {engine:<7} trace {best['trace_seconds']:7.1f} s + run {best['run_seconds']:6.1f} s = "
                      f"{best['total_seconds']:7.1f} s  ({best['records'] / 1e6:.0f} M records, "
                      f"{best['records'] / best['trace_seconds'] / 1e6:.1f} M/s traced)", flush=True)
            if args.drrun:
                runs = []
                for _ in range(args.repeat):
                    secs, p = timed([args.drrun, "-t", "drcachesim", "-simulator_type", "TLB", "--", *cmd])
                    refs = sum(int(m) for m in re.findall(r"(?:Hits|Misses):\s+(\d+)", p.stderr.split("LL stats")[0]))
                    runs.append({"seconds": secs, "l1_references": refs})
                best = min(runs, key=lambda r: r["seconds"])
                row["drcachesim"] = {"best": best, "runs": runs}
                print(f"{name:<28} drcachesim TLB online {best['seconds']:7.1f} s  ({best['l1_references'] / 1e6:.0f} M L1 TLB references)", flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.output:
        doc = {"date": time.strftime("%Y-%m-%d"),
               "machine": {"kind": f"{os.cpu_count()} vCPUs", "cpu": cpu_model(), "kernel": platform.release()},
               "build": "make's (release, profile-guided) extension; the plugin as scripts/setup.sh builds it",
               "command": " ".join(["scripts/trace_bench.py", *sys.argv[1:]]), "repeat": args.repeat, "notes": args.notes,
               "rows": rows}
        Path(args.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
