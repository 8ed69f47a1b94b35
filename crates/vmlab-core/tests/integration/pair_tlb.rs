//! TLB entries that map an even/odd page pair (`tlb.NAME.pairs`, the MIPS R4x00's):
//! the engine against a reference model, the refills a sweep saves, consistency under
//! unmap and protect, and the configurations refused.

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use vmlab::config::Config;
use vmlab::sim::{run, SourceInfo};
use vmlab::trace::{MapFlags, Record, VecSource};

const BASE: u64 = 0x7f00_0000_0000;

/// One unified pair TLB of `entries` (`ways`; 0: fully associative), no page-walk
/// caches, page table `kind`.
fn pair_config(kind: &str, entries: usize, ways: usize, pairs: bool) -> Config {
    Config::load(
        "tiny",
        &[
            format!("tlb={{utlb={{level=1,serves=\"unified\",entries={entries},ways={ways},page_sizes=[\"4K\"],pairs={pairs}}}}}"),
            "pwc.entries=[]".into(),
            format!("page_table.kind={kind}"),
            "page_table.hashed.subblock=2".into(),
        ],
    )
    .unwrap()
}

fn simulate(cfg: &Config, records: Vec<Record>) -> Value {
    let mut src = VecSource::new("test", records);
    run(cfg, &mut src, &SourceInfo::default(), |_| {}).unwrap()
}

fn u(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or_else(|| panic!("missing {p}"))
}

fn mmap(start: u64, len: u64) -> Record {
    Record::Mmap { pid: 1, start, len, prot: 3, flags: MapFlags::PRIVATE }
}

/// Reference: per set (VPN2 mod sets) an LRU list of (VPN2, valid halves). Pages are
/// mapped at their first touch and never unmapped; a refill validates the missed half,
/// and, when the table holds PTE pairs, sets the other half to whether its page is
/// mapped (else leaves it). Returns (lookups, misses, half misses).
fn reference(vpns: &[u64], entries: usize, ways: usize, pte_pairs: bool) -> (u64, u64, u64) {
    let ways = if ways == 0 { entries } else { ways };
    let mut sets: Vec<VecDeque<(u64, [bool; 2])>> = vec![VecDeque::new(); entries / ways];
    let mut mapped = HashSet::new();
    let (mut misses, mut half_misses) = (0, 0);
    for &v in vpns {
        let n = sets.len() as u64;
        let (vpn2, half) = (v >> 1, (v & 1) as usize);
        let l = &mut sets[(vpn2 % n) as usize];
        let mut e = match l.iter().position(|e| e.0 == vpn2).map(|p| l.remove(p).unwrap()) {
            Some(e) if e.1[half] => {
                l.push_front(e);
                continue;
            }
            Some(e) => {
                half_misses += 1;
                e
            }
            None => {
                if l.len() == ways {
                    l.pop_back();
                }
                (vpn2, [false; 2])
            }
        };
        misses += 1;
        mapped.insert(v);
        e.1[half] = true;
        if pte_pairs {
            e.1[half ^ 1] = mapped.contains(&(v ^ 1));
        }
        l.push_front(e);
    }
    (vpns.len() as u64, misses, half_misses)
}

proptest! {
    #![proptest_config(crate::common::proptest_config(32))]
    /// The engine's pair TLB gives exactly the reference's lookups, misses (= walks)
    /// and half misses: on tables that hold PTE pairs (mpt, hashed with pair buckets) a
    /// refill fills both halves; on the guarded table only the missed one.
    #[test]
    fn pair_tlb_matches_reference(
        pages in proptest::collection::vec(0u64..160, 1..1500),
        geometry in prop_oneof![Just((48usize, 0usize)), Just((16, 4)), Just((8, 1))],
        kind in prop_oneof![Just("mpt"), Just("hashed"), Just("guarded")],
    ) {
        let (entries, ways) = geometry;
        let mut recs = vec![mmap(BASE, 160 << 12)];
        recs.extend(pages.iter().enumerate().map(|(i, p)| if i % 3 == 0 { Record::write(BASE + p * 4096 + 8, 8, 1) } else { Record::read(BASE + p * 4096, 4, 1) }));
        let doc = simulate(&pair_config(kind, entries, ways, true), recs);
        let vpns: Vec<u64> = pages.iter().map(|p| (BASE >> 12) + p).collect();
        let (lookups, misses, half) = reference(&vpns, entries, ways, kind != "guarded");
        prop_assert_eq!(u(&doc, "/tlb/utlb/lookups"), lookups);
        prop_assert_eq!(u(&doc, "/tlb/utlb/misses"), misses);
        prop_assert_eq!(u(&doc, "/tlb/utlb/half_misses"), half);
        prop_assert_eq!(u(&doc, "/walks/count"), misses);
    }

    /// Under random mmaps, munmaps and accesses, every valid half of every pair entry
    /// still translates as the page table does (unmap invalidates just its half).
    #[test]
    fn pair_entries_follow_unmaps(
        vmas in proptest::collection::vec((0u64..64, 1u64..300), 1..5),
        accesses in proptest::collection::vec((0usize..5, 0u64..(300 << 12)), 1..1000),
        kind in prop_oneof![Just("mpt"), Just("hashed")],
    ) {
        use vmlab::pt::{hashed::HashedPageTable, mpt::MultilevelPageTable, NoWalkCaches};
        let cfg = pair_config(kind, 48, 0, true);
        // Odd page offsets, so pairs straddle VMA edges.
        let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages)| (BASE + slot * (4 << 20) + ((slot % 3) << 12), pages << 12)).collect();
        if kind == "mpt" {
            let mut e = vmlab::sim::Engine::new(&cfg, MultilevelPageTable::new(), NoWalkCaches).unwrap();
            common::drive_vmas(&mut e, &regions, &accesses, true);
            common::tlbs_agree_with_page_table(&e)?;
        } else {
            let mut e = vmlab::sim::Engine::new(&cfg, HashedPageTable::new(&cfg.page_table.hashed).unwrap(), NoWalkCaches).unwrap();
            common::drive_vmas(&mut e, &regions, &accesses, true);
            common::tlbs_agree_with_page_table(&e)?;
        }
    }
}

/// Two sequential sweeps over 2N mapped pages, N well beyond the TLB's 48 entries. The
/// first sweep faults on every page (2N walks either way: the odd page is not mapped
/// yet when its even neighbour is refilled). On the second, a pair TLB over the MPT
/// refills once per pair (N walks); over the guarded table, whose refills fill one
/// half, and without pairs, once per page (2N).
#[test]
fn a_second_sweep_refills_once_per_pair_when_the_table_holds_pte_pairs() {
    const N: u64 = 512;
    let mut recs = vec![mmap(BASE, (2 * N) << 12)];
    for _ in 0..2 {
        recs.extend((0..2 * N).map(|p| Record::read(BASE + p * 4096, 8, 1)));
    }
    let walks = |kind: &str, pairs: bool| u(&simulate(&pair_config(kind, 48, 0, pairs), recs.clone()), "/walks/count");
    assert_eq!(walks("mpt", true), 2 * N + N);
    assert_eq!(walks("hashed", true), 2 * N + N);
    assert_eq!(walks("guarded", true), 2 * N + 2 * N);
    assert_eq!(walks("mpt", false), 2 * N + 2 * N);
    // The first sweep's odd pages hit their entry with the half invalid.
    let doc = simulate(&pair_config("guarded", 48, 0, true), recs.clone());
    assert_eq!(u(&doc, "/tlb/utlb/half_misses"), 2 * N);
    assert_eq!(u(&simulate(&pair_config("mpt", 48, 0, true), recs), "/tlb/utlb/half_misses"), N);
}

#[test]
fn pair_configurations_not_built_are_refused_by_key() {
    let refused = |sets: &[&str], why: &str| {
        let e = Config::load("tiny", &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("tlb.") && e.contains(".pairs") && e.contains(why), "{e}");
    };
    let one = "tlb={a={level=1,serves=\"unified\",entries=48,page_sizes=[\"4K\"],pairs=true}}";
    refused(&["tlb={a={level=1,serves=\"unified\",entries=48,page_sizes=[\"4K\",\"2M\"],pairs=true}}"], "one page size");
    refused(
        &["tlb={a={level=1,serves=\"unified\",entries=48,page_sizes=[\"4K\"],pairs=true},b={level=2,serves=\"unified\",entries=64,page_sizes=[\"4K\"]}}"],
        "one level",
    );
    refused(&[one, "mmu.regions.share=true"], "region IDs");
    // A policy that watches the TLB is refused when the engine starts.
    let cfg = Config::load("romer", &[one.to_string()]).unwrap();
    let mut src = VecSource::new("test", vec![mmap(BASE, 1 << 20), Record::read(BASE, 8, 1)]);
    let e = run(&cfg, &mut src, &SourceInfo::default(), |_| {}).unwrap_err().to_string();
    assert!(e.contains("tlb.a.pairs"), "{e}");
}
