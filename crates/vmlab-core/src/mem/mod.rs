//! The memory model: a cache hierarchy with latencies (docs/config.md `[cache.*]`).
//! Page-walk references always go through it; program references do when
//! `memory.data_refs` is set; OS page copies (recolouring) always do. A CML buffer
//! (Romer ch. 5) can snoop the references that reach memory.

pub mod cache;
pub mod cml_buffer;
pub mod column;
mod run;
pub mod thread;
pub mod victim;
pub mod write_buffer;

use cache::Outcome;
pub use cache::{Cache, CacheCounters, RefSource, Served, NO_LINE};
pub use cml_buffer::{CmlBuffer, CmlTuple};
pub use thread::{MemOp, MemoryThread, Timing, WalkTimer};

use crate::error::{Error, Result};
use cache::CacheConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Cycles of an access that misses every cache level.
    pub latency: u32,
    /// Cache level at which page-walk references enter the hierarchy (1 = L1 data cache).
    #[serde(default = "crate::config::one")]
    pub walker_level: u8,
    /// Send data references (not only walk references) through the cache hierarchy.
    #[serde(default)]
    pub data_refs: bool,
}

/// (`Default`: no caches; a placeholder while the hierarchy runs on its thread.)
#[derive(Default)]
pub struct MemoryHierarchy {
    pub caches: Vec<Cache>,
    /// Cache ids on the data path (L1D, L2, ...) and instruction path (L1I, L2, ...),
    /// closest first.
    data_path: Vec<usize>,
    instr_path: Vec<usize>,
    /// Position in `data_path` where walk references enter.
    walker_entry: usize,
    /// Every level from `walker_entry` down serves walk reads through
    /// `Cache::walk_read` (set-associative LRU, no victim cache): a walk reference then
    /// skips `access_path`'s general cases (a third of a G2 run's memory thread).
    walk_reads_plain: bool,
    /// Those levels' cache ids, closest first (`data_path` from `walker_entry`).
    walk_levels: Vec<usize>,
    /// Every level of the data path (`[0]`) or instruction path (`[1]`) serves program
    /// references through `Cache::program_access` (set-associative, write-back, no
    /// victim cache): a program reference then skips `access_path`'s general cases.
    program_refs_plain: [bool; 2],
    /// Per position on the data (`[0]`) and instruction (`[1]`) path: the miss cycles a
    /// program reference that misses there adds to the level (the climb to the next
    /// level's latency, or to memory's from the last), for `program_ref_plain`.
    program_climb: [Vec<u32>; 2],
    memory_latency: u32,
    /// References that missed every level (to DRAM).
    pub memory_accesses: u64,
    /// Dirty lines the last level wrote back to memory.
    pub memory_writes: u64,
    /// The addresses of the last [`WRITES_KEPT`] of them, the n-th at `n % WRITES_KEPT`
    /// (the time model books them at the DRAM).
    pub written: [u64; WRITES_KEPT],
    /// The CML buffer on the memory bus, if a recolouring policy installed one.
    pub cml: Option<CmlBuffer>,
    /// Raise `interrupt` when `memory_accesses` reaches this (a cache-miss counter
    /// interrupt, Romer §4.2.1); u64::MAX = off.
    pub miss_alarm: u64,
    /// An interrupt for the OS is pending (CML threshold or miss alarm).
    pub interrupt: bool,
    /// Program references per cache page (colour), if a recolouring policy's
    /// coldest-ref target selection needs them: (colours, counts).
    pub color_refs: Option<(u64, Vec<u64>)>,
    /// Per cache id, the dirty line the current reference's fill pushed out there
    /// (valid where its [`Spills`] has the bit).
    spilled: [u64; MAX_CACHES],
    /// Where the last reference was served: a cache id, or [`MEMORY`]. The time model
    /// reads it to know which levels' miss resources the reference held.
    pub served: u8,
    /// A data run's events between two levels (mem/run.rs), allocated once.
    run_events: [Vec<cache::RunEvent>; 2],
}

/// `MemoryHierarchy::served` of a reference that missed every level.
pub const MEMORY: u8 = u8::MAX;

/// Memory writes whose addresses the hierarchy keeps (`MemoryHierarchy::written`): one
/// reference causes at most one per level it fills.
pub const WRITES_KEPT: usize = 8;

/// The most levels a path may have, and caches a hierarchy may have (one reference's
/// writebacks are a mask of cache ids).
const MAX_LEVELS: usize = WRITES_KEPT;
const MAX_CACHES: usize = 32;

/// The dirty lines one reference's fills pushed out: bit `id` set where cache `id`
/// pushed out the line at `MemoryHierarchy::spilled[id]`. (A mask on the stack, the
/// addresses in the hierarchy: a reference that pushes out nothing dirty initialises
/// one word.)
#[derive(Clone, Copy, Default)]
struct Spills(u32);

/// The paths of a hierarchy, as the time model sees them (cache ids, closest first).
pub struct Paths<'a> {
    pub data: &'a [usize],
    pub instr: &'a [usize],
    /// The data path from where walk references enter.
    pub walk: &'a [usize],
}

impl MemoryHierarchy {
    /// The caches of `[cache.NAME]` over the memory of `[memory]`; the i-th cache (by
    /// name) replaces at random from `seed + 1000 + i`.
    pub fn new(settings: &BTreeMap<String, CacheConfig>, memory: &MemoryConfig, seed: u64) -> Result<MemoryHierarchy> {
        let mut caches = Vec::new();
        for (i, (name, c)) in settings.iter().enumerate() {
            caches.push(Cache::new(name, c, seed.wrapping_add(1000 + i as u64))?);
        }
        let max_level = caches.iter().map(|c| c.level).max().unwrap_or(0);
        let pick = |instr: bool| -> Result<Vec<usize>> {
            let mut path = Vec::new();
            for level in 1..=max_level {
                let ids: Vec<usize> = (0..caches.len())
                    .filter(|&i| caches[i].level == level)
                    .filter(|&i| if instr { caches[i].serves.serves_instr() } else { caches[i].serves.serves_data() })
                    .collect();
                match ids.len() {
                    0 => {}
                    1 => path.push(ids[0]),
                    _ => return Err(Error::config("cache", format!("two caches serve the same side at level {level}"))),
                }
            }
            Ok(path)
        };
        let data_path = pick(false)?;
        let instr_path = pick(true)?;
        if data_path.len().max(instr_path.len()) > MAX_LEVELS || caches.len() > MAX_CACHES {
            return Err(Error::config("cache", format!("more than {MAX_CACHES} caches, or {MAX_LEVELS} levels on one path")));
        }
        let wl = memory.walker_level;
        let walker_entry = match data_path.iter().position(|&i| caches[i].level >= wl) {
            Some(p) => p,
            None if caches.is_empty() => 0,
            None => return Err(Error::config("memory.walker_level", format!("no data-side cache at level {wl} or below memory"))),
        };
        let walk_levels = data_path[walker_entry.min(data_path.len())..].to_vec();
        let walk_reads_plain = walk_levels.iter().all(|&i| caches[i].serves_walk_reads_plainly());
        let plain = |path: &[usize]| path.iter().all(|&i| caches[i].serves_program_refs_plainly());
        let program_refs_plain = [plain(&data_path), plain(&instr_path)];
        let climb = |path: &[usize]| -> Vec<u32> {
            let below = path.iter().skip(1).map(|&i| caches[i].latency).chain([memory.latency]);
            path.iter().zip(below).map(|(&i, next)| next.saturating_sub(caches[i].latency)).collect()
        };
        let program_climb = [climb(&data_path), climb(&instr_path)];
        Ok(MemoryHierarchy {
            caches,
            data_path,
            instr_path,
            walker_entry,
            walk_reads_plain,
            walk_levels,
            program_refs_plain,
            program_climb,
            memory_latency: memory.latency,
            memory_accesses: 0,
            memory_writes: 0,
            written: [0; WRITES_KEPT],
            spilled: [NO_LINE; MAX_CACHES],
            cml: None,
            miss_alarm: u64::MAX,
            interrupt: false,
            color_refs: None,
            served: MEMORY,
            run_events: [run::event_buffer(), run::event_buffer()],
        })
    }

    /// Send one reference down the path from position `from`; returns its latency in
    /// cycles (including write-buffer stalls). Every level that misses allocates the line
    /// (unless read-allocate and writing). A write-back level that allocates a written
    /// line holds the write (dirty) and reads the line from below. A write at a
    /// write-through level continues to
    /// the levels below: through its write buffer (the core waits only if it is full), or
    /// directly (the core waits for the level below). `now` is the core's cycle, for the
    /// write buffers. Dirty lines the fills push out are written back below.
    #[inline]
    #[allow(clippy::too_many_arguments)] // the per-reference path: plain values, no struct to build
    fn access_path(&mut self, instr: bool, from: usize, va: u64, pa: u64, mut write: bool, src: RefSource, now: u64) -> u32 {
        let len = if instr { self.instr_path.len() } else { self.data_path.len() };
        let mut spills = Spills::default();
        let mut missed: Option<usize> = None;
        for pos in from..len {
            let id = if instr { self.instr_path[pos] } else { self.data_path[pos] };
            if let (Some(k), RefSource::Program) = (missed, src) {
                // The level above missed: its share is the climb to this level.
                let up = self.caches[k].latency;
                self.caches[k].counters.miss_cycles += self.caches[id].latency.saturating_sub(up) as u64;
            }
            let c = &mut self.caches[id];
            let (served, spilled) = c.access(va, pa, write, src);
            Self::note_spill(&mut self.spilled, &mut spills, id, spilled);
            if write && c.write_through {
                let lat = match served {
                    Served::Hit(l) => l,
                    Served::Miss => c.latency,
                };
                if self.caches[id].write_buffer.is_some() {
                    // The core does not wait for the buffered write: not its miss cycles.
                    let below_src = if src == RefSource::Program { RefSource::BufferedWrite } else { src };
                    let below = self.access_path(instr, pos + 1, va, pa, true, below_src, now) as u64;
                    let stall = self.caches[id].write_buffer.as_mut().expect("write buffer").push(now, below);
                    // The core's wait ends at this level (the write goes on from its buffer).
                    self.served = id as u8;
                    self.write_back_all(instr, spills);
                    return lat + stall as u32;
                }
                missed = if matches!(served, Served::Miss) { Some(id) } else { None };
                continue;
            }
            if let Served::Hit(l) = served {
                self.served = id as u8;
                self.write_back_all(instr, spills);
                return l;
            }
            if write {
                // A write-back level that allocated the written line holds the write: it
                // fetches the line from below with a read (for ownership).
                write = !self.caches[id].write_allocate;
            }
            missed = Some(id);
        }
        if let (Some(k), RefSource::Program) = (missed, src) {
            let up = self.caches[k].latency;
            self.caches[k].counters.miss_cycles += self.memory_latency.saturating_sub(up) as u64;
        }
        let latency = self.reach_memory(pa);
        self.write_back_all(instr, spills);
        latency
    }

    /// The fill at cache `id` pushed out `spilled` ([`NO_LINE`]: nothing dirty).
    #[inline(always)]
    fn note_spill(at: &mut [u64; MAX_CACHES], spills: &mut Spills, id: usize, spilled: u64) {
        if spilled != NO_LINE {
            // `new` keeps ids below MAX_CACHES (a power of two): the mask is no change.
            at[id % MAX_CACHES] = spilled;
            spills.0 |= 1 << (id % MAX_CACHES);
        }
    }

    /// Write back the dirty lines one reference's fills pushed out, deepest level first:
    /// fills complete from the bottom up, so a level's victim arrives below after the
    /// level below has taken the demanded line.
    #[inline(always)]
    fn write_back_all(&mut self, instr: bool, spills: Spills) {
        if spills.0 != 0 {
            self.write_back_spills(instr, spills);
        }
    }

    // Out of line, not cold: on write-heavy inputs (GUPS) most misses push a dirty line
    // out, while read-mostly ones never come here.
    #[inline(never)]
    fn write_back_spills(&mut self, instr: bool, spills: Spills) {
        let len = if instr { self.instr_path.len() } else { self.data_path.len() };
        for pos in (0..len).rev() {
            let id = if instr { self.instr_path[pos] } else { self.data_path[pos] };
            if spills.0 & (1 << id) != 0 {
                self.write_back(instr, pos, self.spilled[id]);
            }
        }
    }

    /// The dirty line at `pa`, pushed out of the level at `pos` on the data (or
    /// instruction) path, goes down the path until a level keeps it without pushing out
    /// another dirty line, or to memory.
    fn write_back(&mut self, instr: bool, pos: usize, mut pa: u64) {
        let path = if instr { &self.instr_path } else { &self.data_path };
        for &id in &path[pos + 1..] {
            pa = self.caches[id].write_back(pa);
            if pa == NO_LINE {
                return;
            }
        }
        self.memory_write(pa);
    }

    /// A dirty line written back from the last level reaches memory.
    #[inline(always)]
    fn memory_write(&mut self, pa: u64) {
        self.written[self.memory_writes as usize % WRITES_KEPT] = pa;
        self.memory_writes += 1;
    }

    /// A reference that missed every level reaches memory.
    #[inline(always)]
    fn reach_memory(&mut self, pa: u64) -> u32 {
        self.memory_accesses += 1;
        self.served = MEMORY;
        if let Some(cml) = &mut self.cml {
            cml.observe(pa);
            self.interrupt |= cml.interrupt;
        }
        if self.memory_accesses >= self.miss_alarm {
            self.interrupt = true;
        }
        self.memory_latency
    }

    /// A page-walk reference (a read of a page-table entry, by physical address).
    #[inline(always)]
    pub fn walk_ref(&mut self, pa: u64) -> u32 {
        if self.walk_reads_plain {
            let mut spills = Spills::default();
            let mut latency = None;
            for &id in &self.walk_levels {
                match self.caches[id].walk_read(pa) {
                    Outcome::Hit(l) => {
                        self.served = id as u8;
                        latency = Some(l);
                        break;
                    }
                    Outcome::Miss(spilled) => Self::note_spill(&mut self.spilled, &mut spills, id, spilled),
                }
            }
            let latency = latency.unwrap_or_else(|| self.reach_memory(pa));
            self.write_back_all(false, spills);
            return latency;
        }
        self.access_path(false, self.walker_entry, pa, pa, false, RefSource::Walk, 0)
    }

    /// A refill handler's instruction fetch (mmu/refill.rs): a walk's reference on the
    /// instruction path. Returns what it took beyond a first-level hit (a hit is
    /// pipelined with the handler's instructions).
    #[inline]
    pub fn handler_fetch(&mut self, pa: u64) -> u32 {
        let l = self.access_path(true, 0, pa, pa, false, RefSource::Walk, 0);
        l.saturating_sub(self.instr_path.first().map_or(0, |&id| self.caches[id].latency))
    }

    /// A program's data or instruction reference at cycle `now`.
    #[inline]
    pub fn data_ref(&mut self, va: u64, pa: u64, write: bool, instr: bool, now: u64) -> u32 {
        if let Some((n, refs)) = &mut self.color_refs {
            refs[((pa >> 12) % *n) as usize] += 1;
        }
        if self.program_refs_plain[instr as usize] {
            // Reads (most references) without the write's bookkeeping.
            return if write { self.program_ref_plain::<true>(instr, va, pa) } else { self.program_ref_plain::<false>(instr, va, pa) };
        }
        self.access_path(instr, 0, va, pa, write, RefSource::Program, now)
    }

    /// `access_path` of a program reference down a path whose every level serves it
    /// plainly (`program_refs_plain`): the same changes, counters and latency.
    #[inline(always)]
    fn program_ref_plain<const WRITE: bool>(&mut self, instr: bool, va: u64, pa: u64) -> u32 {
        let mut write = WRITE;
        let path = if instr { &self.instr_path } else { &self.data_path };
        let climb = &self.program_climb[instr as usize];
        let caches = &mut self.caches;
        let mut spills = Spills::default();
        for (&id, &up) in path.iter().zip(climb) {
            match caches[id].program_access(va, pa, write) {
                Outcome::Hit(latency) => {
                    self.served = id as u8;
                    self.write_back_all(instr, spills);
                    return latency;
                }
                Outcome::Miss(spilled) => {
                    // Every miss goes on to the next level: its share is the climb there
                    // (`access_path` adds the same, a level later).
                    caches[id].counters.miss_cycles += up as u64;
                    Self::note_spill(&mut self.spilled, &mut spills, id, spilled)
                }
            }
            if write {
                // The level holds the write if it allocated the line; it reads it from below.
                write = !caches[id].write_allocate;
            }
        }
        let latency = self.reach_memory(pa);
        self.write_back_all(instr, spills);
        latency
    }

    /// The OS copies `bytes` from frame `from` to frame `to` at cycle `now`: a read of
    /// every source line and a write of every destination line, through the data path
    /// (kernel addresses are physical). Returns the cycles the references took.
    pub fn copy(&mut self, from: u64, to: u64, bytes: u64, now: u64) -> u64 {
        let line = self.data_path.first().map_or(64, |&i| self.caches[i].line_bytes());
        let mut cycles = 0u64;
        for off in (0..bytes).step_by(line as usize) {
            cycles += self.access_path(false, 0, from + off, from + off, false, RefSource::Copy, now + cycles) as u64;
            cycles += self.access_path(false, 0, to + off, to + off, true, RefSource::Copy, now + cycles) as u64;
        }
        cycles
    }

    /// Whether the hierarchy can run on a thread of its own (mem/thread.rs): it has
    /// caches, and no reference's latency feeds back into the simulation (no write
    /// buffer, whose stalls depend on the core's clock; no CML buffer or miss alarm
    /// interrupting the OS; no per-colour reference counts for a policy).
    pub fn can_detach(&self) -> bool {
        !self.caches.is_empty()
            && self.caches.iter().all(|c| c.write_buffer.is_none())
            && self.cml.is_none()
            && self.miss_alarm == u64::MAX
            && self.color_refs.is_none()
    }

    /// The data, instruction and walk paths (for the time model).
    pub fn paths(&self) -> Paths<'_> {
        Paths { data: &self.data_path, instr: &self.instr_path, walk: &self.walk_levels }
    }

    /// The level the page colours are taken from: the largest cache on the data path.
    pub fn color_cache(&self) -> Option<&Cache> {
        self.data_path.last().map(|&i| &self.caches[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn romer(overrides: &[&str]) -> MemoryHierarchy {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let c = Config::load("romer-cache", &o).unwrap();
        MemoryHierarchy::new(&c.cache, &c.memory, c.mmu.seed).unwrap()
    }

    /// Two lines 512 KiB apart share a line of the direct-mapped L2 (and of the 8K L1).
    fn ping_pong(m: &mut MemoryHierarchy, rounds: u64) -> u64 {
        let (a, b) = (0x10_0000u64, 0x10_0000 + (512 << 10));
        let mut cycles = 0;
        for _ in 0..rounds {
            cycles += m.data_ref(a, a, false, false, cycles) as u64;
            cycles += m.data_ref(b, b, false, false, cycles) as u64;
        }
        cycles
    }

    #[test]
    fn a_victim_cache_removes_ping_pong_conflict_misses() {
        let mut dm = romer(&[]);
        ping_pong(&mut dm, 1000);
        assert_eq!(dm.memory_accesses, 2000, "direct-mapped: every reference misses");
        let mut vc = romer(&["cache.l2.victim.entries=8", "cache.l2.victim.latency=5"]);
        let cycles = ping_pong(&mut vc, 1000);
        assert_eq!(vc.memory_accesses, 2, "only the two cold misses reach memory");
        let l2 = &vc.caches.iter().find(|c| c.name == "l2").unwrap().counters;
        assert_eq!(l2.victim_hits, 1998);
        // Each reference: L1 miss (5) + victim hit (5); the cold ones: 30.
        assert_eq!(cycles, 1998 * 10 + 2 * 30);
        assert_eq!(l2.miss_cycles, 1998 * 5 + 2 * 25);
    }

    #[test]
    fn two_way_and_column_associative_l2s_also_remove_them() {
        let mut a2 = romer(&["cache.l2.ways=2"]);
        ping_pong(&mut a2, 100);
        assert_eq!(a2.memory_accesses, 2);
        let mut col = romer(&["cache.l2.organisation=\"column-associative\"", "cache.l2.slow_latency=8"]);
        let cycles = ping_pong(&mut col, 100);
        // 512 KiB apart: same home slot in the 16K-line array, so the pair shares b, f(b).
        assert_eq!(col.memory_accesses, 2);
        assert_eq!(cycles, 2 * 30 + 198 * 8, "every later reference is a second-probe hit");
    }

    #[test]
    fn write_through_read_allocate_l1_with_a_write_buffer() {
        let mut m = romer(&[]);
        let l1 = m.data_path[0];
        // A write miss does not allocate in the L1; the write goes to the L2 through the
        // buffer, so the core does not wait for it.
        assert_eq!(m.data_ref(0x2000, 0x2000, true, false, 0), 0);
        assert_eq!(m.caches[l1].counters.misses, 1);
        assert_eq!(m.data_ref(0x2000, 0x2000, false, false, 1), 5, "not allocated: the read misses the L1, hits the L2");
        assert_eq!(m.data_ref(0x2000, 0x2000, true, false, 100), 0, "a write hit");
        // Back-to-back writes that each miss the L2 (30 cycles each) fill the 4 entries.
        let mut stall = 0;
        for i in 0..6u64 {
            stall += m.data_ref(0x100_0000 + i * 4096, 0x100_0000 + i * 4096, true, false, 200) as u64;
        }
        let wb = m.caches[l1].write_buffer.as_ref().unwrap();
        assert!(stall > 0 && wb.full_stalls == 2, "stall {stall}, full {}", wb.full_stalls);
        assert_eq!(m.caches[l1].counters.writebacks, 0, "write-through lines are never dirty");
    }

    #[test]
    fn virtual_indexing_picks_the_set_from_the_virtual_address() {
        // Two physical lines in different L1 sets, mapped at virtual addresses that share
        // a set: a virtually indexed L1 makes them conflict.
        let mut m = romer(&["cache.l1d.write_buffer=0", "cache.l1d.write_policy=\"write-back\""]);
        let l1 = m.data_path[0];
        for _ in 0..10 {
            m.data_ref(0x0000, 0x5000, false, false, 0);
            m.data_ref(0x2000, 0x6040, false, false, 0);
        }
        assert_eq!(m.caches[l1].counters.misses, 20);
        let mut p = romer(&["cache.l1d.indexing=\"physical\"", "cache.l1d.write_buffer=0", "cache.l1d.write_policy=\"write-back\""]);
        for _ in 0..10 {
            p.data_ref(0x0000, 0x5000, false, false, 0);
            p.data_ref(0x2000, 0x6040, false, false, 0);
        }
        assert_eq!(p.caches[l1].counters.misses, 2);
    }

    fn skylake() -> MemoryHierarchy {
        let c = Config::load("skylake", &[]).unwrap();
        MemoryHierarchy::new(&c.cache, &c.memory, c.mmu.seed).unwrap()
    }

    fn counters<'a>(m: &'a MemoryHierarchy, name: &str) -> &'a CacheCounters {
        &m.caches.iter().find(|c| c.name == name).unwrap().counters
    }

    /// Every dirty line a level pushes out arrives at the level below, and the last
    /// level's reach memory: writing 8 MiB (4x the LLC) line by line, each line is
    /// written back to memory once it has fallen out of every level.
    #[test]
    fn dirty_lines_are_written_back_level_by_level_to_memory() {
        let mut m = skylake();
        let lines = (8u64 << 20) / 64;
        for i in 0..lines {
            m.data_ref(i * 64, i * 64, true, false, 0);
        }
        let (l1, l2, llc) = (counters(&m, "l1d"), counters(&m, "l2"), counters(&m, "llc"));
        assert_eq!(l1.writebacks, lines - 512, "every line but the L1's last 512");
        assert_eq!(l2.writeback_accesses, l1.writebacks);
        assert_eq!(l2.writeback_misses, 0, "the L2 still holds what the L1 pushed out");
        assert_eq!(llc.writeback_accesses, l2.writebacks);
        assert_eq!(m.memory_writes, llc.writebacks);
        // The LLC keeps the last 2 MiB of lines, dirty: the rest went to memory.
        assert_eq!(m.memory_writes, lines - (2 << 20) / 64);
        assert_eq!(m.memory_accesses, lines, "writebacks are not demand misses");
        // The latest write-backs' addresses are kept, the newest last.
        let newest = m.written[(m.memory_writes - 1) as usize % WRITES_KEPT];
        assert_eq!(newest, (m.memory_writes - 1) * 64, "lines leave in the order they were written");
    }

    /// A written-back line the level below no longer holds is allocated there, dirty:
    /// reading it again hits that level, and clean lines pushed out write nothing.
    #[test]
    fn a_write_back_the_level_below_dropped_is_allocated_there() {
        let mut m = skylake();
        m.data_ref(0, 0, true, false, 0);
        // Push line 0 out of the L2 (16 ways, 1024 sets: lines 64 KiB apart share its
        // set) with reads that the L1 also holds only 8 of.
        for k in 1..=16u64 {
            m.data_ref(k << 16, k << 16, false, false, 0);
        }
        let l1 = counters(&m, "l1d").clone();
        assert_eq!(l1.writebacks, 1, "line 0 left the L1 dirty; the clean reads wrote nothing back");
        let l2 = counters(&m, "l2");
        assert_eq!((l2.writeback_accesses, l2.writeback_misses), (1, 0), "line 0 reached the L2 while it still held it");
        // Now line 0 is dirty in the L2; sixteen more conflicting reads push it to the LLC.
        for k in 17..=40u64 {
            m.data_ref(k << 16, k << 16, false, false, 0);
        }
        let llc = counters(&m, "llc");
        assert_eq!(llc.writeback_accesses, 1);
        assert_eq!(m.memory_writes, 0, "the LLC keeps it");
        assert_eq!(m.data_ref(0, 0, false, false, 0), 42, "an LLC hit");
    }

    #[test]
    fn a_page_copy_goes_through_the_caches() {
        let mut m = romer(&[]);
        let cycles = m.copy(0x10_0000, 0x20_0000, 4096, 0);
        let l2 = m.caches.iter().find(|c| c.name == "l2").unwrap();
        // 128 line reads (L1 and L2 misses) and 128 line writes (buffered).
        assert_eq!(l2.counters.copy_accesses, 256);
        assert_eq!(l2.counters.copy_misses, 256);
        assert_eq!(l2.counters.miss_cycles, 0, "copies are not program misses");
        assert!(cycles >= 128 * 30);
        // Now the destination is cached: a program read hits the L2.
        assert_eq!(m.data_ref(0x20_0000, 0x20_0000, false, false, cycles), 5);
    }
}
