//! A small fully associative cache with exact LRU replacement: the cuckoo walk caches
//! (CWCs) and the shortcut translation cache (STC), a few to a few tens of entries
//! probed several times per walk.
//!
//! [`AssocCache`](super::assoc::AssocCache) serves any geometry and policy; these
//! structures are one set with LRU, probed about fifteen times per nested-ECPT walk,
//! so they get their own: one compare of a byte of fingerprint per entry (16 at a time)
//! finds a key, and up to 16 entries keep their recency order packed in one word
//! (`assoc`'s nibble order; larger ones a last-use stamp per entry). LRU's contents,
//! hits and misses do not depend on where entries sit, so the answers are exactly
//! `AssocCache`'s.

use super::assoc::{check_geometry, fingerprint, low_bits, lru_initial_order, lru_to_back, lru_to_front, lru_victim, lru_victim_to_front, Replacement};
use crate::addr::Asid;
use crate::error::Result;

/// Key of an empty entry (no real key matches it).
const EMPTY: u64 = u64::MAX;

/// A fully associative LRU cache of `(key, ASID) → V`. Entries belong to one ASID each
/// (no global entries).
#[derive(Clone, Debug)]
pub(crate) struct FullyAssocLru<V: Copy + Default> {
    keys: Box<[u64]>,
    asids: Box<[Asid]>,
    vals: Box<[V]>,
    /// `fingerprint` of each entry's key, padded to whole 16-byte groups.
    fps: Box<[u8]>,
    recency: Recency,
}

#[derive(Clone, Debug)]
enum Recency {
    /// Up to 16 entries: their indices from most to least recent as 4-bit nibbles,
    /// empty entries at the least recent end (`mmu::assoc`'s packed LRU order).
    Packed(u64),
    /// More: each entry's last use (0: empty), and the clock.
    Stamps(Box<[u64]>, u64),
}

impl<V: Copy + Default> FullyAssocLru<V> {
    /// `entries` > 0 (checked as `key_path`'s geometry).
    pub(crate) fn new(entries: usize, key_path: &str) -> Result<FullyAssocLru<V>> {
        if entries == 0 {
            return Err(crate::Error::config(key_path, "a cache needs at least one entry"));
        }
        check_geometry(entries, 0, Replacement::Lru, key_path)?;
        let recency = if entries <= 16 { Recency::Packed(lru_initial_order(entries)) } else { Recency::Stamps(vec![0; entries].into(), 0) };
        Ok(FullyAssocLru {
            keys: vec![EMPTY; entries].into(),
            asids: vec![0; entries].into(),
            vals: vec![V::default(); entries].into(),
            fps: vec![fingerprint(EMPTY); entries.next_multiple_of(16)].into(),
            recency,
        })
    }

    /// The entry holding `key` under `asid`.
    #[inline(always)]
    fn find(&self, key: u64, asid: Asid) -> Option<usize> {
        let fp = fingerprint(key);
        let n = self.keys.len();
        if n <= 16 {
            // One group (every walk cache of the papers' machines).
            let mut m = crate::host::byte_match_mask(&self.fps[..16], fp) & low_bits(n);
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                if self.keys[i] == key && self.asids[i] == asid {
                    return Some(i);
                }
                m &= m - 1;
            }
            return None;
        }
        for (g, group) in self.fps.chunks_exact(16).enumerate() {
            let from = 16 * g;
            let mut m = crate::host::byte_match_mask(group, fp) & low_bits((n - from).min(16));
            while m != 0 {
                let i = from + m.trailing_zeros() as usize;
                if self.keys[i] == key && self.asids[i] == asid {
                    return Some(i);
                }
                m &= m - 1;
            }
        }
        None
    }

    /// Make entry `i` the most recent.
    #[inline(always)]
    fn touch(&mut self, i: usize) {
        let n = self.keys.len();
        match &mut self.recency {
            Recency::Packed(order) => {
                if *order & 0xf != i as u64 {
                    *order = lru_to_front(*order, i as u64, n);
                }
            }
            Recency::Stamps(stamps, clock) => {
                *clock += 1;
                stamps[i] = *clock;
            }
        }
    }

    /// Look up; a hit becomes the most recently used entry.
    #[inline(always)]
    pub(crate) fn lookup(&mut self, key: u64, asid: Asid) -> Option<V> {
        let i = self.find(key, asid)?;
        self.touch(i);
        Some(self.vals[i])
    }

    #[cfg(test)]
    /// Look up without changing recency.
    #[inline]
    pub(crate) fn peek(&self, key: u64, asid: Asid) -> Option<V> {
        self.find(key, asid).map(|i| self.vals[i])
    }

    /// Insert a key the caller knows is absent (it just missed), in an empty entry or
    /// over the least recently used one. Returns whether a valid entry went.
    #[inline]
    pub(crate) fn fill_absent(&mut self, key: u64, asid: Asid, val: V) -> bool {
        debug_assert!(key != EMPTY && self.find(key, asid).is_none());
        let n = self.keys.len();
        let victim = match &mut self.recency {
            Recency::Packed(order) => {
                let v = lru_victim(*order, n);
                *order = lru_victim_to_front(*order, v, n);
                v
            }
            Recency::Stamps(stamps, clock) => {
                // The oldest stamp: an empty entry's 0 first.
                let v = (0..n).min_by_key(|&i| stamps[i]).expect("at least one entry");
                *clock += 1;
                stamps[v] = *clock;
                v
            }
        };
        let evicted = self.keys[victim] != EMPTY;
        self.keys[victim] = key;
        self.asids[victim] = asid;
        self.vals[victim] = val;
        self.fps[victim] = fingerprint(key);
        evicted
    }

    /// Insert `key`, or refresh it (value and recency) if present.
    #[inline]
    pub(crate) fn insert(&mut self, key: u64, asid: Asid, val: V) {
        match self.find(key, asid) {
            Some(i) => {
                self.vals[i] = val;
                self.touch(i);
            }
            None => _ = self.fill_absent(key, asid, val),
        }
    }

    fn kill(&mut self, i: usize) {
        self.keys[i] = EMPTY;
        self.fps[i] = fingerprint(EMPTY);
        let n = self.keys.len();
        match &mut self.recency {
            Recency::Packed(order) => *order = lru_to_back(*order, i as u64, n),
            Recency::Stamps(stamps, _) => stamps[i] = 0,
        }
    }

    /// Drop `key` under `asid`; whether it was there.
    pub(crate) fn invalidate(&mut self, key: u64, asid: Asid) -> bool {
        self.find(key, asid).map(|i| self.kill(i)).is_some()
    }

    /// Drop every entry of `asid`; how many went.
    pub(crate) fn flush_asid(&mut self, asid: Asid) -> u64 {
        let mut n = 0;
        for i in 0..self.keys.len() {
            if self.keys[i] != EMPTY && self.asids[i] == asid {
                self.kill(i);
                n += 1;
            }
        }
        n
    }

    pub(crate) fn flush_all(&mut self) {
        for i in 0..self.keys.len() {
            self.kill(i);
        }
    }

    #[cfg(test)]
    /// Valid entries.
    pub(crate) fn occupancy(&self) -> usize {
        self.keys.iter().filter(|&&k| k != EMPTY).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::assoc::AssocCache;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Random lookups, fills, inserts, invalidations and flushes against a fully
    /// associative `AssocCache` with LRU: the same answers throughout, at sizes
    /// around a 16-entry fingerprint group.
    #[test]
    fn answers_as_a_fully_associative_lru_assoc_cache() {
        for entries in [1, 2, 4, 10, 16, 17, 40] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(entries as u64);
            let mut fast = FullyAssocLru::<u64>::new(entries, "t").unwrap();
            let mut reference = AssocCache::<u64>::new(entries, 0, Replacement::Lru, 0, "t").unwrap();
            for step in 0..20_000u64 {
                // Keys from a pool a little larger than the cache, two ASIDs.
                let key = rng.gen_range(0..(entries as u64 * 2 + 2));
                let asid = rng.gen_range(0..2u16);
                match rng.gen_range(0..100) {
                    0..=59 => {
                        let got = fast.lookup(key, asid);
                        assert_eq!(got, reference.lookup(0, key, asid), "lookup {key} step {step}, {entries} entries");
                        if got.is_none() {
                            let evicts = reference.fill_absent_evicts(0, key, asid, step);
                            assert_eq!(fast.fill_absent(key, asid, step), evicts, "fill {key} step {step}");
                        }
                    }
                    60..=79 => {
                        fast.insert(key, asid, step);
                        reference.insert(0, key, asid, step);
                    }
                    80..=89 => assert_eq!(fast.peek(key, asid), reference.peek(0, key, asid)),
                    90..=96 => assert_eq!(fast.invalidate(key, asid), reference.invalidate(0, key, asid)),
                    97..=98 => assert_eq!(fast.flush_asid(asid), reference.flush_asid(asid)),
                    _ => {
                        fast.flush_all();
                        reference.flush_all();
                    }
                }
                assert_eq!(fast.occupancy(), reference.occupancy());
            }
        }
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut c = FullyAssocLru::<()>::new(3, "t").unwrap();
        for k in 0..3 {
            assert!(!c.fill_absent(k, 0, ()));
        }
        assert!(c.lookup(0, 0).is_some());
        // Key 1 is now the least recent.
        assert!(c.fill_absent(9, 0, ()));
        assert!(c.peek(1, 0).is_none() && c.peek(0, 0).is_some() && c.peek(2, 0).is_some());
        assert!(c.lookup(9, 1).is_none(), "entries belong to their ASID");
    }

    #[test]
    fn no_entries_is_a_config_error() {
        let e = FullyAssocLru::<()>::new(0, "page_table.nested.stc_entries").unwrap_err().to_string();
        assert!(e.contains("page_table.nested.stc_entries"), "{e}");
    }
}
