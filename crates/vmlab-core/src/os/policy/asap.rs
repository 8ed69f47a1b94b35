//! Romer's oblivious promotion policies (§3.4.4), which look only at which pages are in
//! use, not at the TLB miss stream; their bookkeeping is done as pages are mapped, so
//! they charge nothing per miss (Table 3-3). Promotions copy (no reservations, §3.4.4).
//!
//! - **ASAP**: promote a superpage as soon as all of its base pages have been
//!   referenced (mapped), up to `os.policy.romer.max_size`.
//! - **ASAP-4-64** (after Talluri): only 4K and `asap_4_64_size` (64K) pages; promote
//!   as soon as `asap_4_64_fraction` (half) of the 64K page's base pages are mapped.

use super::romer::RomerConfig;
use super::{map_base_page, PageSizePolicy};
use crate::addr::PageSize;
use crate::error::Result;
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};

pub struct Asap {
    max: PageSize,
}

impl Asap {
    pub(crate) fn new(rc: &RomerConfig) -> Asap {
        Asap { max: rc.max() }
    }
}

/// Bytes of [base, base + size) that `pid` has mapped, if the range lies inside the
/// fault's VMA (else None: it can never be promoted).
fn mapped_bytes<P: PageTable>(mm: &Mm<P>, f: &DemandFault, base: u64, size: PageSize) -> Option<u64> {
    let end = base.checked_add(size.bytes())?;
    f.vma.contains_range(base, end).then(|| mm.pages_in(f.pid, base, end).iter().map(|(_, m)| m.size.bytes()).sum())
}

/// The translation now covering the fault's address (after a promotion).
fn current<P: PageTable>(mm: &Mm<P>, f: &DemandFault) -> Translation {
    mm.translation_at(f.pid, f.va).expect("the fault's page is mapped")
}

impl PageSizePolicy for Asap {
    fn granule(&self) -> PageSize {
        self.max
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        let t = map_base_page(mm, f)?;
        // The largest fully populated superpage around the new page.
        let mut full = None;
        for s in 13..=self.max.shift() {
            let size = PageSize::from_valid_shift(s);
            if mapped_bytes(mm, f, size.align_down(f.va), size) != Some(size.bytes()) {
                break;
            }
            full = Some(size);
        }
        match full {
            Some(size) if mm.promote_by_copy(f.pid, size.align_down(f.va), size)? => Ok(current(mm, f)),
            _ => Ok(t),
        }
    }
}

pub struct Asap464 {
    size: PageSize,
    /// Mapped base pages that trigger promotion.
    needed: u64,
}

impl Asap464 {
    pub(crate) fn new(rc: &RomerConfig) -> Asap464 {
        let size = PageSize::from_valid_shift(rc.asap_4_64_size.0.trailing_zeros() as u8);
        let needed = ((rc.asap_4_64_fraction * size.base_pages() as f64).ceil() as u64).clamp(1, size.base_pages());
        Asap464 { size, needed }
    }
}

impl PageSizePolicy for Asap464 {
    fn granule(&self) -> PageSize {
        self.size
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        let t = map_base_page(mm, f)?;
        let base = self.size.align_down(f.va);
        if mapped_bytes(mm, f, base, self.size).is_some_and(|b| b / 4096 >= self.needed) && mm.promote_by_copy(f.pid, base, self.size)? {
            return Ok(current(mm, f));
        }
        Ok(t)
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({"size": self.size.to_string(), "promote_at_pages": self.needed})
    }
}
