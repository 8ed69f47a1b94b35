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
