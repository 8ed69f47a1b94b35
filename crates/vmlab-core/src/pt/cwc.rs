//! Cuckoo walk caches (CWCs; Skarlatos et al. 2020, Stojkovic et al. §2.3): small
//! caches of cuckoo walk table (CWT) entries, one per region size. A PMD-CWC entry
//! describes a 2 MiB region (which page sizes map it, and in which way), a PUD-CWC entry
//! a 1 GiB region (which page sizes occur in it). A hit lets the walker skip page sizes
//! and ways it would otherwise probe.

use super::{CacheCounters, WalkCaches};
use crate::addr::Asid;
use crate::error::Result;
use crate::mmu::assoc::{AssocCache, Replacement};

/// Region shifts of the PMD and PUD walk tables.
pub const PMD_SHIFT: u32 = 21;
pub const PUD_SHIFT: u32 = 30;

/// One CWC: CWT entries of regions of 2^`shift` bytes, tagged by ASID.
pub struct CuckooWalkCache {
    shift: u32,
    store: Option<AssocCache<()>>,
    pub counters: CacheCounters,
}

impl CuckooWalkCache {
    pub fn new(shift: u32, entries: usize, seed: u64, key_path: &str) -> Result<CuckooWalkCache> {
        let store = if entries == 0 { None } else { Some(AssocCache::new(entries, 0, Replacement::Lru, seed, key_path)?) };
        Ok(CuckooWalkCache { shift, store, counters: CacheCounters::default() })
    }

    pub fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// Probe for the region of `va`; counts a lookup.
    pub fn lookup(&mut self, asid: Asid, va: u64) -> bool {
        let Some(s) = &mut self.store else { return false };
        let region = va >> self.shift;
        let set = s.set_of(region);
        let hit = s.lookup(set, region, asid).is_some();
        self.counters.record(hit);
        hit
    }

    pub fn fill(&mut self, asid: Asid, va: u64) {
        if let Some(s) = &mut self.store {
            let region = va >> self.shift;
            let set = s.set_of(region);
            s.insert(set, region, asid, ());
        }
    }

    fn invalidate(&mut self, asid: Asid, va: u64) {
        if let Some(s) = &mut self.store {
            let region = va >> self.shift;
            let set = s.set_of(region);
            s.invalidate(set, region, asid);
        }
    }
}

/// The CWCs of a native ECPT walker.
pub struct EcptWalkCaches {
    pub pmd: CuckooWalkCache,
    pub pud: CuckooWalkCache,
    latency: u32,
}

impl EcptWalkCaches {
    /// `pmd`/`pud` entries (0 = no such cache), configured at `keys` (named in errors);
    /// `latency` cycles per (parallel) probe.
    pub fn with_keys(pmd: usize, pud: usize, latency: u32, seed: u64, keys: [&str; 2]) -> Result<EcptWalkCaches> {
        Ok(EcptWalkCaches {
            pmd: CuckooWalkCache::new(PMD_SHIFT, pmd, seed, keys[0])?,
            pud: CuckooWalkCache::new(PUD_SHIFT, pud, seed.wrapping_add(1), keys[1])?,
            latency,
        })
    }

    /// The native (or guest) ECPT's CWCs, `page_table.ecpt.pmd_cwc` / `pud_cwc`.
    pub fn new(pmd: usize, pud: usize, latency: u32, seed: u64) -> Result<EcptWalkCaches> {
        EcptWalkCaches::with_keys(pmd, pud, latency, seed, ["page_table.ecpt.pmd_cwc", "page_table.ecpt.pud_cwc"])
    }

    pub fn none() -> EcptWalkCaches {
        EcptWalkCaches::new(0, 0, 0, 0).expect("no caches")
    }
}

impl WalkCaches for EcptWalkCaches {
    fn flush_all(&mut self) {
        for c in [&mut self.pmd, &mut self.pud] {
            if let Some(s) = &mut c.store {
                s.flush_all();
            }
        }
    }
    fn flush_asid(&mut self, asid: Asid) {
        for c in [&mut self.pmd, &mut self.pud] {
            if let Some(s) = &mut c.store {
                s.flush_asid(asid);
            }
        }
    }
    fn invalidate(&mut self, asid: Asid, va: u64) {
        self.pmd.invalidate(asid, va);
        self.pud.invalidate(asid, va);
    }
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        let mut v = Vec::new();
        if self.pmd.enabled() {
            v.push(("pmd_cwc".to_string(), self.pmd.counters.clone()));
        }
        if self.pud.enabled() {
            v.push(("pud_cwc".to_string(), self.pud.counters.clone()));
        }
        v
    }
    fn probe_latency(&self) -> u64 {
        if self.pmd.enabled() || self.pud.enabled() {
            self.latency as u64
        } else {
            0
        }
    }
}
