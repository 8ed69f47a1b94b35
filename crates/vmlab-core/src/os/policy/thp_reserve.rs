//! THP, reservation-based (FreeBSD's superpage reservations; the TPS paper's baseline,
//! §III-B1 and §IV). The first fault in an aligned huge region that lies inside the VMA
//! and overlaps no mapped page reserves an aligned huge block (`FrameUse::Reserved`);
//! that fault and later ones in the region map 4K pages from the block at their natural
//! offsets. When `threshold` of the region's 4K pages are populated (TPS: 100% or 50%)
//! the region is promoted in place to one huge page (no copy; the still unpopulated
//! frames become untouched data, i.e. bloat below 100%).
//!
//! Reservations end early (docs/config.md): broken, least recently populated first,
//! when a 4K frame (data or page table) cannot be allocated; released when any part of
//! the region is unmapped (munmap, brk shrink, mmap over it, exit). A region whose huge
//! block cannot be reserved falls back to plain 4K pages (`faults.fallbacks`).

use super::{map_base_page, PageSizePolicy};
use crate::addr::PageSize;
use crate::error::Result;
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};

pub struct ThpReserve {
    huge: PageSize,
    /// Populated 4K pages that trigger promotion: ceil(threshold × pages), at least 1.
    needed: u64,
}

impl ThpReserve {
    pub(crate) fn new(huge: PageSize, threshold: f64) -> ThpReserve {
        let needed = ((threshold * huge.base_pages() as f64).ceil() as u64).clamp(1, huge.base_pages());
        ThpReserve { huge, needed }
    }

    /// Map the faulting 4K page from the reservation covering it, then promote if the
    /// threshold is reached. None if no reservation covers `f.va`.
    fn map_from_reservation<P: PageTable>(&self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Option<Translation>> {
        let Some((pa, key, populated)) = mm.populate_reserved(f.pid, f.va) else { return Ok(None) };
        let t = mm.map_page(f.pid, f.asid, PageSize::K4.align_down(f.va), pa, PageSize::K4, f.perms, None)?;
        if populated >= self.needed && mm.promote_reservation(key)? {
            return Ok(Some(mm.translation_at(f.pid, f.va).expect("promoted page")));
        }
        Ok(Some(t))
    }
}

impl PageSizePolicy for ThpReserve {
    fn granule(&self) -> PageSize {
        self.huge
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        if let Some(t) = self.map_from_reservation(mm, f)? {
            return Ok(t);
        }
        if let Some(base) = mm.region_free(f.pid, f.va, self.huge, &f.vma) {
            if mm.reserve(f.pid, base, self.huge).is_some() {
                return Ok(self.map_from_reservation(mm, f)?.expect("just reserved"));
            }
            mm.counters.fallbacks += 1;
        }
        map_base_page(mm, f)
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({"promote_at_pages": self.needed})
    }
}
