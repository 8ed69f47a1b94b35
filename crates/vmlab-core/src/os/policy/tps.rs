//! Tailored Page Sizes' OS side (TPS §III-B1): demand paging with frame reservations
//! that grow in place through every power-of-two page size.
//!
//! The first fault in a region reserves the largest aligned power-of-two block around
//! it that lies inside the VMA and overlaps no mapped page (conservative rounding, TPS
//! §III-B2: a 28K region gets 16K + 8K + 4K, never a page larger than the request),
//! up to `os.policy.tps.max_size`; if the buddy allocator has no free block of that
//! size (fragmentation), the next smaller size is tried (`faults.fallbacks`), down to a
//! plain 4K page. Each fault maps its 4K page from the reservation at its natural
//! offset, then *grows* the page around it: the largest aligned block inside the
//! reservation of which `os.policy.threshold` of the base pages are populated (100% by
//! default, TPS's 50% option) becomes one page, in place (no copy; below 100% the
//! unpopulated frames become untouched data, i.e. bloat). A page table that maps every
//! 2^n size is needed (`page_table.radix.tailored`).
//!
//! Aggressive rounding (`os.policy.tps.rounding = "aggressive"`, §III-B2: "the smallest
//! size page still larger than the requested memory allocation", 2052K → 4M) lets the
//! reservation reach past the VMA when the VMA fills more than half of it and the rest
//! is free address space; the OS then rounds the request up (the VMA grows to cover the
//! reservation), trading internal fragmentation for fewer, larger pages. Whether those
//! pages form still follows the threshold: at 100% a rounded-up tail the program never
//! touches stays reserved, not mapped; at 50% it becomes one page.

use super::{map_base_page, PageSizePolicy};
use crate::addr::PageSize;
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};
use serde::{Deserialize, Serialize};

/// `[os.policy.tps]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TpsConfig {
    /// Largest reservation (and page).
    pub max_size: Bytes,
    /// How a request that is not a power of two is covered (§III-B2).
    pub rounding: Rounding,
}

/// `os.policy.tps.rounding`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    /// Never a page past the request: 28K → 16K + 8K + 4K.
    #[default]
    Conservative,
    /// The next power of two: 2052K → 4M, the VMA grown to match.
    Aggressive,
}

impl Default for TpsConfig {
    fn default() -> Self {
        TpsConfig { max_size: Bytes(1 << 30), rounding: Rounding::default() }
    }
}

impl TpsConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == TpsConfig::default()
    }

    pub(crate) fn max(&self) -> Result<PageSize> {
        let s = PageSize::from_bytes(self.max_size.0).map_err(|m| Error::config("os.policy.tps.max_size", m))?;
        if s <= PageSize::K4 {
            return Err(Error::config("os.policy.tps.max_size", "must be larger than 4K"));
        }
        Ok(s)
    }
}

pub struct TailoredPageSizes {
    max: PageSize,
    threshold: f64,
    rounding: Rounding,
    /// Reservations that reached past their VMA, and the bytes the VMAs grew by.
    rounded_up: u64,
    rounded_up_bytes: u64,
}

impl TailoredPageSizes {
    pub(crate) fn new(max: PageSize, threshold: f64, rounding: Rounding) -> TailoredPageSizes {
        TailoredPageSizes { max, threshold, rounding, rounded_up: 0, rounded_up_bytes: 0 }
    }

    /// Where a reservation of `size` around the fault may go: its base, and whether
    /// the request must be rounded up (the VMA grown) to cover it.
    fn region<P: PageTable>(&self, mm: &Mm<P>, f: &DemandFault, size: PageSize) -> Option<(u64, bool)> {
        if let Some(base) = mm.region_free(f.pid, f.va, size, &f.vma) {
            return Some((base, false));
        }
        (self.rounding == Rounding::Aggressive && mm.can_round_up(f.pid, f.va, size, &f.vma)).then(|| (size.align_down(f.va), true))
    }

    /// Populated base pages at which a block of `size` becomes one page.
    fn needed(&self, size: PageSize) -> u64 {
        ((self.threshold * size.base_pages() as f64).ceil() as u64).clamp(1, size.base_pages())
    }

    /// Map the fault's 4K page from the reservation covering it, then grow the page
    /// around it. None if no reservation covers the address.
    fn map_from_reservation<P: PageTable>(&self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Option<Translation>> {
        let Some((pa, key, _)) = mm.populate_reserved(f.pid, f.va) else { return Ok(None) };
        let t = mm.map_page(f.pid, f.asid, PageSize::K4.align_down(f.va), pa, PageSize::K4, f.perms, None)?;
        let r = mm.reservations.get(key).expect("the reservation just populated");
        let (rva, rpa, rsize) = (r.va, r.pa, r.size);
        // The largest block around the fault populated enough to become one page.
        let Some(size) = (13..=rsize.shift()).rev().map(PageSize::from_valid_shift).find(|&s| r.populated_in(s.align_down(f.va), s) >= self.needed(s)) else {
            return Ok(Some(t));
        };
        let base = size.align_down(f.va);
        if size == rsize {
            mm.promote_reservation(key)?;
        } else {
            // Below 100%: the block's unpopulated frames become data of the new page.
            for va in (base..base + size.bytes()).step_by(4096) {
                if !mm.reservations.get(key).expect("still reserved").is_populated(va) {
                    mm.populate_reserved(f.pid, va);
                }
            }
            let pa = rpa + (base - rva);
            if mm.can_promote_in_place(f.pid, base, size, pa) {
                mm.promote_in_place(f.pid, base, size, pa)?;
            }
        }
        Ok(Some(mm.translation_at(f.pid, f.va).expect("the fault's page is mapped")))
    }
}

impl PageSizePolicy for TailoredPageSizes {
    fn granule(&self) -> PageSize {
        self.max
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        if let Some(t) = self.map_from_reservation(mm, f)? {
            return Ok(t);
        }
        let mut wanted = false;
        for s in (13..=self.max.shift()).rev().map(PageSize::from_valid_shift) {
            let Some((base, rounds_up)) = self.region(mm, f, s) else { continue };
            if mm.reserve(f.pid, base, s).is_some() {
                if rounds_up {
                    self.rounded_up += 1;
                    self.rounded_up_bytes += mm.round_up_vma(f.pid, base, s, &f.vma);
                }
                if wanted {
                    mm.counters.fallbacks += 1;
                }
                return Ok(self.map_from_reservation(mm, f)?.expect("just reserved"));
            }
            wanted = true;
        }
        if wanted {
            mm.counters.fallbacks += 1;
        }
        map_base_page(mm, f)
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "max_size": self.max.to_string(),
            "threshold": self.threshold,
            "rounding": self.rounding,
            "rounded_up": self.rounded_up,
            "rounded_up_bytes": self.rounded_up_bytes,
        })
    }
}
