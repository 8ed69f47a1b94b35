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
//! 2^n size is needed (`page_table.radix.tailored`). Aggressive rounding (the next
//! power of two above the request) is not built.

use super::{map_base_page, PageSizePolicy};
use crate::addr::PageSize;
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};
use serde::{Deserialize, Serialize};

/// `[os.policy.tps]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TpsConfig {
    /// Largest reservation (and page).
    #[serde(default = "g1")]
    pub max_size: Bytes,
}

fn g1() -> Bytes {
    Bytes(1 << 30)
}

impl Default for TpsConfig {
    fn default() -> Self {
        TpsConfig { max_size: g1() }
    }
}

impl TpsConfig {
    pub fn is_default(&self) -> bool {
        *self == TpsConfig::default()
    }

    pub fn max(&self) -> Result<PageSize> {
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
}

impl TailoredPageSizes {
    pub fn new(max: PageSize, threshold: f64) -> TailoredPageSizes {
        TailoredPageSizes { max, threshold }
    }

    /// Populated base pages at which a block of `size` becomes one page.
    fn needed(&self, size: PageSize) -> u64 {
        ((self.threshold * size.base_pages() as f64).ceil() as u64).clamp(1, size.base_pages())
    }

    /// Map the fault's 4K page from the reservation covering it, then grow the page
    /// around it. None if no reservation covers the address.
    fn from_reservation<P: PageTable>(&self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Option<Translation>> {
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
        if let Some(t) = self.from_reservation(mm, f)? {
            return Ok(t);
        }
        let mut wanted = false;
        for s in (13..=self.max.shift()).rev().map(PageSize::from_valid_shift) {
            let Some(base) = mm.region_free(f.pid, f.va, s, &f.vma) else { continue };
            if mm.reserve(f.pid, base, s).is_some() {
                if wanted {
                    mm.counters.fallbacks += 1;
                }
                return Ok(self.from_reservation(mm, f)?.expect("just reserved"));
            }
            wanted = true;
        }
        if wanted {
            mm.counters.fallbacks += 1;
        }
        map_base_page(mm, f)
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({"max_size": self.max.to_string(), "threshold": self.threshold})
    }
}
