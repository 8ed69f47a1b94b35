//! The OS's own record of one address space's mapped pages — what Linux keeps in its
//! page tables and `struct page`s, independent of the page-table organisation under
//! study (which is the hardware's view of the same mappings).
//!
//! A 512-ary radix tree over the virtual address: six levels of 9 bits above the 4 KiB
//! offset cover all 64 bits. A page of 2^s bytes sits at level (s − 12) / 9 and fills
//! 2^((s − 12) mod 9) consecutive slots there (a 16K page fills 4 leaf slots, an 8M page
//! 4 level-1 slots). Every fault looks a page up, so a lookup is one descent of at most
//! six nodes; nodes count their occupied slots so range scans skip empty subtrees and
//! emptied nodes are freed. (A BTreeMap keyed by base address cost ~3 µs per fault at a
//! million pages: each of its descents misses the host cache several times.)

use super::address_space::Mapping;
use crate::addr::PageSize;
use crate::host::{HugeVec, Zeroable};

const BITS: u32 = 9;
const FANOUT: usize = 1 << BITS;
/// Levels 0 (4 KiB slots) to 5 (slots of 2^57 bytes; only 128 are reachable).
const TOP: u32 = 5;

/// What a slot holds.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Empty,
    Child(u32),
    /// One replica of a page (pages larger than a slot fill several).
    Page(Mapping),
}

/// A slot as stored: 16 bytes (an enum of `Mapping` takes 24), so a million-page
/// index is 16 MiB of leaves and more of it stays in the host's cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PackedSlot {
    /// A page's frame; unused otherwise.
    pa: u64,
    /// A child's node; a page's object + 1 (0: none).
    aux: u32,
    kind: u8,
    shift: u8,
    perms: u8,
}

const KIND_EMPTY: u8 = 0;
const KIND_CHILD: u8 = 1;
const KIND_PAGE: u8 = 2;

// SAFETY: all-zero bytes are PackedSlot::EMPTY.
unsafe impl Zeroable for PackedSlot {}

impl PackedSlot {
    const EMPTY: PackedSlot = PackedSlot { pa: 0, aux: 0, kind: KIND_EMPTY, shift: 0, perms: 0 };

    #[inline(always)]
    fn unpack(self) -> Slot {
        match self.kind {
            KIND_EMPTY => Slot::Empty,
            KIND_CHILD => Slot::Child(self.aux),
            _ => Slot::Page(Mapping {
                pa: self.pa,
                size: PageSize::from_valid_shift(self.shift),
                perms: crate::addr::Perms::from_bits(self.perms),
                object: self.aux.checked_sub(1),
            }),
        }
    }
}

impl Slot {
    #[inline(always)]
    fn pack(self) -> PackedSlot {
        match self {
            Slot::Empty => PackedSlot::EMPTY,
            Slot::Child(c) => PackedSlot { aux: c, kind: KIND_CHILD, ..PackedSlot::EMPTY },
            Slot::Page(m) => PackedSlot {
                pa: m.pa,
                aux: m.object.map_or(0, |o| o.checked_add(1).expect("fewer than 2^32 - 1 shared objects")),
                kind: KIND_PAGE,
                shift: m.size.shift(),
                perms: m.perms.bits(),
            },
        }
    }
}

/// Shift of the address bits a slot of `level` covers.
#[inline(always)]
const fn slot_shift(level: u32) -> u32 {
    12 + BITS * level
}

#[inline(always)]
fn index(va: u64, level: u32) -> usize {
    ((va >> slot_shift(level)) as usize) & (FANOUT - 1)
}

/// The level a page of `size` sits at, and how many slots it fills there.
#[inline(always)]
fn placement(size: PageSize) -> (u32, usize) {
    let s = size.shift() as u32 - 12;
    (s / BITS, 1 << (s % BITS))
}

#[derive(Clone, Debug)]
pub struct PageIndex {
    /// Node n's slots are `slots[n * FANOUT..][..FANOUT]`; node 0 is the root. A
    /// million pages are 16 MiB of slots, probed at random: in host huge pages.
    slots: HugeVec<PackedSlot>,
    /// Occupied slots per node.
    used: Vec<u16>,
    free_nodes: Vec<u32>,
    /// Pages mapped (a page filling several slots counts once).
    len: usize,
}

impl Default for PageIndex {
    fn default() -> Self {
        let mut slots = HugeVec::new();
        slots.extend_zeroed(FANOUT);
        PageIndex { slots, used: vec![0], free_nodes: Vec::new(), len: 0 }
    }
}

impl PageIndex {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn slot(&self, node: u32, i: usize) -> Slot {
        self.slots[node as usize * FANOUT + i].unpack()
    }

    fn alloc_node(&mut self) -> u32 {
        match self.free_nodes.pop() {
            Some(n) => n,
            None => {
                let n = self.used.len() as u32;
                self.slots.extend_zeroed(FANOUT);
                self.used.push(0);
                n
            }
        }
    }

    /// Ask the host to bring in the leaf slot for `va` (a hint for a fault that is
    /// coming: its lookup and insert then find the slot in the host cache). Stops at a
    /// missing node or a larger page; changes nothing.
    #[inline]
    pub(crate) fn prefetch(&self, va: u64) {
        let mut node = 0u32;
        for level in (1..=TOP).rev() {
            match self.slot(node, index(va, level)) {
                Slot::Child(c) => node = c,
                _ => return,
            }
        }
        crate::host::prefetch(&self.slots[node as usize * FANOUT + index(va, 0)]);
    }

    /// The page covering `va`: its base address and mapping.
    #[inline]
    pub fn get(&self, va: u64) -> Option<(u64, Mapping)> {
        let mut node = 0u32;
        for level in (0..=TOP).rev() {
            match self.slot(node, index(va, level)) {
                Slot::Empty => return None,
                Slot::Child(c) => node = c,
                Slot::Page(m) => return Some((m.size.align_down(va), m)),
            }
        }
        None
    }

    /// Record a page at `base` (aligned to `m.size`). The caller guarantees that no
    /// recorded page overlaps it (`any_in` is false).
    pub(crate) fn insert(&mut self, base: u64, m: Mapping) {
        debug_assert!(m.size.is_aligned(base));
        let (level, n) = placement(m.size);
        let mut node = 0u32;
        for l in ((level + 1)..=TOP).rev() {
            let i = index(base, l);
            node = match self.slot(node, i) {
                Slot::Child(c) => c,
                Slot::Empty => {
                    let c = self.alloc_node();
                    self.slots[node as usize * FANOUT + i] = Slot::Child(c).pack();
                    self.used[node as usize] += 1;
                    c
                }
                Slot::Page(_) => unreachable!("insert over a larger page at {base:#x}"),
            };
        }
        let first = index(base, level);
        let page = Slot::Page(m).pack();
        for s in &mut self.slots[node as usize * FANOUT + first..][..n] {
            debug_assert!(s.kind == KIND_EMPTY, "insert over a mapped page at {base:#x}");
            *s = page;
        }
        self.used[node as usize] += n as u16;
        self.len += 1;
    }

    /// Nodes on the path from the root to the node holding the page covering `va`,
    /// root first, each with the slot index taken in it; `None` if no page covers `va`.
    fn path_to(&self, va: u64, path: &mut [(u32, usize); TOP as usize + 1]) -> Option<(usize, Mapping)> {
        let mut node = 0u32;
        for (d, level) in (0..=TOP).rev().enumerate() {
            let i = index(va, level);
            path[d] = (node, i);
            match self.slot(node, i) {
                Slot::Empty => return None,
                Slot::Child(c) => node = c,
                Slot::Page(m) => return Some((d, m)),
            }
        }
        None
    }

    /// Remove the page whose base is `base`; frees nodes left empty.
    pub(crate) fn remove(&mut self, base: u64) -> Option<Mapping> {
        let mut path = [(0u32, 0usize); TOP as usize + 1];
        let (depth, m) = self.path_to(base, &mut path)?;
        if m.size.align_down(base) != base {
            return None;
        }
        let (_, n) = placement(m.size);
        let (node, i) = path[depth];
        self.slots[node as usize * FANOUT + i..][..n].fill(PackedSlot::EMPTY);
        self.used[node as usize] -= n as u16;
        self.len -= 1;
        // Free emptied nodes bottom-up (never the root).
        for d in (1..=depth).rev() {
            let (node, _) = path[d];
            if self.used[node as usize] != 0 {
                break;
            }
            self.free_nodes.push(node);
            let (parent, pi) = path[d - 1];
            self.slots[parent as usize * FANOUT + pi] = PackedSlot::EMPTY;
            self.used[parent as usize] -= 1;
        }
        Some(m)
    }

    /// Replace the mapping of the page whose base is `base` (same size), in every slot it
    /// fills. Returns false if no page has that base.
    pub(crate) fn update(&mut self, base: u64, f: impl FnOnce(&mut Mapping)) -> bool {
        let mut path = [(0u32, 0usize); TOP as usize + 1];
        let Some((depth, mut m)) = self.path_to(base, &mut path) else { return false };
        if m.size.align_down(base) != base {
            return false;
        }
        let size = m.size;
        f(&mut m);
        debug_assert_eq!(m.size, size, "update must keep the page size");
        let (node, i) = path[depth];
        let (_, n) = placement(size);
        self.slots[node as usize * FANOUT + i..][..n].fill(Slot::Page(m).pack());
        true
    }

    /// Whether any page overlaps [start, end).
    pub(crate) fn any_in(&self, start: u64, end: u64) -> bool {
        if start >= end {
            return false;
        }
        if end - start == 1 << 12 && start.trailing_zeros() >= 12 {
            // One base page (every 4K demand fault asks this): a page overlaps it
            // only by covering it.
            return self.get(start).is_some();
        }
        // Descend while the range lies inside one slot (every demand fault asks this of
        // one aligned page): a page there overlaps it, an empty slot rules it out, and a
        // child that the range covers whole holds a page (emptied nodes are freed).
        let mut node = 0u32;
        for level in (0..=TOP).rev() {
            let shift = slot_shift(level);
            if start >> shift != (end - 1) >> shift {
                // The range spans several slots of this node: scan them.
                let node_base = if shift + BITS >= 64 { 0 } else { start & !((1u64 << (shift + BITS)) - 1) };
                let mut found = false;
                self.scan(node, level, node_base, start, end, &mut |_, _| {
                    found = true;
                    false
                });
                return found;
            }
            match self.slot(node, index(start, level)) {
                Slot::Empty => return false,
                Slot::Page(_) => return true,
                Slot::Child(_) if start.trailing_zeros() >= shift && end - start == 1u64 << shift => return true,
                Slot::Child(c) => node = c,
            }
        }
        unreachable!("level-0 slots hold no children")
    }

    /// Base addresses of the pages overlapping [start, end), ascending.
    pub fn bases_in(&self, start: u64, end: u64) -> Vec<u64> {
        let mut v = Vec::new();
        self.scan(0, TOP, 0, start, end, &mut |b, _| {
            v.push(b);
            true
        });
        v
    }

    /// Visit the pages overlapping [start, end) in address order, each once, as (base,
    /// mapping); `visit` returns false to stop. Allocates nothing.
    pub(crate) fn for_each_in(&self, start: u64, end: u64, mut visit: impl FnMut(u64, Mapping) -> bool) {
        self.scan(0, TOP, 0, start, end, &mut visit);
    }

    /// Visit the pages overlapping [start, end) in address order, each once, under the
    /// node `node` of `level` that covers addresses from `node_base`. `visit` returns
    /// false to stop; so does `scan`.
    fn scan(&self, node: u32, level: u32, node_base: u64, start: u64, end: u64, visit: &mut impl FnMut(u64, Mapping) -> bool) -> bool {
        if start >= end || self.used[node as usize] == 0 {
            return true;
        }
        let shift = slot_shift(level);
        // Slots of this node that overlap [start, end).
        let node_span_end = if shift + BITS >= 64 { None } else { node_base.checked_add(1u64 << (shift + BITS)) };
        let first = if start <= node_base { 0 } else { ((start - node_base) >> shift) as usize };
        let last = match node_span_end {
            Some(e) if end >= e => FANOUT - 1,
            _ => (((end - 1).saturating_sub(node_base)) >> shift).min(FANOUT as u64 - 1) as usize,
        };
        let mut i = first;
        while i <= last {
            let slot_base = node_base + ((i as u64) << shift);
            match self.slot(node, i) {
                Slot::Empty => i += 1,
                Slot::Child(c) => {
                    if !self.scan(c, level - 1, slot_base, start, end, visit) {
                        return false;
                    }
                    i += 1;
                }
                Slot::Page(m) => {
                    // Report a page once, at its first slot, even if the range starts
                    // inside it; skip its other replicas.
                    let (_, n) = placement(m.size);
                    let first_replica = i & !(n - 1);
                    if !visit(node_base + ((first_replica as u64) << shift), m) {
                        return false;
                    }
                    i = first_replica + n;
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Perms;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn an_all_zero_slot_is_empty() {
        // What lets the slots grow as zeroed memory (the Zeroable impl).
        // SAFETY: PackedSlot is plain integers.
        let z: PackedSlot = unsafe { std::mem::zeroed() };
        assert_eq!(z, PackedSlot::EMPTY);
        assert!(matches!(z.unpack(), Slot::Empty));
    }

    fn m(pa: u64, size: PageSize) -> Mapping {
        Mapping { pa, size, perms: Perms::RW_USER, object: None }
    }

    /// Random inserts/removes/queries of pages of many sizes, anywhere in the 64-bit
    /// space, against a BTreeMap of (base -> mapping).
    #[test]
    fn matches_a_btreemap_reference() {
        let sizes: Vec<PageSize> = [12u8, 13, 14, 16, 20, 21, 22, 23, 30, 31].iter().map(|&s| PageSize::from_valid_shift(s)).collect();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        for round in 0..20 {
            let mut idx = PageIndex::default();
            let mut reference: BTreeMap<u64, Mapping> = BTreeMap::new();
            let regions = [0u64, 0x7fff_f000_0000, 0xffff_ffff_0000_0000, 0x5555_5540_0000];
            for _ in 0..600 {
                let region = regions[rng.gen_range(0..regions.len())];
                let size = sizes[rng.gen_range(0..sizes.len())];
                let va = size.align_down(region.wrapping_add(rng.gen_range(0..(1u64 << 33))));
                let end = va.saturating_add(size.bytes());
                let covering = reference.range(..=va).next_back().filter(|(&b, x)| va - b < x.size.bytes()).map(|(&b, x)| (b, *x));
                assert_eq!(idx.get(va), covering, "round {round}");
                let overlap = covering.is_some() || reference.range(va..end).next().is_some();
                assert_eq!(idx.any_in(va, end), overlap);
                // Unaligned ranges, within one slot or across several.
                let lo = va.wrapping_add(rng.gen_range(0..1u64 << 22));
                let bits = rng.gen_range(1..34);
                let hi = lo.saturating_add(rng.gen_range(1..1u64 << bits));
                let overlaps = |s: u64, e: u64| reference.range(..e).next_back().is_some_and(|(&b, x)| b.saturating_add(x.size.bytes()) > s);
                assert_eq!(idx.any_in(lo, hi), lo < hi && overlaps(lo, hi), "[{lo:#x}, {hi:#x})");
                match rng.gen_range(0..3) {
                    0 | 1 if !overlap => {
                        idx.insert(va, m(va ^ 0x1000_0000, size));
                        reference.insert(va, m(va ^ 0x1000_0000, size));
                    }
                    _ => {
                        if let Some((b, _)) = covering {
                            assert_eq!(idx.remove(b), reference.remove(&b));
                        }
                    }
                }
                assert_eq!(idx.len(), reference.len());
                let (lo, hi) = (va.saturating_sub(1 << 24), va.saturating_add(1 << 24));
                let mut expect: Vec<u64> = reference.range(lo..hi).map(|(&b, _)| b).collect();
                if let Some((&b, x)) = reference.range(..lo).next_back() {
                    if lo - b < x.size.bytes() {
                        expect.insert(0, b);
                    }
                }
                assert_eq!(idx.bases_in(lo, hi), expect);
            }
            // Everything, then empty again: nodes are freed and reused.
            let all: Vec<u64> = reference.keys().copied().collect();
            assert_eq!(idx.bases_in(0, u64::MAX), all);
            for b in all {
                assert!(idx.remove(b).is_some());
            }
            assert!(idx.is_empty());
            assert_eq!(idx.used[0], 0);
            assert_eq!(idx.free_nodes.len(), idx.used.len() - 1);
        }
    }

    #[test]
    fn update_rewrites_every_replica() {
        let mut idx = PageIndex::default();
        let s = PageSize::from_valid_shift(14);
        idx.insert(0x10000, m(0x4000, s));
        assert!(idx.update(0x10000, |x| x.perms = Perms::from_bits(1)));
        assert_eq!(idx.get(0x13fff).unwrap().1.perms, Perms::from_bits(1));
        assert!(!idx.update(0x11000, |_| {}), "not a page base");
        assert_eq!(idx.get(0x13000).unwrap().0, 0x10000);
    }
}
