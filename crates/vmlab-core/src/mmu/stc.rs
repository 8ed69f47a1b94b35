//! The shortcut translation cache (STC; Stojkovic et al. §4.1, §5): a tiny, fully
//! associative MMU cache of the guest-physical to host-physical translations of guest
//! CWT (gCWT) entries. A gCWC miss knows only the gPA of the gCWT entry it must fetch;
//! an STC hit gives its hPA without a host lookup. Probed only on gCWC misses. An entry
//! is one host PTE (Table 2's byte budget: 8 bytes), so it covers one host page.

use crate::addr::{Asid, PageSize};
use crate::error::Result;
use crate::mmu::fully_assoc::FullyAssocLru;
use crate::pt::{CacheCounters, Translation};

/// The host address space the entries belong to (one virtual machine).
const VM: Asid = 0;

pub(crate) struct ShortcutTranslationCache {
    /// Key: host page number << 1 | (1 for a 2M host page); value: host-physical base.
    store: Option<FullyAssocLru<u64>>,
    pub(crate) counters: CacheCounters,
}

#[inline(always)]
fn key(gpa: u64, size: PageSize) -> u64 {
    (gpa >> size.shift()) << 1 | (size != PageSize::K4) as u64
}

impl ShortcutTranslationCache {
    /// `entries` = 0: no STC.
    pub(crate) fn new(entries: usize) -> Result<ShortcutTranslationCache> {
        let store = if entries == 0 { None } else { Some(FullyAssocLru::new(entries, "page_table.nested.stc_entries")?) };
        Ok(ShortcutTranslationCache { store, counters: CacheCounters::default() })
    }

    pub(crate) fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// The host-physical address of `gpa`, if a cached host PTE covers it. A host page
    /// is 4K or 2M at any one time (a split flushes the STC), so at most one of the two
    /// keys is present.
    pub(crate) fn lookup(&mut self, gpa: u64) -> Option<u64> {
        let s = self.store.as_mut()?;
        let hit = s.lookup(key(gpa, PageSize::K4), VM).map(|base| base | (gpa & PageSize::K4.offset_mask()));
        let hit = hit.or_else(|| s.lookup(key(gpa, PageSize::M2), VM).map(|base| base | (gpa & PageSize::M2.offset_mask())));
        self.counters.record(hit.is_some());
        hit
    }

    /// Cache the host translation `h` of `gpa`.
    pub(crate) fn fill(&mut self, gpa: u64, h: Translation) {
        if let Some(s) = &mut self.store {
            s.insert(key(gpa, h.size), VM, h.pa);
        }
    }

    /// `fill`, right after `lookup(gpa)` missed with nothing filled since: the lookup
    /// tried both the 4K and the 2M key, so a 4K or 2M entry needs no second search.
    pub(crate) fn fill_missed(&mut self, gpa: u64, h: Translation) {
        match &mut self.store {
            Some(s) if h.size != PageSize::G1 => _ = s.fill_absent(key(gpa, h.size), VM, h.pa),
            _ => self.fill(gpa, h),
        }
    }

    pub(crate) fn flush(&mut self) {
        if let Some(s) = &mut self.store {
            s.flush_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Perms;

    fn t(pa: u64, size: PageSize) -> Translation {
        Translation { pa, size, perms: Perms::RW_USER }
    }

    #[test]
    fn lru_eviction_at_ten_entries() {
        let mut stc = ShortcutTranslationCache::new(10).unwrap();
        for p in 0..10u64 {
            stc.fill(p << 12, t((100 + p) << 12, PageSize::K4));
        }
        assert_eq!(stc.lookup(0x123), Some((100 << 12) | 0x123));
        // Page 1 is now least recently used; an 11th page evicts it.
        stc.fill(10 << 12, t(110 << 12, PageSize::K4));
        assert_eq!(stc.lookup(1 << 12), None);
        assert_eq!(stc.lookup((2 << 12) | 8), Some((102 << 12) | 8));
        assert_eq!((stc.counters.hits, stc.counters.misses), (2, 1));
    }

    /// A fill after a missed lookup leaves the cache as the searching fill does.
    #[test]
    fn fill_missed_is_fill_after_a_miss() {
        use rand::{Rng, SeedableRng};
        let (mut a, mut b) = (ShortcutTranslationCache::new(10).unwrap(), ShortcutTranslationCache::new(10).unwrap());
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        for i in 0..20_000 {
            let size = [PageSize::K4, PageSize::M2, PageSize::G1][rng.gen_range(0..3)];
            let gpa = rng.gen_range(0..64u64) << size.shift() | rng.gen_range(0..4096);
            let hit = a.lookup(gpa);
            assert_eq!(b.lookup(gpa), hit, "lookup {i}");
            if hit.is_none() {
                let h = t(rng.gen_range(0..1024u64) << size.shift(), size);
                a.fill(gpa, h);
                b.fill_missed(gpa, h);
            }
        }
        assert_eq!(a.counters, b.counters);
        assert!(a.counters.hits > 1000 && a.counters.misses > 1000, "{:?}", a.counters);
    }

    #[test]
    fn a_2m_host_entry_covers_its_whole_page() {
        let mut stc = ShortcutTranslationCache::new(10).unwrap();
        stc.fill(0x40_0000 + 0x3000, t(0x8000_0000, PageSize::M2));
        assert_eq!(stc.lookup(0x40_0000 + 0x1f_f008), Some(0x8000_0000 + 0x1f_f008));
        assert_eq!(stc.lookup(0x60_0000), None);
        let mut off = ShortcutTranslationCache::new(0).unwrap();
        off.fill(0, t(0, PageSize::K4));
        assert_eq!((off.lookup(0), off.counters.lookups), (None, 0));
    }
}
