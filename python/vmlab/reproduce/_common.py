"""What every paper's reproduction shares: batched one-pass runs and traced programs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Hashable

from .. import _core
from ..api import run_many

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
        if not path.exists():
            tmp = path.with_suffix(".tmp.vmt")
            p = subprocess.run([sys.executable, "-m", "vmlab.cli", "trace", "-o", str(tmp), "--", *cmd],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                notes.append(f"tracing `{' '.join(cmd)}` failed: {p.stderr.strip().splitlines()[-1:]}")
                continue
            tmp.replace(path)  # only a complete trace gets the cached name
        out.append((f"`{' '.join(cmd)}` (traced)", str(path)))
    return out


class Batch:
    """Runs declared first, then simulated together: the runs that read one input share
    one pass over it (`vmlab.run_many`), on every core."""

    def __init__(self) -> None:
        self._runs: dict[Hashable, tuple[str, list[str], dict]] = {}
        self.results: dict[Hashable, dict] = {}

    def add(self, key: Hashable, config: str, overrides: list[str] | dict, source: dict) -> None:
        """``source``: {"trace": path} or {"workload": name, **params}."""
        if isinstance(overrides, dict):
            overrides = [f"{k}={v}" for k, v in overrides.items()]
        self._runs[key] = (config, list(overrides), dict(source))

    def run(self, threads: int | None = None) -> dict[Hashable, dict]:
        threads = threads or os.cpu_count() or 1
        groups: dict[str, list[Hashable]] = {}
        for key, (_, _, src) in self._runs.items():
            groups.setdefault(json.dumps(src, sort_keys=True), []).append(key)
        for src_text, keys in groups.items():
            src = json.loads(src_text)
            kw: dict[str, Any] = {"trace": src["trace"]} if "trace" in src else {
                "workload": src["workload"], **{k: v for k, v in src.items() if k != "workload"}}
            results = run_many([self._runs[k][:2] for k in keys], threads=threads, **kw)
            for k, r in zip(keys, results):
                if isinstance(r, _core.VmlabError):
                    raise _core.VmlabError(f"run {k!r}: {r}")
                self.results[k] = r.to_dict()
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


def timed(config: str, designs: dict[str, list[str] | dict], source: dict, overrides: list[str] | dict | None = None,
          threads: int | None = None) -> dict[str, dict]:
    """Run ``designs`` (label -> overrides) on ``source`` under the time model with
    `vmlab.compare` (one pass over the input; `time.model = "ooo"` and
    `memory.data_refs = true`): label -> the design's row (cycles, ipc, cpi_data,
    cpi_translation, walker_occupancy, mlp, ...; docs/metrics.md, `time`)."""
    from ..api import compare

    def items(o: list[str] | dict | None) -> list[str]:
        return [f"{k}={v}" for k, v in o.items()] if isinstance(o, dict) else list(o or [])

    specs = []
    for label, o in designs.items():
        if ":" in label or ";" in label or not o:
            raise ValueError(f"design {label!r}: a label without ':' or ';', and at least one override")
        specs.append(f"{label}:" + ";".join(items(o)))
    kw: dict[str, Any] = {"trace": source["trace"]} if "trace" in source else {
        "workload": source["workload"], **{k: v for k, v in source.items() if k != "workload"}}
    df = compare(specs, config=config, overrides=items(overrides), threads=threads or os.cpu_count() or 1, **kw)
    return {label: df.loc[label].to_dict() for label in designs}

