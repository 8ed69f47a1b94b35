"""``vmlab reproduce PAPER``: run a paper's experiments and regenerate the tables behind
docs/reproductions/PAPER.md.

Each paper module declares its runs (built-in workloads and small real programs traced
with valgrind, cached under ``$VMLAB_CACHE`` or ~/.cache/vmlab), simulates them (runs
that read the same input share one pass; inputs run side by side on `vmlab sweep`'s
executor: local worker processes on every core, or Ray tasks on a cluster) and returns
Markdown tables in the shape of the paper's. ``--quick`` uses shorter runs and two
traced programs (a few minutes on two cores); the full version is what the docs show.
Parts of a paper that vmlab does not build yet are listed as such, never faked.

Each module also records its paper's headline results next to ours (``headline`` in
_common.py); ``vmlab reproduce --all -o DIR`` writes every paper's tables and the
summary page of headline results with verdicts (docs/reproductions/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from .. import _core
from .._files import staged_dir, write_text
from . import elphinstone, itanium, nested_ecpt, romer, romer_cache, tps
from ._common import VERDICTS, Headline, executing, md_table, program_traces, take_headlines

# Paper -> the modules whose tables it regenerates (Romer's thesis has two pages).
PAPERS = {
    "elphinstone": [elphinstone],
    "itanium": [itanium],
    "romer": [romer, romer_cache],
    "tps": [tps],
    "nested-ecpt": [nested_ecpt],
}


# Paper -> how the summary names it.
TITLES = {
    "elphinstone": "Elphinstone 1999",
    "itanium": "Chapman et al. 2003 (Itanium)",
    "romer": "Romer 1998",
    "tps": "Guvenilir & Patt 2020 (TPS)",
    "nested-ecpt": "Stojkovic et al. 2022 (nested ECPT)",
}


def reproduce(paper: str, quick: bool = False, traces: list[str] | None = None, jobs: int | None = None,
              backend: str = "local", address: str | None = None) -> str:
    """The Markdown for ``paper`` (one of :data:`PAPERS`). ``traces``: extra .vmt files
    to include next to the built-in traced programs.

    ``jobs``, ``backend``, ``address``: where the simulations run, as for
    :func:`vmlab.sweep`: ``backend="local"``, ``jobs`` worker processes (default: every
    core); ``backend="ray"``, Ray tasks on a local instance with ``jobs`` CPUs, or on
    the cluster at ``address`` (else at RAY_ADDRESS; "auto": the one on this machine).
    The tables are the same whichever runs them."""
    if paper not in PAPERS:
        raise _core.VmlabError(f"unknown paper `{paper}` (known: {', '.join(PAPERS)})")
    with executing(backend, jobs, address):
        return reproduce_with_headlines(paper, quick, traces)[0]


def reproduce_with_headlines(paper: str, quick: bool = False, traces: list[str] | None = None) -> tuple[str, list[Headline]]:
    """:func:`reproduce`, and the paper's headline results beside ours (what
    ``--all`` gathers into the summary page). The simulations run where the enclosing
    ``executing`` block says (_common.py), else in local worker processes."""
    if paper not in PAPERS:
        raise _core.VmlabError(f"unknown paper `{paper}` (known: {', '.join(PAPERS)})")
    notes: list[str] = []
    inputs = program_traces(quick, notes) + [(f"`{Path(t).name}`", str(t)) for t in traces or []]
    for _, t in inputs:
        if not Path(t).exists():
            raise _core.VmlabError(f"{t}: no such trace")
    out = [f"# vmlab reproduce {paper}{' --quick' if quick else ''}", "",
           f"vmlab {_core.version()}. Each section below regenerates the tables of the page it names.", ""]
    take_headlines()
    heads: list[Headline] = []
    for mod in PAPERS[paper]:
        out += [f"## {mod.DOC}", ""]
        if mod.NOT_BUILT:
            out += ["Not built yet (no numbers are shown for these):", ""] + [f"- {n}" for n in mod.NOT_BUILT] + [""]
        out.append(mod.tables(quick, inputs))
        heads += take_headlines()
        heads += [_not_built(n) for n in mod.NOT_BUILT]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out), heads


def _not_built(note: str) -> Headline:
    """A NOT_BUILT note ("what: why") as a summary row."""
    what, _, why = note.partition(":")
    return Headline(what.strip(), "", "", "–", "not built", why.strip() or "not scripted yet")


def summary(heads: dict[str, list[Headline]], quick: bool, seconds: float) -> str:
    """docs/reproductions/README.md: every paper's headline results, theirs beside ours,
    with a verdict."""
    rows = [[TITLES[p], h.result, h.where, h.paper, h.ours, f"**{h.verdict}**", h.why] for p, hs in heads.items() for h in hs]
    counts = {v: sum(1 for hs in heads.values() for h in hs if h.verdict == v) for v in VERDICTS}
    run = ("`--quick` runs (shorter and smaller than the pages' own: not the numbers to cite)" if quick
           else "the pages' own runs")
    return "\n".join([
        "# Reproductions: the headline results",
        "",
        "The headline results of the five papers (the claims their abstracts and result sections lead with), the "
        "paper's number and vmlab's, and a verdict: **match** (within "
        "10% of the paper's number, under the paper's parameters), **same shape** (the same direction or pattern but "
        "not the same size, or a match under other parameters), **differs**, or **not built**. Every verdict short "
        "of a match says why; the paper's page (linked below) has the tables and the measurements behind it.",
        "",
        f"Generated by `vmlab reproduce --all{' --quick' if quick else ''} -o DIR` (DIR/README.md is this page, "
        f"DIR/PAPER.md each page's tables) from {run}: vmlab {_core.version()}, {seconds / 60:.0f} minutes on this "
        "machine. Pages: " + ", ".join(f"[{TITLES[p]}]({Path(m.DOC).name})" for p, mods in PAPERS.items() for m in mods[:1]) + ". "
        "The simulations run in worker processes on every local core; `--backend ray --address HEAD:6379` runs them "
        "on a Ray cluster instead, with the same tables ([docs/sweeps.md](../sweeps.md), \"`vmlab reproduce PAPER`\").",
        "",
        md_table(["paper", "result", "where", "paper's", "vmlab", "verdict", "why"], rows),
        "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".",
        "",
    ])


def reproduce_all(quick: bool, out_dir: Path | None, traces: list[str] | None = None, jobs: int | None = None,
                  backend: str = "local", address: str | None = None) -> str:
    """Every paper: each one's tables into ``out_dir``/PAPER.md (if given), and the
    summary page (returned, and written to ``out_dir``/README.md). The pages are
    written apart and moved into ``out_dir`` together once all are done: a failed or
    interrupted run leaves ``out_dir`` as it was. ``jobs``, ``backend``, ``address``:
    as for :func:`reproduce` (Ray is joined once for every paper)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(executing(backend, jobs, address))
        stage = stack.enter_context(staged_dir(out_dir, last=("README.md",))) if out_dir is not None else None
        t0 = time.monotonic()
        heads: dict[str, list[Headline]] = {}
        for paper in PAPERS:
            text, heads[paper] = reproduce_with_headlines(paper, quick, traces)
            if stage is not None:
                (stage / f"{paper}.md").write_text(text)
            print(f"vmlab reproduce: {paper} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
        page = summary(heads, quick, time.monotonic() - t0)
        if stage is not None:
            (stage / "README.md").write_text(page)
    return page


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="vmlab reproduce", description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("paper", nargs="?", choices=list(PAPERS), help="one paper (or --all)")
    ap.add_argument("--all", action="store_true", help="every paper, and the summary page of headline results")
    ap.add_argument("--quick", action="store_true", help="shorter runs: a few minutes on two cores")
    ap.add_argument("--trace", action="append", default=[], help="also run this .vmt trace (repeatable)")
    ap.add_argument("-o", "--output", help="write the Markdown here instead of stdout (with --all: a directory)")
    # As `vmlab sweep`'s options (sweep.py).
    ap.add_argument("-j", "--jobs", type=int, help="worker processes, or CPUs of a local Ray instance (default: every core)")
    ap.add_argument("--backend", default="local", choices=["local", "ray"])
    ap.add_argument("--address", help="Ray cluster to run on (HOST:PORT, auto, or ray://HOST:PORT; default: $RAY_ADDRESS, "
                    "else start a local instance)")
    a = ap.parse_args(argv)
    if a.all == (a.paper is not None):
        ap.error("name one paper, or give --all")
    where = {"jobs": a.jobs, "backend": a.backend, "address": a.address}
    t0 = time.monotonic()
    if a.all:
        page = reproduce_all(a.quick, Path(a.output) if a.output else None, a.trace, **where)
        if not a.output:
            sys.stdout.write(page)
        print(f"vmlab reproduce --all: {time.monotonic() - t0:.0f} s", file=sys.stderr)
        return 0
    text = reproduce(a.paper, quick=a.quick, traces=a.trace, **where)
    if a.output:
        write_text(a.output, text)
    else:
        sys.stdout.write(text)
    print(f"vmlab reproduce {a.paper}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0
