import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VMLAB = ROOT / ".venv" / "bin" / "vmlab"


def vmlab_cmd():
    return [str(VMLAB)] if VMLAB.exists() else [shutil.which("vmlab") or "vmlab"]


def processes_with(marker):
    """The pids of the processes whose command line holds `marker` (a traced program)."""
    alive = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        alive.append(int(d))
            except OSError:
                pass
    return alive


@pytest.fixture(scope="session")
def real_trace(tmp_path_factory):
    """A trace of a real program taken with `vmlab trace` (valgrind lackey)."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is required (scripts/setup.sh installs it)")
    out = tmp_path_factory.mktemp("traces") / "ls.vmt"
    subprocess.run(vmlab_cmd() + ["trace", "--engine", "lackey", "-o", str(out), "--", "ls", "-l", "/usr/lib"],
                   check=True, stdout=subprocess.DEVNULL)
    return out
