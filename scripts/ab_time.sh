#!/bin/bash
# Time two vmlab binaries on the same command, alternating them N times so a noisy host
# slows both alike; print each one's best and median wall seconds.
#
#   scripts/ab_time.sh 5 /tmp/vmlab-before target/release/vmlab \
#       run --config skylake --workload gups footprint=4G accesses=20000000 --json
set -u
n=${1:?usage: $0 N BIN_A BIN_B VMLAB_ARGS...}
a=$2
b=$3
shift 3
ta=()
tb=()
secs() {
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || echo "FAILED: $*" >&2
    e=$(date +%s.%N)
    awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'
}
for _ in $(seq "$n"); do
    ta+=("$(secs "$a" "$@")")
    tb+=("$(secs "$b" "$@")")
done
summary() {
    local sorted
    sorted=$(printf "%s\n" "$@" | sort -n)
    echo "best $(echo "$sorted" | head -1) median $(echo "$sorted" | sed -n "$(((n + 1) / 2))p")"
}
echo "A ($a): $(summary "${ta[@]}")"
echo "B ($b): $(summary "${tb[@]}")"
