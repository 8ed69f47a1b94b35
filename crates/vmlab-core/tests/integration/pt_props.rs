//! The property suite every page-table kind must pass: random map, unmap and protect
//! (several address spaces, every page size the kind supports — or, where the kind
//! fixes the size by address, that size), checked against a simple reference map after
//! every operation through `translate` and `walk`.

use proptest::prelude::*;
use std::collections::BTreeMap;
use vmlab::addr::{Asid, PageSize, Perms};
use vmlab::mmu::cwc::EcptWalkCaches;
use vmlab::mmu::pwc::PageWalkCache;
use vmlab::os::buddy::{BuddyAllocator, FrameUse};
use vmlab::pt::ecpt::EcptConfig;
use vmlab::pt::guarded::GuardedConfig;
use vmlab::pt::hashed::{HashFunction, HashedConfig, LargePages, TableScope};
use vmlab::pt::inverted::InvertedConfig;
use vmlab::pt::stlb::StlbConfig;
use vmlab::pt::SoftwareTlb;
use vmlab::pt::{linear::LinearConfig, LinearPageTable};
use vmlab::pt::{ElasticCuckooPageTable, GuardedPageTable, MultilevelPageTable};
use vmlab::pt::{HashedPageTable, InvertedPageTable, NoWalkCaches, PageTable, RadixPageTable, WalkCaches, WalkPath};

#[derive(Clone, Debug)]
enum Op {
    Map { asid: Asid, slot: u64, size_ix: usize, perms: u8 },
    Unmap { asid: Asid, slot: u64 },
    Protect { asid: Asid, slot: u64, perms: u8 },
    Probe { asid: Asid, slot: u64, offset: u64 },
}

/// Virtual addresses are drawn from a few clustered regions so that maps collide with
/// each other and share table nodes.
fn va_of(slot: u64) -> u64 {
    let region = slot % 4;
    let base = [0x0000_0040_0000u64, 0x7f00_0000_0000, 0x5555_0000_0000, 0x1_0000_0000][region as usize];
    base + (slot / 4) * 0x1000 * 97
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u16..3, 0u64..4000, 0usize..64, 1u8..16).prop_map(|(asid, slot, size_ix, perms)| Op::Map { asid, slot, size_ix, perms }),
        2 => (0u16..3, 0u64..4000).prop_map(|(asid, slot)| Op::Unmap { asid, slot }),
        1 => (0u16..3, 0u64..4000, 1u8..16).prop_map(|(asid, slot, perms)| Op::Protect { asid, slot, perms }),
        3 => (0u16..3, 0u64..4000, 0u64..(1 << 30)).prop_map(|(asid, slot, offset)| Op::Probe { asid, slot, offset }),
    ]
}

/// Reference: per ASID, page base -> (pa, size, perms).
type Reference = BTreeMap<(Asid, u64), (u64, PageSize, Perms)>;

fn ref_lookup(r: &Reference, asid: Asid, va: u64) -> Option<(u64, (u64, PageSize, Perms))> {
    r.range(..=(asid, va)).next_back().filter(|((a, b), (_, s, _))| *a == asid && va < b + s.bytes()).map(|((_, b), v)| (*b, *v))
}

fn overlaps(r: &Reference, asid: Asid, base: u64, size: PageSize) -> bool {
    ref_lookup(r, asid, base).is_some() || r.range((asid, base)..(asid, base + size.bytes())).next().is_some()
}

/// Run `ops` against a page table and the reference; `caches` are the kind's walk caches.
/// `frees_all`: tearing down every address space returns all page-table memory (false
/// for a shared global table, which outlives the spaces).
fn check_kind<P: PageTable>(pt: P, caches: P::Caches, ops: &[Op], frees_all: bool) -> Result<(), TestCaseError> {
    check_kind_in(pt, caches, ops, frees_all, 64 << 30)
}

/// As `check_kind`, with `phys` bytes of simulated memory.
fn check_kind_in<P: PageTable>(mut pt: P, mut caches: P::Caches, ops: &[Op], frees_all: bool, phys: u64) -> Result<(), TestCaseError> {
    let sizes: Vec<PageSize> = pt.page_sizes().to_vec();
    let mut mem = BuddyAllocator::new(phys).unwrap();
    for asid in 0..3 {
        pt.create_space(&mut mem, asid).unwrap();
    }
    let mut reference: Reference = BTreeMap::new();
    let mut path = WalkPath::new();
    for op in ops {
        match *op {
            Op::Map { asid, slot, size_ix, perms } => {
                // A short-VHPT region maps its own page size only.
                let size = pt.page_size_at(va_of(slot)).unwrap_or(sizes[size_ix % sizes.len()]);
                let base = size.align_down(va_of(slot));
                if overlaps(&reference, asid, base, size) {
                    continue;
                }
                let pa = mem.alloc(size, FrameUse::Data).unwrap();
                let perms = Perms::from_bits(perms);
                pt.map(&mut mem, asid, base, pa, size, perms).unwrap();
                reference.insert((asid, base), (pa, size, perms));
                // Random probes rarely land on one given 4K page: check the new one.
                let t = pt.translate(asid, va_of(slot)).map(|t| (t.pa, t.size, t.perms));
                prop_assert_eq!(t, Some((pa, size, perms)), "translate after map {:#x}", va_of(slot));
            }
            Op::Unmap { asid, slot } => {
                let va = va_of(slot);
                let expected = ref_lookup(&reference, asid, va);
                let got = pt.unmap(&mut mem, asid, va);
                prop_assert_eq!(got.map(|t| (t.pa, t.size)), expected.map(|(_, (pa, s, _))| (pa, s)));
                if let Some((b, (pa, s, _))) = expected {
                    reference.remove(&(asid, b));
                    mem.free(pa, s, FrameUse::Data);
                    caches.invalidate(asid, b);
                    // Gone from the table and from every cache in front of it.
                    prop_assert_eq!(pt.translate(asid, va), None, "translate after unmap {:#x}", va);
                    path.clear();
                    prop_assert_eq!(pt.walk(asid, va, &mut caches, &mut path), None, "walk after unmap {:#x}", va);
                }
            }
            Op::Protect { asid, slot, perms } => {
                let va = va_of(slot);
                let perms = Perms::from_bits(perms);
                let expected = ref_lookup(&reference, asid, va);
                prop_assert_eq!(pt.protect(asid, va, perms), expected.is_some());
                if let Some((b, (pa, s, _))) = expected {
                    reference.insert((asid, b), (pa, s, perms));
                    caches.invalidate(asid, b);
                    path.clear();
                    let w = pt.walk(asid, va, &mut caches, &mut path).map(|t| (t.pa, t.size, t.perms));
                    prop_assert_eq!(w, Some((pa, s, perms)), "walk after protect {:#x}", va);
                }
            }
            Op::Probe { asid, slot, offset } => {
                let va = va_of(slot) + offset % (4 << 20);
                let expected = ref_lookup(&reference, asid, va).map(|(_, (pa, s, p))| (pa, s, p));
                let t = pt.translate(asid, va).map(|t| (t.pa, t.size, t.perms));
                prop_assert_eq!(t, expected, "translate {:#x} asid {}", va, asid);
                path.clear();
                let w = pt.walk(asid, va, &mut caches, &mut path).map(|t| (t.pa, t.size, t.perms));
                prop_assert_eq!(w, expected, "walk {:#x} asid {}", va, asid);
                prop_assert!(!path.refs().is_empty(), "a walk makes at least one reference");
                // Steps are numbered 0.. without gaps, in order.
                let mut last = 0u16;
                for r in path.refs() {
                    prop_assert!(r.step == last || r.step == last + 1);
                    last = r.step;
                }
                prop_assert_eq!(path.steps(), last + 1);
            }
        }
        let fp = pt.footprint();
        prop_assert_eq!(fp.mapped_pages, reference.len() as u64);
        prop_assert_eq!(fp.bytes, mem.counters().frames_page_table * 4096);
    }
    // Tearing down every space returns all page-table memory.
    for ((asid, b), (pa, s, _)) in std::mem::take(&mut reference) {
        prop_assert!(pt.unmap(&mut mem, asid, b).is_some());
        mem.free(pa, s, FrameUse::Data);
    }
    for asid in 0..3 {
        pt.destroy_space(&mut mem, asid);
    }
    prop_assert_eq!(pt.footprint().mapped_pages, 0);
    prop_assert_eq!(mem.counters().frames_used * 4096, pt.footprint().bytes);
    if frees_all {
        prop_assert_eq!(pt.footprint().bytes, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::common::proptest_config(64))]

    #[test]
    fn radix4_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        check_kind(RadixPageTable::new(4).unwrap(), PageWalkCache::none(), &ops, true)?;
    }

    #[test]
    fn radix4_with_pwc_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        let pwc = PageWalkCache::new(&[4, 2, 1], 0, vmlab::mmu::assoc::Replacement::Lru, 1, 0).unwrap();
        check_kind(RadixPageTable::new(4).unwrap(), pwc, &ops, true)?;
    }

    #[test]
    fn hashed_and_clustered_match_reference(
        ops in proptest::collection::vec(op_strategy(), 1..300),
        subblock in prop_oneof![Just(1usize), Just(2), Just(4), Just(16)],
        buckets in prop_oneof![Just(4usize), Just(256)],
        global in any::<bool>(),
        hash in prop_oneof![Just(HashFunction::Bits), Just(HashFunction::Mix), Just(HashFunction::RidXorVpn)],
        trap in prop_oneof![Just(0u64), Just(100)],
        promote in any::<bool>(),
        large in prop_oneof![Just(None), Just(Some(LargePages::Replicate)), Just(Some(LargePages::PerSize))],
    ) {
        let cfg = HashedConfig {
            buckets, subblock, promote,
            hash,
            bucket_bytes: if trap > 0 { 32.max(16 + 8 * subblock as u64) } else { 0 },
            chain_trap_cycles: trap,
            scope: if global { TableScope::Global } else { TableScope::PerSpace },
            // With large pages: 2M and 1M pages (the table's sizes are 4K, the block, 1M, 2M).
            page_sizes: if large.is_some() { vec![vmlab::config::Bytes(2 << 20), vmlab::config::Bytes(1 << 20)] } else { vec![] },
            large_pages: large.unwrap_or_default(),
            large_buckets: 16,
        };
        check_kind(HashedPageTable::new(&cfg).unwrap(), NoWalkCaches, &ops, !global)?;
    }

    #[test]
    fn inverted_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..300), anchors in prop_oneof![Just(0usize), Just(8)]) {
        let phys = 256u64 << 20;
        let pt = InvertedPageTable::new(&InvertedConfig { anchors }, phys).unwrap();
        check_kind_in(pt, NoWalkCaches, &ops, false, phys)?;
    }

    /// A software TLB in front of a table must stay consistent through unmap and
    /// protect: every walk still agrees with the reference.
    #[test]
    fn stlb_in_front_matches_reference(
        ops in proptest::collection::vec(op_strategy(), 1..300),
        entries in prop_oneof![Just(4usize), Just(64)],
        ways in prop_oneof![Just(1usize), Just(2)],
        index_shift in prop_oneof![Just(12u8), Just(13)],
        hashed in any::<bool>(),
        long_vhpt in any::<bool>(),
    ) {
        let mut cfg = StlbConfig { entries, ways, index_shift, ..Default::default() };
        if long_vhpt {
            // Itanium's long format: 32-byte entries hashed on RID xor VPN.
            cfg.entry_bytes = 32;
            cfg.index_fn = vmlab::pt::stlb::StlbIndex::RidXorVpn;
            cfg.swizzle_rid = true;
        }
        if hashed {
            let inner = HashedPageTable::new(&HashedConfig { buckets: 16, subblock: 4, ..Default::default() }).unwrap();
            check_kind(SoftwareTlb::new(inner, &cfg).unwrap(), NoWalkCaches, &ops, false)?;
        } else {
            check_kind(SoftwareTlb::new(RadixPageTable::new(4).unwrap(), &cfg).unwrap(), PageWalkCache::none(), &ops, false)?;
        }
    }

    #[test]
    fn guarded_matches_reference(
        ops in proptest::collection::vec(op_strategy(), 1..300),
        node_entries in prop_oneof![Just(2usize), Just(4), Just(16), Just(256)],
    ) {
        let pt = GuardedPageTable::new(&GuardedConfig { node_entries, va_bits: 48 }).unwrap();
        check_kind(pt, NoWalkCaches, &ops, true)?;
    }

    /// Elphinstone's six-level MIPS MPT (4K pages only): nodes freed as they empty.
    #[test]
    fn mpt_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        check_kind(MultilevelPageTable::new(), NoWalkCaches, &ops, true)?;
    }

    /// Tiny initial tables: every run resizes (and migrates) many times.
    #[test]
    fn ecpt_matches_reference_across_resizes(
        ops in proptest::collection::vec(op_strategy(), 1..300),
        ways in prop_oneof![Just(2usize), Just(3), Just(4)],
        migrate in prop_oneof![Just(1usize), Just(4)],
        kicks in prop_oneof![Just(1usize), Just(16)],
        cwc in any::<bool>(),
        pte_cwc in prop_oneof![Just(0usize), Just(2)],
    ) {
        // With CWCs, optionally a PTE-CWT whose ways must follow the cuckoo moves.
        let pte_cwc = if cwc { pte_cwc } else { 0 };
        let cfg = EcptConfig {
            ways, initial_slots: [8, 8, 8], cwt_slots: [8, 8], migrate_per_insert: migrate, max_kicks: kicks,
            cwt: cwc, pte_cwc, pmd_cwc: if cwc { 4 } else { 0 }, pud_cwc: if cwc { 2 } else { 0 }, ..Default::default()
        };
        let caches = if cwc { EcptWalkCaches::new(pte_cwc, 4, 2, 1).unwrap() } else { EcptWalkCaches::none() };
        check_kind(ElasticCuckooPageTable::new(&cfg).unwrap(), caches, &ops, true)?;
    }

    #[test]
    fn linear_array_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..300), stlb in any::<bool>()) {
        // The array's pages mapped by the radix table alone, or cached in a software TLB.
        let cfg = if stlb {
            LinearConfig { backing: vmlab::pt::linear::LinearBacking::Stlb, array_stlb: StlbConfig { entries: 16, ..Default::default() }, ..Default::default() }
        } else {
            LinearConfig::default()
        };
        let pt = LinearPageTable::new(&cfg).unwrap();
        // The software TLB is per CPU: its table outlives the address spaces.
        check_kind(pt, PageWalkCache::none(), &ops, !stlb)?;
    }

    /// Itanium's short-format VHPT with a page size per region (Chapman et al. §2.3.1):
    /// the clustered test addresses fall in regions 0 (0x40_0000, 0x1_0000_0000), 5
    /// (0x5555_0000_0000) and 7 (0x7f00_0000_0000) with region_shift = 44, all in region
    /// 0 with 47; each gets a random size, the others 4K.
    #[test]
    fn linear_regions_with_mixed_page_sizes_match_reference(
        ops in proptest::collection::vec(op_strategy(), 1..300),
        region_shift in prop_oneof![Just(44u8), Just(47)],
        sizes in proptest::collection::vec(prop_oneof![Just(4u64 << 10), Just(16 << 10), Just(64 << 10), Just(2 << 20)], 3),
        stlb in any::<bool>(),
    ) {
        let mut region_page_sizes = vec![vmlab::config::Bytes(4096); 8];
        for (r, b) in [0usize, 5, 7].into_iter().zip(&sizes) {
            region_page_sizes[r] = vmlab::config::Bytes(*b);
        }
        if region_shift == 47 {
            region_page_sizes[5] = vmlab::config::Bytes(4096);
            region_page_sizes[7] = vmlab::config::Bytes(4096);
        }
        let cfg = LinearConfig { region_shift, region_page_sizes, ..Default::default() };
        let pt = LinearPageTable::new(&cfg).unwrap();
        if stlb {
            // A software TLB in front must pass the region's size through.
            let s = SoftwareTlb::new(pt, &StlbConfig { entries: 64, ways: 2, ..Default::default() }).unwrap();
            check_kind(s, PageWalkCache::none(), &ops, false)?;
        } else {
            check_kind(pt, PageWalkCache::none(), &ops, true)?;
        }
    }

    /// Tailored Page Sizes: every 2^n page from 4K to 1G, pointer or copy aliases.
    #[test]
    fn tailored_radix_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..300), copy in any::<bool>(), pwc in any::<bool>()) {
        let alias = if copy { vmlab::pt::radix::AliasPtes::Copy } else { vmlab::pt::radix::AliasPtes::Pointer };
        let pt = RadixPageTable::new(4).unwrap().with_tailored(alias);
        let caches = if pwc { PageWalkCache::new(&[32, 32, 32], 4, Default::default(), 0, 1).unwrap() } else { PageWalkCache::none() };
        check_kind(pt, caches, &ops, true)?;
    }

    #[test]
    fn radix5_matches_reference(ops in proptest::collection::vec(op_strategy(), 1..200)) {
        check_kind(RadixPageTable::new(5).unwrap(), PageWalkCache::none(), &ops, true)?;
    }
}
