"""``vmlab sweep SPEC.toml``: run every (design x swept keys x input x seed) combination
of a spec into a results store, skipping runs the store already holds.

The spec format is documented in docs/sweeps.md. Runs execute in worker processes
(every core by default) or as Ray tasks; only this process writes the store, one transaction per
finished run, so a killed sweep loses at most the runs in flight and a re-run resumes.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import itertools
import json
import logging
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
from ._files import path_arg
from ._signals import signals_held, sigterm_as_interrupt
from .api import _bool_arg, _count_arg, _expect
from .store import Heartbeat, Store, new_owner

_TOP_KEYS = {"sweep", "config", "axes", "workload", "trace"}
_SWEEP_KEYS = {"name", "store", "seeds", "combine", "jobs", "one_pass"}
# Most runs one one-pass task carries: bounds what a crash loses.
_MAX_ONE_PASS = 16
_CONFIG_KEYS = {"name", "preset", "file", "set"}
_WORKLOAD_KEYS = {"name", "params"}
_TRACE_KEYS = {"path"}
# The largest spec file read.
_SPEC_LIMIT = 16 << 20


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
    path = Path(path_arg("path", path))
    try:
        if not path.is_file() and path.exists():
            raise SpecError(f"{path}: not a sweep spec (not a regular file)")
        with open(path, "rb") as f:
            # A spec is a page of text: a bounded read, so that /dev/zero or a huge file is an error, not a hang.
            data = f.read(_SPEC_LIMIT + 1)
        if len(data) > _SPEC_LIMIT:
            raise SpecError(f"{path}: not a sweep spec (larger than {_SPEC_LIMIT >> 20} MiB)")
        doc = tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: no such sweep spec") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read the sweep spec: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not a sweep spec (not UTF-8 text: byte {e.start})") from None
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


def _ray_execute(runs: list[dict], trace_bytes: bytes | None, driver_version: str) -> tuple[str, list[tuple]]:
    """The Ray task body: (the Ray node it ran on, its runs' results). It refuses to
    simulate with a different engine than the driver's, since the run key (computed by
    the driver) names the driver's version (a node that joined after the sweep's check)."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    _one_core()
    worker_version = _core.version()
    if worker_version != driver_version:
        return node, [(r["key"], "error", None, f"worker has vmlab {worker_version}, the driver {driver_version}", 0.0)
                      for r in runs]
    return node, _execute(runs, trace_bytes)


def _worker_init(one_core: bool) -> None:
    """A local worker leaves Ctrl-C to the sweep (the terminal sends it to the whole
    process group): the sweep stops the workers itself, so none prints a traceback.
    SIGTERM ends a worker at once (the default action): a forked worker would otherwise
    inherit the sweep's SIGTERM handler and go on to its next task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if one_core:
        _one_core()


# How long stopped workers get to end on SIGTERM before they are killed (SIGKILL).
_TERM_GRACE = 0.3


def _stop_workers(pool: cf.ProcessPoolExecutor) -> None:
    """End a pool's workers now, their runs unfinished (nothing of them is recorded):
    SIGTERM, then SIGKILL for any still alive after :data:`_TERM_GRACE`; no in-flight
    task is waited for."""
    # Taken before shutdown(), which forgets them.
    procs = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)
    with signals_held():
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
        deadline = time.monotonic() + _TERM_GRACE
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.exitcode is None:
                with contextlib.suppress(Exception):
                    p.kill()
        for p in procs:
            p.join(1.0)
        # A worker killed while sending a result leaves the executor's thread waiting for
        # the rest of that message: with every worker gone, closing this process's end of
        # the result pipe ends the wait (end of file), so that thread, which Python joins
        # at exit, ends too.
        if results is not None and all(p.exitcode is not None for p in procs):
            with contextlib.suppress(Exception):
                results._writer.close()


def _local_results(tasks: list[list[dict]], workers: int, tick: float | None = None) -> Iterator[tuple]:
    """Run in a local process pool; yield (task, its results) as tasks finish, and
    (None, []) after every ``tick`` seconds in which none did. Closing the generator
    early (an interrupt, an error recording a result) stops the workers at once."""
    if not tasks:
        return
    n = min(workers, len(tasks))
    pool = cf.ProcessPoolExecutor(max_workers=n, initializer=_worker_init, initargs=(n > 1,))
    try:
        futures = {pool.submit(_execute, t): t for t in tasks}
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=tick, return_when=cf.FIRST_COMPLETED)
            if not done:
                yield None, []
            for fut in done:
                yield futures[fut], fut.result()
    except BaseException:  # an interrupt, or the consumer stopping early (GeneratorExit)
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)


def _check_reachable(address: str, named: str | None = None, timeout: float = 5.0) -> None:
    """Fail fast on an address nothing listens at: ray.init would retry for a minute."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: ray.init resolves and reports those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        where = named if named and named != address else address
        also = f" ({address})" if named and named != address else ""
        raise SweepError(f"cannot reach the Ray cluster at {where}{also}: {e.strerror or e}") from None


# Where Ray reads a cluster's auth token from, in Ray's order of precedence.
_TOKEN_WHERE = "in RAY_AUTH_TOKEN, in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token"
_TOKEN_HINT = "(`ray get-auth-token` on the head node prints it)"


def _token_source() -> str | None:
    """Where Ray will take this process's auth token from (Ray's order), or None.

    A RAY_AUTH_TOKEN_PATH that cannot be read is an error here: Ray would abort the process."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        try:
            with open(path, "rb") as f:
                empty = not f.read().strip()
        except OSError as e:
            raise SweepError(f"RAY_AUTH_TOKEN_PATH={path}: cannot read the Ray auth token: {e.strerror}") from None
        if empty:
            raise SweepError(f"RAY_AUTH_TOKEN_PATH={path}: the file is empty (it should hold the cluster's Ray auth token)")
        return f"RAY_AUTH_TOKEN_PATH={path}"
    try:
        if (Path.home() / ".ray" / "auth_token").stat().st_size > 0:
            return "~/.ray/auth_token"
    except OSError:
        pass
    return None


def _enable_token_mode() -> None:
    """Turn Ray's token authentication on for this process, as ray.init does itself when
    it finds a cluster by RAY_ADDRESS or "auto" and a token is at hand."""
    os.environ["RAY_AUTH_MODE"] = "token"
    try:
        from ray._raylet import Config
        Config.initialize("")  # Ray caches its config: make it see the new mode
    except (ImportError, AttributeError):
        pass


def _gcs_accepts_token(gcs: str) -> bool:
    """False if the GCS at ``gcs`` (host:port) refuses this process's credentials (no
    token, or a wrong one); True if it accepts them or the question cannot be asked.

    ray.init would retry a refused connection for twenty seconds, printing a warning a
    second; one request answers at once. It names a made-up cluster id, so that the
    client does not first fetch the real one (with those retries): the GCS checks the
    token first, then answers WrongClusterID."""
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:
        return True
    try:
        client = GcsClient(address=gcs, cluster_id=os.urandom(28).hex())
        client.internal_kv_get(b"vmlab-probe", namespace=b"vmlab", timeout=5)
    except AuthenticationError as e:
        return "InvalidAuthToken" not in str(e)
    except Exception:  # noqa: BLE001 - not an answer about the token: ray.init reports the rest
        return True
    return True


def _ray_target(address: str | None) -> tuple[str | None, str | None]:
    """The cluster a Ray sweep joins: (its address as given, how to name it in a
    message), or (None, None) when the sweep starts its own local instance. An address
    argument wins over RAY_ADDRESS (set by `ray job submit`, and by users)."""
    if address:
        return address, address
    env = os.environ.get("RAY_ADDRESS", "").strip()
    return (env, f"RAY_ADDRESS={env}") if env else (None, None)


def _import_ray():
    try:
        import ray
    except ImportError:
        raise SweepError("the Ray backend needs the `ray` package (pip install ray)") from None
    return ray


def _check_ray_join(address: str | None) -> None:
    """Before anything is written: the cluster the sweep will join can be found and
    reached and accepts this process's token. One clear error otherwise.

    Token authentication follows Ray: RAY_AUTH_MODE=token, the token from RAY_AUTH_TOKEN,
    the file RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token. Like ray.init, a cluster
    found by RAY_ADDRESS or "auto" gets the token without RAY_AUTH_MODE when one is at
    hand; an explicit HOST:PORT needs RAY_AUTH_MODE=token."""
    ray = _import_ray()
    if ray.is_initialized():
        return  # this process has joined Ray already: the sweep uses that connection
    target, named = _ray_target(address)
    source = _token_source()  # checks RAY_AUTH_TOKEN_PATH for a local instance too
    if target is None:
        return
    if target.startswith(("http://", "https://")):
        raise SweepError(f"{named} is a dashboard (job submission) address; the Ray backend joins a cluster by its "
                         "GCS address (HOST:PORT, as `ray start --head` prints it, default port 6379) or `auto`")
    if target.startswith("ray://"):
        _check_reachable(target, named)
        return  # Ray Client: ray.init connects and reports the rest
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:
        gcs = target
    else:
        quiet = logging.getLogger("ray")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # as ray.init(logging_level="ERROR") will: no warning about other clusters here
        try:
            # "auto" and RAY_ADDRESS resolved as ray.init resolves them.
            gcs = canonicalize_bootstrap_address(None if address is None else address) or target
        except Exception as e:  # noqa: BLE001 - e.g. "auto" with no cluster on this machine
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise SweepError(f"cannot find the Ray cluster ({named}): {msg}") from None
        finally:
            quiet.setLevel(level)
    _check_reachable(gcs, named)
    implicit = address in (None, "auto")  # ray.init enables token mode itself for these
    mode = os.environ.get("RAY_AUTH_MODE", "").strip().lower()
    if not mode and implicit and source:
        _enable_token_mode()  # now, so that the check below asks with the token ray.init will send
        mode = "token"
    if mode == "token" and source is None:
        raise SweepError(f"RAY_AUTH_MODE=token but no Ray auth token found: put the cluster's token {_TOKEN_WHERE} {_TOKEN_HINT}")
    if _gcs_accepts_token(gcs):
        return
    if mode == "token":
        raise SweepError(f"the Ray cluster at {named} rejected the auth token from {source}: give the cluster's token "
                         f"{_TOKEN_WHERE} {_TOKEN_HINT}")
    if implicit and source is None:
        raise SweepError(f"the Ray cluster at {named} requires token authentication and no token was found: put the "
                         f"cluster's token {_TOKEN_WHERE} {_TOKEN_HINT}")
    now = f" (it is `{os.environ['RAY_AUTH_MODE']}`)" if mode else ""
    found = f" to send the token in {source}" if source else f", with the cluster's token {_TOKEN_WHERE} {_TOKEN_HINT}"
    raise SweepError(f"the Ray cluster at {named} requires token authentication: set RAY_AUTH_MODE=token{now}{found}")


def _worker_version() -> str:
    """A Ray task: the vmlab version this worker imports."""
    return _core.version()


def _one_line(e: BaseException) -> str:
    """An exception as one line: a Ray task error's last line names the cause."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def _node_versions(ray, timeout: float) -> list[tuple[str, str | None, str | None]]:
    """(node, vmlab version or None, error or None) for every live node with a CPU, from
    a task pinned to each; plain data, so that no object ref outlives this frame."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    probe = ray.remote(num_cpus=0, max_retries=0)(_worker_version)
    refs = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote():
            f"{n.get('NodeManagerAddress', '?')} (id {n['NodeID'][:8]})" for n in nodes}
    done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout) if refs else ([], [])
    out = [(refs[ref], None, f"did not run a task within {timeout:.0f} s") for ref in pending]
    for ref in pending:
        ray.cancel(ref, force=True)
    for ref in done:
        try:
            out.append((refs[ref], ray.get(ref), None))
        except Exception as e:  # noqa: BLE001 - e.g. ModuleNotFoundError: vmlab is not installed there
            out.append((refs[ref], None, _one_line(e)))
    return out


def _check_worker_versions(ray, named: str, timeout: float = 120.0) -> None:
    """Every node that can run a task imports the driver's vmlab. The run keys (computed
    here) name the driver's version, so a node with another version, or none, would
    record results under the wrong key."""
    want = _core.version()
    found = _node_versions(ray, timeout)
    if not found:
        raise SweepError(f"the Ray cluster at {named} has no node with a CPU to run tasks on")
    fix = f"every node needs vmlab {want} (the driver's) installed in the Python that runs `ray start` (docs/sweeps.md)"
    for node, version, error in found:
        if error:
            raise SweepError(f"Ray node {node} of {named} cannot run vmlab: {error}; {fix}")
        if version != want:
            raise SweepError(f"Ray node {node} of {named} has vmlab {version}, the driver {want}; {fix}")


class Executor:
    """Where runs execute, for `vmlab sweep` and `vmlab reproduce`: worker processes on
    this machine, or Ray tasks.

    ``backend``: "local" (a process pool of ``jobs`` workers; None or 0: every core) or
    "ray" (Ray tasks on a local instance with ``jobs`` CPUs, or on the cluster at
    ``address``, else at RAY_ADDRESS; "auto": the one on this machine). The arguments
    are checked here; :meth:`check` checks that the cluster can be joined.

    As a context manager it joins Ray once (or starts the local instance) and checks
    every node's vmlab; leaving it shuts down what it started. Every :meth:`run` inside
    shares that connection; a :meth:`run` outside joins and leaves for itself. A process
    that has already joined Ray (ray.init) keeps its connection. The local backend
    starts a pool per :meth:`run`."""

    def __init__(self, backend: str = "local", jobs: int | None = None, address: str | None = None):
        if jobs is not None:
            jobs = _count_arg("jobs", jobs)
        _expect("backend", backend, isinstance(backend, str), '"local" or "ray"')
        if address is not None:
            _expect("address", address, isinstance(address, str) and address.strip() != "",
                    "a Ray address (HOST:PORT, auto or ray://HOST:PORT)")
        if backend not in ("local", "ray"):
            raise SweepError(f"unknown backend `{backend}` (known: local, ray)")
        if address and backend != "ray":
            raise SweepError("an address is for --backend ray")
        self.backend, self.jobs, self.address = backend, jobs, address
        # Runs each Ray node (by id) simulated.
        self.nodes: dict[str, int] = {}
        self._checked = False
        self._ray = None  # the ray module, while joined
        self._started = False  # whether this executor started (and so shuts down) Ray
        self._cluster_cpus: int | None = None
        self._target: str | None = None
        self._depth = 0  # `with` blocks entered: Ray is left when the outermost ends

    @property
    def workers(self) -> int:
        """How many runs can go at once: ``jobs`` (default: every core), or a joined
        cluster's CPUs."""
        return self._cluster_cpus or self.jobs or os.cpu_count() or 1

    def describe(self) -> str:
        if self.backend == "local":
            return f"{self.workers} local worker process{'es' if self.workers != 1 else ''}"
        return f"Ray, {self.workers} CPU{'s' if self.workers != 1 else ''}"

    def check(self) -> None:
        """Before anything is written: the Ray cluster can be found, reached and accepts
        this process's token (nothing to check for the local backend)."""
        if self.backend == "ray" and not self._checked:
            _check_ray_join(self.address)
            self._checked = True

    def __enter__(self) -> "Executor":
        if self.backend != "ray" or self._ray is not None:
            self._depth += 1
            return self
        self.check()
        ray = _import_ray()
        target, named = _ray_target(self.address)
        started = False
        if not ray.is_initialized():
            try:
                if target is None:
                    # "local": a new instance even if `ray start` left a cluster's address on this machine.
                    ray.init(address="local", num_cpus=self.workers, include_dashboard=False, logging_level="ERROR",
                             log_to_driver=False)
                else:
                    # An argument, else None: ray.init reads RAY_ADDRESS itself, as under `ray job submit`.
                    ray.init(address=self.address or None, logging_level="ERROR", log_to_driver=False)
            except Exception as e:  # noqa: BLE001 - one line for the CLI, whatever Ray raised
                where = f" at {named}" if named else " (local instance)"
                raise SweepError(f"cannot start or join Ray{where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
            started = True
        try:
            if target is not None:
                _check_worker_versions(ray, named)
                self._cluster_cpus = max(1, int(ray.cluster_resources().get("CPU", self.workers)))
        except BaseException:
            if started:
                ray.shutdown()
            raise
        self._ray, self._started, self._target, self._depth = ray, started, target, 1
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        if self._ray is not None and self._started:
            self._ray.shutdown()
        self._ray, self._started, self._cluster_cpus = None, False, None

    def run(self, runs: list[dict], one_pass: bool = True, tick: float | None = None) -> Iterator[tuple]:
        """Run ``runs`` (each {"key", "config", "overrides", "source"}, as a sweep's
        runs), those that share an input in one-pass tasks (``one_pass``); yield each
        task's runs and their results, (key, status, stats, error, seconds) per run, as
        tasks finish, and with ``tick``, (None, []) after every ``tick`` seconds in which
        none did. A run that fails is a result with status "error", not an exception.
        Closing the generator early stops what is still running."""
        if self.backend == "local":
            yield from _local_results(_one_pass_tasks(runs, self.workers, one_pass), self.workers, tick)
        elif self._ray is None:
            with self:
                yield from self._ray_results(runs, one_pass, tick)
        else:
            yield from self._ray_results(runs, one_pass, tick)

    def _ray_results(self, runs: list[dict], one_pass: bool, tick: float | None) -> Iterator[tuple]:
        """As Ray tasks; results as they finish (ray.wait). On a local instance (no
        address) workers share this machine's files, so traces are read by path. On a
        cluster workers may be on other machines, so each trace's bytes are put in the
        object store once and handed to every task that simulates it."""
        ray = self._ray
        task = ray.remote(num_cpus=1)(_ray_execute)
        version = _core.version()
        shipped: dict[str, Any] = {}  # trace path -> object ref, or the error reading it
        refs: dict[Any, list[dict]] = {}
        for t in _one_pass_tasks(runs, self.workers, one_pass):
            data = None
            if self._target is not None and "trace" in t[0]["source"]:
                path = t[0]["source"]["trace"]
                if path not in shipped:
                    try:
                        shipped[path] = ray.put(Path(path).read_bytes())
                    except OSError as e:
                        shipped[path] = f"{type(e).__name__}: cannot read trace {path}: {e.strerror}"
                data = shipped[path]
                if isinstance(data, str):
                    # Not sent on: a worker elsewhere might find another file at that path.
                    yield t, [(r["key"], "error", None, data, 0.0) for r in t]
                    continue
            refs[task.remote(t, data, version)] = t
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1, timeout=tick)
                if not done:
                    yield None, []
                for ref in done:
                    try:
                        node, results = ray.get(ref)
                        self.nodes[node] = self.nodes.get(node, 0) + len(results)
                    except ray.exceptions.RayError as e:
                        # The task itself failed (its worker died, its node left): its runs
                        # fail like any run, the caller goes on, a re-run retries them.
                        results = [(r["key"], "error", None, f"Ray: {_one_line(e)}", 0.0) for r in refs[ref]]
                    yield refs[ref], results
        except BaseException:
            for ref in pending:  # an interrupt: nothing more of these runs runs anywhere
                ray.cancel(ref, force=True)
            raise


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
    "store"} ("elsewhere": runs another sweep on the same store is running), and with
    the Ray backend "nodes": {Ray node id: runs it simulated}.

    Ctrl-C (or SIGTERM, unless the program handles it) stops the workers at once and
    raises KeyboardInterrupt; the runs recorded so far stay in the store.

    ``backend``: "local" (a process pool) or "ray" (Ray tasks on a local instance, or on
    the cluster at ``address``, else at RAY_ADDRESS; "auto": the one on this machine)."""
    spec_path = path_arg("spec_path", spec_path)
    store = path_arg("store", store, optional=True)
    quiet = _bool_arg("quiet", quiet)
    ex = Executor(backend, jobs, address)
    spec = load_spec(spec_path)
    if not ex.jobs:
        ex.jobs = spec.jobs  # the spec's [sweep] jobs, unless given here (0: every core)
    ex.check()  # before the store is created: nothing to clean up
    store_path = Path(store) if store is not None else spec.store
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
                  "ran": 0, "failed": 0, "store": str(store_path), **({"nodes": ex.nodes} if backend == "ray" else {})}
        for who, n in elsewhere.items():
            print(f"vmlab sweep: {n} runs left to the sweep running on this store ({who})", file=sys.stderr)
        if not todo:
            return counts
        heartbeat = Heartbeat(str(store_path), owner)
        progress = None
        try:
            by_key = {r["key"]: r for r in todo}
            progress = None if quiet else _Progress(len(todo))
            # Closed (the workers stopped) before Ray is left, also when recording a result
            # failed: no worker outlives the sweep.
            with ex, contextlib.closing(ex.run(todo, spec.one_pass)) as finished:
                # The driver alone writes the store, one transaction per finished run, whichever backend ran it.
                for _, results in finished:
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
    ap.add_argument("--address", help="Ray cluster to run on (HOST:PORT, auto, or ray://HOST:PORT; default: $RAY_ADDRESS, "
                    "else start a local instance)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    c = sweep(args.spec, store=args.store, jobs=args.jobs, backend=args.backend, quiet=args.quiet, address=args.address)
    elsewhere = f", {c['elsewhere']} left to another sweep" if c["elsewhere"] else ""
    n = len(c.get("nodes") or ())
    nodes = f"; ran on {n} Ray node{'s' if n != 1 else ''}" if n else ""
    print(f"{c['total']} runs: {c['skipped']} already in {c['store']}, {c['ran']} ran, {c['failed']} failed{elsewhere}{nodes}")
    return 1 if c["failed"] else 0
