//! x86-64 style radix (multilevel) page table: 4 or 5 levels of 512-entry 4 KiB nodes,
//! leaves at level 1 (4 KiB), 2 (2 MiB) or 3 (1 GiB). Levels are numbered from the
//! leaf: level 1 is the PT, 2 the PD, 3 the PDPT, 4 the PML4, 5 the PML5.
//!
//! With `tailored` (Tailored Page Sizes, TPS §III-A1) it maps every power of two from
//! 4 KiB to 1 GiB. A page 2^k times a level's entry size (1 <= k <= 8) occupies 2^k
//! aligned slots of that level: the first holds the *true* PTE, marked by the T bit
//! with its size in the low, otherwise unused, PFN bits (Fig. 5, NAPOT-style: k-1 ones
//! then a zero); the others hold *alias* PTEs. A pointer alias carries only T and the
//! size, and the walker makes one more reference, to the true PTE at the index with the
//! page-offset bits cleared (Fig. 6); a copy alias is a full copy of the true PTE (no
//! extra reference, every PTE update writes all copies).
//!
//! Nodes live in an arena; each has a real physical frame from the buddy allocator so
//! walk references carry real physical addresses for the cache model.

use super::arena::NodeArena;
use super::{FastPaths, GuestPath, PageTable, PtFootprint, SplitCaches, SplitWalk, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::mmu::pwc::PageWalkCache;
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};
use std::cell::Cell;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RadixConfig {
    pub levels: u8,
    /// Tailored Page Sizes (TPS §III-A1): leaf entries map every 2^n page from 4K to 1G.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tailored: bool,
    /// How a tailored page's other leaf slots are filled: "pointer" (one extra walk
    /// reference) or "copy" (full copies).
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub alias_ptes: crate::pt::radix::AliasPtes,
}

impl Default for RadixConfig {
    fn default() -> Self {
        RadixConfig { levels: 4, tailored: false, alias_ptes: Default::default() }
    }
}

const ENTRIES: usize = 512;
const PTE_BYTES: u64 = 8;

// Entry layout: bit 0 present, bit 1 leaf (x86 PS), bits 2..6 permissions,
// bits 12.. the payload (leaf: physical frame base; non-leaf: child arena index << 12).
const P_PRESENT: u64 = 1;
const P_LEAF: u64 = 2;
/// TPS's T bit: a tailored leaf whose size is encoded in its low PFN bits.
const P_TAILORED: u64 = 0x80;
const PERM_SHIFT: u32 = 2;
const PAYLOAD_MASK: u64 = !0xfff;

#[inline(always)]
fn leaf_entry(pa: u64, perms: Perms) -> u64 {
    pa | P_PRESENT | P_LEAF | ((perms.bits() as u64) << PERM_SHIFT)
}
/// The true PTE of a tailored page of 2^k slots at `level` (TPS Fig. 5).
#[inline(always)]
fn tailored_entry(pa: u64, perms: Perms, level: u8, k: u32) -> u64 {
    leaf_entry(pa, perms) | P_TAILORED | (((1u64 << (k - 1)) - 1) << level_shift(level))
}
/// log2 of the slots a tailored leaf spans, from its size bits (a priority encoder in
/// hardware: the count of ones above the level's offset, plus one).
#[inline(always)]
fn tailored_slots_log2(e: u64, level: u8) -> u32 {
    (e >> level_shift(level)).trailing_ones() + 1
}
/// The mapping a (true) leaf entry read at `level` holds.
#[inline(always)]
fn leaf_translation(e: u64, level: u8) -> Translation {
    let mut shift = level_shift(level);
    if e & P_TAILORED != 0 {
        shift += tailored_slots_log2(e, level);
    }
    Translation { pa: e & PAYLOAD_MASK & !((1u64 << shift) - 1), size: PageSize::from_valid_shift(shift as u8), perms: entry_perms(e) }
}
/// `prefetch_at`'s location of entry `i` of node `idx` at `level`.
#[inline(always)]
fn entry_location(idx: u32, level: u8, i: usize) -> u64 {
    ((idx as u64) << 12) | ((level as u64) << 9) | i as u64
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
pub(crate) const fn level_shift(level: u8) -> u32 {
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
    /// Bumped when the node is allocated and when it is freed: a leaf hint naming this
    /// node is good only while the generation it saw is current.
    generation: u32,
    /// Physical address of the node's frame in simulated memory.
    pa: u64,
}

/// How the alias slots of a tailored page are filled (`page_table.radix.alias_ptes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AliasPtes {
    /// T and size only; the walk makes one more reference, to the true PTE.
    #[default]
    Pointer,
    /// Full copies of the true PTE (TPS §III-A1's alternative).
    Copy,
}

/// What `RadixPageTable::follow` meets on its way down: an entry read (its physical
/// address and level), and a non-leaf entry (its level).
#[derive(Clone, Copy)]
enum Visit {
    Read(u64, u8),
    Descend(u8),
}

/// A radix walk with cold PWCs ([`RadixSplit::full_path`](SplitWalk::full_path)): the entries it reads, root
/// first, and the mapping it finds.
#[derive(Clone, Copy, Debug, Default)]
pub struct RadixPath {
    /// The address space has a table (a walk without one reads and probes nothing).
    rooted: bool,
    /// The table's levels.
    top: u8,
    len: u8,
    /// The first `descend` entries are present non-leaf entries (the PWC caches those).
    descend: u8,
    /// Levels of the entries read; the true PTE behind a TPS alias repeats its level.
    level: [u8; 6],
    /// Physical addresses of the entries read.
    pa: [u64; 6],
}

impl RadixPath {
    #[inline(always)]
    fn push(&mut self, pa: u64, level: u8) {
        self.pa[self.len as usize] = pa;
        self.level[self.len as usize] = level;
        self.len += 1;
    }
}

/// The radix page table of every address space.
pub struct RadixPageTable {
    levels: u8,
    /// Tailored Page Sizes: every 2^n page, with this kind of alias PTEs.
    tailored: Option<AliasPtes>,
    sizes: Vec<PageSize>,
    entries: NodeArena<ENTRIES>,
    meta: Vec<NodeMeta>,
    /// Root node per ASID (`u32::MAX` = no address space).
    roots: Vec<u32>,
    live_nodes: u64,
    nodes_per_level: [u64; 6],
    mapped: u64,
    /// Look-ahead hints (simulator-only, like the host prefetches they serve): per
    /// 2 MiB region, direct-mapped, the leaf node a look-ahead last reached there, so
    /// the next one prefetches the leaf entry without reading the levels above it
    /// again. A hint is used only while its node's generation is the one it saw (a
    /// live node stays its region's until freed).
    leaf_hints: Box<[Cell<LeafHint>]>,
}

/// A `leaf_hints` slot: which region (ASID and 2 MiB region number), its leaf node
/// (`u32::MAX`: none) and the node's generation then.
#[derive(Clone, Copy)]
struct LeafHint {
    region: u64,
    node: u32,
    generation: u32,
}

const LEAF_HINTS: usize = 4096;

/// `leaf_hints`' slot and key for `va` of `asid` (VAs are at most 57 bits).
#[inline(always)]
fn leaf_hint_key(asid: Asid, va: u64) -> (usize, u64) {
    let region = va >> 21;
    ((region as usize) & (LEAF_HINTS - 1), region | (asid as u64) << 48)
}

impl RadixPageTable {
    /// `levels` is 4 (48-bit VAs) or 5 (57-bit VAs).
    pub fn new(levels: u8) -> Result<RadixPageTable> {
        if !(levels == 4 || levels == 5) {
            return Err(Error::config("page_table.radix.levels", format!("must be 4 or 5, not {levels}")));
        }
        Ok(RadixPageTable {
            levels,
            tailored: None,
            sizes: vec![PageSize::K4, PageSize::M2, PageSize::G1],
            entries: NodeArena::new(),
            meta: Vec::new(),
            roots: Vec::new(),
            live_nodes: 0,
            nodes_per_level: [0; 6],
            mapped: 0,
            leaf_hints: vec![Cell::new(LeafHint { region: 0, node: u32::MAX, generation: 0 }); LEAF_HINTS].into_boxed_slice(),
        })
    }

    /// The table `page_table.radix` describes.
    pub fn from_config(c: &RadixConfig) -> Result<RadixPageTable> {
        let pt = RadixPageTable::new(c.levels)?;
        Ok(if c.tailored { pt.with_tailored(c.alias_ptes) } else { pt })
    }

    /// Map every power of two from 4 KiB to 1 GiB (TPS), with `alias` PTEs.
    pub fn with_tailored(mut self, alias: AliasPtes) -> RadixPageTable {
        self.tailored = Some(alias);
        self.sizes = (12..=30).map(PageSize::from_valid_shift).collect();
        self
    }

    /// Bits of virtual address this table translates (48 or 57).
    pub(crate) fn va_bits(&self) -> u32 {
        level_shift(self.levels) + 9
    }

    /// Where a page of `size` goes: its leaf level and log2 of the slots it spans there
    /// (0 for 4K, 2M and 1G; 1..=8 for a tailored size).
    fn leaf_place(&self, size: PageSize) -> Option<(u8, u32)> {
        let s = size.shift() as u32;
        if self.tailored.is_none() && !matches!(s, 12 | 21 | 30) || !(12..=30).contains(&s) {
            return None;
        }
        let level = (1 + (s - 12) / 9) as u8;
        Some((level, s - level_shift(level)))
    }

    /// The slot and entry of the true PTE for a leaf `e` read at slot `i` of `idx`.
    #[inline(always)]
    fn true_pte(&self, idx: u32, level: u8, i: usize, e: u64) -> (usize, u64) {
        if e & P_TAILORED == 0 {
            return (i, e);
        }
        let ti = i & !((1usize << tailored_slots_log2(e, level)) - 1);
        (ti, self.entry(idx, ti))
    }

    /// Whether slot `i` of a node holds a true PTE (not an alias or a table pointer).
    fn is_true_leaf(e: u64, level: u8, i: usize) -> bool {
        e & P_PRESENT != 0 && e & P_LEAF != 0 && (e & P_TAILORED == 0 || i & ((1usize << tailored_slots_log2(e, level)) - 1) == 0)
    }

    /// Write the true PTE `e` of a page spanning 2^k slots from `i0`, and its aliases.
    fn write_leaf(&mut self, idx: u32, level: u8, i0: usize, k: u32, e: u64) {
        self.set_entry(idx, i0, e);
        let alias = match self.tailored {
            Some(AliasPtes::Copy) => e,
            // A pointer alias: T and the size bits, no frame.
            _ => P_PRESENT | P_LEAF | P_TAILORED | (((1u64 << (k.max(1) - 1)) - 1) << level_shift(level)),
        };
        for i in i0 + 1..i0 + (1usize << k) {
            self.set_entry(idx, i, alias);
        }
    }

    fn check_canonical(&self, va: u64) -> Result<()> {
        // Canonical: bits above va_bits-1 replicate bit va_bits-1.
        let top = (va as i64) >> (self.va_bits() - 1);
        if top == 0 || top == -1 {
            Ok(())
        } else {
            Err(Error::Sim(format!("virtual address {va:#x} is not canonical for a {}-level radix table ({}-bit addresses)", self.levels, self.va_bits())))
        }
    }

    fn alloc_node(&mut self, mem: &mut BuddyAllocator, level: u8) -> Result<u32> {
        let pa = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
        let idx = self.entries.alloc();
        if self.meta.len() <= idx as usize {
            self.meta.resize(idx as usize + 1, NodeMeta::default());
        }
        let generation = self.meta[idx as usize].generation.wrapping_add(1);
        self.meta[idx as usize] = NodeMeta { used: 0, pa, generation };
        self.live_nodes += 1;
        self.nodes_per_level[level as usize] += 1;
        Ok(idx)
    }

    fn free_node(&mut self, mem: &mut BuddyAllocator, idx: u32, level: u8) {
        mem.free(self.meta[idx as usize].pa, PageSize::K4, FrameUse::PageTable);
        let m = &mut self.meta[idx as usize];
        m.generation = m.generation.wrapping_add(1);
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

    /// `full_path`'s walk: the entries a walk with cold PWCs reads, root first, and the
    /// mapping it finds.
    #[inline(always)]
    fn cold_path(&self, asid: Asid, va: u64, full: &mut RadixPath) -> Option<Translation> {
        let root = self.root(asid)?;
        full.rooted = true;
        self.follow(root, self.levels, va, |v| match v {
            Visit::Read(pa, level) => full.push(pa, level),
            Visit::Descend(_) => full.descend += 1,
        })
    }

    /// Read the entries from node `idx` at `level` down to `va`'s leaf entry (or its
    /// missing one): each read, and each non-leaf entry read, goes to `visit`. Returns
    /// the mapping found.
    #[inline(always)]
    fn follow(&self, mut idx: u32, mut level: u8, va: u64, mut visit: impl FnMut(Visit)) -> Option<Translation> {
        loop {
            let i = index(va, level);
            visit(Visit::Read(self.meta[idx as usize].pa + i as u64 * PTE_BYTES, level));
            let e = self.entry(idx, i);
            if e & P_PRESENT == 0 {
                return None;
            }
            if e & P_LEAF != 0 {
                if e & P_TAILORED != 0 && self.tailored == Some(AliasPtes::Pointer) {
                    // TPS Fig. 6: an alias sends the walker to the true PTE, at the
                    // index with the page-offset bits cleared: one more reference.
                    let ti = i & !((1usize << tailored_slots_log2(e, level)) - 1);
                    if ti != i {
                        visit(Visit::Read(self.meta[idx as usize].pa + ti as u64 * PTE_BYTES, level));
                        return Some(leaf_translation(self.entry(idx, ti), level));
                    }
                }
                return Some(leaf_translation(e, level));
            }
            visit(Visit::Descend(level));
            idx = (e >> 12) as u32;
            level -= 1;
        }
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
            let mut leaves = 0;
            for (i, &e) in self.entries.get(idx).iter().enumerate() {
                if level > 1 && e & P_PRESENT != 0 && e & P_LEAF == 0 {
                    stack.push(((e >> 12) as u32, level - 1));
                } else if Self::is_true_leaf(e, level, i) {
                    leaves += 1;
                }
            }
            self.mapped -= leaves;
            self.free_node(mem, idx, level);
        }
        self.roots[asid as usize] = u32::MAX;
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        let (leaf_level, k) = self.leaf_place(size).ok_or_else(|| {
            let what = if self.tailored.is_some() { "pages from 4K to 1G" } else { "4K, 2M or 1G pages (page_table.radix.tailored maps every 2^n)" };
            Error::config("os.page_size", format!("a radix table maps {what}, not {size}"))
        })?;
        self.check_canonical(va)?;
        debug_assert!(size.is_aligned(va) && size.is_aligned(pa));
        let mut idx = self.root(asid).ok_or_else(|| Error::Sim(format!("map into unknown address space {asid}")))?;
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
        let i0 = index(va, leaf_level);
        if (i0..i0 + (1usize << k)).any(|i| self.entry(idx, i) & P_PRESENT != 0) {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        let e = if k == 0 { leaf_entry(pa, perms) } else { tailored_entry(pa, perms, leaf_level, k) };
        self.write_leaf(idx, leaf_level, i0, k, e);
        self.mapped += 1;
        Ok(())
    }

    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let mut path = [(0u32, 0u8); 5];
        let (n, leaf) = self.path(asid, va, &mut path);
        let e = leaf?;
        let (leaf_idx, leaf_level) = path[n - 1];
        let (i0, e) = self.true_pte(leaf_idx, leaf_level, index(va, leaf_level), e);
        let t = leaf_translation(e, leaf_level);
        let slots = 1usize << (t.size.shift() as u32 - level_shift(leaf_level));
        for i in i0..i0 + slots {
            self.set_entry(leaf_idx, i, 0);
        }
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
        let (i0, e) = self.true_pte(idx, level, index(va, level), e);
        let k = leaf_translation(e, level).size.shift() as u32 - level_shift(level);
        let perm_mask = 0x1f << PERM_SHIFT;
        self.write_leaf(idx, level, i0, k, (e & !perm_mask) | ((perms.bits() as u64) << PERM_SHIFT));
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        // `path`'s walk without recording the nodes (every fault translates once).
        let mut idx = self.root(asid)?;
        for level in (1..=self.levels).rev() {
            let i = index(va, level);
            let e = self.entry(idx, i);
            if e & P_PRESENT == 0 {
                return None;
            }
            if e & P_LEAF != 0 {
                let (_, e) = self.true_pte(idx, level, i, e);
                return Some(leaf_translation(e, level));
            }
            idx = (e >> 12) as u32;
        }
        None
    }

    /// The fused form of `full_path` + `replay` (nested tables walk radix tables
    /// several times per access, and building the path costs them ~6%); the test
    /// `split_walk_is_the_walk` holds the two to the same references and PWC traffic.
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
        self.follow(idx, level, va, |v| match v {
            Visit::Read(pa, level) => path.push_step(pa, level),
            // A non-leaf entry read at `level` may be cached by the PWC. Levels at or
            // below `start` missed in `start_level` (a hit there would start lower).
            Visit::Descend(level) => pwc.fill(asid, va, level, level <= start),
        })
    }

    fn footprint(&self) -> PtFootprint {
        PtFootprint { bytes: self.live_nodes * 4096, nodes: self.live_nodes, mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        let per_level: serde_json::Map<String, serde_json::Value> =
            (1..=self.levels).map(|l| (format!("level{l}"), self.nodes_per_level[l as usize].into())).collect();
        let mut d = serde_json::json!({ "levels": self.levels, "nodes_per_level": per_level });
        if let Some(a) = self.tailored {
            d["tailored"] = serde_json::json!({ "alias_ptes": a });
        }
        d
    }
}

/// A radix walk splits into the entries a cold walk reads ([`RadixPath`], one piece)
/// and their replay through the PWC.
#[derive(Clone, Copy, Debug)]
pub struct RadixSplit;

impl SplitWalk<RadixPageTable> for RadixSplit {
    type Path = RadixPath;
    const WITNESS: Option<Self> = Some(RadixSplit);
    const ONE_PIECE: bool = true;

    #[inline(always)]
    fn full_path_into(self, pt: &mut RadixPageTable, asid: Asid, va: u64, _front: &mut PageWalkCache, out: &mut RadixPath) -> Option<Translation> {
        *out = RadixPath { top: pt.levels, ..RadixPath::default() };
        pt.cold_path(asid, va, out)
    }

    #[inline]
    fn full_path(self, pt: &mut RadixPageTable, asid: Asid, va: u64, _front: &mut PageWalkCache, mut emit: impl FnMut(RadixPath)) -> Option<Translation> {
        let mut full = RadixPath { top: pt.levels, ..RadixPath::default() };
        let t = pt.cold_path(asid, va, &mut full);
        emit(full);
        t
    }

    #[inline]
    fn replay(self, full: &RadixPath, asid: Asid, va: u64, pwc: &mut PageWalkCache, path: &mut WalkPath) {
        if !full.rooted {
            return;
        }
        // The deepest PWC hit decides where the walk starts: a hit for the entry at
        // level L means the level-(L-1) node is known (Intel SDM §4.10.3), so the
        // entries above it are not read.
        let start = pwc.start_level(asid, va, full.top);
        let skip = (full.top - start) as usize;
        // A PWC hit past the path's non-leaf entries is stale (cannot happen while
        // invalidation is exact): walk fully.
        let from = if skip <= full.descend as usize { skip } else { 0 };
        for k in from..full.len as usize {
            let level = full.level[k];
            path.push_step(full.pa[k], level);
            if k < full.descend as usize {
                // A non-leaf entry may be cached by the PWC. Levels at or below
                // `start` missed in `start_level` (a hit there would start lower).
                pwc.fill(asid, va, level, level <= start);
            }
        }
    }

    #[inline(always)]
    fn path_continues(self, _full: &RadixPath) -> bool {
        false
    }

    fn split_caches(self, pwc: &mut PageWalkCache) -> PageWalkCache {
        pwc.split_front()
    }

    fn rejoin_caches(self, pwc: &mut PageWalkCache, front: PageWalkCache) {
        pwc.rejoin_front(front)
    }
}

impl GuestPath for RadixPath {
    #[inline(always)]
    fn entries(&self, mut each: impl FnMut(u64)) {
        self.pa[..self.len as usize].iter().for_each(|&pa| each(pa));
    }
}

impl FastPaths for RadixPageTable {
    type Split = RadixSplit;
    // A leaf (or a tailored page's true PTE) holds the frame, size and rights mapped.
    const TRANSLATES_AS_MAPPED: bool = true;
    const PREFETCHES: bool = true;

    #[inline]
    fn prefetch(&self, asid: Asid, va: u64) {
        self.prefetch_at(asid, va);
    }

    /// The location is the node, level and index of the entry that ends the chase: the
    /// leaf entry, or a leaf found above level 1 (a large page). `u64::MAX` if the chase
    /// met a missing entry.
    #[inline]
    fn prefetch_at(&self, asid: Asid, va: u64) -> Option<u64> {
        let (slot, region) = leaf_hint_key(asid, va);
        let hint = self.leaf_hints[slot].get();
        if hint.region == region && self.meta.get(hint.node as usize).is_some_and(|m| m.generation == hint.generation) {
            let i = index(va, 1);
            self.entries.prefetch(hint.node, i);
            return Some(entry_location(hint.node, 1, i));
        }
        let Some(mut idx) = self.root(asid) else { return Some(u64::MAX) };
        // Upper levels are few and hot in the host cache; the leaf is what misses.
        for level in (2..=self.levels).rev() {
            let i = index(va, level);
            let e = self.entry(idx, i);
            if e & P_PRESENT == 0 {
                return Some(u64::MAX);
            }
            if e & P_LEAF != 0 {
                return Some(entry_location(idx, level, i));
            }
            idx = (e >> 12) as u32;
        }
        let i = index(va, 1);
        self.entries.prefetch(idx, i);
        self.leaf_hints[slot].set(LeafHint { region, node: idx, generation: self.meta[idx as usize].generation });
        Some(entry_location(idx, 1, i))
    }

    #[inline]
    fn phys_at(&self, _asid: Asid, loc: u64, va: u64) -> Option<u64> {
        if loc == u64::MAX {
            return None;
        }
        // The node may have been freed and reused since: its entry is still a
        // readable u64 (the arena never shrinks), and a wrong answer only misplaces a
        // hint.
        let (idx, level, i) = ((loc >> 12) as u32, ((loc >> 9) & 7) as u8, (loc & 511) as usize);
        let e = self.entry(idx, i);
        (e & P_PRESENT != 0 && e & P_LEAF != 0).then(|| leaf_translation(e, level).phys(va))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::assoc::Replacement;
    use crate::pt::WalkCaches;

    fn setup() -> (RadixPageTable, BuddyAllocator) {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = RadixPageTable::new(4).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        (pt, mem)
    }

    /// A look-ahead through a leaf hint locates the entry a walk reads: `phys_at` of
    /// its location is the translation, for pages of two address spaces whose hints
    /// share slots, before and after other regions are unmapped and their leaf nodes
    /// reused. (A hint left by an unmapped region may point anywhere; only a prefetch
    /// is then wasted, and it must not fail.)
    #[test]
    fn leaf_hints_locate_the_walked_entry() {
        use rand::{Rng, SeedableRng};
        let (mut pt, mut mem) = setup();
        pt.create_space(&mut mem, 1).unwrap();
        // Directed: region A's leaf node is freed and goes to region B; A gets another.
        let (a, b) = (0x7f00_0000_0000u64, 0x7f00_4000_0000u64);
        let frame = |mem: &mut BuddyAllocator| mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
        let f = frame(&mut mem);
        pt.map(&mut mem, 0, a, f, PageSize::K4, Perms::RW_USER).unwrap();
        pt.prefetch(0, a);
        pt.unmap(&mut mem, 0, a).unwrap();
        let (fb, fa) = (frame(&mut mem), frame(&mut mem));
        pt.map(&mut mem, 0, b, fb, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, a, fa, PageSize::K4, Perms::RW_USER).unwrap();
        assert_eq!(pt.prefetch_at(0, a).and_then(|l| pt.phys_at(0, l, a)), Some(fa), "a hint outlived its node");
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        // Regions 2^33 bytes apart share a hint slot (4,096 slots of 2 MiB).
        let va_of = |r: u64, p: u64| 0x7f00_0000_0000u64 + (r << 33) + (rng_page(p) << 12);
        fn rng_page(p: u64) -> u64 {
            p % 512
        }
        let mut mapped: Vec<(Asid, u64)> = Vec::new();
        for step in 0..4000u64 {
            let asid = rng.gen_range(0..2u16);
            let va = va_of(rng.gen_range(0..4u64), rng.gen_range(0..2048u64));
            match rng.gen_range(0..10) {
                0..=3 if pt.translate(asid, va).is_none() => {
                    let pa = mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
                    pt.map(&mut mem, asid, va, pa, PageSize::K4, Perms::RW_USER).unwrap();
                    mapped.push((asid, va));
                }
                4 if !mapped.is_empty() => {
                    // Empty the region of a mapped page: its leaf node is freed, and
                    // its number goes to the next region that needs one.
                    let (a, v) = mapped[rng.gen_range(0..mapped.len())];
                    let same = |&(b, w): &(Asid, u64)| b == a && w >> 21 == v >> 21;
                    for &(b, w) in mapped.iter().filter(|x| same(x)) {
                        pt.unmap(&mut mem, b, w).unwrap();
                    }
                    mapped.retain(|x| !same(x));
                    pt.prefetch(a, v);
                }
                _ => {
                    let loc = pt.prefetch_at(asid, va);
                    let again = pt.prefetch_at(asid, va);
                    if let Some(t) = pt.translate(asid, va) {
                        assert_eq!(again.and_then(|l| pt.phys_at(asid, l, va)), Some(t.phys(va)), "step {step}");
                        assert_eq!(loc, again, "step {step}");
                    }
                }
            }
        }
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

    /// `full_path` + `replay` makes exactly `walk`'s references, steps and PWC probes
    /// and fills, on random maps (4K, 2M, 1G, and TPS sizes with pointer aliases),
    /// unmaps and protects, with walks of mapped and unmapped addresses and of a space
    /// with no table.
    #[test]
    fn split_walk_is_the_walk() {
        use rand::{Rng, SeedableRng};
        for tps in [false, true] {
            let (mut pt, mut mem) = if tps { tailored(AliasPtes::Pointer) } else { setup() };
            let sizes: Vec<PageSize> = pt.page_sizes().iter().copied().filter(|s| *s <= PageSize::M2).collect();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
            let new_pwc = || PageWalkCache::new(&[4, 4, 2], 2, Replacement::Lru, 0, 3).unwrap();
            let (mut fused, mut split) = (new_pwc(), new_pwc());
            let (mut a, mut b) = (WalkPath::new(), WalkPath::new());
            let span = 8u64 << 30;
            for i in 0..20_000 {
                let va = 0x40_0000_0000 + rng.gen_range(0..span);
                match rng.gen_range(0..10) {
                    0 => {
                        let size = sizes[rng.gen_range(0..sizes.len())];
                        let base = size.align_down(va);
                        if (0..size.bytes()).step_by(4096).all(|o| pt.translate(0, base + o).is_none()) {
                            if let Ok(pa) = mem.alloc(size, FrameUse::Data) {
                                pt.map(&mut mem, 0, base, pa, size, Perms::RW_USER).unwrap();
                            }
                        }
                    }
                    1 => {
                        pt.unmap(&mut mem, 0, va);
                        // As the OS does on unmap: drop the space's PWC entries.
                        fused.invalidate(0, va);
                        split.invalidate(0, va);
                    }
                    2 => {
                        pt.protect(0, va, Perms::R);
                    }
                    _ => {}
                }
                a.clear();
                b.clear();
                let asid = if i % 97 == 0 { 5 } else { 0 };
                let x = pt.walk(asid, va, &mut fused, &mut a);
                let mut full = RadixPath::default();
                let f = RadixSplit.full_path(&mut pt, asid, va, &mut PageWalkCache::none(), |p| full = p);
                RadixSplit.replay(&full, asid, va, &mut split, &mut b);
                assert_eq!(f, x, "{va:#x}");
                assert_eq!((a.refs(), a.steps()), (b.refs(), b.steps()), "{va:#x}");
            }
            assert_eq!(fused.counters(), split.counters());
            assert!(fused.counters().iter().any(|(_, c)| c.hits > 100), "{:?}", fused.counters());
        }
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
        let e = pt.map(&mut mem, 0, 0, 0, PageSize::from_shift(13).unwrap(), Perms::RW_USER).unwrap_err();
        assert!(e.to_string().contains("os.page_size"));
        let mut pt5 = RadixPageTable::new(5).unwrap();
        pt5.create_space(&mut mem, 0).unwrap();
        assert!(pt5.map(&mut mem, 0, 1 << 50, 0x2000, PageSize::K4, Perms::RW_USER).is_ok());
        assert!(RadixPageTable::new(3).is_err());
    }

    fn tailored(alias: AliasPtes) -> (RadixPageTable, BuddyAllocator) {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = RadixPageTable::new(4).unwrap().with_tailored(alias);
        pt.create_space(&mut mem, 0).unwrap();
        (pt, mem)
    }

    #[test]
    fn tailored_sizes_are_every_power_of_two_to_1g() {
        let (pt, _) = tailored(AliasPtes::Pointer);
        assert_eq!(pt.page_sizes().len(), 19);
        assert_eq!(pt.page_sizes()[1].bytes(), 8 << 10);
        assert_eq!(*pt.page_sizes().last().unwrap(), PageSize::G1);
    }

    #[test]
    fn tailored_entry_encodes_size_in_unused_pfn_bits() {
        // TPS Fig. 5: a 32K page at level 1 (k = 3) sets s0 and s1, leaves s2 clear.
        let e = tailored_entry(0x1234_8000, Perms::RW_USER, 1, 3);
        assert_eq!((e >> 12) & 0b111, 0b011);
        assert_eq!(tailored_slots_log2(e, 1), 3);
        let t = leaf_translation(e, 1);
        assert_eq!((t.pa, t.size.bytes(), t.perms), (0x1234_8000, 32 << 10, Perms::RW_USER));
        // A 4M page at level 2 (k = 1): T set, no size bits.
        let e = tailored_entry(0x40_0000, Perms::RW_USER, 2, 1);
        assert_eq!(leaf_translation(e, 2).size.bytes(), 4 << 20);
    }

    #[test]
    fn pointer_alias_costs_exactly_one_extra_walk_reference() {
        let (mut pt, mut mem) = tailored(AliasPtes::Pointer);
        let k32 = PageSize::from_shift(15).unwrap();
        pt.map(&mut mem, 0, 0x40_8000, 0x100_8000, k32, Perms::RW_USER).unwrap();
        let mut pwc = PageWalkCache::none();
        let mut path = WalkPath::new();
        // The first 4K of the page reads the true PTE directly.
        let t = pt.walk(0, 0x40_8010, &mut pwc, &mut path).unwrap();
        assert_eq!((t.size, t.phys(0x40_8010)), (k32, 0x100_8010));
        assert_eq!(path.refs().len(), 4);
        // Its third 4K reads an alias, then the true PTE at the aligned index.
        path.clear();
        let t = pt.walk(0, 0x40_a010, &mut pwc, &mut path).unwrap();
        assert_eq!(t.phys(0x40_a010), 0x100_a010);
        assert_eq!(path.refs().len(), 5);
        assert_eq!(path.steps(), 5);
        let leaf = path.refs()[3].pa;
        assert_eq!(path.refs()[4].pa, leaf - 2 * PTE_BYTES, "true PTE two slots before the alias");
        // Unmap through an alias removes the whole page.
        assert_eq!(pt.unmap(&mut mem, 0, 0x40_f000).unwrap().size, k32);
        assert!(pt.translate(0, 0x40_8000).is_none());
        assert_eq!(pt.footprint().mapped_pages, 0);
    }

    #[test]
    fn copy_aliases_need_no_extra_reference_and_follow_protect() {
        let (mut pt, mut mem) = tailored(AliasPtes::Copy);
        let m4 = PageSize::from_shift(22).unwrap();
        pt.map(&mut mem, 0, 0x80_0000, 0x80_0000, m4, Perms::RW_USER).unwrap();
        let mut pwc = PageWalkCache::none();
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0xa0_0000, &mut pwc, &mut path).unwrap();
        assert_eq!((t.size, t.phys(0xa0_0000)), (m4, 0xa0_0000));
        assert_eq!(path.refs().len(), 3, "a 4M page ends the walk at level 2");
        assert!(pt.protect(0, 0xa0_0000, Perms::R));
        path.clear();
        assert_eq!(pt.walk(0, 0xa0_0000, &mut pwc, &mut path).unwrap().perms, Perms::R);
        assert_eq!(pt.translate(0, 0x80_0000).unwrap().perms, Perms::R);
        // Overlaps with either half are refused.
        assert!(pt.map(&mut mem, 0, 0xa0_0000, 0x20_0000, PageSize::M2, Perms::R).is_err());
        assert!(pt.map(&mut mem, 0, 0xa0_0000, 0x1000, PageSize::K4, Perms::R).is_err());
    }

    #[test]
    fn plain_radix_refuses_tailored_sizes_naming_the_key() {
        let (mut pt, mut mem) = setup();
        let e = pt.map(&mut mem, 0, 0x8000, 0x8000, PageSize::from_shift(15).unwrap(), Perms::R).unwrap_err();
        assert!(e.to_string().contains("tailored"), "{e}");
    }
}
