#![no_main]
//! Any record stream (what a trace whose checksums match can carry) through the engine,
//! under a page table chosen by the first byte.
use libfuzzer_sys::fuzz_target;

const KINDS: &[&[&str]] = &[
    &[],
    &["page_table.kind=hashed", "page_table.hashed.subblock=4"],
    &["page_table.kind=guarded", "page_table.guarded.node_entries=2"],
    &["page_table.kind=mpt"],
    &["page_table.kind=inverted"],
    &["page_table.kind=linear"],
    &["page_table.kind=ecpt"],
    &["page_table.kind=nested-radix"],
    &["os.policy.kind=thp-reserve"],
];

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    let mut o = KINDS[k as usize % KINDS.len()].to_vec();
    o.push("machine.phys_mem=64M");
    vmlab_fuzz::simulate(vmlab_fuzz::records_from_bytes(rest), &o);
});
