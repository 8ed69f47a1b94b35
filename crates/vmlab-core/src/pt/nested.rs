//! Nested (two-dimensional) translation (Stojkovic et al. §2.2, §3; AMD NPT / Intel
//! EPT): a guest page table maps guest-virtual to guest-physical addresses, and a host
//! page table maps guest-physical to host-physical ones. The guest table lives in
//! guest-physical memory, so every guest entry the walker reads must itself be
//! translated by the host first. Any guest kind composes with any host kind:
//!
//! - radix over radix (`nested-radix`): L guest levels over L host levels take up to
//!   (L + 1)² − 1 sequential references (24 for 4 over 4, 35 for 5 over 5);
//! - ECPT over ECPT (`nested-ecpt`, §3–§4): three sequential steps — host-translate
//!   every guest entry the guest probe could read (up to n²d² parallel references), read
//!   those entries (n·d), host-translate the data page (n·d). Its own walker, with the
//!   advanced design's caches, is [`super::nested_ecpt`];
//! - radix over ECPT (`hybrid`, §6): each guest level is one parallel host step plus the
//!   guest entry, then the data page's host step: 2L + 1 = 9 steps for 4 levels.
//!
//! A guest step's references are host-translated in parallel: their host walks run side
//! by side, the k-th steps of all of them forming one step.
//!
//! The OS model is the guest OS: it allocates guest-physical frames from the engine's
//! buddy allocator and maps them here. The hypervisor is modelled inside this table: it
//! backs guest-physical memory with frames of its own host allocator on first use
//! (guest page-table nodes when they appear, data pages when the guest maps them), with
//! 4K or (host THP) 2M host pages. Translations this table returns are guest-virtual to
//! host-physical, as a nested TLB entry holds them; their size is the smaller of the
//! guest and host page sizes.
//!
//! Walk caches: the guest PWC (caching guest upper-level entries, as on a native walk),
//! the nested TLB (NTLB: guest-physical to host-physical translations of guest
//! page-table pages, which skip the host walk of a guest entry) and the nested PWC
//! (NPWC: the host table's upper-level entries, for every host walk).
//!
//! Over a radix host the walk splits ([`NestedSplit`]): the table sends the
//! walker the guest walk's functional path, and the host path of every guest
//! page-table page that path may read which the walker does not already hold, then
//! the data page's host path ([`NestedPiece`]). The walker makes the whole walk with
//! every walk cache (guest PWC, NTLB, nested PWC), exactly as the fused walk does
//! (docs/performance.md, "The nested walker thread").

use super::{
    CacheCounters, FastPaths, GuestPath, PageTable, PathOf, PtFootprint, RadixPageTable, SplitCaches, SplitWalk, Translation, WalkCaches, WalkPath, WalkRef,
};
use crate::addr::{Asid, PageSize, Perms};
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::mmu::assoc::{AssocCache, Replacement};
use crate::mmu::pwc::PageWalkCache;
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};
use std::cell::Cell;

/// The host table's address space (one virtual machine).
const VM: Asid = 0;

/// `prefetch` hints the host entry of a data page this many calls after the guest
/// entry that names the page: by then the guest entry has reached the host cache.
const HOST_PREFETCH_LAG: usize = 6;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NestedConfig {
    /// Host radix levels (4 or 5); the guest's are `page_table.radix.levels`.
    pub host_levels: u8,
    /// Host page size backing guest-physical memory: 4K, or 2M (host THP; falls back to
    /// 4K where the aligned 2M guest-physical region is already partly backed).
    pub host_page_size: Bytes,
    /// Host physical memory (the hypervisor's buddy allocator).
    pub host_phys_mem: Bytes,
    /// Nested TLB entries (0 = none) and ways (0 = fully associative).
    pub ntlb_entries: usize,
    pub ntlb_ways: usize,
    /// Nested PWC entries per host level, lowest first ([PDE, PDPTE, PML4E, ...]).
    pub npwc_entries: Vec<usize>,
    pub npwc_ways: usize,
    /// Host CWC entries (ECPT hosts: nested-ecpt, hybrid): PMD and PUD regions; for
    /// nested ECPT, also PTE (the step-3 hCWC of the advanced design, §4.2).
    pub host_pte_cwc: usize,
    pub host_pmd_cwc: usize,
    pub host_pud_cwc: usize,
    /// Cycles for the NTLB/NPWC probes at the start of each walk.
    pub latency: u32,
    /// Nested ECPT, advanced design (Stojkovic et al. §4): shortcut translation cache
    /// entries (0 = none, fully associative).
    pub stc_entries: usize,
    /// PTE entries of a separate step-1 hCWC (0 = step 1 shares the step-3 hCWC).
    pub step1_host_pte_cwc: usize,
    /// Adaptive PTE-hCWT caching in step 3 (needs `host_pte_cwc`): off below
    /// `adaptive_disable_below` PTE hit rate, on again above `adaptive_enable_above` PMD
    /// hit rate, decided every `adaptive_window` counted lookups.
    pub adaptive_pte_cwc: bool,
    pub adaptive_disable_below: f64,
    pub adaptive_enable_above: f64,
    pub adaptive_window: u64,
    /// The walker assumes guest page-table pages sit in 4K host pages: step 1 probes
    /// only the PTE-hECPT (§4.3). Needs `host_pt_backing = "4K"` (or 4K host pages).
    pub pt_pages_4k_only: bool,
    /// How the hypervisor backs guest page-table pages: like any memory (`same`), or
    /// always with 4K host pages (`4K`), splitting a 2M host page if needed.
    pub host_pt_backing: PtBacking,
}

/// Host backing of guest page-table pages (`page_table.nested.host_pt_backing`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum PtBacking {
    #[default]
    #[serde(rename = "same")]
    Same,
    #[serde(rename = "4K")]
    K4,
}

impl Default for NestedConfig {
    fn default() -> Self {
        NestedConfig {
            host_levels: 4,
            host_page_size: Bytes(4096),
            host_phys_mem: Bytes(64 << 30),
            ntlb_entries: 24,
            ntlb_ways: 0,
            npwc_entries: vec![16, 16, 16],
            npwc_ways: 0,
            // Table 2's hCWC of step 3 has 16 PTE entries too: advanced design only.
            host_pte_cwc: 0,
            host_pmd_cwc: 4,
            host_pud_cwc: 2,
            latency: 1,
            // The plain design (§3) by default.
            stc_entries: 0,
            step1_host_pte_cwc: 0,
            adaptive_pte_cwc: false,
            adaptive_disable_below: 0.5,
            adaptive_enable_above: 0.85,
            adaptive_window: 1000,
            pt_pages_4k_only: false,
            host_pt_backing: PtBacking::Same,
        }
    }
}

/// The walk caches of nested translation: the guest kind's (e.g. the guest PWC), the
/// host kind's (the nested PWC, or host CWCs), and the nested TLB; and, for a split
/// walk, the walker's memo of host paths (`GP`, `HP`: the guest and host kinds' paths).
pub struct NestedWalkCaches<GC: WalkCaches, HC: WalkCaches, GP = (), HP = ()> {
    pub(crate) guest: GC,
    pub(crate) host: HC,
    /// Guest-physical page -> host-physical page of guest page-table pages.
    ntlb: Option<AssocCache<u64>>,
    ntlb_counters: CacheCounters,
    /// Cycles of the probes at the start of every walk (fixed at construction, so the
    /// walker's half of a split charges the whole walk's).
    probe_cycles: u64,
    /// The walker's scratch when it replays a split walk: one host walk's references,
    /// and the host walks of a guest step before they merge.
    hpath: WalkPath,
    merge: Vec<WalkRef>,
    /// The walk being received: its guest path, and the host paths of guest
    /// page-table pages that came with it.
    guest_path: GP,
    table_pages: Vec<TablePage<HP>>,
    gpath: WalkPath,
    hpas: Vec<(u64, u8)>,
    /// Simulator-only, on the walker: host paths of guest page-table pages kept for
    /// later walks (`MEMO` slots by guest-physical page number), as pieces say.
    memo: Vec<TablePage<HP>>,
    /// Simulator-only, on the table's side (the front): the page each slot of the
    /// walker's memo holds (+1; 0: none), and the host table generation it holds it for.
    sent: Vec<u64>,
    sent_gen: u64,
    /// Slots of the memo, less one (a power of two less one).
    memo_mask: usize,
}

/// Slots of the walker's memo of host paths: more than the page-table pages of a guest
/// of a few GiB (a 4 GiB guest has about 2,050).
const MEMO: usize = 4096;

/// The host path of a guest page-table page, and its host page.
#[derive(Clone, Copy, Debug)]
struct TablePage<HP> {
    page: u64,
    hpage: u64,
    host: HP,
}

impl<HP: Default> Default for TablePage<HP> {
    fn default() -> Self {
        TablePage { page: u64::MAX, hpage: 0, host: HP::default() }
    }
}

/// The nested PWC of a radix host, from `[page_table.nested]`.
pub(crate) fn nested_pwc(cfg: &NestedConfig, seed: u64) -> Result<PageWalkCache> {
    if cfg.npwc_entries.iter().all(|&e| e == 0) {
        return Ok(PageWalkCache::none());
    }
    // PageWalkCache takes one associativity (capped at each level's entries):
    // fully associative = the largest level's entry count.
    let ways = if cfg.npwc_ways == 0 { usize::MAX } else { cfg.npwc_ways };
    let npwc_ways = cfg.npwc_entries.iter().map(|&e| ways.min(e)).max().unwrap_or(0);
    PageWalkCache::new(&cfg.npwc_entries, npwc_ways, Replacement::Lru, 0, seed.wrapping_add(77))
        .map_err(|e| Error::config("page_table.nested.npwc_entries", e.to_string()))
}

impl<GC: WalkCaches, HC: WalkCaches, GP: Copy + Default, HP: Copy + Default> NestedWalkCaches<GC, HC, GP, HP> {
    pub(crate) fn new(guest: GC, host: HC, cfg: &NestedConfig, seed: u64) -> Result<Self> {
        let ntlb = if cfg.ntlb_entries == 0 {
            None
        } else {
            Some(AssocCache::new(cfg.ntlb_entries, cfg.ntlb_ways, Replacement::Lru, seed.wrapping_add(78), "page_table.nested.ntlb")?.with_mru_first())
        };
        let probe_cycles = guest.probe_latency() + if ntlb.is_some() || host.probe_latency() > 0 { cfg.latency as u64 } else { 0 };
        Ok(NestedWalkCaches {
            guest,
            host,
            ntlb,
            ntlb_counters: CacheCounters::default(),
            probe_cycles,
            hpath: WalkPath::new(),
            merge: Vec::new(),
            guest_path: GP::default(),
            table_pages: Vec::with_capacity(8),
            gpath: WalkPath::new(),
            hpas: Vec::with_capacity(8),
            memo: Vec::new(),
            sent: Vec::new(),
            sent_gen: u64::MAX,
            memo_mask: MEMO - 1,
        })
    }

    /// A memo of `slots` (a power of two) instead of `MEMO`, so that tests can make
    /// every walk's pages compete for its slots.
    #[cfg(test)]
    pub(crate) fn with_memo_slots(mut self, slots: usize) -> Self {
        assert!(slots.is_power_of_two());
        self.memo_mask = slots - 1;
        self
    }

    #[inline(always)]
    fn memo_slot(&self, page: u64) -> usize {
        page as usize & self.memo_mask
    }

    /// The host path of guest page-table page `page` for the walk being replayed: one
    /// that came with it, else the memo's (the table sends a page's path unless the
    /// memo holds it).
    #[inline]
    fn table_page(&self, page: u64) -> TablePage<HP> {
        if let Some(t) = self.table_pages.iter().find(|t| t.page == page) {
            return *t;
        }
        let t = self.memo[self.memo_slot(page)];
        assert_eq!(t.page, page, "the walker lacks the host path of a guest page-table page");
        t
    }

    /// The host-physical address of the guest entry at `gpa`, on the walker: through
    /// the NTLB, or a host walk along its page's host path (references into `into`),
    /// which then fills the NTLB.
    #[inline]
    fn entry_hpa<H: PageTable<Caches = HC>, S: SplitWalk<H, Path = HP>>(&mut self, host: S, gpa: u64, into: &mut WalkPath) -> u64 {
        if let Some(hpa) = self.ntlb_probe(gpa) {
            return hpa;
        }
        let t = self.table_page(gpa >> 12);
        host.replay(&t.host, VM, gpa, &mut self.host, into);
        self.ntlb_fill(gpa, t.hpage << 12);
        (t.hpage << 12) | (gpa & 0xfff)
    }

    /// The NTLB's host-physical address of the guest entry at `gpa`, if it holds its
    /// page (the probe is counted).
    #[inline]
    fn ntlb_probe(&mut self, gpa: u64) -> Option<u64> {
        let ntlb = self.ntlb.as_mut()?;
        let page = gpa >> 12;
        let hit = ntlb.lookup(ntlb.set_of(page), page, VM);
        self.ntlb_counters.record(hit.is_some());
        hit.map(|hpage| (hpage << 12) | (gpa & 0xfff))
    }

    /// Cache the host page of the guest entry at `gpa` (host-physical `hpa`), which the
    /// NTLB just missed.
    #[inline]
    fn ntlb_fill(&mut self, gpa: u64, hpa: u64) {
        if let Some(ntlb) = &mut self.ntlb {
            let page = gpa >> 12;
            ntlb.fill_absent_evicts(ntlb.set_of(page), page, VM, hpa >> 12);
        }
    }
}

impl<GC: WalkCaches, HC: WalkCaches, GP: Copy + Default + Send + 'static, HP: Copy + Default + Send + 'static> WalkCaches for NestedWalkCaches<GC, HC, GP, HP> {
    fn flush_all(&mut self) {
        self.guest.flush_all();
        self.host.flush_all();
        if let Some(n) = &mut self.ntlb {
            n.flush_all();
        }
    }
    fn flush_asid(&mut self, asid: Asid) {
        // Guest entries are per guest process; host entries belong to the VM.
        self.guest.flush_asid(asid);
    }
    fn invalidate(&mut self, asid: Asid, va: u64) {
        self.guest.invalidate(asid, va);
    }
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        let mut v = self.guest.counters();
        v.extend(self.host.counters().into_iter().map(|(n, c)| (format!("host_{n}"), c)));
        if self.ntlb.is_some() {
            v.push(("ntlb".to_string(), self.ntlb_counters.clone()));
        }
        v
    }
    fn probe_latency(&self) -> u64 {
        self.probe_cycles
    }
}

impl<GC: SplitCaches, HC: WalkCaches, GP: Copy + Default + Send + 'static, HP: Copy + Default + Send + 'static> NestedWalkCaches<GC, HC, GP, HP> {
    /// Every walk cache stays with the walker, which makes the whole walk; the front
    /// holds no cache (the guest's vacant caches, and `host`, what the host table's
    /// split moved out), only what the walker's memo holds (a fresh memo per split).
    fn split_front(&mut self, host: HC) -> Self {
        if self.memo.is_empty() {
            self.memo = vec![TablePage::default(); self.memo_mask + 1];
        }
        NestedWalkCaches {
            guest: self.guest.vacant(),
            host,
            ntlb: None,
            ntlb_counters: CacheCounters::default(),
            probe_cycles: self.probe_cycles,
            hpath: WalkPath::new(),
            merge: Vec::new(),
            guest_path: GP::default(),
            table_pages: Vec::new(),
            gpath: WalkPath::new(),
            hpas: Vec::new(),
            memo: Vec::new(),
            sent: vec![0; self.memo_mask + 1],
            sent_gen: u64::MAX,
            memo_mask: self.memo_mask,
        }
    }
}

/// Name the hypervisor's memory in an out-of-memory error of a host-table operation.
fn in_host(e: Error) -> Error {
    match e {
        Error::OutOfMemory(m) => Error::OutOfMemory(format!("host memory (page_table.nested.host_phys_mem): {m}")),
        e => e,
    }
}

/// A guest page table over a host page table.
pub struct NestedPageTable<G: PageTable, H: PageTable> {
    kind: &'static str,
    pub(crate) guest: G,
    pub(crate) host: H,
    host_mem: BuddyAllocator,
    host_size: PageSize,
    gpath: WalkPath,
    hpath: WalkPath,
    /// Host references of one guest step's parallel host walks, before merging.
    merge: Vec<WalkRef>,
    /// Host-physical addresses of one guest step's entries.
    hpas: Vec<(u64, u8)>,
    /// Bumped whenever the host path of a backed page may change (a host page split),
    /// which empties the walker's memo of host paths.
    host_gen: u64,
    /// Guest-physical 4K pages backed on first use (EPT-violation-like host faults).
    host_faults: u64,
    host_fallbacks: u64,
    /// Simulator-only: one bit per guest-physical 4K page known to be backed, set
    /// when `map_host` backs it. Backing is never undone (a split remaps the same
    /// pages), so a set bit spares a walk the host lookup that checks; a clear bit
    /// just means "look".
    backed: Vec<u64>,
    /// Host memory ran out while a walk backed a guest page-table page.
    pub(crate) walk_error: Option<Error>,
    /// Simulator-only: the last `HOST_PREFETCH_LAG` addresses `prefetch` was given, with
    /// where the guest table said their entries sit (a ring; `va == u64::MAX`: none),
    /// whose host entries it hints once their guest entries have arrived.
    prefetched: [Cell<Hinted>; HOST_PREFETCH_LAG],
    next_prefetched: Cell<usize>,
}

/// The guest-virtual to host-physical translation of a guest translation `g` whose
/// page holds guest-physical `gpa`, over the host translation `h` of `gpa`: the
/// smaller of the two page sizes, with the guest's permissions.
#[inline]
fn join(g: Translation, gpa: u64, h: Translation) -> Translation {
    let size = g.size.min(h.size);
    Translation { pa: size.align_down(h.phys(gpa)), size, perms: g.perms }
}

/// The end of the guest step whose first reference is `refs[i]`.
#[inline]
fn step_end(refs: &[WalkRef], i: usize) -> usize {
    let step = refs[i].step;
    refs[i..].iter().position(|r| r.step != step).map_or(refs.len(), |k| i + k)
}

/// Append the merged host walks in `merge` as steps of `path` (their k-th steps
/// together), and empty it.
/// Close a step of a guest walk whose entries were translated in parallel: the host
/// walks' references (`flush_merge`), then one step reading the entries at their host
/// addresses.
fn close_parallel_step(merge: &mut Vec<WalkRef>, hpas: &[(u64, u8)], path: &mut WalkPath) {
    flush_merge(merge, path);
    path.begin_step();
    for &(hpa, what) in hpas {
        path.push_parallel(hpa, what);
    }
}

fn flush_merge(merge: &mut Vec<WalkRef>, path: &mut WalkPath) {
    // One host walk's references are already in step order (the common case: a radix
    // guest reads one entry per step).
    if !merge.is_sorted_by_key(|r| r.step) {
        merge.sort_by_key(|r| r.step);
    }
    let mut step = u16::MAX;
    for r in merge.iter() {
        if r.step != step {
            path.begin_step();
            step = r.step;
        }
        path.push_parallel(r.pa, r.what);
    }
    merge.clear();
}

/// One piece of a nested walk's path, as `full_path` sends it to the walker: the
/// guest walk's path first, then the host path of each guest page-table page it may
/// read that the walker's memo lacks, then the end of the walk (with the data page's
/// host path, unless the guest walk found no mapping).
#[derive(Clone, Copy, Debug, Default)]
pub enum NestedPiece<GP, HP> {
    Guest(GP),
    /// `gpa`'s page translates to host-physical `hpa`'s along `host`; `keep`: the
    /// walker keeps it in its memo.
    TablePage {
        gpa: u64,
        hpa: u64,
        host: HP,
        keep: bool,
    },
    Data {
        gpa: u64,
        host: HP,
    },
    #[default]
    End,
}

/// An address `prefetch` hinted, and where the guest table said its entry sits.
#[derive(Clone, Copy, Debug)]
struct Hinted {
    asid: Asid,
    va: u64,
    loc: Option<u64>,
}

/// Guest radix over host radix.
pub type NestedRadixPageTable = NestedPageTable<RadixPageTable, RadixPageTable>;

impl<G: FastPaths, H: FastPaths> NestedPageTable<G, H> {
    /// `host` gets the VM's address space here; `kind` names the design in stats.
    pub(crate) fn new(kind: &'static str, guest: G, mut host: H, cfg: &NestedConfig) -> Result<Self> {
        let host_size = PageSize::from_bytes(cfg.host_page_size.0).map_err(|m| Error::config("page_table.nested.host_page_size", m))?;
        if host_size != PageSize::K4 && host_size != PageSize::M2 {
            return Err(Error::config("page_table.nested.host_page_size", format!("must be 4K or 2M, not {host_size}")));
        }
        if !host.page_sizes().contains(&host_size) {
            return Err(Error::config("page_table.nested.host_page_size", format!("the host {} table cannot map {host_size} pages", host.kind())));
        }
        let mut host_mem = BuddyAllocator::new(cfg.host_phys_mem.0).map_err(|e| Error::config("page_table.nested.host_phys_mem", e.to_string()))?;
        host.create_space(&mut host_mem, VM)
            .map_err(|e| Error::config("page_table.nested.host_phys_mem", format!("too small for the host page table: {e}")))?;
        Ok(NestedPageTable {
            kind,
            guest,
            host,
            host_mem,
            host_size,
            gpath: WalkPath::new(),
            hpath: WalkPath::new(),
            merge: Vec::with_capacity(256),
            hpas: Vec::with_capacity(64),
            host_gen: 0,
            host_faults: 0,
            host_fallbacks: 0,
            backed: Vec::new(),
            walk_error: None,
            prefetched: std::array::from_fn(|_| Cell::new(Hinted { asid: VM, va: u64::MAX, loc: None })),
            next_prefetched: Cell::new(0),
        })
    }

    /// Back `gpa` with a host page of at most `size` (4K, or 2M where the aligned
    /// region is not yet partly backed), if it is not yet. Returns the host translation
    /// (so a caller that needs it does not look it up again).
    pub(crate) fn back_with(&mut self, gpa: u64, size: PageSize) -> Result<Translation> {
        if let Some(h) = self.host.translate(VM, gpa) {
            return Ok(h);
        }
        let mapped = self.map_host(gpa, size)?;
        if H::TRANSLATES_AS_MAPPED {
            return Ok(mapped);
        }
        Ok(self.host.translate(VM, gpa).expect("the host page was just mapped"))
    }

    /// Map a host page for `gpa`: a 2M one if `size` is 2M and the region allows it,
    /// else a 4K one. Returns the host page as mapped.
    fn map_host(&mut self, gpa: u64, size: PageSize) -> Result<Translation> {
        self.host_faults += 1;
        if size == PageSize::M2 {
            let base = PageSize::M2.align_down(gpa);
            // A 2M host page only where no 4K backing exists in the region yet.
            let partly = (0..512u64).any(|i| self.host.translate(VM, base + (i << 12)).is_some());
            if !partly {
                if let Some(hpa) = self.host_mem.try_alloc(PageSize::M2, FrameUse::Data) {
                    self.host.map(&mut self.host_mem, VM, base, hpa, PageSize::M2, Perms::RWX_USER).map_err(in_host)?;
                    self.mark_backed(base, PageSize::M2);
                    return Ok(Translation { pa: hpa, size: PageSize::M2, perms: Perms::RWX_USER });
                }
            }
            self.host_fallbacks += 1;
        }
        let hpa = self.host_mem.alloc(PageSize::K4, FrameUse::Data).map_err(in_host)?;
        let base = PageSize::K4.align_down(gpa);
        self.host.map(&mut self.host_mem, VM, base, hpa, PageSize::K4, Perms::RWX_USER).map_err(in_host)?;
        self.mark_backed(base, PageSize::K4);
        Ok(Translation { pa: hpa, size: PageSize::K4, perms: Perms::RWX_USER })
    }

    /// Record that the `size` page at `base` (aligned) is backed.
    fn mark_backed(&mut self, base: u64, size: PageSize) {
        let (first, pages) = (base >> 12, size.bytes() >> 12);
        let last_word = ((first + pages - 1) / 64) as usize;
        if self.backed.len() <= last_word {
            self.backed.resize(last_word + 1, 0);
        }
        for p in first..first + pages {
            self.backed[(p / 64) as usize] |= 1 << (p % 64);
        }
    }

    /// Whether the 4K page of `gpa` is known to be backed (see `backed`).
    #[inline(always)]
    fn known_backed(&self, gpa: u64) -> bool {
        let p = gpa >> 12;
        self.backed.get((p / 64) as usize).is_some_and(|w| (w >> (p % 64)) & 1 != 0)
    }

    /// Split the host page backing `gpa` into 4K pages on the same frames (as KVM splits
    /// a huge page); returns whether there was a larger page to split.
    pub(crate) fn split_host_page(&mut self, gpa: u64) -> Result<bool> {
        let Some(h) = self.host.translate(VM, gpa).filter(|h| h.size != PageSize::K4) else {
            return Ok(false);
        };
        let base = h.size.align_down(gpa);
        self.host_gen += 1;
        self.host.unmap(&mut self.host_mem, VM, base);
        for off in (0..h.size.bytes()).step_by(4096) {
            // A remap that fails leaves its page unbacked: clear its bit first.
            let p = (base + off) >> 12;
            if let Some(w) = self.backed.get_mut((p / 64) as usize) {
                *w &= !(1 << (p % 64));
            }
            self.host.map(&mut self.host_mem, VM, base + off, h.pa + off, PageSize::K4, h.perms).map_err(in_host)?;
            self.mark_backed(base + off, PageSize::K4);
        }
        Ok(true)
    }

    /// The host table's generation (see `host_gen`).
    pub(crate) fn host_gen(&self) -> u64 {
        self.host_gen
    }

    pub(crate) fn host_page_size(&self) -> PageSize {
        self.host_size
    }

    /// Compose a guest translation of `va` with the host's: guest-virtual -> host-physical.
    pub(crate) fn compose(&self, va: u64, g: Translation) -> Option<Translation> {
        self.compose_with(va, g, None)
    }

    /// `compose`, given the host translation of the data page if the walk found it.
    #[inline]
    pub(crate) fn compose_with(&self, va: u64, g: Translation, host: Option<Translation>) -> Option<Translation> {
        let gpa = g.phys(va);
        let h = match host {
            Some(h) => h,
            None => self.host.translate(VM, gpa)?,
        };
        Some(join(g, gpa, h))
    }

    /// Host-translate the guest-physical address of a guest entry: through the NTLB, or
    /// a host walk whose references go to `merge` (steps counted from 0). Backs the page
    /// first if the hypervisor has not yet (a guest table page's first use).
    fn host_ref(&mut self, gpa: u64, c: &mut <Self as PageTable>::Caches) -> Option<u64> {
        if let Some(hpa) = c.ntlb_probe(gpa) {
            return Some(hpa);
        }
        self.back_table_page(gpa)?;
        self.hpath.clear();
        let h = self.host.walk(VM, gpa, &mut c.host, &mut self.hpath)?;
        self.merge.extend_from_slice(self.hpath.refs());
        c.ntlb_fill(gpa, h.phys(gpa));
        Some(h.phys(gpa))
    }

    /// The walker's half of a split walk, once its pieces are in: `walk`, along the
    /// guest path and the host paths that came with it or sit in the memo, with every
    /// walk cache; `data`: the data page's guest-physical address and host path.
    fn replay_walk(
        split: NestedSplit<G::Split, H::Split>,
        asid: Asid,
        va: u64,
        data: Option<(u64, &PathOf<H>)>,
        c: &mut <Self as PageTable>::Caches,
        path: &mut WalkPath,
    ) {
        let mut gpath = std::mem::take(&mut c.gpath);
        gpath.clear();
        let gp = c.guest_path;
        split.guest.replay(&gp, asid, va, &mut c.guest, &mut gpath);
        let refs = gpath.refs();
        let mut i = 0;
        while i < refs.len() {
            let j = step_end(refs, i);
            if j == i + 1 {
                // One entry (radix guests: always): its host walk's references go
                // straight into the path, each its own step, as `flush_merge` puts them.
                let r = refs[i];
                let hpa = c.entry_hpa::<H, _>(split.host, r.pa, path);
                path.begin_step();
                path.push_parallel(hpa, r.what);
            } else {
                c.hpas.clear();
                let mut hpath = std::mem::take(&mut c.hpath);
                for r in &refs[i..j] {
                    hpath.clear();
                    let hpa = c.entry_hpa::<H, _>(split.host, r.pa, &mut hpath);
                    c.merge.extend_from_slice(hpath.refs());
                    c.hpas.push((hpa, r.what));
                }
                c.hpath = hpath;
                close_parallel_step(&mut c.merge, &c.hpas, path);
            }
            i = j;
        }
        c.gpath = gpath;
        if let Some((gpa, host)) = data {
            // Alone in its step: straight into the path.
            split.host.replay(host, VM, gpa, &mut c.host, path);
        }
    }

    /// Back the guest page-table page of `gpa` before its first host walk, if the
    /// hypervisor has not yet. `None` if host memory ran out (the error waits in
    /// `walk_error` for the engine).
    fn back_table_page(&mut self, gpa: u64) -> Option<()> {
        if !self.known_backed(gpa) && self.host.translate(VM, gpa).is_none() {
            if let Err(e) = self.back_with(gpa, self.host_size) {
                self.walk_error = Some(e);
                return None;
            }
        }
        Some(())
    }

    /// The guest entry of `va` now; the host entry of the data page of the address
    /// given `HOST_PREFETCH_LAG` calls ago, whose guest entry has had time to arrive
    /// (a nested walk's two dependent misses, each hidden by its own look-ahead).
    pub(crate) fn prefetch_both(&self, asid: Asid, va: u64) {
        if !H::PREFETCHES {
            self.guest.prefetch(asid, va);
            return;
        }
        let loc = self.guest.prefetch_at(asid, va);
        let slot = self.next_prefetched.get();
        let old = self.prefetched[slot].replace(Hinted { asid, va, loc });
        self.next_prefetched.set((slot + 1) % HOST_PREFETCH_LAG);
        if old.va != u64::MAX {
            // Where the guest said its entry sits: one read instead of a translation.
            let gpa = match old.loc {
                Some(loc) => self.guest.phys_at(old.asid, loc, old.va),
                None => self.guest.translate(old.asid, old.va).map(|g| g.phys(old.va)),
            };
            if let Some(gpa) = gpa {
                self.host.prefetch(VM, gpa);
            }
        }
    }
}

impl<G: FastPaths, H: FastPaths> PageTable for NestedPageTable<G, H> {
    type Caches = NestedWalkCaches<G::Caches, H::Caches, PathOf<G>, PathOf<H>>;

    fn kind(&self) -> &'static str {
        self.kind
    }

    fn page_sizes(&self) -> &[PageSize] {
        self.guest.page_sizes()
    }

    fn page_size_at(&self, va: u64) -> Option<PageSize> {
        self.guest.page_size_at(va)
    }

    fn sizes_by_address(&self) -> bool {
        self.guest.sizes_by_address()
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        self.guest.create_space(mem, asid)
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        // Host backing stays: the hypervisor does not see the guest free its frames.
        self.guest.destroy_space(mem, asid);
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        self.guest.map(mem, asid, va, pa, size, perms)?;
        // Back the data page (every 4K of it; 2M host pages cover many at once).
        let mut off = 0;
        while off < size.bytes() {
            let h = self.back_with(pa + off, self.host_size)?;
            off += h.size.bytes() - ((pa + off) & h.size.offset_mask());
        }
        Ok(())
    }

    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let g = self.guest.translate(asid, va)?;
        let t = self.compose(va, g);
        self.guest.unmap(mem, asid, va);
        t
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        self.guest.protect(asid, va, perms)
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.compose(va, self.guest.translate(asid, va)?)
    }

    fn mapped_frame(&self, asid: Asid, va: u64, t: &Translation) -> u64 {
        self.guest.translate(asid, va).map_or(t.phys(va), |g| g.phys(va))
    }

    fn walk(&mut self, asid: Asid, va: u64, c: &mut Self::Caches, path: &mut WalkPath) -> Option<Translation> {
        let mut gpath = std::mem::take(&mut self.gpath);
        gpath.clear();
        let g = self.guest.walk(asid, va, &mut c.guest, &mut gpath);
        let mut ok = true;
        // Each guest step: host-translate its references in parallel, then read them.
        let refs = gpath.refs();
        let mut i = 0;
        while i < refs.len() && ok {
            let j = step_end(refs, i);
            self.hpas.clear();
            for r in &refs[i..j] {
                match self.host_ref(r.pa, c) {
                    Some(hpa) => self.hpas.push((hpa, r.what)),
                    None => ok = false,
                }
            }
            close_parallel_step(&mut self.merge, &self.hpas, path);
            i = j;
        }
        self.gpath = gpath;
        let g = g.filter(|_| ok)?;
        // Finally the data page's guest-physical address.
        let gpa = g.phys(va);
        self.hpath.clear();
        let h = self.host.walk(VM, gpa, &mut c.host, &mut self.hpath);
        self.merge.extend_from_slice(self.hpath.refs());
        flush_merge(&mut self.merge, path);
        Some(join(g, gpa, h?))
    }

    fn take_error(&mut self) -> Option<Error> {
        self.walk_error.take()
    }

    fn footprint(&self) -> PtFootprint {
        let (g, h) = (self.guest.footprint(), self.host.footprint());
        PtFootprint { bytes: g.bytes + h.bytes, nodes: g.nodes + h.nodes, mapped_pages: g.mapped_pages }
    }

    fn details(&self) -> serde_json::Value {
        let (g, h) = (self.guest.footprint(), self.host.footprint());
        serde_json::json!({
            "guest_bytes": g.bytes, "guest_nodes": g.nodes, "guest": self.guest.details(),
            "guest_kind": self.guest.kind(), "host_kind": self.host.kind(),
            "host_bytes": h.bytes, "host_nodes": h.nodes, "host_mapped_pages": h.mapped_pages, "host": self.host.details(),
            "host_page_size": self.host_size.to_string(),
            "host_faults": self.host_faults, "host_fallbacks": self.host_fallbacks,
            "host_memory_used_bytes": self.host_mem.counters().frames_used * 4096,
        })
    }
}

/// The walk caches of a nested table of `G` over `H`.
type NestedCaches<G, H> = <NestedPageTable<G, H> as PageTable>::Caches;

/// A nested walk splits where both its tables' walks split (radix over radix): the
/// table finds the paths, the walker makes the walk with every walk cache (the walker
/// thread then does all of a walk's cache work).
#[derive(Clone, Copy, Debug)]
pub struct NestedSplit<GS, HS> {
    guest: GS,
    host: HS,
}

impl<G: FastPaths, H: FastPaths> SplitWalk<NestedPageTable<G, H>> for NestedSplit<G::Split, H::Split>
where
    PathOf<G>: GuestPath,
    G::Caches: SplitCaches,
{
    type Path = NestedPiece<PathOf<G>, PathOf<H>>;
    const WITNESS: Option<Self> = match (G::Split::WITNESS, H::Split::WITNESS) {
        (Some(guest), Some(host)) => Some(NestedSplit { guest, host }),
        _ => None,
    };

    /// The guest walk's path; the host path of every guest page-table page it may
    /// read (the guest PWC, on the walker, decides which it does) unless the walker's
    /// memo holds it; then the data page's host path, ending the walk. A page is backed
    /// here if the hypervisor has not yet, exactly when `walk` backs it: a page the
    /// walk will not read (its entry is in the guest PWC) or whose host translation is
    /// in the NTLB was read before, so it is backed.
    fn full_path(
        self,
        pt: &mut NestedPageTable<G, H>,
        asid: Asid,
        va: u64,
        front: &mut NestedCaches<G, H>,
        mut emit: impl FnMut(Self::Path),
    ) -> Option<Translation> {
        let mut gp = PathOf::<G>::default();
        let g = self.guest.full_path(&mut pt.guest, asid, va, &mut front.guest, |p| gp = p);
        emit(NestedPiece::Guest(gp));
        if front.sent_gen != pt.host_gen {
            front.sent.fill(0);
            front.sent_gen = pt.host_gen;
        }
        // Memo slots this walk relies on: a page sent later must not evict them. (A
        // guest path has at most six entries.)
        let mut relied = [usize::MAX; 8];
        let mut n = 0;
        let mut ok = true;
        gp.entries(|gpa| {
            let (page, slot) = (gpa >> 12, front.memo_slot(gpa >> 12));
            if !ok {
                return;
            }
            if front.sent[slot] == page + 1 {
                if n < relied.len() {
                    relied[n] = slot;
                    n += 1;
                }
                return;
            }
            let mut hp = PathOf::<H>::default();
            let h = pt.back_table_page(gpa).and_then(|()| self.host.full_path(&mut pt.host, VM, gpa, &mut front.host, |p| hp = p));
            let Some(h) = h else {
                ok = false;
                return;
            };
            let keep = n < relied.len() && !relied[..n].contains(&slot);
            if keep {
                front.sent[slot] = page + 1;
            }
            emit(NestedPiece::TablePage { gpa, hpa: h.phys(gpa), host: hp, keep });
        });
        let Some(g) = g.filter(|_| ok) else {
            emit(NestedPiece::End);
            return None;
        };
        // Finally the data page's guest-physical address.
        let gpa = g.phys(va);
        let mut hp = PathOf::<H>::default();
        let h = self.host.full_path(&mut pt.host, VM, gpa, &mut front.host, |p| hp = p);
        emit(NestedPiece::Data { gpa, host: hp });
        Some(join(g, gpa, h?))
    }

    #[inline]
    fn replay(self, p: &Self::Path, asid: Asid, va: u64, c: &mut NestedCaches<G, H>, path: &mut WalkPath) {
        match p {
            NestedPiece::Guest(gp) => {
                c.guest_path = *gp;
                c.table_pages.clear();
            }
            NestedPiece::TablePage { gpa, hpa, host, keep } => {
                let t = TablePage { page: gpa >> 12, hpage: hpa >> 12, host: *host };
                if *keep {
                    let slot = c.memo_slot(t.page);
                    c.memo[slot] = t;
                }
                c.table_pages.push(t);
            }
            NestedPiece::Data { gpa, host } => NestedPageTable::<G, H>::replay_walk(self, asid, va, Some((*gpa, host)), c, path),
            NestedPiece::End => NestedPageTable::<G, H>::replay_walk(self, asid, va, None, c, path),
        }
    }

    #[inline(always)]
    fn path_continues(self, p: &Self::Path) -> bool {
        matches!(p, NestedPiece::Guest(_) | NestedPiece::TablePage { .. })
    }

    /// The host table's split divides the host's caches; the guest's stay whole.
    fn split_caches(self, c: &mut NestedCaches<G, H>) -> NestedCaches<G, H> {
        let host = self.host.split_caches(&mut c.host);
        c.split_front(host)
    }

    fn rejoin_caches(self, c: &mut NestedCaches<G, H>, front: NestedCaches<G, H>) {
        self.host.rejoin_caches(&mut c.host, front.host);
    }
}

impl<G: FastPaths, H: FastPaths> FastPaths for NestedPageTable<G, H>
where
    PathOf<G>: GuestPath,
    G::Caches: SplitCaches,
{
    type Split = NestedSplit<G::Split, H::Split>;
    const PREFETCHES: bool = G::PREFETCHES || H::PREFETCHES;

    #[inline]
    fn prefetch(&self, asid: Asid, va: u64) {
        self.prefetch_both(asid, va)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    type Caches = NestedWalkCaches<PageWalkCache, PageWalkCache, super::super::radix::RadixPath, super::super::radix::RadixPath>;

    fn radix_over_radix(guest_levels: u8, cfg: &NestedConfig) -> (NestedRadixPageTable, Caches) {
        let host = RadixPageTable::new(cfg.host_levels).unwrap();
        let pt = NestedPageTable::new("nested-radix", RadixPageTable::new(guest_levels).unwrap(), host, cfg).unwrap();
        let caches = NestedWalkCaches::new(PageWalkCache::none(), nested_pwc(cfg, 0).unwrap(), cfg, 0).unwrap();
        (pt, caches)
    }

    fn bare(guest_levels: u8, host_levels: u8, host_page: u64) -> (NestedRadixPageTable, Caches, BuddyAllocator) {
        let cfg = NestedConfig {
            host_levels,
            host_page_size: Bytes(host_page),
            host_phys_mem: Bytes(8 << 30),
            ntlb_entries: 0,
            npwc_entries: vec![],
            ..Default::default()
        };
        let (pt, caches) = radix_over_radix(guest_levels, &cfg);
        (pt, caches, BuddyAllocator::new(4 << 30).unwrap())
    }

    /// A split walk is the walk: `full_path` (the paths, on the table's side) followed
    /// by the replay of each piece it sends (every walk cache, on the walker's half)
    /// makes exactly the fused walk's references, steps, translation, walk-cache
    /// traffic and host backing, on random maps (4K and 2M guest pages, over 4K and 2M
    /// host pages), unmaps and protects, with walks of mapped and unmapped addresses and
    /// of a space with no table. Invalidations reach both halves, as the MMU sends them;
    /// the halves rejoin to the fused caches' counters. With a two-slot memo of host
    /// paths, the pages of most walks compete for its slots.
    #[test]
    fn split_walk_is_the_walk() {
        use rand::{Rng, SeedableRng};
        for (host_page, memo) in [(4096u64, MEMO), (2 << 20, MEMO), (4096, 2)] {
            let cfg = NestedConfig { host_page_size: Bytes(host_page), ntlb_entries: 8, npwc_entries: vec![4, 4, 2], ..Default::default() };
            let new = || {
                let host = RadixPageTable::new(4).unwrap();
                let mut pt = NestedPageTable::new("nested-radix", RadixPageTable::new(4).unwrap(), host, &cfg).unwrap();
                let guest_pwc = PageWalkCache::new(&[4, 4, 2], 2, Replacement::Lru, 0, 3).unwrap();
                let caches = NestedWalkCaches::new(guest_pwc, nested_pwc(&cfg, 0).unwrap(), &cfg, 0).unwrap().with_memo_slots(memo);
                let mut mem = BuddyAllocator::new(4 << 30).unwrap();
                pt.create_space(&mut mem, 0).unwrap();
                (pt, caches, mem)
            };
            let (mut fused, mut fc, mut fmem) = new();
            let (mut split, mut sc, mut smem) = new();
            let w = crate::pt::split_walk::<NestedRadixPageTable>().expect("radix over radix splits its walk");
            let mut front = SplitWalk::<NestedRadixPageTable>::split_caches(w, &mut sc);
            assert_eq!(front.probe_latency(), fc.probe_latency());
            assert_eq!(sc.probe_latency(), fc.probe_latency());
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(host_page);
            let (mut a, mut b) = (WalkPath::new(), WalkPath::new());
            let mut pieces = Vec::new();
            let mut multi_piece = 0;
            let (mut sent, mut unkept) = (0, 0);
            for i in 0..20_000 {
                let va = 0x40_0000_0000 + rng.gen_range(0..(4u64 << 30));
                match rng.gen_range(0..10) {
                    0 => {
                        let size = if rng.gen_range(0..8) == 0 { PageSize::M2 } else { PageSize::K4 };
                        let base = size.align_down(va);
                        if (0..size.bytes()).step_by(4096).all(|o| fused.translate(0, base + o).is_none()) {
                            if let (Ok(x), Ok(y)) = (fmem.alloc(size, FrameUse::Data), smem.alloc(size, FrameUse::Data)) {
                                assert_eq!(x, y);
                                fused.map(&mut fmem, 0, base, x, size, Perms::RW_USER).unwrap();
                                split.map(&mut smem, 0, base, y, size, Perms::RW_USER).unwrap();
                            }
                        }
                    }
                    1 => {
                        fused.unmap(&mut fmem, 0, va);
                        split.unmap(&mut smem, 0, va);
                        // As the OS does on unmap: drop the space's walk-cache entries.
                        fc.invalidate(0, va);
                        front.invalidate(0, va);
                        sc.invalidate(0, va);
                    }
                    2 => {
                        fused.protect(0, va, Perms::R);
                        split.protect(0, va, Perms::R);
                    }
                    3 if i % 50 == 0 => {
                        fc.flush_all();
                        front.flush_all();
                        sc.flush_all();
                    }
                    _ => {}
                }
                a.clear();
                b.clear();
                let asid = if i % 97 == 0 { 5 } else { 0 };
                let x = fused.walk(asid, va, &mut fc, &mut a);
                pieces.clear();
                let f = w.full_path(&mut split, asid, va, &mut front, |p| pieces.push(p));
                let (last, rest) = pieces.split_last().expect("a walk sends at least one piece");
                let continues = |p| SplitWalk::<NestedRadixPageTable>::path_continues(w, p);
                assert!(rest.iter().all(continues) && !continues(last));
                multi_piece += (pieces.len() > 1) as u32;
                for p in &pieces {
                    if let NestedPiece::TablePage { keep, .. } = p {
                        sent += 1;
                        unkept += !keep as u32;
                    }
                }
                for p in &pieces {
                    SplitWalk::<NestedRadixPageTable>::replay(w, p, asid, va, &mut sc, &mut b);
                }
                assert_eq!(f, x, "{va:#x}");
                assert_eq!((a.refs(), a.steps()), (b.refs(), b.steps()), "{va:#x}");
            }
            SplitWalk::<NestedRadixPageTable>::rejoin_caches(w, &mut sc, front);
            assert_eq!(fc.counters(), sc.counters());
            assert_eq!(fused.details(), split.details());
            // The walks exercised every kind of walk cache, and walks in several pieces.
            for name in ["pwc_l3", "host_pwc_l3", "ntlb"] {
                assert!(fc.counters().iter().any(|(n, c)| n == name && c.hits > 100), "{name}: {:?}", fc.counters());
            }
            assert!(fused.details()["host_faults"].as_u64().unwrap() > 100);
            assert!(multi_piece > 1000, "{multi_piece}");
            // Most walks find their pages' host paths in the walker's memo; a small one
            // makes pages evict each other, and a page that would evict one the walk
            // relies on travels unkept.
            assert!(sent < 20_000 || memo == 2, "{sent}");
            assert!(unkept > 100 || memo != 2, "{unkept}");
        }
    }

    /// `prefetch` is a host-cache hint only: with hints given ahead of walks (and for
    /// pages that get mapped or unmapped before their walk), every walk returns what it
    /// returns on an unhinted table, with the same references and walk-cache counts.
    #[test]
    fn prefetch_changes_no_walk() {
        use rand::{Rng, SeedableRng};
        let cfg = NestedConfig::default();
        let (mut plain, mut pc) = radix_over_radix(4, &cfg);
        let (mut hinted, mut hc) = radix_over_radix(4, &cfg);
        let (mut mem_a, mut mem_b) = (BuddyAllocator::new(1 << 30).unwrap(), BuddyAllocator::new(1 << 30).unwrap());
        plain.create_space(&mut mem_a, 0).unwrap();
        hinted.create_space(&mut mem_b, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let (mut pa, mut pb) = (WalkPath::new(), WalkPath::new());
        let page = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| 0x7f00_0000_0000u64 + (rng.gen_range(0..8192u64) << 12);
        let mut walks = 0;
        for step in 0..20_000 {
            let va = page(&mut rng);
            match rng.gen_range(0..8) {
                0 | 1 => {
                    if plain.translate(0, va).is_none() {
                        let a = mem_a.alloc(PageSize::K4, FrameUse::Data).unwrap();
                        let b = mem_b.alloc(PageSize::K4, FrameUse::Data).unwrap();
                        assert_eq!(a, b);
                        plain.map(&mut mem_a, 0, va, a, PageSize::K4, Perms::RW_USER).unwrap();
                        hinted.map(&mut mem_b, 0, va, b, PageSize::K4, Perms::RW_USER).unwrap();
                    }
                }
                2 => {
                    let (a, b) = (plain.unmap(&mut mem_a, 0, va), hinted.unmap(&mut mem_b, 0, va));
                    assert_eq!(a, b);
                    if let Some(t) = a {
                        mem_a.free(t.pa, PageSize::K4, FrameUse::Data);
                        mem_b.free(t.pa, PageSize::K4, FrameUse::Data);
                        pc.invalidate(0, va);
                        hc.invalidate(0, va);
                    }
                }
                _ => {
                    for _ in 0..rng.gen_range(0..4) {
                        hinted.prefetch(0, page(&mut rng));
                    }
                    hinted.prefetch(0, va);
                    pa.clear();
                    pb.clear();
                    let a = plain.walk(0, va, &mut pc, &mut pa);
                    let b = hinted.walk(0, va, &mut hc, &mut pb);
                    assert_eq!(a, b, "step {step}");
                    assert_eq!(pa.refs(), pb.refs(), "step {step}");
                    walks += a.is_some() as u32;
                }
            }
        }
        assert!(walks > 1000, "the walks found mappings ({walks})");
        assert_eq!(pc.counters(), hc.counters());
    }

    /// (L + 1)² − 1 sequential references with every cache off.
    #[test]
    fn a_cold_nested_walk_takes_24_or_35_references() {
        for (levels, expect) in [(4u8, 24usize), (5, 35)] {
            let (mut pt, mut c, mut mem) = bare(levels, levels, 4096);
            pt.create_space(&mut mem, 0).unwrap();
            let gpa = mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
            pt.map(&mut mem, 0, 0x7f12_3456_7000, gpa, PageSize::K4, Perms::RW_USER).unwrap();
            let mut path = WalkPath::new();
            let t = pt.walk(0, 0x7f12_3456_7abc, &mut c, &mut path).unwrap();
            assert_eq!((path.refs().len(), path.steps() as usize), (expect, expect), "{levels} over {levels}");
            assert_eq!(Some(t), pt.translate(0, 0x7f12_3456_7abc));
            assert_eq!(t.size, PageSize::K4);
        }
    }

    /// Huge pages cut steps: a 2M guest page drops a guest level (and its host walk);
    /// 2M host pages drop a level from every host walk.
    #[test]
    fn huge_pages_shorten_the_walk() {
        // Guest 2M, host 4K: 3 guest levels × (4 + 1) + 4 = 19; the TLB entry is 4K.
        let (mut pt, mut c, mut mem) = bare(4, 4, 4096);
        pt.create_space(&mut mem, 0).unwrap();
        let gpa = mem.alloc(PageSize::M2, FrameUse::Data).unwrap();
        pt.map(&mut mem, 0, 0x4000_0000, gpa, PageSize::M2, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0x4012_3456, &mut c, &mut path).unwrap();
        assert_eq!((path.steps(), t.size), (19, PageSize::K4));
        // Guest 2M, host 2M: 3 × (3 + 1) + 3 = 15, and a 2M translation.
        let (mut pt, mut c, mut mem) = bare(4, 4, 2 << 20);
        pt.create_space(&mut mem, 0).unwrap();
        let gpa = mem.alloc(PageSize::M2, FrameUse::Data).unwrap();
        pt.map(&mut mem, 0, 0x4000_0000, gpa, PageSize::M2, Perms::RW_USER).unwrap();
        path.clear();
        let t = pt.walk(0, 0x4012_3456, &mut c, &mut path).unwrap();
        assert_eq!((path.steps(), t.size), (15, PageSize::M2));
        assert_eq!(t.phys(0x4012_3456), pt.host.translate(VM, gpa + 0x12_3456).unwrap().phys(gpa + 0x12_3456));
    }

    /// The NTLB skips the host walks of guest entries; the NPWC shortens host walks.
    #[test]
    fn ntlb_and_npwc_cut_a_warm_walk() {
        let cfg = NestedConfig { host_phys_mem: Bytes(8 << 30), ..Default::default() };
        let (mut pt, mut c) = radix_over_radix(4, &cfg);
        let mut mem = BuddyAllocator::new(4 << 30).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        for p in 0..2u64 {
            let gpa = mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
            pt.map(&mut mem, 0, 0x10_0000 + (p << 12), gpa, PageSize::K4, Perms::RW_USER).unwrap();
        }
        let mut path = WalkPath::new();
        pt.walk(0, 0x10_0000, &mut c, &mut path).unwrap();
        let cold = path.steps();
        path.clear();
        pt.walk(0, 0x10_1000, &mut c, &mut path).unwrap();
        // Warm: 4 guest entries (NTLB hits) + a host walk of 1 reference (NPWC hit on
        // the host PDE) for the data page.
        assert!(cold > 4 + 4, "cold walk {cold}");
        assert_eq!(path.steps(), 4 + 1);
        let names: Vec<String> = c.counters().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"ntlb".to_string()) && names.iter().any(|n| n.starts_with("host_pwc_")), "{names:?}");
    }

    pub(crate) fn small_ecpt() -> crate::pt::ElasticCuckooPageTable {
        use crate::pt::ecpt::EcptConfig;
        crate::pt::ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], cwt_slots: [64, 64], ..Default::default() }).unwrap()
    }

    /// Hybrid (guest radix, host ECPT): each of 4 guest levels is one host step plus the
    /// guest entry, then the data page's host step: 9 sequential steps.
    #[test]
    fn hybrid_walks_in_nine_steps() {
        use crate::mmu::cwc::EcptWalkCaches;
        let cfg = NestedConfig { host_phys_mem: Bytes(8 << 30), ntlb_entries: 0, ..Default::default() };
        let mut pt = NestedPageTable::new("hybrid", RadixPageTable::new(4).unwrap(), small_ecpt(), &cfg).unwrap();
        let mut c = NestedWalkCaches::new(PageWalkCache::none(), EcptWalkCaches::none(), &cfg, 0).unwrap();
        let mut mem = BuddyAllocator::new(4 << 30).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let gpa = mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
        pt.map(&mut mem, 0, 0x5555_0000_0000, gpa, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        assert!(pt.walk(0, 0x5555_0000_0123, &mut c, &mut path).is_some());
        assert_eq!(path.steps(), 9);
        assert_eq!(path.refs().len(), 4 * 9 + 4 + 9);
    }

    /// On random maps, unmaps and probes, translation equals the composition of the
    /// guest's and the host's, and every walk agrees with it.
    #[test]
    fn nested_translation_composes_guest_and_host() {
        use crate::mmu::cwc::EcptWalkCaches;
        for host_page in [4096u64, 2 << 20] {
            let (pt, c, mem) = bare(4, 4, host_page);
            check_composition(pt, c, mem, host_page, |pt, a, va| compose_by_hand(&pt.guest, &pt.host, a, va));
            let cfg = NestedConfig { host_page_size: Bytes(host_page), host_phys_mem: Bytes(8 << 30), ..Default::default() };
            let pt = NestedPageTable::new("hybrid", RadixPageTable::new(4).unwrap(), small_ecpt(), &cfg).unwrap();
            let c = NestedWalkCaches::new(PageWalkCache::none(), EcptWalkCaches::new(0, 4, 2, 1).unwrap(), &cfg, 0).unwrap();
            check_composition(pt, c, BuddyAllocator::new(4 << 30).unwrap(), host_page + 2, |pt, a, va| compose_by_hand(&pt.guest, &pt.host, a, va));
        }
    }

    /// The guest's translation of `va`, then the host's of the guest-physical address:
    /// (host-physical address, the smaller page size, the guest's permissions).
    pub(crate) fn compose_by_hand(guest: &impl PageTable, host: &impl PageTable, asid: Asid, va: u64) -> Option<(u64, PageSize, Perms)> {
        guest.translate(asid, va).map(|g| {
            let gpa = g.phys(va);
            let h = host.translate(VM, gpa).expect("guest-physical memory in use is backed");
            (h.phys(gpa), g.size.min(h.size), g.perms)
        })
    }

    /// Random maps, unmaps and probes (two address spaces, 4K and 2M guest pages):
    /// translate and walk both equal `expect` (composing the guest's and the host's
    /// translations by hand).
    pub(crate) fn check_composition<P: PageTable>(
        mut pt: P,
        mut c: P::Caches,
        mut mem: BuddyAllocator,
        seed: u64,
        expect: impl Fn(&P, Asid, u64) -> Option<(u64, PageSize, Perms)>,
    ) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        for asid in 0..2 {
            pt.create_space(&mut mem, asid).unwrap();
        }
        let mut mapped: Vec<(Asid, u64, PageSize, u64)> = Vec::new();
        let mut path = WalkPath::new();
        for _ in 0..400 {
            let asid = rng.gen_range(0..2);
            let size = if rng.gen_range(0..4) == 0 { PageSize::M2 } else { PageSize::K4 };
            let va = size.align_down(0x7f00_0000_0000 + rng.gen_range(0..(1u64 << 30)));
            match rng.gen_range(0..4) {
                0 | 1 => {
                    let overlap = mapped.iter().any(|&(a, v, s, _)| a == asid && v < va + size.bytes() && va < v + s.bytes());
                    if !overlap {
                        let gpa = mem.alloc(size, FrameUse::Data).unwrap();
                        pt.map(&mut mem, asid, va, gpa, size, Perms::RW_USER).unwrap();
                        mapped.push((asid, va, size, gpa));
                    }
                }
                2 if !mapped.is_empty() => {
                    let (a, v, s, gpa) = mapped.swap_remove(rng.gen_range(0..mapped.len()));
                    assert!(pt.unmap(&mut mem, a, v).is_some());
                    c.invalidate(a, v);
                    mem.free(gpa, s, FrameUse::Data);
                }
                _ => {
                    let probe = va + rng.gen_range(0..size.bytes());
                    let want = expect(&pt, asid, probe);
                    let t = pt.translate(asid, probe).map(|t| (t.phys(probe), t.size, t.perms));
                    assert_eq!(t, want, "{}", pt.kind());
                    path.clear();
                    let w = pt.walk(asid, probe, &mut c, &mut path).map(|t| (t.phys(probe), t.size, t.perms));
                    assert_eq!(w, want, "{}", pt.kind());
                }
            }
        }
    }
}
