//! A set-associative tag store with LRU, tree-PLRU or random replacement: the one
//! building block of every TLB and walk cache (PWC, NTLB, CWC, STC, ...).
//!
//! Callers choose the set index themselves (a TLB indexes by VPN mod sets for each page
//! size it probes) and pass a key that is unique within the structure.

use crate::addr::Asid;
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// An ASID value that matches every address space (global entries).
pub const ANY_ASID: Asid = Asid::MAX;

const INVALID: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Replacement {
    #[default]
    Lru,
    /// Tree pseudo-LRU (ways must be a power of two, at most 64).
    Plru,
    Random,
}

#[derive(Clone, Debug)]
enum ReplState {
    /// Up to 16 ways: per set, the ways in recency order packed as 4-bit nibbles
    /// (nibble 0 = most recent). One u64 per set keeps the host cache footprint small.
    LruOrder { order: Vec<u64> },
    /// More ways: per-slot last-use stamps; victim = smallest stamp in the set.
    Lru { stamps: Vec<u64>, clock: u64 },
    /// One bit-tree per set (ways - 1 bits used).
    Plru { bits: Vec<u64> },
    Random { rng: Xoshiro256PlusPlus },
}

#[derive(Clone, Debug)]
pub struct AssocCache<V: Copy + Default> {
    sets: usize,
    ways: usize,
    set_mask: Option<usize>,
    keys: Vec<u64>,
    asids: Vec<Asid>,
    vals: Vec<V>,
    repl: ReplState,
}

/// What an insertion pushed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted<V> {
    pub key: u64,
    pub asid: Asid,
    pub val: V,
}

impl<V: Copy + Default> AssocCache<V> {
    /// `entries` total in `ways`-way sets (`ways == 0` or `ways == entries` means fully
    /// associative). `key_path` names the config key in errors.
    pub fn new(entries: usize, ways: usize, repl: Replacement, seed: u64, key_path: &str) -> Result<Self> {
        if entries == 0 {
            return Err(Error::config(format!("{key_path}.entries"), "must be at least 1"));
        }
        let (ways, sets) = check_geometry(entries, ways, repl, key_path)?;
        let repl = match repl {
            Replacement::Lru if ways <= 16 => {
                // Initial order 0, 1, ..., ways-1: way ways-1 is the first victim.
                let init = (0..ways as u64).fold(0u64, |acc, w| acc | (w << (4 * w)));
                ReplState::LruOrder { order: vec![init; sets] }
            }
            Replacement::Lru => ReplState::Lru { stamps: vec![0; entries], clock: 0 },
            Replacement::Plru => ReplState::Plru { bits: vec![0; sets] },
            Replacement::Random => ReplState::Random { rng: Xoshiro256PlusPlus::seed_from_u64(seed) },
        };
        Ok(AssocCache {
            sets,
            ways,
            set_mask: sets.is_power_of_two().then(|| sets - 1),
            keys: vec![INVALID; entries],
            asids: vec![0; entries],
            vals: vec![V::default(); entries],
            repl,
        })
    }

    pub fn sets(&self) -> usize {
        self.sets
    }
    pub fn ways(&self) -> usize {
        self.ways
    }
    pub fn entries(&self) -> usize {
        self.keys.len()
    }

    /// Set index for an index value (e.g. a VPN): `x mod sets`.
    #[inline(always)]
    pub fn set_of(&self, x: u64) -> usize {
        match self.set_mask {
            Some(m) => (x as usize) & m,
            None => (x % self.sets as u64) as usize,
        }
    }

    #[inline(always)]
    fn find(&self, set: usize, key: u64, asid: Asid) -> Option<usize> {
        let base = set * self.ways;
        let keys = &self.keys[base..base + self.ways];
        // Branch-free tag match (keys are random, so an early-exit loop mispredicts on
        // almost every way), unrolled for the common geometries.
        let mask = match self.ways {
            1 => match_mask::<1>(keys, key),
            2 => match_mask::<2>(keys, key),
            4 => match_mask::<4>(keys, key),
            8 => match_mask::<8>(keys, key),
            12 => match_mask::<12>(keys, key),
            16 => match_mask::<16>(keys, key),
            _ => {
                for (c, chunk) in keys.chunks(64).enumerate() {
                    let mask = crate::host::match_mask(chunk, key, 0);
                    if let Some(slot) = self.first_asid_match(base + c * 64, mask, asid) {
                        return Some(slot);
                    }
                }
                return None;
            }
        };
        self.first_asid_match(base, mask, asid)
    }

    /// The first slot `from + w` with bit w of `mask` set whose ASID matches.
    #[inline(always)]
    fn first_asid_match(&self, from: usize, mut mask: u64, asid: Asid) -> Option<usize> {
        while mask != 0 {
            let slot = from + mask.trailing_zeros() as usize;
            let a = self.asids[slot];
            if a == asid || a == ANY_ASID {
                return Some(slot);
            }
            mask &= mask - 1;
        }
        None
    }

    /// Look up and, on a hit, mark the entry most recently used.
    #[inline]
    pub fn lookup(&mut self, set: usize, key: u64, asid: Asid) -> Option<V> {
        let slot = self.find(set, key, asid)?;
        self.touch(set, slot);
        Some(self.vals[slot])
    }

    /// Look up the first valid entry of `set` whose key satisfies `matches` (for keys
    /// that are not a plain equality, e.g. an any-size TLB's masked VPN compare); on a
    /// hit, mark it most recently used.
    #[inline]
    pub fn lookup_where(&mut self, set: usize, asid: Asid, matches: impl Fn(u64) -> bool) -> Option<V> {
        let base = set * self.ways;
        let slot = (base..base + self.ways).find(|&s| {
            let k = self.keys[s];
            k != INVALID && matches(k) && (self.asids[s] == asid || self.asids[s] == ANY_ASID)
        })?;
        self.touch(set, slot);
        Some(self.vals[slot])
    }

    /// Look up without changing replacement state.
    #[inline]
    pub fn peek(&self, set: usize, key: u64, asid: Asid) -> Option<V> {
        self.find(set, key, asid).map(|s| self.vals[s])
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, slot: usize) {
        match &mut self.repl {
            ReplState::LruOrder { order } => {
                let way = (slot - set * self.ways) as u64;
                order[set] = lru_to_front(order[set], way, self.ways);
            }
            ReplState::Lru { stamps, clock } => {
                *clock += 1;
                stamps[slot] = *clock;
            }
            ReplState::Plru { bits } => {
                let way = slot - set * self.ways;
                bits[set] = plru_touch(bits[set], way, self.ways);
            }
            ReplState::Random { .. } => {}
        }
    }

    /// Insert (or refresh) `key`; returns the entry it displaced, if any.
    pub fn insert(&mut self, set: usize, key: u64, asid: Asid, val: V) -> Option<Evicted<V>> {
        if let Some(slot) = self.find(set, key, asid) {
            self.vals[slot] = val;
            self.asids[slot] = asid;
            self.touch(set, slot);
            return None;
        }
        self.fill_absent(set, key, asid, val)
    }

    /// Insert a key the caller knows is absent (it just missed): one pass over the set
    /// picks an invalid way or the replacement victim.
    #[inline]
    pub fn fill_absent(&mut self, set: usize, key: u64, asid: Asid, val: V) -> Option<Evicted<V>> {
        let slot = set * self.ways + self.victim_way(set);
        let evicted = (self.keys[slot] != INVALID).then(|| Evicted {
            key: self.keys[slot],
            asid: self.asids[slot],
            val: self.vals[slot],
        });
        self.write(set, slot, key, asid, val);
        evicted
    }

    /// `fill_absent` for a caller that needs only whether a valid entry was pushed out:
    /// the victim's ASID and value are not read (with random sets they are host cache
    /// misses).
    #[inline]
    pub fn fill_absent_evicts(&mut self, set: usize, key: u64, asid: Asid, val: V) -> bool {
        let slot = set * self.ways + self.victim_way(set);
        let evicted = self.keys[slot] != INVALID;
        self.write(set, slot, key, asid, val);
        evicted
    }

    /// Put an entry in `slot` (of `set`), the way `victim_way` chose.
    #[inline(always)]
    fn write(&mut self, set: usize, slot: usize, key: u64, asid: Asid, val: V) {
        let base = set * self.ways;
        self.keys[slot] = key;
        self.asids[slot] = asid;
        self.vals[slot] = val;
        match &mut self.repl {
            // The victim was the least recent way: rotate it to the front.
            ReplState::LruOrder { order } => {
                let way = (slot - base) as u64;
                order[set] = ((order[set] << 4) | way) & low_nibbles(self.ways as u32);
            }
            _ => self.touch(set, slot),
        }
    }

    /// The way to fill: an invalid one if any, else the replacement policy's victim.
    #[inline]
    fn victim_way(&mut self, set: usize) -> usize {
        let base = set * self.ways;
        match &mut self.repl {
            // Invalid ways are kept at the least-recent end, so they go first.
            ReplState::LruOrder { order } => ((order[set] >> (4 * (self.ways - 1))) & 0xf) as usize,
            // Invalid slots have stamp 0, so the minimum finds them first.
            ReplState::Lru { stamps, .. } => {
                let s = &stamps[base..base + self.ways];
                let mut best = 0;
                let mut best_stamp = s[0];
                for (w, &st) in s.iter().enumerate().skip(1) {
                    if st < best_stamp {
                        best = w;
                        best_stamp = st;
                    }
                }
                best
            }
            ReplState::Plru { bits } => {
                let keys = &self.keys[base..base + self.ways];
                keys.iter().position(|&k| k == INVALID).unwrap_or_else(|| plru_victim(bits[set], self.ways))
            }
            ReplState::Random { rng } => {
                let keys = &self.keys[base..base + self.ways];
                keys.iter().position(|&k| k == INVALID).unwrap_or_else(|| rng.gen_range(0..self.ways))
            }
        }
    }

    #[inline(always)]
    fn kill(&mut self, slot: usize) {
        self.keys[slot] = INVALID;
        match &mut self.repl {
            ReplState::Lru { stamps, .. } => stamps[slot] = 0,
            ReplState::LruOrder { order } => {
                let set = slot / self.ways;
                let way = (slot % self.ways) as u64;
                order[set] = lru_to_back(order[set], way, self.ways);
            }
            _ => {}
        }
    }

    /// Remove `key` if present; returns whether it was.
    pub fn invalidate(&mut self, set: usize, key: u64, asid: Asid) -> bool {
        match self.find(set, key, asid) {
            Some(slot) => {
                self.kill(slot);
                true
            }
            None => false,
        }
    }

    /// Remove every entry for which `pred(key, asid, val)` holds; returns how many.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(u64, Asid, &V) -> bool) -> u64 {
        let mut n = 0;
        for s in 0..self.keys.len() {
            if self.keys[s] != INVALID && pred(self.keys[s], self.asids[s], &self.vals[s]) {
                self.kill(s);
                n += 1;
            }
        }
        n
    }

    /// Visit every valid entry.
    pub fn for_each_valid(&self, mut f: impl FnMut(u64, Asid, &V)) {
        for s in 0..self.keys.len() {
            if self.keys[s] != INVALID {
                f(self.keys[s], self.asids[s], &self.vals[s]);
            }
        }
    }

    pub fn flush_all(&mut self) {
        self.keys.fill(INVALID);
        match &mut self.repl {
            ReplState::Lru { stamps, .. } => stamps.fill(0),
            ReplState::LruOrder { order } => {
                let init = (0..self.ways as u64).fold(0u64, |acc, w| acc | (w << (4 * w)));
                order.fill(init);
            }
            _ => {}
        }
    }

    pub fn flush_asid(&mut self, asid: Asid) -> u64 {
        self.invalidate_where(|_, a, _| a == asid)
    }

    /// Valid entries (for tests and occupancy stats).
    pub fn occupancy(&self) -> usize {
        self.keys.iter().filter(|&&k| k != INVALID).count()
    }
}

/// Validate a set-associative geometry of `entries` (> 0) in `ways`-way sets (0 = fully
/// associative) for `repl`: returns (ways, sets), or an error naming the key.
pub(crate) fn check_geometry(entries: usize, ways: usize, repl: Replacement, key_path: &str) -> Result<(usize, usize)> {
    let ways = if ways == 0 { entries } else { ways };
    if ways > entries || entries % ways != 0 {
        return Err(Error::config(format!("{key_path}.ways"), format!("{entries} entries cannot be split into {ways}-way sets")));
    }
    if repl == Replacement::Plru && (!ways.is_power_of_two() || ways > 64) {
        return Err(Error::config(
            format!("{key_path}.replacement"),
            format!("tree-PLRU needs a power-of-two number of ways <= 64, not {ways}"),
        ));
    }
    Ok((ways, entries / ways))
}

/// Bit w set where `keys[w] == key`, for a set of exactly N ways (unrolled).
#[inline(always)]
fn match_mask<const N: usize>(keys: &[u64], key: u64) -> u64 {
    match_mask_ignoring::<N>(keys, key, 0)
}

/// Bit w set where `keys[w]` equals `key` in every bit outside `ignore`, for a set of
/// exactly N ways (unrolled; branch-free because keys are random, so an early-exit loop
/// mispredicts on almost every way).
#[inline(always)]
pub(crate) fn match_mask_ignoring<const N: usize>(keys: &[u64], key: u64, ignore: u64) -> u64 {
    let keys: &[u64; N] = keys.try_into().expect("set of N ways");
    crate::host::match_mask(keys, key, ignore)
}

/// Position of `way` in a packed recency order.
#[inline(always)]
fn lru_position(order: u64, way: u64, ways: usize) -> u32 {
    // SWAR: the nibbles equal to `way` become zero; the lowest zero nibble is exact
    // (borrows only create false positives above a true zero).
    const ONES: u64 = 0x1111_1111_1111_1111;
    const HIGHS: u64 = 0x8888_8888_8888_8888;
    let x = order ^ way.wrapping_mul(ONES);
    let z = x.wrapping_sub(ONES) & !x & HIGHS;
    debug_assert!(z != 0);
    (z.trailing_zeros() / 4).min(ways as u32 - 1)
}

/// Bits of the nibbles below position `p`.
#[inline(always)]
fn low_nibbles(p: u32) -> u64 {
    if p >= 16 {
        u64::MAX
    } else {
        (1u64 << (4 * p)) - 1
    }
}

/// Move `way` to the most-recent end (nibble 0).
#[inline(always)]
fn lru_to_front(order: u64, way: u64, ways: usize) -> u64 {
    let p = lru_position(order, way, ways);
    if p == 0 {
        return order;
    }
    let below = order & low_nibbles(p);
    let above = order & !low_nibbles(p + 1);
    above | (below << 4) | way
}

/// Move `way` to the least-recent end (nibble ways-1).
#[inline(always)]
fn lru_to_back(order: u64, way: u64, ways: usize) -> u64 {
    let p = lru_position(order, way, ways);
    let last = ways as u32 - 1;
    if p == last {
        return order;
    }
    let below = order & low_nibbles(p);
    let between = (order & low_nibbles(last + 1) & !low_nibbles(p + 1)) >> 4;
    let beyond = order & !low_nibbles(last + 1);
    beyond | (way << (4 * last)) | between | below
}

/// Tree-PLRU: internal node i has children 2i+1, 2i+2; bit = 1 means "the LRU side is
/// the right subtree". Touching a way points every node on its path away from it.
#[inline(always)]
pub(crate) fn plru_touch(mut bits: u64, way: usize, ways: usize) -> u64 {
    let mut node = 0usize;
    let mut lo = 0usize;
    let mut span = ways;
    while span > 1 {
        span /= 2;
        let right = way >= lo + span;
        if right {
            bits &= !(1 << node); // LRU side is now the left
            lo += span;
            node = 2 * node + 2;
        } else {
            bits |= 1 << node;
            node = 2 * node + 1;
        }
    }
    bits
}

#[inline(always)]
pub(crate) fn plru_victim(bits: u64, ways: usize) -> usize {
    let mut node = 0usize;
    let mut lo = 0usize;
    let mut span = ways;
    while span > 1 {
        span /= 2;
        if bits & (1 << node) != 0 {
            lo += span;
            node = 2 * node + 2;
        } else {
            node = 2 * node + 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent() {
        let mut c: AssocCache<u32> = AssocCache::new(2, 2, Replacement::Lru, 0, "t").unwrap();
        c.insert(0, 1, 0, 10);
        c.insert(0, 2, 0, 20);
        assert_eq!(c.lookup(0, 1, 0), Some(10)); // 2 is now LRU
        let ev = c.insert(0, 3, 0, 30).unwrap();
        assert_eq!(ev.key, 2);
        assert_eq!(c.peek(0, 1, 0), Some(10));
        assert_eq!(c.peek(0, 2, 0), None);
    }

    #[test]
    fn asid_tags_separate_spaces_and_global_matches_all() {
        let mut c: AssocCache<u32> = AssocCache::new(4, 4, Replacement::Lru, 0, "t").unwrap();
        c.insert(0, 7, 1, 1);
        assert_eq!(c.peek(0, 7, 2), None);
        c.insert(0, 8, ANY_ASID, 2);
        assert_eq!(c.peek(0, 8, 5), Some(2));
        assert_eq!(c.flush_asid(1), 1);
        assert_eq!(c.occupancy(), 1);
    }

    /// The packed order (<= 16 ways) and the stamp LRU (more ways) agree with a
    /// reference recency list on random traffic, including invalidations.
    #[test]
    fn packed_lru_matches_reference_lists() {
        use rand::{Rng, SeedableRng};
        for ways in [1usize, 2, 3, 4, 8, 12, 16, 24] {
            let mut c: AssocCache<u64> = AssocCache::new(ways, ways, Replacement::Lru, 0, "t").unwrap();
            let mut list: Vec<u64> = Vec::new(); // most recent first
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(ways as u64);
            for _ in 0..5000 {
                let k = rng.gen_range(0..(ways as u64 * 2));
                if rng.gen_range(0..10) == 0 {
                    assert_eq!(c.invalidate(0, k, 0), list.contains(&k));
                    list.retain(|&x| x != k);
                    continue;
                }
                let hit = c.lookup(0, k, 0).is_some();
                assert_eq!(hit, list.contains(&k), "ways {ways}");
                if hit {
                    list.retain(|&x| x != k);
                } else {
                    let ev = c.fill_absent(0, k, 0, k);
                    if list.len() == ways {
                        assert_eq!(ev.map(|e| e.key), list.pop());
                    } else {
                        assert!(ev.is_none());
                    }
                }
                list.insert(0, k);
            }
        }
    }

    /// Tree-PLRU against an explicit binary tree of "go left/right" flags.
    #[test]
    fn plru_matches_explicit_tree_model() {
        use rand::{Rng, SeedableRng};
        let ways = 8;
        let mut c: AssocCache<u64> = AssocCache::new(ways, ways, Replacement::Plru, 0, "t").unwrap();
        // flags[node]: true = the victim search goes right. Node n has children 2n+1, 2n+2.
        let mut flags = [false; 7];
        let mut tags: [Option<u64>; 8] = [None; 8];
        let point_away = |flags: &mut [bool; 7], way: usize| {
            let (mut node, mut lo, mut span) = (0, 0, ways);
            while span > 1 {
                span /= 2;
                let right = way >= lo + span;
                flags[node] = !right;
                if right {
                    lo += span;
                    node = 2 * node + 2;
                } else {
                    node = 2 * node + 1;
                }
            }
        };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..3000 {
            let k = rng.gen_range(0..20u64);
            let hit = c.lookup(0, k, 0).is_some();
            let pos = tags.iter().position(|&t| t == Some(k));
            assert_eq!(hit, pos.is_some());
            let way = match pos {
                Some(w) => w,
                None => {
                    let w = match tags.iter().position(|t| t.is_none()) {
                        Some(w) => w,
                        None => {
                            let (mut node, mut lo, mut span) = (0, 0, ways);
                            while span > 1 {
                                span /= 2;
                                if flags[node] {
                                    lo += span;
                                    node = 2 * node + 2;
                                } else {
                                    node = 2 * node + 1;
                                }
                            }
                            lo
                        }
                    };
                    let ev = c.fill_absent(0, k, 0, k);
                    assert_eq!(ev.map(|e| e.key), tags[w]);
                    tags[w] = Some(k);
                    w
                }
            };
            point_away(&mut flags, way);
        }
    }

    #[test]
    fn plru_never_evicts_the_most_recent_way() {
        for ways in [2usize, 4, 8, 16] {
            let mut bits = 0;
            for w in 0..ways {
                bits = plru_touch(bits, w, ways);
                assert_ne!(plru_victim(bits, ways), w);
            }
        }
        // With 4 ways touched 0,1,2,3 the victim is 0 (true LRU here).
        let mut bits = 0;
        for w in 0..4 {
            bits = plru_touch(bits, w, 4);
        }
        assert_eq!(plru_victim(bits, 4), 0);
    }

    /// The victim-free fill makes the same choices as the one that reports the victim,
    /// under every replacement policy: same hits afterwards, and it reports an eviction
    /// exactly when the other returns one.
    #[test]
    fn fill_absent_evicts_matches_fill_absent() {
        use rand::{Rng, SeedableRng};
        for repl in [Replacement::Lru, Replacement::Plru, Replacement::Random] {
            let mut full = AssocCache::<u64>::new(32, 4, repl, 5, "t").unwrap();
            let mut quiet = full.clone();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
            for _ in 0..5_000 {
                let key = rng.gen_range(0..200u64);
                let asid = rng.gen_range(0..3u16);
                let set = full.set_of(key);
                let hit = full.lookup(set, key, asid);
                assert_eq!(hit, quiet.lookup(set, key, asid), "{repl:?} key {key}");
                if hit.is_none() {
                    let ev = full.fill_absent(set, key, asid, key * 10);
                    assert_eq!(ev.is_some(), quiet.fill_absent_evicts(set, key, asid, key * 10), "{repl:?} key {key}");
                }
            }
            assert_eq!(full.occupancy(), quiet.occupancy());
        }
    }

    #[test]
    fn impossible_geometries_name_the_key() {
        let e = AssocCache::<u8>::new(0, 0, Replacement::Lru, 0, "tlb.l1d").unwrap_err();
        assert!(e.to_string().contains("tlb.l1d.entries"), "{e}");
        let e = AssocCache::<u8>::new(64, 5, Replacement::Lru, 0, "tlb.l1d").unwrap_err();
        assert!(e.to_string().contains("tlb.l1d.ways"), "{e}");
        let e = AssocCache::<u8>::new(48, 12, Replacement::Plru, 0, "tlb.l1d").unwrap_err();
        assert!(e.to_string().contains("replacement"), "{e}");
        assert!(AssocCache::<u8>::new(1536, 12, Replacement::Lru, 0, "x").is_ok());
    }
}
