//! Cuckoo walk caches (CWCs; Skarlatos et al. 2020, Stojkovic et al. §2.3): small
//! caches of cuckoo walk table (CWT) entries, one per region size. A CWT entry holds 64
//! section headers, one per entry of the ECPT level below it, and an ECPT entry holds 8
//! pages: a PTE-CWC entry describes a 2 MiB region (the ways of its 32 KiB sections'
//! 4K entries), a PMD-CWC entry a 1 GiB region (per 16 MiB section: whether 4K and 2M
//! pages map it, and the way of its 2M entry), a PUD-CWC entry a 512 GiB region (per
//! 8 GiB section: which page sizes occur in it). A hit lets the walker skip page sizes
//! and ways it would otherwise probe.

use crate::addr::Asid;
use crate::error::Result;
use crate::mmu::fully_assoc::FullyAssocLru;
use crate::pt::{CacheCounters, WalkCaches};

/// The region one entry of the PTE-, PMD- and PUD-CWT describes: 64 sections of one
/// ECPT entry (8 pages) each: 2 MiB, 1 GiB and 512 GiB.
pub(crate) const PTE_CWT_SHIFT: u32 = 21;
pub(crate) const PMD_CWT_SHIFT: u32 = 30;
pub(crate) const PUD_CWT_SHIFT: u32 = 39;
/// A section of a PMD- and a PUD-CWT entry: 8 pages of 2 MiB and of 1 GiB.
pub(crate) const PMD_SECTION_SHIFT: u32 = 24;
pub(crate) const PUD_SECTION_SHIFT: u32 = 33;

/// One CWC: CWT entries of regions of 2^`shift` bytes, tagged by ASID; fully
/// associative with LRU.
pub(crate) struct CuckooWalkCache {
    shift: u32,
    store: Option<FullyAssocLru<()>>,
    pub(crate) counters: CacheCounters,
}

impl CuckooWalkCache {
    pub(crate) fn new(shift: u32, entries: usize, key_path: &str) -> Result<CuckooWalkCache> {
        let store = if entries == 0 { None } else { Some(FullyAssocLru::new(entries, key_path)?) };
        Ok(CuckooWalkCache { shift, store, counters: CacheCounters::default() })
    }

    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// Probe for the region of `va`; counts a lookup.
    #[inline]
    pub(crate) fn lookup(&mut self, asid: Asid, va: u64) -> bool {
        let Some(s) = &mut self.store else {
            return false;
        };
        let hit = s.lookup(va >> self.shift, asid).is_some();
        self.counters.record(hit);
        hit
    }

    /// Insert the region of `va` (or make it most recent if present).
    pub(crate) fn fill(&mut self, asid: Asid, va: u64) {
        if let Some(s) = &mut self.store {
            s.insert(va >> self.shift, asid, ());
        }
    }

    /// Insert the region of `va`, which the last `lookup` missed (nothing filled it
    /// since).
    #[inline]
    pub(crate) fn fill_missed(&mut self, asid: Asid, va: u64) {
        if let Some(s) = &mut self.store {
            s.fill_absent(va >> self.shift, asid, ());
        }
    }

    /// Drop every entry.
    pub(crate) fn flush(&mut self) {
        if let Some(s) = &mut self.store {
            s.flush_all();
        }
    }

    pub(crate) fn invalidate(&mut self, asid: Asid, va: u64) {
        if let Some(s) = &mut self.store {
            s.invalidate(va >> self.shift, asid);
        }
    }
}

/// The CWCs of one ECPT walker: PTE (ways of a 2 MiB region's 4K clusters; the
/// nested design's hCWC only, Stojkovic et al. §4.2), PMD and PUD.
pub struct EcptWalkCaches {
    pub(crate) pte: CuckooWalkCache,
    pub(crate) pmd: CuckooWalkCache,
    pub(crate) pud: CuckooWalkCache,
    latency: u32,
}

impl EcptWalkCaches {
    /// `entries` = [PTE, PMD, PUD] CWC entries (0 = no such cache), configured at `keys`
    /// (named in errors); `latency` cycles per (parallel) probe.
    pub(crate) fn with_keys(entries: [usize; 3], latency: u32, keys: [&str; 3]) -> Result<EcptWalkCaches> {
        Ok(EcptWalkCaches {
            pte: CuckooWalkCache::new(PTE_CWT_SHIFT, entries[0], keys[0])?,
            pmd: CuckooWalkCache::new(PMD_CWT_SHIFT, entries[1], keys[1])?,
            pud: CuckooWalkCache::new(PUD_CWT_SHIFT, entries[2], keys[2])?,
            latency,
        })
    }

    /// The native (or guest) ECPT's CWCs, `page_table.ecpt.pte_cwc` / `pmd_cwc` / `pud_cwc`.
    pub fn new(pte: usize, pmd: usize, pud: usize, latency: u32) -> Result<EcptWalkCaches> {
        let keys = ["page_table.ecpt.pte_cwc", "page_table.ecpt.pmd_cwc", "page_table.ecpt.pud_cwc"];
        EcptWalkCaches::with_keys([pte, pmd, pud], latency, keys)
    }

    pub fn none() -> EcptWalkCaches {
        EcptWalkCaches::new(0, 0, 0, 0).expect("no caches")
    }

    /// Whether any of the caches exists.
    pub(crate) fn enabled(&self) -> bool {
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
