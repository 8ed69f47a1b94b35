"""``vmlab sweep SPEC.toml``: run every (design x swept keys x input x seed) combination
of a spec into a results store, skipping runs the store already holds.

The spec format is documented in docs/sweeps.md. Runs execute in worker processes
(every core by default) or as Ray tasks; only this process writes the store, one transaction per
finished run, so a killed sweep loses at most the runs in flight and a re-run resumes.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import itertools
import json
import os
import signal
import socket
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import _core
from ._signals import sigterm_as_interrupt
from .store import Heartbeat, Store, new_owner

_TOP_KEYS = {"sweep", "config", "axes", "workload", "trace"}
_SWEEP_KEYS = {"name", "store", "seeds", "combine", "jobs", "one_pass"}
# Most runs one one-pass task carries: bounds what a crash loses.
_MAX_ONE_PASS = 16
_CONFIG_KEYS = {"name", "preset", "file", "set"}
_WORKLOAD_KEYS = {"name", "params"}
_TRACE_KEYS = {"path"}


class SpecError(_core.VmlabError):
    """A malformed sweep spec; the message names the file and the key."""


class SweepError(_core.VmlabError):
    """A sweep that cannot run: an unknown backend, an unreachable Ray cluster."""


@dataclass
class Spec:
    name: str
    path: Path
    store: Path
    seeds: list[int]
    combine: str
    jobs: int
    configs: list[dict]
    axes: dict[str, list]
    inputs: list[dict]
    one_pass: bool = True
    runs: list[dict] = field(default_factory=list)


def _err(path: Path, key: str, msg: str) -> SpecError:
    return SpecError(f"{path}: key `{key}`: {msg}")


def _check_keys(path: Path, where: str, table: Any, allowed: set[str]) -> dict:
    if not isinstance(table, dict):
        raise _err(path, where, "must be a table")
    for k in table:
        if k not in allowed:
            raise _err(path, f"{where}.{k}" if where else k, f"unknown key (known: {', '.join(sorted(allowed))})")
    return table


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "[" + ", ".join(json.dumps(x) if isinstance(x, str) else str(x) for x in v) + "]"
    return str(v)


def _source_hash(src: dict, seed: int) -> str:
    """Content identity of a run's input: a trace's bytes, or a workload's name,
    parameters and seed."""
    h = hashlib.sha256()
    if "trace" in src:
        try:
            with open(src["trace"], "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError as e:
            # A missing trace still gets a key; the run itself will report the error.
            h.update(f"unreadable:{src['trace']}:{e.strerror}".encode())
    else:
        h.update(json.dumps({"workload": src["workload"], "params": src["params"], "seed": seed}, sort_keys=True).encode())
    return h.hexdigest()


def load_spec(path: str | os.PathLike) -> Spec:
    """Parse and expand a sweep spec; every run gets its key."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such sweep spec") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    _check_keys(path, "", doc, _TOP_KEYS)
    sw = _check_keys(path, "sweep", doc.get("sweep", {}), _SWEEP_KEYS)
    name = str(sw.get("name", path.stem))
    seeds = sw.get("seeds", [1])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise _err(path, "sweep.seeds", "must be a non-empty list of integers")
    combine = sw.get("combine", "product")
    if combine not in ("product", "zip"):
        raise _err(path, "sweep.combine", "must be \"product\" or \"zip\"")
    jobs = sw.get("jobs", 0)
    if not isinstance(jobs, int) or jobs < 0:
        raise _err(path, "sweep.jobs", "must be a non-negative integer (0 = every core)")
    one_pass = sw.get("one_pass", True)
    if not isinstance(one_pass, bool):
        raise _err(path, "sweep.one_pass", "must be true or false")
    store = Path(sw.get("store", path.with_suffix(".sqlite").name))
    if not store.is_absolute():
        store = path.parent / store

    configs = doc.get("config", [{"name": "skylake", "preset": "skylake"}])
    if not isinstance(configs, list) or not configs:
        raise _err(path, "config", "must be a non-empty array of tables ([[config]])")
    for i, c in enumerate(configs):
        _check_keys(path, f"config[{i}]", c, _CONFIG_KEYS)
        if ("preset" in c) == ("file" in c):
            raise _err(path, f"config[{i}]", "give exactly one of `preset` or `file`")
        if not isinstance(c.get("set", {}), dict):
            raise _err(path, f"config[{i}].set", "must be a table of config keys")

    axes = doc.get("axes", {})
    if not isinstance(axes, dict):
        raise _err(path, "axes", "must be a table of key = [values]")
    for k, v in axes.items():
        if not isinstance(v, list) or not v:
            raise _err(path, f"axes.{k}", "must be a non-empty list of values")
    if combine == "zip" and len({len(v) for v in axes.values()}) > 1:
        raise _err(path, "axes", "with combine = \"zip\" every axis needs the same number of values")

    inputs: list[dict] = []
    for i, w in enumerate(doc.get("workload", [])):
        _check_keys(path, f"workload[{i}]", w, _WORKLOAD_KEYS)
        if "name" not in w:
            raise _err(path, f"workload[{i}].name", "missing")
        params = w.get("params", {})
        if not isinstance(params, dict):
            raise _err(path, f"workload[{i}].params", "must be a table")
        inputs.append({"workload": str(w["name"]), "params": {k: str(v) for k, v in params.items()}})
    for i, t in enumerate(doc.get("trace", [])):
        _check_keys(path, f"trace[{i}]", t, _TRACE_KEYS)
        if "path" not in t:
            raise _err(path, f"trace[{i}].path", "missing")
        p = Path(t["path"])
        inputs.append({"trace": str(p if p.is_absolute() else path.parent / p)})
    if not inputs:
        raise _err(path, "workload", "the spec names no input: add [[workload]] or [[trace]] entries")

    spec = Spec(name, path, store, seeds, combine, jobs, configs, axes, inputs, one_pass)
    spec.runs = _expand(spec)
    return spec


def _expand(spec: Spec) -> list[dict]:
    keys = list(spec.axes)
    values = list(spec.axes.values())
    combos = list(zip(*values)) if spec.combine == "zip" else list(itertools.product(*values))
    if not keys:
        combos = [()]
    version = _core.version()
    runs = []
    for c in spec.configs:
        config = c.get("preset") or str(Path(c["file"]) if Path(c["file"]).is_absolute() else spec.path.parent / c["file"])
        base = [f"{k}={_toml_value(v)}" for k, v in c.get("set", {}).items()]
        for combo in combos:
            axes = dict(zip(keys, combo))
            for src in spec.inputs:
                for seed in spec.seeds:
                    overrides = base + [f"{k}={_toml_value(v)}" for k, v in axes.items()] + [f"mmu.seed={seed}"]
                    try:
                        resolved, cfg_hash = _core.resolve_config(config, overrides)
                    except _core.VmlabError as e:
                        raise SpecError(f"{spec.path}: config `{c.get('name', config)}`{' ' + json.dumps(axes) if axes else ''}: {e}") from None
                    # A workload's own seed follows the sweep's seed too.
                    source = {**src, "params": {**src["params"], "seed": str(seed)}} if "workload" in src else src
                    key = hashlib.sha256(f"{cfg_hash}|{_source_hash(source, seed)}|{version}".encode()).hexdigest()[:32]
                    runs.append({"key": key, "sweep": spec.name, "design": str(c.get("name", config)), "config": config,
                                 "overrides": overrides, "axes": axes, "source": source, "seed": seed})
    seen: set[str] = set()
    unique = []
    for r in runs:
        if r["key"] not in seen:  # identical runs (e.g. an axis equal to the base) run once
            seen.add(r["key"])
            unique.append(r)
    return unique


def _one_pass_tasks(todo: list[dict], workers: int, one_pass: bool) -> list[list[dict]]:
    """Group runs that read the same input into one-pass tasks (the input is decoded
    once for the whole group; runs differ only in config). Groups are cut to keep every
    worker busy and to bound what a crash loses (the runs of the tasks in flight)."""
    if not one_pass:
        return [[r] for r in todo]
    by_source: dict[str, list[dict]] = {}
    for r in todo:
        by_source.setdefault(json.dumps(r["source"], sort_keys=True), []).append(r)
    size = max(1, min(_MAX_ONE_PASS, -(-len(todo) // max(1, workers))))
    return [g[i:i + size] for g in by_source.values() for i in range(0, len(g), size)]


def _execute(runs: list[dict], trace_bytes: bytes | None = None) -> list[tuple[str, str, dict | None, str | None, float]]:
    """One task, in a worker (process or Ray task): runs that share one input, simulated
    in one pass. Returns (key, status, stats, error, seconds) per run; a run's seconds
    are the pass's wall time divided among its runs.

    ``trace_bytes``: the trace's content, for a worker that cannot see the driver's
    files; it is written to a private temporary file and simulated from there."""
    import tempfile

    from .api import run_many

    t0 = time.perf_counter()
    src = runs[0]["source"]
    configs = [(r["config"], r["overrides"]) for r in runs]
    try:
        if "trace" in src and trace_bytes is not None:
            with tempfile.TemporaryDirectory(prefix="vmlab-run-") as d:
                local = Path(d) / Path(src["trace"]).name
                local.write_bytes(trace_bytes)
                results = run_many(configs, trace=local)
            for res in results:
                # Name the driver's file, not the temporary copy: the same document a run by path gives.
                if not isinstance(res, Exception):
                    res.to_dict()["source"]["name"] = src["trace"]
        elif "trace" in src:
            results = run_many(configs, trace=src["trace"])
        else:
            results = run_many(configs, workload=src["workload"], **src["params"])
    except Exception as e:  # noqa: BLE001 - the input failed: every run of the task fails, the sweep goes on
        results = [e] * len(runs)
    secs = (time.perf_counter() - t0) / len(runs)
    return [(r["key"], "error", None, f"{type(res).__name__}: {res}", secs) if isinstance(res, Exception)
            else (r["key"], "ok", res.to_dict(), None, secs) for r, res in zip(runs, results)]


def _one_core() -> None:
    """Keep each worker's simulation on one core: the workers already fill the machine,
    so a second thread per simulation (the memory model's) would only compete. Results
    are the same either way. A user's explicit VMLAB_MEMORY_THREAD wins."""
    os.environ.setdefault("VMLAB_MEMORY_THREAD", "off")


def _ray_execute(runs: list[dict], trace_bytes: bytes | None, driver_version: str):
    """The Ray task body: refuse to simulate with a different engine than the driver's,
    since the run key (computed by the driver) names the driver's version."""
    _one_core()
    worker_version = _core.version()
    if worker_version != driver_version:
        return [(r["key"], "error", None, f"worker has vmlab {worker_version}, the driver {driver_version}", 0.0) for r in runs]
    return _execute(runs, trace_bytes)


def _worker_init(one_core: bool) -> None:
    """A local worker leaves Ctrl-C to the sweep (the terminal sends it to the whole
    process group): the sweep stops the workers itself, so none prints a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if one_core:
        _one_core()


def _stop_workers(pool: cf.ProcessPoolExecutor) -> None:
    """End a pool's workers now, their runs unfinished (nothing of them is recorded)."""
    pool.shutdown(wait=False, cancel_futures=True)
    if hasattr(pool, "terminate_workers"):  # Python 3.14
        pool.terminate_workers()
        return
    for p in list((getattr(pool, "_processes", None) or {}).values()):
        p.terminate()


def _local_results(tasks: list[list[dict]], workers: int) -> Iterator[tuple]:
    """Run in a local process pool; yield results as their tasks finish."""
    n = min(workers, len(tasks))
    with cf.ProcessPoolExecutor(max_workers=n, initializer=_worker_init, initargs=(n > 1,)) as pool:
        try:
            futures = [pool.submit(_execute, t) for t in tasks]
            for fut in cf.as_completed(futures):
                yield from fut.result()
        except BaseException:  # an interrupt, or the consumer stopping early
            _stop_workers(pool)
            raise


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on an address nothing listens at: ray.init would retry for a minute."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: ray.init resolves and reports those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise SweepError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}") from None


def _ray_results(tasks: list[list[dict]], workers: int, address: str | None) -> Iterator[tuple]:
    """Run as Ray tasks; yield results as they finish (ray.wait).

    Without ``address`` a local Ray instance is started (or the one this process already
    joined is used): its workers share this machine's files, so traces are read by path.
    With an address, workers may be on other machines, so each trace's bytes are put in
    the object store once and handed to every task that simulates it."""
    try:
        import ray
    except ImportError:
        raise SweepError("the Ray backend needs the `ray` package (pip install ray)") from None
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        except Exception as e:  # noqa: BLE001 - one line for the CLI, whatever Ray raised
            where = f" at {address}" if address else " (local instance)"
            raise SweepError(f"cannot start or join Ray{where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        started = True
    try:
        task = ray.remote(num_cpus=1)(_ray_execute)
        version = _core.version()
        shipped: dict[str, Any] = {}  # trace path -> object ref, or the error reading it
        refs = []
        for t in tasks:
            data = None
            if address and "trace" in t[0]["source"]:
                path = t[0]["source"]["trace"]
                if path not in shipped:
                    try:
                        shipped[path] = ray.put(Path(path).read_bytes())
                    except OSError as e:
                        shipped[path] = f"{type(e).__name__}: cannot read trace {path}: {e.strerror}"
                data = shipped[path]
                if isinstance(data, str):
                    # Not sent on: a worker elsewhere might find another file at that path.
                    yield from ((r["key"], "error", None, data, 0.0) for r in t)
                    continue
            refs.append(task.remote(t, data, version))
        pending = refs
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    yield from ray.get(ref)
        except BaseException:
            for ref in pending:  # an interrupt: nothing more of this sweep runs anywhere
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()


class _Progress:
    """`[done/total] ETA` on stderr: a live line on a terminal, a line per 10% otherwise."""

    def __init__(self, total: int):
        self.total, self.done, self.t0, self.tty = total, 0, time.monotonic(), sys.stderr.isatty()
        self.last_decile = -1

    def tick(self, failed: int) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        msg = f"vmlab sweep: [{self.done}/{self.total}] {elapsed:.0f}s elapsed, ETA {eta:.0f}s" + (f", {failed} failed" if failed else "")
        if self.tty:
            print("\r" + msg, end="" if self.done < self.total else "\n", file=sys.stderr, flush=True)
        elif self.done * 10 // self.total != self.last_decile:
            self.last_decile = self.done * 10 // self.total
            print(msg, file=sys.stderr, flush=True)


def sweep(spec_path: str | os.PathLike, store: str | os.PathLike | None = None, jobs: int | None = None,
          backend: str = "local", quiet: bool = False, address: str | None = None) -> dict:
    """Run a sweep spec; returns counts {"total", "skipped", "elsewhere", "ran", "failed",
    "store"} ("elsewhere": runs another sweep on the same store is running).

    Ctrl-C (or SIGTERM, unless the program handles it) stops the workers at once and
    raises KeyboardInterrupt; the runs recorded so far stay in the store.

    ``backend``: "local" (a process pool) or "ray" (Ray tasks on a local instance, or on
    the cluster at ``address``)."""
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 0):
        raise SweepError(f"argument `jobs` must be a non-negative integer (0 = every core), not {jobs!r:.40}")
    if backend not in ("local", "ray"):
        raise SweepError(f"unknown backend `{backend}` (known: local, ray)")
    if address and backend != "ray":
        raise SweepError("an address is for --backend ray")
    spec = load_spec(spec_path)
    if address:
        _check_reachable(address)  # before the store is created: nothing to clean up
    store_path = Path(store) if store else spec.store
    version = _core.version()
    owner = new_owner()
    with Store(store_path) as st, sigterm_as_interrupt():
        # Claimed in one transaction: a second sweep on this store takes the runs this
        # one has not, instead of running them all again.
        mine, elsewhere = st.claim([r["key"] for r in spec.runs], owner)
        claimed = set(mine)
        todo = [r for r in spec.runs if r["key"] in claimed]
        held = sum(elsewhere.values())
        counts = {"total": len(spec.runs), "skipped": len(spec.runs) - len(todo) - held, "elsewhere": held,
                  "ran": 0, "failed": 0, "store": str(store_path)}
        for who, n in elsewhere.items():
            print(f"vmlab sweep: {n} runs left to the sweep running on this store ({who})", file=sys.stderr)
        if not todo:
            return counts
        heartbeat = Heartbeat(str(store_path), owner)
        progress = None
        try:
            by_key = {r["key"]: r for r in todo}
            workers = jobs or spec.jobs or os.cpu_count() or 1
            progress = None if quiet else _Progress(len(todo))
            tasks = _one_pass_tasks(todo, workers, spec.one_pass)
            results = _ray_results(tasks, workers, address) if backend == "ray" else _local_results(tasks, workers)
            # The driver alone writes the store, one transaction per finished run, whichever backend ran it.
            for key, status, stats, error, secs in results:
                st.record(by_key[key], status, stats, error, secs, version)
                counts["ran"] += 1
                if status != "ok":
                    counts["failed"] += 1
                    print(f"vmlab sweep: run {key} failed: {error}", file=sys.stderr)
                if progress:
                    progress.tick(counts["failed"])
        except KeyboardInterrupt:
            if progress and progress.tty:
                print(file=sys.stderr)
            print(f"vmlab sweep: stopped: {counts['ran']} runs recorded in {store_path}, {len(todo) - counts['ran']} not run;"
                  " run the sweep again to resume", file=sys.stderr)
            raise
        finally:
            heartbeat.stop()
            st.release(owner)
    return counts


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="vmlab sweep", description="Run a sweep spec into a results store (docs/sweeps.md).")
    ap.add_argument("spec")
    ap.add_argument("--store", help="results store (default: the spec's [sweep] store, or SPEC.sqlite beside it)")
    ap.add_argument("-j", "--jobs", type=int, help="worker processes, or CPUs of a local Ray instance (default: every core)")
    ap.add_argument("--backend", default="local", choices=["local", "ray"])
    ap.add_argument("--address", help="Ray cluster to run on (host:port or ray://host:port; default: start a local instance)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    c = sweep(args.spec, store=args.store, jobs=args.jobs, backend=args.backend, quiet=args.quiet, address=args.address)
    elsewhere = f", {c['elsewhere']} left to another sweep" if c["elsewhere"] else ""
    print(f"{c['total']} runs: {c['skipped']} already in {c['store']}, {c['ran']} ran, {c['failed']} failed{elsewhere}")
    return 1 if c["failed"] else 0
