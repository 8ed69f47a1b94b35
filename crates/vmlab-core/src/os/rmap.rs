//! Reverse map: which virtual page a data frame backs. Recolouring policies that find
//! conflicts by physical page (the CML buffer counts misses per frame, Romer §5.2) need
//! it to reach the page table; it is kept only when such a policy runs. Shared-object
//! pages are not entered (they are never recoloured).

use crate::addr::{PageSize, Pid, MIN_PAGE_SHIFT};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct ReverseMap {
    /// First frame of each mapped page -> (pid, virtual base, size).
    pages: BTreeMap<u64, (Pid, u64, PageSize)>,
}

impl ReverseMap {
    pub(crate) fn insert(&mut self, pa: u64, pid: Pid, base: u64, size: PageSize) {
        self.pages.insert(pa >> MIN_PAGE_SHIFT, (pid, base, size));
    }

    pub(crate) fn remove(&mut self, pa: u64) {
        self.pages.remove(&(pa >> MIN_PAGE_SHIFT));
    }

    /// The process and virtual address of the 4 KiB frame at `pa`, if it backs a page.
    pub fn lookup(&self, pa: u64) -> Option<(Pid, u64)> {
        let frame = pa >> MIN_PAGE_SHIFT;
        let (&first, &(pid, base, size)) = self.pages.range(..=frame).next_back()?;
        let off = (frame - first) << MIN_PAGE_SHIFT;
        (off < size.bytes()).then_some((pid, base + off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_frames_inside_large_pages() {
        let mut r = ReverseMap::default();
        r.insert(0x20_0000, 7, 0x4000_0000, PageSize::M2);
        r.insert(0x1000, 8, 0x5000, PageSize::K4);
        assert_eq!(r.lookup(0x20_3000), Some((7, 0x4000_3000)));
        assert_eq!(r.lookup(0x1000), Some((8, 0x5000)));
        assert_eq!(r.lookup(0x2000), None);
        assert_eq!(r.lookup(0x40_0000), None, "past the end of the 2M page");
        r.remove(0x20_0000);
        assert_eq!(r.lookup(0x20_3000), None);
    }
}
