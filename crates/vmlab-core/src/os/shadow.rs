//! A shadow of physical memory's contents, for checking that the OS model never loses
//! or misplaces data: a caller (a property test) stores a tag in the frame a write went
//! to, and every place the OS moves data carries the tags along (a promotion's copy,
//! a recolouring's copy), while freeing data frames drops them. Reading a page's frame
//! back through the page table must then give the tag last written to that page.
//!
//! Off unless `Mm::shadow` is set; it costs nothing on the per-access path (the engine
//! never touches it; only the rare copies and frees do).

use crate::addr::PageSize;
use rustc_hash::FxHashMap;

#[derive(Clone, Debug, Default)]
pub struct DataShadow {
    /// Tag of each written 4 KiB frame.
    frames: FxHashMap<u64, u64>,
}

impl DataShadow {
    /// Store `tag` in the 4 KiB frame holding `pa`.
    pub fn write(&mut self, pa: u64, tag: u64) {
        self.frames.insert(pa >> 12, tag);
    }

    /// The tag in the 4 KiB frame holding `pa` (None: never written since allocated).
    pub fn read(&self, pa: u64) -> Option<u64> {
        self.frames.get(&(pa >> 12)).copied()
    }

    /// Frames holding a tag.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Copy [from, from + size) to [to, to + size): the destination holds exactly what
    /// the source held (unwritten source frames leave unwritten destination frames).
    pub(crate) fn copy(&mut self, from: u64, to: u64, size: PageSize) {
        for i in 0..size.base_pages() {
            let (f, t) = ((from >> 12) + i, (to >> 12) + i);
            match self.frames.get(&f).copied() {
                Some(tag) => self.frames.insert(t, tag),
                None => self.frames.remove(&t),
            };
        }
    }

    /// The frames of [pa, pa + size) were freed: their contents are gone.
    pub(crate) fn free(&mut self, pa: u64, size: PageSize) {
        for i in 0..size.base_pages() {
            self.frames.remove(&((pa >> 12) + i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_carry_tags_and_frees_drop_them() {
        let mut s = DataShadow::default();
        s.write(0x1234, 7);
        s.write(0x3000, 9);
        s.copy(0x1000, 0x10_0000, PageSize::from_valid_shift(13));
        assert_eq!(s.read(0x10_0fff), Some(7));
        assert_eq!(s.read(0x10_1000), None, "an unwritten source frame leaves the destination unwritten");
        s.free(0x0, PageSize::from_valid_shift(14));
        assert_eq!((s.read(0x1000), s.read(0x3000), s.len()), (None, None, 1));
    }
}
