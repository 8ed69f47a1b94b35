//! One cache level: a tag store (set-associative, or column-associative), an optional
//! victim cache behind it and an optional write buffer below it.
//!
//! The set-associative tag store is specialised rather than an
//! [`AssocCache`](crate::mmu::assoc::AssocCache): caches are the largest structures the
//! engine models (a 2 MiB LLC has 32K lines), they carry no ASIDs and a one-bit payload,
//! and page walks touch them at random. So a set's tags sit contiguously with the dirty
//! bit folded in (a 16-way set is two host cache lines), with LRU replacement a set's
//! recency order is one packed word, and sets of 8 to 16 ways are searched through a
//! byte of fingerprint per line (docs/performance.md).

use super::column::ColumnStore;
use super::victim::{VictimCache, VictimConfig};
use super::write_buffer::WriteBuffer;
use crate::config::{Bytes, Serves};
use crate::error::{Error, Result};
use crate::mmu::assoc::{
    check_geometry, fingerprint, lru_initial_order, lru_to_front, lru_victim, lru_victim_to_front, match_mask_ignoring, plru_touch, plru_victim, Replacement,
    SetIndex,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// 1 = closest to the core. Level 1 may have a "data" and an "instr" cache.
    pub level: u8,
    #[serde(default)]
    pub serves: Serves,
    pub size: Bytes,
    pub ways: usize,
    #[serde(default = "crate::config::line64")]
    pub line: Bytes,
    #[serde(default)]
    pub replacement: Replacement,
    /// Load-to-use cycles of an access that hits at this level.
    pub latency: u32,
    /// "write-back" (dirty lines written when evicted) or "write-through" (every write
    /// also goes to the level below, through the write buffer if there is one).
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub write_policy: WritePolicy,
    /// Allocate a line on a write miss (false: read-allocate only, Romer Table 4-2's L1).
    #[serde(default = "crate::config::yes", skip_serializing_if = "crate::config::is_true")]
    pub write_allocate: bool,
    /// "physical" or "virtual": which address selects the set (tags are always
    /// physical; a virtually indexed cache larger than a page per way can alias).
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub indexing: Indexing,
    /// "set-associative" or "column-associative" (Agarwal & Pudar 1993: a direct-mapped
    /// array probed a second time at the index with its top bit flipped; needs ways = 1).
    #[serde(default, rename = "organisation", skip_serializing_if = "crate::config::is_default")]
    pub organization: Organization,
    /// Column-associative: cycles of a hit on the second probe (default latency + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_latency: Option<u32>,
    /// A victim cache behind this level (Jouppi 1990): a small fully associative LRU
    /// buffer of the lines this level evicts, probed on a miss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim: Option<VictimConfig>,
    /// Entries of a write buffer between a write-through level and the level below:
    /// writes retire from it in the background, the core stalls only when it is full.
    /// 0 = none (the core waits for the level below).
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub write_buffer: usize,
    /// Miss status holding registers: misses this level can have in flight (the time
    /// model only; unset: `crate::time::DEFAULT_MSHRS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mshrs: Option<u32>,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    #[default]
    WriteBack,
    WriteThrough,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Indexing {
    #[default]
    Physical,
    Virtual,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Organization {
    #[default]
    SetAssociative,
    ColumnAssociative,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct CacheCounters {
    /// All accesses that reached this level (program, walk and copy references).
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    /// The subset of accesses made by page walks.
    pub walk_accesses: u64,
    pub walk_misses: u64,
    /// The subset made by OS page copies (recolouring).
    pub copy_accesses: u64,
    pub copy_misses: u64,
    /// Dirty lines evicted (from the level or its victim cache): each is written back to
    /// the level below, or to memory from the last level.
    pub writebacks: u64,
    /// Dirty lines written back into this level by the level above (not in `accesses`:
    /// they are not demand references, and no one waits for them).
    pub writeback_accesses: u64,
    /// The subset that found no copy of the line here and allocated one.
    pub writeback_misses: u64,
    /// Column-associative: hits on the second probe (counted in `hits`).
    pub slow_hits: u64,
    /// Misses of the level that hit in its victim cache (counted in `misses`).
    pub victim_hits: u64,
    /// Program references that missed here: the cycles they spent beyond this level's
    /// latency, up to the next level's (or all of it, past the last level).
    pub miss_cycles: u64,
}

crate::counters_since!(CacheCounters {
    accesses,
    hits,
    misses,
    walk_accesses,
    walk_misses,
    copy_accesses,
    copy_misses,
    writebacks,
    writeback_accesses,
    writeback_misses,
    slow_hits,
    victim_hits,
    miss_cycles,
});

/// Who made a reference (for the per-source counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefSource {
    Program,
    /// A program write retiring from a write buffer (the core did not wait for it).
    BufferedWrite,
    Walk,
    /// The OS copying a page (recolouring).
    Copy,
}

/// An empty way. Real tags are `line << 1 | dirty`; line numbers stay below 2^58, so no
/// real tag matches it.
pub(crate) const INVALID: u64 = u64::MAX;
pub(crate) const DIRTY: u64 = 1;
/// No line: what a level that pushed no dirty line out reports.
pub const NO_LINE: u64 = u64::MAX;

/// Whether an evicted tag (or [`INVALID`]) held a dirty line.
#[inline(always)]
fn is_dirty(evicted: u64) -> bool {
    evicted != INVALID && evicted & DIRTY != 0
}

/// The outcome of one tag-store lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub hit: bool,
    /// Column-associative second-probe hit.
    pub slow: bool,
    /// The tag (`line << 1 | dirty`) the allocation pushed out, or INVALID.
    pub evicted: u64,
}

impl Probe {
    #[inline]
    pub(crate) fn hit() -> Probe {
        Probe { hit: true, slow: false, evicted: INVALID }
    }
    #[inline]
    pub(crate) fn miss(evicted: u64) -> Probe {
        Probe { hit: false, slow: false, evicted }
    }
}

#[derive(Clone, Debug)]
#[repr(u8)]
enum Order {
    /// Up to 16 ways: per set, the ways in recency order packed as 4-bit nibbles
    /// (`mmu::assoc`'s packed order; nibble 0 = most recent, never-filled ways last),
    /// so a hit updates one word instead of moving the tags in front of it. More ways:
    /// `recency` is empty and the set's tags themselves are kept in recency order.
    Lru {
        recency: Vec<u64>,
    },
    /// One bit-tree per set; ways keep their position.
    Plru {
        bits: Vec<u64>,
    },
    Random {
        rng: Xoshiro256PlusPlus,
    },
}

/// The tags of every set, `ways` consecutive entries per set.
#[derive(Clone, Debug)]
struct LineStore {
    tags: Vec<u64>,
    /// Packed LRU of 8, 12 or 16 ways: per set, a one-byte fingerprint of each way's
    /// line (`mmu::assoc::fingerprint`; of an empty way, anything), 16 bytes a set so
    /// they load at once. A lookup compares them in one SSE2 instruction and reads only
    /// the tags whose fingerprint matches, where comparing 16 tags takes eight.
    /// Empty otherwise.
    fps: Vec<[u8; 16]>,
    /// The ways when `fps` is in use (8, 12 or 16), else 0: one test picks the lookup.
    fp_ways: u8,
    ways: usize,
    set_index: SetIndex,
    order: Order,
}

impl LineStore {
    fn new(lines: usize, ways: usize, repl: Replacement, seed: u64, key_path: &str) -> Result<LineStore> {
        if lines == 0 {
            return Err(Error::config(format!("{key_path}.size"), "holds no line"));
        }
        let (ways, sets) = check_geometry(lines, ways, repl, key_path)?;
        let order = match repl {
            Replacement::Lru => Order::Lru { recency: if ways <= 16 { vec![lru_initial_order(ways); sets] } else { Vec::new() } },
            Replacement::Plru => Order::Plru { bits: vec![0; sets] },
            Replacement::Random => Order::Random { rng: Xoshiro256PlusPlus::seed_from_u64(seed) },
        };
        let fp_ways = if repl == Replacement::Lru && matches!(ways, 8 | 12 | 16) { ways as u8 } else { 0 };
        let fps = if fp_ways > 0 { vec![[fingerprint(INVALID); 16]; sets] } else { Vec::new() };
        Ok(LineStore { tags: vec![INVALID; lines], fps, fp_ways, ways, set_index: SetIndex::new(sets), order })
    }

    #[inline]
    fn set_of(&self, idx_line: u64) -> usize {
        self.set_index.of(idx_line)
    }

    /// Look up `line` in the set of `idx_line`; on a miss allocate it if `allocate`.
    #[inline(always)]
    fn access(&mut self, idx_line: u64, line: u64, write: bool, allocate: bool) -> Probe {
        match self.fp_ways {
            8 => return self.access_lru_fp::<8>(idx_line, line, write, allocate),
            12 => return self.access_lru_fp::<12>(idx_line, line, write, allocate),
            16 => return self.access_lru_fp::<16>(idx_line, line, write, allocate),
            _ => {}
        }
        let set = self.set_of(idx_line);
        if let Order::Lru { recency } = &mut self.order {
            if self.ways <= 16 {
                let base = set * self.ways;
                let want = line << 1;
                let tags = &mut self.tags[base..base + self.ways];
                // The common narrow geometries' tag match unrolled (docs/performance.md).
                let hits = match self.ways {
                    1 => match_mask_ignoring::<1>(tags, want, DIRTY),
                    2 => match_mask_ignoring::<2>(tags, want, DIRTY),
                    4 => match_mask_ignoring::<4>(tags, want, DIRTY),
                    _ => crate::host::match_mask(tags, want, DIRTY),
                };
                return lru_packed_access(tags, &mut recency[set], hits, want, write, allocate).0;
            }
        }
        let ways = self.ways;
        let tags = &mut self.tags[set * ways..set * ways + ways];
        let want = line << 1;
        // Tags are unique in a set: the lowest match is the one.
        let hit_way = if ways <= 64 {
            match crate::host::match_mask(tags, want, DIRTY) {
                0 => usize::MAX,
                m => m.trailing_zeros() as usize,
            }
        } else {
            tags.iter().position(|&t| t | DIRTY == want | DIRTY).unwrap_or(usize::MAX)
        };
        if hit_way == usize::MAX && !allocate {
            return Probe::miss(INVALID);
        }
        let dirty = if write { DIRTY } else { 0 };
        match &mut self.order {
            Order::Lru { .. } => {
                // More than 16 ways: the tags are kept in recency order.
                if hit_way != usize::MAX {
                    let t = tags[hit_way] | dirty;
                    tags.copy_within(0..hit_way, 1);
                    tags[0] = t;
                    Probe::hit()
                } else {
                    let victim = tags[ways - 1];
                    tags.copy_within(0..ways - 1, 1);
                    tags[0] = want | dirty;
                    Probe::miss(victim)
                }
            }
            Order::Plru { bits } => {
                let w = if hit_way != usize::MAX {
                    tags[hit_way] |= dirty;
                    hit_way
                } else {
                    tags.iter().position(|&t| t == INVALID).unwrap_or_else(|| plru_victim(bits[set], ways))
                };
                bits[set] = plru_touch(bits[set], w, ways);
                self.fill_at(set, w, hit_way, want | dirty)
            }
            Order::Random { rng } => {
                let w = if hit_way != usize::MAX {
                    tags[hit_way] |= dirty;
                    hit_way
                } else {
                    tags.iter().position(|&t| t == INVALID).unwrap_or_else(|| rng.gen_range(0..ways))
                };
                self.fill_at(set, w, hit_way, want | dirty)
            }
        }
    }

    /// `access` of an LRU store of `W` ways with fingerprints (`fps` non-empty: W is 8,
    /// 12 or 16), with the geometry a compile-time constant: no per-lookup geometry
    /// checks, masks or shifts by a variable (a third of a page walk's read went to
    /// them, docs/performance.md).
    #[inline(always)]
    fn access_lru_fp<const W: usize>(&mut self, idx_line: u64, line: u64, write: bool, allocate: bool) -> Probe {
        debug_assert!(self.ways == W && !self.fps.is_empty());
        let set = self.set_of(idx_line);
        let Order::Lru { recency } = &mut self.order else { unreachable!("fingerprints only with LRU") };
        let fp = fingerprint(line);
        let want = line << 1;
        let fps = &mut self.fps[set];
        // (A range, not `as_chunks_mut`: that divides the length by W on every lookup.)
        let tags = &mut self.tags[set * W..set * W + W];
        let mut candidates = crate::host::byte_match_mask(fps, fp) & ((1u64 << W) - 1);
        // Tags are unique in a set: the first candidate that matches is the one.
        let mut hits = 0;
        while candidates != 0 {
            let w = candidates.trailing_zeros() as usize;
            if tags[w] | DIRTY == want | DIRTY {
                hits = 1 << w;
                break;
            }
            candidates &= candidates - 1;
        }
        let (probe, filled) = lru_packed_access(tags, &mut recency[set], hits, want, write, allocate);
        if filled != usize::MAX {
            fps[filled] = fp;
        }
        probe
    }

    /// For the position-keeping policies: on a miss, put `tag` in way `w`.
    #[inline]
    fn fill_at(&mut self, set: usize, w: usize, hit_way: usize, tag: u64) -> Probe {
        if hit_way != usize::MAX {
            return Probe::hit();
        }
        let slot = &mut self.tags[set * self.ways + w];
        let victim = *slot;
        *slot = tag;
        Probe::miss(victim)
    }
}

/// LRU access to a set of up to 16 ways whose recency is the packed `order`; `hits`
/// has bit w set where way w holds the line (`want` = its tag). Never-filled ways sit
/// at the least-recent end, so a miss fills them first. Returns the probe, and the
/// way a miss filled (usize::MAX if none).
#[inline(always)]
fn lru_packed_access(tags: &mut [u64], order: &mut u64, hits: u64, want: u64, write: bool, allocate: bool) -> (Probe, usize) {
    let ways = tags.len();
    let dirty = if write { DIRTY } else { 0 };
    if hits != 0 {
        let w = hits.trailing_zeros() as usize;
        tags[w] |= dirty;
        // Most program hits are on the most recent line (a stream reads a line 8 times).
        if *order & 0xf != w as u64 {
            *order = lru_to_front(*order, w as u64, ways);
        }
        return (Probe::hit(), usize::MAX);
    }
    if !allocate {
        return (Probe::miss(INVALID), usize::MAX);
    }
    let w = lru_victim(*order, ways);
    let victim = tags[w];
    tags[w] = want | dirty;
    *order = lru_victim_to_front(*order, w, ways);
    (Probe::miss(victim), w)
}

#[derive(Clone, Debug)]
enum TagStore {
    SetAssociative(LineStore),
    ColumnAssociative(ColumnStore),
}

impl TagStore {
    #[inline(always)]
    fn access(&mut self, idx: u64, line: u64, dirty: bool, allocate: bool) -> Probe {
        match self {
            TagStore::SetAssociative(s) => s.access(idx, line, dirty, allocate),
            TagStore::ColumnAssociative(s) => s.access(idx, line, dirty, allocate),
        }
    }
}

/// What one access at a level did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// Hit at the level (or its victim cache) after this many cycles.
    Hit(u32),
    Miss,
}

/// What a plain lookup (`program_access`, `walk_read`) did: a hit's latency, or a miss
/// with the address of the dirty line its fill pushed out ([`NO_LINE`] if none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Hit(u32),
    Miss(u64),
}

/// One event of a data run at a cache level (mem/run.rs): a program reference, or a
/// dirty line written back from the level above (`write_back`; its `va` unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunEvent {
    pub va: u64,
    pub pa: u64,
    pub write_back: bool,
}

/// What one level's [`Cache::run_pass`] did, for the run's latency and `served`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RunPass {
    /// Program references that reached the level, and those that hit.
    pub references: u64,
    pub hits: u64,
    /// Whether the last program reference that reached the level hit.
    pub last_hit: bool,
    write_backs: u64,
    write_back_misses: u64,
    /// Dirty lines pushed out.
    spilled: u64,
}

pub struct Cache {
    pub name: String,
    pub level: u8,
    pub serves: Serves,
    pub latency: u32,
    /// Column-associative second-probe latency.
    pub slow_latency: u32,
    pub write_through: bool,
    pub write_allocate: bool,
    pub virtually_indexed: bool,
    line_shift: u32,
    store: TagStore,
    /// Private: `MemoryHierarchy::walk_reads_plain` is derived from it once.
    victim: Option<VictimCache>,
    pub write_buffer: Option<WriteBuffer>,
    pub counters: CacheCounters,
}

impl Cache {
    pub fn new(name: &str, c: &CacheConfig, seed: u64) -> Result<Cache> {
        let lines = (c.size.0 / c.line.0) as usize;
        let key = format!("cache.{name}");
        let store = match c.organization {
            Organization::SetAssociative => TagStore::SetAssociative(LineStore::new(lines, c.ways, c.replacement, seed, &key)?),
            Organization::ColumnAssociative => {
                if lines < 2 || c.ways != 1 {
                    return Err(Error::config(format!("{key}.organisation"), "a column-associative cache needs ways = 1 and at least 2 lines"));
                }
                TagStore::ColumnAssociative(ColumnStore::new(lines))
            }
        };
        Ok(Cache {
            name: name.to_string(),
            level: c.level,
            serves: c.serves,
            latency: c.latency,
            slow_latency: c.slow_latency.unwrap_or(c.latency + 1),
            write_through: c.write_policy == WritePolicy::WriteThrough,
            write_allocate: c.write_allocate,
            virtually_indexed: c.indexing == Indexing::Virtual,
            line_shift: c.line.0.trailing_zeros(),
            store,
            victim: c.victim.as_ref().map(|v| VictimCache::new(v.entries, v.latency)),
            write_buffer: (c.write_buffer > 0).then(|| WriteBuffer::new(c.write_buffer)),
            counters: CacheCounters::default(),
        })
    }

    pub fn line_bytes(&self) -> u64 {
        1 << self.line_shift
    }

    /// Whether `walk_read` serves this level: a set-associative LRU tag store with no
    /// victim cache (a page walk's read then needs none of `access`'s other cases).
    pub(crate) fn serves_walk_reads_plainly(&self) -> bool {
        matches!(&self.store, TagStore::SetAssociative(s) if matches!(s.order, Order::Lru { .. })) && self.victim.is_none()
    }

    /// Whether `program_access` serves this level: a set-associative write-back tag
    /// store with no victim cache (a program reference then needs none of `access`'s
    /// other cases: no write goes through to the level below, nothing comes back from a
    /// victim cache).
    pub(crate) fn serves_program_refs_plainly(&self) -> bool {
        matches!(&self.store, TagStore::SetAssociative(_)) && self.victim.is_none() && !self.write_through
    }

    /// `access` for a program's reference at a level that `serves_program_refs_plainly`:
    /// the same tag-store change and counters.
    #[inline(always)]
    pub(crate) fn program_access(&mut self, va: u64, pa: u64, write: bool) -> Outcome {
        let line = pa >> self.line_shift;
        let idx = if self.virtually_indexed { va >> self.line_shift } else { line };
        let allocate = !write || self.write_allocate;
        let TagStore::SetAssociative(s) = &mut self.store else { unreachable!("program_access on a column-associative level") };
        // Write-back: a write dirties the line.
        let p = s.access(idx, line, write, allocate);
        let c = &mut self.counters;
        c.accesses += 1;
        if p.hit {
            c.hits += 1;
            return Outcome::Hit(self.latency);
        }
        c.misses += 1;
        Outcome::Miss(self.spilled(p.evicted))
    }

    /// A data run's events at this level, in order (mem/run.rs), at a level that
    /// `serves_program_refs_plainly`: each program reference as `program_access` takes
    /// it (`write`: whether it writes here), each written-back line as `write_back`
    /// does, with the same tag-store changes and counters. `out` gets, in order, what
    /// goes on to the level below: a reference that missed, then the dirty line its
    /// fill pushed out; a dirty line a write-back pushed out. The geometry's lookup is
    /// picked once for the whole pass.
    #[inline]
    pub(crate) fn run_pass(&mut self, input: &[RunEvent], write: bool, out: &mut Vec<RunEvent>) -> RunPass {
        let TagStore::SetAssociative(s) = &mut self.store else { unreachable!("run_pass on a column-associative level") };
        let pass = match s.fp_ways {
            8 => self.run_pass_with::<8>(input, write, out),
            12 => self.run_pass_with::<12>(input, write, out),
            16 => self.run_pass_with::<16>(input, write, out),
            _ => self.run_pass_with::<0>(input, write, out),
        };
        let c = &mut self.counters;
        c.accesses += pass.references;
        c.hits += pass.hits;
        c.misses += pass.references - pass.hits;
        c.writeback_accesses += pass.write_backs;
        c.writeback_misses += pass.write_back_misses;
        c.writebacks += pass.spilled;
        pass
    }

    /// `run_pass` with the store's lookup `access_lru_fp::<W>` (W = 0: `access`).
    #[inline(always)]
    fn run_pass_with<const W: usize>(&mut self, input: &[RunEvent], write: bool, out: &mut Vec<RunEvent>) -> RunPass {
        #[inline(always)]
        fn lookup<const W: usize>(s: &mut LineStore, idx: u64, line: u64, write: bool, allocate: bool) -> Probe {
            if W == 0 {
                s.access(idx, line, write, allocate)
            } else {
                s.access_lru_fp::<W>(idx, line, write, allocate)
            }
        }
        let TagStore::SetAssociative(s) = &mut self.store else { unreachable!("run_pass on a column-associative level") };
        let (shift, virtually_indexed) = (self.line_shift, self.virtually_indexed);
        let allocate = !write || self.write_allocate;
        let mut pass = RunPass::default();
        for &e in input {
            let line = e.pa >> shift;
            let p = if e.write_back {
                // `write_back`: dirty here, allocated if absent.
                let p = lookup::<W>(s, line, line, true, true);
                pass.write_backs += 1;
                pass.write_back_misses += !p.hit as u64;
                p
            } else {
                let idx = if virtually_indexed { e.va >> shift } else { line };
                let p = lookup::<W>(s, idx, line, write, allocate);
                pass.references += 1;
                pass.last_hit = p.hit;
                if p.hit {
                    pass.hits += 1;
                    continue;
                }
                out.push(e);
                p
            };
            if is_dirty(p.evicted) {
                pass.spilled += 1;
                out.push(RunEvent { va: 0, pa: (p.evicted >> 1) << shift, write_back: true });
            }
        }
        pass
    }

    /// The address of the line an allocation pushed out (tag `evicted`) if it was dirty,
    /// counted as a writeback; [`NO_LINE`] otherwise.
    #[inline(always)]
    fn spilled(&mut self, evicted: u64) -> u64 {
        if is_dirty(evicted) {
            self.counters.writebacks += 1;
            (evicted >> 1) << self.line_shift
        } else {
            NO_LINE
        }
    }

    /// `access` for a page walk's read of physical address `pa` at a level that
    /// `serves_walk_reads_plainly`: the same tag-store change and counters, without the
    /// cases a walk read never meets (writes, victim caches, virtual indexing of a
    /// physical address).
    #[inline(always)]
    pub(crate) fn walk_read(&mut self, pa: u64) -> Outcome {
        let line = pa >> self.line_shift;
        let TagStore::SetAssociative(s) = &mut self.store else { unreachable!("walk_read on a column-associative level") };
        let p = s.access(line, line, false, true);
        let (hit, evicted) = (p.hit, p.evicted);
        let c = &mut self.counters;
        c.accesses += 1;
        c.walk_accesses += 1;
        if hit {
            c.hits += 1;
            return Outcome::Hit(self.latency);
        }
        c.misses += 1;
        c.walk_misses += 1;
        Outcome::Miss(self.spilled(evicted))
    }

    /// The tag store's (and victim cache's) change for a reference to `line` in the set
    /// of `idx`: the probe, whether a miss was found in the victim cache, and the
    /// address of a dirty line that left the level ([`NO_LINE`] if none), counted.
    #[inline]
    fn lookup(&mut self, idx: u64, line: u64, dirty: bool, allocate: bool) -> (Probe, bool, u64) {
        let Some(v) = &mut self.victim else {
            let p = self.store.access(idx, line, dirty, allocate);
            let spilled = self.spilled(p.evicted);
            return (p, false, spilled);
        };
        // Probe without allocating; a miss then consults the victim cache.
        let first = self.store.access(idx, line, dirty, false);
        if first.hit || !allocate {
            return (first, false, NO_LINE);
        }
        let recovered = v.take(line);
        let p = self.store.access(idx, line, dirty || recovered == Some(true), true);
        // The line pushed out moves to the victim cache; what that pushes out leaves.
        let out = if p.evicted != INVALID { v.insert(p.evicted) } else { None };
        let spilled = self.spilled(out.unwrap_or(INVALID));
        (p, recovered.is_some(), spilled)
    }

    /// Look up the line of `pa` (set chosen by `va` if virtually indexed). Misses
    /// allocate, except writes to a read-allocate level; a write-through level keeps
    /// its lines clean. Returns where the reference was served, and the address of a
    /// dirty line it pushed out of the level ([`NO_LINE`] if none), which the caller
    /// writes back to the level below.
    #[inline]
    pub fn access(&mut self, va: u64, pa: u64, write: bool, src: RefSource) -> (Served, u64) {
        let line = pa >> self.line_shift;
        let idx = if self.virtually_indexed { va >> self.line_shift } else { line };
        let allocate = !write || self.write_allocate;
        let dirty = write && !self.write_through;
        let (p, victim_hit, spilled) = self.lookup(idx, line, dirty, allocate);
        let c = &mut self.counters;
        c.accesses += 1;
        match src {
            RefSource::Program | RefSource::BufferedWrite => {}
            RefSource::Walk => c.walk_accesses += 1,
            RefSource::Copy => c.copy_accesses += 1,
        }
        if p.hit {
            c.hits += 1;
            c.slow_hits += p.slow as u64;
            return (Served::Hit(if p.slow { self.slow_latency } else { self.latency }), spilled);
        }
        c.misses += 1;
        match src {
            RefSource::Program | RefSource::BufferedWrite => {}
            RefSource::Walk => c.walk_misses += 1,
            RefSource::Copy => c.copy_misses += 1,
        }
        if victim_hit {
            c.victim_hits += 1;
            let v = self.victim.as_ref().expect("victim cache").latency;
            if src == RefSource::Program {
                c.miss_cycles += v as u64;
            }
            return (Served::Hit(self.latency + v), spilled);
        }
        (Served::Miss, spilled)
    }

    /// A dirty line (at `pa`) written back into this level by the level above: it
    /// becomes dirty here (allocated if absent, as the most recent line of its set, with
    /// no fetch: the whole line arrives). Returns the address of the line that goes on
    /// to the level below ([`NO_LINE`] if none): a dirty line the allocation pushed
    /// out, or at a write-through level the written-back line itself. Evicted lines
    /// carry no virtual address, so a virtually indexed level files them by physical
    /// address.
    pub fn write_back(&mut self, pa: u64) -> u64 {
        self.counters.writeback_accesses += 1;
        let line = pa >> self.line_shift;
        if self.write_through {
            // Kept clean here: the write goes on below (a copy here, if any, is updated).
            let p = self.store.access(line, line, false, false);
            self.counters.writeback_misses += !p.hit as u64;
            return pa;
        }
        let (p, victim_hit, spilled) = self.lookup(line, line, true, true);
        self.counters.writeback_misses += (!p.hit && !victim_hit) as u64;
        spilled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::assoc::AssocCache;

    /// A served reference as the shortcuts answer it (at a level with no victim cache,
    /// only a miss pushes a line out).
    fn outcome((s, spilled): (Served, u64)) -> Outcome {
        match s {
            Served::Hit(l) => Outcome::Hit(l),
            Served::Miss => Outcome::Miss(spilled),
        }
    }

    /// The general set-associative store as a cache level: (hit, a dirty line evicted),
    /// with the value the line's dirty bit.
    fn reference_access(reference: &mut AssocCache<bool>, set: usize, line: u64, write: bool) -> (bool, bool) {
        match reference.lookup(set, line, 0) {
            Some(d) => {
                if write && !d {
                    reference.insert(set, line, 0, true);
                }
                (true, false)
            }
            None => (false, reference.fill_absent(set, line, 0, write).is_some_and(|e| e.val)),
        }
    }

    /// The line store agrees with the general set-associative store (the reference:
    /// it has its own tests against explicit LRU lists and PLRU trees) on hits and on
    /// dirty evictions, for every replacement policy and several geometries.
    #[test]
    fn agrees_with_the_general_tag_store() {
        for repl in [Replacement::Lru, Replacement::Plru, Replacement::Random] {
            for (lines, ways) in [(64usize, 4usize), (64, 16), (48, 12), (8, 1), (16, 16), (32, 2), (64, 8), (60, 6), (45, 15), (64, 32), (40, 20)] {
                if repl == Replacement::Plru && !ways.is_power_of_two() {
                    continue;
                }
                let mut fast = LineStore::new(lines, ways, repl, 9, "t").unwrap();
                let mut reference: AssocCache<bool> = AssocCache::new(lines, ways, repl, 9, "t").unwrap();
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(lines as u64 * 31 + ways as u64);
                for i in 0..20_000 {
                    let line = rng.gen_range(0..(lines as u64 * 3));
                    let write = rng.gen_range(0..4) == 0;
                    let set = reference.set_of(line);
                    let expect = reference_access(&mut reference, set, line, write);
                    let p = fast.access(line, line, write, true);
                    assert_eq!((p.hit, p.evicted != INVALID && p.evicted & DIRTY != 0), expect, "{repl:?} {lines}/{ways} access {i}");
                }
            }
        }
    }

    /// Lines whose fingerprints collide in one set: a lookup must check every candidate
    /// way's tag, and a fill must leave the other ways' fingerprints alone.
    #[test]
    fn colliding_fingerprints_agree_with_the_general_tag_store() {
        for ways in [8usize, 12, 16] {
            let (lines, sets) = (ways * 4, 4u64);
            let fp = fingerprint(0);
            // Lines of set 0: half share line 0's fingerprint, half are arbitrary.
            let same: Vec<u64> = (0..).map(|k| k * sets).filter(|&l| fingerprint(l) == fp).take(2 * ways).collect();
            let pool: Vec<u64> = same.iter().copied().chain((1..=2 * ways as u64).map(|k| k * sets * 7919)).collect();
            let mut fast = LineStore::new(lines, ways, Replacement::Lru, 9, "t").unwrap();
            assert!(!fast.fps.is_empty(), "{ways} ways use fingerprints");
            let mut reference: AssocCache<bool> = AssocCache::new(lines, ways, Replacement::Lru, 9, "t").unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(ways as u64);
            let mut hits = 0;
            for i in 0..20_000 {
                let line = pool[rng.gen_range(0..pool.len())];
                let write = rng.gen_range(0..4) == 0;
                let set = reference.set_of(line);
                assert_eq!(set, 0);
                let expect = reference_access(&mut reference, set, line, write);
                let p = fast.access(line, line, write, true);
                hits += p.hit as u32;
                assert_eq!((p.hit, p.evicted != INVALID && p.evicted & DIRTY != 0), expect, "{ways} ways, access {i}");
            }
            assert!(hits > 1000 && hits < 19_000, "{ways} ways: {hits} hits, a mix of hits and misses");
        }
    }

    /// Two identical caches from `text` (a shortcut's, and the general path's to hold it
    /// to).
    fn twin_caches(name: &str, text: &str) -> (Cache, Cache) {
        let cfg: CacheConfig = toml::from_str(text).unwrap();
        (Cache::new(name, &cfg, 1).unwrap(), Cache::new(name, &cfg, 1).unwrap())
    }

    /// `walk_read`, the walk references' shortcut, changes the tag store and the
    /// counters exactly as `access` does for a walk read, and reports the same hits,
    /// on random walk reads mixed with program writes (which leave dirty lines for
    /// the walk reads to evict).
    #[test]
    fn walk_read_is_access_for_a_walk_read() {
        for ways in [1usize, 4, 8, 12, 16, 6, 32] {
            let (mut fast, mut general) = twin_caches("l2", &format!("level = 2\nsize = \"{}K\"\nways = {ways}\nlatency = 9", ways * 4));
            assert!(fast.serves_walk_reads_plainly());
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(ways as u64);
            for i in 0..20_000 {
                let pa = rng.gen_range(0..(ways as u64 * 64 * 3)) * 64 + rng.gen_range(0..64);
                if rng.gen_range(0..4) == 0 {
                    assert_eq!(fast.access(pa, pa, true, RefSource::Program), general.access(pa, pa, true, RefSource::Program));
                    continue;
                }
                let expect = outcome(general.access(pa, pa, false, RefSource::Walk));
                assert_eq!(fast.walk_read(pa), expect, "{ways} ways, read {i}");
            }
            assert_eq!(fast.counters, general.counters, "{ways} ways");
            assert!(fast.counters.writebacks > 0 && fast.counters.walk_misses > 0, "{ways} ways: the traffic exercises evictions");
        }
    }

    /// `program_access`, the program references' shortcut, changes the tag store and
    /// the counters exactly as `access` does, and reports the same hits, on random reads
    /// and writes mixed with walk reads, for every replacement policy, virtual and
    /// physical indexing, and write-allocate or not.
    #[test]
    fn program_access_is_access_for_a_program_reference() {
        for repl in ["lru", "plru", "random"] {
            for ways in [1usize, 2, 4, 8, 12, 16, 32] {
                if repl == "plru" && !ways.is_power_of_two() {
                    continue;
                }
                for (indexing, allocate) in [("physical", true), ("virtual", false)] {
                    // 256 sets: bits 12 and 13 of an address pick its set too, so virtual
                    // indexing (of `va`, which differs from `pa` there) matters.
                    let text = format!("level = 1\nsize = \"{}K\"\nways = {ways}\nlatency = 4\nreplacement = \"{repl}\"\nindexing = \"{indexing}\"\nwrite_allocate = {allocate}", ways * 16);
                    let (mut fast, mut general) = twin_caches("l1d", &text);
                    assert!(fast.serves_program_refs_plainly());
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(ways as u64);
                    for i in 0..20_000 {
                        let pa = rng.gen_range(0..(ways as u64 * 256 * 3)) * 64 + rng.gen_range(0..64);
                        let va = pa ^ (rng.gen_range(0..4u64) << 12);
                        if rng.gen_range(0..5) == 0 {
                            assert_eq!(fast.access(pa, pa, false, RefSource::Walk), general.access(pa, pa, false, RefSource::Walk));
                            continue;
                        }
                        let write = rng.gen_range(0..3) == 0;
                        let expect = outcome(general.access(va, pa, write, RefSource::Program));
                        assert_eq!(fast.program_access(va, pa, write), expect, "{repl} {ways} ways {indexing}, reference {i}");
                    }
                    assert_eq!(fast.counters, general.counters, "{repl} {ways} ways {indexing}");
                    assert!(fast.counters.writebacks > 0 && fast.counters.misses > 0, "{repl} {ways} ways: the traffic exercises evictions");
                }
            }
        }
    }

    #[test]
    fn impossible_geometries_name_the_key() {
        let e = LineStore::new(64, 5, Replacement::Lru, 0, "cache.l2").unwrap_err();
        assert!(e.to_string().contains("cache.l2.ways"), "{e}");
        let e = LineStore::new(0, 1, Replacement::Lru, 0, "cache.l2").unwrap_err();
        assert!(e.to_string().contains("cache.l2.size"), "{e}");
    }
}
