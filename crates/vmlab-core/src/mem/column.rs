//! Column-associative tag store (Agarwal & Pudar, ISCA 1993), the hardware alternative
//! of Romer §5.5.2: a direct-mapped array whose conflicting lines get a second chance
//! at the index with its top bit flipped, f(b). Each slot has a rehash bit saying its
//! line lives away from its home index.
//!
//! Lookup of line `a` at home index b:
//! 1. slot b holds a: a fast (first-probe) hit;
//! 2. slot b holds a rehashed line: a cannot be at f(b), so miss and replace slot b;
//! 3. slot f(b) holds a: a slow (second-probe) hit; swap b and f(b), so the most
//!    recently used of the pair sits at its fast home;
//! 4. otherwise miss: a goes to b, b's old line moves to f(b) (rehash bit set) and
//!    f(b)'s old line is evicted.

use super::cache::{Probe, DIRTY, INVALID};
use crate::mmu::assoc::SetIndex;

#[derive(Clone, Debug)]
pub struct ColumnStore {
    /// `line << 1 | dirty`, or INVALID.
    tags: Vec<u64>,
    rehashed: Vec<bool>,
    /// A line's home slot.
    index: SetIndex,
    /// The top index bit: f(b) = b ^ flip.
    flip: usize,
    sets: usize,
}

impl ColumnStore {
    /// `lines` slots (at least 2).
    pub fn new(lines: usize) -> ColumnStore {
        let pow2 = lines.is_power_of_two();
        // Non-power-of-two arrays flip the top bit of the largest power of two inside.
        let flip = if pow2 { lines / 2 } else { (lines.next_power_of_two() / 4).max(1) };
        ColumnStore { tags: vec![INVALID; lines], rehashed: vec![false; lines], index: SetIndex::new(lines), flip, sets: lines }
    }

    #[inline]
    fn home(&self, idx_line: u64) -> usize {
        self.index.of(idx_line)
    }

    #[inline]
    fn alt(&self, b: usize) -> usize {
        let f = b ^ self.flip;
        if f < self.sets {
            f
        } else {
            b
        }
    }

    /// Look up `line` (set chosen by `idx_line`); on a miss allocate it if `allocate`.
    pub fn access(&mut self, idx_line: u64, line: u64, dirty: bool, allocate: bool) -> Probe {
        let b = self.home(idx_line);
        let want = line << 1;
        let d = dirty as u64;
        if self.tags[b] | DIRTY == want | DIRTY {
            self.tags[b] |= d;
            return Probe::hit();
        }
        let f = self.alt(b);
        if !self.rehashed[b] && f != b && self.tags[f] | DIRTY == want | DIRTY {
            // Second-probe hit: swap, the hit line to its home.
            let moved = self.tags[b];
            self.tags[b] = self.tags[f] | d;
            self.tags[f] = moved;
            self.rehashed[b] = false;
            self.rehashed[f] = moved != INVALID;
            return Probe { hit: true, slow: true, evicted: INVALID };
        }
        if !allocate {
            return Probe::miss(INVALID);
        }
        if self.rehashed[b] || f == b {
            let evicted = self.tags[b];
            self.tags[b] = want | d;
            self.rehashed[b] = false;
            return Probe::miss(evicted);
        }
        let evicted = self.tags[f];
        self.tags[f] = self.tags[b];
        self.rehashed[f] = self.tags[f] != INVALID;
        self.tags[b] = want | d;
        self.rehashed[b] = false;
        Probe::miss(evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_conflicting_lines_both_stay_cached() {
        // Lines 3 and 3 + 8 share home slot 3 of an 8-line array (f(3) = 7).
        let mut c = ColumnStore::new(8);
        assert!(!c.access(3, 3, false, true).hit);
        assert!(!c.access(11, 11, false, true).hit);
        for _ in 0..10 {
            let p = c.access(3, 3, false, true);
            assert!(p.hit && p.slow, "the LRU line of the pair is at f(b)");
            let p = c.access(11, 11, false, true);
            assert!(p.hit && p.slow);
        }
        // A run of references to one line hits fast after the swap.
        assert!(c.access(11, 11, false, true).hit && !c.access(11, 11, false, true).slow);
    }

    #[test]
    fn a_rehashed_slot_is_replaced_without_a_second_probe() {
        let mut c = ColumnStore::new(8);
        c.access(3, 3, false, true);
        c.access(11, 11, false, true); // 11 at slot 3, 3 rehashed into slot 7
                                       // Line 7's home is slot 7, which holds rehashed line 3: replace it directly.
        let p = c.access(7, 7, false, true);
        assert!(!p.hit);
        assert_eq!(p.evicted >> 1, 3);
        assert!(c.access(11, 11, false, true).hit);
        assert!(c.access(7, 7, false, true).hit);
    }

    #[test]
    fn a_third_conflicting_line_evicts_the_lru_of_the_pair() {
        let mut c = ColumnStore::new(8);
        c.access(3, 3, true, true); // dirty
        c.access(11, 11, false, true); // 3 -> slot 7
        let p = c.access(19, 19, false, true); // 19 home 3: 11 -> slot 7, 3 evicted
        assert_eq!(p.evicted, 3 << 1 | DIRTY);
        assert!(c.access(11, 11, false, true).slow);
    }
}
