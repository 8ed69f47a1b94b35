//! Itanium's short-format VHPT with a page size per region (Chapman et al. §2.3.1:
//! "the page size is fixed for each region of each process") through the whole engine:
//! the OS maps each region's page size, a refill reads the entry of the region's page,
//! the all-4K default is one linear array, and bad settings are named.

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use vmlab::addr::{PageSize, Perms};
use vmlab::config::Config;
use vmlab::mmu::pwc::PageWalkCache;
use vmlab::pt::{LinearPageTable, PageTable};
use vmlab::sim::{run, Engine, SourceInfo};
use vmlab::trace::{MapFlags, Record, VecSource};

/// Region 7 with the default region_shift (VA bits 46:44 = 7).
const BASE: u64 = 0x7f00_0000_0000;
/// Region 5.
const LOW: u64 = 0x5555_0000_0000;
const K16: u64 = 16 << 10;

/// `page_table.linear.region_page_sizes` with `pairs` (region, size) and 4K elsewhere.
fn regions(pairs: &[(usize, &str)]) -> String {
    let mut v = vec!["\"4K\"".to_string(); 8];
    for &(r, s) in pairs {
        v[r] = format!("\"{s}\"");
    }
    format!("page_table.linear.region_page_sizes=[{}]", v.join(","))
}

/// The tiny machine with the short VHPT, its TLBs holding 16K and 64K pages too.
fn overrides(extra: &[String]) -> Vec<String> {
    let mut o: Vec<String> = [
        "page_table.kind=linear",
        "pwc.entries=[]",
        "tlb.l1d.page_sizes=[\"4K\",\"16K\",\"64K\",\"2M\"]",
        "tlb.l1i.page_sizes=[\"4K\",\"16K\",\"64K\",\"2M\"]",
        "tlb.l2.page_sizes=[\"4K\",\"16K\",\"64K\",\"2M\",\"1G\"]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    o.extend(extra.iter().cloned());
    o
}

fn simulate(extra: &[String], records: Vec<Record>) -> vmlab::Result<Value> {
    let cfg = Config::load("tiny", &overrides(extra))?;
    run(&cfg, &mut VecSource::new("test", records), &SourceInfo::default(), |_| {})
}

fn engine(extra: &[String]) -> Engine<LinearPageTable> {
    let cfg = Config::load("tiny", &overrides(extra)).unwrap();
    Engine::new(&cfg, LinearPageTable::new(&cfg.page_table.linear).unwrap(), PageWalkCache::none()).unwrap()
}

fn u(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or_else(|| panic!("missing {p}"))
}

fn mmap(start: u64, len: u64, prot: u8) -> Record {
    Record::Mmap { pid: 1, start, len, prot, flags: MapFlags::PRIVATE }
}

#[test]
fn refill_in_a_16k_region_costs_one_reference_when_its_array_page_is_in_the_tlb() {
    // n 16K pages of region 7, each read at its start and 12K in.
    let run_pages = |n: u64, sizes: &[(usize, &str)]| {
        let mut recs = vec![mmap(BASE, 1 << 20, 3)];
        recs.extend((0..n).flat_map(|p| [Record::read(BASE + p * K16, 8, 1), Record::read(BASE + p * K16 + 12288, 8, 1)]));
        simulate(&[regions(sizes)], recs).unwrap()
    };
    let (three, four) = (run_pages(3, &[(7, "16K")]), run_pages(4, &[(7, "16K")]));
    // One walk per 16K page: the read 12K in hits the page's TLB entry.
    assert_eq!(u(&four, "/walks/count"), 4);
    assert_eq!(u(&four, "/page_sizes/16K"), 4);
    assert_eq!(u(&four, "/faults/count"), 4);
    // Page 0: the array page does not exist yet — a nested walk of the empty table.
    // Page 1: nested miss, 4-level walk of the array's table, then the PTE read.
    // Pages 2, 3: the array page is in the TLB: one reference each.
    assert_eq!(u(&four, "/walks/refs") - u(&three, "/walks/refs"), 1);
    assert_eq!(u(&four, "/walks/nested_misses"), 2);
    assert_eq!(u(&four, "/walks/nested_lookups"), 4);
    assert_eq!(u(&four, "/walks/refs"), 1 + (4 + 1) + 1 + 1);
    assert_eq!(u(&four, "/page_table/mapped_pages"), 4);
    // With 4K pages there the reads 12K in are pages of their own: twice the walks.
    let base_pages = run_pages(4, &[]);
    assert_eq!((u(&base_pages, "/walks/count"), u(&base_pages, "/page_sizes/4K")), (8, 8));
}

#[test]
fn all_4k_regions_are_the_default_and_leave_configs_and_results_unchanged() {
    let default = Config::load("tiny", &overrides(&[])).unwrap();
    let explicit = Config::load("tiny", &overrides(&["page_table.linear.region_shift=44".into(), regions(&[])])).unwrap();
    assert_eq!(default.hash(), explicit.hash());
    let linear = &default.to_json()["page_table"]["linear"];
    assert!(linear.get("region_shift").is_none() && linear.get("region_page_sizes").is_none(), "{linear}");
    // Any region selector gives the same run when every region has 4K pages: the
    // regions' arrays are the one array indexed by VA >> 12.
    let recs = || {
        let mut r = vec![mmap(BASE, 4 << 20, 3), mmap(LOW, 1 << 20, 3), Record::Brk { pid: 1, end: 0x60_0000 }, Record::Brk { pid: 1, end: 0x70_0000 }];
        for i in 0..3000u64 {
            let va = [BASE + (i * 7919 % 1024) * 4096, LOW + (i * 31 % 256) * 4096, 0x60_0000 + (i % 256) * 4096][(i % 3) as usize];
            r.push(Record::read(va, 8, 1));
        }
        r.push(Record::Munmap { pid: 1, start: BASE, len: 2 << 20 });
        r.extend((0..500u64).map(|i| Record::read(BASE + (i * 13 % 1024) * 4096, 8, 1)));
        r
    };
    let strip = |mut d: Value| {
        d.as_object_mut().unwrap().remove("config");
        d.as_object_mut().unwrap().remove("config_hash");
        d
    };
    let a = strip(simulate(&[], recs()).unwrap());
    let b = strip(simulate(&["page_table.linear.region_shift=47".into()], recs()).unwrap());
    assert_eq!(a, b);
    assert!(a["page_table"]["details"].get("region_page_sizes").is_none());
    assert!(u(&a, "/walks/count") > 1000 && u(&a, "/faults/pages_unmapped") > 0);
}

#[test]
fn shared_pages_of_a_16k_region_are_shared_in_16k_pages() {
    let extreme = |sizes: &[(usize, &str)]| {
        let src = vmlab::api::SourceSpec::Workload {
            name: "shared".into(),
            params: vec![("procs".into(), "4".into()), ("pages".into(), "64".into()), ("accesses".into(), "20000".into())],
        };
        let req = vmlab::api::RunRequest { config: "tiny".into(), overrides: overrides(&[regions(sizes)]), source: src, progress: false };
        vmlab::api::run(&req).unwrap()
    };
    let (k4, k16) = (extreme(&[]), extreme(&[(7, "16K")]));
    // The same 64 frames either way; each process maps each of them once: 64 4K pages
    // or 16 16K pages.
    assert_eq!(u(&k4, "/memory/frames_data"), 64);
    assert_eq!(u(&k16, "/memory/frames_data"), 64);
    assert_eq!((u(&k4, "/faults/demand"), u(&k16, "/faults/demand")), (4 * 64, 4 * 16));
    assert_eq!(u(&k16, "/page_sizes/16K"), 4 * 16);
}

#[test]
fn a_region_page_is_mapped_whole_and_kept_while_any_of_it_is_in_use() {
    let k16 = PageSize::from_bytes(K16).unwrap();
    let mut e = engine(&[regions(&[(7, "16K")])]);
    let rec = |e: &mut Engine<LinearPageTable>, r: Record| e.record(&r).unwrap();
    // Two VMAs laid out at 4K inside one 16K page (B..B+16K) and into the next.
    rec(&mut e, mmap(BASE + 4096, 8192, 3));
    rec(&mut e, mmap(BASE + 12288, 8192, 1));
    rec(&mut e, Record::read(BASE + 4096, 8, 1));
    rec(&mut e, Record::read(BASE + 8192, 8, 1));
    // The neighbour's part of the page is translated by it (rights of the VMA that
    // faulted it): no fault.
    rec(&mut e, Record::read(BASE + 12288, 8, 1));
    rec(&mut e, Record::read(BASE + 16384, 8, 1));
    let c = &e.os.mm.counters;
    assert_eq!((c.demand, c.protection), (2, 0));
    let t = e.os.mm.translation_at(1, BASE + 12288).unwrap();
    assert_eq!((t.size, t.perms), (k16, Perms::RW_USER));
    assert_eq!(e.os.mm.translation_at(1, BASE + 16384).unwrap().perms, Perms::from_prot(1));
    // A write to the read-only VMA's own page is granted as a protection fault.
    rec(&mut e, Record::write(BASE + 16384, 8, 1));
    assert_eq!(e.os.mm.counters.protection, 1);
    // mprotect of part of a page leaves the page's rights; of a whole page sets them.
    rec(&mut e, Record::Mprotect { pid: 1, start: BASE + 4096, len: 4096, prot: 1 });
    assert_eq!(e.os.mm.translation_at(1, BASE).unwrap().perms, Perms::RW_USER);
    // Unmapping part of a page keeps it while a VMA still overlaps it ...
    rec(&mut e, Record::Munmap { pid: 1, start: BASE + 4096, len: 8192 });
    assert_eq!(e.os.mm.counters.pages_unmapped, 0);
    assert_eq!(e.os.mm.mem.counters().frames_data, 8);
    // ... and drops it (and frees its frames) once none does.
    rec(&mut e, Record::Munmap { pid: 1, start: BASE + 12288, len: 4096 });
    assert_eq!(e.os.mm.counters.pages_unmapped, 1);
    assert!(e.os.mm.translation_at(1, BASE).is_none());
    assert_eq!(e.os.mm.translation_at(1, BASE + 16384).unwrap().size, k16);
    rec(&mut e, Record::Munmap { pid: 1, start: BASE + 16384, len: 4096 });
    assert_eq!(e.os.mm.counters.pages_unmapped, 2);
    assert_eq!(e.os.mm.mem.counters().frames_data, 0);
    assert_eq!(e.os.mm.pt.footprint().mapped_pages, 0);
}

#[test]
fn impossible_region_settings_name_their_key() {
    let err = |extra: &[&str], base: &[String]| {
        let mut o = base.to_vec();
        o.extend(extra.iter().map(|s| s.to_string()));
        Config::load("tiny", &o).expect_err("rejected").to_string()
    };
    let ok = overrides(&[regions(&[(7, "16K")])]);
    assert!(Config::load("tiny", &ok).is_ok());
    for (extra, key) in [
        (&["os.policy.kind=thp-eager"][..], "`os.policy.kind`"),
        (&["os.policy.khugepaged.every=1000"][..], "`os.policy.khugepaged.every`"),
        (&["os.recolor.kind=periodic-random"][..], "`os.recolor.kind`"),
        (&["os.page_size=16K"][..], "`os.page_size`"),
        (&["page_table.linear.region_shift=40"][..], "`page_table.linear.region_shift`"),
        (&["page_table.linear.region_page_sizes=\"16K\""][..], "`page_table.linear.region_page_sizes`"),
        (&["page_table.linear.region_page_sizes=[\"4K\",\"16K\"]"][..], "`page_table.linear.region_page_sizes`"),
        (&["page_table.linear.region_sizes=[]"][..], "`page_table.linear.region_sizes`"),
    ] {
        let e = err(extra, &ok);
        assert!(e.contains(key), "{extra:?}: {e}");
    }
    let e = err(&[&regions(&[(2, "12K")])], &overrides(&[]));
    assert!(e.contains("`page_table.linear.region_page_sizes[2]`") && e.contains("power of two"), "{e}");
    // The TLBs of the plain tiny machine hold 4K and 2M pages only.
    let e = Config::load("tiny", &["page_table.kind=linear".into(), regions(&[(7, "16K")])]).unwrap_err().to_string();
    assert!(e.contains("`page_table.linear.region_page_sizes[7]`") && e.contains("16K"), "{e}");
    // With 4K everywhere the other policies pass the config checks as before (they
    // then meet the table's own limit, 4K pages only, when the run starts).
    assert!(Config::load("tiny", &overrides(&["os.policy.kind=thp-eager".into()])).is_ok());
}

proptest! {
    #![proptest_config(crate::common::proptest_config(32))]
    /// On random VMAs (odd sizes and offsets, the first half of one unmapped halfway)
    /// in regions 5 and 7 with random page sizes, every page the OS maps has its
    /// region's size, is aligned to it and overlaps a VMA (it may reach past one), every
    /// TLB entry agrees with the page table, and the exit frees every data frame.
    #[test]
    fn every_page_has_its_regions_size_and_the_exit_frees_everything(
        vmas in proptest::collection::vec((0u64..48, 1u64..300, any::<bool>()), 1..6),
        accesses in proptest::collection::vec((0usize..6, 0u64..(300 << 12)), 1..800),
        low in prop_oneof![Just("4K"), Just("16K"), Just("64K")],
        high in prop_oneof![Just("4K"), Just("16K"), Just("64K")],
        unmap_one in any::<bool>(),
    ) {
        let mut e = engine(&[regions(&[(5, low), (7, high)])]);
        let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages, hi)| {
            ([LOW, BASE][hi as usize] + slot * (4 << 20) + (((slot * 7) % 512) << 12), pages << 12)
        }).collect();
        common::drive_vmas(&mut e, &regions, &accesses, unmap_one);
        let space = e.os.space(1).unwrap();
        for base in space.pages.bases_in(0, u64::MAX) {
            let (b, m) = space.pages.get(base).unwrap();
            prop_assert_eq!(b, base);
            prop_assert_eq!(m.size, e.os.mm.pt.page_size_at(base).unwrap_or(PageSize::K4), "page at {:#x}", base);
            prop_assert!(m.size.is_aligned(base));
            prop_assert!(space.vmas.iter_overlapping(base, base + m.size.bytes()).next().is_some(), "{} page at {:#x} overlaps no VMA", m.size, base);
        }
        // Every TLB entry of a user page translates as the page table does now (entries
        // for the array's own pages, in the upper half, are the backing table's).
        for tlb in &e.mmu().tlbs.tlbs {
            let mut bad = None;
            tlb.for_each_entry(|asid, va, t| {
                let ok = va >> 47 != 0 || e.os.mm.pt.translate(asid, va).is_some_and(|p| p.size == t.size && p.pa == t.pa && p.perms == t.perms);
                if !ok && bad.is_none() {
                    bad = Some((va, t));
                }
            });
            prop_assert!(bad.is_none(), "{}: stale entry {:?}", tlb.name, bad);
        }
        e.record(&Record::Exit { pid: 1 }).unwrap();
        prop_assert_eq!(e.os.mm.mem.counters().frames_data, 0);
        prop_assert_eq!(e.os.mm.pt.footprint().mapped_pages, 0);
    }
}
