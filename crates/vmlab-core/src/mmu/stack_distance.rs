//! Miss-ratio curves in one pass, by stack distance (Mattson et al. 1970).
//!
//! LRU is a stack algorithm: a C-entry fully associative LRU TLB holds the C most
//! recently used pages, so a reference hits iff fewer than C distinct pages were used
//! since the page's previous use (its *stack distance*). One pass that histograms the
//! distances gives the misses of every size at once. The same holds inside one set of a
//! set-associative TLB with a fixed set count and the `vpn mod sets` index, so per-set
//! stacks give every associativity for that set count (Hill & Smith 1989).
//!
//! Exact for the reference stream alone: invalidations (munmap, mprotect, shootdowns)
//! break the inclusion property, and the curves do not model them.

use super::assoc::SetIndex;
use rustc_hash::FxHashMap;

/// A page as a TLB tags it: (address-space id, virtual page number).
pub(crate) type PageKey = (u32, u64);

/// Stack distances of a fully associative LRU TLB, for every size.
///
/// Each page's last reference time is kept in a map; a Fenwick tree over times has a
/// 1 at each time that is some page's last reference, so the distance of a reference is
/// the number of 1s after the page's previous time. Times are renumbered when the tree
/// fills, which bounds memory by twice the number of distinct pages.
pub(crate) struct FullyAssociativeStack {
    last: FxHashMap<PageKey, u32>,
    tree: Vec<u32>,
    now: u32,
    /// `by_distance[d]`: references at stack distance d (d = 0: the most recent page).
    by_distance: Vec<u64>,
    /// First references (infinite distance).
    pub(crate) cold: u64,
    pub(crate) references: u64,
}

impl Default for FullyAssociativeStack {
    fn default() -> Self {
        Self::new()
    }
}

impl FullyAssociativeStack {
    pub(crate) fn new() -> FullyAssociativeStack {
        FullyAssociativeStack { last: FxHashMap::default(), tree: vec![0; 4097], now: 0, by_distance: Vec::new(), cold: 0, references: 0 }
    }

    fn add(&mut self, mut i: usize, delta: i32) {
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Number of 1s at times 1..=i.
    fn prefix(&self, mut i: usize) -> u32 {
        let mut s = 0;
        while i > 0 {
            s += self.tree[i];
            i &= i - 1;
        }
        s
    }

    /// Renumber the live times 1..=n in order and rebuild the tree with room to grow.
    fn compact(&mut self) {
        let mut live: Vec<(u32, PageKey)> = self.last.iter().map(|(&k, &t)| (t, k)).collect();
        live.sort_unstable();
        let n = live.len();
        self.tree = vec![0; (2 * n).max(4096) + 1];
        for (i, (_, k)) in live.into_iter().enumerate() {
            self.last.insert(k, i as u32 + 1);
            self.tree[i + 1] = 1;
        }
        // Linear Fenwick build: children come before parents, each adds to its parent.
        for i in 1..self.tree.len() {
            let parent = i + (i & i.wrapping_neg());
            if parent < self.tree.len() {
                let v = self.tree[i];
                self.tree[parent] += v;
            }
        }
        self.now = n as u32;
    }

    /// One reference; returns its stack distance (`None`: first reference).
    pub(crate) fn reference(&mut self, key: PageKey) -> Option<usize> {
        self.references += 1;
        if self.now as usize + 1 >= self.tree.len() {
            self.compact();
        }
        self.now += 1;
        let t = self.now;
        let distance = match self.last.insert(key, t) {
            Some(prev) => {
                let d = (self.prefix(t as usize - 1) - self.prefix(prev as usize)) as usize;
                self.add(prev as usize, -1);
                if d >= self.by_distance.len() {
                    self.by_distance.resize(d + 1, 0);
                }
                self.by_distance[d] += 1;
                Some(d)
            }
            None => {
                self.cold += 1;
                None
            }
        };
        self.add(t as usize, 1);
        distance
    }

    pub(crate) fn distinct_pages(&self) -> u64 {
        self.last.len() as u64
    }

    /// Misses of a `entries`-entry fully associative LRU TLB: first references plus
    /// references at distance ≥ entries.
    pub(crate) fn misses(&self, entries: usize) -> u64 {
        self.cold + self.by_distance.iter().skip(entries).sum::<u64>()
    }
}

/// Per-set LRU stacks for one set count: misses for every associativity up to
/// `max_ways` (index `vpn mod sets`, as the simulated TLBs use).
pub(crate) struct SetAssociativeStacks {
    pub(crate) sets: usize,
    index: SetIndex,
    pub(crate) max_ways: usize,
    /// `sets * max_ways` keys, most recent first within each set.
    stacks: Vec<PageKey>,
    lens: Vec<u16>,
    /// `by_depth[d]`: references found at depth d of their set's stack.
    by_depth: Vec<u64>,
    /// References not within the top `max_ways` of their set (misses at every tracked
    /// associativity).
    pub(crate) beyond: u64,
    pub(crate) references: u64,
}

impl SetAssociativeStacks {
    pub(crate) fn new(sets: usize, max_ways: usize) -> SetAssociativeStacks {
        assert!(sets > 0 && (1..=u16::MAX as usize).contains(&max_ways));
        SetAssociativeStacks {
            sets,
            index: SetIndex::new(sets),
            max_ways,
            stacks: vec![(0, 0); sets * max_ways],
            lens: vec![0; sets],
            by_depth: vec![0; max_ways],
            beyond: 0,
            references: 0,
        }
    }

    pub(crate) fn reference(&mut self, key: PageKey) {
        self.references += 1;
        let set = self.index.of(key.1);
        let len = self.lens[set] as usize;
        let stack = &mut self.stacks[set * self.max_ways..(set + 1) * self.max_ways];
        let depth = stack[..len].iter().position(|&k| k == key);
        let shift_end = match depth {
            Some(d) => {
                self.by_depth[d] += 1;
                d
            }
            None => {
                self.beyond += 1;
                if len < self.max_ways {
                    self.lens[set] += 1;
                    len
                } else {
                    len - 1
                }
            }
        };
        stack.copy_within(0..shift_end, 1);
        stack[0] = key;
    }

    /// Misses of a `sets` × `ways` LRU TLB (`ways ≤ max_ways`).
    pub(crate) fn misses(&self, ways: usize) -> u64 {
        assert!(ways <= self.max_ways);
        self.beyond + self.by_depth[ways..].iter().sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct LRU simulation of an `entries`-entry fully associative TLB.
    fn lru_misses(stream: &[PageKey], entries: usize) -> u64 {
        let mut stack: Vec<PageKey> = Vec::new();
        let mut misses = 0;
        for &k in stream {
            match stack.iter().position(|&x| x == k) {
                Some(p) => {
                    stack.remove(p);
                }
                None => {
                    misses += 1;
                    if stack.len() == entries {
                        stack.pop();
                    }
                }
            }
            stack.insert(0, k);
        }
        misses
    }

    #[test]
    fn distances_of_a_hand_computed_stream() {
        // a b c a b b d a: distances -, -, -, 2, 2, 0, -, 2.
        let mut s = FullyAssociativeStack::new();
        let got: Vec<_> = [1, 2, 3, 1, 2, 2, 4, 1].iter().map(|&v| s.reference((0, v))).collect();
        assert_eq!(got, [None, None, None, Some(2), Some(2), Some(0), None, Some(2)]);
        assert_eq!((s.misses(1), s.misses(2), s.misses(3), s.misses(4)), (7, 7, 4, 4));
    }

    #[test]
    fn curves_equal_direct_lru_through_renumbering() {
        // Long enough to renumber the times several times.
        let mut x = 0x9e3779b97f4a7c15u64;
        let stream: Vec<PageKey> = (0..40_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 60) as u32 & 1, (x % 97) * (x % 3 + 1))
            })
            .collect();
        let mut fa = FullyAssociativeStack::new();
        let mut sa = SetAssociativeStacks::new(4, 8);
        for &k in &stream {
            fa.reference(k);
            sa.reference(k);
        }
        for c in [1, 2, 3, 8, 50, 100, 300] {
            assert_eq!(fa.misses(c), lru_misses(&stream, c), "{c} entries");
        }
        for w in 1..=8 {
            let direct: u64 = (0..4u64)
                .map(|set| {
                    let sub: Vec<PageKey> = stream.iter().copied().filter(|k| k.1 % 4 == set).collect();
                    lru_misses(&sub, w)
                })
                .sum();
            assert_eq!(sa.misses(w), direct, "4 sets x {w} ways");
        }
    }
}
