"""`vmlab sweep --backend ray`: the same runs as the local backend, on Ray tasks.

Two setups: a Ray instance inside this process (ray.init), and a real two-node cluster
on this machine (`ray start --head` plus `ray start --address`, separate processes)
with token authentication on, joined by an explicit address, by RAY_ADDRESS and by
`auto`, as a user or `ray job submit` would."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import vmlab
from vmlab import _core
from vmlab.sweep import SweepError, load_spec

from test_sweep import write_spec

ray = pytest.importorskip("ray")

VMLAB = [sys.executable, "-m", "vmlab.cli"]
RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance inside this process; yields its address."""
    ctx = ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield ctx.address_info["gcs_address"]
    finally:
        ray.shutdown()


def stats_by_key(store) -> dict[str, dict]:
    rows = sqlite3.connect(store).execute("SELECT key, status, stats FROM runs").fetchall()
    assert all(status == "ok" for _, status, _ in rows)
    return {k: json.loads(s) for k, _, s in rows}


def local_stats(spec: Path, store: Path) -> dict[str, dict]:
    """The local backend's stats by run key. In a child process: a process pool forked
    from this one, which runs Ray, could inherit a lock held by one of Ray's threads."""
    p = subprocess.run([*VMLAB, "sweep", str(spec), "-j", "2", "--quiet", "--store", str(store)],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr
    return stats_by_key(store)


def lackey_trace(tmp_path):
    """A small real-format trace: a lackey log converted with `vmlab convert`."""
    log = tmp_path / "t.lackey"
    log.write_text("".join(f" L {0x10000000 + i * 4096 * 3:x},8\n S {0x20000000 + i * 64:x},4\n" for i in range(400)))
    out = tmp_path / "t.vmt"
    subprocess.run([*VMLAB, "convert", "--from", "lackey", str(log), "-o", str(out)], check=True,
                   capture_output=True)
    return out


def test_ray_gives_the_local_backends_stats_per_run_key(tmp_path, ray_cluster):
    trace = lackey_trace(tmp_path)
    spec = write_spec(tmp_path, extra=f'\n[[trace]]\npath = "{trace}"\n')
    keys = {r["key"] for r in load_spec(spec).runs}
    want = local_stats(spec, tmp_path / "local.sqlite")
    # No address: the running instance, traces read by path. With its address: traces shipped as bytes.
    by_path = vmlab.sweep(spec, store=tmp_path / "ray.sqlite", backend="ray", quiet=True)
    shipped = vmlab.sweep(spec, store=tmp_path / "ray-shipped.sqlite", backend="ray", address=ray_cluster, quiet=True)
    for c in (by_path, shipped):
        assert (c["total"], c["ran"], c["failed"]) == (len(keys), len(keys), 0)
    assert sum(shipped["nodes"].values()) == len(keys)
    assert set(want) == keys
    assert stats_by_key(tmp_path / "ray.sqlite") == want
    assert stats_by_key(tmp_path / "ray-shipped.sqlite") == want
    # Resuming works the same: nothing left to run.
    again = vmlab.sweep(spec, store=tmp_path / "ray.sqlite", backend="ray", quiet=True)
    assert (again["ran"], again["skipped"]) == (0, len(keys))


def test_a_failing_run_on_ray_is_recorded_like_local(tmp_path, ray_cluster):
    spec = write_spec(tmp_path, extra=f'\n[[trace]]\npath = "{tmp_path / "missing.vmt"}"\n')
    c = vmlab.sweep(spec, backend="ray", address=ray_cluster, quiet=True)
    assert (c["total"], c["failed"]) == (16, 8)
    df = vmlab.load(tmp_path / "s.sqlite", include_errors=True)
    assert df[df["status"] == "error"]["error"].str.contains("missing.vmt").all()


def test_a_worker_with_another_vmlab_version_stops_the_sweep(tmp_path, ray_cluster, monkeypatch):
    # The driver claims another version; the workers (separate processes) import the real one.
    real = _core.version()
    monkeypatch.setattr(_core, "version", lambda: "0.0.0-driver")
    with pytest.raises(SweepError) as e:
        vmlab.sweep(write_spec(tmp_path), backend="ray", address=ray_cluster, quiet=True)
    msg = str(e.value)
    assert f"has vmlab {real}, the driver 0.0.0-driver" in msg and "\n" not in msg


def test_a_reproductions_runs_on_ray_give_the_in_process_documents(tmp_path, ray_cluster):
    """`vmlab reproduce --backend ray`: a Batch of runs over two inputs, and timed()'s
    compare rows, on Ray tasks (traces by path on the running instance, shipped as
    bytes when joined by address), equal to in-process runs."""
    from vmlab.reproduce._common import executing, timed

    from test_reproduce import GUPS, small_batch, small_trace, timed_designs

    trace = small_trace(tmp_path)
    designs, rows = timed_designs()
    for address in (None, ray_cluster):
        b, want = small_batch(trace)
        with executing("ray", address=address) as ex:
            assert b.run() == want
            assert timed("tiny", designs, GUPS, {"time.unknown_deps": "independent"}) == rows
        assert sum(ex.nodes.values()) == len(want) + len(designs)
    assert ray.is_initialized()  # the process's own connection is kept


def test_a_reproduction_on_an_unreachable_ray_address_is_one_line(tmp_path):
    p = subprocess.run([*VMLAB, "reproduce", "itanium", "--quick", "--backend", "ray", "--address", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60, env=clean_env(VMLAB_CACHE=str(tmp_path)))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("vmlab: error: cannot reach the Ray cluster"), p.stderr
    assert not list(tmp_path.iterdir())  # nothing traced before the check


def test_unreachable_ray_address_is_one_line_and_fast(tmp_path):
    spec = write_spec(tmp_path)
    t0 = time.monotonic()
    p = subprocess.run([*VMLAB, "sweep", str(spec), "--backend", "ray", "--address", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < 20
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "127.0.0.1:1" in lines[0] and lines[0].startswith("vmlab: error:"), p.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_cli_ray_without_address_starts_and_stops_its_own_instance(tmp_path):
    # A separate process: the sweep starts a local instance with -j CPUs, not the fixture's.
    spec = write_spec(tmp_path)
    p = subprocess.run([*VMLAB, "sweep", str(spec), "--backend", "ray", "-j", "2", "--quiet",
                        "--store", str(tmp_path / "ray.sqlite")], capture_output=True, text=True, timeout=120,
                       env=clean_env())
    assert p.returncode == 0, p.stderr
    assert "8 runs: 0 already in" in p.stdout and "8 ran, 0 failed; ran on 1 Ray node" in p.stdout
    assert stats_by_key(tmp_path / "ray.sqlite") == local_stats(spec, tmp_path / "local.sqlite")


# --- A real two-node cluster -------------------------------------------------------------


def clean_env(**extra) -> dict[str, str]:
    """This environment without Ray's connection and auth settings (ray.init in this
    process sets RAY_AUTH_MODE), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return {**env, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def session_pids(sid: int) -> list[int]:
    """The live processes of session ``sid`` (a `ray start` and every process it left behind)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and os.getsid(int(d)) == sid:
                    pids.append(int(d))
            except (OSError, IndexError):
                pass
    return pids


class Cluster:
    """`ray start --head` and one `ray start --address` node on this machine, each with
    one CPU, token authentication on (RAY_AUTH_MODE=token, the token in a file named by
    RAY_AUTH_TOKEN_PATH), in a private temporary directory. Every `ray start` runs in a
    session of its own, so stopping kills exactly its processes."""

    def __init__(self):
        # Short: Ray's socket paths under it must fit in 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="vr", dir="/tmp"))
        self.token = self.dir / "token"
        self.token.write_text(secrets.token_hex(32))
        self.token.chmod(0o600)
        self.env = clean_env(RAY_TMPDIR=str(self.dir), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token))
        self.port = free_port()
        self.sessions: list[int] = []
        self.printed = None

    def _start(self, *args: str) -> str:
        p = subprocess.Popen([RAY, "start", *args, "--num-cpus=1", "--object-store-memory=80000000",
                              "--min-worker-port=0", "--max-worker-port=0",
                              f"--dashboard-agent-listen-port={free_port()}", "--disable-usage-stats"],
                             env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        self.sessions.append(p.pid)
        out = p.communicate(timeout=90)[0]
        assert p.returncode == 0, out
        return out

    def start(self) -> None:
        out = self._start("--head", f"--port={self.port}", "--include-dashboard=false",
                          f"--dashboard-port={free_port()}")
        # The address `ray start` prints for other nodes (this machine's IP, not loopback).
        self.printed = re.search(r"ray start --address='([^']+)'", out).group(1)
        self._start(f"--address=127.0.0.1:{self.port}")
        self.wait_for_nodes(2)

    def wait_for_nodes(self, n: int, timeout: float = 60) -> None:
        code = ("import ray, sys, time\n"
                f"ray.init(address='127.0.0.1:{self.port}', logging_level='ERROR', log_to_driver=False)\n"
                "t = time.monotonic()\n"
                f"while sum(x['Alive'] for x in ray.nodes()) < {n} and time.monotonic() - t < {timeout}:\n"
                "    time.sleep(0.2)\n"
                f"sys.exit(sum(x['Alive'] for x in ray.nodes()) < {n})\n")
        p = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                           timeout=timeout + 30)
        assert p.returncode == 0, p.stderr

    def stop(self) -> None:
        for sid in reversed(self.sessions):  # the worker node first
            for pid in session_pids(sid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 20
        while any(session_pids(s) for s in self.sessions) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for s in self.sessions for p in session_pids(s)]
        shutil.rmtree(self.dir, ignore_errors=True)
        assert not left, f"Ray processes left: {left}"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()


CLUSTER_SPEC = """
[sweep]
name = "cluster"
seeds = [1, 2]
one_pass = false      # a task per run: enough tasks for both nodes

[[config]]
name = "tiny"
preset = "tiny"

[[config]]
name = "tiny-2m"
preset = "tiny"
set = {{ "os.page_size" = "2M" }}

[axes]
"tlb.l1d.entries" = [4, 8]

[[workload]]
name = "gups"
params = {{ footprint = "4M", accesses = "50k" }}

[[trace]]
path = "{trace}"
"""


@pytest.fixture(scope="module")
def cluster_spec(tmp_path_factory):
    """A 16-run spec (a workload and a trace) and its local backend's stats by run key."""
    d = tmp_path_factory.mktemp("cluster")
    spec = d / "c.toml"
    spec.write_text(CLUSTER_SPEC.format(trace=lackey_trace(d)))
    want = local_stats(spec, d / "local.sqlite")
    assert len(want) == 16
    return spec, want


def run_sweep(spec: Path, store: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*VMLAB, "sweep", str(spec), "--backend", "ray", "--quiet", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=spec.parent)


@pytest.mark.parametrize("how", ["address", "RAY_ADDRESS", "auto"])
def test_a_sweep_joins_a_token_authenticated_cluster(how, cluster, cluster_spec, tmp_path):
    spec, want = cluster_spec
    store = tmp_path / "ray.sqlite"
    token = {"RAY_AUTH_TOKEN_PATH": str(cluster.token)}
    if how == "address":
        # An explicit HOST:PORT: Ray sends the token when RAY_AUTH_MODE=token (Ray's rule for explicit addresses).
        p = run_sweep(spec, store, clean_env(RAY_AUTH_MODE="token", **token), "--address", f"127.0.0.1:{cluster.port}")
    elif how == "RAY_ADDRESS":
        # As under `ray job submit`: no --address; Ray finds the token without RAY_AUTH_MODE.
        p = run_sweep(spec, store, clean_env(RAY_ADDRESS=cluster.printed, **token))
    else:
        # The cluster `ray start` recorded on this machine (in RAY_TMPDIR).
        p = run_sweep(spec, store, clean_env(RAY_TMPDIR=str(cluster.dir), **token), "--address", "auto")
    assert p.returncode == 0 and not p.stderr, p.stderr  # --quiet: not a warning from Ray either
    assert "16 runs: 0 already in" in p.stdout and "16 ran, 0 failed; ran on 2 Ray nodes" in p.stdout, p.stdout
    assert stats_by_key(store) == want


@pytest.mark.parametrize("case", ["no RAY_AUTH_MODE", "wrong token", "no token"])
def test_a_refused_token_is_one_line_that_says_how_to_pass_it(case, cluster, tmp_path):
    spec = write_spec(tmp_path)
    empty_home = tmp_path / "home"  # hides ~/.ray/auth_token
    empty_home.mkdir()
    address = ["--address", f"127.0.0.1:{cluster.port}"]
    if case == "no RAY_AUTH_MODE":
        env, want = clean_env(RAY_AUTH_TOKEN_PATH=str(cluster.token)), "set RAY_AUTH_MODE=token to send the token"
    elif case == "wrong token":
        env, want = clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="not-the-token"), "rejected the auth token from RAY_AUTH_TOKEN"
    else:
        env, want = clean_env(RAY_ADDRESS=f"127.0.0.1:{cluster.port}", HOME=str(empty_home)), "no token was found"
        address = []
    t0 = time.monotonic()
    p = run_sweep(spec, tmp_path / "s.sqlite", env, *address)
    assert time.monotonic() - t0 < 15
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("vmlab: error:"), p.stderr
    assert want in lines[0] and "RAY_AUTH_TOKEN_PATH" in lines[0], lines[0]
    assert not (tmp_path / "s.sqlite").exists()


def test_without_an_address_a_sweep_starts_its_own_instance_beside_a_cluster(cluster, tmp_path):
    # `ray start` recorded its cluster (RAY_TMPDIR): a sweep without --address or RAY_ADDRESS
    # still starts a local instance with -j CPUs rather than join it.
    spec = write_spec(tmp_path)
    p = run_sweep(spec, tmp_path / "ray.sqlite", clean_env(RAY_TMPDIR=str(cluster.dir)), "-j", "1")
    assert p.returncode == 0, p.stderr
    assert "8 ran, 0 failed; ran on 1 Ray node" in p.stdout, p.stdout
