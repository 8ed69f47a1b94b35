import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VMLAB = ROOT / ".venv" / "bin" / "vmlab"


def vmlab_cmd():
    return [str(VMLAB)] if VMLAB.exists() else [shutil.which("vmlab") or "vmlab"]


def processes_with(marker, without=None):
    """The pids of the processes whose command line holds `marker` (a traced program),
    and not `without` if given."""
    alive = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmdline = f.read()
                if marker.encode() in cmdline and (without is None or without.encode() not in cmdline):
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


@pytest.fixture
def venv_kernel(tmp_path, monkeypatch):
    """The name of a Jupyter kernel spec that runs ipykernel under this Python, found
    before any other (JUPYTER_PATH comes first), with no user IPython or Jupyter
    settings; TMPDIR is tmp_path/tmp (where a notebook puts its files)."""
    name = "vmlab-test-venv"
    spec = tmp_path / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "vmlab test venv", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    return name
