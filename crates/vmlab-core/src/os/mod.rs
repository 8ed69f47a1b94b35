//! The OS model: address spaces, VMAs from trace events (or implicit anonymous memory),
//! demand paging with a page-size policy, the buddy frame allocator, ASIDs.
//!
//! The OS owns the page table (it is the only one that maps and unmaps). Changes that
//! the MMU must see (TLB and walk-cache shootdowns) are queued in `shootdowns` and
//! applied by the engine.

pub mod address_space;
pub mod buddy;
pub mod page_index;
pub mod vma;

use crate::addr::{AccessKind, Asid, PageSize, Perms, Pid};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pt::{PageTable, Translation};
use crate::trace::{MapFlags, Record};
use address_space::{AddressSpace, Mapping};
use buddy::{BuddyAllocator, FrameUse};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use vma::Vma;

/// A TLB/walk-cache invalidation the engine must apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shootdown {
    /// The page of `va` changed (unmapped or re-protected).
    Page { asid: Asid, va: u64 },
    /// The address space is gone.
    Space { asid: Asid },
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct OsCounters {
    /// All faults: demand (page not present) + protection.
    pub count: u64,
    /// Faults that mapped a page (the page was not present).
    pub demand: u64,
    /// Accesses whose page was present without the needed permission. The trace is the
    /// ground truth, so the OS grants the access (as COW or a missed mprotect would).
    pub protection: u64,
    /// Demand faults outside every announced VMA (implicit anonymous memory).
    pub implicit: u64,
    /// Demand faults that mapped a smaller page than the policy asked for (VMA bounds,
    /// existing neighbours or fragmentation).
    pub fallbacks: u64,
    pub pages_unmapped: u64,
    pub processes_created: u64,
    pub processes_exited: u64,
    pub context_switches: u64,
}

struct SharedObject {
    /// Frame of each 4 KiB page, by offset in the object.
    frames: HashMap<u64, u64>,
    refs: u32,
}

pub struct Os<P: PageTable> {
    pub pt: P,
    pub mem: BuddyAllocator,
    spaces: HashMap<Pid, AddressSpace>,
    free_asids: BTreeSet<Asid>,
    next_asid: Asid,
    objects: Vec<Option<SharedObject>>,
    /// FIXED policy page size.
    page_size: PageSize,
    /// Sizes to try, largest first (supported by the page table, <= page_size).
    try_sizes: Vec<PageSize>,
    implicit_anon: bool,
    pub current: Option<Pid>,
    pub shootdowns: Vec<Shootdown>,
    pub counters: OsCounters,
    /// Pages currently mapped, by size.
    pub mapped_by_size: BTreeMap<PageSize, u64>,
    mapped_now: u64,
    /// The most pages mapped at once, and the page-table bytes at that moment.
    pub peak_mapped_pages: u64,
    pub pt_bytes_at_peak: u64,
}

impl<P: PageTable> Os<P> {
    pub fn new(cfg: &Config, pt: P) -> Result<Os<P>> {
        let mem = BuddyAllocator::new(cfg.machine.phys_mem.0)?;
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
        Ok(Os {
            pt,
            mem,
            spaces: HashMap::new(),
            free_asids: BTreeSet::new(),
            next_asid: 0,
            objects: Vec::new(),
            page_size,
            try_sizes,
            implicit_anon: cfg.os.implicit_anon,
            current: None,
            shootdowns: Vec::new(),
            counters: OsCounters::default(),
            mapped_by_size: BTreeMap::new(),
            mapped_now: 0,
            peak_mapped_pages: 0,
            pt_bytes_at_peak: 0,
        })
    }

    /// The ASID of `pid`, creating the process if it is new (traces may start with
    /// accesses of processes they never announced).
    pub fn asid_of(&mut self, pid: Pid) -> Result<Asid> {
        if let Some(s) = self.spaces.get(&pid) {
            return Ok(s.asid);
        }
        self.create_process(pid).map(|s| s.asid)
    }

    fn create_process(&mut self, pid: Pid) -> Result<&mut AddressSpace> {
        let asid = match self.free_asids.pop_first() {
            Some(a) => a,
            None => {
                // ANY_ASID (u16::MAX) is reserved for global entries.
                if self.next_asid == Asid::MAX {
                    return Err(Error::Sim("more than 65535 live processes".into()));
                }
                self.next_asid += 1;
                self.next_asid - 1
            }
        };
        self.pt.create_space(&mut self.mem, asid)?;
        self.counters.processes_created += 1;
        Ok(self.spaces.entry(pid).or_insert_with(|| AddressSpace::new(pid, asid)))
    }

    pub fn space(&self, pid: Pid) -> Option<&AddressSpace> {
        self.spaces.get(&pid)
    }

    pub fn spaces(&self) -> impl Iterator<Item = &AddressSpace> {
        self.spaces.values()
    }

    /// Handle a translation fault of `pid` at `va`: the walk found no mapping, or one
    /// without the permission `kind` needs. Returns the translation now in place.
    pub fn fault(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<Translation> {
        self.counters.count += 1;
        let need = Perms::needed_for(kind);
        let space = self.spaces.get(&pid).ok_or_else(|| Error::Sim(format!("fault in unknown pid {pid}")))?;
        let asid = space.asid;
        if let Some((base, m)) = space.mapping_at(va) {
            // Present but lacking permission: grant it.
            self.counters.protection += 1;
            let perms = m.perms.union(need);
            self.spaces.get_mut(&pid).unwrap().pages.update(base, |x| x.perms = perms);
            self.pt.protect(asid, va, perms);
            self.shootdowns.push(Shootdown::Page { asid, va: base });
            return Ok(self.pt.translate(asid, va).unwrap_or(Translation { pa: m.pa, size: m.size, perms }));
        }
        self.counters.demand += 1;
        let vma = match space.vmas.find(va) {
            Some(v) => *v,
            None if self.implicit_anon => {
                self.counters.implicit += 1;
                self.implicit_vma(pid, va)
            }
            None => {
                return Err(Error::Sim(format!(
                    "pid {pid} accessed {va:#x}, outside every VMA (os.implicit_anon = false)"
                )))
            }
        };
        let perms = vma.perms.union(need);
        self.map_demand(pid, asid, va, &vma, perms)
    }

    /// Make an anonymous read/write/execute VMA for an access outside every region: the
    /// aligned block of the policy page size around `va`, clipped to the gap it sits in.
    fn implicit_vma(&mut self, pid: Pid, va: u64) -> Vma {
        let space = self.spaces.get_mut(&pid).unwrap();
        let (lo, hi) = space.vmas.gap_around(va);
        let s = self.page_size;
        let mut start = s.align_down(va);
        let mut end = start.saturating_add(s.bytes());
        if start < lo || end > hi {
            start = PageSize::K4.align_down(va);
            end = start + PageSize::K4.bytes();
        }
        let v = Vma { start, end, perms: Perms::RWX_USER, flags: MapFlags::PRIVATE, object: None, implicit: true };
        space.vmas.insert(v);
        v
    }

    fn map_demand(&mut self, pid: Pid, asid: Asid, va: u64, vma: &Vma, perms: Perms) -> Result<Translation> {
        // Shared objects are mapped with base pages so every sharer sees the same frames.
        let sizes: &[PageSize] = if vma.object.is_some() { &[PageSize::K4] } else { &self.try_sizes };
        let space = self.spaces.get(&pid).unwrap();
        let mut chosen = None;
        for &s in sizes {
            let base = s.align_down(va);
            let end = base.wrapping_add(s.bytes());
            if end <= base || !vma.contains_range(base, end) || space.pages.any_in(base, end) {
                continue;
            }
            let pa = match vma.object {
                Some(obj) => self.object_frame(obj, base - vma.start)?,
                None => match self.mem.try_alloc(s, FrameUse::Data) {
                    Some(pa) => pa,
                    None => continue,
                },
            };
            chosen = Some((base, s, pa));
            break;
        }
        let Some((base, size, pa)) = chosen else {
            return Err(Error::OutOfMemory(format!(
                "pid {pid} faulted at {va:#x} with {} of {} physical memory in use and no free 4K frame (os.on_oom = \"error\"; raise machine.phys_mem)",
                crate::addr::format_bytes(self.mem.counters().frames_used * 4096),
                crate::addr::format_bytes(self.mem.counters().phys_bytes),
            )));
        };
        if size < self.page_size {
            self.counters.fallbacks += 1;
        }
        if let Err(e) = self.pt.map(&mut self.mem, asid, base, pa, size, perms) {
            if vma.object.is_none() {
                self.mem.free(pa, size, FrameUse::Data);
            }
            return Err(e);
        }
        let m = Mapping { pa, size, perms, object: vma.object };
        self.spaces.get_mut(&pid).unwrap().pages.insert(base, m);
        *self.mapped_by_size.entry(size).or_default() += 1;
        self.mapped_now += 1;
        if self.mapped_now > self.peak_mapped_pages {
            self.peak_mapped_pages = self.mapped_now;
            self.pt_bytes_at_peak = self.pt.footprint().bytes;
        }
        // What the TLB gets is the table's own translation: under nested paging that
        // is guest-virtual to host-physical, not the guest-physical frame allocated here.
        Ok(self.pt.translate(asid, va).unwrap_or(Translation { pa, size, perms }))
    }

    fn object_frame(&mut self, obj: u32, offset: u64) -> Result<u64> {
        let page = offset >> 12;
        let o = self.objects[obj as usize].as_mut().expect("live object");
        if let Some(&pa) = o.frames.get(&page) {
            return Ok(pa);
        }
        let pa = self.mem.alloc(PageSize::K4, FrameUse::Data)?;
        o.frames.insert(page, pa);
        Ok(pa)
    }

    /// Apply an OS event record. Accesses and ticks are not OS events.
    pub fn event(&mut self, r: &Record) -> Result<()> {
        match *r {
            Record::Mmap { pid, start, len, prot, flags } => self.mmap(pid, start, len, prot, flags),
            Record::Munmap { pid, start, len } => {
                self.asid_of(pid)?;
                let (s, e) = page_range(start, len);
                self.unmap_range(pid, s, e);
                self.spaces.get_mut(&pid).unwrap().vmas.remove_range(s, e);
                Ok(())
            }
            Record::Mprotect { pid, start, len, prot } => {
                self.asid_of(pid)?;
                let (s, e) = page_range(start, len);
                let perms = Perms::from_prot(prot as u32);
                let space = self.spaces.get_mut(&pid).unwrap();
                space.vmas.protect_range(s, e, perms);
                let asid = space.asid;
                for base in space.pages.bases_in(s, e) {
                    space.pages.update(base, |m| m.perms = perms);
                    self.pt.protect(asid, base, perms);
                    self.shootdowns.push(Shootdown::Page { asid, va: base });
                }
                Ok(())
            }
            Record::Brk { pid, end } => self.brk(pid, end),
            Record::Fork { parent, child } => self.fork(parent, child),
            Record::Exit { pid } => {
                self.exit(pid);
                Ok(())
            }
            Record::ContextSwitch { pid } => {
                self.asid_of(pid)?;
                if self.current != Some(pid) {
                    self.counters.context_switches += 1;
                    self.current = Some(pid);
                }
                Ok(())
            }
            Record::Access(_) | Record::Tick(_) => Ok(()),
        }
    }

    fn mmap(&mut self, pid: Pid, start: u64, len: u64, prot: u8, flags: MapFlags) -> Result<()> {
        self.asid_of(pid)?;
        let (s, e) = page_range(start, len);
        if s >= e {
            return Ok(());
        }
        // MAP_FIXED over existing pages replaces them.
        self.unmap_range(pid, s, e);
        let object = if flags.contains(MapFlags::SHARED) {
            self.objects.push(Some(SharedObject { frames: HashMap::new(), refs: 1 }));
            let id = (self.objects.len() - 1) as u32;
            self.spaces.get_mut(&pid).unwrap().objects.push(id);
            Some(id)
        } else {
            None
        };
        let vma = Vma { start: s, end: e, perms: Perms::from_prot(prot as u32), flags, object, implicit: false };
        self.spaces.get_mut(&pid).unwrap().vmas.insert(vma);
        Ok(())
    }

    fn brk(&mut self, pid: Pid, end: u64) -> Result<()> {
        self.asid_of(pid)?;
        let end = PageSize::K4.align_down(end + 4095);
        let space = self.spaces.get_mut(&pid).unwrap();
        match space.heap {
            // The first brk tells where the heap starts.
            None => space.heap = Some((end, end)),
            Some((hs, he)) => {
                let new_end = end.max(hs);
                if new_end > he {
                    let v = Vma { start: hs, end: new_end, perms: Perms::RW_USER, flags: MapFlags::PRIVATE, object: None, implicit: false };
                    space.vmas.insert(v);
                } else if new_end < he {
                    space.vmas.remove_range(new_end, he);
                    self.unmap_range(pid, new_end, he);
                }
                self.spaces.get_mut(&pid).unwrap().heap = Some((hs, new_end));
            }
        }
        Ok(())
    }

    /// The child gets a copy of the parent's VMAs (shared regions stay shared) and no
    /// mapped pages: it demand-faults its own (vmlab does not model copy-on-write).
    fn fork(&mut self, parent: Pid, child: Pid) -> Result<()> {
        self.asid_of(parent)?;
        if self.spaces.contains_key(&child) {
            self.exit(child);
        }
        self.create_process(child)?;
        let p = self.spaces.get(&parent).unwrap();
        let (vmas, heap, objects) = (p.vmas.clone(), p.heap, p.objects.clone());
        for &o in &objects {
            self.objects[o as usize].as_mut().unwrap().refs += 1;
        }
        let c = self.spaces.get_mut(&child).unwrap();
        c.vmas = vmas;
        c.heap = heap;
        c.objects = objects;
        Ok(())
    }

    fn exit(&mut self, pid: Pid) {
        let Some(space) = self.spaces.get(&pid) else { return };
        let asid = space.asid;
        self.unmap_range(pid, 0, u64::MAX);
        let space = self.spaces.remove(&pid).unwrap();
        for o in space.objects {
            let obj = self.objects[o as usize].as_mut().unwrap();
            obj.refs -= 1;
            if obj.refs == 0 {
                let obj = self.objects[o as usize].take().unwrap();
                for (_, pa) in obj.frames {
                    self.mem.free(pa, PageSize::K4, FrameUse::Data);
                }
            }
        }
        self.pt.destroy_space(&mut self.mem, asid);
        self.free_asids.insert(asid);
        self.shootdowns.push(Shootdown::Space { asid });
        self.counters.processes_exited += 1;
        if self.current == Some(pid) {
            self.current = None;
        }
    }

    /// Unmap every page overlapping [start, end); a large page that straddles the
    /// boundary is unmapped whole (its remainder re-faults in smaller pages).
    fn unmap_range(&mut self, pid: Pid, start: u64, end: u64) {
        let Some(space) = self.spaces.get_mut(&pid) else { return };
        let asid = space.asid;
        for base in space.pages.bases_in(start, end) {
            let m = space.pages.remove(base).unwrap();
            self.pt.unmap(&mut self.mem, asid, base);
            if m.object.is_none() {
                self.mem.free(m.pa, m.size, FrameUse::Data);
            }
            *self.mapped_by_size.get_mut(&m.size).unwrap() -= 1;
            self.mapped_now -= 1;
            self.counters.pages_unmapped += 1;
            self.shootdowns.push(Shootdown::Page { asid, va: base });
        }
    }
}

/// [start, start+len) widened to 4 KiB boundaries.
fn page_range(start: u64, len: u64) -> (u64, u64) {
    let s = PageSize::K4.align_down(start);
    let e = start.saturating_add(len).saturating_add(4095) & !4095;
    (s, e.max(s))
}
