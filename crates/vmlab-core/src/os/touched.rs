//! Which data frames the program has touched: one bit per 4 KiB physical frame, for the
//! memory overhead ("bloat") of page-size policies against a 4K-only system (Romer
//! §3.1: the memory a 4 KiB-page system would not have used).
//!
//! Invariant kept by the OS model: every mapped 4 KiB page is touched (it is mapped by a
//! demand fault on it, and demotion frees the untouched frames it would leave mapped), so
//! only translations of larger pages need marking, on the engine's slow path. Bits are
//! cleared whenever data frames are freed. Chunks of the bitmap are allocated when a
//! large page is mapped, never on the per-access path.

use crate::addr::PageSize;

/// Frames per chunk (2^15 frames = 128 MiB of physical memory, 4 KiB of bits).
const CHUNK_SHIFT: u32 = 15;
const WORDS: usize = 1 << (CHUNK_SHIFT - 6);

#[derive(Clone, Debug, Default)]
pub(crate) struct TouchedFrames {
    chunks: Vec<Option<Box<[u64; WORDS]>>>,
    /// Set bits.
    touched: u64,
}

impl TouchedFrames {
    /// Frames touched (set bits).
    pub(crate) fn count(&self) -> u64 {
        self.touched
    }

    /// Make sure the bits of [pa, pa + size) exist (call before mapping a large page).
    pub(crate) fn ensure(&mut self, pa: u64, size: PageSize) {
        let first = (pa >> 12) >> CHUNK_SHIFT;
        let last = ((pa + size.bytes() - 1) >> 12) >> CHUNK_SHIFT;
        if self.chunks.len() <= last as usize {
            self.chunks.resize(last as usize + 1, None);
        }
        for c in first..=last {
            self.chunks[c as usize].get_or_insert_with(|| Box::new([0; WORDS]));
        }
    }

    /// Mark the frame of `pa` touched; its chunk must exist (`ensure`) or it is created.
    #[inline]
    pub(crate) fn touch(&mut self, pa: u64) {
        let f = pa >> 12;
        match self.chunks.get_mut((f >> CHUNK_SHIFT) as usize) {
            Some(Some(c)) => {
                let w = &mut c[((f as usize) >> 6) & (WORDS - 1)];
                let bit = 1u64 << (f & 63);
                if *w & bit == 0 {
                    *w |= bit;
                    self.touched += 1;
                }
            }
            _ => {
                self.ensure(pa & !0xfff, PageSize::K4);
                self.touch(pa);
            }
        }
    }

    pub(crate) fn is_touched(&self, pa: u64) -> bool {
        let f = pa >> 12;
        match self.chunks.get((f >> CHUNK_SHIFT) as usize) {
            Some(Some(c)) => c[((f as usize) >> 6) & (WORDS - 1)] & (1u64 << (f & 63)) != 0,
            _ => false,
        }
    }

    /// Touched frames in [pa, pa + size).
    pub(crate) fn count_range(&self, pa: u64, size: PageSize) -> u64 {
        let mut n = 0;
        self.for_words(pa, size, |w, mask| n += (w & mask).count_ones() as u64);
        n
    }

    /// Clear the bits of [pa, pa + size) (the frames were freed); returns how many were set.
    pub(crate) fn clear_range(&mut self, pa: u64, size: PageSize) -> u64 {
        let n = self.count_range(pa, size);
        let (first, frames) = (pa >> 12, size.base_pages());
        let mut f = first;
        while f < first + frames {
            let Some(Some(c)) = self.chunks.get_mut((f >> CHUNK_SHIFT) as usize) else {
                // No chunk: nothing set in it.
                f = ((f >> CHUNK_SHIFT) + 1) << CHUNK_SHIFT;
                continue;
            };
            let take = (64 - (f & 63)).min(first + frames - f);
            let mask = if take == 64 { u64::MAX } else { ((1u64 << take) - 1) << (f & 63) };
            c[((f as usize) >> 6) & (WORDS - 1)] &= !mask;
            f += take;
        }
        self.touched -= n;
        n
    }

    /// Visit the words covering [pa, pa + size) with the mask of the range's bits.
    fn for_words(&self, pa: u64, size: PageSize, mut visit: impl FnMut(u64, u64)) {
        let (first, frames) = (pa >> 12, size.base_pages());
        let mut f = first;
        while f < first + frames {
            let take = (64 - (f & 63)).min(first + frames - f);
            if let Some(Some(c)) = self.chunks.get((f >> CHUNK_SHIFT) as usize) {
                let mask = if take == 64 { u64::MAX } else { ((1u64 << take) - 1) << (f & 63) };
                visit(c[((f as usize) >> 6) & (WORDS - 1)], mask);
            }
            f += take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_count_clear() {
        let mut t = TouchedFrames::default();
        t.ensure(0x20_0000, PageSize::M2);
        t.touch(0x20_0000);
        t.touch(0x20_0fff);
        t.touch(0x3f_f000);
        t.touch(0x1_0000_0000); // another chunk, created on demand
        assert_eq!(t.count(), 3);
        assert!(t.is_touched(0x3f_f123));
        assert!(!t.is_touched(0x20_1000));
        assert_eq!(t.count_range(0x20_0000, PageSize::M2), 2);
        assert_eq!(t.count_range(0x3f_f000, PageSize::K4), 1);
        assert_eq!(t.clear_range(0x20_0000, PageSize::M2), 2);
        assert_eq!(t.count(), 1);
        assert_eq!(t.count_range(0, PageSize::G1), 0);
    }
}
