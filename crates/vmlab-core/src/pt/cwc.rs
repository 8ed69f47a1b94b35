//! Cuckoo walk caches (CWCs; Skarlatos et al. 2020, Stojkovic et al. §2.3): small
//! caches of cuckoo walk table (CWT) entries, one per region size. A PMD-CWC entry
//! describes a 2 MiB region (which page sizes map it, and the way of a 2M page), a
//! PUD-CWC entry a 1 GiB region (which page sizes occur in it), a PTE-CWC entry the ways
//! of a 2 MiB region's 4K entries. A hit lets the walker skip page sizes and ways it
//! would otherwise probe.

use super::{CacheCounters, WalkCaches};
use crate::addr::Asid;
use crate::error::Result;
use crate::mmu::assoc::{AssocCache, Replacement, PACKED_LRU_WIDTHS};

/// Region shifts of the PMD and PUD walk tables.
pub const PMD_SHIFT: u32 = 21;
pub const PUD_SHIFT: u32 = 30;

/// One CWC: CWT entries of regions of 2^`shift` bytes, tagged by ASID.
pub struct CuckooWalkCache {
    shift: u32,
    store: Option<AssocCache<()>>,
    /// The store's `packed_lru_ways` (0: the general lookup).
    lru_ways: usize,
    pub counters: CacheCounters,
}

impl CuckooWalkCache {
    pub fn new(shift: u32, entries: usize, seed: u64, key_path: &str) -> Result<CuckooWalkCache> {
        let store = if entries == 0 {
            None
        } else {
            // Fully associative LRU: up to 12 entries through the packed-LRU lookup (a
            // nested ECPT walk makes about ten CWC lookups), wider ones MRU-first.
            let s = AssocCache::new(entries, 0, Replacement::Lru, seed, key_path)?;
            Some(if PACKED_LRU_WIDTHS.contains(&s.packed_lru_ways()) { s } else { s.with_mru_first() })
        };
        let lru_ways = store.as_ref().map_or(0, |s| s.packed_lru_ways());
        Ok(CuckooWalkCache { shift, store, lru_ways, counters: CacheCounters::default() })
    }

    pub fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// Probe for the region of `va`; counts a lookup.
    pub fn lookup(&mut self, asid: Asid, va: u64) -> bool {
        let Some(s) = &mut self.store else {
            return false;
        };
        let hit = find_and_touch(s, self.lru_ways, va >> self.shift, asid);
        self.counters.record(hit);
        hit
    }

    /// Insert the region of `va` (or make it most recent if present).
    pub fn fill(&mut self, asid: Asid, va: u64) {
        let Some(s) = &mut self.store else {
            return;
        };
        let region = va >> self.shift;
        if !find_and_touch(s, self.lru_ways, region, asid) {
            match self.lru_ways {
                1 => _ = s.fill_absent_lru::<1>(0, region, asid, ()),
                2 => _ = s.fill_absent_lru::<2>(0, region, asid, ()),
                4 => _ = s.fill_absent_lru::<4>(0, region, asid, ()),
                8 => _ = s.fill_absent_lru::<8>(0, region, asid, ()),
                12 => _ = s.fill_absent_lru::<12>(0, region, asid, ()),
                _ => _ = s.fill_absent(s.set_of(region), region, asid, ()),
            }
        }
    }

    /// Drop every entry.
    pub fn flush(&mut self) {
        if let Some(s) = &mut self.store {
            s.flush_all();
        }
    }

    pub fn invalidate(&mut self, asid: Asid, va: u64) {
        if let Some(s) = &mut self.store {
            let region = va >> self.shift;
            let set = s.set_of(region);
            s.invalidate(set, region, asid);
        }
    }
}

/// Look `region` up in a CWC's store of `lru_ways` packed-LRU ways (0: another
/// geometry), making it most recent on a hit.
#[inline(always)]
fn find_and_touch(s: &mut AssocCache<()>, lru_ways: usize, region: u64, asid: Asid) -> bool {
    match lru_ways {
        1 => s.lookup_lru::<1>(0, region, asid),
        2 => s.lookup_lru::<2>(0, region, asid),
        4 => s.lookup_lru::<4>(0, region, asid),
        8 => s.lookup_lru::<8>(0, region, asid),
        12 => s.lookup_lru::<12>(0, region, asid),
        _ => s.lookup(s.set_of(region), region, asid),
    }
    .is_some()
}

/// The CWCs of one ECPT walker: PTE (ways of a 2 MiB region's 4K clusters; the
/// nested design's hCWC only, Stojkovic et al. §4.2), PMD and PUD.
pub struct EcptWalkCaches {
    pub pte: CuckooWalkCache,
    pub pmd: CuckooWalkCache,
    pub pud: CuckooWalkCache,
    latency: u32,
}

impl EcptWalkCaches {
    /// `entries` = [PTE, PMD, PUD] CWC entries (0 = no such cache), configured at `keys`
    /// (named in errors); `latency` cycles per (parallel) probe.
    pub fn with_keys(entries: [usize; 3], latency: u32, seed: u64, keys: [&str; 3]) -> Result<EcptWalkCaches> {
        Ok(EcptWalkCaches {
            pte: CuckooWalkCache::new(PMD_SHIFT, entries[0], seed.wrapping_add(2), keys[0])?,
            pmd: CuckooWalkCache::new(PMD_SHIFT, entries[1], seed, keys[1])?,
            pud: CuckooWalkCache::new(PUD_SHIFT, entries[2], seed.wrapping_add(1), keys[2])?,
            latency,
        })
    }

    /// The native (or guest) ECPT's CWCs, `page_table.ecpt.pte_cwc` / `pmd_cwc` / `pud_cwc`.
    pub fn new(pte: usize, pmd: usize, pud: usize, latency: u32, seed: u64) -> Result<EcptWalkCaches> {
        let keys = ["page_table.ecpt.pte_cwc", "page_table.ecpt.pmd_cwc", "page_table.ecpt.pud_cwc"];
        EcptWalkCaches::with_keys([pte, pmd, pud], latency, seed, keys)
    }

    pub fn none() -> EcptWalkCaches {
        EcptWalkCaches::new(0, 0, 0, 0, 0).expect("no caches")
    }

    /// Whether any of the caches exists.
    pub fn enabled(&self) -> bool {
        self.pte.enabled() || self.pmd.enabled() || self.pud.enabled()
    }

    fn all(&mut self) -> [&mut CuckooWalkCache; 3] {
        [&mut self.pte, &mut self.pmd, &mut self.pud]
    }
}

impl WalkCaches for EcptWalkCaches {
    fn flush_all(&mut self) {
        for c in self.all() {
            c.flush();
        }
    }
    fn flush_asid(&mut self, asid: Asid) {
        for c in self.all() {
            if let Some(s) = &mut c.store {
                s.flush_asid(asid);
            }
        }
    }
    fn invalidate(&mut self, asid: Asid, va: u64) {
        for c in self.all() {
            c.invalidate(asid, va);
        }
    }
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        [("pte_cwc", &self.pte), ("pmd_cwc", &self.pmd), ("pud_cwc", &self.pud)]
            .into_iter()
            .filter(|(_, c)| c.enabled())
            .map(|(n, c)| (n.to_string(), c.counters.clone()))
            .collect()
    }
    fn probe_latency(&self) -> u64 {
        if self.enabled() {
            self.latency as u64
        } else {
            0
        }
    }
}
