//! FIXED(size) (Romer §3.4's baseline): every demand fault maps a page of `os.page_size`;
//! where the aligned page would leave the VMA, overlap a mapped page, or find no free
//! block, the next smaller size the page table supports is tried (`faults.fallbacks`).

use super::PageSizePolicy;
use crate::addr::PageSize;
use crate::config::Config;
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
    pub fn new<P: PageTable>(cfg: &Config, pt: &P) -> Result<Fixed> {
        let page_size = PageSize::from_bytes(cfg.os.page_size.0).map_err(|m| Error::config("os.page_size", m))?;
        let mut try_sizes: Vec<PageSize> = pt.page_sizes().iter().copied().filter(|&s| s <= page_size).collect();
        try_sizes.sort_by(|a, b| b.cmp(a));
        if try_sizes.first() != Some(&page_size) {
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
        for &s in &self.try_sizes {
            let Some(base) = mm.region_free(f.pid, f.va, s, &f.vma) else { continue };
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
