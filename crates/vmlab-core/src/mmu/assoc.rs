//! A set-associative tag store with LRU, tree-PLRU or random replacement: the building
//! block of every TLB and of the radix walk caches (PWC, NTLB, NPWC). The cuckoo
//! designs' small fully associative walk caches (CWC, STC) use
//! [`super::fully_assoc`], which gives the same answers.
//!
//! Callers choose the set index themselves (a TLB indexes by VPN mod sets for each page
//! size it probes) and pass a key that is unique within the structure.

use crate::addr::Asid;
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use strength_reduce::StrengthReducedU64;

/// An ASID value that matches every address space (global entries).
pub(crate) const ANY_ASID: Asid = Asid::MAX;

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

// An explicit tag: with niche-filled layouts, telling the variants apart took several
// instructions on every probe and fill.
#[derive(Clone, Debug)]
#[repr(u8)]
enum ReplState {
    /// Up to 16 ways: per set, the ways in recency order packed as 4-bit nibbles
    /// (nibble 0 = most recent). One u64 per set keeps the host cache footprint small.
    LruOrder {
        order: Vec<u64>,
    },
    /// More ways: a linked recency list per set (`RecencyList`).
    LruList(RecencyList),
    /// One bit-tree per set (ways - 1 bits used).
    Plru {
        bits: Vec<u64>,
    },
    Random {
        rng: Xoshiro256PlusPlus,
    },
}

/// The set of an index (a VPN, a line number): `x mod sets`, by a mask for a power of
/// two and by multiplication otherwise (a 64-bit division on every probe of, say, an
/// 86-set TLB sat on the walk's path). The mask is tested first and kept apart from
/// `StrengthReducedU64`, whose own power-of-two case loads and tests its multiplier and
/// divisor on every call (a tenth of a stream access's cache lookups). Every
/// set-indexed structure takes its sets here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SetIndex {
    /// `sets - 1` for a power of two; `u64::MAX` otherwise.
    mask: u64,
    /// log2(sets) for a power of two (kept: `count_ones` without the host's popcnt is
    /// a dozen instructions).
    shift: u32,
    div: StrengthReducedU64,
}

impl SetIndex {
    /// `sets` > 0 (the geometry checks come first).
    pub(crate) fn new(sets: usize) -> SetIndex {
        let mask = if sets.is_power_of_two() { sets as u64 - 1 } else { u64::MAX };
        SetIndex { mask, shift: sets.trailing_zeros(), div: StrengthReducedU64::new(sets as u64) }
    }

    #[inline(always)]
    pub(crate) fn of(&self, x: u64) -> usize {
        if self.mask != u64::MAX {
            (x & self.mask) as usize
        } else {
            (x % self.div) as usize
        }
    }

    /// `(x / sets, x mod sets)`: the set, and what is left of `x` above it (an
    /// address's DRAM channel and bank, then its row).
    #[inline(always)]
    pub(crate) fn div_rem(&self, x: u64) -> (u64, usize) {
        if self.mask != u64::MAX {
            (x >> self.shift, (x & self.mask) as usize)
        } else {
            let (q, r) = StrengthReducedU64::div_rem(x, self.div);
            (q, r as usize)
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct AssocCache<V: Copy + Default> {
    /// Read by the unit tests (`sets`).
    #[cfg_attr(not(test), allow(dead_code))]
    sets: usize,
    ways: usize,
    set_index: SetIndex,
    keys: Vec<u64>,
    asids: Vec<Asid>,
    vals: Vec<V>,
    /// Sets of more than `FINGERPRINT_WAYS` ways: a one-byte hash of each slot's key
    /// (`fingerprint`), padded so a set's bytes can be loaded 16 at a time. A lookup
    /// compares 16 fingerprints per SSE2 instruction and reads only the keys whose
    /// fingerprint matches: a 32-entry fully associative walk cache used to compare
    /// all 32 keys on every probe.
    fps: Vec<u8>,
    /// `low_bits(ways)` (sets of up to 64 ways).
    way_mask: u64,
    repl: ReplState,
    /// A lookup tries the set's most recent way before searching the set
    /// (`with_mru_first`).
    mru_first: bool,
    /// Some entry was ever filled with `ANY_ASID`. Until then a key is in a set at most
    /// once per ASID, so a match at the most recent way is the match a search finds.
    /// (After, only `insert` refreshing a global entry for one ASID can break that,
    /// but the check is one load.)
    has_global: bool,
    /// The last lookup that hit: its key and ASID (`INVALID` key: none), and the slot
    /// it found. Until an entry is filled or removed, that entry stays where it is and
    /// the most recent of its set (a hit elsewhere replaces the memo), so the same
    /// lookup again hits it without changing any replacement state. Walk caches probe
    /// their upper levels with the same tag walk after walk.
    last_key: u64,
    last_asid: Asid,
    last_slot: usize,
}

/// Sets wider than this find a key through the slots' fingerprints (narrower ones
/// compare their keys directly: fewer instructions for a 12-way TLB set).
const FINGERPRINT_WAYS: usize = 12;

/// The widths `lookup_lru` and `fill_absent_lru` are instantiated for by their callers
/// (the TLB probe plans).
pub(crate) const PACKED_LRU_WIDTHS: [usize; 5] = [1, 2, 4, 8, 12];

/// The one-byte hash of a key kept in `AssocCache::fps` (and of a line in a cache
/// level's tag store, `mem::cache`).
#[inline(always)]
pub(crate) fn fingerprint(key: u64) -> u8 {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// The low `n` bits set (n <= 64).
#[inline(always)]
pub(crate) fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Exact LRU for sets of more than 16 ways: per set a doubly linked list of its ways
/// in recency order (most recent at `head`) and a bitmap of its valid ways. The victim
/// is the lowest-numbered invalid way, else the list's tail — the choice last-use
/// stamps make, at O(1) per touch and per fill instead of a scan of the whole set.
#[derive(Clone, Debug)]
struct RecencyList {
    ways: usize,
    /// Words of `valid` per set.
    words: usize,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    valid: Vec<u64>,
}

impl RecencyList {
    fn new(sets: usize, ways: usize) -> RecencyList {
        // Every set starts as the list 0, 1, ..., ways-1 with no valid way.
        let prev = (0..sets * ways).map(|s| (s % ways) as u32 - ((s % ways) > 0) as u32).collect();
        let next = (0..sets * ways).map(|s| ((s % ways) + 1).min(ways - 1) as u32).collect();
        let words = ways.div_ceil(64);
        RecencyList { ways, words, prev, next, head: vec![0; sets], tail: vec![ways as u32 - 1; sets], valid: vec![0; sets * words] }
    }

    /// Make `way` the most recent of `set`.
    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) {
        let head = self.head[set];
        if head as usize == way {
            return;
        }
        let base = set * self.ways;
        let (p, n) = (self.prev[base + way], self.next[base + way]);
        self.next[base + p as usize] = n;
        if self.tail[set] as usize == way {
            self.tail[set] = p;
        } else {
            self.prev[base + n as usize] = p;
        }
        self.prev[base + head as usize] = way as u32;
        self.next[base + way] = head;
        self.head[set] = way as u32;
    }

    #[inline(always)]
    fn set_valid(&mut self, set: usize, way: usize, valid: bool) {
        let w = &mut self.valid[set * self.words + way / 64];
        let bit = 1u64 << (way % 64);
        *w = if valid { *w | bit } else { *w & !bit };
    }

    #[inline(always)]
    fn victim(&self, set: usize) -> usize {
        if self.words == 1 {
            let invalid = !self.valid[set] & low_bits(self.ways);
            return if invalid != 0 { invalid.trailing_zeros() as usize } else { self.tail[set] as usize };
        }
        let valid = &self.valid[set * self.words..(set + 1) * self.words];
        for (i, &v) in valid.iter().enumerate() {
            let invalid = !v & low_bits(self.ways - 64 * i);
            if invalid != 0 {
                return 64 * i + invalid.trailing_zeros() as usize;
            }
        }
        self.tail[set] as usize
    }

    fn invalidate_all(&mut self) {
        self.valid.fill(0);
    }
}

/// What an insertion pushed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Evicted<V> {
    pub(crate) key: u64,
    pub(crate) asid: Asid,
    pub(crate) val: V,
}

impl<V: Copy + Default> AssocCache<V> {
    /// `entries` total in `ways`-way sets (`ways == 0` or `ways == entries` means fully
    /// associative). `key_path` names the config key in errors.
    pub(crate) fn new(entries: usize, ways: usize, repl: Replacement, seed: u64, key_path: &str) -> Result<Self> {
        if entries == 0 {
            return Err(Error::config(format!("{key_path}.entries"), "must be at least 1"));
        }
        let (ways, sets) = check_geometry(entries, ways, repl, key_path)?;
        let repl = match repl {
            Replacement::Lru if ways <= 16 => ReplState::LruOrder { order: vec![lru_initial_order(ways); sets] },
            Replacement::Lru => ReplState::LruList(RecencyList::new(sets, ways)),
            Replacement::Plru => ReplState::Plru { bits: vec![0; sets] },
            Replacement::Random => ReplState::Random { rng: Xoshiro256PlusPlus::seed_from_u64(seed) },
        };
        Ok(AssocCache {
            sets,
            ways,
            set_index: SetIndex::new(sets),
            keys: vec![INVALID; entries],
            asids: vec![0; entries],
            vals: vec![V::default(); entries],
            fps: if ways > FINGERPRINT_WAYS { vec![fingerprint(INVALID); entries + 64] } else { Vec::new() },
            way_mask: low_bits(ways),
            repl,
            mru_first: false,
            has_global: false,
            last_key: INVALID,
            last_asid: 0,
            last_slot: 0,
        })
    }

    /// Make lookups try each set's most recent way first (LRU only; no effect
    /// otherwise). For walk caches: most of their lookups hit the entry they hit last
    /// (the upper levels' few entries), which this finds without searching the set — a
    /// fully associative 32-entry set costs about a hundred instructions to search.
    /// The results are exactly a search's.
    pub(crate) fn with_mru_first(mut self) -> Self {
        self.mru_first = matches!(self.repl, ReplState::LruOrder { .. } | ReplState::LruList(_));
        self
    }

    #[cfg(test)]
    pub(crate) fn sets(&self) -> usize {
        self.sets
    }
    pub(crate) fn ways(&self) -> usize {
        self.ways
    }
    pub(crate) fn entries(&self) -> usize {
        self.keys.len()
    }

    /// Set index for an index value (e.g. a VPN): `x mod sets`.
    #[inline(always)]
    pub(crate) fn set_of(&self, x: u64) -> usize {
        self.set_index.of(x)
    }

    #[inline(always)]
    fn find(&self, set: usize, key: u64, asid: Asid) -> Option<usize> {
        let base = set * self.ways;
        if self.ways > FINGERPRINT_WAYS {
            return self.find_by_fingerprint(base, key, asid);
        }
        let keys = &self.keys[base..base + self.ways];
        // Branch-free tag match (keys are random, so an early-exit loop mispredicts on
        // almost every way), unrolled for the common geometries.
        let mask = match self.ways {
            1 => match_mask::<1>(keys, key),
            2 => match_mask::<2>(keys, key),
            4 => match_mask::<4>(keys, key),
            8 => match_mask::<8>(keys, key),
            12 => match_mask::<12>(keys, key),
            _ => crate::host::match_mask(keys, key, 0),
        };
        self.first_asid_match(base, mask, asid)
    }

    /// `find` in a set of more than `FINGERPRINT_WAYS` ways starting at slot `base`:
    /// the ways whose fingerprint matches, in way order, checked by key and ASID.
    #[inline(always)]
    fn find_by_fingerprint(&self, base: usize, key: u64, asid: Asid) -> Option<usize> {
        let fp = fingerprint(key);
        if self.ways > 64 {
            return self.find_by_fingerprint_wide(base, fp, key, asid);
        }
        let span = self.ways.next_multiple_of(16);
        let fps = &self.fps[base..base + span];
        // The walk caches' widths unrolled (a constant number of 16-byte compares).
        let mask = match span {
            16 => crate::host::byte_match_mask(&fps[..16], fp),
            32 => crate::host::byte_match_mask(&fps[..32], fp),
            _ => crate::host::byte_match_mask(fps, fp),
        } & self.way_mask;
        self.first_key_match(base, mask, key, asid)
    }

    /// `find_by_fingerprint` for sets of more than 64 ways, 64 at a time.
    #[inline(never)]
    fn find_by_fingerprint_wide(&self, base: usize, fp: u8, key: u64, asid: Asid) -> Option<usize> {
        (0..self.ways).step_by(64).find_map(|from| {
            let n = (self.ways - from).min(64);
            let start = base + from;
            let mask = crate::host::byte_match_mask(&self.fps[start..start + n.next_multiple_of(16)], fp) & low_bits(n);
            self.first_key_match(start, mask, key, asid)
        })
    }

    /// The first slot `from + w` with bit w of `mask` set that holds `key` under a
    /// matching ASID (fingerprint candidates).
    #[inline(always)]
    fn first_key_match(&self, from: usize, mut mask: u64, key: u64, asid: Asid) -> Option<usize> {
        while mask != 0 {
            let slot = from + mask.trailing_zeros() as usize;
            if self.keys[slot] == key && (self.asids[slot] == asid || self.asids[slot] == ANY_ASID) {
                return Some(slot);
            }
            mask &= mask - 1;
        }
        None
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

    /// The set's most recent slot, if it holds `key` under `asid` and no global entry
    /// could precede it in way order (then it is the slot `find` returns, and already
    /// most recent).
    #[inline(always)]
    fn mru_match(&self, set: usize, key: u64, asid: Asid) -> Option<usize> {
        let way = match &self.repl {
            ReplState::LruOrder { order } => (order[set] & 0xf) as usize,
            ReplState::LruList(l) => l.head[set] as usize,
            _ => return None,
        };
        let slot = set * self.ways + way;
        (self.keys[slot] == key && self.asids[slot] == asid && !self.has_global).then_some(slot)
    }

    /// Look up and, on a hit, mark the entry most recently used.
    #[inline(always)]
    pub(crate) fn lookup(&mut self, set: usize, key: u64, asid: Asid) -> Option<V> {
        if key == self.last_key && asid == self.last_asid {
            return Some(self.vals[self.last_slot]);
        }
        self.lookup_searching(set, key, asid)
    }

    /// `lookup` past the last-hit memo.
    #[inline]
    fn lookup_searching(&mut self, set: usize, key: u64, asid: Asid) -> Option<V> {
        let slot = match self.mru_first.then(|| self.mru_match(set, key, asid)).flatten() {
            Some(slot) => slot,
            None => {
                let slot = self.find(set, key, asid)?;
                self.touch(set, slot);
                slot
            }
        };
        self.remember_hit(key, asid, slot);
        Some(self.vals[slot])
    }

    #[inline(always)]
    fn remember_hit(&mut self, key: u64, asid: Asid, slot: usize) {
        (self.last_key, self.last_asid, self.last_slot) = (key, asid, slot);
    }

    /// Forget the last hit: an entry was filled or removed, or a hit the memo cannot
    /// name changed the recency order.
    #[inline(always)]
    fn forget_hit(&mut self) {
        self.last_key = INVALID;
    }

    /// Look up the first valid entry of `set` whose key satisfies `matches` (for keys
    /// that are not a plain equality, e.g. an any-size TLB's masked VPN compare); on a
    /// hit, mark it most recently used.
    #[inline]
    pub(crate) fn lookup_where(&mut self, set: usize, asid: Asid, matches: impl Fn(u64) -> bool) -> Option<V> {
        let base = set * self.ways;
        let slot = (base..base + self.ways).find(|&s| {
            let k = self.keys[s];
            k != INVALID && matches(k) && (self.asids[s] == asid || self.asids[s] == ANY_ASID)
        })?;
        self.forget_hit();
        self.touch(set, slot);
        Some(self.vals[slot])
    }

    /// The ways `W` for which `lookup_lru` and `fill_absent_lru` may be used: sets of up
    /// to `FINGERPRINT_WAYS` ways under packed LRU, looked up without MRU-first. 0 for
    /// any other structure.
    pub(crate) fn packed_lru_ways(&self) -> usize {
        match self.repl {
            ReplState::LruOrder { .. } if !self.mru_first && self.ways <= FINGERPRINT_WAYS => self.ways,
            _ => 0,
        }
    }

    /// `lookup` for a structure whose `packed_lru_ways()` is `W`: the same answer and
    /// the same recency update, without dispatching on the geometry and the policy
    /// (TLB probes of miss-heavy runs spent as much on that as on the tag match).
    #[inline(always)]
    pub(crate) fn lookup_lru<const W: usize>(&mut self, set: usize, key: u64, asid: Asid) -> Option<V> {
        debug_assert_eq!(self.packed_lru_ways(), W);
        let base = set * W;
        let mask = match_mask::<W>(&self.keys[base..base + W], key);
        let slot = self.first_asid_match(base, mask, asid)?;
        if let ReplState::LruOrder { order } = &mut self.repl {
            order[set] = lru_to_front(order[set], (slot - base) as u64, W);
        }
        self.remember_hit(key, asid, slot);
        Some(self.vals[slot])
    }

    /// `fill_absent_evicts` for a structure whose `packed_lru_ways()` is `W`.
    #[inline(always)]
    pub(crate) fn fill_absent_lru<const W: usize>(&mut self, set: usize, key: u64, asid: Asid, val: V) -> bool {
        debug_assert_eq!(self.packed_lru_ways(), W);
        let ReplState::LruOrder { order } = &mut self.repl else {
            return self.fill_absent_evicts(set, key, asid, val);
        };
        let o = order[set];
        let way = lru_victim(o, W);
        order[set] = lru_victim_to_front(o, way, W);
        let slot = set * W + way;
        self.forget_hit();
        let evicted = self.keys[slot] != INVALID;
        // No fingerprints: W <= FINGERPRINT_WAYS.
        self.keys[slot] = key;
        self.asids[slot] = asid;
        self.vals[slot] = val;
        self.has_global |= asid == ANY_ASID;
        evicted
    }

    /// Look up without changing replacement state.
    #[inline]
    pub(crate) fn peek(&self, set: usize, key: u64, asid: Asid) -> Option<V> {
        self.find(set, key, asid).map(|s| self.vals[s])
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, slot: usize) {
        match &mut self.repl {
            ReplState::LruOrder { order } => {
                let way = (slot - set * self.ways) as u64;
                order[set] = lru_to_front(order[set], way, self.ways);
            }
            ReplState::LruList(l) => l.touch(set, slot - set * self.ways),
            ReplState::Plru { bits } => {
                let way = slot - set * self.ways;
                bits[set] = plru_touch(bits[set], way, self.ways);
            }
            ReplState::Random { .. } => {}
        }
    }

    /// Insert (or refresh) `key`; returns the entry it displaced, if any.
    pub(crate) fn insert(&mut self, set: usize, key: u64, asid: Asid, val: V) -> Option<Evicted<V>> {
        if let Some(slot) = self.find(set, key, asid) {
            self.vals[slot] = val;
            self.asids[slot] = asid;
            self.has_global |= asid == ANY_ASID;
            self.forget_hit();
            self.touch(set, slot);
            return None;
        }
        self.fill_absent(set, key, asid, val)
    }

    /// Insert a key the caller knows is absent (it just missed): one pass over the set
    /// picks an invalid way or the replacement victim.
    #[inline]
    pub(crate) fn fill_absent(&mut self, set: usize, key: u64, asid: Asid, val: V) -> Option<Evicted<V>> {
        let slot = self.claim_victim(set);
        let evicted = (self.keys[slot] != INVALID).then(|| Evicted { key: self.keys[slot], asid: self.asids[slot], val: self.vals[slot] });
        self.write(slot, key, asid, val);
        evicted
    }

    /// `fill_absent` for a caller that needs only whether a valid entry was pushed out:
    /// the victim's ASID and value are not read (with random sets they are host cache
    /// misses).
    #[inline]
    pub(crate) fn fill_absent_evicts(&mut self, set: usize, key: u64, asid: Asid, val: V) -> bool {
        let slot = self.claim_victim(set);
        let evicted = self.keys[slot] != INVALID;
        self.write(slot, key, asid, val);
        evicted
    }

    /// Put an entry in `slot`, which `claim_victim` chose.
    #[inline(always)]
    fn write(&mut self, slot: usize, key: u64, asid: Asid, val: V) {
        self.keys[slot] = key;
        if self.ways > FINGERPRINT_WAYS {
            self.fps[slot] = fingerprint(key);
        }
        self.asids[slot] = asid;
        self.vals[slot] = val;
        self.has_global |= asid == ANY_ASID;
    }

    /// The slot to fill in `set` (an invalid way if any, else the replacement policy's
    /// victim), already made the most recent: the caller writes it next. One pass over
    /// the replacement state instead of one to choose and one to update.
    #[inline(always)]
    fn claim_victim(&mut self, set: usize) -> usize {
        self.forget_hit();
        let base = set * self.ways;
        let way = match &mut self.repl {
            // Invalid ways are kept at the least-recent end, so they go first; the
            // victim is rotated to the front.
            ReplState::LruOrder { order } => {
                let o = order[set];
                let way = lru_victim(o, self.ways);
                order[set] = lru_victim_to_front(o, way, self.ways);
                return base + way;
            }
            ReplState::LruList(l) => {
                let way = l.victim(set);
                l.set_valid(set, way, true);
                l.touch(set, way);
                return base + way;
            }
            // An invalid way first, else the policy's victim; then the usual touch.
            ReplState::Plru { bits } => {
                let keys = &self.keys[base..base + self.ways];
                keys.iter().position(|&k| k == INVALID).unwrap_or_else(|| plru_victim(bits[set], self.ways))
            }
            ReplState::Random { rng } => {
                let keys = &self.keys[base..base + self.ways];
                keys.iter().position(|&k| k == INVALID).unwrap_or_else(|| rng.gen_range(0..self.ways))
            }
        };
        self.touch(set, base + way);
        base + way
    }

    #[inline(always)]
    fn kill(&mut self, slot: usize) {
        self.forget_hit();
        self.keys[slot] = INVALID;
        if self.ways > FINGERPRINT_WAYS {
            self.fps[slot] = fingerprint(INVALID);
        }
        match &mut self.repl {
            ReplState::LruList(l) => l.set_valid(slot / self.ways, slot % self.ways, false),
            ReplState::LruOrder { order } => {
                let set = slot / self.ways;
                let way = (slot % self.ways) as u64;
                order[set] = lru_to_back(order[set], way, self.ways);
            }
            _ => {}
        }
    }

    /// Remove `key` if present; returns whether it was.
    pub(crate) fn invalidate(&mut self, set: usize, key: u64, asid: Asid) -> bool {
        match self.find(set, key, asid) {
            Some(slot) => {
                self.kill(slot);
                true
            }
            None => false,
        }
    }

    /// Change the value of `key` in place, without touching replacement state; returns
    /// whether the entry was there.
    pub(crate) fn update(&mut self, set: usize, key: u64, asid: Asid, f: impl FnOnce(&mut V)) -> bool {
        let Some(slot) = self.find(set, key, asid) else { return false };
        f(&mut self.vals[slot]);
        true
    }

    /// Let `f` change every valid entry's value in place; remove those for which it
    /// returns true.
    pub(crate) fn update_where(&mut self, mut f: impl FnMut(u64, Asid, &mut V) -> bool) {
        for s in 0..self.keys.len() {
            if self.keys[s] != INVALID && f(self.keys[s], self.asids[s], &mut self.vals[s]) {
                self.kill(s);
            }
        }
    }

    /// Remove every entry for which `pred(key, asid, val)` holds; returns how many.
    pub(crate) fn invalidate_where(&mut self, mut pred: impl FnMut(u64, Asid, &V) -> bool) -> u64 {
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
    pub(crate) fn for_each_valid(&self, mut f: impl FnMut(u64, Asid, &V)) {
        for s in 0..self.keys.len() {
            if self.keys[s] != INVALID {
                f(self.keys[s], self.asids[s], &self.vals[s]);
            }
        }
    }

    pub(crate) fn flush_all(&mut self) {
        self.forget_hit();
        self.keys.fill(INVALID);
        self.fps.fill(fingerprint(INVALID));
        match &mut self.repl {
            ReplState::LruList(l) => l.invalidate_all(),
            ReplState::LruOrder { order } => order.fill(lru_initial_order(self.ways)),
            _ => {}
        }
    }

    pub(crate) fn flush_asid(&mut self, asid: Asid) -> u64 {
        self.invalidate_where(|_, a, _| a == asid)
    }

    /// Valid entries (for tests and occupancy stats).
    pub(crate) fn occupancy(&self) -> usize {
        self.keys.iter().filter(|&&k| k != INVALID).count()
    }
}

/// Validate a set-associative geometry of `entries` (> 0) in `ways`-way sets (0 = fully
/// associative) for `repl`: returns (ways, sets), or an error naming the key.
/// Most entries (or cache lines) one structure may have: 2^26, a 4 GiB cache of 64-byte
/// lines. Its tags alone take half a gigabyte of host memory.
pub(crate) const MAX_ENTRIES: usize = 1 << 26;

pub(crate) fn check_geometry(entries: usize, ways: usize, repl: Replacement, key_path: &str) -> Result<(usize, usize)> {
    if entries > MAX_ENTRIES {
        return Err(Error::config(format!("{key_path}.entries"), format!("{entries} entries is more than vmlab simulates in one structure (at most 2^26)")));
    }
    let ways = if ways == 0 { entries } else { ways };
    if ways > entries || !entries.is_multiple_of(ways) {
        return Err(Error::config(format!("{key_path}.ways"), format!("{entries} entries cannot be split into {ways}-way sets")));
    }
    if repl == Replacement::Plru && (!ways.is_power_of_two() || ways > 64) {
        return Err(Error::config(format!("{key_path}.replacement"), format!("tree-PLRU needs a power-of-two number of ways <= 64, not {ways}")));
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

/// A packed recency order of `ways` (<= 16) ways, nibble 0 the most recent: initially
/// 0, 1, ..., ways-1, so way ways-1 is the first victim.
pub(crate) fn lru_initial_order(ways: usize) -> u64 {
    (0..ways as u64).fold(0u64, |acc, w| acc | (w << (4 * w)))
}

/// The least recent way of a packed order.
#[inline(always)]
pub(crate) fn lru_victim(order: u64, ways: usize) -> usize {
    ((order >> (4 * (ways - 1))) & 0xf) as usize
}

/// Move the least recent way, `way` (just refilled), to the most-recent end.
#[inline(always)]
pub(crate) fn lru_victim_to_front(order: u64, way: usize, ways: usize) -> u64 {
    // The low `ways` nibbles, branch-free (1 <= ways <= 16).
    ((order << 4) | way as u64) & (u64::MAX >> (64 - 4 * ways))
}

/// Move `way` to the most-recent end (nibble 0).
#[inline(always)]
pub(crate) fn lru_to_front(order: u64, way: u64, ways: usize) -> u64 {
    let p = lru_position(order, way, ways);
    // Branch-free (p <= 15): at p = 15 the shift below makes `upto` all ones.
    let at = 1u64 << (4 * p);
    let upto = (at << 4).wrapping_sub(1);
    (order & !upto) | ((order & (at - 1)) << 4) | way
}

/// Move `way` to the least-recent end (nibble ways-1).
#[inline(always)]
pub(crate) fn lru_to_back(order: u64, way: u64, ways: usize) -> u64 {
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

    /// The set of an index is `x mod sets` for every geometry, powers of two or not
    /// (the 86 sets of a 1032-entry 12-way TLB), over the whole range of `u64`.
    #[test]
    fn set_of_is_x_mod_sets() {
        use rand::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for (entries, ways) in [(1032, 12), (1536, 12), (64, 4), (48, 16), (3 * 7 * 11, 7), (1 << 20, 1), ((1 << 20) - 3, 1)] {
            let c = AssocCache::<u64>::new(entries, ways, Replacement::Lru, 0, "t").unwrap();
            let sets = c.sets() as u64;
            for x in [0, 1, sets - 1, sets, sets + 1, u64::MAX, u64::MAX - 1, u64::MAX / sets * sets] {
                assert_eq!(c.set_of(x) as u64, x % sets, "{x} mod {sets}");
            }
            for _ in 0..20_000 {
                let x: u64 = rng.gen::<u64>() >> rng.gen_range(0..64);
                assert_eq!(c.set_of(x) as u64, x % sets, "{x} mod {sets}");
            }
        }
    }

    /// `div_rem` is the quotient and the remainder, by the mask and shift of a power
    /// of two (one set included) and by multiplication otherwise.
    #[test]
    fn div_rem_is_quotient_and_remainder() {
        use rand::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
        for d in [1u64, 2, 3, 16, 86, 1 << 20, (1 << 20) - 3] {
            let s = SetIndex::new(d as usize);
            for _ in 0..10_000 {
                let x: u64 = rng.gen::<u64>() >> rng.gen_range(0..64);
                assert_eq!(s.div_rem(x), (x / d, (x % d) as usize), "{x} / {d}");
            }
            assert_eq!(s.div_rem(u64::MAX), (u64::MAX / d, (u64::MAX % d) as usize));
        }
    }

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

    /// The packed order (<= 16 ways) and the linked recency list (more ways) agree with
    /// a reference recency list on random traffic, including invalidations.
    #[test]
    fn packed_lru_matches_reference_lists() {
        use rand::{Rng, SeedableRng};
        for ways in [1usize, 2, 3, 4, 8, 12, 16, 17, 24, 32, 64, 65, 100] {
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

    /// Wide sets find keys through fingerprints: every lookup returns the slot a plain
    /// scan of the set finds (the first way, in way order, holding the key under a
    /// matching or global ASID), on random traffic with colliding keys, several
    /// address spaces, global entries, invalidations and flushes. A fill takes an
    /// invalid way if there is one; an LRU fill takes the least recent way, and in a
    /// set of more than 16 ways the lowest invalid one (the choice of last-use stamps).
    #[test]
    fn fingerprint_lookups_match_a_scan_of_the_set() {
        use rand::{Rng, SeedableRng};
        for (entries, ways) in [(24usize, 12usize), (16, 16), (24, 24), (32, 32), (128, 64), (100, 100), (70, 70)] {
            for repl in [Replacement::Lru, Replacement::Random] {
                let mut c: AssocCache<u64> = AssocCache::new(entries, ways, repl, 3, "t").unwrap();
                let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(entries as u64 * 7 + ways as u64);
                // Last-use times per slot (0 = invalid), to check LRU victims.
                let mut used = vec![0u64; entries];
                for t in 1..20_000u64 {
                    let key = rng.gen_range(0..(entries as u64 * 3));
                    let asid = if rng.gen_range(0..8) == 0 { ANY_ASID } else { rng.gen_range(0..3u16) };
                    let set = c.set_of(key);
                    let base = set * ways;
                    let scan = (base..base + ways).find(|&s| c.keys[s] == key && (c.asids[s] == asid || c.asids[s] == ANY_ASID));
                    assert_eq!(c.find(set, key, asid), scan, "{entries}/{ways} {repl:?} step {t}");
                    match rng.gen_range(0..20) {
                        0 => {
                            if let Some(s) = scan {
                                used[s] = 0;
                            }
                            c.invalidate(set, key, asid);
                        }
                        1 if t % 1000 == 0 => {
                            c.flush_all();
                            used.fill(0);
                        }
                        _ => match scan {
                            Some(s) => {
                                c.lookup(set, key, asid);
                                used[s] = t;
                            }
                            None => {
                                let stamps = &used[base..base + ways];
                                let oldest = (0..ways).min_by_key(|&w| (stamps[w], w)).unwrap();
                                c.fill_absent(set, key, asid, key);
                                let filled = c.find(set, key, asid).unwrap();
                                // Up to 16 ways the packed order takes any invalid way.
                                if repl == Replacement::Lru && (ways > 16 || stamps[oldest] != 0) {
                                    assert_eq!(filled, base + oldest, "{entries}/{ways} LRU victim, step {t}");
                                }
                                assert!(stamps[oldest] != 0 || stamps[filled - base] == 0, "an invalid way goes first");
                                used[filled] = t;
                            }
                        },
                    }
                }
            }
        }
    }

    /// A cache that tries the most recent way first returns what a plain one returns and
    /// evicts what it evicts, with the same contents after every step, on traffic that
    /// often re-hits its last entry, over several address spaces, invalidations, flushes
    /// and (in the second half) global entries.
    #[test]
    fn mru_first_lookups_are_plain_lookups() {
        use rand::{Rng, SeedableRng};
        for (entries, ways) in [(32usize, 4usize), (8, 1), (16, 16), (24, 24), (32, 32), (12, 12)] {
            let mut plain: AssocCache<u64> = AssocCache::new(entries, ways, Replacement::Lru, 0, "t").unwrap();
            let mut mru = plain.clone().with_mru_first();
            assert!(mru.mru_first);
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(entries as u64 * 5 + ways as u64);
            let (mut last, mut mru_hits) = (0u64, 0u64);
            for t in 0..40_000u64 {
                let key = if rng.gen_range(0..2) == 0 { last } else { rng.gen_range(0..(entries as u64 * 2)) };
                last = key;
                let global = t >= 20_000 && rng.gen_range(0..16) == 0;
                let asid = if global { ANY_ASID } else { rng.gen_range(0..3u16) };
                let set = plain.set_of(key);
                match rng.gen_range(0..40) {
                    0 => assert_eq!(plain.invalidate(set, key, asid), mru.invalidate(set, key, asid)),
                    1 if t % 5000 == 0 => {
                        plain.flush_all();
                        mru.flush_all();
                    }
                    2 => assert_eq!(plain.flush_asid(asid), mru.flush_asid(asid)),
                    _ => {
                        mru_hits += mru.mru_match(set, key, asid).is_some() as u64;
                        let hit = plain.lookup(set, key, asid);
                        assert_eq!(hit, mru.lookup(set, key, asid), "{entries}/{ways} step {t}");
                        if hit.is_none() {
                            let (a, b) = (plain.fill_absent(set, key, asid, t), mru.fill_absent(set, key, asid, t));
                            assert_eq!(a, b, "{entries}/{ways} step {t}");
                        }
                    }
                }
                assert_eq!((&plain.keys, &plain.asids, &plain.vals), (&mru.keys, &mru.asids, &mru.vals), "{entries}/{ways} step {t}");
            }
            assert!(mru_hits > 2_000, "{entries}/{ways}: the traffic re-hits most recent ways ({mru_hits})");
            assert!(mru.has_global, "{entries}/{ways}: the second half filled global entries");
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

    /// The last-hit memo answers exactly what a search does: against a plain LRU model
    /// (per set, its entries in recency order), repeated lookups of few keys, with
    /// fills, refreshing inserts, masked lookups, invalidations and flushes between
    /// them, give the same hits and leave the same victims; for packed and listed
    /// recency orders, with and without MRU-first, and for the specialised lookup.
    #[test]
    fn the_last_hit_memo_matches_an_lru_model() {
        use rand::{Rng, SeedableRng};
        for (entries, ways, mru, special) in [(32, 4, false, false), (32, 4, true, false), (24, 24, true, false), (24, 24, false, false), (32, 4, false, true)]
        {
            let mut c = AssocCache::<u64>::new(entries, ways, Replacement::Lru, 1, "t").unwrap();
            if mru {
                c = c.with_mru_first();
            }
            let sets = entries / ways;
            // Most recent first.
            let mut model: Vec<Vec<(u64, Asid, u64)>> = vec![Vec::new(); sets];
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(entries as u64 + ways as u64 + mru as u64);
            for i in 0..30_000u64 {
                let key = rng.gen_range(0..(3 * entries as u64));
                let asid = rng.gen_range(0..2u16);
                let set = c.set_of(key);
                let m = &mut model[set];
                match rng.gen_range(0..40) {
                    0 => {
                        let was = m.iter().position(|e| e.0 == key && e.1 == asid);
                        assert_eq!(c.invalidate(set, key, asid), was.is_some());
                        if let Some(p) = was {
                            m.remove(p);
                        }
                    }
                    1 if i % 7 == 0 => {
                        c.flush_asid(asid);
                        model.iter_mut().for_each(|m| m.retain(|e| e.1 != asid));
                    }
                    2 if i % 11 == 0 => {
                        c.flush_all();
                        model.iter_mut().for_each(Vec::clear);
                    }
                    3 => {
                        // A masked lookup that matches the key exactly.
                        let got = c.lookup_where(set, asid, |k| k == key);
                        let p = m.iter().position(|e| e.0 == key && e.1 == asid);
                        assert_eq!(got, p.map(|p| m[p].2));
                        if let Some(p) = p {
                            let e = m.remove(p);
                            m.insert(0, e);
                        }
                    }
                    4 => {
                        // A refreshing insert.
                        let val = i;
                        let p = m.iter().position(|e| e.0 == key && e.1 == asid);
                        let ev = c.insert(set, key, asid, val);
                        match p {
                            Some(p) => {
                                assert_eq!(ev, None);
                                m.remove(p);
                            }
                            None if m.len() == ways => assert_eq!(ev.map(|e| (e.key, e.asid)), m.pop().map(|e| (e.0, e.1))),
                            None => assert_eq!(ev, None),
                        }
                        m.insert(0, (key, asid, val));
                    }
                    _ => {
                        // Lookups repeat: the same key again, most of the time.
                        for _ in 0..rng.gen_range(1..4) {
                            let got = if special { c.lookup_lru::<4>(set, key, asid) } else { c.lookup(set, key, asid) };
                            let p = m.iter().position(|e| e.0 == key && e.1 == asid);
                            assert_eq!(got, p.map(|p| m[p].2), "lookup {i}");
                            if let Some(p) = p {
                                let e = m.remove(p);
                                m.insert(0, e);
                            }
                        }
                        if c.peek(set, key, asid).is_none() {
                            let m = &mut model[set];
                            let evicted = if special { c.fill_absent_lru::<4>(set, key, asid, i) } else { c.fill_absent_evicts(set, key, asid, i) };
                            assert_eq!(evicted, m.len() == ways);
                            if m.len() == ways {
                                m.pop();
                            }
                            m.insert(0, (key, asid, i));
                        }
                    }
                }
            }
        }
    }

    /// The geometry-specialised lookup and fill (`lookup_lru::<W>`, `fill_absent_lru::<W>`)
    /// give the same hits, victims and evictions as the general ones, for every width
    /// they serve, with several ASIDs, global entries and invalidations in between.
    #[test]
    fn packed_lru_specialisations_match_the_general_path() {
        use rand::{Rng, SeedableRng};
        fn run<const W: usize>() {
            let mut general = AssocCache::<u64>::new(8 * W, W, Replacement::Lru, 5, "t").unwrap();
            assert_eq!(general.packed_lru_ways(), W);
            let mut special = general.clone();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(W as u64);
            for _ in 0..20_000 {
                let key = rng.gen_range(0..40 * W as u64);
                let asid = if rng.gen_bool(0.05) { ANY_ASID } else { rng.gen_range(0..3u16) };
                let set = general.set_of(key);
                if rng.gen_bool(0.05) {
                    assert_eq!(general.invalidate(set, key, asid), special.invalidate(set, key, asid));
                    continue;
                }
                let hit = general.lookup(set, key, asid);
                assert_eq!(hit, special.lookup_lru::<W>(set, key, asid), "W={W} key {key}");
                if hit.is_none() {
                    let ev = general.fill_absent_evicts(set, key, asid, key * 10);
                    assert_eq!(ev, special.fill_absent_lru::<W>(set, key, asid, key * 10), "W={W} key {key}");
                }
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            general.for_each_valid(|k, asid, v| a.push((k, asid, *v)));
            special.for_each_valid(|k, asid, v| b.push((k, asid, *v)));
            assert_eq!(a, b, "W={W}");
        }
        run::<1>();
        run::<2>();
        run::<4>();
        run::<8>();
        run::<12>();
        // Structures the specialisations must not serve.
        assert_eq!(AssocCache::<u64>::new(16, 16, Replacement::Lru, 1, "t").unwrap().packed_lru_ways(), 0);
        assert_eq!(AssocCache::<u64>::new(16, 4, Replacement::Plru, 1, "t").unwrap().packed_lru_ways(), 0);
        assert_eq!(AssocCache::<u64>::new(16, 4, Replacement::Lru, 1, "t").unwrap().with_mru_first().packed_lru_ways(), 0);
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
