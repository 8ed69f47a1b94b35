"""`vmlab sweep --backend ray`: the same runs as the local backend, on Ray tasks."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

import vmlab
from vmlab.sweep import load_spec

from test_sweep import write_spec

ray = pytest.importorskip("ray")

VMLAB = [sys.executable, "-m", "vmlab.cli"]


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance for this module; yields its address."""
    ctx = ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield ctx.address_info["gcs_address"]
    finally:
        ray.shutdown()


def stats_by_key(store) -> dict[str, dict]:
    rows = sqlite3.connect(store).execute("SELECT key, status, stats FROM runs").fetchall()
    assert all(status == "ok" for _, status, _ in rows)
    return {k: json.loads(s) for k, _, s in rows}


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
    local = vmlab.sweep(spec, store=tmp_path / "local.sqlite", quiet=True, jobs=2)
    # No address: the running instance, traces read by path. With its address: traces shipped as bytes.
    by_path = vmlab.sweep(spec, store=tmp_path / "ray.sqlite", backend="ray", quiet=True)
    shipped = vmlab.sweep(spec, store=tmp_path / "ray-shipped.sqlite", backend="ray", address=ray_cluster, quiet=True)
    for c in (local, by_path, shipped):
        assert (c["total"], c["ran"], c["failed"]) == (len(keys), len(keys), 0)
    want = stats_by_key(tmp_path / "local.sqlite")
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
                        "--store", str(tmp_path / "ray.sqlite")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "8 runs: 0 already in" in p.stdout and "8 ran, 0 failed" in p.stdout
    vmlab.sweep(spec, store=tmp_path / "local.sqlite", quiet=True, jobs=2)
    assert stats_by_key(tmp_path / "ray.sqlite") == stats_by_key(tmp_path / "local.sqlite")
