//! One process's address space as the OS model sees it: its VMAs and the pages it has
//! mapped (the OS's own record, like Linux's VMAs plus page structs; the page table is
//! the hardware's view of the same mappings).

use super::vma::VmaSet;
use crate::addr::{Asid, PageSize, Perms, Pid};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub pa: u64,
    pub size: PageSize,
    pub perms: Perms,
    /// The frame belongs to this shared object rather than to the address space.
    pub object: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct AddressSpace {
    pub pid: Pid,
    pub asid: Asid,
    pub vmas: VmaSet,
    /// Mapped pages keyed by virtual base address.
    pub pages: BTreeMap<u64, Mapping>,
    /// The heap: [heap_start, heap_end), once a brk event has been seen.
    pub heap: Option<(u64, u64)>,
    /// Shared objects this space holds a reference to.
    pub objects: Vec<u32>,
}

impl AddressSpace {
    pub fn new(pid: Pid, asid: Asid) -> AddressSpace {
        AddressSpace { pid, asid, vmas: VmaSet::default(), pages: BTreeMap::new(), heap: None, objects: Vec::new() }
    }

    /// The mapped page covering `va`, if any.
    pub fn mapping_at(&self, va: u64) -> Option<(u64, Mapping)> {
        self.pages
            .range(..=va)
            .next_back()
            .filter(|(&b, m)| va < b + m.size.bytes())
            .map(|(&b, m)| (b, *m))
    }

    /// Whether any mapped page overlaps [start, end).
    pub fn any_mapped_in(&self, start: u64, end: u64) -> bool {
        if self.pages.range(start..end).next().is_some() {
            return true;
        }
        self.mapping_at(start).is_some()
    }

    /// Base addresses of the pages overlapping [start, end).
    pub fn pages_in(&self, start: u64, end: u64) -> Vec<u64> {
        let mut v: Vec<u64> = Vec::new();
        if let Some((b, _)) = self.mapping_at(start) {
            if b < start {
                v.push(b);
            }
        }
        v.extend(self.pages.range(start..end).map(|(&b, _)| b));
        v
    }
}
