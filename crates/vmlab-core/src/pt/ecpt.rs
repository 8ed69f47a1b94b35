//! Elastic cuckoo page tables (ECPT; Skarlatos et al. ASPLOS'20, summarised by
//! Stojkovic et al. §2.3): per address space, one elastic d-ary cuckoo table per page
//! size (4K, 2M, 1G), each entry a 64-byte line with the tag of 8 consecutive pages of
//! that size and their 8 PTEs.
//!
//! Cuckoo walk tables (CWTs) record, per 2 MiB region (PMD-CWT) and per 1 GiB region
//! (PUD-CWT), which page sizes map it; they are cuckoo tables of their own in simulated
//! memory. Cuckoo walk caches (CWCs, [`super::cwc`]) cache CWT entries. A walk is one
//! sequential step whose parallel references depend on what the CWCs know:
//!
//! - *direct*: the PMD-CWC knows the region's page size and (the CWT also records ways)
//!   the way of the entry: 1 reference;
//! - *size*: one page size known, its d ways probed;
//! - *partial*: the PUD-CWC rules out some page sizes: the others × d ways;
//! - *complete*: no CWC hit: every size × d ways, plus the PUD- and PMD-CWT entries
//!   fetched in parallel to fill the CWCs.
//!
//! The CWTs' way information is kept exact (the OS updates it when cuckoo kicks move
//! entries, as in the paper); that update cost is not modelled.

use super::cuckoo::{CuckooParams, ElasticCuckooTable, CLUSTER};
use super::cwc::{EcptWalkCaches, PMD_SHIFT, PUD_SHIFT};
use super::{PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::BuddyAllocator;
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
    /// CWC entries: PMD (2 MiB regions) and PUD (1 GiB regions); 0 = none.
    pub pmd_cwc: usize,
    pub pud_cwc: usize,
    /// Cycles for the (parallel) CWC probe at the start of a walk.
    pub cwc_latency: u32,
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
            pmd_cwc: 16,
            pud_cwc: 2,
            cwc_latency: 1,
        }
    }
}

const SIZES: [PageSize; 3] = [PageSize::K4, PageSize::M2, PageSize::G1];

struct SpaceTables {
    tables: Vec<ElasticCuckooTable>,
    /// PMD-CWT (key: 2 MiB region; ptes[0] = 4K pages, ptes[1] = 2M pages in it) and
    /// PUD-CWT (key: 1 GiB region; ptes[0..3] = 4K, 2M, 1G pages in it).
    cwt: Option<[ElasticCuckooTable; 2]>,
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
        if !(1..=8).contains(&cfg.ways) {
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
        if cfg.cwt_slots.iter().any(|&s| s < 8 || !s.is_power_of_two() || s > 1 << 24) || !(1..=8).contains(&cfg.cwt_ways) {
            return Err(Error::config("page_table.ecpt.cwt_slots", "CWT slots must be powers of two between 8 and 2^24, cwt_ways 1 to 8"));
        }
        if !cfg.cwt && (cfg.pmd_cwc > 0 || cfg.pud_cwc > 0) {
            return Err(Error::config("page_table.ecpt.cwt", "the CWCs cache CWT entries: set pmd_cwc = pud_cwc = 0 without CWTs"));
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
        let s = self.space(asid)?;
        SIZES.iter().enumerate().find_map(|(i, &size)| {
            let (key, slot) = key_of(va, size);
            let (_, c) = s.tables[i].find(key)?;
            (c.ptes[slot] != 0).then_some((i, c.ptes[slot]))
        })
    }

    /// Count a page of size index `i` at `va` in (or out of) the CWT entries of its
    /// regions; entries appear with their first page and go with their last.
    fn count_in_cwts(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, i: usize, add: bool) -> Result<()> {
        let Some(s) = self.space_mut(asid) else { return Ok(()) };
        let Some(cwt) = &mut s.cwt else { return Ok(()) };
        for (t, shift, covers) in [(0usize, PMD_SHIFT, i < 2), (1, PUD_SHIFT, true)] {
            if !covers {
                continue;
            }
            let key = va >> shift;
            if add {
                cwt[t].entry(mem, key)?.ptes[i] += 1;
            } else if let Some(c) = cwt[t].find_mut(key) {
                c.ptes[i] -= 1;
                if c.is_empty_cluster() {
                    cwt[t].remove(key);
                }
            }
        }
        Ok(())
    }

    /// Page-size counts of the CWT entry of `va`'s region in table `t` (0 PMD, 1 PUD),
    /// and the entry's address; None if the region has no entry.
    fn cwt_entry(&self, asid: Asid, va: u64, t: usize) -> Option<([u64; 3], u64)> {
        let cwt = self.space(asid)?.cwt.as_ref()?;
        let key = va >> [PMD_SHIFT, PUD_SHIFT][t];
        cwt[t].find(key).map(|(p, c)| ([c.ptes[0], c.ptes[1], c.ptes[2]], p.pa))
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
        let a = asid as usize;
        if self.spaces.len() <= a {
            self.spaces.resize_with(a + 1, || None);
        }
        if self.spaces[a].is_none() {
            let tables = (0..3)
                .map(|i| ElasticCuckooTable::new(mem, self.params, self.cfg.initial_slots[i]))
                .collect::<Result<Vec<_>>>()?;
            let cwt = if self.cfg.cwt {
                let p = CuckooParams { ways: self.cfg.cwt_ways, ..self.params };
                Some([ElasticCuckooTable::new(mem, p, self.cfg.cwt_slots[0])?, ElasticCuckooTable::new(mem, p, self.cfg.cwt_slots[1])?])
            } else {
                None
            };
            self.spaces[a] = Some(SpaceTables { tables, cwt });
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let Some(s) = self.spaces.get_mut(asid as usize).and_then(|s| s.take()) else { return };
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
        let i = SIZES.iter().position(|&s| s == size).ok_or_else(|| {
            Error::config("os.page_size", format!("an elastic cuckoo page table maps 4K, 2M or 1G pages, not {size}"))
        })?;
        let (key, slot) = key_of(va, size);
        let s = self.space_mut(asid).ok_or_else(|| Error::Sim(format!("map into unknown address space {asid}")))?;
        let c = s.tables[i].entry(mem, key)?;
        if c.ptes[slot] != 0 {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        c.ptes[slot] = pte(pa, perms);
        self.mapped += 1;
        self.count_in_cwts(mem, asid, va, i, true)
    }

    fn unmap(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let (i, e) = self.lookup(asid, va)?;
        let (key, slot) = key_of(va, SIZES[i]);
        let t = &mut self.space_mut(asid)?.tables[i];
        let c = t.find_mut(key)?;
        c.ptes[slot] = 0;
        if c.is_empty_cluster() {
            t.remove(key);
        }
        self.mapped -= 1;
        self.count_in_cwts(_mem, asid, va, i, false).expect("a CWT decrement allocates nothing");
        Some(Self::translation(i, e))
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Some((i, e)) = self.lookup(asid, va) else { return false };
        let (key, slot) = key_of(va, SIZES[i]);
        let Some(s) = self.space_mut(asid) else { return false };
        if let Some(c) = s.tables[i].find_mut(key) {
            c.ptes[slot] = pte(e, perms);
        }
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.lookup(asid, va).map(|(i, e)| Self::translation(i, e))
    }

    fn walk(&mut self, asid: Asid, va: u64, c: &mut EcptWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        self.space(asid)?;
        // Both CWCs are probed at once; a PMD-CWC hit makes the PUD-CWC's moot.
        let pmd_hit = c.pmd.lookup(asid, va);
        let pud_hit = !pmd_hit && c.pud.lookup(asid, va);
        let pmd = if pmd_hit { self.cwt_entry(asid, va, 0) } else { None };
        let pud = if pud_hit { self.cwt_entry(asid, va, 1) } else { None };
        // Which sizes to probe (bit i: SIZES[i]).
        let sizes: u8 = match (pmd, pud) {
            (Some((n, _)), _) => if n[1] > 0 { 0b010 } else { 0b001 },
            (None, Some((n, _))) => (0..3).filter(|&i| n[i] > 0).fold(0, |m, i| m | 1 << i),
            _ => 0b111,
        };
        path.begin_step();
        let s = self.space(asid)?;
        let mut direct = false;
        if sizes.count_ones() == 1 && pmd.is_some() {
            // Direct: the CWT names the way of the entry, if the entry exists.
            let i = sizes.trailing_zeros() as usize;
            if let Some((probe, _)) = s.tables[i].find(key_of(va, SIZES[i]).0) {
                path.push_parallel(probe.pa, i as u8 + 1);
                direct = true;
            }
        }
        if !direct {
            for (i, &size) in SIZES.iter().enumerate().filter(|(i, _)| sizes & (1 << i) != 0) {
                let (key, _) = key_of(va, size);
                for w in 0..s.tables[i].ways() {
                    path.push_parallel(s.tables[i].probe_pa(key, w), i as u8 + 1);
                }
            }
        }
        // CWT entries the CWCs missed are fetched alongside, and cached.
        let mut fill = [false; 2];
        if !pmd_hit && c.pmd.enabled() {
            if let Some((_, pa)) = self.cwt_entry(asid, va, 0) {
                path.push_parallel(pa, 0);
                fill[0] = true;
            }
        }
        if !pmd_hit && !pud_hit && c.pud.enabled() {
            if let Some((_, pa)) = self.cwt_entry(asid, va, 1) {
                path.push_parallel(pa, 0);
                fill[1] = true;
            }
        }
        if path.refs().last().map_or(true, |r| r.step + 1 != path.steps()) {
            // No reference in the step (no size could hold va): probe the 4K table.
            let s = self.space(asid)?;
            let (key, _) = key_of(va, SIZES[0]);
            path.push_parallel(s.tables[0].probe_pa(key, 0), 1);
        }
        if fill[0] {
            c.pmd.fill(asid, va);
        }
        if fill[1] {
            c.pud.fill(asid, va);
        }
        let class = if direct {
            0
        } else {
            match sizes.count_ones() {
                1 => 1,
                2 => 2,
                _ => 3,
            }
        };
        self.classes[class] += 1;
        self.translate(asid, va)
    }

    fn footprint(&self) -> PtFootprint {
        let tables = || self.spaces.iter().flatten().flat_map(|s| s.tables.iter().chain(s.cwt.iter().flatten()));
        PtFootprint {
            bytes: tables().map(|t| t.bytes()).sum(),
            nodes: tables().map(|t| t.entries() as u64).sum(),
            mapped_pages: self.mapped,
        }
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
            "retired_resizes": self.retired_resizes, "retired_migrated": self.retired_migrated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pt::WalkCaches;

    #[test]
    fn a_walk_is_one_step_of_three_sizes_times_d_references() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], cwt: false, pmd_cwc: 0, pud_cwc: 0, ..Default::default() }).unwrap();
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
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [8, 8, 8], cwt_slots: [8, 8], migrate_per_insert: 1, ..Default::default() }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let mut mapped = std::collections::BTreeMap::new();
        let mut path = WalkPath::new();
        let mut cwc = EcptWalkCaches::new(16, 2, 1, 0).unwrap();
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
    }

    /// Walk classes: cold = complete (+ CWT fetches), then a PMD-CWC hit is direct.
    #[test]
    fn cwcs_turn_complete_walks_into_direct_ones() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], cwt_slots: [64, 64], ..Default::default() }).unwrap();
        let mut c = EcptWalkCaches::new(16, 2, 1, 0).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        pt.map(&mut mem, 0, 0x4000_0000, 0x9000, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, 0x4060_0000, 0x20_0000, PageSize::M2, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        // Cold: 3 sizes x 3 ways + the PMD- and PUD-CWT entries, one step.
        pt.walk(0, 0x4000_0000, &mut c, &mut path).unwrap();
        assert_eq!((path.steps(), path.refs().len()), (1, 11));
        // Warm PMD-CWC: one reference.
        path.clear();
        assert_eq!(pt.walk(0, 0x4000_0abc, &mut c, &mut path).unwrap().pa, 0x9000);
        assert_eq!(path.refs().len(), 1);
        // Another 2M region of the same 1G region: the PUD-CWC rules out 1G: 2 sizes x 3
        // ways (partial), plus this region's PMD-CWT entry.
        path.clear();
        assert_eq!(pt.walk(0, 0x4060_1234, &mut c, &mut path).unwrap().size, PageSize::M2);
        assert_eq!(path.refs().len(), 7);
        let d = pt.details();
        assert_eq!((d["walks"]["complete"].as_u64(), d["walks"]["direct"].as_u64(), d["walks"]["partial"].as_u64()), (Some(1), Some(1), Some(1)));
        // Unmapping the last page of a region removes its CWT entry and the CWC's copy.
        pt.unmap(&mut mem, 0, 0x4000_0000).unwrap();
        c.invalidate(0, 0x4000_0000);
        path.clear();
        assert!(pt.walk(0, 0x4000_0000, &mut c, &mut path).is_none());
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
