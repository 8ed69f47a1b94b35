//! One physically indexed, set-associative cache level (write-back, write-allocate).

use crate::config::{CacheConfig, Serves};
use crate::error::Result;
use crate::mmu::assoc::AssocCache;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct CacheCounters {
    /// All accesses that reached this level (data and walk).
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    /// The subset of accesses made by page walks.
    pub walk_accesses: u64,
    pub walk_misses: u64,
    /// Dirty lines evicted.
    pub writebacks: u64,
}

pub struct Cache {
    pub name: String,
    pub level: u8,
    pub serves: Serves,
    pub latency: u32,
    line_shift: u32,
    /// Value = dirty bit.
    store: AssocCache<bool>,
    pub counters: CacheCounters,
}

impl Cache {
    pub fn new(name: &str, c: &CacheConfig, seed: u64) -> Result<Cache> {
        let lines = (c.size.0 / c.line.0) as usize;
        Ok(Cache {
            name: name.to_string(),
            level: c.level,
            serves: c.serves,
            latency: c.latency,
            line_shift: c.line.0.trailing_zeros(),
            store: AssocCache::new(lines, c.ways, c.replacement, seed, &format!("cache.{name}"))?,
            counters: CacheCounters::default(),
        })
    }

    /// Look up the line of `pa`; on a miss the line is allocated (write-allocate).
    /// Returns whether it hit.
    #[inline]
    pub fn access(&mut self, pa: u64, write: bool, walk: bool) -> bool {
        let line = pa >> self.line_shift;
        let set = self.store.set_of(line);
        self.counters.accesses += 1;
        self.counters.walk_accesses += walk as u64;
        let hit = match self.store.lookup(set, line, 0) {
            Some(dirty) => {
                if write && !dirty {
                    self.store.insert(set, line, 0, true);
                }
                true
            }
            None => {
                if let Some(ev) = self.store.fill_absent(set, line, 0, write) {
                    self.counters.writebacks += ev.val as u64;
                }
                false
            }
        };
        if hit {
            self.counters.hits += 1;
        } else {
            self.counters.misses += 1;
            self.counters.walk_misses += walk as u64;
        }
        hit
    }
}
