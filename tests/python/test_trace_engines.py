"""The two tracing engines of `vmlab trace` (docs/importers.md): QEMU user mode with
vmlab's plugin against valgrind lackey, the reference, on programs written for the test.

The engines run different dynamic loaders and place mappings differently, so the
comparison is on memory the program maps at a fixed address and touches with plain
loads and stores: there, both must report the same accesses (count, kind and size), the
same pages, and the same address-space events, process by process.
"""

import collections
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import vmlab

from conftest import processes_with, vmlab_cmd

pytestmark = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the QEMU engine traces x86-64 programs")

BASE = 0x600000000000
PAGES = 64

# Touches a region mapped at BASE with known accesses, in the parent and in a forked
# child: single stores and loads, a read-modify-write in one instruction (lackey's `M`,
# which QEMU reports as a load and a store), and a 16-byte SSE load (QEMU splits it)
# whose value is used (valgrind drops a load whose result nothing reads).
# argv[1]: "exit N" ends with status N, "kill" kills itself, "exec" execs /bin/true,
# "closefds": the child closes every descriptor above 2 (as Python's subprocess does).
PROGRAM = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#define BASE ((char *)0x600000000000UL)
#define PAGE 4096
static void rmw(volatile unsigned long *p, unsigned long v) { __asm__ volatile("addq %1, %0" : "+m"(*p) : "r"(v)); }
static unsigned long load16(volatile void *p) {
    unsigned long v;
    __asm__ volatile("movdqu %1, %%xmm0\n\tmovq %%xmm0, %0" : "=r"(v) : "m"(*(volatile char (*)[16])p) : "xmm0");
    return v;
}
int main(int argc, char **argv) {
    volatile unsigned long *p = mmap(BASE, 64 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if ((char *)p != BASE) return 2;
    unsigned long sum = 0;
    for (int i = 0; i < 40; i++) p[i * 512] = i;
    for (int i = 0; i < 40; i += 2) sum += p[i * 512 + 1];
    for (int i = 0; i < 10; i++) rmw(&p[i * 512 + 2], i);
    for (int i = 0; i < 6; i++) sum += load16((char *)BASE + i * PAGE + 64);
    mprotect(BASE + 48 * PAGE, 8 * PAGE, PROT_READ);
    munmap(BASE + 56 * PAGE, 8 * PAGE);
    pid_t c = fork();
    if (c == 0) {
        if (argc > 1 && !strcmp(argv[1], "closefds")) close_range(3, ~0U, 0);
        for (int i = 0; i < 16; i++) p[(i + 8) * 512 + 3] = i;
        for (int i = 0; i < 4; i++) rmw(&p[(i + 30) * 512 + 4], i);
        _exit(0);
    }
    waitpid(c, 0, 0);
    if (argc > 2 && !strcmp(argv[1], "exit")) return atoi(argv[2]) + (int)(sum & 0);
    if (argc > 1 && !strcmp(argv[1], "kill")) kill(getpid(), SIGKILL);
    if (argc > 1 && !strcmp(argv[1], "exec")) execl("/bin/true", "true", (char *)0);
    return 0;
}
"""


def run_cli(*args, **kw):
    return subprocess.run(vmlab_cmd() + list(args), capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    for tool in ("cc", "valgrind", "qemu-x86_64"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is required (scripts/setup.sh installs it)")
    d = tmp_path_factory.mktemp("engines")
    (d / "touch.c").write_text(PROGRAM)
    subprocess.run(["cc", "-O1", "-o", str(d / "touch"), str(d / "touch.c")], check=True)
    return d / "touch"


def trace(program, engine, tmp_path, *args):
    out = tmp_path / f"{engine}.vmt"
    p = run_cli("trace", "--engine", engine, "-o", str(out), "--", str(program), *args)
    return p, out


def in_region(path):
    """Per process (in order of appearance): the accesses inside the fixed region as a
    Counter of (kind, size), its pages, and its address-space events, offsets from BASE."""
    order, accesses, pages, events = [], {}, {}, {}
    for r in vmlab.read_trace(path):
        kind = r[0]
        if kind in ("read", "write", "fetch"):
            va, size, pid = r[1], r[2], r[3]
            if pid not in order:
                order.append(pid)
            if BASE <= va < BASE + PAGES * 4096:
                accesses.setdefault(pid, collections.Counter())[(kind, size)] += 1
                pages.setdefault(pid, set()).add((va - BASE) >> 12)
        elif kind in ("mmap", "munmap", "mprotect"):
            pid, start = r[1], r[2]
            if BASE <= start < BASE + PAGES * 4096:
                events.setdefault(pid, []).append((kind, start - BASE, *r[3:]))
    return [(accesses.get(p), pages.get(p), events.get(p, [])) for p in order]


def test_qemu_reports_what_lackey_reports_process_by_process(program, tmp_path):
    (pq, q), (pl, l) = trace(program, "qemu", tmp_path), trace(program, "lackey", tmp_path)
    assert pq.returncode == 0 and pl.returncode == 0, (pq.stderr, pl.stderr)
    assert "traced by qemu" in pq.stderr and "traced by lackey" in pl.stderr
    ours, ref = in_region(q), in_region(l)
    assert len(ours) == len(ref) == 2, (ours, ref)
    assert ours == ref
    parent, child = ours
    # What the program does, counted by hand: 40 stores; 20 loads; 10 modifies (one
    # write each); six 16-byte loads; the child's 16 stores and 4 modifies.
    assert parent[0] == collections.Counter({("write", 8): 50, ("read", 8): 20, ("read", 16): 6})
    assert child[0] == collections.Counter({("write", 8): 20})
    assert parent[1] == set(range(40)) and child[1] == set(range(8, 24)) | set(range(30, 34))
    assert parent[2] == [("mmap", 0, 64 * 4096, 3, 0), ("mprotect", 48 * 4096, 8 * 4096, 1), ("munmap", 56 * 4096, 8 * 4096)]
    info = vmlab.trace_info(q)
    assert info["source"] == "qemu-user"


def test_the_fork_comes_before_the_childs_records_and_each_process_exits(program, tmp_path):
    p, out = trace(program, "qemu", tmp_path)
    assert p.returncode == 0, p.stderr
    recs = list(vmlab.read_trace(out))
    forks = [r for r in recs if r[0] == "fork"]
    assert len(forks) == 1
    parent, child = forks[0][1], forks[0][2]
    first_child = next(i for i, r in enumerate(recs) if r[0] in ("read", "write", "fetch") and r[3] == child)
    assert recs.index(forks[0]) < first_child
    assert recs[first_child - 1] == ("switch", child)
    assert [r[1] for r in recs if r[0] == "exit"] == [child, parent]


@pytest.mark.parametrize("engine", ["qemu", "lackey"])
@pytest.mark.parametrize("how,status", [(["exit", "3"], 3), (["kill"], None), (["exec"], 0)])
def test_exit_status_kill_and_exec_behave_alike(program, tmp_path, engine, how, status):
    p, out = trace(program, engine, tmp_path, *how)
    assert p.returncode == 0, p.stderr
    line = [l for l in p.stderr.strip().splitlines() if "command exit status" in l][-1]
    want = f"command exit status {status if status is not None else -1})"
    assert line.endswith(want), line
    recs = list(vmlab.read_trace(out))
    pids = {r[3] for r in recs if r[0] in ("read", "write")}
    assert len(pids) == 2
    if how == ["exec"]:
        # The process that exec'd ends: QEMU runs the new program natively, untraced, and
        # says so; lackey traces it under the same pid after an exit.
        assert any(r[0] == "exit" for r in recs)
        assert ("ran untraced" in p.stderr) == (engine == "qemu"), p.stderr


def test_a_child_that_closes_the_socket_stops_its_own_trace_only(program, tmp_path):
    p, out = trace(program, "qemu", tmp_path, "closefds")
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().endswith("command exit status 0)"), p.stderr
    # The parent is traced whole; the child, from its close on, not at all (and it ran
    # to its end: the plugin does not write into whatever file takes the number).
    [parent] = in_region(out)
    assert parent[0] == collections.Counter({("write", 8): 50, ("read", 8): 20, ("read", 16): 6})
    recs = list(vmlab.read_trace(out))
    [fork] = [r for r in recs if r[0] == "fork"]
    assert not any(r[0] == "write" and r[3] == fork[2] and r[1] >= BASE for r in recs)


@pytest.mark.parametrize("engine", ["qemu", "lackey"])
def test_a_missing_command_fails_alike(engine, tmp_path):
    out = tmp_path / "keep.vmt"
    out.write_bytes(b"keep")
    p = run_cli("trace", "--engine", engine, "-o", str(out), "--", "/nonexistent/cmd")
    assert p.returncode != 0
    # The last line is vmlab's (valgrind names the file on a line of its own first).
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("vmlab: error: ") and "Traceback" not in p.stderr, p.stderr
    assert "/nonexistent/cmd" in last and "did not start" in last
    assert out.read_bytes() == b"keep"


def test_auto_picks_qemu_for_programs_and_lackey_for_scripts(program, tmp_path):
    p = run_cli("trace", "-o", str(tmp_path / "p.vmt"), "--", str(program))
    assert p.returncode == 0 and "traced by qemu" in p.stderr, p.stderr
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\necho hello > /dev/null\n")
    script.chmod(0o755)
    p = run_cli("trace", "-o", str(tmp_path / "a.vmt"), "--", str(script))
    assert p.returncode == 0 and "traced by lackey" in p.stderr and "#! script" in p.stderr, p.stderr
    # Asked for, QEMU runs a script through its interpreter.
    out = tmp_path / "s.vmt"
    p = run_cli("trace", "--engine", "qemu", "-o", str(out), "--", str(script))
    assert p.returncode == 0, p.stderr
    assert "traced by qemu" in p.stderr
    info = vmlab.trace_info(out)
    assert info["source"] == "qemu-user" and info["instructions"] > 10_000, info


def test_a_missing_plugin_is_a_clear_error(tmp_path):
    p = run_cli("trace", "--engine", "qemu", "-o", str(tmp_path / "t.vmt"), "--", "true",
                env={**os.environ, "VMLAB_QEMU_PLUGIN": str(tmp_path / "nowhere.so")})
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode != 0 and len(lines) == 1, p.stderr
    assert "nowhere.so" in lines[0] and "setup.sh" in lines[0]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_qemu_trace_and_kills_the_traced_processes(sig, tmp_path):
    out = tmp_path / "keep.vmt"
    out.write_bytes(b"keep")
    marker = f"vmlab-qemu-test-{os.getpid()}-{sig}"
    # A parent and a forked subshell (no exec: both stay under QEMU), spinning.
    script = "( while :; do :; done ) & while :; do :; done"
    p = subprocess.Popen(vmlab_cmd() + ["trace", "--engine", "qemu", "-o", str(out), "--", "sh", "-c", script, marker],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), signal.signal(signal.SIGTERM, signal.SIG_DFL)))
    end = time.monotonic() + 60
    while len(processes_with(marker)) < 2:
        assert time.monotonic() < end and p.poll() is None, p.stderr.read() if p.poll() is not None else "not started"
        time.sleep(0.05)
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    assert time.monotonic() - t0 < 15, "stops within seconds"
    assert err.strip().splitlines()[-1].startswith("vmlab: interrupted by SIG"), err
    end = time.monotonic() + 15
    while processes_with(marker):
        assert time.monotonic() < end, f"traced processes outlived vmlab: {processes_with(marker)}"
        time.sleep(0.05)
    assert out.read_bytes() == b"keep"
    assert [f.name for f in tmp_path.iterdir()] == ["keep.vmt"]
