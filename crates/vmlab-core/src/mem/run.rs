//! A data run (`MemOp::DataRun`: program references at one stride, of one kind) through
//! the cache hierarchy level by level instead of reference by reference.
//!
//! A level's state depends only on the events that reach it, in their order: the
//! references that missed above, and the dirty lines written back from above. No level
//! changes a level above it (no back-invalidation), so the references of a run can
//! pass the L1 together, then the L2, and so on, each level handing the next one its
//! events in the order `access_path` would deliver them: a reference that missed, then
//! the dirty line its fill pushed out, then the lines its write-backs from above pushed
//! out (the deepest level's victim travels first, `write_back_spills`). The caches'
//! state, the counters, the memory accesses and the written-back lines come out exactly
//! as one by one; a pass runs one level's lookup over a chunk of references with the
//! geometry picked once, where one by one picks it per reference and level
//! (docs/performance.md, "Same-page runs").

use super::cache::RunEvent;
use super::thread::run_addresses;
use super::{MemoryHierarchy, MAX_LEVELS, MEMORY};

/// References a chunk takes through the levels: a 4 KiB page's lines, so that a
/// same-page run at stride 64 passes in one chunk. At a level below `k` others, one
/// reference brings at most `k + 1` events (itself and a written-back line from each
/// level above), so a buffer of `CHUNK * (MAX_LEVELS + 1)` never grows.
const CHUNK: usize = 64;

/// An event buffer with room for a chunk at any level.
pub(super) fn event_buffer() -> Vec<RunEvent> {
    Vec::with_capacity(CHUNK * (MAX_LEVELS + 1))
}

impl MemoryHierarchy {
    /// `count` program references from (`va`, `pa`) at `stride` bytes, all writes or all
    /// reads, data or instruction fetches: the same changes, counters and `served` as
    /// `data_ref` of each in turn (with `now` = 0). `reached` gets the physical address
    /// of each reference that missed every level, in order. Returns their cycles summed.
    #[allow(clippy::too_many_arguments)] // a `MemOp::DataRun`'s fields: plain values, no struct to build
    pub fn data_run(&mut self, va: u64, pa: u64, stride: i32, count: u32, write: bool, instr: bool, mut reached: impl FnMut(u64)) -> u64 {
        let mut refs = run_addresses(va, pa, stride, count);
        // Level by level needs the plain path's levels (no write-through, victim cache or
        // column-associative store) and nothing that watches single references.
        let by_level = self.program_refs_plain[instr as usize] && self.color_refs.is_none() && self.cml.is_none() && self.miss_alarm == u64::MAX;
        if !by_level {
            let mut cycles = 0;
            for (va, pa) in refs {
                cycles += self.data_ref(va, pa, write, instr, 0) as u64;
                if self.served == MEMORY {
                    reached(pa);
                }
            }
            return cycles;
        }
        let [mut from, mut to] = std::mem::take(&mut self.run_events);
        let mut cycles = 0;
        loop {
            from.clear();
            from.extend(refs.by_ref().take(CHUNK).map(|(va, pa)| RunEvent { va, pa, write_back: false }));
            if from.is_empty() {
                break;
            }
            cycles += self.run_chunk(instr, write, &mut from, &mut to, &mut reached);
        }
        self.run_events = [from, to];
        cycles
    }

    /// One chunk of a run (its references in `events`) through every level and on to
    /// memory; `spare` is the other buffer. Returns the chunk's cycles.
    #[inline]
    fn run_chunk(&mut self, instr: bool, mut write: bool, events: &mut Vec<RunEvent>, spare: &mut Vec<RunEvent>, reached: &mut impl FnMut(u64)) -> u64 {
        let path = if instr { &self.instr_path } else { &self.data_path };
        let climb = &self.program_climb[instr as usize];
        let mut cycles = 0;
        // Whether the chunk's last reference (the last program reference of every
        // level's events while it goes on missing) has not been served yet.
        let mut last_goes_on = true;
        for (&id, &up) in path.iter().zip(climb) {
            spare.clear();
            let c = &mut self.caches[id];
            let pass = c.run_pass(events, write, spare);
            let missed = pass.references - pass.hits;
            // As `program_ref_plain`: a hit costs the level's latency; a miss adds its
            // climb to the level's miss cycles.
            cycles += pass.hits * c.latency as u64;
            c.counters.miss_cycles += missed * up as u64;
            if last_goes_on && pass.last_hit {
                self.served = id as u8;
                last_goes_on = false;
            }
            if write {
                write = !c.write_allocate;
            }
            std::mem::swap(events, spare);
        }
        if last_goes_on {
            self.served = MEMORY;
        }
        for e in events.iter() {
            if e.write_back {
                self.memory_write(e.pa);
            } else {
                // `reach_memory` (no CML buffer or miss alarm here).
                self.memory_accesses += 1;
                cycles += self.memory_latency as u64;
                reached(e.pa);
            }
        }
        cycles
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::mem::{MemoryHierarchy, MEMORY};
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn hierarchy(preset: &str, overrides: &[&str]) -> MemoryHierarchy {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let c = Config::load(preset, &o).unwrap();
        MemoryHierarchy::new(&c.cache, &c.memory, c.mmu.seed).unwrap()
    }

    /// Everything a reference leaves behind that anyone reads: every level's counters,
    /// the memory counters and the written-back lines.
    fn state(m: &MemoryHierarchy) -> String {
        let levels: Vec<String> = m.caches.iter().map(|c| format!("{}: {:?}", c.name, c.counters)).collect();
        format!("{levels:?} memory {} writes {} written {:?}", m.memory_accesses, m.memory_writes, m.written)
    }

    /// Runs through the levels equal their references one by one: the same cycles,
    /// `served`, references reaching memory (in order), counters and written-back
    /// lines, and the same cache contents after (the next references hit and miss
    /// alike). Random runs (strides within and across lines and sets, forwards and
    /// backwards, reads and writes, data and fetches) over a footprint a few times
    /// the LLC, on hierarchies with 8-, 12- and 16-way fingerprinted levels, plain
    /// 4-way LRU, tree-PLRU, random replacement, a read-allocate level and a virtually
    /// indexed L1; and on one (a write-through L1) that takes them one by one.
    #[test]
    fn a_run_through_the_levels_is_its_references_one_by_one() {
        let cases: [(&str, &[&str]); 6] = [
            ("skylake", &[]),
            ("skylake", &["cache.l2.ways=4", "cache.llc.ways=12", "cache.llc.size=\"1536K\""]),
            ("skylake", &["cache.l1d.replacement=\"plru\"", "cache.l2.replacement=\"random\"", "cache.llc.replacement=\"random\""]),
            ("skylake", &["cache.l1d.write_allocate=false", "cache.l1d.indexing=\"virtual\""]),
            ("skylake", &["cache.l2.ways=32", "cache.l2.size=\"512K\""]),
            ("romer-cache", &[]),
        ];
        for (i, (preset, overrides)) in cases.iter().enumerate() {
            let mut by_level = hierarchy(preset, overrides);
            let mut one_by_one = hierarchy(preset, overrides);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(i as u64);
            let footprint = 16u64 << 20;
            for r in 0..3_000 {
                let stride = *[8i32, 64, 64, 128, -64, 4096, 0, -8, 192].get(rng.gen_range(0..9)).unwrap();
                let count = rng.gen_range(1..100u32);
                let span = stride.unsigned_abs() as u64 * count as u64;
                let start = span + rng.gen_range(0..footprint);
                let (va, pa) = (start + (rng.gen_range(0..4u64) << 40), start);
                let (write, instr) = (rng.gen_range(0..3) == 0, rng.gen_range(0..8) == 0);
                let mut reached = Vec::new();
                let cycles = by_level.data_run(va, pa, stride, count, write, instr, |pa| reached.push(pa));
                let (mut expect, mut expect_reached) = (0, Vec::new());
                for k in 0..count as i64 {
                    let off = (stride as i64 * k) as u64;
                    expect += one_by_one.data_ref(va.wrapping_add(off), pa.wrapping_add(off), write, instr, 0) as u64;
                    if one_by_one.served == MEMORY {
                        expect_reached.push(pa.wrapping_add(off));
                    }
                }
                let at = format!("{preset} {overrides:?}, run {r} ({count} at {stride}, write {write}, fetch {instr})");
                assert_eq!(cycles, expect, "{at}");
                assert_eq!(by_level.served, one_by_one.served, "{at}");
                assert_eq!(reached, expect_reached, "{at}");
                assert_eq!(state(&by_level), state(&one_by_one), "{at}");
            }
            assert!(one_by_one.memory_writes > 0 && one_by_one.memory_accesses > 1000, "the runs reach memory and write back");
        }
    }
}
