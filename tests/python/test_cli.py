import json
import subprocess

from conftest import vmlab_cmd


def run_cli(*args, **kw):
    return subprocess.run(vmlab_cmd() + list(args), capture_output=True, text=True, **kw)


def test_run_json_is_clean_json_on_stdout():
    p = run_cli("run", "--config", "tiny", "--workload", "gups", "accesses=10k", "footprint=8M", "--json", "--progress")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["totals"]["accesses"] == 10000


def test_set_overrides_any_key():
    p = run_cli("run", "-c", "tiny", "--set", "tlb.l1d.entries=2", "--set", "tlb.l1d.ways=1",
                "--workload", "stream", "accesses=1000", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["tlb"]["l1d"]["entries"] == 2


def one_error_line(p):
    assert p.returncode != 0
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("vmlab: error: ")
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr
    return lines[0]


def test_bad_inputs_give_one_clear_error_line(tmp_path):
    garbage = tmp_path / "garbage.vmt"
    garbage.write_bytes(b"\x00\x01 definitely not a trace" * 10)
    msg = one_error_line(run_cli("run", "--trace", str(garbage)))
    assert "garbage.vmt" in msg and "bad magic" in msg

    good = tmp_path / "good.vmt"
    assert run_cli("generate", "stream", "accesses=200k", "-o", str(good)).returncode == 0
    data = good.read_bytes()
    trunc = tmp_path / "trunc.vmt"
    trunc.write_bytes(data[: len(data) // 2])
    msg = one_error_line(run_cli("run", "--trace", str(trunc)))
    assert "trunc.vmt" in msg and "byte offset" in msg

    corrupt = tmp_path / "corrupt.vmt"
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(b))
    msg = one_error_line(run_cli("info", str(corrupt)))
    assert "corrupt.vmt" in msg and "byte offset" in msg

    msg = one_error_line(run_cli("run", "--set", "tlb.l1d_4k.entriez=3", "--workload", "gups"))
    assert "tlb.l1d_4k.entriez" in msg
    msg = one_error_line(run_cli("run", "--set", "tlb.l1d_4k.entries=0", "--workload", "gups"))
    assert "tlb.l1d_4k.entries" in msg
    msg = one_error_line(run_cli("run", "--set", "tlb.l1d_4k.ways=5", "--workload", "gups"))
    assert "tlb.l1d_4k.ways" in msg
    msg = one_error_line(run_cli("run", "--set", "machine.phys_mem=1M", "--workload", "gups", "accesses=100k"))
    assert "physical memory exhausted" in msg
    # Elphinstone's MPT maps 4K pages only: a 2M page size is a config error, not a panic.
    msg = one_error_line(run_cli("run", "--set", 'page_table.kind="mpt"', "--set", 'os.page_size="2M"', "--workload", "gups"))
    assert "os.page_size" in msg and "mpt" in msg


def test_demo_quick_runs():
    p = run_cli("demo", "--quick")
    assert p.returncode == 0, p.stderr
    assert "gups" in p.stdout and "skylake 2M" in p.stdout and "tiny 4K" in p.stdout
    assert "L1 DTLB miss %" in p.stdout and "M acc/s" in p.stdout


def test_info_on_a_real_trace(real_trace):
    p = run_cli("info", str(real_trace), "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["source"] == "valgrind-lackey"
    assert info["counts"]["fetches"] > 10000
    assert info["counts"]["mmap"] > 0
    assert info["pages_touched"]["4K"] >= info["pages_touched"]["2M"] >= 1


def test_pt_compare_orders_sizes_like_the_thesis():
    p = run_cli("pt", "compare", "-w", "sparse", "pages=512", "accesses=20k",
                "--designs", "radix,mpt,hashed,clustered,guarded16", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["design"]: r for r in json.loads(p.stdout)}
    # Sparse space: the multilevel tables blow up, hashed/clustered/guarded stay small.
    for d in ("hashed", "clustered", "guarded16"):
        assert rows["radix"]["bytes_per_mapped_page"] > 10 * rows[d]["bytes_per_mapped_page"]
        assert rows["mpt"]["bytes_per_mapped_page"] > 10 * rows[d]["bytes_per_mapped_page"]
    # Elphinstone's MPT has six levels to radix's four: more references per refill.
    assert rows["mpt"]["refs_per_walk"] > rows["radix"]["refs_per_walk"]
    # Same input, same TLB: every design sees the same walks.
    assert len({r["walks"] for r in rows.values()}) == 1


def test_pt_size_dense_and_sparse_spaces():
    def size(*workload):
        p = run_cli("pt", "size", "-w", *workload, "--designs", "radix,mpt,hashed,guarded16", "--json")
        assert p.returncode == 0, p.stderr
        return {r["design"]: r["bytes_per_mapped_page"] for r in json.loads(p.stdout)}

    # Dense: 64 MiB touched page by page; 32 leaf tables + 3 upper nodes for 16384 pages.
    dense = size("stream", "footprint=64M", "stride=4096", "accesses=16384")
    assert dense["radix"] == 35 * 4096 / 16384
    # Elphinstone's MPT: 32 leaves of 256 PTE pairs, 4 internal nodes, one frame of roots.
    assert dense["mpt"] == 37 * 4096 / 16384
    # Sparse: one page per 4 MiB-aligned region somewhere in the space; radix pays a
    # leaf table per page, the others stay proportional to the pages mapped.
    sparse = size("sparse", "pages=512", "accesses=20k")
    assert sparse["radix"] > 100 * dense["radix"]
    assert sparse["mpt"] > 100 * dense["mpt"]
    assert sparse["hashed"] < sparse["radix"] / 10 and sparse["guarded16"] < sparse["radix"] / 10


def test_pt_refill_view_prints_refill_columns():
    p = run_cli("pt", "refill", "-w", "gups", "footprint=16M", "accesses=20k", "--designs", "radix,long-vhpt-pt")
    assert p.returncode == 0, p.stderr
    header, *rows = p.stdout.strip().splitlines()
    assert "lines/refill" in header and "cycles/refill" in header and "B/page" not in header
    assert [r.split()[0] for r in rows] == ["radix", "long-vhpt-pt"]


def test_pt_compare_rejects_unknown_designs():
    msg = one_error_line(run_cli("pt", "compare", "-w", "gups", "--designs", "radix,nosuch"))
    assert "nosuch" in msg


def test_python_side_errors_are_one_line_too(tmp_path):
    one_error_line(run_cli("demo", "--bogus"))
    msg = one_error_line(run_cli("run", "--trace", str(tmp_path / "missing.vmt")))
    assert "missing.vmt" in msg


def test_help_lists_rust_and_python_commands():
    p = run_cli("--help")
    assert p.returncode == 0, p.stderr
    assert "run" in p.stdout and "trace" in p.stdout and "demo" in p.stdout
    v = run_cli("--version")
    assert v.returncode == 0 and vmlab_version() in v.stdout


def test_a_closed_pipe_ends_quietly():
    p = subprocess.run(" ".join(f"'{c}'" for c in vmlab_cmd()) + " workloads | head -c 1",
                       shell=True, capture_output=True, text=True)
    assert p.stderr == ""


def test_python_dash_m_is_the_same_cli():
    import sys
    p = subprocess.run([sys.executable, "-m", "vmlab", "presets"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "skylake" in p.stdout and "tiny" in p.stdout


def vmlab_version():
    import vmlab
    return vmlab.__version__


def test_pt_snapshot_of_a_live_process():
    child = subprocess.Popen(["sleep", "30"])
    try:
        p = run_cli("pt", "snapshot", str(child.pid), "--designs", "radix,guarded16,hashed", "--json")
    finally:
        child.kill()
        child.wait()
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    pages = {r["mapped_pages"] for r in rows}
    assert len(pages) == 1 and pages.pop() > 10, rows
    assert all(r["pt_bytes"] > 0 for r in rows)
    msg = one_error_line(run_cli("pt", "snapshot", "999999999"))
    assert "/proc/999999999/maps" in msg


def test_bench_repeats_each_benchmark_and_reports_its_best_run():
    # Four rows (--only): a repeat of the whole quick set takes most of a minute.
    p = run_cli("bench", "--quick", "--repeat", "2", "--only", "nested-radix", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["repeat"] == 2
    # The tests' build (`make test`: debug assertions on) says its figures are not vmlab's speed.
    assert isinstance(doc["checked_build"], bool)
    assert ("the tests' build" in p.stderr) == doc["checked_build"], p.stderr
    names = [r["name"] for r in doc["rows"]]
    assert "gups 1G, nested-radix" in names and "gups 1G, nested-radix + time model, sampled" in names, names
    for r in doc["rows"]:
        assert len(r["runs"]) == 2 and r["items"] > 0, r
        assert r["seconds"] == min(r["runs"]), r
        assert min(r["runs"]) <= r["median_seconds"] <= max(r["runs"]), r
        assert abs(r["millions_per_second"] * r["seconds"] * 1e6 - r["items"]) <= 1e-6 * r["items"], r
    # Each row beyond the count-only one is compared with it (the time model's target).
    rate = {r["name"]: r["millions_per_second"] for r in doc["rows"]}
    for r in doc["rows"]:
        if r["name"] == "gups 1G, nested-radix":
            assert "vs_base" not in r, r
        else:
            assert abs(r["vs_base"] - r["millions_per_second"] / rate["gups 1G, nested-radix"]) < 1e-9, r
    bad = run_cli("bench", "--repeat", "0")
    assert bad.returncode != 0 and "--repeat" in bad.stderr


def test_bench_only_runs_the_benchmarks_it_names():
    p = run_cli("bench", "--quick", "--only", "nested-radix + time model, sampled", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert [r["name"] for r in rows] == ["gups 1G, nested-radix + time model, sampled"]
    assert rows[0]["items"] == 1_000_000 and rows[0]["millions_per_second"] > 0
    assert "vs_base" not in rows[0], "its base did not run"
    bad = run_cli("bench", "--quick", "--only", "no such bench")
    assert bad.returncode == 2 and "no such bench" in bad.stderr, bad.stderr


def test_tables_line_up_and_the_run_time_goes_to_stderr():
    p = run_cli("run", "-c", "skylake", "-w", "gups", "footprint=16M", "accesses=20k", "--no-progress")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tlb "))
    table = lines[start:next(i for i, line in enumerate(lines) if line.startswith("walks "))]
    # Numbers are right-aligned: every row ends where the header does.
    assert len(table) > 3 and len({len(line) for line in table}) == 1, table
    assert "simulated in" not in p.stdout and p.stderr.startswith("vmlab: simulated in ")


def test_a_trace_can_come_from_standard_input(tmp_path):
    t = tmp_path / "g.vmt"
    assert run_cli("generate", "gups", "accesses=1000", "-o", str(t)).returncode == 0
    with open(t, "rb") as f:
        p = subprocess.run(vmlab_cmd() + ["info", "-", "--json"], stdin=f, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    counts = json.loads(p.stdout)["counts"]
    assert counts["reads"] + counts["writes"] == 1000


def test_the_native_cli_names_the_python_only_commands():
    from vmlab import _core

    assert _core.cli_main(["vmlab", "sweep", "x.toml"]) == 2
