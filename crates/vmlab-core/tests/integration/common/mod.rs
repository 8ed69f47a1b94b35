//! Helpers shared by the engine-level test files (each file uses some of them).
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use vmlab::config::Config;
use vmlab::mmu::pwc::PageWalkCache;
use vmlab::os::address_space::Mapping;
use vmlab::pt::{FastPaths, RadixPageTable};
use vmlab::sim::Engine;
use vmlab::trace::{MapFlags, Record};

/// A property test of `cases` cases whose failing seeds are kept in
/// `tests/proptest-regressions/integration/` (one file per test module), beside the unit
/// tests' under `src/` (`crate::testing::proptest_config` in the library): every
/// regression file of the crate in one place, each at its source's path.
pub fn proptest_config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("proptest-regressions/integration"))),
        ..ProptestConfig::default()
    }
}

/// Every record of a source, or its error.
pub fn drain(src: &mut dyn vmlab::trace::TraceSource) -> vmlab::Result<Vec<Record>> {
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    while src.next_batch(&mut buf)? {
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

/// Map `regions` (start, length) for pid 1, then read at `accesses` (region index,
/// offset); if `unmap_one`, halfway through unmap the first half of the first region.
pub fn drive_vmas<P: FastPaths>(e: &mut Engine<P>, regions: &[(u64, u64)], accesses: &[(usize, u64)], unmap_one: bool) {
    for &(start, len) in regions {
        e.record(&Record::Mmap { pid: 1, start, len, prot: 3, flags: MapFlags::PRIVATE }).unwrap();
    }
    for (k, &(i, off)) in accesses.iter().enumerate() {
        let (start, len) = regions[i % regions.len()];
        e.record(&Record::read(start + off % len, 8, 1)).unwrap();
        if unmap_one && k == accesses.len() / 2 {
            let (s, l) = regions[0];
            e.record(&Record::Munmap { pid: 1, start: s, len: l / 2 }).unwrap();
        }
    }
}

/// Every page pid 1 has mapped, after checking that it lies inside one VMA and is
/// aligned to its size.
pub fn pages_inside_vmas<P: FastPaths>(e: &Engine<P>) -> Result<Vec<(u64, Mapping)>, TestCaseError> {
    let space = e.os.space(1).unwrap();
    let mut out = Vec::new();
    for base in space.pages.bases_in(0, u64::MAX) {
        let (b, m) = space.pages.get(base).unwrap();
        prop_assert_eq!(b, base);
        prop_assert!(m.size.is_aligned(base), "{:#x} not aligned to {}", base, m.size);
        let vma = space.vmas.find(base);
        prop_assert!(vma.is_some_and(|v| v.contains_range(base, base + m.size.bytes())), "{} page at {:#x} is not inside one VMA", m.size, base);
        out.push((base, m));
    }
    Ok(out)
}

/// Every entry of every TLB translates as the page table does now: the page holding
/// the entry's base is at least the entry's size (a splinter is a piece of it), the
/// frame offsets agree, and so do the permissions. A stale entry (a missed shootdown)
/// fails this.
pub fn tlbs_agree_with_page_table<P: FastPaths>(e: &Engine<P>) -> Result<(), TestCaseError> {
    for tlb in &e.mmu().tlbs.tlbs {
        let mut bad = None;
        tlb.for_each_entry(|asid, va, t| {
            let ok = e.os.mm.pt.translate(asid, va).is_some_and(|p| p.size >= t.size && p.pa + (va - p.size.align_down(va)) == t.pa && p.perms == t.perms);
            if !ok && bad.is_none() {
                bad = Some((asid, va, t));
            }
        });
        if let Some((asid, va, t)) = bad {
            let now = e.os.mm.pt.translate(asid, va);
            prop_assert!(false, "{}: entry for {:#x} (asid {}) gives {:?}, the page table {:?}", tlb.name, va, asid, t, now);
        }
    }
    Ok(())
}

/// An engine over the radix table `cfg` describes, without page-walk caches.
pub fn radix_engine(cfg: &Config) -> Engine<RadixPageTable> {
    Engine::new(cfg, RadixPageTable::from_config(&cfg.page_table.radix).unwrap(), PageWalkCache::none()).unwrap()
}
