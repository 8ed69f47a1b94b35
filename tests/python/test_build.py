"""The build: release builds are profile-guided with the committed profile
(docs/performance.md, "Profile-guided builds"). A profile that cannot be used leaves
the builds plain, which is only slower, so nothing else would notice."""

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_builds_use_the_committed_profile():
    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True, check=True).stdout.strip()
    taken_with = (ROOT / "pgo" / "rustc-version").read_text().strip()
    assert taken_with == rustc, f"pgo/ was taken with {taken_with}, builds use {rustc}: retake it (make pgo)"
    out = subprocess.run([str(ROOT / "scripts" / "rustflags.sh")], capture_output=True, text=True, check=True).stdout
    flags = out.split("\x1f")
    use = [f.split("=", 1)[1] for f in flags if f.startswith("-Cprofile-use=")]
    assert len(use) == 1, flags
    # An LLVM indexed profile, unpacked from pgo/vmlab.profdata.xz.
    assert pathlib.Path(use[0]).read_bytes()[:8] == b"\xfflprofi\x81"
    assert "-Cllvm-args=-no-pgo-warn-mismatch" in flags


def test_the_sdist_holds_everything_the_build_includes(tmp_path):
    """`pip install` from the source distribution builds only what the sdist holds: every
    file the Rust sources include at compile time (the presets) must be in it, with the
    licence and the README the metadata names."""
    import re
    import shutil
    import sys
    import tarfile

    maturin = pathlib.Path(sys.executable).parent / "maturin"
    maturin = str(maturin) if maturin.exists() else shutil.which("maturin")
    assert maturin, "maturin is installed by scripts/setup.sh"
    subprocess.run([maturin, "sdist", "-o", str(tmp_path)], cwd=ROOT, check=True, capture_output=True)
    (sdist,) = tmp_path.glob("vmlab-*.tar.gz")
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path, filter="data")
    top = next(p for p in tmp_path.iterdir() if p.is_dir())
    included = []
    for rs in (top / "crates").rglob("*.rs"):
        for path in re.findall(r'include_(?:str|bytes)!\("([^"]+)"\)', rs.read_text()):
            included.append(path)
            assert (rs.parent / path).exists(), f"{rs.relative_to(top)} includes {path}, which the sdist lacks"
    assert any("configs/skylake.toml" in p for p in included)
    meta = (top / "PKG-INFO").read_text()
    assert "License-Expression: MIT" in meta and (top / "LICENSE").exists()
    assert "Description-Content-Type: text/markdown" in meta and (top / "README.md").exists()
    assert "Provides-Extra: ray" in meta
    assert (top / "python" / "vmlab" / "py.typed").exists(), "the package says it is typed (PEP 561)"
