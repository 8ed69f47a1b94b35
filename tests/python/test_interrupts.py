"""Signals where no loop runs, and what a traced program started: a stop request ends
the command within a second (crate::interrupt's watchdog), removing unfinished outputs,
and `vmlab trace` leaves nothing of the command running."""

import os
import signal
import subprocess
import time

import pytest

from conftest import processes_with, vmlab_cmd


def _term_after(p, delay=1.0, sig=signal.SIGTERM):
    time.sleep(delay)
    p.send_signal(sig)
    start = time.monotonic()
    try:
        _, err = p.communicate(timeout=15)
    finally:
        p.kill()
    return time.monotonic() - start, err


@pytest.mark.parametrize("what", ["trace", "config", "convert"])
def test_a_command_blocked_on_a_fifo_stops_on_a_signal(tmp_path, what):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out.vmt"
    out.write_bytes(b"old")
    args = {
        "trace": ["run", "-c", "tiny", "-t", str(fifo)],
        "config": ["run", "-c", str(fifo), "-w", "gups", "accesses=1k"],
        "convert": ["convert", "--from", "lackey", str(fifo), "-o", str(out)],
    }[what]
    # A FIFO nobody writes: the open blocks, where no loop checks for a stop.
    p = subprocess.Popen(vmlab_cmd() + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took, err = _term_after(p)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert took < 5, took
    assert err.strip().splitlines() == ["vmlab: interrupted by SIGTERM"]
    assert out.read_bytes() == b"old" and sorted(x.name for x in tmp_path.iterdir()) == ["fifo", "out.vmt"]


def test_a_repeated_sigterm_still_stops_the_command_cleanly(tmp_path):
    # SIGTERM's handler is not one-shot (SIGINT's is): a second SIGTERM, as a process
    # manager or a signal sent to the process group as well may deliver, asks for the
    # same stop instead of killing the process with the default action.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = subprocess.Popen(vmlab_cmd() + ["run", "-c", "tiny", "-t", str(fifo)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=15)
    finally:
        p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "vmlab: interrupted by SIGTERM"


def test_a_stalled_writer_does_not_hold_a_command_past_a_signal(tmp_path):
    trace = tmp_path / "g.vmt"
    subprocess.run(vmlab_cmd() + ["generate", "gups", "accesses=100k", "-o", str(trace)], check=True, stderr=subprocess.DEVNULL)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = subprocess.Popen(vmlab_cmd() + ["info", str(fifo)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # A writer that sends the start of a real trace and then stalls: the read blocks
    # mid-file.
    with open(fifo, "wb") as w:
        w.write(trace.read_bytes()[:300])
        w.flush()
        took, err = _term_after(p)
    assert p.returncode == 128 + signal.SIGTERM and took < 5, err


@pytest.mark.parametrize("engine", ["qemu", "lackey"])
def test_an_interrupted_trace_kills_what_the_command_started(tmp_path, engine):
    # A grandchild that ignores SIGINT and SIGTERM, started by a shell the QEMU engine
    # runs natively after exec.
    marker = f"987.{os.getpid()}{len(engine)}"
    script = f'sh -c "trap \\"\\" INT TERM; exec sleep {marker}" & wait'
    p = subprocess.Popen(vmlab_cmd() + ["trace", "--engine", engine, "-o", str(tmp_path / "t.vmt"), "--", "/bin/sh", "-c", script],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # The grandchild alone: vmlab's and the shells' command lines hold the marker too,
    # and vmlab's appears before its signal handlers are installed.
    deadline = time.monotonic() + 60
    while not processes_with(marker, without="trap") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker, without="trap"), "the grandchild never started"
    _, err = _term_after(p, delay=0.2)
    assert p.returncode == 128 + signal.SIGTERM, err
    time.sleep(0.5)
    left = processes_with(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left


@pytest.mark.parametrize("args", [["workloads"], ["info", "--help"], ["--version"]], ids=" ".join)
def test_a_closed_stdout_is_one_error_line_for_rust_commands(args):
    p = subprocess.run(vmlab_cmd() + args, capture_output=False, stderr=subprocess.PIPE, text=True, timeout=60,
                       preexec_fn=lambda: os.close(1))
    assert p.returncode == 1 and p.stderr.strip().splitlines() == ["vmlab: error: standard output: Bad file descriptor (os error 9)"], p.stderr
