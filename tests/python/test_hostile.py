"""Hostile input and faults, through the CLI as a user meets them: each case is one
clear error line and a non-zero exit (or a correct result), never a panic, a
traceback, unbounded memory, or a destroyed output file."""

import math
import resource
import shutil
import subprocess

import pytest

from conftest import processes_with, vmlab_cmd

# Far more than any case below needs, far less than what an unbounded read of
# /dev/zero would take: an address-space limit turns such a read into a failure.
MEMORY_LIMIT = 2 << 30


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args, stdout=subprocess.PIPE, timeout=60):
    return subprocess.run(vmlab_cmd() + list(args), stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, preexec_fn=_limit_memory)


def one_error_line(p):
    assert p.returncode not in (0, 101) and p.returncode > 0, (p.returncode, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines and lines[-1].startswith("vmlab: error: "), p.stderr
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr and "\x00" not in p.stderr, p.stderr
    return lines[-1]


def test_a_full_stdout_is_an_error_not_a_panic():
    with open("/dev/full", "w") as full:
        for args in (["run", "-c", "tiny", "-w", "gups", "footprint=1M", "accesses=1k", "--json"],
                     ["run", "-c", "tiny", "-w", "gups", "footprint=1M", "accesses=1k"],
                     ["workloads"]):
            msg = one_error_line(run_cli(*args, stdout=full))
            assert "standard output" in msg and "No space left" in msg


PYTHON_OUTPUT = [["--help"], ["sweep", "--help"], ["demo", "--help"], ["report", "--help"], ["export", "--help"],
                 ["reproduce", "--help"], ["demo", "--quick"]]


def _unbuffered(on):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONUNBUFFERED": "1"} if on else env


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", PYTHON_OUTPUT, ids=" ".join)
def test_a_full_stdout_is_one_error_line_for_python_commands_too(args, unbuffered):
    # Python raises at the write (unbuffered) or at the final flush (buffered), and
    # argparse's --help drops the error: each is the Rust commands' one line and status 1.
    with open("/dev/full", "w") as full:
        p = subprocess.run(vmlab_cmd() + args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                           env=_unbuffered(unbuffered))
    assert one_error_line(p) == "vmlab: error: standard output: No space left on device (os error 28)"
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.parametrize("args", [["--help"], ["sweep", "--help"], ["demo", "--help"]], ids=" ".join)
def test_a_closed_stdout_is_one_error_line_for_python_output(args):
    # Python drops what print() writes to a closed descriptor 1 (sys.stdout is None).
    p = subprocess.run(vmlab_cmd() + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60,
                       preexec_fn=lambda: os.close(1))
    assert one_error_line(p) == "vmlab: error: standard output: Bad file descriptor (os error 9)"


@pytest.mark.parametrize("args", [["--version"], ["run", "--help"]], ids=" ".join)
def test_a_full_stdout_is_an_error_for_clap_help_and_version(args):
    with open("/dev/full", "w") as full:
        msg = one_error_line(run_cli(*args, stdout=full))
    assert msg == "vmlab: error: standard output: No space left on device (os error 28)"


@pytest.mark.parametrize("args", [
    ["run", "-c", "/dev/zero", "-w", "gups", "accesses=1k"],
    ["run", "-c", "tiny", "--set", 'machine.fragmentation.history="/dev/zero"', "-w", "gups", "accesses=1k"],
    ["convert", "--from", "lackey", "/dev/zero", "-o", "OUT"],
])
def test_input_without_newlines_is_bounded(args, tmp_path):
    args = [str(tmp_path / "z.vmt") if a == "OUT" else a for a in args]
    msg = one_error_line(run_cli(*args))
    assert "/dev/zero" in msg
    assert not (tmp_path / "z.vmt").exists()


def test_a_history_that_is_no_history_is_not_quoted(tmp_path):
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    msg = one_error_line(run_cli("run", "-c", "tiny", "--set", f'machine.fragmentation.history="{secret}"',
                                 "-w", "gups", "accesses=1k"))
    assert f"{secret}:1" in msg and "root" not in msg.split(str(secret))[-1]


def test_malformed_toml_names_line_and_column(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "tiny"\n[tlb.l1d]\nentries = = 3\n')
    msg = one_error_line(run_cli("run", "-c", str(bad), "-w", "gups", "accesses=1k"))
    assert "bad.toml: line 3: not valid TOML at column 11" in msg


def test_workload_parameters_are_named_and_never_silently_chosen():
    msg = one_error_line(run_cli("run", "-c", "tiny", "-w", "gups", "footprint"))
    assert "workload `gups`" in msg and "`footprint` must look like key=value" in msg
    msg = one_error_line(run_cli("run", "-c", "tiny", "-w", "gups", "footprint=1M", "footprint=2M"))
    assert "`footprint` given twice" in msg


def test_a_failed_conversion_leaves_the_existing_output_alone(tmp_path):
    out = tmp_path / "keep.vmt"
    p = run_cli("generate", "gups", "footprint=1M", "accesses=10k", "-o", str(out))
    assert p.returncode == 0, p.stderr
    before = out.read_bytes()
    lackey = tmp_path / "bad.lackey"
    lackey.write_text(" L 04000000,8\n S 04000008,8\n L 04000010,8\nnot a lackey line\n")
    one_error_line(run_cli("convert", "--from", "lackey", str(lackey), "-o", str(out)))
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.lackey", "keep.vmt"], "no temporary file left"


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is required (scripts/setup.sh installs it)")
def test_tracing_a_missing_command_fails_and_keeps_the_output(tmp_path):
    out = tmp_path / "keep.vmt"
    out.write_bytes(b"keep")
    msg = one_error_line(run_cli("trace", "-o", str(out), "--", "/nonexistent/cmd"))
    assert "/nonexistent/cmd" in msg and "did not start" in msg
    assert out.read_bytes() == b"keep"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.vmt"]


@pytest.mark.parametrize("phys_mem", ["1T", "4T", "8T"])
def test_a_frame_table_beyond_its_bound_is_a_config_error(phys_mem):
    # An inverted table keeps an entry per frame: a huge `phys_mem` is an error naming
    # that key (not `anchors`, which was never set), within the memory limit.
    msg = one_error_line(run_cli("run", "-c", "tiny", "--set", f"machine.phys_mem={phys_mem}", "--set",
                                 "page_table.kind=inverted", "-w", "gups", "footprint=1M", "accesses=10k"))
    assert "machine.phys_mem" in msg and "256 GiB" in msg


def test_a_truncated_trace_is_reported_where_it_ends(tmp_path):
    full = tmp_path / "g.vmt"
    assert run_cli("generate", "gups", "footprint=16M", "accesses=200k", "-o", str(full)).returncode == 0
    cut = tmp_path / "cut.vmt"
    cut.write_bytes(full.read_bytes()[:1000])
    by_run = one_error_line(run_cli("run", "-c", "tiny", "-t", str(cut)))
    by_info = one_error_line(run_cli("info", str(cut)))
    offset = lambda m: int(m.split("at byte offset ")[1].split(":")[0])
    assert "cut.vmt" in by_run and offset(by_run) == offset(by_info) < 1000, (by_run, by_info)


def test_a_trace_through_a_fifo_is_read_once(tmp_path):
    import json
    import os
    import threading

    full = tmp_path / "g.vmt"
    assert run_cli("generate", "gups", "footprint=16M", "accesses=20k", "-o", str(full)).returncode == 0
    fifo = tmp_path / "fifo.vmt"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(full.read_bytes()))
    writer.start()
    p = run_cli("run", "-c", "tiny", "-t", str(fifo), "--json")
    writer.join()
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["totals"]["accesses"] == 20_000 and "content_hash" not in doc["source"]


# --- Signals: SIGINT (Ctrl-C) and SIGTERM stop every long command promptly and cleanly.

import json
import os
import signal
import sqlite3
import sys
import textwrap
import time

# How long a stopped command may take to exit. The engine checks once per batch of
# records (milliseconds), then a Python process exits (under 2 s unloaded, 6 s with
# both cores busy elsewhere). The bound is generous so that
# a loaded machine cannot flake it; a command that runs on to its end fails the
# exit-status check instead.
STOP_WITHIN = 15.0


def _foreground():
    """A child as a terminal's foreground job has it: SIGINT and SIGTERM at their default
    (a shell starts background jobs, such as a CI runner's, with SIGINT ignored, and a
    process keeps an ignored signal ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _wait_for(cond, timeout=60.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting for the command to start"
        time.sleep(0.05)


def _stop(p, sig, started):
    """Wait until `started()`, send `sig`, return (exit status, stderr, seconds to exit)."""
    _wait_for(lambda: started() or p.poll() is not None)
    assert p.poll() is None, p.communicate()
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    return p.returncode, err, time.monotonic() - t0


def _stopped(code, err, secs, sig):
    assert code == 128 + sig, (code, err)
    assert secs < STOP_WITHIN, secs
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    assert err.strip().splitlines()[-1] == f"vmlab: interrupted by {name}", err
    assert "Traceback" not in err and "panicked" not in err, err


# A workload that takes minutes to simulate, far longer than STOP_WITHIN.
LONG_RUN = ["gups", "footprint=1G", "accesses=4G"]


def _long_input(tmp_path):
    """A trace that takes a conversion longer than the test waits."""
    path = tmp_path / "long.vmt"
    assert run_cli("generate", "gups", "footprint=64M", "accesses=5M", "-o", str(path)).returncode == 0
    return path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", ["run", "generate", "convert"])
def test_a_signal_stops_a_command_and_leaves_no_partial_output(command, sig, tmp_path):
    out = tmp_path / "out" / "keep"
    out.parent.mkdir()
    out.write_bytes(b"keep")
    if command == "run":
        args = ["run", "-c", "skylake", "-w", *LONG_RUN, "-o", str(out)]
    elif command == "generate":
        args = ["generate", "gups", "footprint=1G", "accesses=1G", "-o", str(out)]
    else:
        args = ["convert", "--to", "champsim", str(_long_input(tmp_path)), "-o", str(out)]
    p = subprocess.Popen(vmlab_cmd() + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_foreground)
    # Started: the Python console script has handed over to the engine (its temporary
    # output exists, or for `run` a moment has passed).
    begun = time.monotonic()
    started = (lambda: time.monotonic() - begun > 1.5) if command == "run" else (lambda: len(list(out.parent.iterdir())) > 1)
    _stopped(*_stop(p, sig, started), sig)
    assert out.read_bytes() == b"keep"
    assert [f.name for f in out.parent.iterdir()] == ["keep"], "no temporary file left"


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is required (scripts/setup.sh installs it)")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_trace_kills_the_traced_programs_and_cleans_up(sig, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "keep.vmt"
    out.write_bytes(b"keep")
    marker = f"vmlab-test-{os.getpid()}-{sig}"
    # A parent that forks a child: both run under valgrind until killed.
    script = "sleep 1000 & while :; do :; done"
    p = subprocess.Popen(vmlab_cmd() + ["trace", "--engine", "lackey", "-o", str(out), "--", "sh", "-c", script, marker],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmpdir)},
                         preexec_fn=_foreground)
    # Only the signal to vmlab itself: the traced programs must not outlive it.
    _stopped(*_stop(p, sig, lambda: any(tmpdir.glob("vmlab-trace-*/vg.*"))), sig)
    _wait_for(lambda: not processes_with(marker), timeout=STOP_WITHIN)
    assert out.read_bytes() == b"keep"
    assert list(tmpdir.iterdir()) == [], "the trace's temporary files are removed"
    assert [f.name for f in tmp_path.iterdir() if f.name != "tmp"] == ["keep.vmt"]


def test_python_runs_raise_keyboard_interrupt_mid_run():
    script = textwrap.dedent(f"""
        import sys, time, vmlab
        print("start", flush=True)
        t0 = time.monotonic()
        try:
            vmlab.run("skylake", workload="gups", footprint="1G", accesses="4G")
        except KeyboardInterrupt:
            print(f"interrupted {{time.monotonic() - t0:.2f}}", flush=True)
            sys.exit(0)
        print("ran to the end", flush=True)
    """)
    p = subprocess.Popen([_python(), "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_foreground)
    assert p.stdout.readline() == "start\n"
    time.sleep(1.0)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out.startswith("interrupted"), (out, err)
    assert time.monotonic() - t0 < STOP_WITHIN


def _python():
    venv = os.path.join(os.path.dirname(vmlab_cmd()[0]), "python")
    return venv if os.path.exists(venv) else sys.executable


def _spec(tmp_path, accesses="10M", seeds=12, store="s.sqlite"):
    spec = tmp_path / "s.toml"
    spec.write_text(textwrap.dedent(f"""
        [sweep]
        name = "sig"
        store = "{store}"
        seeds = {list(range(1, seeds + 1))}
        jobs = 2
        one_pass = false
        [[config]]
        name = "sky"
        preset = "skylake"
        [[workload]]
        name = "gups"
        params = {{ footprint = "64M", accesses = "{accesses}" }}
    """))
    return spec


def _recorded(store):
    try:
        return sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs WHERE status = 'ok'").fetchone()[0]
    except sqlite3.Error:
        return 0


# How long a stopped sweep may take to exit, its workers gone: under 0.1 s unloaded; the
# bound leaves room for a loaded two-core machine.
SWEEP_STOP_WITHIN = 3.0

# A signal to the sweep alone (`kill PID`), or to its process group (a terminal's Ctrl-C, `kill -- -PGID`).
SWEEP_SIGNALS = [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGTERM, True)]
SWEEP_SIGNAL_IDS = ["SIGINT-sweep-alone", "SIGINT-process-group", "SIGTERM-sweep-alone", "SIGTERM-process-group"]


def _children(pid):
    """The pids of `pid`'s live child processes (its workers)."""
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                kids.append(int(d))
    return kids


def _alive(pid):
    """Whether `pid` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _signal_sweep(p, sig, to_group):
    """Send `sig` to the sweep `p` (or its group); return (stdout, stderr, seconds to exit)."""
    t0 = time.monotonic()
    if to_group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    return out, err, time.monotonic() - t0


def _sweep_stopped(p, sig, err, secs, workers):
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert secs < SWEEP_STOP_WITHIN, secs
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    lines = err.strip().splitlines()
    assert lines[-1] == f"vmlab: interrupted by {name}", err
    assert "run the sweep again to resume" in lines[-2], err
    assert "Traceback" not in err and "panicked" not in err, err
    # The workers are gone when the sweep is: none runs on to finish its run.
    assert workers and not [w for w in workers if _alive(w)], workers


@pytest.mark.parametrize("sig, to_group", SWEEP_SIGNALS[:3], ids=SWEEP_SIGNAL_IDS[:3])
def test_a_signal_stops_a_sweep_and_its_workers_and_a_rerun_resumes(sig, to_group, tmp_path):
    spec = _spec(tmp_path)
    store = tmp_path / "s.sqlite"
    # A session of its own, as a terminal's foreground job is: Ctrl-C goes to the group.
    p = subprocess.Popen(vmlab_cmd() + ["sweep", str(spec), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, preexec_fn=_foreground)
    _wait_for(lambda: _recorded(store) >= 1 or p.poll() is not None, timeout=120)
    workers = _children(p.pid)
    _, err, secs = _signal_sweep(p, sig, to_group)
    _sweep_stopped(p, sig, err, secs, workers)
    assert _gone(p.pid), "nothing of the sweep's process group is left"
    done = _recorded(store)
    assert 1 <= done < 12
    assert sqlite3.connect(store).execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0, "claims released"
    again = subprocess.run(vmlab_cmd() + ["sweep", str(spec), "--quiet"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"12 runs: {done} already in" in again.stdout and f"{12 - done} ran, 0 failed" in again.stdout


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("sig, to_group", SWEEP_SIGNALS, ids=SWEEP_SIGNAL_IDS)
def test_a_signal_stops_a_sweep_of_long_runs_at_once(sig, to_group, jobs, tmp_path):
    # Runs of minutes each: a sweep that waited for its runs in flight would take that long.
    spec = tmp_path / "long.toml"
    spec.write_text(textwrap.dedent("""
        [sweep]
        seeds = [1, 2, 3, 4]
        one_pass = false
        [[config]]
        name = "tiny"
        preset = "tiny"
        [[workload]]
        name = "gups"
        params = { footprint = "16M", accesses = "200M" }
    """))
    p = subprocess.Popen(vmlab_cmd() + ["sweep", str(spec), "-j", str(jobs)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_foreground)
    _wait_for(lambda: len(_children(p.pid)) >= jobs or p.poll() is not None, timeout=60)
    time.sleep(1.5)  # the workers are well into their runs
    workers = _children(p.pid)
    assert len(workers) == jobs and p.poll() is None, p.communicate()
    out, err, secs = _signal_sweep(p, sig, to_group)
    _sweep_stopped(p, sig, err, secs, workers)
    assert out == ""
    assert "0 runs recorded" in err, err
    db = sqlite3.connect(tmp_path / "long.sqlite")
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0, "claims released"


def _gone(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_two_sweeps_on_one_store_share_the_runs(tmp_path):
    spec = _spec(tmp_path, accesses="1M", seeds=8)
    ps = [subprocess.Popen(vmlab_cmd() + ["sweep", str(spec), "--quiet", "-j", "1"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in ps]
    assert all(p.returncode == 0 for p in ps), outs
    ran = [int(o.split(" ran,")[0].rsplit(" ", 1)[1]) for o, _ in outs]
    assert sum(ran) == 8, outs  # each run once, by one sweep or the other
    assert _recorded(tmp_path / "s.sqlite") == 8


def test_a_dead_sweeps_claims_are_taken_over(tmp_path):
    spec = _spec(tmp_path, accesses="100k", seeds=3)
    store = tmp_path / "s.sqlite"
    dead = subprocess.Popen(["true"])
    dead.wait()
    import socket

    db = sqlite3.connect(store)
    db.execute("CREATE TABLE claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, heartbeat REAL NOT NULL)")
    from vmlab.sweep import load_spec

    for r in load_spec(spec).runs:
        db.execute("INSERT INTO claims VALUES (?, 'gone', ?, ?, ?)", (r["key"], socket.gethostname(), dead.pid, time.time()))
    db.commit()
    db.close()
    p = subprocess.run(vmlab_cmd() + ["sweep", str(spec), "--quiet"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "3 ran, 0 failed" in p.stdout, (p.stdout, p.stderr)


# --- The results store and reports: one error naming the file, never a traceback.

def _real_store(tmp_path):
    spec = _spec(tmp_path, accesses="10k", seeds=1, store="good.sqlite")
    assert subprocess.run(vmlab_cmd() + ["sweep", str(spec), "--quiet"], capture_output=True, timeout=300).returncode == 0
    return tmp_path / "good.sqlite"


def test_a_store_that_is_not_one_is_one_error_naming_it(tmp_path):
    import vmlab

    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(_real_store(tmp_path).read_bytes()[:3000])
    for bad in (text, cut, tmp_path):
        with pytest.raises(vmlab.StoreError) as e:
            vmlab.load(bad)
        assert str(bad) in str(e.value)
        msg = one_error_line(run_cli("report", str(bad), "-o", str(tmp_path / "r")))
        assert str(bad) in msg
    with pytest.raises(vmlab.StoreError, match="no results store"):
        vmlab.load(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists(), "loading never creates a store"


def _files_in(d):
    """Every file under `d` with its bytes and modification time."""
    return {str(f.relative_to(d)): (f.read_bytes() if f.is_file() else None, f.lstat().st_mtime_ns)
            for f in sorted(d.rglob("*"))}


def test_reading_a_store_never_writes_a_file(tmp_path):
    import vmlab

    real = _real_store(tmp_path)
    d = tmp_path / "stores"
    d.mkdir()
    (d / "empty.sqlite").write_bytes(b"")
    (d / "notes.txt").write_text("not a database\n")
    other = sqlite3.connect(d / "other.sqlite")
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    os.mkfifo(d / "fifo.sqlite")
    shutil.copy(real, d / "good.sqlite")
    before = _files_in(d)
    for bad in ("empty.sqlite", "notes.txt", "other.sqlite", "fifo.sqlite"):
        with pytest.raises(vmlab.StoreError, match="not a vmlab results store") as e:
            vmlab.load(d / bad)
        assert str(d / bad) in str(e.value)
        msg = one_error_line(run_cli("report", str(d / bad), "-o", str(tmp_path / "r")))
        assert str(d / bad) in msg and "not a vmlab results store" in msg
    assert not (tmp_path / "r").exists()
    # A store (WAL journaling) is read without SQLite's -wal and -shm files appearing.
    assert len(vmlab.load(d / "good.sqlite")) == 1
    p = run_cli("report", str(d / "good.sqlite"), "-o", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr
    assert _files_in(d) == before, "no file created or changed"


@pytest.mark.parametrize("kind", ["fifo", "directory", "binary", "huge"])
def test_a_spec_that_is_no_spec_file_is_one_error_naming_it(kind, tmp_path):
    import vmlab

    spec = tmp_path / "s.toml"
    if kind == "fifo":
        os.mkfifo(spec)  # never opened: a read would wait for a writer forever
    elif kind == "directory":
        spec.mkdir()
    elif kind == "binary":
        spec.write_bytes(b"\xff\xfe[sweep]\n")
    else:
        spec.write_bytes(b"#" * (17 << 20))
    msg = one_error_line(run_cli("sweep", str(spec), "--quiet"))
    assert str(spec) in msg and "sweep spec" in msg, msg
    with pytest.raises(vmlab.VmlabError, match="sweep spec"):
        vmlab.sweep(spec, quiet=True)
    assert [f.name for f in tmp_path.iterdir()] == ["s.toml"], "no store created"


@pytest.mark.parametrize("kind", ["fifo", "directory", "other-database"])
def test_a_sweep_refuses_a_store_that_is_no_store_file(kind, tmp_path):
    import vmlab

    spec = _spec(tmp_path, accesses="1k", seeds=1)
    store = tmp_path / "store"
    if kind == "fifo":
        os.mkfifo(store)
    elif kind == "directory":
        store.mkdir()
    else:
        db = sqlite3.connect(store)
        db.execute("CREATE TABLE t (x)")
        db.commit()
        db.close()
    before = _files_in(tmp_path)
    msg = one_error_line(run_cli("sweep", str(spec), "--quiet", "--store", str(store)))
    assert str(store) in msg and "results store" in msg
    with pytest.raises(vmlab.StoreError, match="results store"):
        vmlab.sweep(spec, store=store, quiet=True)
    assert _files_in(tmp_path) == before


def _old_report(tmp_path):
    """A report directory holding an earlier page and a file of the user's."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "index.html").write_text("old page")
    (out / "notes.txt").write_text("mine")
    return out


def test_an_interrupted_report_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import importlib

    import vmlab

    report = importlib.import_module("vmlab.report")  # the module (`vmlab.report` is its function)
    store = _real_store(tmp_path)
    out = _old_report(tmp_path)
    before = _files_in(out)
    drawn = []
    draw = report.draw

    def interrupted(section):
        drawn.append(section.name)
        if len(drawn) == 3:  # two charts are written by now
            raise KeyboardInterrupt
        return draw(section)

    monkeypatch.setattr(report, "draw", interrupted)
    with pytest.raises(KeyboardInterrupt):
        vmlab.report(store, out)
    assert _files_in(out) == before
    assert sorted(f.name for f in tmp_path.iterdir()) == ["good.sqlite", "r", "s.toml"], "nothing staged is left"
    # Completed, the report replaces its own files and leaves the others alone.
    monkeypatch.setattr(report, "draw", draw)
    vmlab.report(store, out)
    assert (out / "index.html").read_text().startswith("<!doctype html>") and (out / "notes.txt").read_text() == "mine"
    assert not [f for f in out.iterdir() if f.name.startswith(".")], "nothing staged is left"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_report_and_leaves_the_directory_as_it_was(sig, tmp_path):
    pytest.importorskip("matplotlib")
    store = _real_store(tmp_path)
    out = _old_report(tmp_path)
    before = _files_in(out)
    p = subprocess.Popen(vmlab_cmd() + ["report", str(store), "-o", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_foreground)
    # Started: its files are being written apart (a hidden directory inside the report's).
    _stopped(*_stop(p, sig, lambda: any(f.name.startswith(".") for f in out.iterdir())), sig)
    after = _files_in(out)
    # The old report, or (a signal in the last milliseconds, once every file was in place) the whole new one.
    complete = len(after) == 16 and after["index.html"][0].startswith(b"<!doctype html>")
    assert after == before or complete, sorted(after)
    assert not [f for f in out.iterdir() if f.name.startswith(".")], "nothing staged is left"


def test_an_interrupted_reproduce_all_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    import vmlab.reproduce as reproduce

    out = tmp_path / "pages"
    out.mkdir()
    (out / "README.md").write_text("old summary")
    before = _files_in(out)
    done = []

    def one_paper(paper, quick, traces):
        done.append(paper)
        if len(done) == 3:
            raise KeyboardInterrupt
        return f"# {paper}", []

    monkeypatch.setattr(reproduce, "reproduce_with_headlines", one_paper)
    with pytest.raises(KeyboardInterrupt):
        reproduce.reproduce_all(True, out)
    assert _files_in(out) == before and list(tmp_path.iterdir()) == [out]
    monkeypatch.setattr(reproduce, "reproduce_with_headlines", lambda paper, quick, traces: (f"# {paper}", []))
    reproduce.reproduce_all(True, out)
    assert sorted(f.name for f in out.iterdir()) == sorted(["README.md", *(f"{p}.md" for p in reproduce.PAPERS)])
    assert (out / "README.md").read_text() != "old summary"


def test_an_unwritable_report_directory_is_one_error_naming_it(tmp_path):
    pytest.importorskip("matplotlib")
    store = _real_store(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    msg = one_error_line(run_cli("report", str(store), "-o", str(blocker / "sub")))
    assert str(blocker / "sub") in msg


# --- Wrong Python argument types: a VmlabError (and TypeError) naming the argument.

@pytest.mark.parametrize("call, name", [
    (lambda v: v.run("tiny", trace=5), "trace"),
    (lambda v: v.run("tiny", workload=5), "workload"),
    (lambda v: v.run("tiny", workload="gups", overrides=5), "overrides"),
    (lambda v: v.run("tiny", workload="gups", overrides="tlb.l1d.entries=8"), "overrides"),
    (lambda v: v.run("tiny", workload="gups", progress="yes"), "progress"),
    (lambda v: v.run(5, workload="gups"), "config"),
    (lambda v: v.run("tiny", workload="gups", accesses=None), "accesses"),
    (lambda v: v.run_many(["tiny"], workload="gups", threads=-1), "threads"),
    (lambda v: v.run_many("tiny", workload="gups"), "configs"),
    (lambda v: v.compare("radix", workload="gups"), "designs"),
    (lambda v: v.pt_compare(workload="gups", designs=[1]), "designs"),
    (lambda v: v.mrc(workload="gups", max_ways=0), "max_ways"),
    (lambda v: v.trace_info(5), "path"),
    (lambda v: v.pt_compare(workload="gups", designs=[]), "designs"),
    (lambda v: v.pt_compare(workload="gups", designs={}), "designs"),
    *[(lambda v, x=x: v.sweep(x), "spec_path") for x in (None, 5, 1.5, [], b"x", True, "x\0y", "")],
    *[(lambda v, x=x: v.sweep("s.toml", store=x), "store") for x in (5, b"x", 0, [], {}, "", "x\0y")],
    *[(lambda v, x=x: v.sweep("s.toml", quiet=x), "quiet") for x in (1, "yes", None)],
    *[(lambda v, x=x: v.sweep("s.toml", address=x), "address") for x in (0, [], "")],
    *[(lambda v, x=x: v.sweep("s.toml", jobs=x), "jobs") for x in (2 ** 70, -1, 1.5, True)],
    (lambda v: v.sweep("s.toml", backend=5), "backend"),
    *[(lambda v, x=x: v.report(x, "out"), "store") for x in (-1, 1.5, [], math.nan, 2 ** 70, "", "x\0y")],
    *[(lambda v, x=x: v.report("s.sqlite", x), "out_dir") for x in (5, [], b"x", math.nan, "")],
    *[(lambda v, x=x: v.load(x), "store") for x in (5, b"x", "", "x\0y")],
])
def test_wrong_python_types_name_the_argument(call, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a call that wrongly went ahead would find nothing, and write nothing elsewhere
    import vmlab

    with pytest.raises(vmlab.VmlabError) as e:
        call(vmlab)
    assert isinstance(e.value, TypeError) and f"`{name}`" in str(e.value), e.value
    assert list(tmp_path.iterdir()) == [], "nothing written"


def test_a_report_without_matplotlib_has_the_tables_and_says_what_to_install(tmp_path):
    store = _real_store(tmp_path)
    # A module that fails to import stands in for the missing package.
    shadow = tmp_path / "shadow"
    (shadow / "matplotlib").mkdir(parents=True)
    (shadow / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    p = subprocess.run(vmlab_cmd() + ["report", str(store), "-o", str(tmp_path / "r")], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(shadow)}, timeout=120)
    # The numbers are still worth having: the page is written with its tables, and one
    # line says what the charts need.
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "matplotlib" in lines[0] and "pip install 'vmlab[plots]'" in lines[0], p.stderr
    assert (tmp_path / "r" / "index.html").exists() and not list((tmp_path / "r").glob("*.png"))


def test_an_ignored_sigint_stays_ignored():
    # A shell's background job (`vmlab run ... &` in a script) starts with SIGINT ignored,
    # and keeps it so; SIGTERM still stops it cleanly.
    def background():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    p = subprocess.Popen(vmlab_cmd() + ["run", "-c", "skylake", "-w", *LONG_RUN], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, preexec_fn=background)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert p.poll() is None, p.communicate()
    _stopped(*_stop(p, signal.SIGTERM, lambda: True), signal.SIGTERM)
