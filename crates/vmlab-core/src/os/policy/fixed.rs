//! FIXED(size) (Romer §3.4's baseline): every demand fault maps a page of `os.page_size`;
//! where the aligned page would leave the VMA, overlap a mapped page, or find no free
//! block, the next smaller size the page table supports is tried (`faults.fallbacks`).
//!
//! Where the page table fixes the size by address (`PageTable::page_size_at`: a region
//! of the short-format VHPT, whose PTEs take their size from the region register,
//! Chapman et al. §2.3.1), the fault maps a page of exactly that size instead; see
//! [`region_page`].

use super::PageSizePolicy;
use crate::addr::PageSize;
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::os::buddy::FrameUse;
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};

pub struct Fixed {
    page_size: PageSize,
    /// Sizes to try, largest first (supported by the page table, <= page_size).
    try_sizes: Vec<PageSize>,
}

impl Fixed {
    /// FIXED(`page_size`, `os.page_size`) over `pt`.
    pub(crate) fn new<P: PageTable>(page_size: Bytes, pt: &P) -> Result<Fixed> {
        let page_size = PageSize::from_bytes(page_size.0).map_err(|m| Error::config("os.page_size", m))?;
        let mut try_sizes: Vec<PageSize> = pt.page_sizes().iter().copied().filter(|&s| s <= page_size).collect();
        try_sizes.sort_by(|a, b| b.cmp(a));
        // A table that fixes sizes by address is checked by its config (os.page_size = 4K).
        if try_sizes.first() != Some(&page_size) && !pt.sizes_by_address() {
            return Err(Error::config(
                "os.page_size",
                format!(
                    "a {} page table cannot map {} pages (it maps {})",
                    pt.kind(),
                    page_size,
                    pt.page_sizes().iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(Fixed { page_size, try_sizes })
    }
}

impl PageSizePolicy for Fixed {
    fn granule(&self) -> PageSize {
        self.page_size
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        if let Some(s) = mm.pt.page_size_at(f.va) {
            return region_page(mm, f, s);
        }
        for &s in &self.try_sizes {
            // Nothing is mapped for this fault until the loop returns.
            let free = if s == PageSize::K4 { mm.demand_base_page(f) } else { mm.region_free(f.pid, f.va, s, &f.vma) };
            let Some(base) = free else { continue };
            let pa = if s == PageSize::K4 { mm.alloc_base_frame(base) } else { mm.mem.try_alloc(s, FrameUse::Data) };
            let Some(pa) = pa else { continue };
            if s < self.page_size {
                mm.counters.fallbacks += 1;
            }
            return mm.map_page(f.pid, f.asid, base, pa, s, f.perms, None).inspect_err(|_| mm.free_data(pa, s));
        }
        Err(mm.oom(f.pid, f.va))
    }
}

/// A fault in a short-VHPT region whose page size is `size` (rr.ps, Chapman et al.
/// §2.3.1: "the page size is fixed for each region of each process"): map the aligned
/// page of `size` around the fault, never a smaller one (the table has no entry for
/// it). Like Linux/ia64, which gives a region one page size and rounds every mapping
/// there out to whole pages, the page is mapped whole even where it reaches past the
/// VMA (x86 traces lay VMAs out at 4K): it gets the faulting VMA's permissions, and a
/// neighbouring VMA it covers is translated by it (an access there that needs more
/// rights is granted as a protection fault). No free block of `size` is an
/// out-of-memory error: there is no smaller page to fall back to.
fn region_page<P: PageTable>(mm: &mut Mm<P>, f: &DemandFault, size: PageSize) -> Result<Translation> {
    let base = size.align_down(f.va);
    let end = base + size.bytes();
    // Every page of the region has `size`, so an unmapped address's page is free.
    if mm.space(f.pid).is_some_and(|s| s.pages.any_in(base, end)) {
        return Err(Error::Sim(format!("pid {} faulted at {:#x}: its {size} region page overlaps a mapped page", f.pid, f.va)));
    }
    let pa = if size == PageSize::K4 { mm.alloc_base_frame(base) } else { mm.alloc_frames(size, FrameUse::Data) };
    let Some(pa) = pa else {
        return Err(Error::OutOfMemory(format!(
            "pid {} faulted at {:#x}, in a region of {size} pages (page_table.linear.region_page_sizes), and no free {size} block is left (raise machine.phys_mem)",
            f.pid, f.va
        )));
    };
    mm.map_page(f.pid, f.asid, base, pa, size, f.perms, None).inspect_err(|_| mm.free_data(pa, size))
}
