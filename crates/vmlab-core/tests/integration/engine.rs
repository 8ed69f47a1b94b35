//! End-to-end engine behaviour on small hand-made record streams.

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use std::collections::VecDeque;
use vmlab::config::Config;
use vmlab::sim::{run, SourceInfo};
use vmlab::trace::{MapFlags, Record, VecSource};

const BASE: u64 = 0x7f00_0000_0000;

fn simulate(config: &str, overrides: &[&str], records: Vec<Record>) -> vmlab::Result<Value> {
    let cfg = Config::load(config, &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
    let mut src = VecSource::new("test", records);
    run(&cfg, &mut src, &SourceInfo::default(), |_| {})
}

fn u(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or_else(|| panic!("missing {p}"))
}

fn mmap(start: u64, len: u64) -> Record {
    Record::Mmap { pid: 1, start, len, prot: 3, flags: MapFlags::PRIVATE }
}

#[test]
fn dense_aligned_gigabyte_radix_has_515_nodes() {
    let mut recs = vec![mmap(BASE, 1 << 30)];
    recs.extend((0..(1u64 << 18)).map(|p| Record::read(BASE + (p << 12), 8, 1)));
    let doc = simulate("skylake", &[], recs).unwrap();
    assert_eq!(u(&doc, "/page_table/nodes"), 515);
    assert_eq!(u(&doc, "/page_table/bytes"), 515 * 4096);
    assert_eq!(u(&doc, "/page_table/mapped_pages"), 1 << 18);
    assert_eq!(u(&doc, "/faults/count"), 1 << 18);
    // With 2 MiB pages the same region needs the root, one PDPT and one PD.
    let mut recs = vec![mmap(BASE, 1 << 30)];
    recs.extend((0..(1u64 << 18)).map(|p| Record::read(BASE + (p << 12), 8, 1)));
    let doc = simulate("skylake", &["os.page_size=2M"], recs).unwrap();
    assert_eq!(u(&doc, "/page_table/nodes"), 3);
    assert_eq!(u(&doc, "/page_sizes/2M"), 512);
    assert_eq!(u(&doc, "/faults/count"), 512);
}

#[test]
fn populate_maps_every_page_of_a_mapping_before_its_first_access() {
    // A 4 MiB writable mapping, a read-only page, a PROT_NONE page, then one access.
    let recs = || {
        vec![
            mmap(BASE, 4 << 20),
            Record::Mmap { pid: 1, start: BASE + (8 << 20), len: 4096, prot: 1, flags: MapFlags::PRIVATE },
            Record::Mmap { pid: 1, start: BASE + (12 << 20), len: 4096, prot: 0, flags: MapFlags::PRIVATE },
            Record::write(BASE + 4096, 8, 1),
        ]
    };
    let doc = simulate("tiny", &["os.populate=true"], recs()).unwrap();
    assert_eq!(u(&doc, "/faults/demand"), 1024 + 1);
    assert_eq!(u(&doc, "/page_table/mapped_pages"), 1024 + 1);
    // The access walks (no TLB was filled) but does not fault: its page was written.
    assert_eq!(u(&doc, "/walks/count"), 1);
    assert_eq!(u(&doc, "/walks/faulting"), 0);
    assert_eq!(u(&doc, "/faults/protection"), 0);
    // Without it, only the touched page is mapped.
    let doc = simulate("tiny", &[], recs()).unwrap();
    assert_eq!(u(&doc, "/faults/demand"), 1);
    assert_eq!(u(&doc, "/page_table/mapped_pages"), 1);
    // Through the page-size policy: THP maps the aligned 4 MiB as two 2 MiB pages.
    let doc = simulate("skylake", &["os.populate=true", "os.page_size=2M"], recs()).unwrap();
    assert_eq!(u(&doc, "/page_sizes/2M"), 2);
    assert_eq!(u(&doc, "/faults/demand"), 2 + 1);
    // TPS at 50% grows a region once half of it is populated: the rest, mapped with it,
    // was written by the initialisation too, so none of it is bloat.
    let doc = simulate("tps", &["os.populate=true", "os.policy.threshold=0.5"], recs()).unwrap();
    assert_eq!(u(&doc, "/page_sizes/4M"), 1);
    assert_eq!(u(&doc, "/policy/bloat_bytes"), 0);
}

#[test]
fn populating_more_than_memory_is_a_clear_error() {
    let e = simulate("tiny", &["os.populate=true", "machine.phys_mem=64K"], vec![mmap(BASE, 1 << 20)]).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("physical memory exhausted") && msg.contains("machine.phys_mem"), "{msg}");
}

#[test]
fn a_faulting_translation_is_one_miss_one_walk_one_fault() {
    let doc = simulate("tiny", &[], vec![Record::read(BASE, 8, 1)]).unwrap();
    assert_eq!(u(&doc, "/tlb/l1d/misses"), 1);
    assert_eq!(u(&doc, "/tlb/l2/misses"), 1);
    assert_eq!(u(&doc, "/walks/count"), 1);
    assert_eq!(u(&doc, "/walks/faulting"), 1);
    assert_eq!(u(&doc, "/faults/count"), 1);
    // The walk found the empty root entry: one reference.
    assert_eq!(u(&doc, "/walks/refs"), 1);
    // A second access to the page hits.
    let doc = simulate("tiny", &[], vec![Record::read(BASE, 8, 1), Record::write(BASE + 64, 8, 1)]).unwrap();
    assert_eq!(u(&doc, "/tlb/l1d/lookups"), 2);
    assert_eq!(u(&doc, "/tlb/l1d/hits"), 1);
    assert_eq!(u(&doc, "/walks/count"), 1);
}

#[test]
fn page_crossing_access_translates_both_pages() {
    let doc = simulate("tiny", &[], vec![Record::read(BASE + 4092, 8, 1)]).unwrap();
    assert_eq!(u(&doc, "/totals/translations"), 2);
    assert_eq!(u(&doc, "/totals/page_crossings"), 1);
    assert_eq!(u(&doc, "/faults/count"), 2);
}

#[test]
fn asid_tags_keep_entries_across_switches_flushes_do_not() {
    let mut recs = vec![Record::Fork { parent: 1, child: 2 }];
    for round in 0..10 {
        for pid in [1, 2] {
            recs.push(Record::ContextSwitch { pid });
            for p in 0..3 {
                recs.push(Record::read(BASE + (p << 12) + round * 8, 8, pid));
            }
        }
    }
    let tagged = simulate("tiny", &[], recs.clone()).unwrap();
    let flushed = simulate("tiny", &["mmu.asid_tags=false"], recs).unwrap();
    // Tagged: only the 6 compulsory misses. Flushed: every switch loses 3 entries.
    assert_eq!(u(&tagged, "/tlb_levels/1/misses"), 6);
    assert_eq!(u(&flushed, "/tlb_levels/1/misses"), 60);
    assert_eq!(u(&tagged, "/faults/count"), 6);
}

#[test]
fn munmap_drops_translations_and_refaults() {
    let recs = vec![
        mmap(BASE, 1 << 20),
        Record::read(BASE, 8, 1),
        Record::Munmap { pid: 1, start: BASE, len: 1 << 20 },
        mmap(BASE, 1 << 20),
        Record::read(BASE, 8, 1),
    ];
    let doc = simulate("tiny", &[], recs).unwrap();
    assert_eq!(u(&doc, "/faults/demand"), 2);
    assert_eq!(u(&doc, "/walks/count"), 2);
    assert_eq!(u(&doc, "/faults/pages_unmapped"), 1);
    assert_eq!(u(&doc, "/page_table/mapped_pages"), 1);
}

#[test]
fn protection_fault_is_granted_and_counted_once() {
    let recs = vec![
        Record::Mmap { pid: 1, start: BASE, len: 4096, prot: 1, flags: MapFlags::PRIVATE },
        Record::read(BASE, 8, 1),
        Record::write(BASE, 8, 1),
        Record::write(BASE + 8, 8, 1),
    ];
    let doc = simulate("tiny", &[], recs).unwrap();
    assert_eq!(u(&doc, "/faults/demand"), 1);
    assert_eq!(u(&doc, "/faults/protection"), 1);
}

#[test]
fn memory_exhaustion_is_a_clear_error() {
    let mut recs = vec![mmap(BASE, 1 << 30)];
    recs.extend((0..100u64).map(|p| Record::read(BASE + (p << 12), 8, 1)));
    let e = simulate("tiny", &["machine.phys_mem=64K"], recs).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("physical memory exhausted"), "{msg}");
    assert!(msg.contains("machine.phys_mem"), "{msg}");
}

#[test]
fn runs_are_deterministic() {
    let recs: Vec<Record> = (0..5000u64).map(|i| Record::read(BASE + (i * 7919 % 300) * 4096, 8, 1)).collect();
    let a = simulate("skylake", &["tlb.stlb.replacement=random"], recs.clone()).unwrap();
    let b = simulate("skylake", &["tlb.stlb.replacement=random"], recs).unwrap();
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

/// Independent reference: per-set LRU lists, set index = VPN mod sets.
fn reference_lru(vpns: &[u64], entries: usize, ways: usize) -> (u64, u64) {
    let sets = entries / ways;
    let mut lists: Vec<VecDeque<u64>> = vec![VecDeque::new(); sets];
    let mut misses = 0;
    for &v in vpns {
        let l = &mut lists[(v % sets as u64) as usize];
        if let Some(pos) = l.iter().position(|&x| x == v) {
            l.remove(pos);
        } else {
            misses += 1;
            if l.len() == ways {
                l.pop_back();
            }
        }
        l.push_front(v);
    }
    (vpns.len() as u64, misses)
}

fn single_tlb_config(entries: usize, ways: usize) -> Vec<String> {
    vec![format!("tlb={{l1d={{level=1,serves=\"data\",entries={entries},ways={ways},page_sizes=[\"4K\"]}}}}"), "pwc.entries=[]".into()]
}

proptest! {
    #![proptest_config(crate::common::proptest_config(48))]
    /// A single-level LRU data TLB (4K pages, fully or set associative) gives exactly
    /// the lookups and misses of the reference model.
    #[test]
    fn single_level_lru_tlb_matches_reference(
        pages in proptest::collection::vec(0u64..96, 1..1500),
        geometry in prop_oneof![Just((16usize, 0usize)), Just((16, 4)), Just((12, 3)), Just((8, 1)), Just((32, 8))],
    ) {
        let (entries, ways) = geometry;
        let recs: Vec<Record> = pages.iter().enumerate()
            .map(|(i, p)| if i % 3 == 0 { Record::write(BASE + p * 4096 + 8, 8, 1) } else { Record::read(BASE + p * 4096, 4, 1) })
            .collect();
        let cfg = Config::from_toml(
            include_str!("../../configs/tiny.toml"), "tiny",
            &single_tlb_config(entries, ways),
        ).unwrap();
        let mut src = VecSource::new("test", recs);
        let doc = run(&cfg, &mut src, &SourceInfo::default(), |_| {}).unwrap();
        let vpns: Vec<u64> = pages.iter().map(|p| (BASE >> 12) + p).collect();
        let (lookups, misses) = reference_lru(&vpns, entries, if ways == 0 { entries } else { ways });
        prop_assert_eq!(u(&doc, "/tlb/l1d/lookups"), lookups);
        prop_assert_eq!(u(&doc, "/tlb/l1d/misses"), misses);
        prop_assert_eq!(u(&doc, "/walks/count"), misses);
    }
}

/// Reference for a two-level hierarchy: L1 hit -> MRU in L1; L1 miss and L2 hit -> MRU
/// in L2 and fill L1; miss in both -> fill both (non-inclusive, independent LRU).
fn reference_two_level(vpns: &[u64], l1: (usize, usize), l2: (usize, usize)) -> [(u64, u64); 2] {
    struct Lru {
        sets: Vec<VecDeque<u64>>,
        ways: usize,
    }
    impl Lru {
        fn new((entries, ways): (usize, usize)) -> Lru {
            Lru { sets: vec![VecDeque::new(); entries / ways], ways }
        }
        fn lookup(&mut self, v: u64) -> bool {
            let n = self.sets.len() as u64;
            let l = &mut self.sets[(v % n) as usize];
            match l.iter().position(|&x| x == v) {
                Some(p) => {
                    l.remove(p);
                    l.push_front(v);
                    true
                }
                None => false,
            }
        }
        fn fill(&mut self, v: u64) {
            let n = self.sets.len() as u64;
            let ways = self.ways;
            let l = &mut self.sets[(v % n) as usize];
            if l.len() == ways {
                l.pop_back();
            }
            l.push_front(v);
        }
    }
    let (mut a, mut b) = (Lru::new(l1), Lru::new(l2));
    let mut out = [(0u64, 0u64); 2];
    for &v in vpns {
        out[0].0 += 1;
        if a.lookup(v) {
            continue;
        }
        out[0].1 += 1;
        out[1].0 += 1;
        if b.lookup(v) {
            a.fill(v);
            continue;
        }
        out[1].1 += 1;
        a.fill(v);
        b.fill(v);
    }
    out
}

proptest! {
    #![proptest_config(crate::common::proptest_config(32))]
    #[test]
    fn two_level_lru_hierarchy_matches_reference(
        pages in proptest::collection::vec(0u64..64, 1..1500),
    ) {
        let recs: Vec<Record> = pages.iter().map(|p| Record::read(BASE + p * 4096, 8, 1)).collect();
        let cfg = Config::from_toml(include_str!("../../configs/tiny.toml"), "tiny", &[
            "tlb={a={level=1,serves=\"data\",entries=4,ways=0,page_sizes=[\"4K\"]},b={level=2,serves=\"data\",entries=16,ways=2,page_sizes=[\"4K\"]}}".into(),
        ]).unwrap();
        let mut src = VecSource::new("test", recs);
        let doc = run(&cfg, &mut src, &SourceInfo::default(), |_| {}).unwrap();
        let vpns: Vec<u64> = pages.iter().map(|p| (BASE >> 12) + p).collect();
        let r = reference_two_level(&vpns, (4, 4), (16, 2));
        prop_assert_eq!((u(&doc, "/tlb/a/lookups"), u(&doc, "/tlb/a/misses")), r[0]);
        prop_assert_eq!((u(&doc, "/tlb/b/lookups"), u(&doc, "/tlb/b/misses")), r[1]);
    }
}

#[test]
fn linear_array_refill_costs_one_reference_when_its_array_page_is_in_the_tlb() {
    let run_pages = |n: u64| {
        let mut recs = vec![mmap(BASE, 1 << 20)];
        recs.extend((0..n).map(|p| Record::read(BASE + p * 4096, 8, 1)));
        simulate("tiny", &["page_table.kind=linear", "pwc.entries=[]", "tlb.l2.entries=64"], recs).unwrap()
    };
    let (three, four) = (run_pages(3), run_pages(4));
    // Page 0: the array page does not exist yet — a nested walk of the empty table.
    // Page 1: nested miss, 4-level walk of the array's table, then the PTE read.
    // Pages 2, 3: the array page is in the TLB: one reference each.
    assert_eq!(u(&four, "/walks/refs") - u(&three, "/walks/refs"), 1);
    assert_eq!(u(&four, "/walks/nested_misses"), 2);
    assert_eq!(u(&four, "/walks/nested_lookups"), 4);
    assert_eq!(u(&four, "/walks/refs"), 1 + (4 + 1) + 1 + 1);
    assert_eq!(u(&four, "/page_table/mapped_pages"), 4);
}

#[test]
fn vax_style_linear_array_resolves_nested_misses_in_one_physical_reference() {
    let mut recs = vec![mmap(0x4000_0000, 1 << 20)];
    recs.extend((0..3u64).map(|p| Record::read(0x4000_0000 + p * 4096, 8, 1)));
    let doc = simulate("tiny", &["page_table.kind=linear", "page_table.linear.backing=linear", "page_table.linear.va_bits=32"], recs).unwrap();
    // Page 0: root entry read (no array page yet); page 1: root entry + PTE; page 2: PTE.
    assert_eq!(u(&doc, "/walks/refs"), 1 + 2 + 1);
    let e = simulate("tiny", &["page_table.kind=linear", "page_table.linear.backing=linear"], vec![]).unwrap_err();
    assert!(e.to_string().contains("page_table.linear.va_bits"), "{e}");
}

/// Elphinstone §3.3's other hybrid (after [BKW94]): the array pages' translations are
/// cached in a software TLB. Eight pages 2 MiB apart (one array page each) cycle
/// through a 2-entry TLB, so after the first pass every access misses and so does its
/// array page. The second pass fills the STLB (the first created the array pages by
/// faulting, no nested walk); on the third the STLB answers each nested miss in one
/// reference (then the PTE read), where the radix table behind it (no PWC) takes four.
#[test]
fn linear_array_with_a_software_tlb_resolves_nested_misses_in_one_reference() {
    let run = |backing: &str, passes: usize| {
        let mut recs = vec![mmap(BASE, 1 << 30)];
        for _ in 0..passes {
            recs.extend((0..8u64).map(|p| Record::read(BASE + (p << 21), 8, 1)));
        }
        let mut sets = vec![
            "page_table.kind=linear".to_string(),
            format!("page_table.linear.backing={backing}"),
            "pwc.entries=[]".into(),
            "tlb={a={level=1,serves=\"data\",entries=2,ways=0,page_sizes=[\"4K\"]}}".into(),
        ];
        if backing == "stlb" {
            sets.push("page_table.linear.array_stlb.entries=64".into());
        }
        let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        simulate("tiny", &sets, recs).unwrap()
    };
    let second = |b: &str| {
        let (one, two) = (run(b, 2), run(b, 3));
        (u(&two, "/walks/refs") - u(&one, "/walks/refs"), u(&two, "/walks/nested_misses") - u(&one, "/walks/nested_misses"))
    };
    assert_eq!(second("mpt"), (8 * (4 + 1), 8));
    assert_eq!(second("stlb"), (8 * (1 + 1), 8));
    let doc = run("stlb", 3);
    assert_eq!(u(&doc, "/page_table/details/array_stlb/hits"), 8, "the third pass hits every time");
    assert_eq!(u(&doc, "/page_table/details/array_stlb/misses"), 16, "the first pass finds no array page yet, the second fills");
    let e = simulate("tiny", &["page_table.kind=linear", "page_table.linear.backing=stlb"], vec![]).unwrap_err();
    assert!(e.to_string().contains("page_table.linear.array_stlb.entries"), "{e}");
    let e = simulate("tiny", &["page_table.kind=linear", "page_table.linear.array_stlb.entries=64"], vec![]).unwrap_err();
    assert!(e.to_string().contains("page_table.linear.array_stlb"), "an STLB the backing does not use: {e}");
}

/// Nested radix through the whole engine: with every walk cache off, each TLB miss to
/// a mapped page costs 24 sequential references (4-level guest over 4-level host); the
/// TLB holds guest-virtual -> host-physical translations (the demand fault returns the
/// composed translation), so a repeated access hits.
#[test]
fn nested_radix_walks_take_24_steps_through_the_engine() {
    let bare = ["page_table.kind=nested-radix", "page_table.nested.ntlb_entries=0", "page_table.nested.npwc_entries=[]", "pwc.entries=[]"];
    // 256 pages 2 MiB apart: first touch faults them in, the second pass misses the
    // tiny TLBs (8 + 32 entries) on every access.
    let pass: Vec<Record> = (0..256u64).map(|p| Record::read(BASE + (p << 21), 8, 1)).collect();
    let mut once = vec![mmap(BASE, 1 << 30)];
    once.extend(pass.iter().cloned());
    let mut twice = once.clone();
    twice.extend(pass.iter().cloned());
    let (a, b) = (simulate("tiny", &bare, once).unwrap(), simulate("tiny", &bare, twice).unwrap());
    let walks = u(&b, "/walks/count") - u(&a, "/walks/count");
    assert_eq!(walks, 256);
    assert_eq!(u(&b, "/walks/steps") - u(&a, "/walks/steps"), 24 * walks);
    assert_eq!(u(&b, "/faults/count"), 256, "no fault in the second pass");
    assert!(u(&b, "/page_table/details/host_bytes") > 0 && u(&b, "/page_table/details/guest_bytes") > 0);
    // The same page twice in a row: the second access hits the TLB.
    let doc = simulate("tiny", &bare, vec![mmap(BASE, 1 << 20), Record::read(BASE, 8, 1), Record::read(BASE + 8, 8, 1)]).unwrap();
    assert_eq!(u(&doc, "/walks/count"), 1);
}

/// ECPT through the engine: every last-level TLB miss is one walk of one sequential
/// step, classified; the preset's CWCs make most walks cheaper than complete ones.
#[test]
fn ecpt_walks_are_single_steps_and_classified() {
    let mut recs = vec![mmap(BASE, 64 << 20)];
    recs.extend((0..20_000u64).map(|i| Record::read(BASE + (((i * 7919) % (16 << 10)) << 12), 8, 1)));
    let doc = simulate("ecpt-asplos22", &[], recs).unwrap();
    let walks = u(&doc, "/walks/count");
    assert_eq!(walks, u(&doc, "/tlb/l2_4k/misses"), "one walk per L2 miss (4K pages only)");
    assert_eq!(u(&doc, "/walks/steps"), walks);
    let classes: u64 = ["direct", "size", "partial", "complete"].iter().map(|c| u(&doc, &format!("/page_table/details/walks/{c}"))).sum();
    assert_eq!(classes, walks);
    assert!(u(&doc, "/page_table/details/walks/complete") < walks / 2);
    assert!(u(&doc, "/walk_caches/pud_cwc/hits") > 0);
}

/// Nested ECPT (the advanced design of the Table 2 preset) through the engine: no walk
/// takes more than three sequential steps; CWT fetches are background references,
/// counted as MMU requests but in no step; every walk cache reports.
#[test]
fn nested_ecpt_walks_take_three_steps_with_background_fills() {
    let mut recs = vec![mmap(BASE, 256 << 20)];
    // 4096 pages, each touched about 5 times: past the TLBs, mostly after the first touch.
    recs.extend((0..20_000u64).map(|i| Record::read(BASE + (((i * 7919) % 4096) << 12), 8, 1)));
    let doc = simulate("ecpt-asplos22", &["page_table.kind=nested-ecpt"], recs.clone()).unwrap();
    let per_step = doc["walks"]["parallel_refs_per_step"].as_array().unwrap();
    assert_eq!(per_step.len(), 3, "{per_step:?}");
    let step_refs: f64 = (0..3).map(|k| per_step[k].as_f64().unwrap() * u(&doc, &format!("/walks/walks_with_step/{k}")) as f64).sum();
    let background = u(&doc, "/walks/background_refs");
    assert!(background > 0);
    assert_eq!(u(&doc, "/walks/refs"), step_refs.round() as u64 + background);
    for cache in ["pmd_cwc", "pud_cwc", "host_pte_cwc", "host_pmd_cwc", "host_pud_cwc", "host_step1_pte_cwc", "stc"] {
        assert!(u(&doc, &format!("/walk_caches/{cache}/lookups")) > 0, "{cache}");
    }
    // The plain design: no STC, one shared hCWC, and more references.
    let plain = [
        "page_table.kind=nested-ecpt",
        "page_table.nested.stc_entries=0",
        "page_table.nested.step1_host_pte_cwc=0",
        "page_table.nested.adaptive_pte_cwc=false",
        "page_table.nested.host_pte_cwc=0",
        "page_table.nested.pt_pages_4k_only=false",
    ];
    let p = simulate("ecpt-asplos22", &plain, recs).unwrap();
    assert!(p["walk_caches"].get("stc").is_none() && p["walk_caches"].get("host_step1_pte_cwc").is_none());
    assert_eq!(u(&p, "/walks/count"), u(&doc, "/walks/count"));
    assert!(u(&p, "/walks/refs") > u(&doc, "/walks/refs"));
    // Mechanisms that cannot work together are refused, naming the key.
    let e =
        simulate("ecpt-asplos22", &["page_table.kind=nested-ecpt", "page_table.nested.host_pt_backing=same", "page_table.nested.host_page_size=2M"], vec![])
            .unwrap_err();
    assert!(e.to_string().contains("page_table.nested.pt_pages_4k_only"), "{e}");
    let e = simulate("ecpt-asplos22", &["page_table.kind=nested-ecpt", "page_table.nested.host_pt_backing=8K"], vec![]).unwrap_err();
    assert!(e.to_string().contains("host_pt_backing"), "{e}");
}

/// The statistics warm-up: a run of X then Y, warmed up over X's accesses, counts
/// exactly what the full run counts minus what X alone counts (the simulation is
/// deterministic and unchanged by the warm-up), for every counter it covers.
#[test]
fn warmup_counts_exactly_the_accesses_after_it() {
    let mut x = vec![mmap(BASE, 256 << 20), Record::Tick(500)];
    x.extend((0..6_000u64).map(|i| Record::read(BASE + (((i * 7919) % 4096) << 12), 8, 1)));
    let mut xy = x.clone();
    xy.extend((0..6_000u64).map(|i| Record::write(BASE + (((i * 104_729) % 8192) << 12), 8, 1)));
    for (preset, kind) in [("skylake", "radix"), ("ecpt-asplos22", "nested-ecpt"), ("ecpt-asplos22", "nested-radix")] {
        let k = format!("page_table.kind={kind}");
        let warm = ["sim.warmup_accesses=6000", k.as_str()];
        let (a, full, w) =
            (simulate(preset, &[&k], x.clone()).unwrap(), simulate(preset, &[&k], xy.clone()).unwrap(), simulate(preset, &warm, xy.clone()).unwrap());
        assert_eq!(w["warmup"]["completed"], true);
        let mut paths = vec![
            "/totals/accesses".to_string(),
            "/totals/instructions".into(),
            "/walks/count".into(),
            "/walks/refs".into(),
            "/walks/steps".into(),
            "/cycles/walk".into(),
            "/cycles/tlb".into(),
            "/tlb_levels/0/lookups".into(),
            "/tlb_levels/1/hits".into(),
        ];
        for name in full["tlb"].as_object().unwrap().keys() {
            paths.push(format!("/tlb/{name}/misses"));
        }
        for name in full["caches"].as_object().unwrap().keys() {
            paths.push(format!("/caches/{name}/walk_accesses"));
        }
        for name in full["walk_caches"].as_object().unwrap().keys() {
            paths.push(format!("/walk_caches/{name}/lookups"));
            paths.push(format!("/walk_caches/{name}/hits"));
        }
        for p in &paths {
            assert_eq!(u(&w, p), u(&full, p) - u(&a, p), "{kind} {p}");
        }
        assert!(u(&w, "/walks/count") > 0 && u(&w, "/walks/latency/count") == u(&w, "/walks/count"), "{kind}");
    }
    // A warm-up longer than the run never completes: the whole run is counted, and said so.
    let w = simulate("skylake", &["sim.warmup_accesses=100000"], x.clone()).unwrap();
    assert_eq!((w["warmup"]["completed"].as_bool(), u(&w, "/totals/accesses")), (Some(false), 6000));
    let e = simulate("skylake", &["sim.warmup_accesses=10", "os.policy.kind=asap"], x).unwrap_err();
    assert!(e.to_string().contains("sim.warmup_accesses"), "{e}");
}

/// Groups of a tick of 2, a read, a fetch and a write: 3 instructions and 3 accesses
/// each (the read belongs to the tick's last instruction, the write to the fetch's).
fn instruction_groups(groups: u64) -> Vec<Record> {
    let mut recs = vec![mmap(BASE, 64 << 20)];
    for g in 0..groups {
        let page = BASE + (((g * 7919) % 16_384) << 12);
        recs.extend([Record::Tick(2), Record::read(page, 8, 1), Record::fetch(BASE + (g % 64) * 4, 4, 1), Record::write(page + 64, 8, 1)]);
    }
    recs
}

/// `sim.max_instructions` stops, and `sim.warmup_instructions` ends the warm-up, before
/// the first record that begins an instruction once that many have run: the last
/// instruction's references are in, and a tick that carries the count past the limit
/// is taken whole. Whatever the batch boundaries.
#[test]
fn an_instruction_window_stops_and_warms_up_at_the_right_record() {
    let recs = instruction_groups(4_000);
    let sets = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // (limit, records, accesses, instructions): 9 ends after group 3's write; 10 is
    // reached inside group 4's tick (11), whose read comes along.
    for (limit, records, accesses, instructions) in [(9u64, 13u64, 9u64, 9u64), (10, 15, 10, 11), (9_000, 12_001, 9_000, 9_000), (9_001, 12_003, 9_001, 9_002)]
    {
        let o = sets(&[&format!("sim.max_instructions={limit}")]);
        for batch in [1, 2, 3, 7, 4096, recs.len()] {
            let d = document_in_batches(&o, &recs, batch);
            let got = (u(&d, "/totals/records"), u(&d, "/totals/accesses"), u(&d, "/totals/instructions"));
            assert_eq!(got, (records, accesses, instructions), "max {limit}, batches of {batch}");
        }
        // The warm-up ends at the same record: its counts are those of the run up to
        // there, the rest is measured; every counter is the full run's minus the prefix's.
        let o = sets(&[&format!("sim.warmup_instructions={limit}")]);
        let prefix = document_in_batches(&[], &recs[..records as usize], recs.len());
        let full = document_in_batches(&[], &recs, recs.len());
        for batch in [1, 3, 4096, recs.len()] {
            let w = document_in_batches(&o, &recs, batch);
            assert_eq!(w["warmup"]["completed"], true);
            assert_eq!((u(&w, "/warmup/instructions"), u(&w, "/warmup/accesses")), (limit, 0));
            assert_eq!((u(&w, "/window/warmup_accesses"), u(&w, "/window/warmup_instructions")), (accesses, instructions), "warm-up {limit}");
            assert_eq!((u(&w, "/window/accesses"), u(&w, "/window/instructions")), (12_000 - accesses, 12_000 - instructions));
            for p in [
                "/totals/records",
                "/totals/accesses",
                "/totals/instructions",
                "/totals/fetches",
                "/walks/count",
                "/walks/refs",
                "/cycles/walk",
                "/tlb/l1d_4k/misses",
                "/tlb/l1i_4k/lookups",
                "/tlb_levels/0/lookups",
                "/caches/l1d/walk_accesses",
            ] {
                assert_eq!(u(&w, p), u(&full, p) - u(&prefix, p), "warm-up {limit}, batches of {batch}: {p}");
            }
        }
    }
    // Without a window every document says so, in both units.
    let d = document_in_batches(&[], &recs, recs.len());
    assert_eq!(d["warmup"], serde_json::json!({"accesses": 0, "instructions": 0, "completed": false}));
    assert_eq!(d["window"], serde_json::json!({"warmup_accesses": 0, "warmup_instructions": 0, "accesses": 12_000, "instructions": 12_000}));
    // A warm-up in instructions longer than the trace never completes; one that ends
    // with the trace's last instruction does (nothing is left to measure).
    for (limit, completed) in [(12_001, false), (12_000, true)] {
        let w = document_in_batches(&sets(&[&format!("sim.warmup_instructions={limit}")]), &recs, 4096);
        assert_eq!((w["warmup"]["completed"].as_bool(), u(&w, "/totals/instructions")), (Some(completed), if completed { 0 } else { 12_000 }));
    }
    // The two units can be mixed: a warm-up in accesses, a stop in instructions.
    let d = document_in_batches(&sets(&["sim.warmup_accesses=9", "sim.max_instructions=30"]), &recs, 5);
    assert_eq!((u(&d, "/window/warmup_instructions"), u(&d, "/totals/accesses"), u(&d, "/totals/instructions")), (9, 21, 21));
}

/// On a trace of one instruction per access (a tick of 1 before each access, or every
/// access a fetch), the window in instructions is the window in accesses: the same
/// document but for the keys that state it, with the time model too.
#[test]
fn a_window_in_instructions_is_the_window_in_accesses_at_one_instruction_per_access() {
    let doc = |workload: &str, params: &[(&str, &str)], overrides: &[&str]| {
        let params: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let cfg = Config::load("ecpt-asplos22", &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let mut src = vmlab::trace::synth::open(workload, &params).unwrap();
        let mut d = run(&cfg, &mut *src, &SourceInfo::default(), |_| {}).unwrap();
        let o = d.as_object_mut().unwrap();
        for k in ["config", "config_hash", "warmup"] {
            o.remove(k);
        }
        d
    };
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        ("gups", &[("footprint", "64M"), ("accesses", "40000"), ("instrs_per_access", "1")], &[]),
        ("gups", &[("footprint", "64M"), ("accesses", "40000"), ("instrs_per_access", "1")], &["page_table.kind=nested-ecpt"]),
        ("gups", &[("footprint", "64M"), ("accesses", "40000"), ("instrs_per_access", "1")], &["memory.data_refs=true", "time.model=ooo"]),
        // Every access a fetch, no ticks.
        ("strawman", &[("fetch", "1"), ("accesses", "40000"), ("instrs_per_access", "0")], &["memory.data_refs=true", "time.model=ooo"]),
    ];
    for (workload, params, design) in cases {
        let with = |window: [&str; 2]| doc(workload, params, &[&design[..], &window[..]].concat());
        let accesses = with(["sim.warmup_accesses=15000", "sim.max_accesses=35000"]);
        let instructions = with(["sim.warmup_instructions=15000", "sim.max_instructions=35000"]);
        assert_eq!(u(&accesses, "/window/accesses"), 20_000);
        assert_eq!(u(&accesses, "/window/warmup_instructions"), 15_000);
        assert!(*workload != "gups" || u(&accesses, "/walks/count") > 0);
        assert_eq!(accesses, instructions, "{workload} {params:?} {design:?}");
    }
}

/// The instruction keys' errors: one line naming the key (both keys when both forms
/// of one are set), and a trace that counts no instructions.
#[test]
fn instruction_window_errors_name_the_key() {
    let err = |o: &[&str]| Config::load("skylake", &o.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err().to_string();
    for (o, keys) in [
        (&["sim.max_accesses=10", "sim.max_instructions=40"][..], &["sim.max_accesses", "sim.max_instructions"][..]),
        (&["sim.warmup_accesses=10", "sim.warmup_instructions=40"], &["sim.warmup_accesses", "sim.warmup_instructions"]),
        (&["sim.warmup_instructions=40", "sim.max_instructions=40"], &["sim.warmup_instructions", "sim.max_instructions"]),
        (&["sim.warmup_instructions=40", "os.policy.kind=asap"], &["sim.warmup_instructions"]),
        (&["sim.warmup_instructions=40", "os.recolor.kind=periodic-color"], &["sim.warmup_instructions"]),
        (&["sim.max_instructions=-1"], &["sim.max_instructions"]),
        (&["sim.max_instructions=50M"], &["sim.max_instructions"]),
        (&["sim.warmup_instructions=1.5"], &["sim.warmup_instructions"]),
        (&["sim.max_instructionz=5"], &["max_instructionz"]),
    ] {
        let e = err(o);
        assert!(keys.iter().all(|k| e.contains(k)) && !e.contains('\n'), "{o:?}: {e}");
    }
    // A trace without ticks or fetches: at the end of a short one, early in a long one.
    let reads = |n: u64| {
        let mut recs = vec![mmap(BASE, 64 << 20)];
        recs.extend((0..n).map(|i| Record::read(BASE + ((i % 4096) << 12), 8, 1)));
        recs
    };
    for (n, o) in [(100, "sim.warmup_instructions=10"), (200_000, "sim.max_instructions=10")] {
        let e = simulate("skylake", &[o], reads(n)).unwrap_err().to_string();
        let key = o.split('=').next().unwrap();
        assert!(e.contains(key) && e.contains("counts no instructions") && !e.contains('\n'), "{e}");
        assert_eq!(e.contains("first 65536 accesses"), n > 65_536, "{e}");
    }
    assert!(simulate("skylake", &["sim.max_instructions=10"], vec![mmap(BASE, 4096)]).is_ok(), "no access, nothing to count");
}

/// The hypervisor running out of host memory stops a nested run with a clear error,
/// whether it happens backing a data page or a guest page-table page during a walk.
#[test]
fn nested_host_memory_exhaustion_is_a_clear_error() {
    let mut recs = vec![mmap(BASE, 64 << 20)];
    recs.extend((0..20_000u64).map(|i| Record::read(BASE + (((i * 7919) % (16 << 10)) << 12), 8, 1)));
    for kind in ["nested-ecpt", "nested-radix", "hybrid"] {
        for host in ["4M", "12M"] {
            let k = format!("page_table.kind={kind}");
            let h = format!("page_table.nested.host_phys_mem={host}");
            let e = simulate("ecpt-asplos22", &[&k, &h], recs.clone()).unwrap_err();
            assert!(e.to_string().contains("page_table.nested.host_phys_mem"), "{kind} {host}: {e}");
        }
    }
}

/// THP policies through the engine: eager maps a dense aligned region with 2M pages
/// only; reservation-based THP promotes exactly when the threshold's page is touched.
#[test]
fn thp_policies_map_and_promote_at_their_thresholds() {
    let touch = |pages: u64| -> Vec<Record> {
        let mut r = vec![mmap(BASE, 4 << 20)];
        r.extend((0..pages).map(|p| Record::read(BASE + (p << 12), 8, 1)));
        r
    };
    let doc = simulate("skylake", &["os.policy.kind=thp-eager"], touch(1024)).unwrap();
    assert_eq!(u(&doc, "/page_sizes/2M"), 2);
    assert!(doc["page_sizes"].get("4K").is_none_or(|v| v.as_u64() == Some(0)));
    for (threshold, at) in [("1.0", 512u64), ("0.5", 256)] {
        let set = ["os.policy.kind=thp-reserve".to_string(), format!("os.policy.threshold={threshold}")];
        let set: Vec<&str> = set.iter().map(|s| s.as_str()).collect();
        let before = simulate("skylake", &set, touch(at - 1)).unwrap();
        assert_eq!(u(&before, "/policy/promotions"), 0, "threshold {threshold}: no promotion before page {at}");
        let after = simulate("skylake", &set, touch(at)).unwrap();
        assert_eq!(u(&after, "/policy/promotions"), 1, "threshold {threshold}: promotion at page {at}");
        assert_eq!(u(&after, "/page_sizes/2M"), 1);
        // Accounting balances with a reservation still open (the second 2M region).
        let open = simulate("skylake", &set, touch(at + 10)).unwrap();
        let part = |k: &str| u(&open, &format!("/memory/{k}"));
        assert_eq!(part("frames_used"), part("frames_data") + part("frames_page_table") + part("frames_reserved") + part("frames_other"));
        assert!(part("frames_reserved") > 0 || u(&open, "/policy/reservations_active") == 0);
    }
}

/// khugepaged (Linux mm/khugepaged.c) on top of FIXED 4K: each wake-up scans aligned
/// 2M regions and collapses one of base pages with at least `512 − max_ptes_none`
/// populated by copying into a fresh 2M frame, the whole 2M charged at
/// `copy_cycles_per_kb`; never-touched pages of a collapsed region are bloat. With no
/// free 2M block the collapse fails and the region stays 4K.
#[test]
fn khugepaged_collapses_populated_regions_by_copying() {
    // 8M: region 0 fully populated, region 1 one page, regions 2-3 untouched; then
    // enough accesses for khugepaged to wake and scan every region.
    let mut recs = vec![mmap(BASE, 8 << 20)];
    recs.extend((0..512).map(|p| Record::read(BASE + (p << 12), 8, 1)));
    recs.push(Record::read(BASE + (2 << 20) + 0x5000, 8, 1));
    recs.extend((0..4000u64).map(|i| Record::read(BASE + ((i % 512) << 12), 8, 1)));
    let run_with = |extra: &[&str]| {
        let mut set = vec!["os.policy.kind=fixed", "os.policy.khugepaged.every=1000"];
        set.extend_from_slice(extra);
        simulate("skylake", &set, recs.clone()).unwrap()
    };
    let huge = 2u64 << 20;
    let d = run_with(&[]);
    assert_eq!(u(&d, "/policy/details/khugepaged/collapses"), 2, "Linux's default max_ptes_none = 511: one page is enough");
    assert_eq!(u(&d, "/page_sizes/2M"), 2);
    assert!(d["page_sizes"].get("4K").is_none_or(|v| v.as_u64() == Some(0)));
    assert_eq!(u(&d, "/policy/bytes_copied"), 2 * huge);
    assert_eq!(u(&d, "/policy/copy_cycles"), 2 * 2048 * 3000);
    assert_eq!(u(&d, "/policy/bloat_bytes"), 511 * 4096, "region 1's untouched pages");
    let strict = run_with(&["os.policy.khugepaged.max_ptes_none=0"]);
    assert_eq!(u(&strict, "/policy/details/khugepaged/collapses"), 1, "only the full region");
    assert_eq!((u(&strict, "/page_sizes/2M"), u(&strict, "/page_sizes/4K")), (1, 1));
    assert_eq!(u(&strict, "/policy/bloat_bytes"), 0);
    // After the collapse the 512 pages cycled through are one 2M entry in the L1 DTLB
    // (64 4K entries otherwise): far fewer L1 misses than 4K only.
    let plain = simulate("skylake", &["os.policy.kind=fixed"], recs.clone()).unwrap();
    let l1 = |v: &Value| u(v, "/tlb_levels_by_side/data/0/misses");
    assert!(2 * l1(&d) < l1(&plain), "{} vs {}", l1(&d), l1(&plain));
    // No free 2M block (half of memory taken, the rest in blocks of 256K at most).
    let frag = run_with(&["machine.phys_mem=1G", "machine.fragmentation.free=0.5", "machine.fragmentation.level=1.0", "machine.fragmentation.order=6"]);
    assert_eq!(u(&frag, "/policy/details/khugepaged/collapses"), 0);
    assert!(u(&frag, "/policy/details/khugepaged/alloc_failures") > 0);
    assert_eq!(u(&frag, "/page_sizes/4K"), 513);
}

proptest! {
    #![proptest_config(crate::common::proptest_config(48))]
    /// Under every policy, on random VMAs (odd sizes and offsets, some unmapped or
    /// re-protected later) and random accesses, every mapped page lies inside one VMA and
    /// is aligned to its size (accesses outside every VMA, after munmap or overlap,
    /// get implicit VMAs).
    #[test]
    fn no_policy_maps_outside_its_vma_or_misaligned(
        vmas in proptest::collection::vec((0u64..64, 1u64..1200), 1..6),
        accesses in proptest::collection::vec((0usize..6, 0u64..(1200 << 12)), 1..1500),
        policy in prop_oneof![Just("fixed"), Just("thp-eager"), Just("thp-reserve")],
        threshold in prop_oneof![Just("1.0"), Just("0.5")],
        unmap_one in any::<bool>(),
    ) {
        use vmlab::mmu::pwc::PageWalkCache;
use vmlab::pt::{RadixPageTable};
        let cfg = Config::load("tiny", &[
            "machine.phys_mem=1G".to_string(),
            format!("os.policy.kind={policy}"),
            format!("os.policy.threshold={threshold}"),
            "os.implicit_anon=true".to_string(),
        ]).unwrap();
        let mut e = vmlab::sim::Engine::new(&cfg, RadixPageTable::new(4).unwrap(), PageWalkCache::none()).unwrap();
        // VMAs at 4 MiB-spaced slots with odd page offsets and lengths (not 2M-aligned).
        let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages)| (BASE + slot * (8 << 20) + (((slot * 7) % 512) << 12), pages << 12)).collect();
        common::drive_vmas(&mut e, &regions, &accesses, unmap_one);
        common::pages_inside_vmas(&e)?;
        common::tlbs_agree_with_page_table(&e)?;
    }
}

/// A shared mapping inherited through fork keeps sharing frames after one process
/// unmaps a page in its middle: the piece after the hole still knows where the object's
/// offset 0 lies (Linux's `vm_pgoff`), so its pages are the object's pages, not pages
/// shifted by the hole.
#[test]
fn a_shared_mapping_split_by_munmap_still_shares_the_right_frames() {
    use vmlab::mmu::pwc::PageWalkCache;
    use vmlab::pt::RadixPageTable;
    let cfg = Config::load("tiny", &[]).unwrap();
    let mut e = vmlab::sim::Engine::new(&cfg, RadixPageTable::new(4).unwrap(), PageWalkCache::none()).unwrap();
    const B: u64 = 0x5000_0000;
    let recs = [
        Record::Mmap { pid: 1, start: B, len: 4 * 4096, prot: 3, flags: MapFlags::SHARED },
        Record::Fork { parent: 1, child: 2 },
        // The child cuts a hole at page 1, then touches page 2 first; the parent follows.
        Record::Munmap { pid: 2, start: B + 4096, len: 4096 },
        Record::read(B + 2 * 4096, 8, 2),
        Record::read(B + 2 * 4096, 8, 1),
        Record::read(B + 4096, 8, 1),
    ];
    for r in &recs {
        e.record(r).unwrap();
    }
    let pa = |pid, va| e.os.mm.translation_at(pid, va).expect("mapped").pa;
    assert_eq!(pa(1, B + 2 * 4096), pa(2, B + 2 * 4096), "page 2 is one frame for both");
    assert_ne!(pa(1, B + 4096), pa(1, B + 2 * 4096), "page 1 is another object page");
    assert_eq!(e.os.mm.mem.counters().frames_data, 2);
}

/// The document of `records` fed in batches of `batch` records.
fn document_in_batches(overrides: &[String], records: &[Record], batch: usize) -> Value {
    try_document_in_batches(overrides, records, batch).unwrap()
}

/// The same, or the simulation's error.
fn try_document_in_batches(overrides: &[String], records: &[Record], batch: usize) -> vmlab::Result<Value> {
    let cfg = Config::load("skylake", overrides).unwrap();
    let mut sim = vmlab::sim::build(&cfg, &SourceInfo::default(), None).unwrap();
    for chunk in records.chunks(batch) {
        if sim.feed(chunk)? {
            break;
        }
    }
    Ok(sim.finish(&vmlab::trace::TraceMeta::default())?.0)
}

proptest! {
    #![proptest_config(crate::common::proptest_config(48))]

    /// A batch of one record always takes the engine's per-record path (a same-page run
    /// needs two records of one batch); a whole stream in one batch counts same-page
    /// runs in bulk. Every counter must come out the same: accesses of two processes
    /// (implied switches), reads, writes and fetches on a few pages, page-crossing
    /// sizes, ticks, a warm-up and `max_accesses` that can fall inside a run, and with
    /// and without ASID tags (flushes on a switch); without data references, with them,
    /// and with the time model timing them all or a sample.
    #[test]
    fn same_page_runs_count_exactly_what_the_per_record_path_counts(
        ops in proptest::collection::vec((0u8..8, 0u64..12, 1u32..3, prop_oneof![4 => Just(8u16), 1 => 1u16..9000], 1usize..24), 1..120),
        warmup in prop_oneof![Just(0u64), 1u64..600],
        max in prop_oneof![Just(0u64), 1u64..1200],
        asid_tags in any::<bool>(),
        units in (any::<bool>(), any::<bool>()),
        data in 0u8..4,
    ) {
        // Each op repeats `run` times on its page, interleaving kinds, so same-page runs
        // are long and a threshold often falls inside one.
        let records: Vec<Record> = ops
            .iter()
            .flat_map(|&(op, page, pid, size, run)| {
                (0..run).map(move |k| {
                    let va = BASE + page * 4096 + (k as u64 * 520) % 4096;
                    match (op as usize + k % 3) % 8 {
                        0..=2 => Record::read(va, size, pid),
                        3 | 4 => Record::write(va, size, pid),
                        5 | 6 => Record::fetch(va, 4, pid),
                        _ => Record::Tick(page + 1),
                    }
                })
            })
            .collect();
        // Each limit in accesses or in instructions (ticks, fetches).
        let unit = |instructions: bool| if instructions { "instructions" } else { "accesses" };
        let mut overrides = vec![format!("mmu.asid_tags={asid_tags}"), format!("sim.max_{}={max}", unit(units.1))];
        let timed = ["memory.data_refs=true", "time.model=\"ooo\""];
        let sampled = ["time.sampling.period=40", "time.sampling.unit=10", "time.sampling.warmup=10"];
        overrides.extend(timed.iter().chain(&sampled).take([0, 1, 2, 5][data as usize]).map(|s| s.to_string()));
        if warmup > 0 && (max == 0 || warmup < max || units.0 != units.1) {
            overrides.push(format!("sim.warmup_{}={warmup}", unit(units.0)));
        }
        let one_by_one = try_document_in_batches(&overrides, &records, 1);
        let whole = try_document_in_batches(&overrides, &records, records.len());
        match (one_by_one, whole) {
            (Ok(one_by_one), Ok(whole)) => {
                prop_assert_eq!(&one_by_one["tlbs"], &whole["tlbs"]);
                prop_assert_eq!(one_by_one, whole);
            }
            // A window in instructions over records that count none.
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "{:?} / {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }
}

/// A pid that exited and is used again is a new process, created on first use like any
/// unannounced one (docs/trace-format.md): its pages fault in afresh.
#[test]
fn a_pid_reused_after_exit_is_a_new_process() {
    let mut recs = vec![mmap(BASE, 1 << 20), Record::read(BASE, 8, 1), Record::Exit { pid: 1 }];
    recs.extend([Record::read(BASE, 8, 1), Record::read(BASE + 4096, 8, 1)]);
    let doc = simulate("tiny", &[], recs).unwrap();
    assert_eq!(u(&doc, "/faults/count"), 3, "the first page faults again in the new process");
    assert_eq!(u(&doc, "/faults/implicit"), 2, "the new process has no mmap: implicit anonymous memory");
    assert_eq!((u(&doc, "/faults/processes_created"), u(&doc, "/faults/processes_exited")), (2, 1));
}

/// Live processes are bounded (`os.max_processes`: each costs host memory), not pids
/// seen: a trace of many short-lived processes runs, one with too many at once stops
/// with an error naming the key.
#[test]
fn live_processes_are_bounded_by_os_max_processes() {
    let live: Vec<Record> = (1..=9).flat_map(|pid| [Record::read(BASE, 8, pid), Record::write(0x40_0000, 8, pid)]).collect();
    let e = simulate("tiny", &["os.max_processes=8"], live.clone()).unwrap_err().to_string();
    assert!(e.contains("os.max_processes") && e.contains("pid 9") && e.contains("at most 8"), "{e}");
    assert!(simulate("tiny", &["os.max_processes=9"], live).is_ok());
    let one_at_a_time: Vec<Record> = (1..=100).flat_map(|pid| [Record::read(BASE, 8, pid), Record::Exit { pid }]).collect();
    let doc = simulate("tiny", &["os.max_processes=1"], one_at_a_time).unwrap();
    assert_eq!(u(&doc, "/faults/processes_created"), 100);
    for bad in ["0", "65536"] {
        let e = Config::load("tiny", &[format!("os.max_processes={bad}")]).unwrap_err().to_string();
        assert!(e.contains("os.max_processes"), "{e}");
    }
}
