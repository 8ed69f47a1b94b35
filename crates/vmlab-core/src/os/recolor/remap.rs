//! The recolouring primitive (Romer §4.1): move one virtual base page to a frame of
//! another colour. The page's data is copied (the engine sends the copy's references
//! through the cache hierarchy), the page table and the OS page index are updated and
//! the TLB entry is shot down. A page inside a larger page is first demoted, and only
//! its base page moves (Romer §6.6.1, COMBINED).

use super::super::buddy::FrameUse;
use super::super::{Mm, PageCopy};
use crate::addr::{PageSize, Pid};
use crate::error::Result;
use crate::pt::PageTable;
use serde::Serialize;
use std::collections::HashMap;

/// Which mechanism copied a virtual page (Romer Table 6-3).
pub const COPIED_BY_PROMOTION: u8 = 1;
pub const COPIED_BY_RECOLOR: u8 = 2;

#[derive(Clone, Debug, Default)]
pub struct RecolorCounters {
    pub pages_recolored: u64,
    pub bytes_copied: u64,
    /// Larger pages demoted so one base page could move.
    pub demotions: u64,
    /// Recolours given up: no free frame of the target colour, a shared page, or the
    /// page is gone.
    pub(crate) failed: u64,
    /// Recolours per virtual base page (pid, page base).
    pub(crate) per_page: HashMap<(Pid, u64), u32>,
    /// Record which mechanisms copied each virtual base page.
    pub(crate) track_copiers: bool,
    pub(crate) copiers: HashMap<(Pid, u64), u8>,
}

/// Distinct pages by times recoloured: n = 1, 2, 3, 4, >= 5 (Romer Table 6-4).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct RecolorHistogram {
    pub(crate) pages: [u64; 5],
    /// Recolour operations due to those pages.
    pub(crate) operations: [u64; 5],
}

impl RecolorCounters {
    pub(crate) fn histogram(&self) -> RecolorHistogram {
        let mut h = RecolorHistogram::default();
        for &n in self.per_page.values() {
            let k = (n.clamp(1, 5) - 1) as usize;
            h.pages[k] += 1;
            h.operations[k] += n as u64;
        }
        h
    }

    /// Virtual pages copied by promotion only, recolouring only, and both (Table 6-3).
    pub fn copiers_split(&self) -> [u64; 3] {
        let mut s = [0u64; 3];
        for &b in self.copiers.values() {
            match b {
                COPIED_BY_PROMOTION => s[0] += 1,
                COPIED_BY_RECOLOR => s[1] += 1,
                _ => s[2] += 1,
            }
        }
        s
    }

    pub(crate) fn note_copy(&mut self, pid: Pid, base: u64, by: u8) {
        if self.track_copiers {
            *self.copiers.entry((pid, base)).or_default() |= by;
        }
    }
}

impl<P: PageTable> Mm<P> {
    /// Move the base page of `pid` at `va` to a free frame of `color`. Returns the new
    /// frame, or None (nothing changed, counted as failed) if the page is not mapped,
    /// is shared, or no frame of that colour is free.
    pub fn recolor_page(&mut self, pid: Pid, va: u64, color: u64) -> Result<Option<u64>> {
        let Some((base, m)) = self.space(pid).and_then(|s| s.mapping_at(va)) else {
            self.rc.failed += 1;
            return Ok(None);
        };
        if m.object.is_some() {
            self.rc.failed += 1;
            return Ok(None);
        }
        if m.size > PageSize::K4 {
            self.demote(pid, base, PageSize::K4)?;
            self.rc.demotions += 1;
        }
        let page = PageSize::K4.align_down(va);
        // Demotion frees sub-pages nobody touched: then there is nothing to move.
        let Some((b, m)) = self.space(pid).and_then(|s| s.mapping_at(page)).filter(|(b, _)| *b == page) else {
            self.rc.failed += 1;
            return Ok(None);
        };
        let Some(to) = self.placement.alloc(&mut self.mem, PageSize::K4, color, FrameUse::Data) else {
            self.rc.failed += 1;
            return Ok(None);
        };
        let asid = self.space(pid).expect("mapped above").asid;
        self.unmap_page(pid, b);
        if let Err(e) = self.map_page(pid, asid, b, to, PageSize::K4, m.perms, None) {
            self.free_data(to, PageSize::K4);
            return Err(e);
        }
        if let Some(s) = &mut self.shadow {
            s.copy(m.pa, to, PageSize::K4);
        }
        self.free_data(m.pa, PageSize::K4);
        self.copies.push(PageCopy { from: m.pa, to, bytes: PageSize::K4.bytes() });
        self.rc.pages_recolored += 1;
        self.rc.bytes_copied += PageSize::K4.bytes();
        *self.rc.per_page.entry((pid, b)).or_default() += 1;
        self.rc.note_copy(pid, b, COPIED_BY_RECOLOR);
        Ok(Some(to))
    }
}
