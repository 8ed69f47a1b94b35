//! Elphinstone's multilevel page table for the MIPS R4x00 (thesis §6.1.1, Figs. 6.1 and
//! 6.2): the MPT his measurements use, as opposed to the x86 radix table (`radix.rs`).
//!
//! Six levels, indexed by VA bits 13–20 (leaf), 21–30, 31–40, 41–50, 51–60 and 61–63
//! (root). Leaf nodes are 4 KiB arrays of 256 PTE *pairs* of 16 bytes — the even and odd
//! 4 KiB page of an 8 KiB pair, as one R4x00 TLB entry maps them; VA bit 12 picks the
//! half. Internal nodes are 4 KiB arrays of 1024 pointers shortened to 32 bits. The root
//! is 64 bytes (the thesis: "4 bits remaining to index the root node, which is 64 bytes
//! in size"; its bit selections leave 3, so 8 of its 16 slots are used), one per address
//! space, carved from slab frames. A refill reads one entry per level: six references
//! in six sequential steps.
//!
//! Pages are 4 KiB only: the R4x00 has larger page pairs, but Elphinstone's MPT maps 4
//! KiB pages, and a config asking for another size is an error. Nodes left empty by an
//! unmap are freed at once (a leaf when its last pair empties, then every ancestor left
//! without children), so the table's size follows the mapped pages.

use super::arena::NodeArena;
use super::slab::Slab;
use super::{FastPaths, NoSplit, NoWalkCaches, PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::{BuddyAllocator, FrameUse};

/// Levels, leaf = 1, root = 6.
pub(crate) const LEVELS: u8 = 6;
/// Bytes of an internal entry (a shortened pointer) and of a PTE pair.
const POINTER_BYTES: u64 = 4;
const PAIR_BYTES: u64 = 16;
const PTE_BYTES: u64 = 8;
const ROOT_BYTES: u64 = 64;
/// Pointers per internal node and PTEs (two per pair) per leaf node.
const POINTERS: usize = 1024;
const LEAF_PTES: usize = 512;
/// No child (roots hold `u32` children; node entries hold `child + 1`, 0 = none, so a
/// freshly zeroed node is empty).
const NONE: u32 = u32::MAX;
/// Host PTE encoding: bit 0 present, bits 1–4 permissions, bits 12.. the frame.
const PRESENT: u64 = 1;

/// Lowest VA bit of the index at `level` and its width (Fig. 6.1).
#[inline(always)]
fn index_bits(level: u8) -> (u32, u32) {
    match level {
        1 => (13, 8),
        6 => (61, 3),
        l => (21 + 10 * (l as u32 - 2), 10),
    }
}

#[inline(always)]
fn index(va: u64, level: u8) -> usize {
    let (lo, width) = index_bits(level);
    ((va >> lo) & ((1 << width) - 1)) as usize
}

/// The PTE of `va` within its leaf: pair (bits 13–20) and half (bit 12).
#[inline(always)]
fn pte_index(va: u64) -> usize {
    ((va >> 12) & (LEAF_PTES as u64 - 1)) as usize
}

/// A node's simulated frame and how many of its entries are in use.
#[derive(Clone, Copy, Default)]
struct NodeMeta {
    pa: u64,
    live: u32,
}

/// Nodes of one shape: entries in a [`NodeArena`], frame and use count beside them.
struct Nodes<const N: usize> {
    entries: NodeArena<N>,
    meta: Vec<NodeMeta>,
}

impl<const N: usize> Nodes<N> {
    fn new() -> Self {
        Nodes { entries: NodeArena::new(), meta: Vec::new() }
    }

    /// A zeroed node in a fresh 4 KiB frame of simulated memory.
    fn alloc(&mut self, mem: &mut BuddyAllocator) -> Result<u32> {
        let pa = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
        let i = self.entries.alloc();
        if self.meta.len() <= i as usize {
            self.meta.resize(i as usize + 1, NodeMeta::default());
        }
        self.meta[i as usize] = NodeMeta { pa, live: 0 };
        Ok(i)
    }

    fn free(&mut self, mem: &mut BuddyAllocator, i: u32) {
        mem.free(self.meta[i as usize].pa, PageSize::K4, FrameUse::PageTable);
        self.entries.free(i);
    }
}

struct Root {
    pa: u64,
    children: [u32; 8],
}

pub struct MultilevelPageTable {
    /// Root per ASID (index = ASID).
    roots: Vec<Option<Root>>,
    /// Levels 2–5: 1024 pointers per node (`child + 1`).
    internal: Nodes<POINTERS>,
    /// Level 1: 256 pairs = 512 PTEs per node.
    leaves: Nodes<LEAF_PTES>,
    root_slab: Slab,
    /// Live internal nodes per level (index 2–5), and live leaves.
    live_internal: [u64; LEVELS as usize + 1],
    live_leaves: u64,
    mapped: u64,
}

impl Default for MultilevelPageTable {
    fn default() -> Self {
        Self::new()
    }
}

impl MultilevelPageTable {
    pub fn new() -> MultilevelPageTable {
        MultilevelPageTable {
            roots: Vec::new(),
            internal: Nodes::new(),
            leaves: Nodes::new(),
            root_slab: Slab::new(ROOT_BYTES),
            live_internal: [0; LEVELS as usize + 1],
            live_leaves: 0,
            mapped: 0,
        }
    }

    fn root(&self, asid: Asid) -> Option<&Root> {
        self.roots.get(asid as usize)?.as_ref()
    }

    /// The child pointer at `level` (6 = root) for `va`, from node `node` (ignored at
    /// the root).
    #[inline(always)]
    fn child(&self, root: &Root, node: u32, level: u8, va: u64) -> u32 {
        if level == LEVELS {
            root.children[index(va, level)]
        } else {
            (self.internal.entries.get(node)[index(va, level)] as u32).wrapping_sub(1)
        }
    }

    /// Point entry `index(va, level)` of the node at `level` (`node`, or the root) at
    /// `child` (NONE to clear it).
    fn set_child(&mut self, asid: Asid, node: u32, level: u8, va: u64, child: u32) {
        let i = index(va, level);
        if level == LEVELS {
            self.roots[asid as usize].as_mut().expect("live address space").children[i] = child;
        } else {
            self.internal.entries.get_mut(node)[i] = child.wrapping_add(1) as u64;
        }
    }

    /// The leaf holding `va`'s PTE, if every level down to it is present.
    fn leaf_of(&self, asid: Asid, va: u64) -> Option<u32> {
        let root = self.root(asid)?;
        let mut node = NONE;
        for level in (2..=LEVELS).rev() {
            node = self.child(root, node, level, va);
            if node == NONE {
                return None;
            }
        }
        Some(node)
    }

    fn pte(&self, asid: Asid, va: u64) -> Option<(u32, u64)> {
        let leaf = self.leaf_of(asid, va)?;
        let e = self.leaves.entries.get(leaf)[pte_index(va)];
        (e & PRESENT != 0).then_some((leaf, e))
    }

    /// Free the subtree under `node` at `level` (for `destroy_space`).
    fn free_subtree(&mut self, mem: &mut BuddyAllocator, node: u32, level: u8) {
        if level == 1 {
            self.mapped -= self.leaves.meta[node as usize].live as u64;
            self.leaves.free(mem, node);
            self.live_leaves -= 1;
            return;
        }
        for i in 0..POINTERS {
            let c = (self.internal.entries.get(node)[i] as u32).wrapping_sub(1);
            if c != NONE {
                self.free_subtree(mem, c, level - 1);
            }
        }
        self.internal.free(mem, node);
        self.live_internal[level as usize] -= 1;
    }

    fn translation(e: u64) -> Translation {
        Translation { pa: e & !0xfff, size: PageSize::K4, perms: Perms::from_bits((e >> 1) as u8 & 0xf) }
    }
}

impl PageTable for MultilevelPageTable {
    type Caches = NoWalkCaches;

    fn kind(&self) -> &'static str {
        "mpt"
    }

    fn page_sizes(&self) -> &[PageSize] {
        &[PageSize::K4]
    }

    /// Leaves are arrays of 16-byte PTE pairs (§6.1.1).
    fn holds_pte_pairs(&self) -> bool {
        true
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        if self.roots.len() <= asid as usize {
            self.roots.resize_with(asid as usize + 1, || None);
        }
        if self.roots[asid as usize].is_none() {
            let pa = self.root_slab.alloc(mem)?;
            self.roots[asid as usize] = Some(Root { pa, children: [NONE; 8] });
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let Some(root) = self.roots.get_mut(asid as usize).and_then(|r| r.take()) else { return };
        for c in root.children {
            if c != NONE {
                self.free_subtree(mem, c, LEVELS - 1);
            }
        }
        self.root_slab.free(mem, root.pa);
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        if size != PageSize::K4 {
            return Err(Error::config("os.page_size", format!("Elphinstone's MPT (`mpt`) maps 4K pages only, not {size}")));
        }
        if self.root(asid).is_none() {
            self.create_space(mem, asid)?;
        }
        // Down from the root, allocating missing nodes; `parent` is the node holding
        // the pointer just followed (NONE at the root).
        let mut parent = NONE;
        for level in (1..LEVELS).rev() {
            let root = self.roots[asid as usize].as_ref().expect("created above");
            let mut node = self.child(root, parent, level + 1, va);
            if node == NONE {
                node = if level == 1 {
                    self.live_leaves += 1;
                    self.leaves.alloc(mem)?
                } else {
                    self.live_internal[level as usize] += 1;
                    self.internal.alloc(mem)?
                };
                self.set_child(asid, parent, level + 1, va, node);
                if level + 1 < LEVELS {
                    self.internal.meta[parent as usize].live += 1;
                }
            }
            parent = node;
        }
        let slot = &mut self.leaves.entries.get_mut(parent)[pte_index(va)];
        if *slot & PRESENT == 0 {
            self.leaves.meta[parent as usize].live += 1;
            self.mapped += 1;
        }
        *slot = (pa & !0xfff) | ((perms.bits() as u64) << 1) | PRESENT;
        Ok(())
    }

    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        // The path: the node at each level 5..1.
        let root = self.root(asid)?;
        let mut path = [NONE; LEVELS as usize];
        let mut node = NONE;
        for level in (1..LEVELS).rev() {
            node = self.child(root, node, level + 1, va);
            if node == NONE {
                return None;
            }
            path[level as usize] = node;
        }
        let e = self.leaves.entries.get(node)[pte_index(va)];
        if e & PRESENT == 0 {
            return None;
        }
        self.leaves.entries.get_mut(node)[pte_index(va)] = 0;
        self.leaves.meta[node as usize].live -= 1;
        self.mapped -= 1;
        // Free the nodes left empty, leaf first, and clear the pointer to each.
        if self.leaves.meta[node as usize].live == 0 {
            self.leaves.free(mem, node);
            self.live_leaves -= 1;
            for level in 2..=LEVELS {
                let n = if level == LEVELS { NONE } else { path[level as usize] };
                self.set_child(asid, n, level, va, NONE);
                if level == LEVELS {
                    break;
                }
                let m = &mut self.internal.meta[n as usize];
                m.live -= 1;
                if m.live > 0 {
                    break;
                }
                self.internal.free(mem, n);
                self.live_internal[level as usize] -= 1;
            }
        }
        Some(Self::translation(e))
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Some((leaf, e)) = self.pte(asid, va) else { return false };
        self.leaves.entries.get_mut(leaf)[pte_index(va)] = (e & !(0xf << 1)) | ((perms.bits() as u64) << 1);
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.pte(asid, va).map(|(_, e)| Self::translation(e))
    }

    fn walk(&mut self, asid: Asid, va: u64, _: &mut NoWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        let root = self.root(asid)?;
        // Root, then levels 5..2: one 4-byte pointer read per level.
        path.push_step(root.pa + index(va, LEVELS) as u64 * POINTER_BYTES, LEVELS);
        let mut node = root.children[index(va, LEVELS)];
        for level in (2..LEVELS).rev() {
            if node == NONE {
                return None;
            }
            path.push_step(self.internal.meta[node as usize].pa + index(va, level) as u64 * POINTER_BYTES, level);
            node = self.child(root, node, level, va);
        }
        if node == NONE {
            return None;
        }
        // The leaf: the pair, then the half VA bit 12 selects.
        let i = pte_index(va);
        path.push_step(self.leaves.meta[node as usize].pa + (i as u64 >> 1) * PAIR_BYTES + (i as u64 & 1) * PTE_BYTES, 1);
        let e = self.leaves.entries.get(node)[i];
        (e & PRESENT != 0).then(|| Self::translation(e))
    }

    fn footprint(&self) -> PtFootprint {
        let internal: u64 = self.live_internal.iter().sum();
        PtFootprint {
            bytes: (internal + self.live_leaves) * 4096 + self.root_slab.bytes(),
            nodes: internal + self.live_leaves + self.roots.iter().flatten().count() as u64,
            mapped_pages: self.mapped,
        }
    }

    fn details(&self) -> serde_json::Value {
        let per_level: serde_json::Map<String, serde_json::Value> = (1..=LEVELS)
            .map(|l| {
                let n = match l {
                    1 => self.live_leaves,
                    LEVELS => self.roots.iter().flatten().count() as u64,
                    l => self.live_internal[l as usize],
                };
                (format!("level{l}"), n.into())
            })
            .collect();
        serde_json::json!({
            "levels": LEVELS,
            "nodes_per_level": per_level,
            "root_bytes": ROOT_BYTES,
            "pair_bytes": PAIR_BYTES,
        })
    }
}

impl FastPaths for MultilevelPageTable {
    type Split = NoSplit;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> BuddyAllocator {
        BuddyAllocator::new(1 << 30).unwrap()
    }

    #[test]
    fn a_refill_reads_one_entry_per_level_at_the_thesis_offsets() {
        let mut m = mem();
        let mut pt = MultilevelPageTable::new();
        let va = 0x7f12_3456_7000u64 | 1 << 12;
        pt.map(&mut m, 0, va, 0x9000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let t = pt.walk(0, va, &mut NoWalkCaches, &mut path).unwrap();
        assert_eq!(t.pa, 0x9000);
        assert_eq!(path.refs().len(), 6);
        assert_eq!(path.steps(), 6);
        // The leaf reference: pair (VA bits 13-20) times 16, plus 8 for the odd half.
        let leaf = path.refs()[5].pa;
        assert_eq!(leaf & 0xfff, ((va >> 13) & 0xff) * 16 + 8);
        // Pointers are 4 bytes: the level-2 entry sits at 4 x (VA bits 21-30).
        assert_eq!(path.refs()[4].pa & 0xfff, ((va >> 21) & 0x3ff) * 4);
        // Root, 4 internal nodes, a leaf: 5 frames and one 4 KiB slab frame for roots.
        assert_eq!(pt.footprint().bytes, 6 * 4096);
        assert_eq!(pt.footprint().nodes, 6);
    }

    #[test]
    fn unmapping_the_last_page_frees_every_node_below_the_root() {
        let mut m = mem();
        let mut pt = MultilevelPageTable::new();
        let used = m.counters().frames_used;
        pt.map(&mut m, 3, 0x1000, 0x5000, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut m, 3, 0x40_0000_0000, 0x6000, PageSize::K4, Perms::RW_USER).unwrap();
        // VA bits 31-40 differ: root and levels 5-3 shared, levels 2 and 1 apart.
        assert_eq!(pt.footprint().nodes, 1 + 3 + 2 * 2);
        assert_eq!(pt.unmap(&mut m, 3, 0x1000).unwrap().pa, 0x5000);
        assert_eq!(pt.unmap(&mut m, 3, 0x1000), None);
        assert_eq!(pt.footprint().nodes, 1 + 5);
        pt.unmap(&mut m, 3, 0x40_0000_0000).unwrap();
        assert_eq!(pt.footprint().nodes, 1);
        assert_eq!(pt.footprint().mapped_pages, 0);
        pt.destroy_space(&mut m, 3);
        assert_eq!(m.counters().frames_used, used, "every page-table frame went back");
    }

    #[test]
    fn other_page_sizes_are_a_clear_error() {
        let mut pt = MultilevelPageTable::new();
        let e = pt.map(&mut mem(), 0, 0x20_0000, 0x20_0000, PageSize::M2, Perms::RW_USER).unwrap_err();
        assert!(e.to_string().contains("4K pages only"), "{e}");
    }
}
