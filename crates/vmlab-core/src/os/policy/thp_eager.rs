//! THP, eager (Linux transparent huge pages with `enabled=always`): a demand fault maps
//! a huge page when the aligned huge region around it lies inside the VMA, overlaps no
//! mapped page, and a free aligned block exists; otherwise a 4K page. A fault that was
//! eligible but found no free huge block counts in `faults.fallbacks` (Linux's
//! `thp_fault_fallback`). Compaction is not modelled (as the TPS paper's study).

use super::{map_base_page, map_fresh, PageSizePolicy};
use crate::addr::PageSize;
use crate::error::Result;
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};

pub struct ThpEager {
    huge: PageSize,
}

impl ThpEager {
    pub(crate) fn new(huge: PageSize) -> ThpEager {
        ThpEager { huge }
    }
}

impl PageSizePolicy for ThpEager {
    fn granule(&self) -> PageSize {
        self.huge
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        if let Some(base) = mm.region_free(f.pid, f.va, self.huge, &f.vma) {
            if let Some(t) = map_fresh(mm, f, base, self.huge)? {
                return Ok(t);
            }
            mm.counters.fallbacks += 1;
        }
        map_base_page(mm, f)
    }
}
