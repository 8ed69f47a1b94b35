"""`vmlab reproduce PAPER`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import vmlab
from vmlab.reproduce import PAPERS, reproduce

VMLAB = [sys.executable, "-m", "vmlab.cli"]


def test_every_paper_has_a_reproduction_page():
    root = Path(__file__).resolve().parents[2]
    for mods in PAPERS.values():
        for m in mods:
            assert (root / m.DOC).exists(), m.DOC


def test_quick_itanium_runs_traced_programs_and_says_what_is_not_built(tmp_path, monkeypatch):
    monkeypatch.setenv("VMLAB_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "itanium.md"
    p = subprocess.run([*VMLAB, "reproduce", "itanium", "--quick", "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert "## docs/reproductions/itanium.md" in text and "Not built yet" in text
    # One table per traced program and per workload, every design in each.
    assert text.count("| short-vhpt |") == text.count("| long-vhpt-pt |") >= 3
    # The short VHPT with a page size per region: 4 rows per input (traced program, GUPS).
    assert text.count("**short VHPT, page size per region:") == 2
    assert text.count("| 64K in region ") == 2 and text.count("| 16K in every region |") == 2
    # The extreme benchmark on the DTLB (key sharing) and on the ITLB (text sharing).
    assert "**extreme: 10 processes × p shared pages" in text and "**extreme ITLB: 10 processes × p text pages" in text
    # The long format with 2M superpages, both designs, on two inputs.
    assert text.count("**long-format VHPT with superpages:") == 2 and text.count("| long-vhpt-pt, 2M superpages |") == 2
    assert "(traced)" in text  # valgrind is installed by `make setup`
    assert list((tmp_path / "cache" / "traces").glob("*.vmt"))


def test_a_user_trace_is_included_and_a_missing_one_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("VMLAB_CACHE", str(tmp_path / "cache"))
    t = tmp_path / "mine.vmt"
    subprocess.run([*VMLAB, "generate", "stream", "accesses=5000", "footprint=1M", "-o", str(t)], check=True,
                   capture_output=True)
    assert "**`mine.vmt`**" in reproduce("itanium", quick=True, traces=[str(t)])
    with pytest.raises(vmlab.VmlabError, match="nope.vmt"):
        reproduce("itanium", quick=True, traces=[str(tmp_path / "nope.vmt")])
    p = subprocess.run([*VMLAB, "reproduce", "nosuchpaper"], capture_output=True, text=True)
    assert p.returncode != 0 and "nosuchpaper" in p.stderr
