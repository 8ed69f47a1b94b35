"""``vmlab reproduce PAPER``: run a paper's experiments and regenerate the tables behind
docs/reproductions/PAPER.md.

Each paper module declares its runs (built-in workloads and small real programs traced
with valgrind, cached under ``$VMLAB_CACHE`` or ~/.cache/vmlab), simulates them (runs
that read the same input share one pass) and returns Markdown tables in the shape of
the paper's. ``--quick`` uses shorter runs and two traced programs (a few minutes on
two cores); the full version is what the docs show. Parts of a paper that vmlab does
not build yet are listed as such, never faked.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import _core
from .._files import write_text
from . import elphinstone, itanium, nested_ecpt, romer, romer_cache, tps
from ._common import program_traces

# Paper -> the modules whose tables it regenerates (Romer's thesis has two pages).
PAPERS = {
    "elphinstone": [elphinstone],
    "itanium": [itanium],
    "romer": [romer, romer_cache],
    "tps": [tps],
    "nested-ecpt": [nested_ecpt],
}


def reproduce(paper: str, quick: bool = False, traces: list[str] | None = None) -> str:
    """The Markdown for ``paper`` (one of :data:`PAPERS`). ``traces``: extra .vmt files
    to include next to the built-in traced programs."""
    if paper not in PAPERS:
        raise _core.VmlabError(f"unknown paper `{paper}` (known: {', '.join(PAPERS)})")
    notes: list[str] = []
    inputs = program_traces(quick, notes) + [(f"`{Path(t).name}`", str(t)) for t in traces or []]
    for _, t in inputs:
        if not Path(t).exists():
            raise _core.VmlabError(f"{t}: no such trace")
    out = [f"# vmlab reproduce {paper}{' --quick' if quick else ''}", "",
           f"vmlab {_core.version()}. Each section below regenerates the tables of the page it names.", ""]
    for mod in PAPERS[paper]:
        out += [f"## {mod.DOC}", ""]
        if mod.NOT_BUILT:
            out += ["Not built yet (no numbers are shown for these):", ""] + [f"- {n}" for n in mod.NOT_BUILT] + [""]
        out.append(mod.tables(quick, inputs))
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="vmlab reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("paper", choices=list(PAPERS))
    ap.add_argument("--quick", action="store_true", help="shorter runs: a few minutes on two cores")
    ap.add_argument("--trace", action="append", default=[], help="also run this .vmt trace (repeatable)")
    ap.add_argument("-o", "--output", help="write the Markdown here instead of stdout")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    text = reproduce(a.paper, quick=a.quick, traces=a.trace)
    if a.output:
        write_text(a.output, text)
    else:
        sys.stdout.write(text)
    print(f"vmlab reproduce {a.paper}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0
