//! The memory system's time: non-blocking caches (MSHRs per level, merging misses to
//! a line in flight) in front of the DRAM model.
//!
//! The functional hierarchy (`crate::mem`) has already decided where each reference
//! was served; this model only decides *when* it completes. A reference served at
//! level s held an MSHR at every level above s from when it got one until its data
//! came back; a reference to a line whose fill is still in flight at a level waits
//! for that fill instead of starting another (a secondary miss, merged).

use super::dram::{Calendar, Dram, BURST_BYTES};
use crate::mem::MEMORY;

/// The miss status holding registers of one cache: `lines[i]` is in flight until
/// `done[i]`.
pub struct MshrFile {
    // Fixed-size arrays indexed by masked numbers: no bounds checks on the per-reference
    // path (they were a tenth of a timed stream's instructions).
    lines: Box<[u64; SLOTS]>,
    done: Box<[u64; SLOTS]>,
    /// Which MSHR holds a line (every reference asks, so not a scan).
    index: LineIndex,
    /// A tournament tree over `(done << 8) | slot`: node i is the minimum of nodes 2i
    /// and 2i + 1, the leaves are the MSHRs, so the root is the one that frees first.
    /// An update is a branch-free climb.
    tree: Box<[u64; 2 * SLOTS]>,
    leaves: usize,
    /// When at least one miss was outstanding (the union of the busy intervals, which
    /// arrive in issue order, not time order).
    active: Calendar,
    /// The level can never run out of MSHRs ([`TimedMemory::new`]): its misses take
    /// none of the slots, and a line in flight is found in `recent`.
    never_full: bool,
    /// For a never-full level: per hashed line, the last line that missed there and
    /// when its fill completes.
    recent: Box<[(u64, u64); RECENT]>,
    pub counters: MshrCounters,
}

/// Lines a never-full level remembers in flight (more than any level's MSHRs: a line
/// is forgotten only when another that hashes alike misses after it).
const RECENT: usize = 1024;

/// The most MSHRs a level can have (a slot number fits the tournament key's low byte).
pub const MAX_MSHRS: u32 = 255;
const SLOTS: usize = 256;

impl MshrFile {
    /// The tournament tree of `n` free MSHRs (absent leaves never win).
    fn tree(n: usize) -> Box<[u64; 2 * SLOTS]> {
        let leaves = n.next_power_of_two();
        let mut t = Box::new([u64::MAX; 2 * SLOTS]);
        for slot in 0..n {
            t[leaves + slot] = slot as u64;
        }
        for i in (1..leaves).rev() {
            t[i] = t[2 * i].min(t[2 * i + 1]);
        }
        t
    }
}

/// An open-addressing map from a line to the MSHR that last held it (linear probing,
/// deletion by backward shift), at most half full.
struct LineIndex {
    keys: Box<[u64; INDEX]>,
    slots: Box<[u16; INDEX]>,
    /// The capacity in use, less one (a power of two at most `INDEX`).
    mask: usize,
}

/// The index's largest capacity: twice the most MSHRs.
const INDEX: usize = 2 * SLOTS;

const EMPTY: u64 = u64::MAX;

impl LineIndex {
    fn new(entries: usize) -> LineIndex {
        let cap = (entries * 2).next_power_of_two().clamp(4, INDEX);
        LineIndex { keys: Box::new([EMPTY; INDEX]), slots: Box::new([0; INDEX]), mask: cap - 1 }
    }

    #[inline(always)]
    fn home(&self, line: u64) -> usize {
        (line.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & self.mask & (INDEX - 1)
    }

    #[inline(always)]
    fn get(&self, line: u64) -> Option<usize> {
        let mut i = self.home(line);
        loop {
            match self.keys[i] {
                k if k == line => return Some(self.slots[i] as usize),
                EMPTY => return None,
                _ => i = (i + 1) & self.mask & (INDEX - 1),
            }
        }
    }

    #[inline(always)]
    fn insert(&mut self, line: u64, slot: usize) {
        let mut i = self.home(line);
        while self.keys[i] != EMPTY && self.keys[i] != line {
            i = (i + 1) & self.mask & (INDEX - 1);
        }
        self.keys[i] = line;
        self.slots[i] = slot as u16;
    }

    #[inline(always)]
    fn remove(&mut self, line: u64) {
        let mut i = self.home(line);
        loop {
            match self.keys[i] {
                EMPTY => return,
                k if k == line => break,
                _ => i = (i + 1) & self.mask & (INDEX - 1),
            }
        }
        // Shift back the entries after the hole that may not sit past it.
        let mut hole = i;
        let mut j = (i + 1) & self.mask & (INDEX - 1);
        while self.keys[j] != EMPTY {
            let home = self.home(self.keys[j]);
            let between = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !between {
                self.keys[hole] = self.keys[j];
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & self.mask & (INDEX - 1);
        }
        self.keys[hole] = EMPTY;
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MshrCounters {
    /// Primary misses (an MSHR allocated).
    pub misses: u64,
    /// Secondary misses and hits under a miss (merged into a fill in flight).
    pub merged: u64,
    /// Cycles misses waited for a free MSHR.
    pub full_cycles: u64,
    /// Sum over primary misses of the cycles they held their MSHR.
    pub busy_cycles: u64,
    /// Cycles with at least one miss outstanding.
    pub active_cycles: u64,
}

impl MshrCounters {
    /// `f` applied to each counter of `self` and `o`.
    pub fn zip(&self, o: &MshrCounters, f: impl Fn(u64, u64) -> u64) -> MshrCounters {
        MshrCounters {
            misses: f(self.misses, o.misses),
            merged: f(self.merged, o.merged),
            full_cycles: f(self.full_cycles, o.full_cycles),
            busy_cycles: f(self.busy_cycles, o.busy_cycles),
            active_cycles: f(self.active_cycles, o.active_cycles),
        }
    }
}

impl MshrFile {
    pub fn new(entries: u32) -> MshrFile {
        let n = entries as usize;
        MshrFile {
            lines: Box::new([u64::MAX; SLOTS]),
            done: Box::new([0; SLOTS]),
            index: LineIndex::new(n),
            tree: Self::tree(n),
            leaves: n.next_power_of_two(),
            active: Calendar::default(),
            never_full: false,
            recent: Box::new([(u64::MAX, 0); RECENT]),
            counters: MshrCounters::default(),
        }
    }

    /// When the fill of `line` in flight at `t` completes, if one is.
    #[inline(always)]
    fn in_flight(&self, line: u64, t: u64) -> Option<u64> {
        let d = if self.never_full {
            let (l, d) = self.recent[Self::recent_slot(line)];
            if l != line {
                return None;
            }
            d
        } else {
            self.done[self.index.get(line)? & (SLOTS - 1)]
        };
        (d > t).then_some(d)
    }

    #[inline(always)]
    fn recent_slot(line: u64) -> usize {
        (line.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize & (RECENT - 1)
    }

    /// An MSHR for a miss at `t`: the one that frees first. Returns it and the time the
    /// miss can start.
    #[inline(always)]
    fn allocate(&mut self, line: u64, t: u64) -> (usize, u64) {
        let best = (self.tree[1] & 0xff) as usize & (SLOTS - 1);
        let start = t.max(self.done[best]);
        self.counters.full_cycles += start - t;
        self.counters.misses += 1;
        let old = std::mem::replace(&mut self.lines[best], line);
        if old != u64::MAX {
            self.index.remove(old);
        }
        self.index.insert(line, best);
        (best, start)
    }

    /// A miss of `line` at a never-full level, from `start` to `done`.
    #[inline(always)]
    fn complete_never_full(&mut self, line: u64, start: u64, done: u64) {
        self.recent[Self::recent_slot(line)] = (line, done);
        self.counters.misses += 1;
        self.counters.busy_cycles += done - start;
        self.active.occupy(start, done);
    }

    #[inline(always)]
    fn complete(&mut self, slot: usize, start: u64, done: u64) {
        let slot = slot & (SLOTS - 1);
        self.done[slot] = done;
        const M: usize = 2 * SLOTS - 1;
        let mut i = (self.leaves + slot) & M;
        self.tree[i] = done << 8 | slot as u64;
        while i > 1 {
            i >>= 1;
            self.tree[i & M] = self.tree[(2 * i) & M].min(self.tree[(2 * i + 1) & M]);
        }
        self.counters.busy_cycles += done - start;
        self.active.occupy(start, done);
    }

    /// The counters, `active_cycles` complete.
    fn counters(&self) -> MshrCounters {
        MshrCounters { active_cycles: self.counters.active_cycles + self.active.covered(), ..self.counters.clone() }
    }
}

struct Level {
    latency: u64,
    line_shift: u32,
    mshr: MshrFile,
}

/// Where a reference enters the hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Data,
    Instr,
    Walk,
}

/// The timed hierarchy: per cache (by cache id) its latency and MSHRs, the three
/// paths, and the DRAM.
pub struct TimedMemory {
    levels: Vec<Level>,
    paths: [Vec<usize>; 3],
    pub dram: Dram,
    /// The last reference's latency had it found every MSHR, bank and bus free: the
    /// latency of the level that served it (or where it merged), or the last level's
    /// plus the DRAM's unloaded latency.
    pub last_unloaded: u64,
}

impl TimedMemory {
    /// `caches`: per cache id, (latency, line bytes, MSHRs).
    ///
    /// A level that is first on no path, and has at least as many MSHRs as the levels
    /// right above it on every path together, is never full: each of its misses holds
    /// an MSHR above it from no later until the same fill completes, and those are
    /// never more than the levels above have. Such a level keeps no slots (the
    /// skylake preset's L2 and LLC: a tenth of a timed stream's instructions).
    pub fn new(caches: &[(u32, u64, u32)], paths: crate::mem::Paths<'_>, dram: Dram) -> TimedMemory {
        let mut levels: Vec<Level> = caches
            .iter()
            .map(|&(latency, line, mshrs)| Level { latency: latency as u64, line_shift: line.trailing_zeros(), mshr: MshrFile::new(mshrs) })
            .collect();
        let all = [paths.data, paths.instr, paths.walk];
        for (id, &(_, _, mshrs)) in caches.iter().enumerate() {
            let mut above = std::collections::BTreeSet::new();
            let mut first = false;
            for p in all {
                match p.iter().position(|&x| x == id) {
                    Some(0) => first = true,
                    Some(k) => {
                        above.insert(p[k - 1]);
                    }
                    None => {}
                }
            }
            let feeding: u64 = above.iter().map(|&a| caches[a].2 as u64).sum();
            levels[id].mshr.never_full = !first && !above.is_empty() && mshrs as u64 >= feeding;
        }
        TimedMemory { levels, paths: [paths.data.to_vec(), paths.instr.to_vec(), paths.walk.to_vec()], dram, last_unloaded: 0 }
    }

    /// A reference issued at `t` along `path`, served (functionally) by cache `served`
    /// or by memory ([`MEMORY`]): when its data is back.
    #[inline]
    pub fn access(&mut self, path: Path, pa: u64, served: u8, t: u64) -> u64 {
        let ids = &self.paths[path as usize];
        let mut t = t;
        // The levels that missed, with their MSHR (at a never-full level, the line)
        // and when it was taken.
        let mut held = [(0usize, 0u64, 0u64); 8];
        let mut n = 0;
        let mut last_latency = 0;
        for &id in ids {
            let lvl = &mut self.levels[id];
            let line = pa >> lvl.line_shift;
            let in_flight = lvl.mshr.in_flight(line, t);
            if id as u8 == served {
                let done = t + lvl.latency;
                self.last_unloaded = lvl.latency;
                return match in_flight {
                    // A hit on a line whose fill is still coming: a hit under a miss.
                    Some(d) => {
                        lvl.mshr.counters.merged += 1;
                        self.finish(&held[..n], done.max(d))
                    }
                    None => self.finish(&held[..n], done),
                };
            }
            if let Some(d) = in_flight {
                lvl.mshr.counters.merged += 1;
                let done = d.max(t + lvl.latency);
                self.last_unloaded = lvl.latency;
                return self.finish(&held[..n], done);
            }
            let (slot, start) = if lvl.mshr.never_full {
                (line, t)
            } else {
                let (s, t) = lvl.mshr.allocate(line, t);
                (s as u64, t)
            };
            if n < held.len() {
                held[n] = (id, slot, start);
                n += 1;
            }
            t = start;
            last_latency = lvl.latency;
        }
        debug_assert!(served == MEMORY || ids.is_empty(), "served by a cache off the path");
        // The last level's tag check, then the controller.
        let done = self.dram.access(pa, t + last_latency, false);
        self.last_unloaded = last_latency + self.dram.last_unloaded;
        self.finish(&held[..n], done)
    }

    /// The MSHRs taken on the way hold their lines until `done`.
    #[inline(always)]
    fn finish(&mut self, held: &[(usize, u64, u64)], done: u64) -> u64 {
        for &(id, slot, start) in held {
            let m = &mut self.levels[id].mshr;
            if m.never_full {
                m.complete_never_full(slot, start, done);
            } else {
                m.complete(slot as usize, start, done);
            }
        }
        done
    }

    /// A dirty line the last level wrote back, at `t`.
    pub fn writeback(&mut self, pa: u64, t: u64) {
        self.dram.access(pa, t, true);
    }

    /// The first cache of the data path, if any.
    pub fn paths_data_first(&self) -> Option<usize> {
        self.paths[Path::Data as usize].first().copied()
    }

    /// The latency of a reference along `path` served by `served` (a cache id or
    /// [`MEMORY`]) had it found every MSHR, bank and bus free (a closed DRAM row).
    pub fn unloaded(&self, path: Path, served: u8) -> u64 {
        if served == MEMORY {
            let last = self.paths[path as usize].last().map_or(0, |&id| self.levels[id].latency);
            let t = self.dram.timing();
            last + t.unloaded(t.t_rcd)
        } else {
            self.levels.get(served as usize).map_or(0, |l| l.latency)
        }
    }

    /// The latency of a hit in the first level of `path` (a pipelined load's base).
    pub fn first_latency(&self, path: Path) -> u64 {
        self.paths[path as usize].first().map_or(0, |&id| self.levels[id].latency)
    }

    /// Per cache id, its MSHR counters.
    pub fn mshr_counters(&self) -> Vec<MshrCounters> {
        self.levels.iter().map(|l| l.mshr.counters()).collect()
    }

    /// No reference will be issued before `horizon`: forget what ended by then.
    pub fn prune(&mut self, horizon: u64) {
        self.dram.prune(horizon);
        for l in &mut self.levels {
            l.mshr.counters.active_cycles += l.mshr.active.prune(horizon);
        }
    }

    /// Bytes DRAM transferred so far.
    pub fn dram_bytes(&self) -> u64 {
        (self.dram.counters.reads + self.dram.counters.writes) * BURST_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::dram::DramTiming;

    fn mem(mshrs: u32) -> TimedMemory {
        let dram = Dram::new(DramTiming { channels: 1, banks: 16, row_shift: 13, t_cas: 50, t_rcd: 50, t_rp: 50, t_burst: 4, controller: 20 });
        let paths = crate::mem::Paths { data: &[0, 1], instr: &[], walk: &[0, 1] };
        TimedMemory::new(&[(4, 64, mshrs), (40, 64, 64)], paths, dram)
    }

    #[test]
    fn a_hit_costs_its_level_latency() {
        let mut m = mem(4);
        assert_eq!(m.access(Path::Data, 0x1000, 0, 100), 104);
        assert_eq!(m.access(Path::Data, 0x1000, 1, 100), 140);
    }

    #[test]
    fn misses_to_one_line_merge() {
        let mut m = mem(4);
        let first = m.access(Path::Data, 0x1000, MEMORY, 0);
        // Another word of the line, a cycle later: it waits for the same fill.
        assert_eq!(m.access(Path::Data, 0x1008, MEMORY, 1), first);
        // And a functional hit on it, while the fill is in flight.
        assert_eq!(m.access(Path::Data, 0x1010, 0, 2), first);
        assert_eq!(m.levels[0].mshr.counters.misses, 1);
        assert_eq!(m.levels[0].mshr.counters.merged, 2);
    }

    #[test]
    fn the_line_index_finds_what_was_inserted_and_forgets_what_was_removed() {
        let mut ix = LineIndex::new(8);
        let mut model = std::collections::HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct lines, so probe chains collide and wrap around.
            let line = x % 24;
            if model.len() < 8 && !x.is_multiple_of(3) {
                ix.insert(line, (step % 8) as usize);
                model.insert(line, (step % 8) as usize);
            } else if let Some(&k) = model.keys().next() {
                ix.remove(k);
                model.remove(&k);
            }
            for l in 0..24 {
                assert_eq!(ix.get(l), model.get(&l).copied(), "line {l} at step {step}");
            }
        }
    }

    #[test]
    fn a_miss_takes_the_mshr_that_frees_first() {
        let mut f = MshrFile::new(4);
        let mut x = 7u64;
        for i in 0..5000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = i * 3;
            let earliest = *f.done[..4].iter().min().unwrap();
            let (slot, start) = f.allocate(i, t);
            assert_eq!(start, t.max(earliest));
            f.complete(slot, start, start + 1 + (x >> 54));
        }
    }

    #[test]
    fn misses_issued_out_of_time_order_never_show_more_overlap_than_mshrs() {
        let mut m = mem(4);
        let mut x = 11u64;
        for i in 0..2000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Issue times jump back and forth, as dependent and independent loads do.
            let t = i * 20 + (x >> 55);
            m.access(Path::Data, (x >> 20) << 6, MEMORY, t);
        }
        let c = &m.mshr_counters()[0];
        let mlp = c.busy_cycles as f64 / c.active_cycles as f64;
        assert!(mlp <= 4.0 + 1e-9, "{mlp}");
        assert!(mlp > 1.5, "{mlp}");
    }

    #[test]
    fn a_never_full_level_times_as_its_slots_would() {
        // L1: 4 MSHRs, L2: 64, so the L2 never fills; issued in time order, keeping
        // no slots there gives the same times as the slots do.
        let (mut fast, mut slots) = (mem(4), mem(4));
        assert!(!fast.levels[0].mshr.never_full && fast.levels[1].mshr.never_full);
        slots.levels[1].mshr.never_full = false;
        let mut x = 5u64;
        for i in 0..5000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let pa = ((x >> 24) % (1 << 20)) << 6;
            let served = [0, 1, MEMORY, MEMORY][(x >> 60) as usize & 3];
            assert_eq!(fast.access(Path::Data, pa, served, i * 7), slots.access(Path::Data, pa, served, i * 7), "reference {i}");
        }
        let (a, b) = (&fast.mshr_counters()[1], &slots.mshr_counters()[1]);
        assert_eq!((a.misses, a.busy_cycles, a.active_cycles), (b.misses, b.busy_cycles, b.active_cycles));
        assert_eq!(b.full_cycles, 0);
    }

    #[test]
    fn full_mshrs_serialize_independent_misses() {
        let lat = |mshrs: u32| {
            let mut m = mem(mshrs);
            (0..64u64).map(|i| m.access(Path::Data, i << 13, MEMORY, 0)).max().unwrap()
        };
        let (one, eight) = (lat(1), lat(8));
        // One MSHR: 64 round trips; eight: about an eighth of that.
        assert!(one >= 64 * 150, "{one}");
        assert!(eight * 6 < one && eight * 10 > one, "one {one}, eight {eight}");
    }
}
