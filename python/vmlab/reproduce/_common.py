"""What every paper's reproduction shares: batched one-pass runs, traced programs, and
the headline results each page states next to the paper's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Iterator

from .. import _core
from ..sweep import Executor

# Small real programs, traced with valgrind (lackey) on first use and cached. `quick`
# uses the first two (about a second each to trace).
PROGRAMS: dict[str, list[str]] = {
    "sort": ["sort", "/etc/services"],
    "ls": ["ls", "-l", "/usr/lib"],
    "gzip": ["gzip", "-c", "/usr/share/common-licenses/GPL-3"],
}


def cache_dir() -> Path:
    d = Path(os.environ.get("VMLAB_CACHE", Path.home() / ".cache" / "vmlab")) / "traces"
    d.mkdir(parents=True, exist_ok=True)
    return d


def program_traces(quick: bool, notes: list[str]) -> list[tuple[str, str]]:
    """(label, .vmt path) of the traced programs, tracing the ones not cached yet. Without
    valgrind, or for a program missing here, a note says what was skipped."""
    names = list(PROGRAMS)[:2] if quick else list(PROGRAMS)
    if not shutil.which("valgrind"):
        notes.append("valgrind is not installed: the traced real programs were skipped (run `make setup`).")
        return []
    out = []
    for name in names:
        cmd = PROGRAMS[name]
        if any(a.startswith("/") and not Path(a).exists() for a in cmd[1:]):
            notes.append(f"`{' '.join(cmd)}`: input missing on this machine, skipped.")
            continue
        path = cache_dir() / f"{name}.vmt"
        if _traced(cmd, path, notes):
            out.append((f"`{' '.join(cmd)}` (traced)", str(path)))
    return out


# Longer programs romer-cache.md traces (not with --quick): a command run in the trace
# cache directory, and the shell command that makes its input there first.
LONG_PROGRAMS: dict[str, tuple[list[str], str]] = {
    # gzip of Debian 12's /usr/bin/localedef (298,912 bytes): 93 M records.
    "gzip.vmt": (["gzip", "-c", "blob"], "cp /usr/bin/localedef blob"),
    # sort -n of 30,000 numbers shuffled with a fixed random source: 147 M records.
    "sort.vmt": (["sort", "-n", "nums.txt"], "seq 1 30000 | shuf --random-source=<(yes) > nums.txt"),
}


def long_program_traces(quick: bool, notes: list[str]) -> list[tuple[str, str]]:
    """(label, .vmt path) of :data:`LONG_PROGRAMS`, traced on first use (a few minutes
    under lackey) and cached; none with ``quick``."""
    if quick:
        return []
    if not shutil.which("valgrind"):
        notes.append("valgrind is not installed: the long traced programs were skipped (run `make setup`).")
        return []
    out = []
    for name, (cmd, prepare) in LONG_PROGRAMS.items():
        path = cache_dir() / f"long-{name}"
        if _prepared(cmd, prepare, path, notes):
            out.append((f"`{name}`", str(path)))
    return out


def _prepared(cmd: list[str], prepare: str, path: Path, notes: list[str], engine: str = "lackey") -> bool:
    """Whether `path` holds the trace of `cmd` run in the trace cache directory, tracing it
    now (after the shell command `prepare` has made its input there) if it is not cached."""
    if not path.exists():
        p = subprocess.run(["bash", "-c", prepare], cwd=cache_dir(), stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            notes.append(f"`{prepare}` failed, `{' '.join(cmd)}` skipped: {p.stderr.strip().splitlines()[-1:]}")
            return False
    return _traced(cmd, path, notes, cwd=cache_dir(), engine=engine)


# Programs of the kind in Elphinstone's conventional applications, at the sizes of his
# Table 4.1 (docs/reproductions/elphinstone.md): C sources in bench/programs/, built
# with `cc -O2` into the trace cache and traced on first use (not with `quick`).
# name -> (source, arguments, engine). lackey where a trace takes about 2 minutes or
# less; heapsort's n log n steps (216 M records, over 3 minutes under lackey) go to qemu.
COMPILED_PROGRAMS: dict[str, tuple[str, list[str], str]] = {
    "heapsort": ("heapsort.c", [], "qemu"),     # 440,000 doubles: 1,015 pages, 216 M records
    "nsieve": ("nsieve.c", [], "lackey"),       # 4.5 M flag bytes: 1,249 pages, 82 M records
    "mm": ("mm.c", ["560", "16"], "lackey"),    # three 560 x 560 matrices, 16 rows of C: 2,003 pages, 58 M records
    "swim": ("swim.c", [], "lackey"),           # thirteen 370 x 370 arrays, 2 steps: 3,692 pages, 109 M records
}


# A real program that maps tens of thousands of pages, for the pages whose designs
# matter at scale (nested-ecpt.md, tps.md): bench/programs/gups.c, random updates of a
# 256 MiB table (65,698 pages touched with its code and libraries), 4 M of them, traced
# with qemu (not with --quick).
LARGE_PROGRAM = ("gups", "gups.c", ["28", "4000000"], "qemu")


def large_program_traces(quick: bool, notes: list[str]) -> list[tuple[str, str]]:
    """(label, .vmt path) of :data:`LARGE_PROGRAM`, built and traced on first use and
    cached (:func:`_compiled`); none with ``quick``."""
    if quick:
        return []
    name, source, args, engine = LARGE_PROGRAM
    path = _compiled(name, source, args, engine, notes)
    return [(f"`{' '.join([name, *args])}` ({engine})", str(path))] if path else []


def compiled_program_traces(quick: bool, notes: list[str]) -> list[tuple[str, str]]:
    """(label, .vmt path) of :data:`COMPILED_PROGRAMS`, built and traced on first use
    (about 5 minutes in all) and cached (:func:`_compiled`); none with ``quick``."""
    if quick:
        return []
    out = []
    for name, (source, args, engine) in COMPILED_PROGRAMS.items():
        if path := _compiled(name, source, args, engine, notes):
            out.append((f"`{' '.join([name, *args])}` ({engine})", str(path)))
    return out


def _compiled(name: str, source: str, args: list[str], engine: str, notes: list[str]) -> Path | None:
    """The trace of bench/programs/`source` built with `cc -O2` and run with `args` under
    `engine`, built and traced if it is not cached under its name, which hashes the
    source, the arguments and the engine. Without a C compiler, the sources (a
    repository checkout's bench/programs/) or the engine: None, and a note says what was
    skipped."""
    src_dir = Path(__file__).resolve().parents[3] / "bench" / "programs"
    cc = shutil.which("cc")
    if not cc or not src_dir.is_dir():
        note = ("the compiled programs (bench/programs/) were skipped: " +
                ("no C compiler (`cc`; run `make setup`)." if not cc else f"{src_dir} is missing (run from a repository checkout)."))
        if note not in notes:
            notes.append(note)
        return None
    if _no_engine(name, engine, notes):
        return None
    text = (src_dir / source).read_bytes()
    key = hashlib.sha256(text + "\0".join(["", *args, engine]).encode()).hexdigest()[:12]
    path = cache_dir() / f"prog-{name}-{key}.vmt"
    if not path.exists():
        binary = cache_dir() / f"prog-{name}-{key}"
        p = subprocess.run([cc, "-O2", "-o", str(binary), str(src_dir / source), "-lm"], stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            notes.append(f"building `{source}` failed, `{name}` skipped: {p.stderr.strip().splitlines()[-1:]}")
            return None
        ok = _traced([str(binary), *args], path, notes, engine=engine)
        binary.unlink(missing_ok=True)
        if not ok:
            return None
    return path


def _no_engine(name: str, engine: str, notes: list[str]) -> bool:
    """Whether `engine` cannot run here (a note then says `name` was skipped)."""
    need = "valgrind" if engine == "lackey" else "qemu-x86_64"
    if shutil.which(need):
        return False
    notes.append(f"`{name}` skipped: its engine, {engine}, needs `{need}` (run `make setup`).")
    return True


# Real programs at the papers' scale, for romer.md and itanium.md (not with `quick`):
# each touches tens of thousands of 4 KiB pages, far beyond the TLBs' reach, and runs
# 0.3 G references (25 to 30 of THROTTLE's 10 M-instruction windows). Traced with qemu
# (10 to 20 s each; lackey would take minutes) on first use and cached. name ->
# (command, how it is made): a shell command that makes the command's input in the
# trace cache directory (where the command runs), or the bench/programs/ source the
# command's program is built from (as COMPILED_PROGRAMS are).
SCALE_PROGRAMS: dict[str, tuple[list[str], str]] = {
    # xz -9 (a 64 MiB dictionary: its match finder hashes every position into a 64 MiB
    # table) of the first 200,000 bytes of Debian 12's /usr/bin/localedef:
    # 16,322 pages, 334 M records.
    "xz": (["xz", "-9", "-c", "xz-input"], "head -c 200000 /usr/bin/localedef > xz-input"),
    # 20 M random read-modify-write updates of a 128 MiB table: 32,931 pages, 320 M records.
    "gups": (["gups", "27", "20000000"], "gups.c"),
    # Three 2048 x 2048 matrices of doubles (32 MiB each), 4 rows of C: B is walked down
    # its columns, a new page every step: 24,753 pages, 319 M records.
    "mm": (["mm", "2048", "4"], "mm.c"),
}


def scale_program_traces(quick: bool, notes: list[str]) -> list[tuple[str, str]]:
    """(label, .vmt path) of :data:`SCALE_PROGRAMS`, made and traced with qemu on first
    use (about a minute in all) and cached under a name that hashes how each is made;
    none with ``quick``. A program that cannot be made or traced here is skipped with a
    note."""
    if quick:
        return []
    out = []
    for name, (cmd, how) in SCALE_PROGRAMS.items():
        if how.endswith(".c"):
            path = _compiled(cmd[0], how, cmd[1:], "qemu", notes)
        elif _no_engine(name, "qemu", notes):
            path = None
        else:
            key = hashlib.sha256("\0".join([how, *cmd]).encode()).hexdigest()[:12]
            path = cache_dir() / f"scale-{name}-{key}.vmt"
            path = path if _prepared(cmd, how, path, notes, engine="qemu") else None
        if path:
            out.append((f"`{' '.join(cmd)}` (qemu)", str(path)))
    return out


def _traced(cmd: list[str], path: Path, notes: list[str], cwd: Path | None = None, engine: str = "lackey") -> bool:
    """Whether `path` holds the trace of `cmd`, tracing it now if it is not cached."""
    if path.exists():
        return True
    tmp = path.with_suffix(".tmp.vmt")
    # lackey, the engine the reproduction pages name (docs/importers.md compares the two
    # engines' traces), unless the caller names qemu.
    p = subprocess.run([sys.executable, "-m", "vmlab.cli", "trace", "--engine", engine, "-o", str(tmp), "--", *cmd],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    if p.returncode != 0:
        notes.append(f"tracing `{' '.join(cmd)}` failed: {p.stderr.strip().splitlines()[-1:]}")
        return False
    tmp.replace(path)  # only a complete trace gets the cached name
    return True


# How often Batch.run says which inputs it is still waiting for, when no task has ended.
PROGRESS_EVERY = 30.0
# The executor Batch.run and timed() use when given none: the one `executing` set up, else
# a local process pool on every core.
_executor: Executor | None = None


@contextlib.contextmanager
def executing(backend: str = "local", jobs: int | None = None, address: str | None = None) -> Iterator[Executor]:
    """Within the block, every :class:`Batch` and :func:`timed` runs on one
    :class:`vmlab.sweep.Executor` (the one `vmlab sweep` runs on; the arguments as
    there): local worker processes, or Ray tasks, Ray joined once for them all."""
    global _executor
    ex = Executor(backend, jobs, address)
    with ex:
        previous, _executor = _executor, ex
        try:
            yield ex
        finally:
            _executor = previous


def _sweep_source(src: dict) -> dict:
    """A Batch source ({"trace": path} or {"workload": name, **params}) as a sweep run's."""
    if "trace" in src:
        return {"trace": str(src["trace"])}
    return {"workload": src["workload"], "params": {k: str(v) for k, v in src.items() if k != "workload"}}


def override_list(o: list[str] | dict | None) -> list[str]:
    """Overrides as ``key=value`` strings, from a dict or a list (or none)."""
    return [f"{k}={v}" for k, v in o.items()] if isinstance(o, dict) else list(o or [])


class Batch:
    """Runs declared first, then simulated together on the sweep executor
    (:func:`executing`): the runs that read one input share one pass over it, and
    inputs run side by side, on every local core or as Ray tasks."""

    def __init__(self) -> None:
        self._runs: dict[Hashable, tuple[str, list[str], dict]] = {}
        self.results: dict[Hashable, dict] = {}

    def add(self, key: Hashable, config: str, overrides: list[str] | dict, source: dict) -> None:
        """``source``: {"trace": path} or {"workload": name, **params}."""
        self._runs[key] = (config, override_list(overrides), dict(source))

    def run(self, executor: Executor | None = None) -> dict[Hashable, dict]:
        """Simulate the runs added since the last call (on ``executor``, else the one
        :func:`executing` set up, else a local pool); raises VmlabError naming the
        first run that fails. Progress on stderr: a line as each one-pass task ends,
        with its input and the runs done, and every :data:`PROGRESS_EVERY` seconds
        without one, the inputs still running."""
        ex = executor or _executor or Executor()
        keys = list(self._runs)
        runs, inputs = [], {}
        for i, k in enumerate(keys):
            config, overrides, src = self._runs[k]
            source = _sweep_source(src)
            inputs.setdefault(json.dumps(source, sort_keys=True), []).append(i)
            runs.append({"key": str(i), "config": config, "overrides": overrides, "source": source})
        if not runs:
            return self.results
        which = {i: n for n, members in enumerate(inputs.values()) for i in members}
        sizes = [len(members) for members in inputs.values()]

        def name(source: dict) -> str:
            if "trace" in source:
                return Path(source["trace"]).name
            return " ".join([source["workload"], *(f"{k}={v}" for k, v in source["params"].items())])

        log = lambda msg: print(f"vmlab reproduce: {msg}", file=sys.stderr, flush=True)
        log(f"{len(runs)} runs over {len(inputs)} input{'s' if len(inputs) != 1 else ''} ({ex.describe()})")
        t0, done, per_input = time.monotonic(), 0, [0] * len(inputs)
        with contextlib.closing(ex.run(runs, tick=PROGRESS_EVERY)) as finished:
            for task, results in finished:
                if task is None:
                    left = ", ".join(f"{n + 1}/{len(inputs)} ({sizes[n] - per_input[n]} of {sizes[n]} runs)"
                                     for n in range(len(inputs)) if per_input[n] < sizes[n])
                    log(f"[{done}/{len(runs)} runs, {time.monotonic() - t0:.0f} s] still running: input {left}")
                    continue
                for key, status, stats, error, _ in results:
                    if status != "ok":
                        raise _core.VmlabError(f"run {keys[int(key)]!r}: {error.removeprefix('VmlabError: ')}")
                    self.results[keys[int(key)]] = stats
                n = which[int(task[0]["key"])]
                done += len(results)
                per_input[n] += len(results)
                log(f"[{done}/{len(runs)} runs, {time.monotonic() - t0:.0f} s] input {n + 1}/{len(inputs)}: "
                    f"{name(task[0]['source'])}: {per_input[n]}/{sizes[n]} runs done")
        self._runs.clear()
        return self.results

    def __getitem__(self, key: Hashable) -> dict:
        return self.results[key]


def md_table(header: list[str], rows: list[list[Any]], title: str | None = None) -> str:
    out = [f"**{title}**", ""] if title else []
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


# What `vmlab.compare` sets before every design's overrides: the time model on.
TIME_MODEL = list(_core.COMPARE_OVERRIDES)
# Sampled timing (docs/config.md `[time.sampling]`) for the long runs: 1,000 references
# measured in every 100,000; a row gives its CPI's 95% interval.
SAMPLED = {"time.sampling.period": 100000}


def compare_row(label: str, doc: dict, baseline_label: str, baseline: dict) -> dict:
    """A stats document as its `vmlab.compare` row beside ``baseline``'s, by compare's
    own code (`_core.compare_row`): the same columns and values, NaN where the document
    has no such number."""
    row = json.loads(_core.compare_row(label, json.dumps(doc), baseline_label, json.dumps(baseline)))
    del row["design"]  # compare's index
    return {k: math.nan if v is None else v for k, v in row.items()}


def timed(config: str, designs: dict[str, list[str] | dict], source: dict, overrides: list[str] | dict | None = None,
          executor: Executor | None = None) -> dict[str, dict]:
    """Run ``designs`` (label -> overrides) on ``source`` under the time model, as
    `vmlab.compare` does (`memory.data_refs = true` and `time.model = "ooo"`, then
    ``overrides``, then the design's), in one :class:`Batch`: label -> the design's
    compare row (cycles, ipc, cpi_data, cpi_translation, walker_occupancy, mlp, ...,
    speedup over the first design; docs/metrics.md, `time`)."""

    b = Batch()
    for label, o in designs.items():
        b.add(label, config, TIME_MODEL + override_list(overrides) + override_list(o), source)
    docs = b.run(executor)
    first = next(iter(designs))
    return {label: compare_row(label, docs[label], first, docs[first]) for label in designs}


def add_pt_designs(b: Batch, key: Hashable, designs: list[str], source: dict, config: str = "skylake",
                   overrides: list[str] | dict | None = None) -> None:
    """Declare `vmlab.pt_compare`'s runs on ``b``: each design (a name or
    ``"label:key=value;..."``) on ``source``, ``overrides`` then the design's, under the
    key ``(key, label)``. :func:`pt_frame` gives their table once ``b`` has run."""
    for d in designs:
        label, o = _core.pt_design(d)
        b.add((key, label), config, override_list(overrides) + o, source)


def pt_frame(b: Batch, key: Hashable, designs: list[str]):
    """The `vmlab.pt_compare` table (a DataFrame indexed by design) of the runs
    :func:`add_pt_designs` declared under ``key``, by pt compare's own code
    (`_core.pt_compare_row`): the same columns and values, the speed columns NaN (the
    runs were not timed one by one)."""
    import pandas as pd

    rows = []
    for d in designs:
        label = _core.pt_design(d)[0]
        row = json.loads(_core.pt_compare_row(label, json.dumps(b[(key, label)])))
        rows.append({k: math.nan if v is None else v for k, v in row.items()})
    return pd.DataFrame(rows).set_index("design")


# Verdicts of a headline result, strongest first.
VERDICTS = ("match", "same shape", "differs", "not built")


@dataclass
class Headline:
    """One headline result of a paper beside ours (docs/reproductions/README.md)."""

    result: str   # the claim, in a phrase
    where: str    # where the paper states it (figure, table, section)
    paper: str    # the paper's number, as it states it
    ours: str     # ours, in the same terms
    verdict: str  # one of VERDICTS
    why: str = ""  # one line: what differs, and where the page measures it


_headlines: list[Headline] = []


def headline(result: str, where: str, paper: str, ours: str, verdict: str, why: str = "") -> None:
    """Record a headline row; `vmlab reproduce --all` collects them into the summary page.
    A verdict other than "match" needs its reason."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    if verdict != "match" and not why:
        raise ValueError(f"{result}: a {verdict!r} verdict needs its reason")
    _headlines.append(Headline(result, where, paper, ours, verdict, why if verdict != "match" else ""))


def take_headlines() -> list[Headline]:
    """The rows recorded since the last call."""
    out = list(_headlines)
    _headlines.clear()
    return out


def judge(paper: float, ours: float, neutral: float, tol: float = 0.1, same_regime: bool = True) -> str:
    """The verdict on a number: "match" within ``tol`` (relative) of the paper's, under
    the paper's parameters (``same_regime``; a run in another regime can at best have
    the same shape); "same shape" on the same side of ``neutral`` as the paper's (a
    speed-up above 1, a reduction above 0); "differs" otherwise."""
    if same_regime and abs(ours - paper) <= tol * abs(paper):
        return "match"
    return "same shape" if (ours - neutral) * (paper - neutral) > 0 else "differs"


def weakest(verdicts: list[str]) -> str:
    """The weakest of several inputs' verdicts: a result holds only as well as its worst input."""
    return max(verdicts, key=VERDICTS.index)


def order_verdict(paper: list[str], ours: list[str], close: bool) -> str:
    """A ranking: "match" if ours is the paper's order and the numbers are ``close``,
    "same shape" if the order alone agrees, "differs" if any two trade places."""
    if ours != paper:
        return "differs"
    return "match" if close else "same shape"


def span(xs: list[float], fmt: str = "{:.0f}", sep: str = "–") -> str:
    """The range of ``xs`` as shown (each end formatted by ``fmt``): one number when
    both ends show the same."""
    lo, hi = fmt.format(min(xs)), fmt.format(max(xs))
    return lo if lo == hi else f"{lo}{sep}{hi}"


def count_verdict(held: int, total: int) -> str:
    """A pattern the paper reports for every program, checked on ``total`` inputs."""
    return "match" if held == total else "same shape" if 2 * held > total else "differs"


def pattern_headline(result: str, where: str, paper: str, names: list[str], holds, shown, why: str) -> None:
    """A headline for a pattern the paper reports for every program, checked on each of
    ``names``: ``holds(name)`` says whether it holds there, ``shown(name)`` our number;
    ``why`` follows the names it does not hold on."""
    held = [n for n in names if holds(n)]
    missed = [n for n in names if n not in held]
    headline(result, where, paper, f"{len(held)} of {len(names)} workloads: " + ", ".join(f"{n} {shown(n)}" for n in names),
             count_verdict(len(held), len(names)), f"not on {', '.join(missed)}: {why}" if missed else "")
