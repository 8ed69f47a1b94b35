#!/bin/bash
# Write the stats documents of a fixed set of runs to OUTDIR, one JSON file per run:
# every preset, every page-table kind (nested ones included), and the engine paths a
# speed change can disturb (THP, warm-up, shared pages, pointer chase, sparse, TPS, data
# references, the time model, G2, hybrid). A change meant to alter no result must leave
# every file byte-identical:
#
#   BIN=/path/to/old/vmlab scripts/stats_documents.sh /tmp/before
#   BIN=target/release/vmlab scripts/stats_documents.sh /tmp/after
#   diff -r /tmp/before /tmp/after
#
# The memory thread is off so the runs are cheap to repeat; it changes no result
# (tests/integration/memory_thread.rs). THREADS=on runs them with the second thread
# (the walker or memory thread, as each configuration allows), to hold a change to
# its exactness on every run: the documents must be the same as with it off.
set -u
out=${1:?usage: BIN=path/to/vmlab [THREADS=on] $0 OUTDIR}
mkdir -p "$out"
bin=${BIN:-target/release/vmlab}
export VMLAB_MEMORY_THREAD=${THREADS:-off}
status=0
run() {
    local name=$1
    shift
    if ! "$bin" run "$@" --json >"$out/$name.json" 2>"$out/$name.err"; then
        echo "FAILED: $name (see $out/$name.err)" >&2
        status=1
    fi
}
for preset in skylake tiny romer romer-cache combined tps itanium2 ecpt-asplos22; do
    run "preset-$preset" --config "$preset" --workload gups footprint=32M accesses=300000
done
for kind in hashed inverted guarded linear ecpt mpt; do
    run "kind-$kind" --config skylake --set "page_table.kind=\"$kind\"" --workload gups footprint=64M accesses=200000
done
run kind-clustered --config skylake --set 'page_table.kind="hashed"' --set page_table.hashed.subblock=16 --workload gups footprint=64M accesses=200000
run kind-g2 --config skylake --set 'page_table.kind="guarded"' --set page_table.guarded.node_entries=2 --workload gups footprint=64M accesses=200000
for kind in nested-radix nested-ecpt hybrid; do
    run "kind-$kind" --config ecpt-asplos22 --set "page_table.kind=\"$kind\"" --workload gups footprint=64M accesses=200000
done
run thp-eager --config skylake --set 'os.policy.kind="thp-eager"' --workload stream footprint=64M accesses=300000
run warmup --config skylake --set sim.warmup_accesses=100000 --workload gups footprint=64M accesses=300000
run shared --config itanium2 --workload shared accesses=200000
run pchase --config skylake --workload pchase footprint=64M accesses=200000
run sparse --config skylake --workload sparse accesses=200000
run tps-stream --config tps --workload stream footprint=64M accesses=300000
run data-refs --config skylake --set memory.data_refs=true --workload gups footprint=64M accesses=300000
# Data references in same-page runs, and repeated references to one line (writes too),
# counted and timed, every reference or a sample.
run data-refs-stream --config skylake --set memory.data_refs=true --workload stream footprint=64M stride=8 write_ratio=0.25 accesses=300000
run timed --config skylake --set memory.data_refs=true --set 'time.model="ooo"' --workload gups footprint=64M accesses=200000
run timed-sampled --config skylake --set memory.data_refs=true --set 'time.model="ooo"' --set time.sampling.period=10000 --workload stream footprint=64M accesses=300000
run timed-sampled-gups --config skylake --set memory.data_refs=true --set 'time.model="ooo"' --set time.sampling.period=10000 --workload gups footprint=64M accesses=300000
# Timed same-page runs with instruction fetches, a warm-up and a window in instructions
# (the memory thread sends their ops from the run loop), and large ticks.
run timed-fetches --config skylake --set memory.data_refs=true --set 'time.model="ooo"' --set sim.warmup_instructions=300000 --set sim.max_instructions=1500000 --workload stream footprint=64M stride=16 code=64K instrs_per_access=3 accesses=400000
run timed-warmup --config skylake --set memory.data_refs=true --set 'time.model="ooo"' --set time.sampling.period=10000 --set sim.warmup_accesses=150000 --workload kv accesses=300000
run data-refs-fetches --config skylake --set memory.data_refs=true --set sim.warmup_accesses=100000 --workload stream footprint=16M stride=8 code=16K write_ratio=0.5 accesses=300000
exit $status
