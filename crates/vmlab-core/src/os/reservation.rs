//! Frame reservations (FreeBSD-style, the TPS paper's "paging reservation table", §III-B1):
//! an aligned block of physical frames taken from the buddy allocator for an aligned
//! virtual region at its first fault. Faults in the region map base pages from the
//! block at their natural offsets, so the region's frames stay contiguous and aligned
//! and a larger page can later be formed in place, without copying. Unpopulated frames
//! are accounted as `FrameUse::Reserved`; populated ones as data.
//!
//! The table only records; the OS model (`Mm`) does the frame accounting and decides
//! when reservations are promoted, broken (memory pressure) or released (unmap).

use crate::addr::{PageSize, Pid};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub(crate) struct Reservation {
    pub(crate) pid: Pid,
    /// Virtual base of the region (aligned to `size`).
    pub(crate) va: u64,
    /// Physical base of the reserved block (aligned to `size`).
    pub(crate) pa: u64,
    pub(crate) size: PageSize,
    /// One bit per 4 KiB page: populated (mapped from the reservation).
    populated: Vec<u64>,
    /// Populated 4 KiB pages.
    pub(crate) count: u64,
    /// Logical time of the last population (for breaking the least recently used).
    pub(crate) last_used: u64,
}

impl Reservation {
    pub(crate) fn new(pid: Pid, va: u64, pa: u64, size: PageSize) -> Reservation {
        let words = (size.base_pages() as usize).div_ceil(64);
        Reservation { pid, va, pa, size, populated: vec![0; words], count: 0, last_used: 0 }
    }

    pub(crate) fn covers(&self, va: u64) -> bool {
        va >= self.va && va - self.va < self.size.bytes()
    }

    fn index(&self, va: u64) -> usize {
        ((va - self.va) >> 12) as usize
    }

    /// The frame backing the 4 KiB page of `va` (its natural offset in the block).
    pub(crate) fn frame_of(&self, va: u64) -> u64 {
        self.pa + ((va - self.va) & !0xfff)
    }

    pub(crate) fn is_populated(&self, va: u64) -> bool {
        let i = self.index(va);
        self.populated[i / 64] & (1 << (i % 64)) != 0
    }

    /// Mark the page of `va` populated; returns its frame.
    pub(crate) fn populate(&mut self, va: u64) -> u64 {
        let i = self.index(va);
        debug_assert!(!self.is_populated(va), "page populated twice");
        self.populated[i / 64] |= 1 << (i % 64);
        self.count += 1;
        self.frame_of(va)
    }

    /// Populated 4 KiB pages in the aligned sub-block [va, va + size) (for policies that
    /// grow pages in place through intermediate sizes, e.g. TPS).
    pub(crate) fn populated_in(&self, va: u64, size: PageSize) -> u64 {
        let (first, n) = (self.index(va), size.base_pages() as usize);
        if n >= 64 {
            // Aligned blocks of 64 pages or more are whole words.
            return self.populated[first / 64..(first + n) / 64].iter().map(|w| w.count_ones() as u64).sum();
        }
        let mask = ((1u64 << n) - 1) << (first % 64);
        (self.populated[first / 64] & mask).count_ones() as u64
    }

    /// The maximal naturally aligned blocks of unpopulated frames, as (pa, size).
    pub(crate) fn unpopulated_blocks(&self) -> Vec<(u64, PageSize)> {
        let mut out = Vec::new();
        self.collect_unpopulated(self.va, self.size, &mut out);
        out
    }

    fn collect_unpopulated(&self, va: u64, size: PageSize, out: &mut Vec<(u64, PageSize)>) {
        match self.populated_in(va, size) {
            0 => out.push((self.frame_of(va), size)),
            n if n == size.base_pages() => {}
            _ => {
                let half = PageSize::from_valid_shift(size.shift() - 1);
                self.collect_unpopulated(va, half, out);
                self.collect_unpopulated(va + half.bytes(), half, out);
            }
        }
    }
}

/// Why a reservation ended without being promoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseReason {
    /// Memory ran short: its free frames were given back (FreeBSD "breaks" it).
    Broken,
    /// Its region was unmapped (munmap, brk shrink, mmap over it, exit).
    Released,
}

/// Every live reservation, keyed by (process, virtual base).
#[derive(Clone, Debug, Default)]
pub(crate) struct Reservations {
    map: BTreeMap<(Pid, u64), Reservation>,
    clock: u64,
}

impl Reservations {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    #[cfg(test)]
    /// The reservation of `pid` covering `va`.
    pub(crate) fn find(&self, pid: Pid, va: u64) -> Option<&Reservation> {
        self.map.range(..=(pid, va)).next_back().map(|(_, r)| r).filter(|r| r.pid == pid && r.covers(va))
    }

    /// Populate the page of `va` in the reservation covering it; returns the frame and
    /// the reservation's key and populated count after this page.
    pub(crate) fn populate(&mut self, pid: Pid, va: u64) -> Option<(u64, (Pid, u64), u64)> {
        self.clock += 1;
        let clock = self.clock;
        let r = self.map.range_mut(..=(pid, va)).next_back().map(|(_, r)| r).filter(|r| r.pid == pid && r.covers(va))?;
        if r.is_populated(va) {
            return None;
        }
        r.last_used = clock;
        let pa = r.populate(va);
        Some((pa, (pid, r.va), r.count))
    }

    pub(crate) fn insert(&mut self, r: Reservation) {
        self.clock += 1;
        let mut r = r;
        r.last_used = self.clock;
        self.map.insert((r.pid, r.va), r);
    }

    pub(crate) fn get(&self, key: (Pid, u64)) -> Option<&Reservation> {
        self.map.get(&key)
    }

    pub(crate) fn remove(&mut self, key: (Pid, u64)) -> Option<Reservation> {
        self.map.remove(&key)
    }

    /// Keys of `pid`'s reservations overlapping [start, end).
    pub(crate) fn overlapping(&self, pid: Pid, start: u64, end: u64) -> Vec<(Pid, u64)> {
        let mut keys: Vec<(Pid, u64)> = Vec::new();
        if start >= end {
            // An empty range (an munmap of length 0) overlaps nothing.
            return keys;
        }
        if let Some((&k, r)) = self.map.range(..=(pid, start)).next_back() {
            if r.pid == pid && r.va + (r.size.bytes() - 1) >= start {
                keys.push(k);
            }
        }
        if start < u64::MAX {
            for (&k, _) in self.map.range((pid, start.saturating_add(1))..(pid, end)) {
                keys.push(k);
            }
        }
        keys
    }

    /// The least recently populated reservation (the one memory pressure breaks first).
    pub(crate) fn least_recently_used(&self) -> Option<(Pid, u64)> {
        self.map.iter().min_by_key(|(_, r)| r.last_used).map(|(&k, _)| k)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Reservation> {
        self.map.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populate_and_unpopulated_blocks() {
        let mut r = Reservation::new(1, 0x20_0000, 0x4000_0000, PageSize::M2);
        assert_eq!(r.unpopulated_blocks(), vec![(0x4000_0000, PageSize::M2)]);
        assert_eq!(r.populate(0x20_0123), 0x4000_0000);
        assert_eq!(r.populate(0x20_3000), 0x4000_3000);
        let blocks = r.unpopulated_blocks();
        let frames: u64 = blocks.iter().map(|(_, s)| s.base_pages()).sum();
        assert_eq!(frames, 510);
        assert!(blocks.iter().all(|(pa, s)| s.is_aligned(*pa)));
        assert!(blocks.contains(&(0x4000_1000, PageSize::K4)));
        assert!(blocks.contains(&(0x4010_0000, PageSize::from_valid_shift(20))));
        assert_eq!(r.populated_in(0x20_0000, PageSize::from_valid_shift(14)), 2);
    }

    #[test]
    fn populated_in_counts_every_aligned_block() {
        let mut r = Reservation::new(1, 0x4000_0000, 0, PageSize::from_valid_shift(23));
        let mut state = 12345u64;
        let mut pages = Vec::new();
        for _ in 0..900 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let va = 0x4000_0000 + (((state >> 33) % 2048) << 12);
            if !r.is_populated(va) {
                r.populate(va);
                pages.push(va);
            }
        }
        for shift in 12..=23u8 {
            let size = PageSize::from_valid_shift(shift);
            for b in (0x4000_0000u64..0x4080_0000).step_by(size.bytes() as usize) {
                let naive = pages.iter().filter(|&&v| v >= b && v < b + size.bytes()).count() as u64;
                assert_eq!(r.populated_in(b, size), naive, "block {b:#x} of {size}");
            }
        }
    }

    #[test]
    fn table_lookup_overlap_and_lru() {
        let mut t = Reservations::default();
        t.insert(Reservation::new(1, 0x20_0000, 0, PageSize::M2));
        t.insert(Reservation::new(1, 0x60_0000, 0x20_0000, PageSize::M2));
        t.insert(Reservation::new(2, 0x20_0000, 0x40_0000, PageSize::M2));
        assert_eq!(t.find(1, 0x3f_ffff).unwrap().pa, 0);
        assert!(t.find(1, 0x40_0000).is_none());
        assert_eq!(t.overlapping(1, 0x30_0000, 0x61_0000), vec![(1, 0x20_0000), (1, 0x60_0000)]);
        assert_eq!(t.overlapping(1, 0x40_0000, 0x60_0000), vec![]);
        assert_eq!(t.least_recently_used(), Some((1, 0x20_0000)));
        t.populate(1, 0x20_0000).unwrap();
        assert!(t.populate(1, 0x20_0000).is_none(), "already populated");
        assert_eq!(t.least_recently_used(), Some((1, 0x60_0000)));
    }
}
