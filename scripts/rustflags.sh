#!/usr/bin/env bash
# Print the rustc flags every build of this checkout uses, encoded for
# CARGO_ENCODED_RUSTFLAGS (flags separated by 0x1f): the profile-guided optimisation
# of pgo/vmlab.profdata.xz (docs/performance.md, "Profile-guided builds"), unpacked to
# target/pgo/. The Makefile and scripts/setup.sh export them, so the extension, the CLI
# and the tests share one build.
#
# Prints nothing (a plain optimised build; results are identical, only slower) when the
# profile was taken with another rustc, whose LLVM may not read it, or cannot be
# unpacked.
set -u
cd "$(dirname "$0")/.."
packed=pgo/vmlab.profdata.xz
profile="$PWD/target/pgo/vmlab.profdata"
[ -f "$packed" ] && [ "$(rustc -V 2>/dev/null)" = "$(cat pgo/rustc-version 2>/dev/null)" ] || exit 0
if [ ! -f "$profile" ] || [ "$packed" -nt "$profile" ]; then
    mkdir -p target/pgo
    python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$packed" "$profile.tmp" 2>/dev/null \
        && mv "$profile.tmp" "$profile" || { rm -f "$profile.tmp"; exit 0; }
fi
# Functions changed since the profile was taken are compiled without it: no warning
# per function (scripts/pgo.sh refreshes the profile).
printf '%s\x1f%s' "-Cprofile-use=$profile" "-Cllvm-args=-no-pgo-warn-mismatch"
