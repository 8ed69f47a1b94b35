//! The Cache Miss Lookaside (CML) buffer (Romer §5.2): a small device on the memory bus
//! that counts misses per physical page. Every reference that reaches memory is looked
//! up by page number in (page tag, counter) tuples split into an LRU segment and a HOT
//! segment:
//!
//! - a tag match increments the tuple's counter (a match in the LRU segment also makes
//!   it most recently used);
//! - otherwise the least recently used tuple of the LRU segment is reassigned to the
//!   page with counter 1;
//! - whenever an LRU tuple's count exceeds the smallest count in the HOT segment the two
//!   tuples swap (an empty HOT tuple counts 0), so heavily missing pages are not pushed
//!   out by the LRU policy;
//! - when a counter reaches the interrupt threshold the device interrupts the OS.
//!
//! The OS scans the tuples and clears the counters (Romer §5.2.2); the FIXED segment is
//! not modelled (the thesis does not use it).

/// An empty tuple's tag.
const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmlTuple {
    /// Physical page number (in units of the buffer's page size).
    pub page: u64,
    pub count: u32,
}

#[derive(Clone, Debug)]
pub struct CmlBuffer {
    page_shift: u32,
    /// Most recently used first.
    lru: Vec<CmlTuple>,
    hot: Vec<CmlTuple>,
    interrupt_threshold: u32,
    /// Set when a counter reached the interrupt threshold; the OS clears it.
    pub interrupt: bool,
    pub observed: u64,
    pub interrupts: u64,
}

impl CmlBuffer {
    pub fn new(lru_entries: usize, hot_entries: usize, page_shift: u32, interrupt_threshold: u32) -> CmlBuffer {
        let empty = CmlTuple { page: EMPTY, count: 0 };
        CmlBuffer {
            page_shift,
            lru: vec![empty; lru_entries],
            hot: vec![empty; hot_entries],
            interrupt_threshold,
            interrupt: false,
            observed: 0,
            interrupts: 0,
        }
    }

    /// A reference to physical address `pa` reached memory.
    #[inline]
    pub fn observe(&mut self, pa: u64) {
        self.observed += 1;
        let page = pa >> self.page_shift;
        let count = if let Some(t) = self.hot.iter_mut().find(|t| t.page == page) {
            t.count = t.count.saturating_add(1);
            t.count
        } else if !self.lru.is_empty() {
            let i = self.lru.iter().position(|t| t.page == page).unwrap_or(self.lru.len() - 1);
            let mut t = self.lru.remove(i);
            if t.page == page {
                t.count = t.count.saturating_add(1);
            } else {
                t = CmlTuple { page, count: 1 };
            }
            self.lru.insert(0, t);
            let c = t.count;
            // Promote into HOT past its coldest tuple.
            if let Some(h) = (0..self.hot.len()).min_by_key(|&h| self.hot[h].count) {
                if c > self.hot[h].count {
                    std::mem::swap(&mut self.hot[h], &mut self.lru[0]);
                    if self.lru[0].page == EMPTY {
                        // An empty HOT tuple swapped down is the least recently used.
                        let e = self.lru.remove(0);
                        self.lru.push(e);
                    }
                }
            }
            c
        } else {
            0
        };
        if count == self.interrupt_threshold && count > 0 {
            self.interrupt = true;
            self.interrupts += 1;
        }
    }

    /// The tuples in use (HOT segment first), as the OS scans them.
    pub fn scan(&self) -> Vec<CmlTuple> {
        self.hot.iter().chain(&self.lru).filter(|t| t.page != EMPTY).copied().collect()
    }

    /// Set every counter to zero (tags stay).
    pub fn clear(&mut self) {
        self.hot.iter_mut().chain(self.lru.iter_mut()).for_each(|t| t.count = 0);
    }

    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (page, count) tuples in use.
    type Tuples = Vec<(u64, u32)>;

    fn state(b: &CmlBuffer) -> (Tuples, Tuples) {
        let f = |v: &[CmlTuple]| v.iter().filter(|t| t.page != EMPTY).map(|t| (t.page, t.count)).collect();
        (f(&b.hot), f(&b.lru))
    }

    /// A hand-computed run: 2 LRU tuples, 1 HOT tuple, 4 KiB pages, interrupt at 3.
    #[test]
    fn counters_match_a_hand_computed_example() {
        let mut b = CmlBuffer::new(2, 1, 12, 3);
        let (a, bb, c, d) = (0x1000u64, 0x2000u64, 0x3000u64, 0x4000u64);
        // A: new LRU tuple (A,1) exceeds the empty HOT tuple (0): swap. HOT [A1].
        b.observe(a);
        assert_eq!(state(&b), (vec![(1, 1)], vec![]));
        // B: LRU (B,1); 1 > 1 is false: stays. C: LRU [C1, B1].
        b.observe(bb);
        b.observe(c);
        assert_eq!(state(&b), (vec![(1, 1)], vec![(3, 1), (2, 1)]));
        // B again: (B,2) MRU, 2 > HOT's 1: swap. HOT [B2], LRU [A1, C1].
        b.observe(bb);
        assert_eq!(state(&b), (vec![(2, 2)], vec![(1, 1), (3, 1)]));
        // D: replaces the LRU tuple C. LRU [D1, A1].
        b.observe(d);
        assert_eq!(state(&b), (vec![(2, 2)], vec![(4, 1), (1, 1)]));
        assert!(!b.interrupt);
        // B hits in HOT and reaches the threshold 3: interrupt.
        b.observe(bb + 0xfff);
        assert_eq!(state(&b), (vec![(2, 3)], vec![(4, 1), (1, 1)]));
        assert!(b.interrupt);
        assert_eq!(b.interrupts, 1);
        // Clearing keeps tags, zeroes counts; a new miss on A then promotes it.
        b.clear();
        b.interrupt = false;
        b.observe(a);
        assert_eq!(state(&b), (vec![(1, 1)], vec![(2, 0), (4, 0)]));
        assert_eq!(b.observed, 7);
    }
}
