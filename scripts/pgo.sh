#!/usr/bin/env bash
# Regenerate pgo/vmlab.profdata.xz, the profile that release builds are optimised with
# (profile-guided optimisation; docs/performance.md, "Profile-guided builds").
#
#   scripts/pgo.sh          instrumented build, training runs, merge, compress
#
# The training runs exercise every page-table organisation, every preset machine and
# every front-end path (trace decode, policies, recolouring, the memory thread), each
# for a few seconds, so no design is optimised at another's expense. Run it after
# changing a hot path: a function whose code changed since the profile was taken is
# compiled without profile data (slower, never different: a profile changes speed
# only, not one result).
set -euo pipefail
cd "$(dirname "$0")/.."

find_profdata() { find "$(rustc --print sysroot)" -name llvm-profdata -type f | head -1; }
profdata=$(find_profdata)
if [ -z "$profdata" ] && command -v rustup >/dev/null; then
    # A fresh machine has the toolchain without its LLVM tools.
    echo "pgo: installing llvm-tools (rustup component add llvm-tools)"
    rustup component add llvm-tools >&2 || true
    profdata=$(find_profdata)
fi
[ -n "$profdata" ] || { echo "pgo: error: llvm-profdata not found (rustup component add llvm-tools)" >&2; exit 1; }

gen="$PWD/target/pgo-gen"
rm -rf "$gen/data"
echo "pgo: instrumented build (a few minutes)"
# Not the profile-use flags that builds otherwise get (scripts/rustflags.sh).
unset CARGO_ENCODED_RUSTFLAGS
RUSTFLAGS="-Cprofile-generate=$gen/data" cargo build -q --release -p vmlab-core --bin vmlab --target-dir "$gen"
vmlab="$gen/release/vmlab"

echo "pgo: training runs"
run() { "$vmlab" run "$@" --json >/dev/null; }
"$vmlab" bench --quick >/dev/null
for kind in radix hashed linear guarded mpt ecpt inverted nested-radix nested-ecpt hybrid; do
    run --config ecpt-asplos22 --set "page_table.kind=\"$kind\"" --workload gups footprint=1G accesses=1500000
    run --config skylake --set "page_table.kind=\"$kind\"" --workload pchase footprint=256M accesses=500000
done
for preset in tiny skylake itanium2 romer romer-cache combined tps; do
    run --config "$preset" --workload gups footprint=48M accesses=1000000
    run --config "$preset" --workload stream footprint=48M accesses=2000000
done
for kind in fixed approx-online online; do
    run --config romer --set "os.policy.kind=\"$kind\"" --workload gups footprint=64M accesses=1000000
done
run --config romer-cache --set 'os.recolor.kind="cml"' --workload strawman accesses=2000000
run --config skylake --set memory.data_refs=true --workload gups footprint=1G accesses=2000000
"$vmlab" pt compare --workload sparse pages=4096 accesses=200000 >/dev/null
"$vmlab" mrc --workload gups footprint=64M accesses=500000 >/dev/null

mkdir -p pgo
"$profdata" merge -sparse -o target/pgo-merged.profdata "$gen/data"
xz -9 -T1 -c target/pgo-merged.profdata >pgo/vmlab.profdata.xz
rustc -V >pgo/rustc-version
echo "pgo: wrote pgo/vmlab.profdata.xz ($(du -h pgo/vmlab.profdata.xz | cut -f1)); rebuild to use it"
