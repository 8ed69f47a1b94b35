//! The memory system's time: non-blocking caches (MSHRs per level, merging misses to
//! a line in flight) in front of the DRAM model.
//!
//! The functional hierarchy (`crate::mem`) has already decided where each reference
//! was served; this model only decides *when* it completes. A reference served at
//! level s held an MSHR at every level above s from when it got one until its data
//! came back; a reference to a line whose fill is still in flight at a level waits
//! for that fill instead of starting another (a secondary miss, merged).

use super::dram::{Calendar, Dram, Tail};
use crate::mem::MEMORY;

/// The miss status holding registers of one cache.
///
/// Misses reach the model in the order the core issues them, not in time order (a
/// dependent load issues late, an independent one after it early), so each MSHR is a
/// calendar of the intervals it is held: a miss takes the MSHR with the earliest gap,
/// at or after the time it is ready, long enough for its unloaded latency. Issued in
/// time order, that is the MSHR that frees first; issued out of order, a miss ready
/// early is not queued behind misses reserved for later times (docs/config.md,
/// `[time]`).
pub struct MshrFile {
    /// Per MSHR, when it is held; none at a never-full level.
    slots: Vec<Calendar>,
    /// Per MSHR, its calendar's tail, kept in step with `slots`: a miss searches
    /// every MSHR, and nearly always needs no more of each than its tail.
    tails: Vec<Tail>,
    /// When at least one miss was outstanding (the union of the busy intervals, which
    /// arrive in issue order, not time order).
    active: Calendar,
    /// The level can never run out of MSHRs ([`TimedMemory::new`]): its misses take
    /// none of the slots.
    never_full: bool,
    /// Per hashed line, the last line that missed here and when its fill completes (a
    /// line is forgotten only when another that hashes alike misses after it).
    recent: Box<[(u64, u64); RECENT]>,
    pub counters: MshrCounters,
}

/// Lines a level remembers in flight: more than any level's MSHRs.
const RECENT: usize = 1024;

/// The most MSHRs a level can have.
pub const MAX_MSHRS: u32 = 255;

/// A miss at a never-full level holds no MSHR of its own.
const NO_SLOT: usize = usize::MAX;

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
        MshrFile {
            slots: vec![Calendar::default(); entries as usize],
            tails: vec![Tail::default(); entries as usize],
            active: Calendar::default(),
            never_full: false,
            recent: Box::new([(u64::MAX, 0); RECENT]),
            counters: MshrCounters::default(),
        }
    }

    /// When the fill of `line` in flight at `t` completes, if one is.
    #[inline(always)]
    fn in_flight(&self, line: u64, t: u64) -> Option<u64> {
        let (l, d) = self.recent[Self::recent_slot(line)];
        (l == line && d > t).then_some(d)
    }

    #[inline(always)]
    fn recent_slot(line: u64) -> usize {
        (line.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize & (RECENT - 1)
    }

    /// An MSHR for a miss ready at `t` that takes `need` cycles unloaded: the one free
    /// earliest for that long. Returns it and the time the miss can start.
    #[inline]
    fn allocate(&mut self, t: u64, need: u64) -> (usize, u64) {
        // An MSHR free from `t` on is found without searching the calendars' gaps.
        if let Some(free) = self.tails.iter().position(|c| c.end <= t) {
            return (free, t);
        }
        let mut best = (0, u64::MAX);
        for (i, tail) in self.tails.iter().enumerate() {
            let start = tail.earliest(t, need).unwrap_or_else(|| self.slots[i].earliest(t, need));
            if start < best.1 {
                best = (i, start);
                if start == t {
                    break;
                }
            }
        }
        self.counters.full_cycles += best.1 - t;
        best
    }

    /// A miss of `line` held MSHR `slot` (none at a never-full level) from `start` to
    /// `done`.
    #[inline(always)]
    fn complete(&mut self, line: u64, slot: Option<usize>, start: u64, done: u64) {
        if let Some(s) = slot.filter(|&s| s < self.slots.len()) {
            self.slots[s].occupy(start, done);
            self.tails[s] = self.slots[s].tail();
        }
        self.recent[Self::recent_slot(line)] = (line, done);
        self.counters.misses += 1;
        self.counters.busy_cycles += done - start;
        self.active.occupy(start, done);
    }

    /// Forget what ended by `horizon`.
    fn prune(&mut self, horizon: u64) {
        self.counters.active_cycles += self.active.prune(horizon);
        for (c, tail) in self.slots.iter_mut().zip(&mut self.tails) {
            c.prune(horizon);
            *tail = c.tail();
        }
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
    /// The reference being timed missed here: the MSHR it took (`NO_SLOT` at a
    /// never-full level) and when. (Kept here, not in a buffer the reference fills:
    /// a level is on a path once.)
    taken: (usize, u64),
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
            .map(|&(latency, line, mshrs)| Level {
                latency: latency as u64,
                line_shift: line.trailing_zeros(),
                mshr: MshrFile::new(mshrs),
                taken: (NO_SLOT, 0),
            })
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
        // What a miss holds an MSHR for, unloaded: the serving level's latency, or the
        // last level's and the DRAM's (an estimate for finding a gap; the MSHR is then
        // held until the data is back).
        let need = self.unloaded(path, served);
        let ids = &self.paths[path as usize];
        let mut t = t;
        // The levels that missed: the first `n` of the path.
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
                        self.finish(path, n, pa, done.max(d))
                    }
                    None => self.finish(path, n, pa, done),
                };
            }
            if let Some(d) = in_flight {
                lvl.mshr.counters.merged += 1;
                let done = d.max(t + lvl.latency);
                self.last_unloaded = lvl.latency;
                return self.finish(path, n, pa, done);
            }
            let (slot, start) = if lvl.mshr.never_full { (NO_SLOT, t) } else { lvl.mshr.allocate(t, need) };
            lvl.taken = (slot, start);
            n += 1;
            t = start;
            last_latency = lvl.latency;
        }
        debug_assert!(served == MEMORY || ids.is_empty(), "served by a cache off the path");
        // The last level's tag check, then the controller.
        let done = self.dram.access(pa, t + last_latency, false);
        self.last_unloaded = last_latency + self.dram.last_unloaded;
        self.finish(path, n, pa, done)
    }

    /// The MSHRs the reference to `pa` took at the first `n` levels of `path` hold its
    /// line until `done`.
    #[inline(always)]
    fn finish(&mut self, path: Path, n: usize, pa: u64, done: u64) -> u64 {
        for &id in &self.paths[path as usize][..n] {
            let lvl = &mut self.levels[id];
            let (slot, start) = lvl.taken;
            lvl.mshr.complete(pa >> lvl.line_shift, (slot != NO_SLOT).then_some(slot), start, done);
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
            l.mshr.prune(horizon);
        }
    }

    /// Bytes DRAM transferred so far.
    pub fn dram_bytes(&self) -> u64 {
        (self.dram.counters.reads + self.dram.counters.writes) * self.dram.timing().burst_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::dram::DramTiming;

    fn mem(mshrs: u32) -> TimedMemory {
        let dram = Dram::new(DramTiming { channels: 1, banks: 16, row_shift: 13, t_cas: 50, t_rcd: 50, t_rp: 50, burst_bytes: 64, t_burst: 4, controller: 20 });
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
    fn a_miss_takes_the_mshr_that_frees_first() {
        // Issued in time order, the calendars are the classic model: the MSHR that
        // frees first, and a miss waits for it when all four are held.
        let mut f = MshrFile::new(4);
        let mut ends = [0u64; 4];
        let mut x = 7u64;
        for i in 0..5000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = i * 3;
            let (slot, start) = f.allocate(t, 1);
            let earliest = *ends.iter().min().unwrap();
            assert_eq!(start, t.max(earliest), "miss {i}");
            let done = start + 1 + (x >> 54);
            ends[ends.iter().position(|&e| e == earliest).unwrap()] = done;
            f.complete(i, Some(slot), start, done);
        }
    }

    #[test]
    fn a_miss_ready_early_does_not_queue_behind_one_reserved_later() {
        // One MSHR, held from 1000 by a miss the core issued first (a dependent load):
        // an independent miss issued after it but ready at 0 takes the MSHR before.
        let mut f = MshrFile::new(1);
        let (s, start) = f.allocate(1000, 200);
        f.complete(1, Some(s), start, 1200);
        assert_eq!(f.allocate(0, 200), (0, 0));
        f.complete(2, Some(0), 0, 200);
        // One that would not fit before 1000 waits for the MSHR to free.
        assert_eq!(f.allocate(900, 200).1, 1200);
        assert_eq!(f.counters.full_cycles, 300);
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
