//! x86-64 style radix (multilevel) page table: 4 or 5 levels of 512-entry 4 KiB nodes,
//! leaves at level 1 (4 KiB), 2 (2 MiB) or 3 (1 GiB). Levels are numbered from the
//! leaf: level 1 is the PT, 2 the PD, 3 the PDPT, 4 the PML4, 5 the PML5.
//!
//! Nodes live in an arena; each has a real physical frame from the buddy allocator so
//! walk references carry real physical addresses for the cache model.

use super::arena::NodeArena;
use super::{CacheCounters, PageTable, PtFootprint, Translation, WalkCaches, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::mmu::assoc::{AssocCache, Replacement};
use crate::os::buddy::{BuddyAllocator, FrameUse};

const ENTRIES: usize = 512;
const PTE_BYTES: u64 = 8;

// Entry layout: bit 0 present, bit 1 leaf (x86 PS), bits 2..6 permissions,
// bits 12.. the payload (leaf: physical frame base; non-leaf: child arena index << 12).
const P_PRESENT: u64 = 1;
const P_LEAF: u64 = 2;
const PERM_SHIFT: u32 = 2;
const PAYLOAD_MASK: u64 = !0xfff;

#[inline(always)]
fn leaf_entry(pa: u64, perms: Perms) -> u64 {
    pa | P_PRESENT | P_LEAF | ((perms.bits() as u64) << PERM_SHIFT)
}
#[inline(always)]
fn table_entry(child: u32) -> u64 {
    ((child as u64) << 12) | P_PRESENT
}
#[inline(always)]
fn entry_perms(e: u64) -> Perms {
    Perms::from_bits((e >> PERM_SHIFT) as u8)
}

/// Shift of the VA bits indexing level `level` (1-based from the leaf).
#[inline(always)]
const fn level_shift(level: u8) -> u32 {
    12 + 9 * (level as u32 - 1)
}
#[inline(always)]
fn index(va: u64, level: u8) -> usize {
    ((va >> level_shift(level)) as usize) & (ENTRIES - 1)
}

/// Bookkeeping of a node whose entries live in the arena.
#[derive(Clone, Copy, Default)]
struct NodeMeta {
    /// Present entries, to free the node when it empties.
    used: u16,
    /// Physical address of the node's frame in simulated memory.
    pa: u64,
}

/// The radix page table of every address space.
pub struct RadixPageTable {
    levels: u8,
    sizes: Vec<PageSize>,
    entries: NodeArena<ENTRIES>,
    meta: Vec<NodeMeta>,
    /// Root node per ASID (`u32::MAX` = no address space).
    roots: Vec<u32>,
    live_nodes: u64,
    nodes_per_level: [u64; 6],
    mapped: u64,
}

impl RadixPageTable {
    /// `levels` is 4 (48-bit VAs) or 5 (57-bit VAs).
    pub fn new(levels: u8) -> Result<RadixPageTable> {
        if !(levels == 4 || levels == 5) {
            return Err(Error::config("page_table.radix.levels", format!("must be 4 or 5, not {levels}")));
        }
        Ok(RadixPageTable {
            levels,
            sizes: vec![PageSize::K4, PageSize::M2, PageSize::G1],
            entries: NodeArena::new(),
            meta: Vec::new(),
            roots: Vec::new(),
            live_nodes: 0,
            nodes_per_level: [0; 6],
            mapped: 0,
        })
    }

    pub fn levels(&self) -> u8 {
        self.levels
    }

    /// Bits of virtual address this table translates (48 or 57).
    pub fn va_bits(&self) -> u32 {
        level_shift(self.levels) + 9
    }

    /// Level whose entries map pages of `size` directly, if any.
    fn leaf_level(size: PageSize) -> Option<u8> {
        match size.shift() {
            12 => Some(1),
            21 => Some(2),
            30 => Some(3),
            _ => None,
        }
    }

    fn check_canonical(&self, va: u64) -> Result<()> {
        // Canonical: bits above va_bits-1 replicate bit va_bits-1.
        let top = (va as i64) >> (self.va_bits() - 1);
        if top == 0 || top == -1 {
            Ok(())
        } else {
            Err(Error::Sim(format!(
                "virtual address {va:#x} is not canonical for a {}-level radix table ({}-bit addresses)",
                self.levels,
                self.va_bits()
            )))
        }
    }

    fn alloc_node(&mut self, mem: &mut BuddyAllocator, level: u8) -> Result<u32> {
        let pa = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
        let idx = self.entries.alloc();
        if self.meta.len() <= idx as usize {
            self.meta.resize(idx as usize + 1, NodeMeta::default());
        }
        self.meta[idx as usize] = NodeMeta { used: 0, pa };
        self.live_nodes += 1;
        self.nodes_per_level[level as usize] += 1;
        Ok(idx)
    }

    fn free_node(&mut self, mem: &mut BuddyAllocator, idx: u32, level: u8) {
        mem.free(self.meta[idx as usize].pa, PageSize::K4, FrameUse::PageTable);
        self.entries.free(idx);
        self.live_nodes -= 1;
        self.nodes_per_level[level as usize] -= 1;
    }

    #[inline(always)]
    fn entry(&self, idx: u32, i: usize) -> u64 {
        self.entries.get(idx)[i]
    }
    /// Set entry `i` of node `idx`, keeping the node's present-entry count.
    #[inline]
    fn set_entry(&mut self, idx: u32, i: usize, e: u64) {
        let slot = &mut self.entries.get_mut(idx)[i];
        let was = *slot & P_PRESENT != 0;
        *slot = e;
        let m = &mut self.meta[idx as usize];
        match (was, e & P_PRESENT != 0) {
            (false, true) => m.used += 1,
            (true, false) => m.used -= 1,
            _ => {}
        }
    }

    fn root(&self, asid: Asid) -> Option<u32> {
        self.roots.get(asid as usize).copied().filter(|&r| r != u32::MAX)
    }

    /// Physical addresses of the table nodes on the path to `va`'s entry, root first
    /// (as far as the path exists). Nested paging backs these frames in the host.
    pub fn path_frames(&self, asid: Asid, va: u64, out: &mut [u64; 5]) -> usize {
        let mut nodes = [(0u32, 0u8); 5];
        let (n, _) = self.path(asid, va, &mut nodes);
        for k in 0..n {
            out[k] = self.meta[nodes[k].0 as usize].pa;
        }
        n
    }

    /// Nodes on the path to the entry covering `va`, root first, with the level of each,
    /// stopping at the leaf entry or a non-present entry.
    fn path(&self, asid: Asid, va: u64, out: &mut [(u32, u8); 5]) -> (usize, Option<u64>) {
        let Some(mut idx) = self.root(asid) else { return (0, None) };
        let mut n = 0;
        for level in (1..=self.levels).rev() {
            out[n] = (idx, level);
            n += 1;
            let e = self.entry(idx, index(va, level));
            if e & P_PRESENT == 0 {
                return (n, None);
            }
            if e & P_LEAF != 0 {
                return (n, Some(e));
            }
            idx = (e >> 12) as u32;
        }
        (n, None)
    }
}

impl PageTable for RadixPageTable {
    type Caches = PageWalkCache;

    fn kind(&self) -> &'static str {
        "radix"
    }

    fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        let a = asid as usize;
        if self.roots.len() <= a {
            self.roots.resize(a + 1, u32::MAX);
        }
        if self.roots[a] == u32::MAX {
            let root = self.alloc_node(mem, self.levels)?;
            self.roots[a] = root;
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let Some(root) = self.root(asid) else { return };
        // Depth-first free of every node; leaves' frames belong to the OS model.
        let mut stack = vec![(root, self.levels)];
        while let Some((idx, level)) = stack.pop() {
            if level > 1 {
                let mut leaves = 0;
                for &e in self.entries.get(idx).iter() {
                    if e & P_PRESENT != 0 && e & P_LEAF == 0 {
                        stack.push(((e >> 12) as u32, level - 1));
                    } else if e & P_PRESENT != 0 {
                        leaves += 1;
                    }
                }
                self.mapped -= leaves;
            } else {
                self.mapped -= self.meta[idx as usize].used as u64;
            }
            self.free_node(mem, idx, level);
        }
        self.roots[asid as usize] = u32::MAX;
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        let leaf_level = Self::leaf_level(size).ok_or_else(|| {
            Error::config("os.page_size", format!("a radix table maps 4K, 2M or 1G pages, not {size}"))
        })?;
        self.check_canonical(va)?;
        debug_assert!(size.is_aligned(va) && size.is_aligned(pa));
        let mut idx = self
            .root(asid)
            .ok_or_else(|| Error::Sim(format!("map into unknown address space {asid}")))?;
        for level in ((leaf_level + 1)..=self.levels).rev() {
            let i = index(va, level);
            let e = self.entry(idx, i);
            if e & P_PRESENT != 0 {
                if e & P_LEAF != 0 {
                    return Err(Error::Sim(format!("map {va:#x}: overlaps a larger page")));
                }
                idx = (e >> 12) as u32;
            } else {
                let child = self.alloc_node(mem, level - 1)?;
                self.set_entry(idx, i, table_entry(child));
                idx = child;
            }
        }
        let i = index(va, leaf_level);
        if self.entry(idx, i) & P_PRESENT != 0 {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        self.set_entry(idx, i, leaf_entry(pa, perms));
        self.mapped += 1;
        Ok(())
    }

    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let mut path = [(0u32, 0u8); 5];
        let (n, leaf) = self.path(asid, va, &mut path);
        let e = leaf?;
        let (leaf_idx, leaf_level) = path[n - 1];
        let t = Translation {
            pa: e & PAYLOAD_MASK,
            size: PageSize::from_valid_shift(level_shift(leaf_level) as u8),
            perms: entry_perms(e),
        };
        self.set_entry(leaf_idx, index(va, leaf_level), 0);
        self.mapped -= 1;
        // Free nodes that became empty, bottom-up (never the root).
        for k in (1..n).rev() {
            let (idx, level) = path[k];
            if self.meta[idx as usize].used != 0 {
                break;
            }
            self.free_node(mem, idx, level);
            let (parent, plevel) = path[k - 1];
            self.set_entry(parent, index(va, plevel), 0);
        }
        Some(t)
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let mut path = [(0u32, 0u8); 5];
        let (n, leaf) = self.path(asid, va, &mut path);
        let Some(e) = leaf else { return false };
        let (idx, level) = path[n - 1];
        self.set_entry(idx, index(va, level), leaf_entry(e & PAYLOAD_MASK, perms));
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        let mut path = [(0u32, 0u8); 5];
        let (n, leaf) = self.path(asid, va, &mut path);
        let e = leaf?;
        let level = path[n - 1].1;
        Some(Translation {
            pa: e & PAYLOAD_MASK,
            size: PageSize::from_valid_shift(level_shift(level) as u8),
            perms: entry_perms(e),
        })
    }

    #[inline]
    fn walk(&mut self, asid: Asid, va: u64, pwc: &mut PageWalkCache, path: &mut WalkPath) -> Option<Translation> {
        let root = self.root(asid)?;
        // The deepest PWC hit decides where the walk starts: a hit for the entry at
        // level L means the level-(L-1) node is known (Intel SDM §4.10.3).
        let start = pwc.start_level(asid, va, self.levels);
        let mut idx = root;
        let mut level = self.levels;
        // Follow the table from the root without issuing references for levels the PWC
        // skipped: their entries are what the PWC holds.
        while level > start {
            let e = self.entry(idx, index(va, level));
            if e & P_PRESENT == 0 || e & P_LEAF != 0 {
                // Stale PWC hit (cannot happen while invalidation is exact); walk fully.
                break;
            }
            idx = (e >> 12) as u32;
            level -= 1;
        }
        if level != start {
            idx = root;
            level = self.levels;
        }
        loop {
            let i = index(va, level);
            path.push_step(self.meta[idx as usize].pa + i as u64 * PTE_BYTES, level);
            let e = self.entry(idx, i);
            if e & P_PRESENT == 0 {
                return None;
            }
            if e & P_LEAF != 0 {
                return Some(Translation {
                    pa: e & PAYLOAD_MASK,
                    size: PageSize::from_valid_shift(level_shift(level) as u8),
                    perms: entry_perms(e),
                });
            }
            // A non-leaf entry read at `level` may be cached by the PWC.
            pwc.fill(asid, va, level);
            idx = (e >> 12) as u32;
            level -= 1;
        }
    }

    #[inline]
    fn prefetch(&self, asid: Asid, va: u64) {
        let Some(mut idx) = self.root(asid) else { return };
        // Upper levels are few and hot in the host cache; the leaf is what misses.
        for level in (2..=self.levels).rev() {
            let e = self.entry(idx, index(va, level));
            if e & P_PRESENT == 0 || e & P_LEAF != 0 {
                return;
            }
            idx = (e >> 12) as u32;
        }
        self.entries.prefetch(idx, index(va, 1));
    }

    fn footprint(&self) -> PtFootprint {
        PtFootprint { bytes: self.live_nodes * 4096, nodes: self.live_nodes, mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        let per_level: serde_json::Map<String, serde_json::Value> = (1..=self.levels)
            .map(|l| (format!("level{l}"), self.nodes_per_level[l as usize].into()))
            .collect();
        serde_json::json!({ "levels": self.levels, "nodes_per_level": per_level })
    }
}

/// Page-walk caches (Intel's paging-structure caches): one small cache per upper level,
/// holding non-leaf entries tagged by the VA bits above that entry's coverage.
/// `levels[0]` caches level-2 entries (PDEs), `levels[1]` level-3 (PDPTEs), and so on.
pub struct PageWalkCache {
    levels: Vec<Option<AssocCache<()>>>,
    counters: Vec<CacheCounters>,
    latency: u32,
}

impl PageWalkCache {
    /// `entries[k]` / `ways[k]` for the cache of level k+2 entries; 0 entries = none.
    pub fn new(entries: &[usize], ways: usize, repl: Replacement, latency: u32, seed: u64) -> Result<Self> {
        let mut levels = Vec::new();
        for (k, &n) in entries.iter().enumerate() {
            levels.push(if n == 0 {
                None
            } else {
                Some(AssocCache::new(n, ways.min(n), repl, seed + k as u64, &format!("pwc[{k}]"))?)
            });
        }
        Ok(PageWalkCache { counters: vec![CacheCounters::default(); levels.len()], levels, latency })
    }

    pub fn none() -> PageWalkCache {
        PageWalkCache { levels: Vec::new(), counters: Vec::new(), latency: 0 }
    }


    #[inline(always)]
    fn tag(va: u64, level: u8) -> u64 {
        // An entry at `level` is selected by VA bits from level_shift(level) up.
        va >> level_shift(level)
    }

    /// Probe every PWC level (they are looked up in parallel) and return the level at
    /// which the walk starts: `top` on a full miss, L-1 on a hit for level-L entries.
    #[inline]
    fn start_level(&mut self, asid: Asid, va: u64, top: u8) -> u8 {
        let mut start = top;
        for k in 0..self.levels.len() {
            let level = (k + 2) as u8;
            if level > top {
                break;
            }
            if let Some(c) = &mut self.levels[k] {
                let tag = Self::tag(va, level);
                let set = c.set_of(tag);
                let hit = c.lookup(set, tag, asid).is_some();
                self.counters[k].record(hit);
                if hit && level - 1 < start {
                    start = level - 1;
                }
            }
        }
        start
    }

    #[inline]
    fn fill(&mut self, asid: Asid, va: u64, level: u8) {
        let k = level as usize - 2;
        if let Some(Some(c)) = self.levels.get_mut(k) {
            let tag = Self::tag(va, level);
            let set = c.set_of(tag);
            c.insert(set, tag, asid, ());
        }
    }
}

impl WalkCaches for PageWalkCache {
    fn flush_all(&mut self) {
        self.levels.iter_mut().flatten().for_each(|c| c.flush_all());
    }
    fn flush_asid(&mut self, asid: Asid) {
        self.levels.iter_mut().flatten().for_each(|c| {
            c.flush_asid(asid);
        });
    }
    fn invalidate(&mut self, asid: Asid, _va: u64) {
        // Like INVLPG, drop all of the address space's paging-structure entries
        // (Intel SDM §4.10.4.1): unmap may free table nodes.
        self.flush_asid(asid);
    }
    fn probe_latency(&self) -> u64 {
        if self.levels.iter().any(|l| l.is_some()) {
            self.latency as u64
        } else {
            0
        }
    }
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        self.levels
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .map(|(k, _)| (format!("pwc_l{}", k + 2), self.counters[k].clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (RadixPageTable, BuddyAllocator) {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = RadixPageTable::new(4).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        (pt, mem)
    }

    #[test]
    fn dense_aligned_gigabyte_uses_515_nodes() {
        let mut mem = BuddyAllocator::new(4 << 30).unwrap();
        let mut pt = RadixPageTable::new(4).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let base = 0x7f00_0000_0000u64;
        for p in 0..(1u64 << 18) {
            let pa = mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
            pt.map(&mut mem, 0, base + (p << 12), pa, PageSize::K4, Perms::RW_USER).unwrap();
        }
        assert_eq!(pt.footprint().nodes, 512 + 1 + 1 + 1);
        assert_eq!(pt.footprint().bytes, 515 * 4096);
    }

    #[test]
    fn walk_without_pwc_reads_one_entry_per_level() {
        let (mut pt, mut mem) = setup();
        pt.map(&mut mem, 0, 0x40_0000, 0x1000_0000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let mut pwc = PageWalkCache::none();
        let t = pt.walk(0, 0x40_0123, &mut pwc, &mut path).unwrap();
        assert_eq!(t.phys(0x40_0123), 0x1000_0123);
        assert_eq!(path.refs().len(), 4);
        assert_eq!(path.steps(), 4);
        let levels: Vec<u8> = path.refs().iter().map(|r| r.what).collect();
        assert_eq!(levels, vec![4, 3, 2, 1]);
    }

    #[test]
    fn huge_pages_end_the_walk_early() {
        let (mut pt, mut mem) = setup();
        pt.map(&mut mem, 0, 0x4000_0000, 0x4000_0000, PageSize::G1, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, 0x8000_0000 + (2 << 20), 0x20_0000, PageSize::M2, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let mut pwc = PageWalkCache::none();
        assert_eq!(pt.walk(0, 0x4000_1234, &mut pwc, &mut path).unwrap().size, PageSize::G1);
        assert_eq!(path.refs().len(), 2);
        path.clear();
        assert_eq!(pt.walk(0, 0x8020_0000, &mut pwc, &mut path).unwrap().size, PageSize::M2);
        assert_eq!(path.refs().len(), 3);
    }

    #[test]
    fn pwc_hit_skips_upper_levels() {
        let (mut pt, mut mem) = setup();
        pt.map(&mut mem, 0, 0x40_0000, 0x1000_0000, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, 0x40_1000, 0x1000_1000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut pwc = PageWalkCache::new(&[32, 32, 32], 4, Replacement::Lru, 0, 1).unwrap();
        let mut path = WalkPath::new();
        pt.walk(0, 0x40_0000, &mut pwc, &mut path).unwrap();
        assert_eq!(path.refs().len(), 4);
        path.clear();
        pt.walk(0, 0x40_1000, &mut pwc, &mut path).unwrap();
        assert_eq!(path.refs().len(), 1, "PDE cache hit leaves only the PTE read");
        assert_eq!(path.refs()[0].what, 1);
        // Invalidation (e.g. after unmap) forces a full walk again.
        pwc.invalidate(0, 0x40_1000);
        path.clear();
        pt.walk(0, 0x40_1000, &mut pwc, &mut path).unwrap();
        assert_eq!(path.refs().len(), 4);
    }

    #[test]
    fn unmap_frees_empty_nodes() {
        let (mut pt, mut mem) = setup();
        let before = mem.counters().frames_page_table;
        pt.map(&mut mem, 0, 0x7000_0000_0000, 0x1000, PageSize::K4, Perms::RW_USER).unwrap();
        assert_eq!(pt.footprint().nodes, 4);
        let t = pt.unmap(&mut mem, 0, 0x7000_0000_0000).unwrap();
        assert_eq!(t.pa, 0x1000);
        assert_eq!(pt.footprint().nodes, 1);
        assert_eq!(mem.counters().frames_page_table, before);
        assert!(pt.translate(0, 0x7000_0000_0000).is_none());
    }

    #[test]
    fn non_canonical_and_unsupported_sizes_are_errors() {
        let (mut pt, mut mem) = setup();
        assert!(pt.map(&mut mem, 0, 1 << 50, 0, PageSize::K4, Perms::RW_USER).is_err());
        let e = pt
            .map(&mut mem, 0, 0, 0, PageSize::from_shift(13).unwrap(), Perms::RW_USER)
            .unwrap_err();
        assert!(e.to_string().contains("os.page_size"));
        let mut pt5 = RadixPageTable::new(5).unwrap();
        pt5.create_space(&mut mem, 0).unwrap();
        assert!(pt5.map(&mut mem, 0, 1 << 50, 0x2000, PageSize::K4, Perms::RW_USER).is_ok());
        assert!(RadixPageTable::new(3).is_err());
    }
}
