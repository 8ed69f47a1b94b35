//! Elastic cuckoo page tables (ECPT; Skarlatos et al. ASPLOS'20, summarised by
//! Stojkovic et al. §2.3): per address space, one elastic d-ary cuckoo table per page
//! size (4K, 2M, 1G), each entry a 64-byte line with the tag of 8 consecutive pages of
//! that size and their 8 PTEs.
//!
//! A walk without walk caches (the plain native design) probes every page size's table
//! in every way at once: one sequential step of up to 3·d parallel references, only one
//! of which can hit. (Cuckoo walk tables and caches, which prune the sizes and ways a
//! walk probes, are not built yet: every walk is a *complete* walk.)

use super::cuckoo::{CuckooParams, ElasticCuckooTable, CLUSTER};
use super::{NoWalkCaches, PageTable, PtFootprint, Translation, WalkPath};
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
        }
    }
}

const SIZES: [PageSize; 3] = [PageSize::K4, PageSize::M2, PageSize::G1];

struct SpaceTables {
    tables: Vec<ElasticCuckooTable>,
}

pub struct ElasticCuckooPageTable {
    cfg: EcptConfig,
    params: CuckooParams,
    spaces: Vec<Option<SpaceTables>>,
    mapped: u64,
    /// Walks (every walk is complete without CWCs).
    complete_walks: u64,
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
            complete_walks: 0,
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

    fn translation(i: usize, e: u64) -> Translation {
        Translation { pa: e & !0xfff, size: SIZES[i], perms: Perms::from_bits(e as u8) }
    }
}

impl PageTable for ElasticCuckooPageTable {
    type Caches = NoWalkCaches;

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
            self.spaces[a] = Some(SpaceTables { tables });
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let Some(s) = self.spaces.get_mut(asid as usize).and_then(|s| s.take()) else { return };
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
        Ok(())
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

    fn walk(&mut self, asid: Asid, va: u64, _: &mut NoWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        let s = self.space(asid)?;
        // A complete walk: every size, every way, in parallel (one step).
        path.begin_step();
        for (i, &size) in SIZES.iter().enumerate() {
            let (key, _) = key_of(va, size);
            for w in 0..s.tables[i].ways() {
                path.push_parallel(s.tables[i].probe_pa(key, w), i as u8 + 1);
            }
        }
        self.complete_walks += 1;
        self.translate(asid, va)
    }

    fn footprint(&self) -> PtFootprint {
        let tables = || self.spaces.iter().flatten().flat_map(|s| s.tables.iter());
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
            "walks": {"complete": self.complete_walks, "size": 0, "partial": 0, "direct": 0},
            "retired_resizes": self.retired_resizes, "retired_migrated": self.retired_migrated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_is_one_step_of_three_sizes_times_d_references() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [64, 64, 64], ..Default::default() }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        pt.map(&mut mem, 0, 0x40_0000, 0x9000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0x40_0123, &mut NoWalkCaches, &mut path).unwrap();
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
        let mut pt = ElasticCuckooPageTable::new(&EcptConfig { initial_slots: [8, 8, 8], migrate_per_insert: 1, ..Default::default() }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let mut mapped = std::collections::BTreeMap::new();
        let mut path = WalkPath::new();
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
                    assert_eq!(pt.walk(0, v, &mut NoWalkCaches, &mut path).map(|t| t.pa), Some(p));
                }
            }
        }
        let d = pt.details();
        assert!(d["tables"][0]["resizes"].as_u64().unwrap() >= 5, "{d}");
        assert!(d["tables"][0]["migrated"].as_u64().unwrap() > 0);
        assert_eq!(pt.footprint().mapped_pages, mapped.len() as u64);
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
