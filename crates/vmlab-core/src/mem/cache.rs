//! One physically indexed, set-associative cache level (write-back, write-allocate).
//!
//! The tag store is specialised rather than an [`AssocCache`](crate::mmu::assoc::AssocCache):
//! caches are the largest structures the engine models (a 2 MiB LLC has 32K lines),
//! they carry no ASIDs and a one-bit payload, and page walks touch them at random. So a
//! set's tags sit contiguously with the dirty bit folded in (a 16-way set is two host
//! cache lines, nothing else is touched), and with LRU replacement the set is kept in
//! recency order — a hit moves its tag to the front, the victim is the last way — so no
//! separate recency state exists (docs/performance.md).

use crate::config::{CacheConfig, Serves};
use crate::error::{Error, Result};
use crate::mmu::assoc::{check_geometry, plru_touch, plru_victim, Replacement};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
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

/// An empty way. Real tags are `line << 1 | dirty`; line numbers stay below 2^58, so no
/// real tag matches it.
const INVALID: u64 = u64::MAX;
const DIRTY: u64 = 1;

#[derive(Clone, Debug)]
enum Order {
    /// Ways in recency order, most recent first; empty ways at the end.
    Lru,
    /// One bit-tree per set; ways keep their position.
    Plru { bits: Vec<u64> },
    Random { rng: Xoshiro256PlusPlus },
}

/// The tags of every set, `ways` consecutive entries per set.
#[derive(Clone, Debug)]
struct LineStore {
    tags: Vec<u64>,
    ways: usize,
    set_mask: Option<usize>,
    sets: usize,
    order: Order,
}

impl LineStore {
    fn new(lines: usize, ways: usize, repl: Replacement, seed: u64, key_path: &str) -> Result<LineStore> {
        if lines == 0 {
            return Err(Error::config(format!("{key_path}.size"), "holds no line"));
        }
        let (ways, sets) = check_geometry(lines, ways, repl, key_path)?;
        let order = match repl {
            Replacement::Lru => Order::Lru,
            Replacement::Plru => Order::Plru { bits: vec![0; sets] },
            Replacement::Random => Order::Random { rng: Xoshiro256PlusPlus::seed_from_u64(seed) },
        };
        Ok(LineStore { tags: vec![INVALID; lines], ways, set_mask: sets.is_power_of_two().then(|| sets - 1), sets, order })
    }

    /// Look up `line`; on a miss allocate it. Returns (hit, evicted a dirty line).
    #[inline]
    fn access(&mut self, line: u64, write: bool) -> (bool, bool) {
        let set = match self.set_mask {
            Some(m) => (line as usize) & m,
            None => (line % self.sets as u64) as usize,
        };
        let ways = self.ways;
        let tags = &mut self.tags[set * ways..set * ways + ways];
        let want = line << 1;
        // Branch-free match: tags are random, an early exit mispredicts.
        let mut hit_way = usize::MAX;
        for (w, &t) in tags.iter().enumerate() {
            if t | DIRTY == want | DIRTY {
                hit_way = w;
            }
        }
        let dirty = if write { DIRTY } else { 0 };
        match &mut self.order {
            Order::Lru => {
                if hit_way != usize::MAX {
                    let t = tags[hit_way] | dirty;
                    tags.copy_within(0..hit_way, 1);
                    tags[0] = t;
                    (true, false)
                } else {
                    let victim = tags[ways - 1];
                    tags.copy_within(0..ways - 1, 1);
                    tags[0] = want | dirty;
                    (false, victim != INVALID && victim & DIRTY != 0)
                }
            }
            Order::Plru { bits } => {
                let w = if hit_way != usize::MAX {
                    tags[hit_way] |= dirty;
                    hit_way
                } else {
                    tags.iter().position(|&t| t == INVALID).unwrap_or_else(|| plru_victim(bits[set], ways))
                };
                bits[set] = plru_touch(bits[set], w, ways);
                self.fill_at(set, w, hit_way, want | dirty)
            }
            Order::Random { rng } => {
                let w = if hit_way != usize::MAX {
                    tags[hit_way] |= dirty;
                    hit_way
                } else {
                    tags.iter().position(|&t| t == INVALID).unwrap_or_else(|| rng.gen_range(0..ways))
                };
                self.fill_at(set, w, hit_way, want | dirty)
            }
        }
    }

    /// For the position-keeping policies: on a miss, put `tag` in way `w`.
    #[inline]
    fn fill_at(&mut self, set: usize, w: usize, hit_way: usize, tag: u64) -> (bool, bool) {
        if hit_way != usize::MAX {
            return (true, false);
        }
        let slot = &mut self.tags[set * self.ways + w];
        let victim = *slot;
        *slot = tag;
        (false, victim != INVALID && victim & DIRTY != 0)
    }
}

pub struct Cache {
    pub name: String,
    pub level: u8,
    pub serves: Serves,
    pub latency: u32,
    line_shift: u32,
    store: LineStore,
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
            store: LineStore::new(lines, c.ways, c.replacement, seed, &format!("cache.{name}"))?,
            counters: CacheCounters::default(),
        })
    }

    /// Look up the line of `pa`; on a miss the line is allocated (write-allocate).
    /// Returns whether it hit.
    #[inline]
    pub fn access(&mut self, pa: u64, write: bool, walk: bool) -> bool {
        let (hit, writeback) = self.store.access(pa >> self.line_shift, write);
        self.counters.accesses += 1;
        self.counters.walk_accesses += walk as u64;
        self.counters.writebacks += writeback as u64;
        if hit {
            self.counters.hits += 1;
        } else {
            self.counters.misses += 1;
            self.counters.walk_misses += walk as u64;
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::assoc::AssocCache;

    /// The line store agrees with the general set-associative store (the reference:
    /// it has its own tests against explicit LRU lists and PLRU trees) on hits and on
    /// dirty evictions, for every replacement policy and several geometries.
    #[test]
    fn agrees_with_the_general_tag_store() {
        for repl in [Replacement::Lru, Replacement::Plru, Replacement::Random] {
            for (lines, ways) in [(64usize, 4usize), (64, 16), (48, 12), (8, 1), (16, 16)] {
                if repl == Replacement::Plru && !ways.is_power_of_two() {
                    continue;
                }
                let mut fast = LineStore::new(lines, ways, repl, 9, "t").unwrap();
                let mut reference: AssocCache<bool> = AssocCache::new(lines, ways, repl, 9, "t").unwrap();
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(lines as u64 * 31 + ways as u64);
                for i in 0..20_000 {
                    let line = rng.gen_range(0..(lines as u64 * 3));
                    let write = rng.gen_range(0..4) == 0;
                    let set = reference.set_of(line);
                    let expect = match reference.lookup(set, line, 0) {
                        Some(d) => {
                            if write && !d {
                                reference.insert(set, line, 0, true);
                            }
                            (true, false)
                        }
                        None => (false, reference.fill_absent(set, line, 0, write).map_or(false, |e| e.val)),
                    };
                    assert_eq!(fast.access(line, write), expect, "{repl:?} {lines}/{ways} access {i}");
                }
            }
        }
    }

    #[test]
    fn impossible_geometries_name_the_key() {
        let e = LineStore::new(64, 5, Replacement::Lru, 0, "cache.l2").unwrap_err();
        assert!(e.to_string().contains("cache.l2.ways"), "{e}");
        let e = LineStore::new(0, 1, Replacement::Lru, 0, "cache.l2").unwrap_err();
        assert!(e.to_string().contains("cache.l2.size"), "{e}");
    }
}
