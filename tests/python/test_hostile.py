"""Hostile input and faults, through the CLI as a user meets them: each case is one
clear error line and a non-zero exit (or a correct result), never a panic, a
traceback, unbounded memory, or a destroyed output file."""

import resource
import shutil
import subprocess

import pytest

from conftest import vmlab_cmd

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
    assert "bad.toml" in msg and "line 3, column 11" in msg


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
