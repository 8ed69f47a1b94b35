//! One process's address space as the OS model sees it: its VMAs and the pages it has
//! mapped (the OS's own record, like Linux's VMAs plus page structs; the page table is
//! the hardware's view of the same mappings).

use super::page_index::PageIndex;
use super::vma::VmaSet;
use crate::addr::{Asid, PageSize, Perms, Pid};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub pa: u64,
    pub size: PageSize,
    pub perms: Perms,
    /// The frame belongs to this shared object rather than to the address space.
    pub(crate) object: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct AddressSpace {
    pub(crate) pid: Pid,
    pub(crate) asid: Asid,
    pub vmas: VmaSet,
    /// Mapped pages by virtual address.
    pub pages: PageIndex,
    /// The heap: [heap_start, heap_end), once a brk event has been seen.
    pub(crate) heap: Option<(u64, u64)>,
    /// Shared objects this space holds a reference to.
    pub(crate) objects: Vec<u32>,
}

impl AddressSpace {
    pub(crate) fn new(pid: Pid, asid: Asid) -> AddressSpace {
        AddressSpace { pid, asid, vmas: VmaSet::default(), pages: PageIndex::default(), heap: None, objects: Vec::new() }
    }

    /// The mapped page covering `va`, if any.
    #[inline]
    pub(crate) fn mapping_at(&self, va: u64) -> Option<(u64, Mapping)> {
        self.pages.get(va)
    }

    /// Host hint for a fault at `va` that is coming (`PageIndex::prefetch`).
    #[inline]
    pub(crate) fn prefetch_mapping(&self, va: u64) {
        self.pages.prefetch(va)
    }
}
