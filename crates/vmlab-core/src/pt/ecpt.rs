//! Elastic cuckoo page tables (ECPT; Skarlatos et al. ASPLOS'20, summarised by
//! Stojkovic et al. §2.3): per address space, one elastic d-ary cuckoo table per page
//! size (4K, 2M, 1G), each entry a 64-byte line with the tag of 8 consecutive pages of
//! that size and their 8 PTEs.
//!
//! Cuckoo walk tables (CWTs) record which page sizes map each section of the address
//! space: a PMD-CWT entry covers 1 GiB in 64 sections of 16 MiB (one 2M ECPT entry
//! each: are 4K pages, 2M pages mapped there, and the 2M entry's way), a PUD-CWT entry
//! 512 GiB in 64 sections of 8 GiB ([`super::cwc`]); they are cuckoo tables of their
//! own in simulated memory, one entry per region with a mapping. Cuckoo walk caches
//! (CWCs) cache CWT entries. A walk is one sequential step whose parallel references
//! depend on what the CWCs know of `va`'s section:
//!
//! - *direct*: a CWC knows the page size and the way of the entry: 1 reference (a
//!   PMD-CWT section records the way of its 2M entry; the ways of 4K entries are in a
//!   PTE-CWT, which only the nested design's host keeps, Stojkovic et al. §4.2);
//! - *size*: one page size known, its d ways probed (a PMD-CWC hit on a 4K section); a
//!   section mapped by both 4K and 2M pages: the 4K ways and the 2M entry (d + 1);
//! - *partial*: the PUD-CWC rules out some page sizes: the others × d ways;
//! - *complete*: no CWC hit: every size × d ways.
//!
//! The CWCs are probed together (parallel hardware); the CWT entries of those that
//! missed are fetched in the background to fill them (Stojkovic et al. §2.3: "Then, in
//! the background, the hardware accesses the corresponding CWT").
//!
//! The CWTs' way information is kept exact (the OS updates it when cuckoo kicks move
//! entries, as in the paper); that update cost is not modelled.

use super::cuckoo::{CuckooParams, ElasticCuckooTable, CLUSTER};
use super::{FastPaths, NoSplit, PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::mmu::cwc::{EcptWalkCaches, PMD_CWT_SHIFT, PMD_SECTION_SHIFT, PTE_CWT_SHIFT, PUD_CWT_SHIFT, PUD_SECTION_SHIFT};
use crate::os::buddy::BuddyAllocator;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct EcptConfig {
    /// Ways of each cuckoo table (d).
    pub ways: usize,
    /// Initial slots per way for the 4K, 2M and 1G tables (powers of two).
    pub initial_slots: [usize; 3],
    /// Occupancy (entries / (ways × slots)) above which a table starts to grow.
    pub occupancy_threshold: f64,
    /// Growth factor of a resize (a power of two ≥ 2).
    pub growth: usize,
    /// Old slots migrated to the new arrays per insertion during a resize.
    pub migrate_per_insert: usize,
    /// Displacements an insertion may make before the table grows.
    pub max_kicks: usize,
    /// Keep cuckoo walk tables (needed by the CWCs).
    pub cwt: bool,
    /// Initial slots per way of the PMD- and PUD-CWT, and their ways.
    pub cwt_slots: [usize; 2],
    pub cwt_ways: usize,
    /// CWC entries: PTE (4K ways of 2 MiB regions; needs a PTE-CWT, which this
    /// table then keeps, with `cwt_slots[0]` slots), PMD (1 GiB regions) and PUD
    /// (512 GiB regions); 0 = none. Native ECPTs have no PTE-CWT (Stojkovic et al. §8).
    pub pte_cwc: usize,
    pub pmd_cwc: usize,
    pub pud_cwc: usize,
    /// Cycles for the (parallel) CWC probe at the start of a walk.
    pub cwc_latency: u32,
    /// Keep a PTE-CWT even with no PTE-CWC here (a nested host's step-1 hCWC caches it).
    #[serde(skip)]
    pub pte_cwt: bool,
}

impl Default for EcptConfig {
    fn default() -> Self {
        // Stojkovic et al. Table 2: PTE and PMD tables 16384 × 3, PUD 8192 × 3.
        EcptConfig {
            ways: 3,
            initial_slots: [16384, 16384, 8192],
            occupancy_threshold: 0.6,
            growth: 2,
            migrate_per_insert: 4,
            max_kicks: 16,
            // Table 2: CWTs 4096 x 2 (PUD 2048 x 2); PMD-CWC 16, PUD-CWC 2 entries.
            cwt: true,
            cwt_slots: [4096, 2048],
            cwt_ways: 2,
            pte_cwc: 0,
            pmd_cwc: 16,
            pud_cwc: 2,
            cwc_latency: 1,
            pte_cwt: false,
        }
    }
}

const SIZES: [PageSize; 3] = [PageSize::K4, PageSize::M2, PageSize::G1];

/// Page-size masks for [`ElasticCuckooPageTable::probe`] (bit i: the i-th size).
pub(crate) const ALL_SIZES: u8 = 0b111;
pub(crate) const ONLY_4K: u8 = 0b001;
#[cfg(test)]
/// The `what` of a CWT-entry reference (ECPT entries are size index + 1).
pub(crate) const CWT_REF: u8 = 0;

/// CWTs by index: PMD, PUD, PTE.
const PMD: usize = 0;
const PUD: usize = 1;
const PTE: usize = 2;
/// The region of a CWT entry, and the section whose page sizes it records.
const CWT_SHIFTS: [u32; 3] = [PMD_CWT_SHIFT, PUD_CWT_SHIFT, PTE_CWT_SHIFT];
const SECTION_SHIFTS: [u32; 3] = [PMD_SECTION_SHIFT, PUD_SECTION_SHIFT, PTE_CWT_SHIFT];

struct SpaceTables {
    tables: Vec<ElasticCuckooTable>,
    /// PMD-CWT (key: 1 GiB region; ptes[0] = 4K pages, ptes[1] = 2M pages in it),
    /// PUD-CWT (key: 512 GiB region; ptes[0..3] = 4K, 2M, 1G pages in it) and,
    /// optionally, PTE-CWT (key: 2 MiB region; ptes[0] = 4K pages; the ways are read
    /// from the table). An entry lives while its region maps a page.
    cwt: [Option<ElasticCuckooTable>; 3],
    /// Simulator-only, per CWT: the pages of each size in each section (by `va >>
    /// SECTION_SHIFTS[t]`), from which a section header's size bits are read (the
    /// hardware's OS keeps the bits; counting keeps them exact across unmaps).
    sections: [FxHashMap<u64, [u32; 3]>; 3],
}

/// What one ECPT lookup reads, as the CWCs decide it. Reused: a lookup does not allocate.
#[derive(Clone, Debug, Default)]
pub(crate) struct EcptProbe {
    /// ECPT entries read in parallel: (physical address, size index + 1).
    pub(crate) refs: Vec<(u64, u8)>,
    /// CWT entries fetched to fill the CWCs that missed.
    pub(crate) cwt_fetches: Vec<u64>,
    /// The PTE-CWC's answer, when it was consulted for a region with a PTE-CWT entry.
    pub(crate) pte_hit: Option<bool>,
    /// The PMD-CWC's answer.
    pub(crate) pmd_hit: bool,
    /// The table maps the address with a size outside the assumed `sizes`.
    pub(crate) outside_sizes: bool,
    /// The mapping of the address, if an entry the lookup reads holds it (`None`: not
    /// mapped, or not in those entries; then ask the table).
    pub(crate) found: Option<Translation>,
    /// Set by the caller: CWC fills wait in `pending_fills` until [`EcptProbe::apply_fills`]
    /// (lookups issued in parallel all see the CWCs as they were before the step).
    pub(crate) defer_fills: bool,
    /// (ASID, address, CWC: 0 PTE, 1 PMD, 2 PUD) fills not yet applied.
    pub(crate) pending_fills: Vec<(Asid, u64, u8)>,
}

impl EcptProbe {
    /// Forget the last lookup's plan (its entries, fetches and findings).
    #[inline(always)]
    fn clear_plan(&mut self) {
        self.refs.clear();
        self.cwt_fetches.clear();
        self.outside_sizes = false;
        self.found = None;
    }

    /// Apply the deferred CWC fills to `c`.
    pub(crate) fn apply_fills(&mut self, c: &mut EcptWalkCaches) {
        for &(asid, va, which) in &self.pending_fills {
            [&mut c.pte, &mut c.pmd, &mut c.pud][which as usize].fill(asid, va);
        }
        self.pending_fills.clear();
    }
}

/// What [`ElasticCuckooPageTable::probe_or_direct`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probed {
    /// The address space has none of these tables.
    NoSpace,
    /// A PTE-CWC hit named the one entry to read: its address, and the page's PTE there
    /// (0: not mapped).
    Direct { entry_pa: u64, pte: u64 },
    /// The lookup's plan is in the `EcptProbe`.
    Planned,
}

pub struct ElasticCuckooPageTable {
    cfg: EcptConfig,
    params: CuckooParams,
    spaces: Vec<Option<SpaceTables>>,
    mapped: u64,
    /// Walks by class: direct, size, partial, complete.
    classes: [u64; 4],
    retired_resizes: u64,
    retired_migrated: u64,
    /// The native walk's probe plan.
    scratch: EcptProbe,
    /// Bumped by every change to what `region_memo` holds (a CWT entry made, moved or
    /// dropped, a count of its crossing zero, a space made or dropped): a memo slot is
    /// valid only for the generation it was read in.
    gen: u64,
    /// Simulator-only: the CWT entries of recently probed 2 MiB regions, direct-mapped by
    /// region. A walk reads up to three CWT entries of a region (PTE, PMD and the PUD of
    /// its 1 GiB region), each a hint, a tag and a line in the host's cache; one slot
    /// here holds them all. Nothing is counted or changed through it.
    region_memo: Vec<RegionFacts>,
    /// Bumped by every `map`, `unmap`, `protect` and space made or dropped: anything
    /// that may place, move or change an entry or a CWT entry.
    layout_gen: u64,
    /// Simulator-only: where `probe_direct_4k` found recently probed 4K pages (the
    /// guest page-table pages a nested walk's step 1 translates, over and over),
    /// direct-mapped by page, valid for the `layout_gen` they were read in.
    page_memo: Vec<PageFacts>,
}

/// One `page_memo` slot: a 4K page whose region has a PTE-CWT entry and whose cluster
/// the 4K table holds, as read in generation `gen`.
#[derive(Clone, Copy, Default)]
struct PageFacts {
    /// Page number + 1 (0 = empty), and its space.
    page: u64,
    asid: Asid,
    gen: u64,
    /// The cluster's entry, and the page's PTE there (0: not mapped).
    entry_pa: u64,
    pte: u64,
}

/// Slots of `page_memo` (a power of two). A nested gups over 1 GiB has about 2,300
/// guest page-table pages in use; a slot is a page number modulo this (XOR a mix of
/// the space), so the pages of one table array, consecutive, never share a slot.
const PAGE_MEMO: usize = 16384;

/// One `region_memo` slot: the CWT entries of one 2 MiB region of one space, as read in
/// generation `gen`.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct RegionFacts {
    /// (ASID << 44 | region) + 1; 0 = empty.
    tag: u64,
    gen: u64,
    /// Per CWT t: the entry's address (`NO_ENTRY`: none).
    pa: [u64; 3],
    /// Per CWT t: the entry's page sizes.
    sizes: [u8; 3],
    /// Bit t: CWT t's entry has been read into `pa[t]` and `sizes[t]`.
    read: u8,
}

/// `RegionFacts::pa` of a region without an entry.
const NO_ENTRY: u64 = u64::MAX;

/// Slots of `region_memo` (a power of two).
const REGION_MEMO: usize = 1024;

/// A CWT entry as a walk uses it: which page sizes map the region (bit i: `SIZES[i]`),
/// and the entry's physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CwtEntry {
    pub(crate) sizes: u8,
    pub(crate) pa: u64,
}

#[inline(always)]
fn key_of(va: u64, size: PageSize) -> (u64, usize) {
    let vpn = va >> size.shift();
    (vpn / CLUSTER as u64, (vpn % CLUSTER as u64) as usize)
}

#[inline(always)]
fn pte(pa: u64, perms: Perms) -> u64 {
    (pa & !0xfff) | 0x10 | perms.bits() as u64
}

impl ElasticCuckooPageTable {
    pub fn new(cfg: &EcptConfig) -> Result<ElasticCuckooPageTable> {
        if !(1..=super::cuckoo::MAX_WAYS).contains(&cfg.ways) {
            return Err(Error::config("page_table.ecpt.ways", "must be between 1 and 8"));
        }
        if cfg.initial_slots.iter().any(|&s| s < 8 || !s.is_power_of_two() || s > 1 << 24) {
            return Err(Error::config("page_table.ecpt.initial_slots", "each must be a power of two between 8 and 2^24"));
        }
        if !(cfg.occupancy_threshold > 0.0 && cfg.occupancy_threshold < 1.0) {
            return Err(Error::config("page_table.ecpt.occupancy_threshold", "must be strictly between 0 and 1"));
        }
        if cfg.growth < 2 || !cfg.growth.is_power_of_two() {
            return Err(Error::config("page_table.ecpt.growth", "must be a power of two >= 2"));
        }
        if cfg.cwt_slots.iter().any(|&s| s < 8 || !s.is_power_of_two() || s > 1 << 24) || !(1..=super::cuckoo::MAX_WAYS).contains(&cfg.cwt_ways) {
            return Err(Error::config("page_table.ecpt.cwt_slots", "CWT slots must be powers of two between 8 and 2^24, cwt_ways 1 to 8"));
        }
        if !cfg.cwt && (cfg.pte_cwc > 0 || cfg.pmd_cwc > 0 || cfg.pud_cwc > 0 || cfg.pte_cwt) {
            return Err(Error::config("page_table.ecpt.cwt", "the CWCs cache CWT entries: set pte_cwc = pmd_cwc = pud_cwc = 0 without CWTs"));
        }
        if cfg.migrate_per_insert == 0 || cfg.max_kicks == 0 {
            return Err(Error::config("page_table.ecpt.migrate_per_insert", "migrate_per_insert and max_kicks must be at least 1"));
        }
        Ok(ElasticCuckooPageTable {
            cfg: cfg.clone(),
            params: CuckooParams {
                ways: cfg.ways,
                max_kicks: cfg.max_kicks,
                threshold: cfg.occupancy_threshold,
                growth: cfg.growth,
                migrate_per_insert: cfg.migrate_per_insert,
            },
            spaces: Vec::new(),
            mapped: 0,
            classes: [0; 4],
            retired_resizes: 0,
            retired_migrated: 0,
            scratch: EcptProbe::default(),
            gen: 0,
            region_memo: vec![RegionFacts::default(); REGION_MEMO],
            layout_gen: 0,
            page_memo: vec![PageFacts::default(); PAGE_MEMO],
        })
    }

    fn space(&self, asid: Asid) -> Option<&SpaceTables> {
        self.spaces.get(asid as usize)?.as_ref()
    }

    fn space_mut(&mut self, asid: Asid) -> Option<&mut SpaceTables> {
        self.spaces.get_mut(asid as usize)?.as_mut()
    }

    /// The PTE covering `va`: (size index, PTE).
    fn lookup(&self, asid: Asid, va: u64) -> Option<(usize, u64)> {
        self.lookup_from(asid, va, 0)
    }

    /// `lookup` in the tables of size index `first` and up.
    fn lookup_from(&self, asid: Asid, va: u64, first: usize) -> Option<(usize, u64)> {
        let s = self.space(asid)?;
        // An empty table holds nothing: no search (most runs map no 1G page, many no 2M).
        SIZES.iter().enumerate().skip(first).filter(|&(i, _)| s.tables[i].entries() > 0).find_map(|(i, &size)| {
            let (key, slot) = key_of(va, size);
            let (_, c) = s.tables[i].find(key)?;
            (c[slot] != 0).then_some((i, c[slot]))
        })
    }

    /// Count a page of size index `i` at `va` in (or out of) the CWT entries of its
    /// regions; entries appear with their first page and go with their last.
    fn count_in_cwts(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, i: usize, add: bool) -> Result<()> {
        let Some(s) = self.spaces.get_mut(asid as usize).and_then(|s| s.as_mut()) else {
            return Ok(());
        };
        // What `region_memo` holds changes only when an entry comes or goes (an insert
        // may move others) or a count crosses zero.
        let gen = &mut self.gen;
        for (t, covers) in [(PMD, i < 2), (PUD, true), (PTE, i == 0)] {
            let Some(cwt) = s.cwt[t].as_mut().filter(|_| covers) else {
                continue;
            };
            let key = va >> CWT_SHIFTS[t];
            let sections = &mut s.sections[t];
            let section = va >> SECTION_SHIFTS[t];
            if add {
                let c = cwt.entry(mem, key)?;
                // An entry lives only while a count is non-zero: an empty one is new.
                *gen += c.is_empty_line() as u64;
                c[i] += 1;
                let n = &mut sections.entry(section).or_default()[i];
                *gen += (*n == 0) as u64;
                *n += 1;
            } else if let Some(c) = cwt.find_mut(key) {
                c[i] -= 1;
                if c.is_empty_line() {
                    *gen += 1;
                    cwt.remove(key);
                }
                if let Some(n) = sections.get_mut(&section) {
                    n[i] -= 1;
                    if n[i] == 0 {
                        *gen += 1;
                        if *n == [0; 3] {
                            sections.remove(&section);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The CWT entry of `va`'s region in CWT `t` (PMD, PUD, PTE), with the page sizes
    /// its header records for `va`'s section; None if the region has none.
    fn cwt_entry(&self, asid: Asid, va: u64, t: usize) -> Option<CwtEntry> {
        let s = self.space(asid)?;
        let (p, _) = s.cwt[t].as_ref()?.find(va >> CWT_SHIFTS[t])?;
        let n = s.sections[t].get(&(va >> SECTION_SHIFTS[t])).copied().unwrap_or_default();
        Some(CwtEntry { sizes: (0..3).filter(|&i| n[i] > 0).fold(0, |m, i| m | 1 << i), pa: p.pa })
    }

    /// The `region_memo` slot of `va`'s region in space `asid`, and its tag.
    #[inline(always)]
    fn region_slot(asid: Asid, va: u64) -> (usize, u64) {
        // The finest CWT granularity: every region and section is a union of these.
        let tag = ((asid as u64) << 44 | va >> PTE_CWT_SHIFT).wrapping_add(1);
        ((tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - REGION_MEMO.trailing_zeros())) as usize, tag)
    }

    /// `cwt_entry` through `region_memo`.
    #[inline(always)]
    fn cwt_entry_memo(&mut self, asid: Asid, va: u64, t: usize) -> Option<CwtEntry> {
        let (slot, tag) = Self::region_slot(asid, va);
        let f = &self.region_memo[slot];
        if f.tag == tag && f.gen == self.gen && f.read & 1 << t != 0 {
            return (f.pa[t] != NO_ENTRY).then_some(CwtEntry { sizes: f.sizes[t], pa: f.pa[t] });
        }
        self.cwt_entry_reading(asid, va, t, slot, tag)
    }

    /// `cwt_entry_memo` past the memo: read the entry, and keep it.
    #[inline(never)]
    fn cwt_entry_reading(&mut self, asid: Asid, va: u64, t: usize, slot: usize, tag: u64) -> Option<CwtEntry> {
        let e = self.cwt_entry(asid, va, t);
        let gen = self.gen;
        let f = &mut self.region_memo[slot];
        if f.tag != tag || f.gen != gen {
            *f = RegionFacts { tag, gen, pa: [NO_ENTRY; 3], ..RegionFacts::default() };
        }
        f.read |= 1 << t;
        f.pa[t] = e.map_or(NO_ENTRY, |e| e.pa);
        f.sizes[t] = e.map_or(0, |e| e.sizes);
        e
    }

    /// Plan the lookup of `va` (Skarlatos et al. §5; Stojkovic et al. §2.3): probe the
    /// CWCs together, decide which entries to read, and list the CWT entries to fetch for
    /// the CWCs that missed (filling those CWCs). `sizes`: the page sizes to probe when
    /// no CWC knows the region (Stojkovic §4.3: only 4K for page-table pages); a mapping
    /// of another size is still found, flagged `outside_sizes`. `use_pte_cwc`: consult
    /// and fill the PTE-CWC (§4.2's adaptive caching turns it off). False: no such space.
    #[inline(always)]
    pub(crate) fn probe(&mut self, asid: Asid, va: u64, c: &mut EcptWalkCaches, sizes: u8, use_pte_cwc: bool, out: &mut EcptProbe) -> bool {
        match self.probe_or_direct(asid, va, c, sizes, use_pte_cwc, out) {
            Probed::NoSpace => false,
            Probed::Direct { entry_pa, pte } => {
                out.clear_plan();
                out.refs.push((entry_pa, 1));
                out.found = (pte != 0).then(|| Self::translation(0, pte));
                true
            }
            Probed::Planned => true,
        }
    }

    /// `probe`, except that a direct lookup (its one entry's address and PTE) is
    /// returned rather than written to `out` (which keeps only its `pte_hit` and
    /// `pmd_hit`): for a caller that needs only the entries read, such as a nested
    /// walk's host lookups of guest page-table pages, nearly all direct.
    #[inline(always)]
    pub(crate) fn probe_or_direct(&mut self, asid: Asid, va: u64, c: &mut EcptWalkCaches, sizes: u8, use_pte_cwc: bool, out: &mut EcptProbe) -> Probed {
        let Some(s) = self.space(asid) else {
            out.clear_plan();
            return Probed::NoSpace;
        };
        let pte_on = use_pte_cwc && c.pte.enabled() && s.cwt[PTE].is_some();
        let pte_hit = pte_on && c.pte.lookup(asid, va);
        let pmd_hit = c.pmd.lookup(asid, va);
        let pud_hit = c.pud.lookup(asid, va);
        // The PTE-CWC names the way and no CWC needs a fill (nearly every step-1 host
        // lookup of a nested walk): the decision below, without its other cases, and
        // inline (the general one is out of line).
        if pte_hit && (pmd_hit || !c.pmd.enabled()) && (pud_hit || !c.pud.enabled()) {
            if let Some((entry_pa, pte)) = self.probe_direct_4k(asid, va) {
                out.pte_hit = Some(true);
                out.pmd_hit = pmd_hit;
                self.classes[0] += 1;
                return Probed::Direct { entry_pa, pte };
            }
        }
        out.clear_plan();
        self.probe_deciding(asid, va, c, sizes, [pte_on, pte_hit, pmd_hit, pud_hit], out);
        Probed::Planned
    }

    /// `probe` past the CWC lookups (`cwcs`: PTE-CWC in play, and the PTE, PMD and PUD
    /// CWCs' answers) and its direct case.
    #[inline(never)]
    fn probe_deciding(&mut self, asid: Asid, va: u64, c: &mut EcptWalkCaches, sizes: u8, cwcs: [bool; 4], out: &mut EcptProbe) {
        let [pte_on, pte_hit, pmd_hit, pud_hit] = cwcs;
        // A CWT entry is read only if the decision below or a CWC fill needs it (the
        // model is the same; this saves the simulator lookups when the CWCs hit). The
        // PTE-CWT entry only when that CWC is in play (`pte_on` gates every use).
        let pte_e = if pte_on { self.cwt_entry_memo(asid, va, PTE) } else { None };
        let pte_known = pte_hit && pte_e.is_some();
        let pmd_e = if !pte_known && pmd_hit || !pmd_hit && c.pmd.enabled() { self.cwt_entry_memo(asid, va, PMD) } else { None };
        let pmd_known = pmd_hit && pmd_e.is_some();
        let pud_e = if !pte_known && !pmd_known && pud_hit || !pud_hit && c.pud.enabled() { self.cwt_entry_memo(asid, va, PUD) } else { None };
        out.pte_hit = (pte_on && pte_e.is_some()).then_some(pte_hit);
        out.pmd_hit = pmd_hit;
        // Sizes whose d ways to probe (bit i: SIZES[i]), the size whose entry's way is
        // known (read directly), and whether a CWC knew them. A PTE-CWT entry exists
        // only for a region mapped by 4K pages; a section header that records no page
        // informs nothing (a 1G page, or no mapping).
        let known = |e: Option<CwtEntry>, hit: bool| e.filter(|e| hit && e.sizes != 0).map(|e| e.sizes);
        let (mut mask, direct_size, informed) = if pte_known {
            (0, Some(0), true)
        } else if let Some(n) = known(pmd_e, pmd_hit) {
            if n & 0b010 != 0 {
                // The 2M entry directly; the 4K ways too if the section also has 4K pages.
                (n & ONLY_4K, Some(1), true)
            } else {
                (ONLY_4K, None, true)
            }
        } else if let Some(n) = known(pud_e, pud_hit) {
            (n, None, true)
        } else {
            (sizes, None, false)
        };
        let s = self.space(asid).expect("checked above");
        // The mapping, if an entry read holds it: (size index, PTE).
        let mut found = None;
        if let Some(i) = direct_size {
            let (key, slot) = key_of(va, SIZES[i]);
            match s.tables[i].find(key) {
                Some((entry, line)) => {
                    out.refs.push((entry.pa, i as u8 + 1));
                    found = (line[slot] != 0).then_some((i, line[slot]));
                }
                // No entry where the CWT says one is (the section's pages are in other
                // entries): its ways are probed instead.
                None => mask |= 1 << i,
            }
        }
        let direct = direct_size.is_some() && mask == 0;
        if !direct {
            Self::probe_sizes(s, va, mask, &mut out.refs, &mut found);
            // A mapping of a size outside the assumed ones (only possible with no CWC
            // informing the walk) is still found: its size joins the probe.
            if !informed && mask != ALL_SIZES && found.is_none() {
                if let Some((i, _)) = self.lookup(asid, va).filter(|&(i, _)| mask & 1 << i == 0) {
                    out.outside_sizes = true;
                    mask |= 1 << i;
                    out.refs.clear();
                    Self::probe_sizes(s, va, mask, &mut out.refs, &mut found);
                }
            }
        }
        out.found = found.map(|(i, e)| Self::translation(i, e));
        if out.refs.is_empty() {
            // No size could hold va: probe the 4K table.
            out.refs.push((s.tables[0].probe_pa(key_of(va, SIZES[0]).0, 0), 1));
        }
        let cwcs = [(&mut c.pte, pte_e, pte_hit, pte_on), (&mut c.pmd, pmd_e, pmd_hit, true), (&mut c.pud, pud_e, pud_hit, true)];
        for (which, (cwc, entry, hit, on)) in cwcs.into_iter().enumerate() {
            if let Some(e) = entry.filter(|_| on && !hit && cwc.enabled()) {
                out.cwt_fetches.push(e.pa);
                if out.defer_fills {
                    out.pending_fills.push((asid, va, which as u8));
                } else {
                    // It just missed, and nothing has filled it since.
                    cwc.fill_missed(asid, va);
                }
            }
        }
        let probed = mask | direct_size.map_or(0, |i| 1 << i);
        let class = if direct { 0 } else { (probed.count_ones() as usize).clamp(1, 3) };
        self.classes[class] += 1;
    }

    /// Hint the host to bring `va`'s `region_memo` slot into its cache; the space's
    /// tables, for the caller's own hints.
    #[inline(always)]
    fn prefetch_region(&self, asid: Asid, va: u64) -> Option<&SpaceTables> {
        let s = self.space(asid)?;
        crate::host::prefetch(&self.region_memo[Self::region_slot(asid, va).0]);
        Some(s)
    }

    /// `probe`'s direct 4K lookup after a PTE-CWC hit: if `va`'s region has a PTE-CWT
    /// entry and the 4K table holds `va`'s cluster, that entry is the one reference:
    /// its address, and `va`'s PTE there (0: not mapped). None: the general decision
    /// applies.
    #[inline(always)]
    fn probe_direct_4k(&mut self, asid: Asid, va: u64) -> Option<(u64, u64)> {
        let page = (va >> 12) + 1;
        let m = (page ^ (asid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) as usize & (PAGE_MEMO - 1);
        let f = self.page_memo[m];
        let (entry_pa, pte) = if f.page == page && f.asid == asid && f.gen == self.layout_gen {
            (f.entry_pa, f.pte)
        } else {
            self.cwt_entry_memo(asid, va, PTE)?;
            let (key, slot) = key_of(va, SIZES[0]);
            let (entry, line) = self.space(asid).and_then(|s| s.tables[0].find(key))?;
            let facts = PageFacts { page, asid, gen: self.layout_gen, entry_pa: entry.pa, pte: line[slot] };
            self.page_memo[m] = facts;
            (facts.entry_pa, facts.pte)
        };
        Some((entry_pa, pte))
    }

    /// The d candidate entries of `va` in each size of `mask`, smallest size first, into
    /// `refs`; `found` gets the mapping if one of them holds it.
    #[inline(always)]
    fn probe_sizes(s: &SpaceTables, va: u64, mask: u8, refs: &mut Vec<(u64, u8)>, found: &mut Option<(usize, u64)>) {
        // The last candidate holding a present PTE, picked by selects (see `probe_way`).
        let mut hit = (0, 0);
        for (i, &size) in SIZES.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0) {
            let (key, slot) = key_of(va, size);
            for w in 0..s.tables[i].ways() {
                let (pa, e) = s.tables[i].probe_way(key, w, slot);
                refs.push((pa, i as u8 + 1));
                hit = if e != 0 { (i, e) } else { hit };
            }
        }
        if hit.1 != 0 {
            *found = Some(hit);
        }
    }

    fn translation(i: usize, e: u64) -> Translation {
        Translation { pa: e & !0xfff, size: SIZES[i], perms: Perms::from_bits(e as u8) }
    }
}

impl PageTable for ElasticCuckooPageTable {
    type Caches = EcptWalkCaches;

    fn kind(&self) -> &'static str {
        "ecpt"
    }

    fn page_sizes(&self) -> &[PageSize] {
        &SIZES
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        self.gen += 1;
        self.layout_gen += 1;
        let a = asid as usize;
        if self.spaces.len() <= a {
            self.spaces.resize_with(a + 1, || None);
        }
        if self.spaces[a].is_none() {
            let tables = (0..3).map(|i| ElasticCuckooTable::new(mem, self.params, self.cfg.initial_slots[i])).collect::<Result<Vec<_>>>()?;
            let p = CuckooParams { ways: self.cfg.cwt_ways, ..self.params };
            let pte = self.cfg.pte_cwt || self.cfg.pte_cwc > 0;
            let mut cwt = [None, None, None];
            for (t, on) in [(PMD, self.cfg.cwt), (PUD, self.cfg.cwt), (PTE, self.cfg.cwt && pte)] {
                if on {
                    // Table 2: the PTE-CWT is sized like the PMD-CWT.
                    cwt[t] = Some(ElasticCuckooTable::new(mem, p, self.cfg.cwt_slots[if t == PUD { 1 } else { 0 }])?);
                }
            }
            self.spaces[a] = Some(SpaceTables { tables, cwt, sections: Default::default() });
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        self.gen += 1;
        self.layout_gen += 1;
        let Some(s) = self.spaces.get_mut(asid as usize).and_then(|s| s.take()) else {
            return;
        };
        for t in s.cwt.into_iter().flatten() {
            t.free(mem);
        }
        for t in s.tables {
            self.mapped -= t.mapped_ptes();
            self.retired_resizes += t.resizes;
            self.retired_migrated += t.migrated;
            t.free(mem);
        }
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        self.layout_gen += 1;
        let i = SIZES
            .iter()
            .position(|&s| s == size)
            .ok_or_else(|| Error::config("os.page_size", format!("an elastic cuckoo page table maps 4K, 2M or 1G pages, not {size}")))?;
        let (key, slot) = key_of(va, size);
        let s = self.space_mut(asid).ok_or_else(|| Error::Sim(format!("map into unknown address space {asid}")))?;
        let c = s.tables[i].entry(mem, key)?;
        if c[slot] != 0 {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        c[slot] = pte(pa, perms);
        self.mapped += 1;
        self.count_in_cwts(mem, asid, va, i, true)
    }

    fn unmap(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        self.layout_gen += 1;
        let (i, e) = self.lookup(asid, va)?;
        let (key, slot) = key_of(va, SIZES[i]);
        let t = &mut self.space_mut(asid)?.tables[i];
        let c = t.find_mut(key)?;
        c[slot] = 0;
        if c.is_empty_line() {
            t.remove(key);
        }
        self.mapped -= 1;
        self.count_in_cwts(_mem, asid, va, i, false).expect("a CWT decrement allocates nothing");
        Some(Self::translation(i, e))
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        self.layout_gen += 1;
        let Some((i, e)) = self.lookup(asid, va) else {
            return false;
        };
        let (key, slot) = key_of(va, SIZES[i]);
        let Some(s) = self.space_mut(asid) else {
            return false;
        };
        if let Some(c) = s.tables[i].find_mut(key) {
            c[slot] = pte(e, perms);
        }
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.lookup(asid, va).map(|(i, e)| Self::translation(i, e))
    }

    fn walk(&mut self, asid: Asid, va: u64, c: &mut EcptWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        let mut p = std::mem::take(&mut self.scratch);
        let found = self.probe(asid, va, c, ALL_SIZES, true, &mut p);
        if found {
            // One step: the entries, and the CWT entries fetched alongside.
            path.begin_step();
            for &(pa, what) in &p.refs {
                path.push_parallel(pa, what);
            }
            // The CWC fills, off the walk's critical path.
            for &pa in &p.cwt_fetches {
                path.push_background(pa);
            }
        }
        let t = p.found;
        self.scratch = p;
        // The probe read every entry that can hold va's mapping, so what it found is it.
        debug_assert_eq!(t, if found { self.translate(asid, va) } else { None });
        t
    }

    fn footprint(&self) -> PtFootprint {
        let tables = || self.spaces.iter().flatten().flat_map(|s| s.tables.iter().chain(s.cwt.iter().flatten()));
        PtFootprint { bytes: tables().map(|t| t.bytes()).sum(), nodes: tables().map(|t| t.entries() as u64).sum(), mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        let per_size: Vec<serde_json::Value> = (0..3)
            .map(|i| {
                let ts: Vec<&ElasticCuckooTable> = self.spaces.iter().flatten().map(|s| &s.tables[i]).collect();
                let entries: usize = ts.iter().map(|t| t.entries()).sum();
                let slots: usize = ts.iter().map(|t| t.slots() * t.ways()).sum();
                serde_json::json!({
                    "page_size": SIZES[i].to_string(),
                    "ways": self.cfg.ways,
                    "slots_per_way_max": ts.iter().map(|t| t.slots()).max().unwrap_or(0),
                    "entries": entries,
                    "occupancy": if slots == 0 { 0.0 } else { entries as f64 / slots as f64 },
                    "resizes": ts.iter().map(|t| t.resizes).sum::<u64>(),
                    "migrated": ts.iter().map(|t| t.migrated).sum::<u64>(),
                    "migrating": ts.iter().filter(|t| t.migrating()).count(),
                    "max_displacement": ts.iter().map(|t| t.max_displacement).max().unwrap_or(0),
                })
            })
            .collect();
        serde_json::json!({
            "tables": per_size,
            "walks": {"direct": self.classes[0], "size": self.classes[1], "partial": self.classes[2], "complete": self.classes[3]},
            "cwt_bytes": self.spaces.iter().flatten().flat_map(|s| s.cwt.iter().flatten()).map(|t| t.bytes()).sum::<u64>(),
            "resizing_bytes": self.spaces.iter().flatten().flat_map(|s| s.tables.iter().chain(s.cwt.iter().flatten())).map(|t| t.resizing_bytes()).sum::<u64>(),
            "retired_resizes": self.retired_resizes, "retired_migrated": self.retired_migrated,
        })
    }
}

impl FastPaths for ElasticCuckooPageTable {
    type Split = NoSplit;
    // A PTE holds the frame and rights mapped, its table the size.
    const TRANSLATES_AS_MAPPED: bool = true;

    const PREFETCHES: bool = true;

    /// The 4K table's candidate slots of `va` (the ways' reads overlap in a lookup, but
    /// each is a host-cache miss on a large table).
    fn prefetch(&self, asid: Asid, va: u64) {
        if let Some(s) = self.prefetch_region(asid, va) {
            s.tables[0].prefetch(key_of(va, PageSize::K4).0);
        }
    }

    /// The location is where the 4K table's ways keep `va`'s slots
    /// (`ElasticCuckooTable::prefetch_located`).
    #[inline]
    fn prefetch_at(&self, asid: Asid, va: u64) -> Option<u64> {
        self.prefetch_region(asid, va)?.tables[0].prefetch_located(key_of(va, PageSize::K4).0)
    }

    /// The 4K entry at `loc`, or a larger page's. A 4K cluster that moved since (rare)
    /// is not searched for: the answer is a hint, and during a warm-up most misses are
    /// clusters not yet there, whose search would find nothing.
    #[inline]
    fn phys_at(&self, asid: Asid, loc: u64, va: u64) -> Option<u64> {
        let (key, slot) = key_of(va, PageSize::K4);
        let e = self.space(asid)?.tables[0].line_at(key, loc).map_or(0, |l| l[slot]);
        if e != 0 {
            return Some(Self::translation(0, e).phys(va));
        }
        self.lookup_from(asid, va, 1).map(|(i, e)| Self::translation(i, e).phys(va))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pt::WalkCaches;

    #[test]
    fn a_walk_is_one_step_of_three_sizes_times_d_references() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt =
            ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], cwt: false, pmd_cwc: 0, pud_cwc: 0, ..Default::default() }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        pt.map(&mut mem, 0, 0x40_0000, 0x9000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0x40_0123, &mut EcptWalkCaches::none(), &mut path).unwrap();
        assert_eq!(t.phys(0x40_0123), 0x9123);
        assert_eq!((path.steps(), path.refs().len()), (1, 9));
        // Neighbouring pages share the 8-PTE entry.
        pt.map(&mut mem, 0, 0x40_1000, 0xa000, PageSize::K4, Perms::RW_USER).unwrap();
        assert_eq!(pt.footprint().nodes, 1);
        assert_eq!(pt.footprint().bytes, 3 * 3 * 4096, "3 sizes x 3 ways x 64 slots x 64 B");
    }

    /// Thousands of pages into 8-slot tables: many resizes, no translation lost or
    /// changed, walks agree with translate throughout.
    #[test]
    fn translations_survive_resizes() {
        use rand::{Rng, SeedableRng};
        let mut mem = BuddyAllocator::new(1 << 32).unwrap();
        let mut pt =
            ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [8, 8, 8], cwt_slots: [8, 8], migrate_per_insert: 1, ..Default::default() }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let mut mapped = std::collections::BTreeMap::new();
        let mut path = WalkPath::new();
        let mut cwc = EcptWalkCaches::new(0, 16, 2, 1).unwrap();
        for n in 0..3000u64 {
            let va = (rng.gen_range(0..1u64 << 24) << 12) & !0xfff;
            if mapped.contains_key(&va) {
                continue;
            }
            let pa = (n + 1) << 12;
            pt.map(&mut mem, 0, va, pa, PageSize::K4, Perms::RW_USER).unwrap();
            mapped.insert(va, pa);
            if n % 250 == 0 {
                for (&v, &p) in &mapped {
                    path.clear();
                    assert_eq!(pt.walk(0, v, &mut cwc, &mut path).map(|t| t.pa), Some(p));
                }
            }
        }
        let d = pt.details();
        assert!(d["tables"][0]["resizes"].as_u64().unwrap() >= 5, "{d}");
        assert!(d["tables"][0]["migrated"].as_u64().unwrap() > 0);
        assert_eq!(pt.footprint().mapped_pages, mapped.len() as u64);
        // The old arrays of a resize under way are part of the footprint, and reported.
        let migrating = (0..3).any(|i| d["tables"][i]["migrating"].as_u64().unwrap() > 0);
        let resizing = d["resizing_bytes"].as_u64().unwrap();
        assert_eq!(resizing > 0, migrating || pt.spaces[0].as_ref().unwrap().cwt.iter().flatten().any(|t| t.migrating()), "{d}");
        assert!(resizing < pt.footprint().bytes);
    }

    /// What a lookup learns on the way (`EcptProbe::found`) and where a look-ahead says
    /// an entry sits (`prefetch_at` / `phys_at`) agree with `translate` through random
    /// maps and unmaps of 4K and 2M pages in tables that keep resizing: `found` is the
    /// mapping or nothing (always the mapping when every size is probed), and a stale
    /// location still answers right.
    #[test]
    fn what_a_lookup_finds_on_the_way_is_the_mapping() {
        use rand::{Rng, SeedableRng};
        let mut mem = BuddyAllocator::new(1 << 33).unwrap();
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig {
            initial_slots: [8, 8, 8],
            cwt_slots: [8, 8],
            migrate_per_insert: 1,
            pte_cwt: true,
            ..Default::default()
        })
        .unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let mut caches = [EcptWalkCaches::none(), EcptWalkCaches::new(4, 16, 2, 1).unwrap()];
        let mut out = EcptProbe::default();
        let mut hints: Vec<(u64, Option<u64>)> = Vec::new();
        let (mut found, mut located, mut direct) = (0, 0, 0);
        for n in 0..6000u64 {
            // 64 MiB of address space: 2M pages in the upper half, 4K in the lower.
            let va = rng.gen_range(0..1u64 << 26) & !0xfff;
            let size = if va >= 1 << 25 { PageSize::M2 } else { PageSize::K4 };
            let va = size.align_down(va);
            if rng.gen_range(0..4) == 0 {
                pt.unmap(&mut mem, 0, va);
            } else if pt.translate(0, va).is_none() {
                pt.map(&mut mem, 0, va, (n + 1) << 21, size, Perms::RW_USER).unwrap();
            }
            let probe_va = rng.gen_range(0..1u64 << 26);
            let want = pt.translate(0, probe_va);
            for (k, c) in caches.iter_mut().enumerate() {
                for sizes in [ALL_SIZES, ONLY_4K] {
                    assert!(pt.probe(0, probe_va, c, sizes, true, &mut out));
                    if out.pte_hit == Some(true) && out.refs.len() == 1 {
                        // Direct through the PTE-CWC (`page_memo`): the 4K entry where it is now.
                        let entry = pt.space(0).unwrap().tables[0].find(key_of(probe_va, PageSize::K4).0).map(|(p, _)| p.pa);
                        assert_eq!(Some(out.refs[0].0), entry, "step {n}: {probe_va:#x}");
                        direct += 1;
                    }
                    if let Some(t) = out.found {
                        assert_eq!(Some(t), want, "step {n}: {probe_va:#x}");
                        found += 1;
                    } else if k == 0 && sizes == ALL_SIZES {
                        assert_eq!(want, None, "step {n}: a cold lookup of every size reads the entry");
                    }
                }
            }
            // Locations taken a few steps ago: stale ones fall back to a lookup.
            hints.push((probe_va, pt.prefetch_at(0, probe_va)));
            if hints.len() > 4 {
                let (v, loc) = hints.remove(0);
                if let Some(loc) = loc {
                    assert_eq!(pt.phys_at(0, loc, v), pt.translate(0, v).map(|t| t.phys(v)), "step {n}: {v:#x}");
                    located += 1;
                }
            }
        }
        assert!(pt.details()["tables"][0]["resizes"].as_u64().unwrap() >= 3);
        assert!(found > 3000 && located > 3000 && direct > 1000, "{found} lookups found the mapping, {located} locations checked, {direct} direct");
    }

    /// Walk classes: cold = complete (CWT fetches in the background); a PMD-CWC entry
    /// covers 1 GiB, and its hit on a 16 MiB section of 4K pages is a size walk, on a
    /// section of 2M pages direct, on a section of both the 4K ways and the 2M entry.
    #[test]
    fn cwcs_prune_walks_by_class() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], cwt_slots: [64, 64], ..Default::default() }).unwrap();
        let mut c = EcptWalkCaches::new(0, 16, 2, 1).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        pt.map(&mut mem, 0, 0x4000_0000, 0x9000, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, 0x4160_0000, 0x20_0000, PageSize::M2, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let mut walk = |pt: &mut ElasticCuckooPageTable, c: &mut EcptWalkCaches, va: u64| {
            path.clear();
            let t = pt.walk(0, va, c, &mut path).unwrap();
            assert!(path.steps() <= 1 && path.refs().iter().all(|r| r.what != CWT_REF));
            (t, path.refs().len(), path.background().len())
        };
        // Cold: 3 sizes x 3 ways, one step; the PMD- and PUD-CWT entries in the background.
        let (_, refs, fetched) = walk(&mut pt, &mut c, 0x4000_0000);
        assert_eq!((refs, fetched), (9, 2));
        // Warm PMD-CWC, a 4K section: the size is known, not the way: d references.
        let (_, refs, fetched) = walk(&mut pt, &mut c, 0x4000_0abc);
        assert_eq!((refs, fetched), (3, 0));
        // Another section of the same 1 GiB region: a 2M section names its entry's way.
        let (t, refs, _) = walk(&mut pt, &mut c, 0x4160_1234);
        assert_eq!((t.size, refs), (PageSize::M2, 1));
        // A 2M page joins the 4K section: the 4K ways and the 2M entry, whichever holds va.
        pt.map(&mut mem, 0, 0x4060_0000, 0x40_0000, PageSize::M2, Perms::RW_USER).unwrap();
        let (t, refs, _) = walk(&mut pt, &mut c, 0x4060_5678);
        assert_eq!((t.size, refs), (PageSize::M2, 4));
        let (t, refs, _) = walk(&mut pt, &mut c, 0x4000_0abc);
        assert_eq!((t.pa, refs), (0x9000, 4));
        // Another 1 GiB region: the PMD-CWC misses; the PUD-CWC's section (8 GiB) has
        // 4K and 2M pages, so 1G is ruled out: 2 sizes x 3 ways (partial), and the new
        // region's PMD-CWT entry fetched.
        pt.map(&mut mem, 0, 0x8000_0000, 0xa000, PageSize::K4, Perms::RW_USER).unwrap();
        let (t, refs, fetched) = walk(&mut pt, &mut c, 0x8000_0000);
        assert_eq!((t.pa, refs, fetched), (0xa000, 6, 1));
        let d = pt.details();
        let n = |k: &str| d["walks"][k].as_u64().unwrap();
        assert_eq!((n("complete"), n("size"), n("partial"), n("direct")), (1, 1, 3, 1));
        // An entry lives while its region maps a page; a section's bits while it does.
        pt.unmap(&mut mem, 0, 0x4000_0000).unwrap();
        assert_eq!(pt.cwt_entry(0, 0x4000_0000, PMD).map(|e| e.sizes), Some(0b010));
        pt.unmap(&mut mem, 0, 0x4060_0000).unwrap();
        assert_eq!(pt.cwt_entry(0, 0x4000_0000, PMD).map(|e| e.sizes), Some(0), "the 2M page at 0x4160_0000 keeps the region's entry");
        pt.unmap(&mut mem, 0, 0x4160_0000).unwrap();
        assert!(pt.cwt_entry(0, 0x4000_0000, PMD).is_none());
        assert!(pt.cwt_entry(0, 0x4000_0000, PUD).is_some(), "the 4K page at 2 GiB keeps the 512 GiB region's entry");
        c.invalidate(0, 0x4000_0000);
        path.clear();
        assert!(pt.walk(0, 0x4000_0000, &mut c, &mut path).is_none());
    }

    /// A small table with a PTE-CWT (for a 4-entry PTE-CWC), and its memory.
    fn table_with_pte_cwt() -> (BuddyAllocator, ElasticCuckooPageTable) {
        let cfg = EcptConfig { initial_slots: [64, 64, 64], cwt_slots: [64, 64], pte_cwc: 4, ..Default::default() };
        (BuddyAllocator::new(1 << 30).unwrap(), ElasticCuckooPageTable::new(&cfg).unwrap())
    }

    /// Direct lookups through the page memo keep address spaces apart.
    #[test]
    fn the_page_memo_keeps_address_spaces_apart() {
        let (mut mem, mut pt) = table_with_pte_cwt();
        // A PTE-CWC alone, as a nested walk's step 1 has (no PMD- or PUD-CWC to fill).
        let mut c = EcptWalkCaches::new(4, 0, 0, 1).unwrap();
        let mut out = EcptProbe::default();
        // ASIDs that agree in their low 12 bits, the same page in each.
        for (asid, pa) in [(0u16, 0x10_0000u64), (4096, 0x20_0000), (u16::MAX, 0x30_0000)] {
            pt.create_space(&mut mem, asid).unwrap();
            pt.map(&mut mem, asid, 0x4000_0000, pa, PageSize::K4, Perms::RW_USER).unwrap();
        }
        for round in 0..3 {
            for (asid, pa) in [(0u16, 0x10_0000u64), (4096, 0x20_0000), (u16::MAX, 0x30_0000)] {
                assert!(pt.probe(asid, 0x4000_0123, &mut c, ALL_SIZES, true, &mut out));
                assert_eq!(out.found.map(|t| t.pa), Some(pa), "round {round}, ASID {asid}");
                if round > 0 {
                    assert_eq!((out.refs.len(), out.pte_hit), (1, Some(true)), "round {round}: direct through the PTE-CWC");
                }
            }
        }
    }

    /// A PTE-CWC hit names the way of a 4K entry: direct. Its entry is fetched on a miss.
    #[test]
    fn pte_cwc_hit_makes_a_4k_walk_direct() {
        let (mut mem, mut pt) = table_with_pte_cwt();
        let mut c = EcptWalkCaches::new(4, 16, 2, 1).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        for p in 0..40u64 {
            pt.map(&mut mem, 0, 0x4000_0000 + (p << 12), 0x10_0000 + (p << 12), PageSize::K4, Perms::RW_USER).unwrap();
        }
        let mut path = WalkPath::new();
        let mut probe = EcptProbe::default();
        assert!(pt.probe(0, 0x4000_0000, &mut c, ALL_SIZES, true, &mut probe));
        assert_eq!((probe.refs.len(), probe.cwt_fetches.len(), probe.pte_hit), (9, 3, Some(false)));
        for p in 0..40u64 {
            path.clear();
            let t = pt.walk(0, 0x4000_0000 + (p << 12), &mut c, &mut path).unwrap();
            assert_eq!(t.pa, 0x10_0000 + (p << 12));
            assert_eq!(path.refs().len(), 1, "page {p}");
        }
        // Without the PTE-CWC (adaptive caching off) the same walk is a size walk.
        assert!(pt.probe(0, 0x4000_0000, &mut c, ALL_SIZES, false, &mut probe));
        assert_eq!((probe.refs.len(), probe.pte_hit), (3, None));
        // With nothing cached, a 4K-only plan probes d ways of the 4K table only.
        c.flush_all();
        assert!(pt.probe(0, 0x4000_0000, &mut c, ONLY_4K, false, &mut probe));
        assert_eq!((probe.refs.len(), probe.outside_sizes), (3, false));
        // ...and still finds a 2M page, flagged (with nothing cached: a PUD-CWC entry
        // covers 512 GiB, and its section would name 2M).
        pt.map(&mut mem, 0, 0x8000_0000, 0x40_0000, PageSize::M2, Perms::RW_USER).unwrap();
        c.flush_all();
        assert!(pt.probe(0, 0x8000_0000, &mut c, ONLY_4K, false, &mut probe));
        assert_eq!((probe.refs.len(), probe.outside_sizes), (6, true));
    }

    /// The region memo never answers stale: random maps and unmaps of 4K and 2M pages
    /// into tiny CWTs (entries come, go, are kicked and migrate), with memo reads of
    /// random regions between them, always agree with reading the CWTs.
    #[test]
    fn region_memo_agrees_with_the_cwts() {
        use rand::{Rng, SeedableRng};
        let mut mem = BuddyAllocator::new(1 << 32).unwrap();
        let cfg = EcptConfig { initial_slots: [8, 8, 8], cwt_slots: [8, 8], pte_cwt: true, migrate_per_insert: 1, ..Default::default() };
        let mut pt = ElasticCuckooPageTable::new(&cfg).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
        let mut mapped: Vec<(u64, PageSize)> = Vec::new();
        // 64 PMD-CWT regions of 4 sections each, so that entries come, go and are kicked.
        let va_of =
            |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| (rng.gen_range(0..64u64) << 30) | (rng.gen_range(0..4u64) << 24) | (rng.gen_range(0..4u64) << 12);
        let mut hits = 0;
        for step in 0..6000 {
            if rng.gen_range(0..3) > 0 || mapped.is_empty() {
                let (va, size) = if rng.gen_range(0..4) == 0 { (va_of(&mut rng) & !0x1f_ffff, PageSize::M2) } else { (va_of(&mut rng), PageSize::K4) };
                if pt.translate(0, va).is_none() && (size == PageSize::K4 || (0..512).all(|p| pt.translate(0, va + (p << 12)).is_none())) {
                    pt.map(&mut mem, 0, va, 0x1000_0000, size, Perms::RW_USER).unwrap();
                    mapped.push((va, size));
                }
            } else {
                let (va, _) = mapped.swap_remove(rng.gen_range(0..mapped.len()));
                pt.unmap(&mut mem, 0, va).unwrap();
            }
            for _ in 0..4 {
                let va = va_of(&mut rng);
                for t in [PMD, PUD, PTE] {
                    let memo = pt.cwt_entry_memo(0, va, t);
                    assert_eq!(memo, pt.cwt_entry(0, va, t), "step {step}, va {va:#x}, CWT {t}");
                    hits += memo.is_some() as u32;
                }
            }
        }
        assert!(hits > 1000 && pt.details()["tables"][0]["resizes"].as_u64().unwrap() > 0);
    }

    #[test]
    fn bad_parameters_name_the_key() {
        for (cfg, key) in [
            (EcptConfig { ways: 0, ..Default::default() }, "ways"),
            (EcptConfig { initial_slots: [100, 64, 64], ..Default::default() }, "initial_slots"),
            (EcptConfig { occupancy_threshold: 1.5, ..Default::default() }, "occupancy_threshold"),
            (EcptConfig { growth: 3, ..Default::default() }, "growth"),
        ] {
            let e = ElasticCuckooPageTable::new(&cfg).err().unwrap();
            assert!(e.to_string().contains(&format!("page_table.ecpt.{key}")), "{e}");
        }
    }
}
