//! A memory-resident translation cache in front of any page table: Elphinstone's
//! software second-level TLB (ch. 5) and Itanium's long-format VHPT as Linux uses it,
//! a per-CPU cache of the real page table (Chapman et al. §3.1). Both are the same
//! mechanism (the Itanium paper calls the VHPT "another software-managed level of TLB").
//!
//! A table of `entry_bytes` entries (tag: VPN and ASID; PTE; for the VHPT also page size
//! and protection key) in simulated physical memory, shared by every address space and
//! tagged. The index is bit selection, set = (VA >> index_shift) mod sets (STLB; with 4
//! entries per 64-byte line, neighbouring pages share a line: the "cache priming"
//! effect, §5.3), or Itanium's hash, (RID xor VPN) mod sets, with the RID derived from
//! the ASID. Collisions replace (no chain); with 2 or more ways, the least recently
//! filled way goes.
//!
//! A refill first reads the set (one step); on a miss it charges `miss_cycles` (the
//! trap into the software handler) and walks the page table behind it (further steps),
//! then fills the entry. Map, unmap and protect keep it consistent by invalidating the
//! entries they affect.

use super::{FastPaths, NoSplit, PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StlbIndex {
    /// Bit selection of the virtual address (Elphinstone's STLB).
    #[default]
    Bits,
    /// Itanium's long-VHPT hash: RID xor VPN.
    RidXorVpn,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StlbConfig {
    /// Entries (a power of two); 0 disables it. Elphinstone's 128K STLB is 8192 entries
    /// of 16 B; Itanium's 4 MiB long VHPT is 131072 entries of 32 B.
    pub entries: usize,
    /// Associativity (1 = direct mapped; Itanium's walker checks one entry).
    pub ways: usize,
    /// Bytes per entry: 16 (STLB: tag + PTE) or 32 (long VHPT: tag, PTE, size, key).
    pub entry_bytes: u64,
    #[serde(rename = "index")]
    pub index_fn: StlbIndex,
    /// VA bits below the index for `index = "bits"`: 12 by 4 KiB page, 13 by page pair.
    pub index_shift: u8,
    /// Swap the two low bytes of the context (the ASID) before forming its RIDs (context
    /// × 8 + region, `super::rid_xor_vpn`): Linux's fix for RID xor VPN collisions
    /// between neighbouring address spaces, Chapman et al. §3.1.
    pub swizzle_rid: bool,
    /// Cycles charged on a miss for entering the software refill handler.
    pub miss_cycles: u64,
}

impl Default for StlbConfig {
    fn default() -> Self {
        StlbConfig { entries: 0, ways: 1, entry_bytes: 16, index_fn: StlbIndex::Bits, index_shift: 12, swizzle_rid: false, miss_cycles: 0 }
    }
}

#[derive(Clone, Copy, Default)]
struct Entry {
    valid: bool,
    vpn: u64,
    asid: Asid,
    pa: u64,
    shift: u8,
    perms: u8,
    /// Fill order stamp, for replacement among ways.
    stamp: u64,
}

pub struct SoftwareTlb<P: PageTable> {
    inner: P,
    cfg: StlbConfig,
    sets: usize,
    entries: Vec<Entry>,
    table_pa: Option<u64>,
    table_size: PageSize,
    clock: u64,
    hits: u64,
    misses: u64,
}

impl<P: PageTable> SoftwareTlb<P> {
    pub fn new(inner: P, cfg: &StlbConfig) -> Result<SoftwareTlb<P>> {
        Self::configured_at(inner, cfg, "page_table.stlb")
    }

    /// As `new`, for a configuration found at `key` (errors name its keys).
    pub(crate) fn configured_at(inner: P, cfg: &StlbConfig, key: &str) -> Result<SoftwareTlb<P>> {
        if cfg.entries == 0 || !cfg.entries.is_power_of_two() || cfg.entries > crate::mmu::assoc::MAX_ENTRIES {
            return Err(Error::config(format!("{key}.entries"), "must be a power of two, at most 2^26"));
        }
        if cfg.ways == 0 || !cfg.entries.is_multiple_of(cfg.ways) || !(cfg.entries / cfg.ways).is_power_of_two() {
            return Err(Error::config(format!("{key}.ways"), format!("{} entries cannot form {}-way sets", cfg.entries, cfg.ways)));
        }
        if !(12..=30).contains(&cfg.index_shift) {
            return Err(Error::config(format!("{key}.index_shift"), "must be between 12 and 30"));
        }
        if !matches!(cfg.entry_bytes, 8 | 16 | 32 | 64) {
            return Err(Error::config(format!("{key}.entry_bytes"), "must be 8, 16, 32 or 64"));
        }
        let table_size = PageSize::from_bytes((cfg.entries as u64 * cfg.entry_bytes).max(4096)).map_err(|m| Error::config(format!("{key}.entries"), m))?;
        Ok(SoftwareTlb {
            inner,
            sets: cfg.entries / cfg.ways,
            cfg: cfg.clone(),
            entries: vec![Entry::default(); cfg.entries],
            table_pa: None,
            table_size,
            clock: 0,
            hits: 0,
            misses: 0,
        })
    }

    fn set_of(&self, va: u64, asid: Asid) -> usize {
        let x = match self.cfg.index_fn {
            StlbIndex::Bits => va >> self.cfg.index_shift,
            StlbIndex::RidXorVpn => super::rid_xor_vpn(va >> 12, va, asid, self.cfg.swizzle_rid),
        };
        (x as usize) & (self.sets - 1)
    }

    /// Drop every entry that may translate any page of [start, start + size).
    fn invalidate(&mut self, asid: Asid, start: u64, size: PageSize) {
        let (lo, hi) = (start >> 12, (start + size.bytes() - 1) >> 12);
        if hi - lo < self.sets as u64 {
            for vpn in lo..=hi {
                let base = self.set_of(vpn << 12, asid) * self.cfg.ways;
                for e in &mut self.entries[base..base + self.cfg.ways] {
                    if e.valid && e.asid == asid && e.vpn == vpn {
                        e.valid = false;
                    }
                }
            }
        } else {
            for e in &mut self.entries {
                if e.valid && e.asid == asid && (lo..=hi).contains(&e.vpn) {
                    e.valid = false;
                }
            }
        }
    }
}

impl<P: PageTable> PageTable for SoftwareTlb<P> {
    type Caches = P::Caches;

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn page_sizes(&self) -> &[PageSize] {
        self.inner.page_sizes()
    }

    fn page_size_at(&self, va: u64) -> Option<PageSize> {
        self.inner.page_size_at(va)
    }

    fn sizes_by_address(&self) -> bool {
        self.inner.sizes_by_address()
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        if self.table_pa.is_none() {
            self.table_pa = Some(mem.alloc(self.table_size, FrameUse::PageTable)?);
        }
        self.inner.create_space(mem, asid)
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        for e in &mut self.entries {
            if e.asid == asid {
                e.valid = false;
            }
        }
        self.inner.destroy_space(mem, asid)
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        self.inner.map(mem, asid, va, pa, size, perms)
    }

    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let t = self.inner.unmap(mem, asid, va)?;
        self.invalidate(asid, t.size.align_down(va), t.size);
        Some(t)
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Some(t) = self.inner.translate(asid, va) else { return false };
        self.invalidate(asid, t.size.align_down(va), t.size);
        self.inner.protect(asid, va, perms)
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.inner.translate(asid, va)
    }

    fn walk(&mut self, asid: Asid, va: u64, caches: &mut P::Caches, path: &mut WalkPath) -> Option<Translation> {
        let Some(table_pa) = self.table_pa else { return self.inner.walk(asid, va, caches, path) };
        let vpn = va >> 12;
        let set = self.set_of(va, asid);
        let base = set * self.cfg.ways;
        // The ways of a set are adjacent: one step reading their cache lines.
        path.begin_step();
        let first = table_pa + base as u64 * self.cfg.entry_bytes;
        let last = first + self.cfg.ways as u64 * self.cfg.entry_bytes - 1;
        let mut line = first & !63;
        while line <= last {
            path.push_parallel(line.max(first), 0);
            line += 64;
        }
        for w in 0..self.cfg.ways {
            let e = self.entries[base + w];
            if e.valid && e.asid == asid && e.vpn == vpn {
                self.hits += 1;
                return Some(Translation { pa: e.pa, size: PageSize::from_valid_shift(e.shift), perms: Perms::from_bits(e.perms) });
            }
        }
        self.misses += 1;
        path.add_cycles(self.cfg.miss_cycles);
        let t = self.inner.walk(asid, va, caches, path)?;
        // Replace an invalid way, else the least recently filled.
        let victim = (0..self.cfg.ways)
            .min_by_key(|&w| {
                let e = &self.entries[base + w];
                if e.valid {
                    e.stamp + 1
                } else {
                    0
                }
            })
            .unwrap_or(0);
        self.clock += 1;
        self.entries[base + victim] = Entry { valid: true, vpn, asid, pa: t.pa, shift: t.size.shift(), perms: t.perms.bits(), stamp: self.clock };
        Some(t)
    }

    fn walk_nested(&mut self, asid: Asid, va: u64, caches: &mut P::Caches, path: &mut WalkPath) -> Option<Translation> {
        self.inner.walk_nested(asid, va, caches, path)
    }

    fn take_error(&mut self) -> Option<crate::Error> {
        self.inner.take_error()
    }

    fn footprint(&self) -> PtFootprint {
        let mut f = self.inner.footprint();
        if self.table_pa.is_some() {
            f.bytes += self.table_size.bytes();
        }
        f
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "table": self.inner.details(),
            "stlb": {"entries": self.cfg.entries, "ways": self.cfg.ways, "entry_bytes": self.cfg.entry_bytes,
                     "index": self.cfg.index_fn, "index_shift": self.cfg.index_shift,
                     "bytes": self.table_size.bytes(), "hits": self.hits, "misses": self.misses,
                     "hit_rate": if self.hits + self.misses == 0 { 0.0 } else { self.hits as f64 / (self.hits + self.misses) as f64 }},
        })
    }
}

impl<P: FastPaths> FastPaths for SoftwareTlb<P> {
    type Split = NoSplit;
    const PREFETCHES: bool = P::PREFETCHES;

    fn prefetch(&self, asid: Asid, va: u64) {
        self.inner.prefetch(asid, va)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::pwc::PageWalkCache;
    use crate::pt::RadixPageTable;

    #[test]
    fn a_hit_costs_one_reference_and_neighbors_share_a_line() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let cfg = StlbConfig { entries: 8192, ..Default::default() };
        let mut pt = SoftwareTlb::new(RadixPageTable::new(4).unwrap(), &cfg).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        for p in 0..4u64 {
            pt.map(&mut mem, 0, 0x40_0000 + p * 4096, 0x100_0000 + p * 4096, PageSize::K4, Perms::RW_USER).unwrap();
        }
        let mut pwc = PageWalkCache::none();
        let mut path = WalkPath::new();
        // Miss: the STLB probe, then the 4-level walk.
        pt.walk(0, 0x40_0000, &mut pwc, &mut path).unwrap();
        assert_eq!((path.steps(), path.refs().len()), (5, 5));
        path.clear();
        let t = pt.walk(0, 0x40_0000, &mut pwc, &mut path).unwrap();
        assert_eq!(t.pa, 0x100_0000);
        assert_eq!(path.refs().len(), 1);
        let line = |p: &WalkPath| p.refs()[0].pa & !63;
        let first = line(&path);
        path.clear();
        pt.walk(0, 0x40_1000, &mut pwc, &mut path).unwrap();
        assert_eq!(path.refs()[0].pa & !63, first, "entries of neighbouring pages share a line");
        // Unmap keeps it consistent.
        pt.unmap(&mut mem, 0, 0x40_0000).unwrap();
        path.clear();
        assert!(pt.walk(0, 0x40_0000, &mut pwc, &mut path).is_none());
        assert!(SoftwareTlb::new(RadixPageTable::new(4).unwrap(), &StlbConfig { entries: 100, ..cfg }).is_err());
    }
}
