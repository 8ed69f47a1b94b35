//! The OS model: address spaces, VMAs from trace events (or implicit anonymous memory),
//! demand paging with a page-size policy, the buddy frame allocator, ASIDs.
//!
//! The OS owns the page table (it is the only one that maps and unmaps). Changes that
//! the MMU must see (TLB and walk-cache shootdowns) are queued in `shootdowns` and
//! applied by the engine.

pub mod address_space;
pub mod buddy;
pub mod fragmentation;
pub mod page_index;
pub mod placement;
pub mod policy;
pub mod promotion;
pub mod recolor;
pub mod reservation;
pub mod rmap;
pub mod shadow;
pub mod touched;
pub mod vma;

use crate::addr::{AccessKind, Asid, PageSize, Perms, Pid};
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::pt::{FastPaths, PageTable, Translation};
use crate::trace::{MapFlags, Record};
use address_space::{AddressSpace, Mapping};
use buddy::{BuddyAllocator, FrameUse};
use fragmentation::FragmentationConfig;
use placement::{ColorCache, Placement};
use policy::{PagePolicy, PolicyCounters, TlbMiss};
use recolor::{RecolorCounters, Recolorer};
use reservation::{ReleaseReason, Reservation, Reservations};
use rmap::ReverseMap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use touched::TouchedFrames;
use vma::Vma;

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
/// `os.on_oom`: what running out of simulated memory does.
pub enum OomPolicy {
    /// Stop the run with an error naming the faulting address.
    #[default]
    Error,
}

/// Most live processes `os.max_processes` allows: each costs about 100 KiB of host
/// memory (its page index and page-table nodes), so 8192 stay under 1 GiB. (The ASIDs
/// would allow 65535: ANY_ASID, u16::MAX, tags global entries.)
pub const MAX_LIVE_PROCESSES: u32 = 8192;
const DEFAULT_MAX_PROCESSES: u32 = 4096;
fn default_max_processes() -> u32 {
    DEFAULT_MAX_PROCESSES
}
fn is_default_max_processes(n: &u32) -> bool {
    *n == DEFAULT_MAX_PROCESSES
}

/// `[os]`: the OS model's settings.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OsConfig {
    /// FIXED page-size policy: the page size demand faults map (falls back to smaller
    /// supported sizes where the aligned page does not fit the VMA or memory).
    pub page_size: Bytes,
    /// Treat accesses outside every announced VMA as anonymous read/write memory.
    #[serde(default = "crate::config::yes")]
    pub implicit_anon: bool,
    #[serde(default)]
    pub on_oom: OomPolicy,
    /// Cycles charged per page fault (kernel entry, allocation, zeroing not modelled).
    #[serde(default)]
    pub fault_cycles: u64,
    /// Fault in every page of a mapping when it is made (MAP_POPULATE), as a program
    /// that initialises its memory before its region of interest leaves it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub populate: bool,
    /// Live processes at once. Each costs host memory (its address space, page-index
    /// and page-table nodes: about 100 KiB for a process of a few scattered pages), so
    /// a trace naming many pids is an error naming this key, not gigabytes.
    #[serde(default = "default_max_processes", skip_serializing_if = "is_default_max_processes")]
    pub max_processes: u32,
    /// The page-size policy (os/policy/); FIXED(page_size) by default.
    #[serde(default, skip_serializing_if = "policy::PolicyConfig::is_default")]
    pub policy: policy::PolicyConfig,
    /// Physical placement of base pages (os/placement.rs): buddy, page-coloring,
    /// bin-hopping or random.
    #[serde(default, skip_serializing_if = "placement::PlacementConfig::is_default")]
    pub placement: placement::PlacementConfig,
    /// Dynamic recolouring (os/recolor/): none, Romer's ch. 4 software policies, or CML.
    #[serde(default, skip_serializing_if = "recolor::RecolorConfig::is_default")]
    pub recolor: recolor::RecolorConfig,
}

/// What the OS model is built from: its own settings (`[os]`), and the few values it
/// needs from other sections. `config.rs` builds it from a whole configuration (a
/// `&Config` converts into it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OsSettings<'a> {
    pub(crate) os: &'a OsConfig,
    /// `machine.phys_mem`: the bytes of simulated physical memory the frame allocator
    /// manages.
    pub(crate) phys_mem: u64,
    /// `machine.fragmentation`: how that memory starts.
    pub(crate) fragmentation: &'a FragmentationConfig,
    /// The cache that page colours come from (placement, recolouring), if any serves
    /// data.
    pub(crate) color_cache: Option<ColorCache>,
    /// `mmu.regions.share`: MAP_SHARED objects get a region with a global RID.
    pub(crate) share_keys: bool,
    /// `mmu.regions.share_text`: program text is a shared object.
    pub(crate) share_text: bool,
}

/// A TLB/walk-cache invalidation the engine must apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shootdown {
    /// The page of `size` at `va` changed (unmapped or re-protected).
    Page { asid: Asid, va: u64, size: PageSize },
    /// The address space is gone.
    Space { asid: Asid },
    /// Drop the TLB entry of `va` only (a recolouring policy provoking a TLB miss).
    TlbEntry { asid: Asid, va: u64 },
    /// Flush every TLB entry (a recolouring policy taking a snapshot).
    TlbFlush,
}

/// A page copy the engine sends through the cache hierarchy (recolouring).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageCopy {
    pub from: u64,
    pub to: u64,
    pub(crate) bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct OsCounters {
    /// All faults: demand (page not present) + protection.
    pub(crate) count: u64,
    /// Faults that mapped a page (the page was not present).
    pub demand: u64,
    /// Accesses whose page was present without the needed permission. The trace is the
    /// ground truth, so the OS grants the access (as COW or a missed mprotect would).
    pub protection: u64,
    /// Demand faults outside every announced VMA (implicit anonymous memory).
    pub(crate) implicit: u64,
    /// Demand faults that mapped a smaller page than the policy asked for (VMA bounds,
    /// existing neighbours or fragmentation).
    pub(crate) fallbacks: u64,
    pub pages_unmapped: u64,
    pub(crate) processes_created: u64,
    pub(crate) processes_exited: u64,
    pub(crate) context_switches: u64,
}

struct SharedObject {
    /// Frame (and page size) of each page, by offset in the object / 4 KiB. Pages are
    /// 4 KiB, or a short-VHPT region's size (`PageTable::page_size_at`).
    frames: HashMap<u64, (u64, PageSize)>,
    refs: u32,
    /// A program's text (`mmu.regions.share_text`), not a MAP_SHARED mapping.
    text: bool,
}

/// A demand fault the page-size policy must resolve: the page of `va` is not mapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DemandFault {
    pub(crate) pid: Pid,
    pub(crate) asid: Asid,
    pub(crate) va: u64,
    /// The VMA `va` lies in (possibly an implicit one the OS just created).
    pub(crate) vma: Vma,
    /// Permissions to map with (the VMA's, plus what the access needed).
    pub(crate) perms: Perms,
}

/// The OS model: the memory-management state ([`Mm`]) and the page-size policy that
/// decides what it maps. They are separate so that a policy can be handed `&mut Mm`.
pub struct Os<P: PageTable> {
    pub mm: Mm<P>,
    pub(crate) policy: PagePolicy,
    /// The dynamic recolouring policy (os/recolor/), if any.
    pub(crate) recolor: Option<Recolorer>,
}

/// Memory-management state and the primitives policies build on: map and unmap pages,
/// allocate frames (breaking reservations under pressure), reservations, promotion and
/// demotion (os/promotion.rs). Every primitive keeps the page table, the OS page index,
/// the frame accounting and the TLB shootdown queue in sync.
pub struct Mm<P: PageTable> {
    pub pt: P,
    pub mem: BuddyAllocator,
    spaces: FxHashMap<Pid, AddressSpace>,
    free_asids: BTreeSet<Asid>,
    next_asid: Asid,
    objects: Vec<Option<SharedObject>>,
    implicit_anon: bool,
    pub(crate) current: Option<Pid>,
    pub(crate) shootdowns: Vec<Shootdown>,
    pub counters: OsCounters,
    /// Pages currently mapped, by size.
    pub(crate) mapped_by_size: BTreeMap<PageSize, u64>,
    mapped_now: u64,
    /// The most pages mapped at once, and the page-table bytes at that moment.
    pub(crate) peak_mapped_pages: u64,
    pub(crate) pt_bytes_at_peak: u64,
    /// Live frame reservations.
    pub(crate) reservations: Reservations,
    /// Data frames the program touched (for bloat).
    pub(crate) touched: TouchedFrames,
    /// Physical memory's contents, when a test checks that data moves with its pages.
    pub shadow: Option<shadow::DataShadow>,
    /// Promotion, demotion, reservation and bloat counters (the `policy` section).
    pub(crate) pc: PolicyCounters,
    /// Cycles charged per KiB copied by a promotion that copies.
    pub(crate) copy_cycles_per_kb: u64,
    /// Where new base pages go in physical memory (page colours).
    pub placement: Placement,
    /// Frame -> virtual page, kept only for recolouring policies that start from
    /// physical pages (CML).
    pub rmap: Option<ReverseMap>,
    /// Recolouring copies for the engine to run through the caches.
    pub copies: Vec<PageCopy>,
    /// Recolouring counters (the `recolor` section).
    pub rc: RecolorCounters,
    /// MAP_SHARED objects get a region with a global RID (`mmu.regions.share`).
    share_keys: bool,
    /// Program text is a shared object (`mmu.regions.share_text`, Chapman et al. §3.2).
    share_text: bool,
    /// `os.max_processes`: live processes at once.
    max_processes: u32,
}

impl<P: PageTable> Os<P> {
    /// The OS model over `pt`, from `settings` (or a whole `&Config`).
    pub(crate) fn new<'a>(settings: impl Into<OsSettings<'a>>, pt: P) -> Result<Os<P>> {
        let s: OsSettings = settings.into();
        let mut mem = BuddyAllocator::new(s.phys_mem)?;
        fragmentation::apply(&mut mem, s.fragmentation)?;
        let policy = PagePolicy::new(&s.os.policy, s.os.page_size, &pt)?;
        let mm = Mm {
            pt,
            mem,
            spaces: FxHashMap::default(),
            free_asids: BTreeSet::new(),
            next_asid: 0,
            objects: Vec::new(),
            implicit_anon: s.os.implicit_anon,
            current: None,
            shootdowns: Vec::new(),
            counters: OsCounters::default(),
            mapped_by_size: BTreeMap::new(),
            mapped_now: 0,
            peak_mapped_pages: 0,
            pt_bytes_at_peak: 0,
            reservations: Reservations::default(),
            touched: TouchedFrames::default(),
            shadow: None,
            pc: PolicyCounters::default(),
            copy_cycles_per_kb: s.os.policy.copy_cycles_per_kb,
            placement: Placement::new(&s.os.placement, s.color_cache),
            rmap: None,
            copies: Vec::new(),
            rc: RecolorCounters::default(),
            share_keys: s.share_keys,
            share_text: s.share_text,
            max_processes: s.os.max_processes,
        };
        let mut os = Os { mm, policy, recolor: None };
        if s.os.recolor.kind != recolor::RecolorKind::None {
            let line = s.color_cache.map(|c| c.line);
            let r = Recolorer::new(&s.os.recolor, &os.mm.placement, line)?;
            if r.needs_rmap() {
                os.mm.rmap = Some(ReverseMap::default());
            }
            os.mm.rc.track_copiers = true;
            os.recolor = Some(r);
        }
        Ok(os)
    }

    /// The ASID of `pid`, creating the process if it is new.
    pub(crate) fn asid_of(&mut self, pid: Pid) -> Result<Asid> {
        self.mm.asid_of(pid)
    }

    /// A last-level TLB miss of the current process (called by the engine after the fill).
    #[inline]
    pub(crate) fn tlb_miss(&mut self, m: &TlbMiss, fill: &[crate::mmu::TlbChange]) -> Result<()> {
        self.policy.tlb_miss(&mut self.mm, m, fill)
    }

    /// The policy's periodic background work (khugepaged).
    pub(crate) fn background(&mut self) -> Result<()> {
        self.policy.background(&mut self.mm)
    }

    /// Apply an OS event record. Accesses and ticks are not OS events.
    pub(crate) fn event(&mut self, r: &Record) -> Result<()> {
        self.mm.event(r)
    }

    pub fn space(&self, pid: Pid) -> Option<&AddressSpace> {
        self.mm.space(pid)
    }
}

impl<P: FastPaths> Os<P> {
    /// Handle a translation fault of `pid` at `va`: the walk found no mapping, or one
    /// without the permission `kind` needs. Returns the translation now in place.
    pub(crate) fn fault(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<Translation> {
        // Where the page table fixes the page size (a short-VHPT region), an implicit
        // VMA covers at least one such page.
        let granule = self.mm.pt.page_size_at(va).map_or(self.policy.granule(), |s| s.max(self.policy.granule()));
        let t = match self.mm.fault_begin(pid, va, kind, granule)? {
            Ok(t) => t,
            // Shared objects are mapped with base pages so every sharer sees the same frames.
            Err(f) if f.vma.object.is_some() => self.mm.map_shared(&f)?,
            Err(f) => self.policy.fault(&mut self.mm, &f)?,
        };
        // What the TLB gets is the table's own translation of `va`: under nested paging
        // that is guest-virtual to host-physical, not the guest-physical frame above.
        if P::TRANSLATES_AS_MAPPED {
            debug_assert_eq!(self.mm.space(pid).and_then(|s| self.mm.pt.translate(s.asid, va)).unwrap_or(t), t);
            return Ok(t);
        }
        let asid = self.mm.space(pid).map(|s| s.asid);
        Ok(asid.and_then(|a| self.mm.pt.translate(a, va)).unwrap_or(t))
    }
}

impl<P: PageTable> Mm<P> {
    /// The ASID of `pid`, creating the process if it is new (traces may start with
    /// accesses of processes they never announced).
    pub fn asid_of(&mut self, pid: Pid) -> Result<Asid> {
        if let Some(s) = self.spaces.get(&pid) {
            return Ok(s.asid);
        }
        self.create_process(pid).map(|s| s.asid)
    }

    fn create_process(&mut self, pid: Pid) -> Result<&mut AddressSpace> {
        if self.spaces.len() >= self.max_processes as usize {
            return Err(Error::config(
                "os.max_processes",
                format!(
                    "pid {pid} would be live process {} of at most {} (each costs host memory; raise the limit for a trace with this many)",
                    self.spaces.len() + 1,
                    self.max_processes
                ),
            ));
        }
        let asid = match self.free_asids.pop_first() {
            Some(a) => a,
            None => {
                // ANY_ASID (u16::MAX) is reserved for global entries.
                if self.next_asid == Asid::MAX {
                    return Err(Error::Sim("more than 65535 live processes".into()));
                }
                if (self.share_keys || self.share_text) && self.next_asid == crate::mmu::regions::GLOBAL_RID_BASE {
                    return Err(Error::Sim("more than 32768 live processes with mmu.regions.share or share_text (the upper RIDs are global)".into()));
                }
                self.next_asid += 1;
                self.next_asid - 1
            }
        };
        self.pt.create_space(&mut self.mem, asid)?;
        self.counters.processes_created += 1;
        Ok(self.spaces.entry(pid).or_insert_with(|| AddressSpace::new(pid, asid)))
    }

    pub(crate) fn space(&self, pid: Pid) -> Option<&AddressSpace> {
        self.spaces.get(&pid)
    }

    /// The shared-object mappings of a process: (start, end, object, whether the object
    /// is program text).
    pub(crate) fn shared_mappings(&self, pid: Pid) -> impl Iterator<Item = (u64, u64, u32, bool)> + '_ {
        self.spaces
            .get(&pid)
            .into_iter()
            .flat_map(|s| s.vmas.iter().filter_map(|v| v.object.map(|o| (v.start, v.end, o, self.objects[o as usize].as_ref().is_some_and(|x| x.text)))))
    }

    /// The process that owns `asid`, if live.
    pub(crate) fn pid_of(&self, asid: Asid) -> Option<Pid> {
        self.spaces.values().find(|s| s.asid == asid).map(|s| s.pid)
    }

    /// Start handling a fault: a protection fault is granted here (`Ok`); a demand fault
    /// is returned (`Err`) for the policy, with its VMA (an implicit VMA is created with
    /// the policy's `granule`, os.implicit_anon).
    fn fault_begin(&mut self, pid: Pid, va: u64, kind: AccessKind, granule: PageSize) -> Result<std::result::Result<Translation, DemandFault>> {
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
            self.shootdowns.push(Shootdown::Page { asid, va: base, size: m.size });
            return Ok(Ok(Translation { pa: m.pa, size: m.size, perms }));
        }
        self.counters.demand += 1;
        let vma = match space.vmas.find(va) {
            Some(v) => *v,
            None if self.implicit_anon => {
                self.counters.implicit += 1;
                self.implicit_vma(pid, va, granule)?
            }
            None => return Err(Error::Sim(format!("pid {pid} accessed {va:#x}, outside every VMA (os.implicit_anon = false)"))),
        };
        let perms = vma.perms.union(need);
        Ok(Err(DemandFault { pid, asid, va, vma, perms }))
    }

    /// Make an anonymous read/write/execute VMA for an access outside every region: the
    /// aligned block of `granule` (the policy's largest fault-time page) around `va`,
    /// clipped to the gap it sits in.
    fn implicit_vma(&mut self, pid: Pid, va: u64, s: PageSize) -> Result<Vma> {
        let space = self.spaces.get_mut(&pid).unwrap();
        let (lo, hi) = space.vmas.gap_around(va);
        let mut start = s.align_down(va);
        let mut end = start.saturating_add(s.bytes());
        if start < lo || end > hi || end == u64::MAX {
            start = PageSize::K4.align_down(va);
            // VMAs end below 2^64, so the top page of the address space has none.
            end = start
                .checked_add(PageSize::K4.bytes())
                .ok_or_else(|| Error::Sim(format!("pid {pid} accessed {va:#x}, in the top 4 KiB page of the 64-bit address space, which no VMA can hold")))?;
        }
        let v = Vma { start, end, perms: Perms::RWX_USER, flags: MapFlags::PRIVATE, object: None, object_start: 0, implicit: true };
        space.vmas.insert(v);
        Ok(v)
    }

    /// A base page of a shared object; in a short-VHPT region of larger pages, a page
    /// of the region's size (Chapman et al. §2.3.1), shared by every process that maps
    /// the object at the same address (vmlab shares objects through fork). Such a page
    /// may start before the VMA (its offset then wraps).
    fn map_shared(&mut self, f: &DemandFault) -> Result<Translation> {
        let obj = f.vma.object.expect("shared VMA");
        let size = self.pt.page_size_at(f.va).unwrap_or(PageSize::K4);
        let base = size.align_down(f.va);
        let pa = self.object_frame(obj, base.wrapping_sub(f.vma.object_start), base, size).ok_or_else(|| self.oom(f.pid, f.va))?;
        self.map_page(f.pid, f.asid, base, pa, size, f.perms, Some(obj))
    }

    /// Whether the aligned page of `size` around `va` lies inside `vma` and overlaps no
    /// mapped page and no reservation: a region a policy may map (or reserve) whole.
    pub(crate) fn region_free(&self, pid: Pid, va: u64, size: PageSize, vma: &Vma) -> Option<u64> {
        let base = size.align_down(va);
        let end = base.wrapping_add(size.bytes());
        if end <= base || !vma.contains_range(base, end) || !self.unclaimed(pid, base, end) {
            return None;
        }
        Some(base)
    }

    /// `region_free` of the base page of a demand fault, before anything is mapped for
    /// it: no page covers `f.va` (that is what made it a demand fault), so only its
    /// VMA and the reservations can refuse it. Two page-index walks fewer per fault.
    pub(crate) fn demand_base_page(&self, f: &DemandFault) -> Option<u64> {
        let base = PageSize::K4.align_down(f.va);
        // The top page of the address space has no representable end (region_free's rule).
        let end = base.checked_add(PageSize::K4.bytes())?;
        debug_assert!(self.space(f.pid).is_some_and(|s| !s.pages.any_in(base, end)), "a demand fault at a mapped page");
        (f.vma.contains_range(base, end) && (self.reservations.is_empty() || self.reservations.overlapping(f.pid, base, end).is_empty())).then_some(base)
    }

    /// Whether [start, end) holds no mapped page and no reservation.
    fn unclaimed(&self, pid: Pid, start: u64, end: u64) -> bool {
        let Some(space) = self.spaces.get(&pid) else { return false };
        !space.pages.any_in(start, end) && (self.reservations.is_empty() || self.reservations.overlapping(pid, start, end).is_empty())
    }

    /// TPS's aggressive rounding (§III-B2): whether the aligned page of `size` around
    /// `va` may be had by rounding the request up, i.e. it reaches past `vma`, the VMA
    /// fills more than half of it (the smallest power of two still larger than the
    /// request), and the rest is free address space.
    pub(crate) fn can_round_up(&self, pid: Pid, va: u64, size: PageSize, vma: &Vma) -> bool {
        let base = size.align_down(va);
        let end = base.wrapping_add(size.bytes());
        let inside = end.min(vma.end).saturating_sub(base.max(vma.start));
        end > base
            && inside * 2 > size.bytes()
            && vma.object.is_none()
            && self.unclaimed(pid, base, end)
            && self.spaces.get(&pid).is_some_and(|sp| sp.vmas.iter_overlapping(base, end).all(|v| v.start == vma.start))
    }

    /// Round the request up: grow `vma` to cover the page of `size` at `base` (checked
    /// by `can_round_up`). Returns the bytes it grew by.
    pub(crate) fn round_up_vma(&mut self, pid: Pid, base: u64, size: PageSize, vma: &Vma) -> u64 {
        let grown = Vma { start: base.min(vma.start), end: (base + size.bytes()).max(vma.end), ..*vma };
        self.spaces.get_mut(&pid).expect("faulting space").vmas.insert(grown);
        grown.len() - vma.len()
    }

    /// Allocate a block of frames. A failed base-page allocation (`size` 4K) first breaks
    /// reservations, least recently populated first, until it succeeds (the documented
    /// memory-pressure rule); larger requests never break reservations (the policy falls
    /// back to smaller pages instead).
    pub(crate) fn alloc_frames(&mut self, size: PageSize, usage: FrameUse) -> Option<u64> {
        loop {
            if let Some(pa) = self.mem.try_alloc(size, usage) {
                return Some(pa);
            }
            if size != PageSize::K4 || !self.break_one_reservation() {
                return None;
            }
        }
    }

    /// A data frame for a new base page at `va`, placed by `os.placement` (a colour
    /// with no free frame falls back to any frame; memory pressure breaks reservations).
    pub(crate) fn alloc_base_frame(&mut self, va: u64) -> Option<u64> {
        if let Some(c) = self.placement.initial_color(va) {
            if let Some(pa) = self.placement.alloc(&mut self.mem, PageSize::K4, c, FrameUse::Data) {
                self.placement.counters.placed += 1;
                return Some(pa);
            }
            self.placement.counters.fallbacks += 1;
        }
        self.alloc_frames(PageSize::K4, FrameUse::Data)
    }

    /// The error of a fault that found no free frame.
    pub(crate) fn oom(&self, pid: Pid, va: u64) -> Error {
        Error::OutOfMemory(format!(
            "pid {pid} faulted at {va:#x} with {} of {} physical memory in use and no free 4K frame (os.on_oom = \"error\"; raise machine.phys_mem)",
            crate::addr::format_bytes(self.mem.counters().frames_used * 4096),
            crate::addr::format_bytes(self.mem.counters().phys_bytes),
        ))
    }

    /// Install `base -> pa` of `size` in the page table and the OS page index, with the
    /// accounting (pages by size, peak). The frames must already be accounted as data.
    /// A page-table allocation that finds memory exhausted breaks reservations and
    /// retries. On error nothing is recorded (the caller still owns the frames).
    #[allow(clippy::too_many_arguments)] // what a mapping is: no subset makes a type of its own
    pub(crate) fn map_page(&mut self, pid: Pid, asid: Asid, base: u64, pa: u64, size: PageSize, perms: Perms, object: Option<u32>) -> Result<Translation> {
        loop {
            match self.pt.map(&mut self.mem, asid, base, pa, size, perms) {
                Ok(()) => break,
                Err(Error::OutOfMemory(_)) if self.break_one_reservation() => continue,
                Err(e) => return Err(e),
            }
        }
        if size == PageSize::K4 {
            // Invariant (os/touched.rs): a mapped base page is touched.
            self.touched.touch(pa);
        } else {
            self.touched.ensure(pa, size);
        }
        let m = Mapping { pa, size, perms, object };
        self.spaces.get_mut(&pid).unwrap().pages.insert(base, m);
        if let (Some(r), None) = (&mut self.rmap, object) {
            r.insert(pa, pid, base, size);
        }
        *self.mapped_by_size.entry(size).or_default() += 1;
        *self.pc.mapped_total.entry(size).or_default() += 1;
        self.mapped_now += 1;
        if self.mapped_now > self.peak_mapped_pages {
            self.peak_mapped_pages = self.mapped_now;
            self.pt_bytes_at_peak = self.pt.footprint().bytes;
        }
        self.note_bloat();
        Ok(Translation { pa, size, perms })
    }

    /// Remove the page at `base` from the page table and the page index, with a
    /// shootdown; the frames stay allocated (the caller frees or reuses them).
    pub(crate) fn unmap_page(&mut self, pid: Pid, base: u64) -> Option<Mapping> {
        let space = self.spaces.get_mut(&pid)?;
        let asid = space.asid;
        let m = space.pages.remove(base)?;
        self.pt.unmap(&mut self.mem, asid, base);
        if let (Some(r), None) = (&mut self.rmap, m.object) {
            r.remove(m.pa);
        }
        *self.mapped_by_size.get_mut(&m.size).unwrap() -= 1;
        self.mapped_now -= 1;
        self.shootdowns.push(Shootdown::Page { asid, va: base, size: m.size });
        Some(m)
    }

    /// Free data frames (they are no longer touched by anyone).
    pub(crate) fn free_data(&mut self, pa: u64, size: PageSize) {
        self.touched.clear_range(pa, size);
        if let Some(s) = &mut self.shadow {
            s.free(pa, size);
        }
        self.mem.free(pa, size, FrameUse::Data);
    }

    /// Frames used for data that the program never touched (memory overhead against a
    /// 4K-only system).
    pub(crate) fn bloat_frames(&self) -> u64 {
        let (data, touched) = (self.mem.counters().frames_data, self.touched.count());
        // Touched frames are data frames; saturate rather than wrap should that ever break.
        debug_assert!(touched <= data, "{touched} touched frames but {data} data frames");
        data.saturating_sub(touched)
    }

    fn note_bloat(&mut self) {
        self.pc.bloat_peak_frames = self.pc.bloat_peak_frames.max(self.bloat_frames());
    }

    /// The mapped pages of `pid` overlapping [start, end), as (base, mapping).
    /// The translation `pid`'s page covering `va` holds, if mapped.
    pub fn translation_at(&self, pid: Pid, va: u64) -> Option<Translation> {
        let (_, m) = self.space(pid)?.mapping_at(va)?;
        Some(Translation { pa: m.pa, size: m.size, perms: m.perms })
    }

    pub(crate) fn pages_in(&self, pid: Pid, start: u64, end: u64) -> Vec<(u64, Mapping)> {
        let Some(space) = self.spaces.get(&pid) else { return Vec::new() };
        let mut v = Vec::new();
        space.pages.for_each_in(start, end, |b, m| {
            v.push((b, m));
            true
        });
        v
    }

    /// Processes by pid (ascending: deterministic scans).
    pub(crate) fn pids(&self) -> Vec<Pid> {
        let mut v: Vec<Pid> = self.spaces.keys().copied().collect();
        v.sort_unstable();
        v
    }

    // ---- reservations (os/reservation.rs) ----

    /// Reserve an aligned block of `size` for the region of `pid` at `va`.
    pub(crate) fn reserve(&mut self, pid: Pid, va: u64, size: PageSize) -> Option<u64> {
        let pa = self.mem.try_alloc(size, FrameUse::Reserved)?;
        self.reservations.insert(Reservation::new(pid, size.align_down(va), pa, size));
        self.pc.reservations_made += 1;
        Some(pa)
    }

    /// Take the frame of `va`'s page from the reservation covering it (now data).
    /// Returns (frame, reservation key, populated pages), or None if no reservation
    /// covers `va`.
    pub(crate) fn populate_reserved(&mut self, pid: Pid, va: u64) -> Option<(u64, (Pid, u64), u64)> {
        let r = self.reservations.populate(pid, va)?;
        self.mem.reclassify(PageSize::K4, FrameUse::Reserved, FrameUse::Data);
        Some(r)
    }

    /// End a reservation: its unpopulated frames go back to the buddy allocator; the
    /// populated pages stay mapped as they are.
    pub(crate) fn release_reservation(&mut self, key: (Pid, u64), why: ReleaseReason) {
        let Some(r) = self.reservations.remove(key) else { return };
        for (pa, size) in r.unpopulated_blocks() {
            self.mem.free(pa, size, FrameUse::Reserved);
        }
        match why {
            ReleaseReason::Broken => self.pc.reservations_broken += 1,
            ReleaseReason::Released => self.pc.reservations_released += 1,
        }
    }

    /// Memory pressure: break the least recently populated reservation. False if none.
    pub(crate) fn break_one_reservation(&mut self) -> bool {
        match self.reservations.least_recently_used() {
            Some(k) => {
                self.release_reservation(k, ReleaseReason::Broken);
                true
            }
            None => false,
        }
    }

    /// Promote a reservation to one page of its size, in place: its unpopulated frames
    /// become (untouched) data and the populated base pages are replaced by the large
    /// page. Returns false (changing nothing) if the pages cannot be merged.
    pub(crate) fn promote_reservation(&mut self, key: (Pid, u64)) -> Result<bool> {
        let Some(r) = self.reservations.get(key) else { return Ok(false) };
        let (pid, va, pa, size) = (r.pid, r.va, r.pa, r.size);
        if !self.can_promote_in_place(pid, va, size, pa) {
            return Ok(false);
        }
        let r = self.reservations.remove(key).unwrap();
        for (_, bsize) in r.unpopulated_blocks() {
            self.mem.reclassify(bsize, FrameUse::Reserved, FrameUse::Data);
        }
        self.pc.reservations_promoted += 1;
        self.promote_in_place(pid, va, size, pa)?;
        Ok(true)
    }

    fn object_frame(&mut self, obj: u32, offset: u64, va: u64, size: PageSize) -> Option<u64> {
        let page = offset >> 12;
        if let Some(&(pa, s)) = self.objects[obj as usize].as_ref().expect("live object").frames.get(&page) {
            debug_assert_eq!(s, size, "a shared page changed size");
            return Some(pa);
        }
        let pa = if size == PageSize::K4 { self.alloc_base_frame(va)? } else { self.alloc_frames(size, FrameUse::Data)? };
        self.objects[obj as usize].as_mut().unwrap().frames.insert(page, (pa, size));
        Some(pa)
    }

    /// Apply an OS event record. Accesses and ticks are not OS events.
    pub(crate) fn event(&mut self, r: &Record) -> Result<()> {
        match *r {
            Record::Mmap { pid, start, len, prot, flags } => self.mmap(pid, start, len, prot, flags),
            Record::Munmap { pid, start, len } => {
                self.asid_of(pid)?;
                let (s, e) = page_range(start, len);
                self.unmap_range(pid, s, e)?;
                self.spaces.get_mut(&pid).unwrap().vmas.remove_range(s, e);
                Ok(())
            }
            Record::Mprotect { pid, start, len, prot } => {
                self.asid_of(pid)?;
                let (s, e) = page_range(start, len);
                let perms = Perms::from_prot(prot as u32);
                self.split_straddling(pid, s, e)?;
                let fixed_sizes = self.pt.sizes_by_address();
                let space = self.spaces.get_mut(&pid).unwrap();
                space.vmas.protect_range(s, e, perms);
                let asid = space.asid;
                for base in space.pages.bases_in(s, e) {
                    // A page the table cannot split (a short-VHPT region's) that the
                    // range covers only in part keeps its permissions; an access that
                    // needs more is granted as a protection fault.
                    if fixed_sizes && space.pages.get(base).is_some_and(|(_, m)| base < s || base + m.size.bytes() > e) {
                        continue;
                    }
                    let mut size = PageSize::K4;
                    space.pages.update(base, |m| {
                        m.perms = perms;
                        size = m.size;
                    });
                    self.pt.protect(asid, base, perms);
                    self.shootdowns.push(Shootdown::Page { asid, va: base, size });
                }
                Ok(())
            }
            Record::Brk { pid, end } => self.brk(pid, end),
            Record::Fork { parent, child } => self.fork(parent, child),
            Record::Exit { pid } => self.exit(pid),
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
        self.unmap_range(pid, s, e)?;
        // With text sharing, a program's text (private, file-backed, executable and not
        // writable: its pages are the executable's, in the page cache) is an object its
        // children inherit, so they share its frames and its region.
        let text = self.share_text
            && !flags.contains(MapFlags::SHARED)
            && flags.contains(MapFlags::FILE)
            && prot & crate::trace::record::prot::EXEC != 0
            && prot & crate::trace::record::prot::WRITE == 0;
        let object = if flags.contains(MapFlags::SHARED) || text {
            self.objects.push(Some(SharedObject { frames: HashMap::new(), refs: 1, text }));
            let id = (self.objects.len() - 1) as u32;
            self.spaces.get_mut(&pid).unwrap().objects.push(id);
            Some(id)
        } else {
            None
        };
        let vma = Vma { start: s, end: e, perms: Perms::from_prot(prot as u32), flags, object, object_start: s, implicit: false };
        self.spaces.get_mut(&pid).unwrap().vmas.insert(vma);
        Ok(())
    }

    fn brk(&mut self, pid: Pid, end: u64) -> Result<()> {
        self.asid_of(pid)?;
        let end = PageSize::K4.align_down(end.saturating_add(4095));
        let space = self.spaces.get_mut(&pid).unwrap();
        match space.heap {
            // The first brk tells where the heap starts.
            None => space.heap = Some((end, end)),
            Some((hs, he)) => {
                let new_end = end.max(hs);
                if new_end > he {
                    let v = Vma { start: hs, end: new_end, perms: Perms::RW_USER, flags: MapFlags::PRIVATE, object: None, object_start: 0, implicit: false };
                    space.vmas.insert(v);
                } else if new_end < he {
                    space.vmas.remove_range(new_end, he);
                    self.unmap_range(pid, new_end, he)?;
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
            self.exit(child)?;
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

    fn exit(&mut self, pid: Pid) -> Result<()> {
        let Some(space) = self.spaces.get(&pid) else { return Ok(()) };
        let asid = space.asid;
        self.unmap_range(pid, 0, u64::MAX)?;
        let space = self.spaces.remove(&pid).unwrap();
        for o in space.objects {
            let obj = self.objects[o as usize].as_mut().unwrap();
            obj.refs -= 1;
            if obj.refs == 0 {
                let obj = self.objects[o as usize].take().unwrap();
                // Entries tagged with the object's global RID go too (if it had one).
                let tagged = if obj.text { self.share_text } else { self.share_keys };
                if tagged {
                    if let Ok(rid) = crate::mmu::regions::RegionIds::global_rid(o) {
                        self.shootdowns.push(Shootdown::Space { asid: rid });
                    }
                }
                for (_, (pa, size)) in obj.frames {
                    self.free_data(pa, size);
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
        Ok(())
    }

    /// Split every large page straddling `start` or `end` into base pages on the same
    /// frames (Linux's split_huge_pmd on a partial munmap or mprotect), so the part
    /// outside [start, end) keeps its frames and data, and no page crosses the VMA
    /// boundary the caller is about to make.
    fn split_straddling(&mut self, pid: Pid, start: u64, end: u64) -> Result<()> {
        for edge in [start, end] {
            let Some((base, m)) = self.spaces.get(&pid).and_then(|s| s.mapping_at(edge)) else { continue };
            // A page whose size the table fixes (a short-VHPT region's) cannot be split:
            // `unmap_range` keeps it while it is still in use.
            if base < edge && m.size > PageSize::K4 && self.pt.page_size_at(base) != Some(m.size) {
                self.demote(pid, base, PageSize::K4)?;
            }
        }
        Ok(())
    }

    /// Unmap every page inside [start, end), splitting a large page that straddles the
    /// boundary first (the part outside stays mapped). Reservations overlapping the
    /// range are released first (the VMA shrank).
    fn unmap_range(&mut self, pid: Pid, start: u64, end: u64) -> Result<()> {
        if !self.spaces.contains_key(&pid) {
            return Ok(());
        }
        if !self.reservations.is_empty() {
            for k in self.reservations.overlapping(pid, start, end) {
                self.release_reservation(k, ReleaseReason::Released);
            }
        }
        self.split_straddling(pid, start, end)?;
        for base in self.spaces[&pid].pages.bases_in(start, end) {
            if self.pt.sizes_by_address() && self.still_in_use(pid, base, start, end) {
                continue;
            }
            let m = self.unmap_page(pid, base).unwrap();
            if m.object.is_none() {
                self.free_data(m.pa, m.size);
            }
            self.counters.pages_unmapped += 1;
        }
        Ok(())
    }
}

impl<P: PageTable> Mm<P> {
    /// Whether the page at `base`, which [start, end) covers only in part (only a page
    /// the table cannot split, a short-VHPT region's, can be left so), still backs a
    /// VMA outside the range: then an munmap, a shrinking brk or an mmap over part of
    /// it keeps the whole page, as the region's page is the OS's unit there (Linux/ia64
    /// rounds mappings to whole pages); it goes when no VMA overlaps it any more.
    fn still_in_use(&self, pid: Pid, base: u64, start: u64, end: u64) -> bool {
        let Some(space) = self.space(pid) else { return false };
        let Some((_, m)) = space.mapping_at(base) else { return false };
        let page_end = base.saturating_add(m.size.bytes());
        (base < start && space.vmas.iter_overlapping(base, start).next().is_some())
            || (page_end > end && space.vmas.iter_overlapping(end, page_end).next().is_some())
    }
}

/// [start, start+len) widened to 4 KiB boundaries.
fn page_range(start: u64, len: u64) -> (u64, u64) {
    let s = PageSize::K4.align_down(start);
    let e = start.saturating_add(len).saturating_add(4095) & !4095;
    (s, e.max(s))
}
