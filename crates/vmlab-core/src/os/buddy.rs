//! Buddy allocator over simulated physical memory, at 4 KiB frame granularity.
//!
//! Blocks of 2^order frames sit on per-order free sets; allocation takes the
//! lowest-addressed block of the smallest order that fits and splits it (so placement
//! is deterministic), and freeing merges a block with its buddy while the buddy is free.
//! Allocation happens on faults and table growth, never per access.

use crate::addr::{format_bytes, PageSize, MIN_PAGE_SHIFT};
use crate::error::{Error, Result};
use serde::Serialize;
use std::collections::BTreeSet;

/// Largest block: 2^MAX_ORDER frames (4 KiB << 20 = 4 GiB), enough for 1 GiB pages.
pub(crate) const MAX_ORDER: u8 = 20;

/// What a frame is used for, for memory accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameUse {
    /// Program data (mapped pages).
    Data,
    /// Page-table structures.
    PageTable,
    /// Reserved but not (yet) mapped (page-size policies with reservations).
    Reserved,
    /// Held by "other" owners outside the simulated processes: the start-up
    /// fragmentation filler (`machine.fragmentation`).
    Other,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct MemCounters {
    pub(crate) phys_bytes: u64,
    pub(crate) frames_total: u64,
    /// Frames currently allocated, all uses.
    pub frames_used: u64,
    pub frames_data: u64,
    pub frames_page_table: u64,
    pub frames_reserved: u64,
    /// Frames held by the fragmentation filler (`FrameUse::Other`).
    pub frames_other: u64,
    /// High-water mark of `frames_used`.
    pub(crate) frames_peak: u64,
    /// Allocation requests that found no free block of the wanted order.
    pub(crate) failed_allocs: u64,
}

/// The free blocks of one order (base frame numbers), as an ordered set. Most orders
/// hold a handful of blocks at a time (a split leaves one block on each order below
/// it), so up to `SMALL` live in a sorted inline vector; a `BTreeSet` allocated and
/// freed a node as an order went from empty to one block and back, on nearly every
/// fault. Past `SMALL` they move to the tree until the order empties again.
#[derive(Clone, Debug, Default)]
struct FreeSet {
    /// Ascending; used while `big` is empty.
    small: Vec<u64>,
    big: BTreeSet<u64>,
}

impl FreeSet {
    const SMALL: usize = 16;

    fn is_empty(&self) -> bool {
        self.small.is_empty() && self.big.is_empty()
    }
    fn len(&self) -> usize {
        self.small.len() + self.big.len()
    }
    fn contains(&self, f: &u64) -> bool {
        self.small.binary_search(f).is_ok() || self.big.contains(f)
    }
    fn insert(&mut self, f: u64) {
        if self.big.is_empty() {
            if let Err(at) = self.small.binary_search(&f) {
                if self.small.len() < Self::SMALL {
                    self.small.insert(at, f);
                    return;
                }
                self.big.extend(self.small.drain(..));
            } else {
                return;
            }
        }
        self.big.insert(f);
    }
    fn remove(&mut self, f: &u64) -> bool {
        match self.small.binary_search(f) {
            Ok(at) => {
                self.small.remove(at);
                true
            }
            Err(_) => self.big.remove(f),
        }
    }
    fn pop_first(&mut self) -> Option<u64> {
        if self.small.is_empty() {
            self.big.pop_first()
        } else {
            Some(self.small.remove(0))
        }
    }
}

#[derive(Clone, Debug)]
pub struct BuddyAllocator {
    /// Free blocks per order, as base frame numbers.
    free: Vec<FreeSet>,
    frames_total: u64,
    counters: MemCounters,
}

impl BuddyAllocator {
    /// Physical memory of `bytes` bytes (a multiple of 4 KiB, at least one frame).
    pub fn new(bytes: u64) -> Result<BuddyAllocator> {
        if bytes < (1 << MIN_PAGE_SHIFT) || !bytes.is_multiple_of(1 << MIN_PAGE_SHIFT) {
            return Err(Error::config("machine.phys_mem", format!("{bytes} bytes is not a positive multiple of 4 KiB")));
        }
        if bytes > (1u64 << 52) {
            return Err(Error::config("machine.phys_mem", "more than 4 PiB of physical memory"));
        }
        let frames_total = bytes >> MIN_PAGE_SHIFT;
        let mut free = vec![FreeSet::default(); MAX_ORDER as usize + 1];
        // Carve the range into maximal aligned blocks.
        let mut f = 0u64;
        while f < frames_total {
            let mut order = MAX_ORDER;
            while order > 0 && (f & ((1 << order) - 1) != 0 || f + (1 << order) > frames_total) {
                order -= 1;
            }
            free[order as usize].insert(f);
            f += 1 << order;
        }
        Ok(BuddyAllocator { free, frames_total, counters: MemCounters { phys_bytes: bytes, frames_total, ..Default::default() } })
    }

    pub(crate) fn frames_total(&self) -> u64 {
        self.frames_total
    }

    /// Order (log2 frames) of a page size.
    #[inline]
    pub(crate) fn order_of(size: PageSize) -> u8 {
        size.shift() - MIN_PAGE_SHIFT
    }

    /// Allocate a block of `size` (naturally aligned); returns its physical address.
    pub fn alloc(&mut self, size: PageSize, usage: FrameUse) -> Result<u64> {
        let order = Self::order_of(size);
        match self.alloc_order(order) {
            Some(frame) => {
                self.account(1i64 << order, usage);
                Ok(frame << MIN_PAGE_SHIFT)
            }
            None => {
                self.counters.failed_allocs += 1;
                Err(Error::OutOfMemory(format!(
                    "no free {} block ({} of {} used)",
                    size,
                    format_bytes(self.counters.frames_used << MIN_PAGE_SHIFT),
                    format_bytes(self.counters.phys_bytes)
                )))
            }
        }
    }

    /// Allocate, or `None` without counting a failure (for policies that fall back).
    pub(crate) fn try_alloc(&mut self, size: PageSize, usage: FrameUse) -> Option<u64> {
        let order = Self::order_of(size);
        let frame = self.alloc_order(order)?;
        self.account(1i64 << order, usage);
        Some(frame << MIN_PAGE_SHIFT)
    }

    /// Allocate the specific block [pa, pa + size) (aligned to `size`) if every frame of
    /// it is free: the free block containing it is split down around it. Returns false,
    /// changing nothing, if some frame is in use. (Start-up fragmentation and history
    /// replay place their allocations exactly.)
    pub(crate) fn claim(&mut self, pa: u64, size: PageSize, usage: FrameUse) -> bool {
        let order = Self::order_of(size);
        let frame = pa >> MIN_PAGE_SHIFT;
        if !size.is_aligned(pa) || frame + (1 << order) > self.frames_total {
            return false;
        }
        let Some(mut o) = (order..=MAX_ORDER).find(|&o| self.free[o as usize].contains(&(frame & !((1u64 << o) - 1)))) else {
            return false;
        };
        self.free[o as usize].remove(&(frame & !((1u64 << o) - 1)));
        // Split down, keeping the halves that do not contain the claimed block.
        while o > order {
            o -= 1;
            let base = frame & !((1u64 << (o + 1)) - 1);
            let other = if frame & (1 << o) == 0 { base + (1 << o) } else { base };
            self.free[o as usize].insert(other);
        }
        self.account(1i64 << order, usage);
        true
    }

    /// Whether a free block of at least `size` exists (an allocation would succeed).
    pub(crate) fn has_free(&self, size: PageSize) -> bool {
        let order = Self::order_of(size);
        order <= MAX_ORDER && (order..=MAX_ORDER).any(|o| !self.free[o as usize].is_empty())
    }

    fn alloc_order(&mut self, order: u8) -> Option<u64> {
        if order > MAX_ORDER {
            return None;
        }
        let from = (order..=MAX_ORDER).find(|&o| !self.free[o as usize].is_empty())?;
        let frame = self.free[from as usize].pop_first()?;
        // Split down, returning the upper halves to the free sets.
        for o in (order..from).rev() {
            self.free[o as usize].insert(frame + (1 << o));
        }
        Some(frame)
    }

    /// Free a block previously returned by `alloc` with the same `size` and `usage`.
    pub fn free(&mut self, pa: u64, size: PageSize, usage: FrameUse) {
        let mut order = Self::order_of(size);
        let mut frame = pa >> MIN_PAGE_SHIFT;
        debug_assert!(frame & ((1 << order) - 1) == 0, "misaligned free");
        self.account(-(1i64 << order), usage);
        while order < MAX_ORDER {
            let buddy = frame ^ (1 << order);
            if !self.free[order as usize].remove(&buddy) {
                break;
            }
            frame = frame.min(buddy);
            order += 1;
        }
        self.free[order as usize].insert(frame);
    }

    /// Move accounting of an allocated block from one use to another (a reservation
    /// becoming mapped data, say), without touching the free sets.
    pub(crate) fn reclassify(&mut self, size: PageSize, from: FrameUse, to: FrameUse) {
        let n = 1i64 << Self::order_of(size);
        self.account(-n, from);
        self.account(n, to);
    }

    fn account(&mut self, frames: i64, usage: FrameUse) {
        let c = &mut self.counters;
        let add = |v: &mut u64| *v = v.wrapping_add_signed(frames);
        add(&mut c.frames_used);
        match usage {
            FrameUse::Data => add(&mut c.frames_data),
            FrameUse::PageTable => add(&mut c.frames_page_table),
            FrameUse::Reserved => add(&mut c.frames_reserved),
            FrameUse::Other => add(&mut c.frames_other),
        }
        c.frames_peak = c.frames_peak.max(c.frames_used);
    }

    pub fn counters(&self) -> &MemCounters {
        &self.counters
    }

    /// Free blocks per order (index = order), for fragmentation reports.
    pub(crate) fn free_blocks_per_order(&self) -> Vec<u64> {
        self.free.iter().map(|s| s.len() as u64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_and_merges_back() {
        let mut b = BuddyAllocator::new(16 << 20).unwrap();
        let a = b.alloc(PageSize::K4, FrameUse::Data).unwrap();
        let h = b.alloc(PageSize::M2, FrameUse::Data).unwrap();
        assert_eq!(a, 0);
        assert!(PageSize::M2.is_aligned(h));
        assert_eq!(b.counters().frames_used, 1 + 512);
        b.free(a, PageSize::K4, FrameUse::Data);
        b.free(h, PageSize::M2, FrameUse::Data);
        assert_eq!(b.counters().frames_used, 0);
        // Everything merged back into the maximal 16 MiB block.
        let per = b.free_blocks_per_order();
        assert_eq!(per[12], 1);
        assert_eq!(per.iter().sum::<u64>(), 1);
    }

    #[test]
    fn exhaustion_is_an_error_not_a_panic() {
        let mut b = BuddyAllocator::new(8 << 10).unwrap();
        b.alloc(PageSize::K4, FrameUse::Data).unwrap();
        b.alloc(PageSize::K4, FrameUse::Data).unwrap();
        let e = b.alloc(PageSize::K4, FrameUse::Data).unwrap_err();
        assert!(e.to_string().contains("exhausted"), "{e}");
        assert!(b.alloc(PageSize::M2, FrameUse::Data).is_err());
    }

    #[test]
    fn claim_takes_exactly_the_block() {
        let mut b = BuddyAllocator::new(16 << 20).unwrap();
        assert!(b.claim(0x5000, PageSize::K4, FrameUse::Other));
        assert!(!b.claim(0x5000, PageSize::K4, FrameUse::Other), "already in use");
        assert!(!b.claim(0x4000, PageSize::from_valid_shift(13), FrameUse::Other), "overlaps a used frame");
        assert!(b.claim(0x20_0000, PageSize::M2, FrameUse::Data));
        assert_eq!(b.counters().frames_other, 1);
        assert_eq!(b.counters().frames_used, 513);
        // Smallest free block first: the 4K buddy of the claimed frame; then the 4M half.
        assert_eq!(b.alloc(PageSize::K4, FrameUse::Data).unwrap(), 0x4000);
        assert_eq!(b.alloc(PageSize::M2, FrameUse::Data).unwrap(), 0x40_0000);
        b.free(0x5000, PageSize::K4, FrameUse::Other);
        b.free(0x20_0000, PageSize::M2, FrameUse::Data);
        b.free(0x4000, PageSize::K4, FrameUse::Data);
        b.free(0x40_0000, PageSize::M2, FrameUse::Data);
        assert_eq!(b.free_blocks_per_order().iter().sum::<u64>(), 1, "merged back");
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(BuddyAllocator::new(0).is_err());
        assert!(BuddyAllocator::new(5000).is_err());
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        /// A free set answers as an ordered set does, across its move from the inline
        /// vector to the tree and back (values from a small range, so sets grow past
        /// `SMALL`, repeat and empty out).
        #[test]
        fn free_sets_are_ordered_sets(ops in proptest::collection::vec((0u8..4, 0u64..40), 1..400)) {
            let mut f = FreeSet::default();
            let mut model = BTreeSet::new();
            for (op, x) in ops {
                match op {
                    0 | 1 => {
                        f.insert(x);
                        model.insert(x);
                    }
                    2 => prop_assert_eq!(f.remove(&x), model.remove(&x)),
                    _ => prop_assert_eq!(f.pop_first(), model.pop_first()),
                }
                prop_assert_eq!(f.len(), model.len());
                prop_assert_eq!(f.is_empty(), model.is_empty());
                prop_assert_eq!(f.contains(&x), model.contains(&x));
            }
        }

        /// Random alloc/free sequences never hand out overlapping blocks, and freeing
        /// everything restores the initial free state.
        #[test]
        fn no_overlap_and_full_merge(ops in proptest::collection::vec((0u8..10, any::<bool>()), 1..200)) {
            let total = 64u64 << 20;
            let mut b = BuddyAllocator::new(total).unwrap();
            let initial = b.free_blocks_per_order();
            let mut live: Vec<(u64, PageSize)> = Vec::new();
            for (order, free_one) in ops {
                if free_one && !live.is_empty() {
                    let (pa, sz) = live.swap_remove(0);
                    b.free(pa, sz, FrameUse::Data);
                } else {
                    let sz = PageSize::from_shift(12 + order).unwrap();
                    if let Some(pa) = b.try_alloc(sz, FrameUse::Data) {
                        prop_assert!(sz.is_aligned(pa));
                        prop_assert!(pa + sz.bytes() <= total);
                        for &(q, qs) in &live {
                            prop_assert!(pa + sz.bytes() <= q || q + qs.bytes() <= pa, "overlap");
                        }
                        live.push((pa, sz));
                    }
                }
            }
            let used: u64 = live.iter().map(|(_, s)| s.base_pages()).sum();
            prop_assert_eq!(b.counters().frames_used, used);
            for (pa, sz) in live.drain(..) {
                b.free(pa, sz, FrameUse::Data);
            }
            prop_assert_eq!(b.free_blocks_per_order(), initial);
        }
    }
}
