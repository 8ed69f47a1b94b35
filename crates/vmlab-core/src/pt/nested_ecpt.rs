//! Nested elastic cuckoo page tables (Stojkovic et al. ASPLOS'22): a guest ECPT over a
//! host ECPT, walked in three sequential steps (§3.1, Fig. 4):
//!
//! 1. hash the guest VA into the gECPTs (n sizes × d ways: gPAs of guest entries) and
//!    host-translate each of those gPAs in the hECPTs, all in parallel;
//! 2. read the guest entries at their host-physical addresses;
//! 3. host-translate the data page's gPA.
//!
//! Walk caches prune each lookup: the gCWC (PMD + PUD gCWT entries) for the guest, an
//! hCWC for the host. CWC misses fetch their CWT entries in the background, off the
//! walk's critical path (§4.1). The plain design (§3) has one gCWC and one hCWC. The
//! advanced design (§4) adds, each behind its own key so they can be ablated as in
//! Fig. 9:
//!
//! - the shortcut translation cache (STC, §4.1): the host translations of gCWT entries,
//!   which a gCWC miss must otherwise look up in the hECPTs before it can fetch them;
//! - PTE-hCWT caching in step 1 (§4.2): a separate step-1 hCWC of PTE-hCWT entries;
//! - adaptive PTE-hCWT caching in step 3 (§4.2, §9.2);
//! - guest page-table pages in 4K host pages (§4.3): step 1 probes only the PTE-hECPT.
//!
//! Neither design caches the step-2 mapping of hPTEs to gPTEs (§4.4), and there is no
//! nested TLB (Table 2).

use super::adaptive::{AdaptivePteCaching, Transition};
use super::ecpt::{EcptProbe, Probed, ALL_SIZES, ONLY_4K};
use super::nested::{NestedConfig, NestedPageTable, PtBacking};
use super::{CacheCounters, ElasticCuckooPageTable, FastPaths, NoSplit, PageTable, PtFootprint, Translation, WalkCaches, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::mmu::cwc::EcptWalkCaches;
use crate::mmu::stc::ShortcutTranslationCache;
use crate::os::buddy::BuddyAllocator;
use serde::Serialize;

/// The host table's address space (one virtual machine).
const VM: Asid = 0;

/// An hECPT entry a host lookup reads: into the open step (`in_step`), or in the
/// background.
#[inline(always)]
fn push_entry(path: &mut WalkPath, in_step: bool, pa: u64, what: u8) {
    if in_step {
        path.push_parallel(pa, what);
    } else {
        path.push_background(pa);
    }
}

/// The walk caches of nested ECPT.
pub struct NestedEcptCaches {
    /// Guest CWCs (PMD + PUD gCWT entries; no PTE gCWT, §4.2).
    pub(crate) gcwc: EcptWalkCaches,
    /// The hCWC of step 3, and of step 1 too when there is no `step1`.
    pub(crate) hcwc: EcptWalkCaches,
    /// The advanced design's step-1 hCWC (PTE entries only, Table 2).
    pub(crate) step1: Option<EcptWalkCaches>,
    pub(crate) stc: ShortcutTranslationCache,
}

impl NestedEcptCaches {
    /// From `[page_table.ecpt]` (the guest's CWCs and the CWC latency) and
    /// `[page_table.nested]` (the host's and the STC).
    pub(crate) fn new(gcwc: EcptWalkCaches, n: &NestedConfig, cwc_latency: u32) -> Result<NestedEcptCaches> {
        let keys = ["page_table.nested.host_pte_cwc", "page_table.nested.host_pmd_cwc", "page_table.nested.host_pud_cwc"];
        let hcwc = EcptWalkCaches::with_keys([n.host_pte_cwc, n.host_pmd_cwc, n.host_pud_cwc], cwc_latency, keys)?;
        let step1 = if n.step1_host_pte_cwc == 0 {
            None
        } else {
            let keys = ["page_table.nested.step1_host_pte_cwc", "-", "-"];
            Some(EcptWalkCaches::with_keys([n.step1_host_pte_cwc, 0, 0], cwc_latency, keys)?)
        };
        Ok(NestedEcptCaches { gcwc, hcwc, step1, stc: ShortcutTranslationCache::new(n.stc_entries)? })
    }
}

impl WalkCaches for NestedEcptCaches {
    fn flush_all(&mut self) {
        self.gcwc.flush_all();
        self.hcwc.flush_all();
        if let Some(c) = &mut self.step1 {
            c.flush_all();
        }
        self.stc.flush();
    }
    fn flush_asid(&mut self, asid: Asid) {
        // Guest entries are per guest process; host entries belong to the VM.
        self.gcwc.flush_asid(asid);
    }
    fn invalidate(&mut self, asid: Asid, va: u64) {
        self.gcwc.invalidate(asid, va);
    }
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        let mut v = self.gcwc.counters();
        v.extend(self.hcwc.counters().into_iter().map(|(n, c)| (format!("host_{n}"), c)));
        if let Some(c) = &self.step1 {
            v.extend(c.counters().into_iter().map(|(n, c)| (format!("host_step1_{n}"), c)));
        }
        if self.stc.enabled() {
            v.push(("stc".to_string(), self.stc.counters.clone()));
        }
        v
    }
    fn probe_latency(&self) -> u64 {
        // Sequential probes: the gCWC, then the hCWC on step 1's gPAs, then the hCWC on
        // the data gPA after step 2.
        let step1 = self.step1.as_ref().unwrap_or(&self.hcwc);
        self.gcwc.probe_latency() + step1.probe_latency() + self.hcwc.probe_latency()
    }
}

/// References and events of the walker, by purpose (docs/metrics.md).
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct NestedEcptCounters {
    /// hECPT entries read in step 1, gECPT entries in step 2, hECPT entries in step 3.
    pub(crate) step1_hecpt_refs: u64,
    pub(crate) step2_gecpt_refs: u64,
    pub(crate) step3_hecpt_refs: u64,
    /// Background references: hCWT entries fetched on hCWC misses, gCWT entries
    /// fetched on gCWC misses, and the host lookups of those gCWT entries' addresses
    /// (what STC hits save).
    pub(crate) hcwt_fetches: u64,
    pub(crate) gcwt_fetches: u64,
    pub(crate) gcwt_host_refs: u64,
    /// Step-1 lookups that found a guest page-table page outside a 4K host page while
    /// the walker assumed 4K (0 when the hypervisor backs them with 4K pages).
    pub(crate) pt4k_violations: u64,
    /// 2M host pages split to back guest page-table pages with 4K pages.
    pub(crate) host_splits: u64,
}

/// Guest ECPT over host ECPT, with the plain or advanced walker.
pub struct NestedEcptPageTable {
    inner: NestedPageTable<ElasticCuckooPageTable, ElasticCuckooPageTable>,
    pt_pages_4k_only: bool,
    pt_backing_4k: bool,
    adaptive: Option<AdaptivePteCaching>,
    guest_probe: EcptProbe,
    host_probe: EcptProbe,
    /// Host-physical addresses of the guest entries read in step 2.
    hpas: Vec<(u64, u8)>,
    counters: NestedEcptCounters,
    /// Simulator-only: the host translations `back_pt` found for guest page-table
    /// pages (direct-mapped by guest-physical page; page + 1, 0: none), valid for the
    /// host table generation `pt_memo_gen`. Only a host page split changes a
    /// translation, and the pages it splits (2M ones under 4K page-table backing) are
    /// never memoised, so the generation is a guard. A walk looks up about four such
    /// pages; the memo spares each a host-table search.
    pt_memo: Vec<(u64, Translation)>,
    pt_memo_gen: u64,
}

/// Slots of `NestedEcptPageTable::pt_memo`.
const PT_MEMO: usize = 4096;

impl NestedEcptPageTable {
    /// `guest` and `host` tables: the host needs a PTE-CWT if PTE-hCWC entries are
    /// configured (`EcptConfig::pte_cwt`).
    pub(crate) fn new(guest: ElasticCuckooPageTable, host: ElasticCuckooPageTable, n: &NestedConfig) -> Result<NestedEcptPageTable> {
        if n.adaptive_pte_cwc && n.host_pte_cwc == 0 {
            return Err(Error::config("page_table.nested.adaptive_pte_cwc", "adapts the caching of PTE-hCWT entries: needs host_pte_cwc > 0"));
        }
        for (key, v) in [("adaptive_disable_below", n.adaptive_disable_below), ("adaptive_enable_above", n.adaptive_enable_above)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::config(format!("page_table.nested.{key}"), "a hit rate: must be between 0 and 1"));
            }
        }
        if n.adaptive_window == 0 {
            return Err(Error::config("page_table.nested.adaptive_window", "must be at least 1 lookup"));
        }
        let inner = NestedPageTable::new("nested-ecpt", guest, host, n)?;
        let pt_backing_4k = n.host_pt_backing == PtBacking::K4 || inner.host_page_size() == PageSize::K4;
        if n.pt_pages_4k_only && !pt_backing_4k {
            return Err(Error::config(
                "page_table.nested.pt_pages_4k_only",
                "the walker may assume 4K page-table pages only if the hypervisor backs them so: set host_pt_backing = \"4K\"",
            ));
        }
        Ok(NestedEcptPageTable {
            inner,
            pt_pages_4k_only: n.pt_pages_4k_only,
            pt_backing_4k: n.host_pt_backing == PtBacking::K4,
            adaptive: n.adaptive_pte_cwc.then(|| AdaptivePteCaching::new(n.adaptive_window, n.adaptive_disable_below, n.adaptive_enable_above)),
            guest_probe: EcptProbe::default(),
            host_probe: EcptProbe::default(),
            hpas: Vec::with_capacity(32),
            counters: NestedEcptCounters::default(),
            pt_memo: vec![(0, Translation { pa: 0, size: PageSize::K4, perms: Perms::NONE }); PT_MEMO],
            pt_memo_gen: 0,
        })
    }

    /// Make sure the guest page-table page at `gpa` is backed (its first use); with
    /// 4K page-table backing, split a 2M host page that covers it. Inline: nearly every
    /// call is a memo hit (about five a walk).
    #[inline(always)]
    fn back_pt(&mut self, gpa: u64, stc: &mut ShortcutTranslationCache) -> Option<Translation> {
        let (page, slot) = (gpa >> 12, (gpa >> 12) as usize % PT_MEMO);
        if self.pt_memo_gen == self.inner.host_gen() && self.pt_memo[slot].0 == page + 1 {
            return Some(self.pt_memo[slot].1);
        }
        self.back_pt_memo_missed(gpa, stc)
    }

    /// `back_pt` past a memo hit.
    #[inline(never)]
    fn back_pt_memo_missed(&mut self, gpa: u64, stc: &mut ShortcutTranslationCache) -> Option<Translation> {
        let (page, slot) = (gpa >> 12, (gpa >> 12) as usize % PT_MEMO);
        // (The memo cannot hold the page here: the generation moved on, or its slot
        // holds another.)
        if self.pt_memo_gen != self.inner.host_gen() {
            self.pt_memo.iter_mut().for_each(|m| m.0 = 0);
            self.pt_memo_gen = self.inner.host_gen();
        }
        let h = self.back_pt_searching(gpa, stc)?;
        // Backing may have split a host page: the generation moves on.
        if self.pt_memo_gen == self.inner.host_gen() {
            self.pt_memo[slot] = (page + 1, h);
        }
        Some(h)
    }

    /// `back_pt` past the memo.
    fn back_pt_searching(&mut self, gpa: u64, stc: &mut ShortcutTranslationCache) -> Option<Translation> {
        // Nearly always backed already, and as required: one host lookup.
        if let Some(h) = self.inner.host.translate(VM, gpa).filter(|h| !self.pt_backing_4k || h.size == PageSize::K4) {
            return Some(h);
        }
        let backed = if !self.pt_backing_4k {
            self.inner.back_with(gpa, self.inner.host_page_size())
        } else {
            self.inner.split_host_page(gpa).and_then(|split| {
                if split {
                    self.counters.host_splits += 1;
                    // Cached host PTEs of the old page now name the wrong size.
                    stc.flush();
                }
                self.inner.back_with(gpa, PageSize::K4)
            })
        };
        backed.map_err(|e| self.inner.walk_error = Some(e)).ok()
    }

    /// Host lookup of a guest page-table address through the step-1 hCWC: its hECPT
    /// entries go to the open step (`in_step`) or to the background, its hCWT fetches
    /// to the background. Returns the number of hECPT entries read (the translation is
    /// `back_pt`'s). Inline: nearly every lookup is direct; a planned one is handed on
    /// out of line.
    #[inline(always)]
    fn host_lookup_pt(&mut self, gpa: u64, c: &mut NestedEcptCaches, path: &mut WalkPath, in_step: bool) -> u64 {
        // Without a step-1 hCWC, step 1 shares the step-3 one, PTE entries included
        // only while adaptive caching has them on.
        let use_pte = c.step1.is_some() || self.adaptive.as_ref().is_none_or(|a| a.enabled());
        let hc = c.step1.as_mut().unwrap_or(&mut c.hcwc);
        let sizes = if self.pt_pages_4k_only { ONLY_4K } else { ALL_SIZES };
        let p = &mut self.host_probe;
        match self.inner.host.probe_or_direct(VM, gpa, hc, sizes, use_pte, p) {
            Probed::Direct { entry_pa, .. } => {
                push_entry(path, in_step, entry_pa, 1);
                1
            }
            Probed::NoSpace => 0,
            Probed::Planned => self.host_lookup_planned(path, in_step),
        }
    }

    /// `host_lookup_pt` of a planned lookup: its entries and fetches from `host_probe`.
    /// Returns the number of hECPT entries read.
    #[inline(never)]
    fn host_lookup_planned(&mut self, path: &mut WalkPath, in_step: bool) -> u64 {
        let p = &self.host_probe;
        self.counters.pt4k_violations += p.outside_sizes as u64;
        for &(pa, what) in &p.refs {
            push_entry(path, in_step, pa, what);
        }
        for &pa in &p.cwt_fetches {
            path.push_background(pa);
        }
        self.counters.hcwt_fetches += p.cwt_fetches.len() as u64;
        p.refs.len() as u64
    }

    #[cfg(test)]
    pub(crate) fn counters(&self) -> &NestedEcptCounters {
        &self.counters
    }
}

impl PageTable for NestedEcptPageTable {
    type Caches = NestedEcptCaches;

    fn kind(&self) -> &'static str {
        "nested-ecpt"
    }
    fn page_sizes(&self) -> &[PageSize] {
        self.inner.page_sizes()
    }
    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        self.inner.create_space(mem, asid)
    }
    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        self.inner.destroy_space(mem, asid)
    }
    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        self.inner.map(mem, asid, va, pa, size, perms)
    }
    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        self.inner.unmap(mem, asid, va)
    }
    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        self.inner.protect(asid, va, perms)
    }
    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.inner.translate(asid, va)
    }
    fn mapped_frame(&self, asid: Asid, va: u64, t: &Translation) -> u64 {
        self.inner.mapped_frame(asid, va, t)
    }

    fn walk(&mut self, asid: Asid, va: u64, c: &mut NestedEcptCaches, path: &mut WalkPath) -> Option<Translation> {
        let found = self.inner.guest.probe(asid, va, &mut c.gcwc, ALL_SIZES, true, &mut self.guest_probe);
        let g = if found { self.walk_guest(asid, va, c, path) } else { None }?;
        // Step 3: the data page's gPA in the hECPTs, PTE-hCWC entries adaptively.
        let gpa = g.phys(va);
        let use_pte = self.adaptive.as_ref().is_none_or(|a| a.enabled());
        path.begin_step();
        let p = &mut self.host_probe;
        self.inner.host.probe(VM, gpa, &mut c.hcwc, ALL_SIZES, use_pte, p);
        for &(pa, what) in &p.refs {
            path.push_parallel(pa, what);
        }
        for &pa in &p.cwt_fetches {
            path.push_background(pa);
        }
        self.counters.step3_hecpt_refs += p.refs.len() as u64;
        self.counters.hcwt_fetches += p.cwt_fetches.len() as u64;
        let h = p.found;
        if let Some(a) = &mut self.adaptive {
            if a.observe(p.pte_hit, p.pmd_hit) == Transition::Disabled {
                c.hcwc.pte.flush();
            }
        }
        self.inner.compose_with(va, g, h)
    }

    fn take_error(&mut self) -> Option<crate::Error> {
        self.inner.take_error()
    }

    fn footprint(&self) -> PtFootprint {
        self.inner.footprint()
    }

    fn details(&self) -> serde_json::Value {
        let mut d = self.inner.details();
        let mut a = serde_json::to_value(&self.counters).unwrap_or_default();
        if let Some(ad) = &self.adaptive {
            a["adaptive"] = serde_json::json!({"enabled_now": ad.enabled(), "counters": ad.counters});
        }
        a["pt_pages_4k_only"] = self.pt_pages_4k_only.into();
        d["nested_ecpt"] = a;
        d
    }
}

impl FastPaths for NestedEcptPageTable {
    type Split = NoSplit;
    const PREFETCHES: bool = true;

    fn prefetch(&self, asid: Asid, va: u64) {
        self.inner.prefetch_both(asid, va)
    }
}

impl NestedEcptPageTable {
    /// Steps 1 and 2 after the guest probe (`guest_probe`), and the background gCWC
    /// fill: the guest translation of `va`, or None (after the two steps) if the guest
    /// does not map it.
    fn walk_guest(&mut self, asid: Asid, va: u64, c: &mut NestedEcptCaches, path: &mut WalkPath) -> Option<Translation> {
        // Step 1: host-translate every guest entry the guest probe reads.
        path.begin_step();
        let mut hpas = std::mem::take(&mut self.hpas);
        hpas.clear();
        let mut ok = true;
        // The k host lookups are issued in parallel: none sees another's CWC fill.
        self.host_probe.defer_fills = true;
        // (By index: the probe stays in `self`, which the host lookups borrow.)
        for k in 0..self.guest_probe.refs.len() {
            let (gpa, what) = self.guest_probe.refs[k];
            let hit = self.back_pt(gpa, &mut c.stc).map(|h| (self.host_lookup_pt(gpa, c, path, true), h));
            match hit {
                Some((n, h)) => {
                    self.counters.step1_hecpt_refs += n;
                    hpas.push((h.phys(gpa), what));
                }
                None => ok = false,
            }
        }
        self.host_probe.defer_fills = false;
        self.host_probe.apply_fills(c.step1.as_mut().unwrap_or(&mut c.hcwc));
        // Step 2: read the guest entries.
        path.begin_step();
        for &(hpa, what) in &hpas {
            path.push_parallel(hpa, what);
        }
        self.counters.step2_gecpt_refs += hpas.len() as u64;
        self.hpas = hpas;
        // Background: fetch the gCWT entries the gCWC missed. Their gPAs need the host
        // translation: the STC's, or a host lookup (which then fills the STC).
        for k in 0..self.guest_probe.cwt_fetches.len() {
            let gpa = self.guest_probe.cwt_fetches[k];
            let Some(h) = self.back_pt(gpa, &mut c.stc) else {
                ok = false;
                continue;
            };
            let hpa = match c.stc.lookup(gpa) {
                Some(hpa) => hpa,
                None => {
                    self.counters.gcwt_host_refs += self.host_lookup_pt(gpa, c, path, false);
                    c.stc.fill_missed(gpa, h);
                    h.phys(gpa)
                }
            };
            path.push_background(hpa);
            self.counters.gcwt_fetches += 1;
        }
        if !ok {
            return None;
        }
        // The probe read every entry that can hold va's mapping (the CWCs prune only
        // sizes and ways the CWTs rule out), so what it found is the mapping.
        debug_assert_eq!(self.guest_probe.found, self.inner.guest.translate(asid, va));
        self.guest_probe.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Bytes;
    use crate::os::buddy::FrameUse;
    use crate::pt::ecpt::{EcptConfig, CWT_REF};
    use crate::pt::nested::tests::{check_composition, compose_by_hand, small_ecpt};
    use crate::pt::nested::NestedWalkCaches;

    fn host_ecpt(pte_cwt: bool) -> ElasticCuckooPageTable {
        ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], cwt_slots: [64, 64], pte_cwt, ..Default::default() }).unwrap()
    }

    /// The plain design: one gCWC, one shared hCWC, nothing else.
    fn plain(host_page: u64) -> NestedConfig {
        NestedConfig { host_page_size: Bytes(host_page), host_phys_mem: Bytes(8 << 30), ntlb_entries: 0, ..Default::default() }
    }

    /// Table 2's advanced design.
    fn advanced(host_page: u64) -> NestedConfig {
        NestedConfig {
            stc_entries: 10,
            step1_host_pte_cwc: 4,
            host_pte_cwc: 16,
            adaptive_pte_cwc: true,
            pt_pages_4k_only: true,
            host_pt_backing: PtBacking::K4,
            ..plain(host_page)
        }
    }

    fn build(n: &NestedConfig, gcwc: [usize; 3]) -> (NestedEcptPageTable, NestedEcptCaches, BuddyAllocator) {
        let pte_cwt = n.host_pte_cwc > 0 || n.step1_host_pte_cwc > 0;
        let pt = NestedEcptPageTable::new(small_ecpt(), host_ecpt(pte_cwt), n).unwrap();
        let gcwc = EcptWalkCaches::new(gcwc[0], gcwc[1], gcwc[2], 4).unwrap();
        let mut mem = BuddyAllocator::new(4 << 30).unwrap();
        let mut pt = pt;
        pt.create_space(&mut mem, 0).unwrap();
        (pt, NestedEcptCaches::new(gcwc, n, 4).unwrap(), mem)
    }

    fn per_step(path: &WalkPath) -> Vec<usize> {
        (0..path.steps()).map(|s| path.refs().iter().filter(|r| r.step == s).count()).collect()
    }

    fn map(pt: &mut NestedEcptPageTable, mem: &mut BuddyAllocator, va: u64, size: PageSize) -> u64 {
        let gpa = mem.alloc(size, FrameUse::Data).unwrap();
        pt.map(mem, 0, va, gpa, size, Perms::RW_USER).unwrap();
        gpa
    }

    /// Cold walks: n²d², n·d, n·d parallel references (§3.1); only the PTE-hECPT's d
    /// ways per guest entry when page-table pages are known to be 4K (§4.3).
    #[test]
    fn cold_walks_are_81_9_9_or_27_9_9_with_4k_page_tables() {
        for (n, expect) in [(plain(4096), [81, 9, 9]), (NestedConfig { pt_pages_4k_only: true, ..plain(4096) }, [27, 9, 9])] {
            let (mut pt, mut c, mut mem) = build(&NestedConfig { host_pmd_cwc: 0, host_pud_cwc: 0, ..n }, [0, 0, 0]);
            map(&mut pt, &mut mem, 0x5555_0000_0000, PageSize::K4);
            let mut path = WalkPath::new();
            let t = pt.walk(0, 0x5555_0000_0123, &mut c, &mut path).unwrap();
            assert_eq!(Some(t), pt.translate(0, 0x5555_0000_0123));
            assert_eq!(per_step(&path), expect);
            assert!(path.background().is_empty(), "no walk caches, nothing to fill");
            assert_eq!(pt.counters().pt4k_violations, 0);
        }
        // The advanced design with Table 2's caches: a cold walk misses them all, and
        // the k parallel host lookups of step 1 do not see each other's CWC fills.
        let (mut pt, mut c, mut mem) = build(&advanced(4096), [0, 16, 2]);
        map(&mut pt, &mut mem, 0x5555_0000_0000, PageSize::K4);
        let mut path = WalkPath::new();
        pt.walk(0, 0x5555_0000_0123, &mut c, &mut path).unwrap();
        assert_eq!(per_step(&path), [27, 9, 9]);
    }

    /// Warm walks of the advanced design: a 4K guest page is a guest size walk (no PTE
    /// gCWT: d candidates), each host-translated by one PTE-hCWC hit, and a direct
    /// step 3: 3 / 3 / 1. A 2M guest page on 2M host data: Fig. 6's best case, 1 / 1 / 1.
    #[test]
    fn warm_walks_are_3_3_1_and_1_1_1() {
        let (mut pt, mut c, mut mem) = build(&advanced(4096), [0, 16, 2]);
        for p in 0..4 {
            map(&mut pt, &mut mem, 0x4000_0000 + (p << 12), PageSize::K4);
        }
        let mut path = WalkPath::new();
        pt.walk(0, 0x4000_0000, &mut c, &mut path).unwrap();
        assert!(!path.background().is_empty(), "the cold walk fills the CWCs");
        assert!(path.refs().iter().all(|r| r.what != CWT_REF), "CWT fetches stay out of the steps");
        path.clear();
        pt.walk(0, 0x4000_3000, &mut c, &mut path).unwrap();
        assert_eq!((per_step(&path), path.background().len()), (vec![3, 3, 1], 0));

        let (mut pt, mut c, mut mem) = build(&advanced(2 << 20), [0, 16, 2]);
        // The data page in a 16 MiB host section of its own: a section that also holds
        // 4K host pages (the guest's page-table pages) makes step 3 read the 4K ways too.
        for _ in 0..8 {
            mem.alloc(PageSize::M2, FrameUse::Data).unwrap();
        }
        let gpa = map(&mut pt, &mut mem, 0x8000_0000, PageSize::M2);
        pt.walk(0, 0x8000_0000, &mut c, &mut path).unwrap();
        path.clear();
        let t = pt.walk(0, 0x801f_f123, &mut c, &mut path).unwrap();
        assert_eq!(per_step(&path), vec![1, 1, 1]);
        assert_eq!((Some(t), t.size), (pt.translate(0, 0x801f_f123), PageSize::M2));
        assert_eq!(pt.inner.host.translate(VM, gpa).unwrap().size, PageSize::M2);
    }

    /// A gCWC miss needs the host address of the gCWT entry: a host lookup in the
    /// background, which the STC then saves; the STC is not probed on gCWC hits.
    #[test]
    fn stc_saves_the_gcwt_host_lookup() {
        let (mut pt, mut c, mut mem) = build(&advanced(4096), [0, 16, 2]);
        map(&mut pt, &mut mem, 0x4000_0000, PageSize::K4);
        let mut path = WalkPath::new();
        pt.walk(0, 0x4000_0000, &mut c, &mut path).unwrap();
        let host_refs = pt.counters().gcwt_host_refs;
        assert!(host_refs >= 2, "two gCWT entries, each looked up in the host");
        assert_eq!((c.stc.counters.lookups, c.stc.counters.hits), (2, 0));
        c.gcwc.flush_all();
        path.clear();
        pt.walk(0, 0x4000_0000, &mut c, &mut path).unwrap();
        assert_eq!(pt.counters().gcwt_host_refs, host_refs, "both STC hits");
        assert_eq!((c.stc.counters.lookups, c.stc.counters.hits), (4, 2));
        assert_eq!(path.background().len(), 2, "just the two gCWT entries");
        path.clear();
        pt.walk(0, 0x4000_0000, &mut c, &mut path).unwrap();
        assert_eq!(c.stc.counters.lookups, 4);
    }

    /// Random 2M regions defeat a 16-entry PTE-hCWC: caching turns off, and the
    /// step-3 PTE-hCWC is no longer consulted (step 1's is separate and stays on).
    #[test]
    fn adaptive_caching_turns_off_under_random_regions() {
        let n = NestedConfig { adaptive_window: 20, ..advanced(4096) };
        let (mut pt, mut c, mut mem) = build(&n, [0, 16, 2]);
        let regions = 64u64;
        for r in 0..regions {
            // One 4K page per guest-physical GiB, so that neither the PTE-hCWC nor the
            // PMD-hCWC (4 entries of 1 GiB) holds the regions between their turns.
            let gpa = (r + 4) << 30;
            pt.map(&mut mem, 0, 0x10_0000_0000 + (r << 21), gpa, PageSize::K4, Perms::RW_USER).unwrap();
        }
        let mut path = WalkPath::new();
        let lookups = |c: &NestedEcptCaches| c.hcwc.pte.counters.lookups;
        let mut frozen_at = None;
        for i in 0..400u64 {
            let r = (i * 37) % regions;
            path.clear();
            pt.walk(0, 0x10_0000_0000 + (r << 21), &mut c, &mut path).unwrap();
            if frozen_at.is_none() && !pt.adaptive.as_ref().unwrap().enabled() {
                frozen_at = Some(lookups(&c));
            }
        }
        let frozen_at = frozen_at.expect("caching was disabled");
        assert_eq!(lookups(&c), frozen_at, "no step-3 PTE-hCWC lookups while disabled");
        assert!(c.step1.as_ref().unwrap().pte.counters.hits > 0);
        let d = pt.details();
        assert_eq!(d["nested_ecpt"]["adaptive"]["counters"]["disables"], 1, "{d}");
        assert_eq!(d["nested_ecpt"]["adaptive"]["enabled_now"], false);
    }

    /// With host THP and 4K page-table backing, guest page-table pages end up in 4K host
    /// pages (splitting a 2M page that a data page brought in first), data pages in 2M
    /// ones, and the walker's 4K assumption never fails.
    #[test]
    fn page_tables_in_4k_host_pages_under_host_thp() {
        let (mut pt, mut c, mut mem) = build(&advanced(2 << 20), [0, 16, 2]);
        // 4K data right after the guest tables: its 2M host page also covers tables.
        let mut vas = Vec::new();
        for p in 0..600u64 {
            vas.push(0x4000_0000 + (p << 12));
            map(&mut pt, &mut mem, vas[p as usize], PageSize::K4);
        }
        let mut path = WalkPath::new();
        for (i, &va) in vas.iter().enumerate() {
            path.clear();
            assert_eq!(pt.walk(0, va, &mut c, &mut path), pt.translate(0, va));
            if i % 8 == 0 {
                // The memo of page-table pages' host translations is never stale, host
                // page splits included.
                let current = pt.pt_memo_gen == pt.inner.host_gen();
                for &(p, h) in pt.pt_memo.iter().filter(|m| current && m.0 != 0) {
                    assert_eq!(Some(h), pt.inner.host.translate(VM, (p - 1) << 12), "page {:#x}", p - 1);
                }
            }
        }
        assert!(pt.counters().host_splits > 0);
        assert_eq!(pt.counters().pt4k_violations, 0);
        // Every guest entry read in step 2 is in a 4K host page.
        let gp = pt.guest_probe.refs.clone();
        for (gpa, _) in gp {
            assert_eq!(pt.inner.host.translate(VM, gpa).unwrap().size, PageSize::K4);
        }
        // A walker that assumes 4K without the hypervisor's guarantee is a config error.
        let bad = NestedConfig { host_pt_backing: PtBacking::Same, ..advanced(2 << 20) };
        let e = NestedEcptPageTable::new(small_ecpt(), host_ecpt(true), &bad).err().unwrap();
        assert!(e.to_string().contains("page_table.nested.pt_pages_4k_only"), "{e}");
        let bad = NestedConfig { host_pte_cwc: 0, ..advanced(4096) };
        let e = NestedEcptPageTable::new(small_ecpt(), host_ecpt(true), &bad).err().unwrap();
        assert!(e.to_string().contains("page_table.nested.adaptive_pte_cwc"), "{e}");
        for (bad, key) in [
            (NestedConfig { adaptive_disable_below: 1.5, ..advanced(4096) }, "adaptive_disable_below"),
            (NestedConfig { adaptive_enable_above: -0.1, ..advanced(4096) }, "adaptive_enable_above"),
            (NestedConfig { adaptive_window: 0, ..advanced(4096) }, "adaptive_window"),
        ] {
            let e = NestedEcptPageTable::new(small_ecpt(), host_ecpt(true), &bad).err().unwrap();
            assert!(e.to_string().contains(&format!("page_table.nested.{key}")), "{e}");
        }
    }

    /// With every walk cache off, the walker reads exactly what the generic nested
    /// walker reads, step by step. (With host CWCs on they differ by design: the generic
    /// walker's parallel host walks run one after another and see each other's fills.)
    #[test]
    fn plain_design_reads_what_the_generic_nested_walker_reads() {
        use rand::{Rng, SeedableRng};
        let n = NestedConfig { host_pmd_cwc: 0, host_pud_cwc: 0, ..plain(4096) };
        let (mut pt, mut c, mut mem) = build(&n, [0, 0, 0]);
        let mut generic = NestedPageTable::new("nested-ecpt", small_ecpt(), host_ecpt(false), &n).unwrap();
        let mut gc = NestedWalkCaches::new(EcptWalkCaches::none(), EcptWalkCaches::none(), &n, 0).unwrap();
        let mut gmem = BuddyAllocator::new(4 << 30).unwrap();
        generic.create_space(&mut gmem, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let (mut a, mut b) = (WalkPath::new(), WalkPath::new());
        for i in 0..300u64 {
            let va = 0x7000_0000_0000 + (rng.gen_range(0..1u64 << 18) << 12);
            if i % 2 == 0 && pt.translate(0, va).is_none() {
                map(&mut pt, &mut mem, va, PageSize::K4);
                let gpa = gmem.alloc(PageSize::K4, FrameUse::Data).unwrap();
                generic.map(&mut gmem, 0, va, gpa, PageSize::K4, Perms::RW_USER).unwrap();
            }
            a.clear();
            b.clear();
            let (x, y) = (pt.walk(0, va, &mut c, &mut a), generic.walk(0, va, &mut gc, &mut b));
            assert_eq!(x.is_some(), y.is_some());
            let refs = |p: &WalkPath| p.refs().iter().filter(|r| r.what != CWT_REF).map(|r| (r.pa, r.step, r.what)).collect::<Vec<_>>();
            assert_eq!(refs(&a), refs(&b), "walk {i}");
            assert_eq!(a.background().len(), b.refs().iter().filter(|r| r.what == CWT_REF).count());
        }
    }

    /// `prefetch` is a host-cache hint only: on tables small enough to resize while
    /// the hints run ahead (the look-ahead's guest lookups leave `find` hints behind),
    /// every walk of the advanced design returns what it returns unhinted, with the same
    /// references and the same walk-cache counts.
    #[test]
    fn prefetch_changes_no_walk() {
        use rand::{Rng, SeedableRng};
        let n = advanced(4096);
        let (mut plain, mut pc, mut mem_a) = build(&n, [0, 16, 2]);
        let (mut hinted, mut hc, mut mem_b) = build(&n, [0, 16, 2]);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let (mut a, mut b) = (WalkPath::new(), WalkPath::new());
        let page = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| 0x7000_0000_0000u64 + (rng.gen_range(0..1u64 << 14) << 12);
        let mut found = 0;
        for i in 0..6000 {
            let va = page(&mut rng);
            if i % 3 == 0 && plain.translate(0, va).is_none() {
                assert_eq!(map(&mut plain, &mut mem_a, va, PageSize::K4), map(&mut hinted, &mut mem_b, va, PageSize::K4));
            }
            for _ in 0..rng.gen_range(0..4) {
                hinted.prefetch(0, page(&mut rng));
            }
            hinted.prefetch(0, va);
            a.clear();
            b.clear();
            let (x, y) = (plain.walk(0, va, &mut pc, &mut a), hinted.walk(0, va, &mut hc, &mut b));
            assert_eq!(x, y, "walk {i}");
            assert_eq!(a.refs(), b.refs(), "walk {i}");
            assert_eq!(a.background(), b.background(), "walk {i}");
            found += x.is_some() as u32;
        }
        assert!(found > 1000, "the walks found mappings ({found})");
        let resizes = plain.inner.guest.details()["tables"][0]["resizes"].as_u64().unwrap();
        assert!(resizes >= 2, "the guest's 4K table resized under the hints ({resizes})");
        assert_eq!(pc.counters(), hc.counters());
    }

    /// Random operations: every walk of the advanced design (host 4K and THP) agrees
    /// with composing the guest's and the host's translations.
    #[test]
    fn advanced_translation_composes_guest_and_host() {
        for host_page in [4096u64, 2 << 20] {
            for n in [plain(host_page), advanced(host_page)] {
                let (pt, c, mem) = build(&n, [0, 4, 2]);
                check_composition(pt, c, mem, host_page + 1, |pt, a, va| compose_by_hand(&pt.inner.guest, &pt.inner.host, a, va));
            }
        }
    }
}
