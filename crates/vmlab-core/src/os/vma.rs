//! Virtual memory areas of one address space: disjoint [start, end) ranges with
//! permissions, kept in a BTreeMap keyed by start.

use crate::addr::Perms;
use crate::trace::MapFlags;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) perms: Perms,
    pub(crate) flags: MapFlags,
    /// Shared memory object backing a MAP_SHARED region.
    pub(crate) object: Option<u32>,
    /// Where the object's offset 0 is mapped: a page's offset in the object is its
    /// address minus this. Kept when the VMA is split or trimmed (Linux's `vm_pgoff`),
    /// so the pieces left by a partial munmap still share the right frames.
    pub(crate) object_start: u64,
    /// Created by the OS model for an access outside every announced region.
    pub(crate) implicit: bool,
}

impl Vma {
    pub(crate) fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn contains_range(&self, start: u64, end: u64) -> bool {
        self.start <= start && end <= self.end
    }
}

#[derive(Clone, Debug, Default)]
pub struct VmaSet {
    map: BTreeMap<u64, Vma>,
}

impl VmaSet {
    pub fn find(&self, va: u64) -> Option<&Vma> {
        self.map.range(..=va).next_back().map(|(_, v)| v).filter(|v| va < v.end)
    }

    /// The gap around `va` (which lies in no VMA): (end of previous, start of next).
    pub(crate) fn gap_around(&self, va: u64) -> (u64, u64) {
        let lo = self.map.range(..=va).next_back().map(|(_, v)| v.end).unwrap_or(0);
        let hi = self.map.range(va..).next().map(|(&s, _)| s).unwrap_or(u64::MAX);
        (lo, hi)
    }

    /// Insert `vma`, replacing whatever overlapped it (mmap MAP_FIXED semantics).
    /// Adjacent implicit regions merge so traces without VMA events stay compact.
    pub(crate) fn insert(&mut self, mut vma: Vma) {
        self.remove_range(vma.start, vma.end);
        if vma.implicit {
            if let Some((&s, prev)) = self.map.range(..vma.start).next_back() {
                if prev.implicit && prev.end == vma.start && prev.perms == vma.perms {
                    vma.start = s;
                    self.map.remove(&s);
                }
            }
            if let Some(next) = self.map.get(&vma.end).copied() {
                if next.implicit && next.perms == vma.perms {
                    vma.end = next.end;
                    self.map.remove(&next.start);
                }
            }
        }
        self.map.insert(vma.start, vma);
    }

    /// Remove [start, end), splitting regions that straddle the boundaries.
    pub(crate) fn remove_range(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        for v in self.overlapping(start, end) {
            self.map.remove(&v.start);
            if v.start < start {
                self.map.insert(v.start, Vma { end: start, ..v });
            }
            if v.end > end {
                self.map.insert(end, Vma { start: end, ..v });
            }
        }
    }

    /// Set the permissions of [start, end) where it is mapped, splitting as needed.
    pub(crate) fn protect_range(&mut self, start: u64, end: u64, perms: Perms) {
        for v in self.overlapping(start, end) {
            let (s, e) = (v.start.max(start), v.end.min(end));
            self.remove_range(s, e);
            self.map.insert(s, Vma { start: s, end: e, perms, ..v });
        }
    }

    /// The regions overlapping [start, end), highest first.
    fn overlapping(&self, start: u64, end: u64) -> Vec<Vma> {
        self.iter_overlapping(start, end).copied().collect()
    }

    /// The regions overlapping [start, end), last first.
    pub fn iter_overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = &Vma> {
        self.map.range(..end).rev().take_while(move |(_, v)| v.end > start).map(|(_, v)| v)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Vma> {
        self.map.values()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vma(start: u64, end: u64) -> Vma {
        Vma { start, end, perms: Perms::RW_USER, flags: MapFlags::PRIVATE, object: None, object_start: 0, implicit: false }
    }

    #[test]
    fn insert_find_split() {
        let mut s = VmaSet::default();
        s.insert(vma(0x1000, 0x5000));
        assert!(s.find(0x0fff).is_none());
        assert_eq!(s.find(0x4fff).unwrap().start, 0x1000);
        s.remove_range(0x2000, 0x3000);
        assert_eq!(s.len(), 2);
        assert!(s.find(0x2500).is_none());
        s.protect_range(0x3000, 0x4000, Perms::R);
        assert_eq!(s.find(0x3500).unwrap().perms, Perms::R);
        assert_eq!(s.find(0x4500).unwrap().perms, Perms::RW_USER);
        assert_eq!(s.len(), 3);
        assert_eq!(s.gap_around(0x2500), (0x2000, 0x3000));
    }

    #[test]
    fn implicit_neighbors_merge() {
        let mut s = VmaSet::default();
        let imp = |a, b| Vma { implicit: true, ..vma(a, b) };
        s.insert(imp(0x1000, 0x2000));
        s.insert(imp(0x3000, 0x4000));
        s.insert(imp(0x2000, 0x3000));
        assert_eq!(s.len(), 1);
        assert_eq!(s.find(0x1000).unwrap().end, 0x4000);
    }
}
