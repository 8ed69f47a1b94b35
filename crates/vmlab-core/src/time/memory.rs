//! The memory system's time: non-blocking caches (MSHRs per level, merging misses to
//! a line in flight) in front of the DRAM model.
//!
//! The functional hierarchy (`crate::mem`) has already decided where each reference
//! was served; this model only decides *when* it completes. A reference served at
//! level s held an MSHR at every level above s from when it got one until its data
//! came back; a reference to a line whose fill is still in flight at a level waits
//! for that fill instead of starting another (a secondary miss, merged).

use super::dram::{Dram, BURST_BYTES};
use crate::mem::MEMORY;

/// The miss status holding registers of one cache: `lines[i]` is in flight until
/// `done[i]`.
pub struct MshrFile {
    lines: Vec<u64>,
    done: Vec<u64>,
    pub counters: MshrCounters,
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
    /// Cycles with at least one miss outstanding (the union of the busy intervals,
    /// taken in issue order).
    pub active_cycles: u64,
    /// The end of the union so far.
    covered: u64,
}

impl MshrFile {
    pub fn new(entries: u32) -> MshrFile {
        MshrFile { lines: vec![u64::MAX; entries as usize], done: vec![0; entries as usize], counters: MshrCounters::default() }
    }

    /// When the fill of `line` in flight at `t` completes, if one is.
    #[inline(always)]
    fn in_flight(&self, line: u64, t: u64) -> Option<u64> {
        let mut found = None;
        for (l, &d) in self.lines.iter().zip(&self.done) {
            if *l == line && d > t {
                found = Some(d);
            }
        }
        found
    }

    /// An MSHR for a miss at `t`: the one that frees first. Returns it and the time the
    /// miss can start.
    #[inline(always)]
    fn allocate(&mut self, line: u64, t: u64) -> (usize, u64) {
        let mut best = 0;
        for (i, &d) in self.done.iter().enumerate() {
            if d < self.done[best] {
                best = i;
            }
        }
        let start = t.max(self.done[best]);
        self.counters.full_cycles += start - t;
        self.counters.misses += 1;
        self.lines[best] = line;
        (best, start)
    }

    #[inline(always)]
    fn complete(&mut self, slot: usize, start: u64, done: u64) {
        self.done[slot] = done;
        let c = &mut self.counters;
        c.busy_cycles += done - start;
        c.active_cycles += done.saturating_sub(start.max(c.covered));
        c.covered = c.covered.max(done);
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
    /// The last data-side level (its dirty evictions are DRAM writes).
    pub last_level: Option<usize>,
    /// The last reference's latency had it found every MSHR, bank and bus free: the
    /// latency of the level that served it (or where it merged), or the last level's
    /// plus the DRAM's unloaded latency.
    pub last_unloaded: u64,
}

impl TimedMemory {
    /// `caches`: per cache id, (latency, line bytes, MSHRs).
    pub fn new(caches: &[(u32, u64, u32)], paths: crate::mem::Paths<'_>, dram: Dram) -> TimedMemory {
        let levels = caches
            .iter()
            .map(|&(latency, line, mshrs)| Level { latency: latency as u64, line_shift: line.trailing_zeros(), mshr: MshrFile::new(mshrs) })
            .collect();
        TimedMemory {
            levels,
            paths: [paths.data.to_vec(), paths.instr.to_vec(), paths.walk.to_vec()],
            dram,
            last_level: paths.data.last().copied(),
            last_unloaded: 0,
        }
    }

    /// A reference issued at `t` along `path`, served (functionally) by cache `served`
    /// or by memory ([`MEMORY`]): when its data is back.
    #[inline]
    pub fn access(&mut self, path: Path, pa: u64, served: u8, t: u64) -> u64 {
        let ids = &self.paths[path as usize];
        let mut t = t;
        // The levels that missed, with their MSHR and when it was taken.
        let mut held = [(0usize, 0usize, 0u64); 8];
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
            let (slot, start) = lvl.mshr.allocate(line, t);
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
    fn finish(&mut self, held: &[(usize, usize, u64)], done: u64) -> u64 {
        for &(id, slot, start) in held {
            self.levels[id].mshr.complete(slot, start, done);
        }
        done
    }

    /// A dirty line written back from the last level at `t`.
    pub fn writeback(&mut self, pa: u64, t: u64) {
        self.dram.access(pa, t, true);
    }

    /// The first cache of the data path, if any.
    pub fn paths_data_first(&self) -> Option<usize> {
        self.paths[Path::Data as usize].first().copied()
    }

    /// The latency of a hit in the first level of `path` (a pipelined load's base).
    pub fn first_latency(&self, path: Path) -> u64 {
        self.paths[path as usize].first().map_or(0, |&id| self.levels[id].latency)
    }

    /// Per cache id, its MSHR counters.
    pub fn mshr_counters(&self) -> Vec<MshrCounters> {
        self.levels.iter().map(|l| l.mshr.counters.clone()).collect()
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
    fn full_mshrs_serialise_independent_misses() {
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
