#!/usr/bin/env python3
"""Instructions per steady-state walk, per thread and per function (callgrind).

Runs one vmlab command twice under callgrind, with N and 2N accesses, and subtracts:
what the second run adds, divided by the walks it adds, is the cost of one walk in
steady state, free of start-up and of the warm-up's faults. The intercept (the N run
less N's walks at that rate) is the fixed part: start-up and the faults of warm-up.
Instruction counts do not depend on what else the host is doing, unlike wall time
(docs/performance.md).

    scripts/per_walk_profile.py [--accesses N] [--top K] target/release/vmlab \\
        --config ecpt-asplos22 --set 'page_table.kind="nested-ecpt"' \\
        --workload gups footprint=1G

`--fixed` reports each function's (or line's) fixed part instead of its cost per walk:
where start-up and the warm-up's faults go.

`--per-access` divides by the accesses the longer run adds instead of its walks: the
cost of one access, for runs that rarely walk (stream with data references).

`--lines PATH_PART` reports source lines instead of functions (call lines left out),
for the files whose path contains PATH_PART: where inside an inlined walk the
instructions go. Run it on a binary built from the sources in the tree.

The script's own options come before the binary; everything after it goes to `vmlab
run`, with accesses=N and then accesses=2N appended (N is 2,000,000 by default). With the
memory thread on (the default when the host has two cores), thread 1 is the engine and
thread 2 the memory or walker thread. VMLAB_MEMORY_THREAD=off profiles one thread.
Valgrind runs the threads one at a time, so the second thread's polling of an empty
queue (`try_recv`, `start_recv`) is an artefact: leave it out of its cost. Pick N so
that warm-up ends before N accesses (gups 1G: 2,000,000).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile


def run(binary, args, accesses, out_dir):
    """Run under callgrind; return (stats document, {thread: callgrind file})."""
    prefix = os.path.join(out_dir, f"cg_{accesses}")
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={prefix}.out",
           binary, "run", *args, f"accesses={accesses}", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"per_walk_profile: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    files = {}
    for name in os.listdir(out_dir):
        m = re.fullmatch(rf"cg_{accesses}\.out-(\d+)", name)
        if m:
            files[int(m.group(1))] = os.path.join(out_dir, name)
    if not files:
        files[1] = prefix + ".out"
    return json.loads(p.stdout), files


def functions(path):
    """Self instructions per function of one callgrind file, and the total."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True).stdout
    counts, total = collections.Counter(), 0
    for line in out.split("-- Auto-annotated source")[0].splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in m.group(2):
            total = n
            continue
        name = re.sub(r" \[/.*\]$", "", m.group(2))
        counts[name.split(":", 1)[1] if ":" in name else name] += n
    return counts, total


def source_lines(path, pattern):
    """Self instructions per source line (file, line number) of one callgrind file, for
    files whose path contains `pattern`, with each line's text. Call lines (`=>`, keyed
    by their call counts) are left out: their cost is the callee's."""
    out = subprocess.run(["callgrind_annotate", "--auto=yes", "--show-percs=no", "--context=0", path],
                         capture_output=True, text=True).stdout
    counts, text = collections.Counter(), {}
    for part in out.split("-- Auto-annotated source: ")[1:]:
        name, body = part.split("\n", 1)
        name = name.strip()
        if pattern not in name:
            continue
        line = None
        for row in body.splitlines():
            # The summary after the last file ("... events annotated") is no source line.
            if line is not None and re.fullmatch(r"-{20,}", row.strip()):
                break
            m = re.match(r"-- line (\d+) -+", row)
            if m:
                line = int(m.group(1))
                continue
            m = re.match(r"\s*([\d,]+)\s+(.*)", row)
            if line is None or not m:
                continue
            if not m.group(2).lstrip().startswith("=>"):
                key = (name.rsplit("/", 1)[-1], line)
                counts[key] += int(m.group(1).replace(",", ""))
                text[key] = m.group(2).strip()
            line += 1
    return counts, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--accesses", type=int, default=2_000_000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--lines", metavar="PATH_PART", help="per source line instead of per function, for source files "
                    "whose path contains PATH_PART ('' for all; the sources must be the binary's)")
    ap.add_argument("--per-access", action="store_true", help="instructions per access instead of per walk")
    ap.add_argument("--fixed", action="store_true", help="report each function's (or line's) fixed part "
                    "(start-up and warm-up: the shorter run less its walks at the per-walk rate, in instructions) "
                    "instead of its cost per walk")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="vmlab run arguments (without accesses=)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        (doc1, f1), (doc2, f2) = run(a.binary, a.args, a.accesses, d), run(a.binary, a.args, 2 * a.accesses, d)
        w1, w2 = doc1["walks"]["count"], doc2["walks"]["count"]
        unit = "walk"
        if a.per_access:
            w1, w2, unit = a.accesses, 2 * a.accesses, "access"
        if w2 <= w1:
            sys.exit("per_walk_profile: the longer run made no more walks; nothing to divide by")
        print(f"{unit}s: {w1} and {w2}")
        for thread in sorted(set(f1) & set(f2)):
            (c1, t1), (c2, t2) = functions(f1[thread]), functions(f2[thread])

            def per_walk(x1, x2):
                return (x2 - x1) / (w2 - w1)

            def fixed(x1, x2):
                """The shorter run less its walks at the per-walk rate."""
                return x1 - per_walk(x1, x2) * w1

            value = fixed if a.fixed else per_walk
            print(f"\nthread {thread}: {per_walk(t1, t2):,.1f} instructions per {unit}; fixed part {fixed(t1, t2) / 1e6:,.1f} M")
            if a.lines is not None:
                (l1, _), (l2, text) = source_lines(f1[thread], a.lines), source_lines(f2[thread], a.lines)
                rows = sorted((value(l1[k], l2[k]), k) for k in set(l1) | set(l2))
                for v, k in reversed(rows[-a.top:]):
                    print(f"{v:10.1f}  {k[0]}:{k[1]}  {text.get(k, '')[:110]}")
                continue
            rows = sorted((value(c1[k], c2[k]), k) for k in set(c1) | set(c2))
            for v, k in reversed(rows[-a.top:]):
                print(f"{v:10.1f}  {k[:140]}")


if __name__ == "__main__":
    main()
