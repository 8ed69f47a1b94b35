//! Page-walk caches (Intel's paging-structure caches) in front of a radix or linear
//! table's walk.

use crate::addr::Asid;
use crate::error::Result;
use crate::mmu::assoc::{AssocCache, Replacement};
use crate::pt::radix::level_shift;
use crate::pt::{CacheCounters, SplitCaches, WalkCaches};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PwcConfig {
    /// Entries of the page-walk cache per level, lowest first: [PDE, PDPTE, PML4E, ...].
    /// An empty list (or zeros) disables a level.
    #[serde(default)]
    pub entries: Vec<usize>,
    #[serde(default)]
    pub ways: usize,
    #[serde(default)]
    pub replacement: Replacement,
    /// Cycles for the (parallel) PWC probe at the start of each walk.
    #[serde(default)]
    pub latency: u32,
}

/// Page-walk caches (Intel's paging-structure caches): one small cache per upper level,
/// holding non-leaf entries tagged by the VA bits above that entry's coverage.
/// `levels[0]` caches level-2 entries (PDEs), `levels[1]` level-3 (PDPTEs), and so on.
pub struct PageWalkCache {
    levels: Vec<Option<AssocCache<()>>>,
    counters: Vec<CacheCounters>,
    latency: u32,
}

impl PageWalkCache {
    /// `entries[k]` / `ways[k]` for the cache of level k+2 entries; 0 entries = none.
    pub fn new(entries: &[usize], ways: usize, repl: Replacement, latency: u32, seed: u64) -> Result<Self> {
        let mut levels = Vec::new();
        for (k, &n) in entries.iter().enumerate() {
            levels.push(if n == 0 { None } else { Some(AssocCache::new(n, ways.min(n), repl, seed + k as u64, &format!("pwc[{k}]"))?.with_mru_first()) });
        }
        Ok(PageWalkCache { counters: vec![CacheCounters::default(); levels.len()], levels, latency })
    }

    pub fn none() -> PageWalkCache {
        PageWalkCache { levels: Vec::new(), counters: Vec::new(), latency: 0 }
    }

    #[inline(always)]
    fn tag(va: u64, level: u8) -> u64 {
        // An entry at `level` is selected by VA bits from level_shift(level) up.
        va >> level_shift(level)
    }

    /// Probe every PWC level (they are looked up in parallel) and return the level at
    /// which the walk starts: `top` on a full miss, L-1 on a hit for level-L entries.
    #[inline]
    pub(crate) fn start_level(&mut self, asid: Asid, va: u64, top: u8) -> u8 {
        let mut start = top;
        for k in 0..self.levels.len() {
            let level = (k + 2) as u8;
            if level > top {
                break;
            }
            if let Some(c) = &mut self.levels[k] {
                let tag = Self::tag(va, level);
                let set = c.set_of(tag);
                let hit = c.lookup(set, tag, asid).is_some();
                self.counters[k].record(hit);
                if hit && level - 1 < start {
                    start = level - 1;
                }
            }
        }
        start
    }

    /// Cache the entry read at `level`. `missed`: this walk's probe of that level
    /// missed, so the entry is absent and no search is needed.
    #[inline]
    pub(crate) fn fill(&mut self, asid: Asid, va: u64, level: u8, missed: bool) {
        let k = level as usize - 2;
        if let Some(Some(c)) = self.levels.get_mut(k) {
            let tag = Self::tag(va, level);
            let set = c.set_of(tag);
            if missed {
                c.fill_absent_evicts(set, tag, asid, ());
            } else {
                c.insert(set, tag, asid, ());
            }
        }
    }
}

/// A radix walk's functional path needs no PWC: the PWCs stay with the walker, and the
/// front holds none.
impl SplitCaches for PageWalkCache {
    fn vacant(&self) -> Self {
        PageWalkCache::none()
    }
    fn split_front(&mut self) -> Self {
        self.vacant()
    }
    /// The front held nothing: nothing to take back.
    fn rejoin_front(&mut self, _front: Self) {}
}

impl WalkCaches for PageWalkCache {
    fn flush_all(&mut self) {
        self.levels.iter_mut().flatten().for_each(|c| c.flush_all());
    }
    fn flush_asid(&mut self, asid: Asid) {
        self.levels.iter_mut().flatten().for_each(|c| {
            c.flush_asid(asid);
        });
    }
    fn invalidate(&mut self, asid: Asid, _va: u64) {
        // Like INVLPG, drop all of the address space's paging-structure entries
        // (Intel SDM §4.10.4.1): unmap may free table nodes.
        self.flush_asid(asid);
    }
    fn probe_latency(&self) -> u64 {
        if self.levels.iter().any(|l| l.is_some()) {
            self.latency as u64
        } else {
            0
        }
    }
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        self.levels.iter().enumerate().filter(|(_, c)| c.is_some()).map(|(k, _)| (format!("pwc_l{}", k + 2), self.counters[k].clone())).collect()
    }
}
