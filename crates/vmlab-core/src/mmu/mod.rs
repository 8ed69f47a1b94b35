//! The MMU: a hierarchy of TLBs (any number of levels, split or unified, per-page-size
//! or mixed) in front of the walker ([`walker`]), which walks the page table through
//! its walk caches and the cache hierarchy, in hardware or as a software refill
//! ([`refill`]). The engine ([`crate::sim`]) drives it per access.

pub mod assoc;
pub mod cwc;
pub mod fully_assoc;
pub mod pair_tlb;
pub mod pwc;
pub mod refill;
pub mod regions;
pub mod stack_distance;
pub mod stc;
pub mod tlb;
pub mod walker;

pub use tlb::{Tlb, TlbCounters, TlbPayload};
pub use walker::{Lookup, Mmu, Walker};

use tlb::{piece_of, ANY_SIZE};

use crate::addr::{Asid, PageSize};
use crate::error::Result;
use crate::pt::Translation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tlb::TlbConfig;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MmuConfig {
    /// TLB entries carry ASIDs; if false every context switch flushes TLBs and PWCs.
    #[serde(default = "crate::config::yes")]
    pub asid_tags: bool,
    /// Seed for random replacement.
    #[serde(default)]
    pub seed: u64,
    /// Charge every walk this many cycles instead of its modelled latency: a software
    /// miss handler of fixed cost (Romer §3.5.1: 30). The walk's references are still
    /// made and counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_miss_cycles: Option<u64>,
    /// Itanium region IDs and protection-key TLB sharing (mmu/regions.rs).
    #[serde(default, skip_serializing_if = "crate::mmu::regions::RegionConfig::is_default")]
    pub regions: crate::mmu::regions::RegionConfig,
    /// Software-managed refill as code (mmu/refill.rs).
    #[serde(default, skip_serializing_if = "crate::mmu::refill::RefillConfig::is_default")]
    pub refill: crate::mmu::refill::RefillConfig,
}

/// Index of a TLB inside [`TlbHierarchy::tlbs`].
pub(crate) type TlbId = usize;

/// All TLB structures, grouped per level and per side (instruction / data).
pub struct TlbHierarchy {
    pub tlbs: Vec<Tlb>,
    /// `data[l]` / `instr[l]`: the structures probed at level l+1 by that side.
    data: Vec<Vec<TlbId>>,
    instr: Vec<Vec<TlbId>>,
    /// Bit s set once a page of size 2^s has been filled into any structure.
    filled_shifts: u64,
    /// The structures a page-size policy watches (Romer's `tlbcount`, §3.5.2): per
    /// side (data, instr), the first structure of the side's last level.
    watched: [TlbId; 2],
    /// Per side (data, instr): the probes a lookup makes, rebuilt when a new page size
    /// is first filled. Levels and structures in order, each structure's sizes
    /// smallest first; sizes never filled are not probed.
    plans: [ProbePlan; 2],
    /// Per side and page-size shift: the structures a fill of that size writes, by
    /// level, with the size of the entry each caches (smaller if it splinters).
    fills: [Vec<Vec<FillStep>>; 2],
    /// Per side: lookups, and lookups that hit at each level; and hits per structure;
    /// since the last `fold_counts` (which turns them into each structure's counters).
    /// A lookup reaches a level if it missed every level before it.
    side_lookups: [u64; 2],
    level_hits: [Vec<u64>; 2],
    probe_hits: Vec<u64>,
}

/// One probe of a lookup: structure `tlb`, for pages of 2^shift bytes (`ANY_SIZE`: its
/// masked any-size compare).
#[derive(Clone, Copy, Debug)]
struct Probe {
    tlb: u16,
    shift: u8,
}

#[derive(Clone, Debug, Default)]
struct ProbePlan {
    probes: Vec<Probe>,
    /// `probes[level_ends[l-1]..level_ends[l]]` are level l+1's.
    level_ends: Vec<usize>,
    /// Every level has exactly one probe (`probes[l]` is level l+1's).
    one_per_level: bool,
}

/// One structure a fill writes: at 0-based `level`, an entry of 2^piece bytes.
#[derive(Clone, Copy, Debug)]
struct FillStep {
    tlb: u16,
    level: u8,
    piece: u8,
}

/// Where a lookup hit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TlbHit {
    /// 0-based level index.
    pub(crate) level: usize,
    /// The structure that hit (read by the unit tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) tlb: TlbId,
    pub(crate) entry: TlbPayload,
}

/// The page a TLB entry translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TlbPage {
    pub(crate) asid: Asid,
    /// Virtual base of the page.
    pub(crate) va: u64,
    pub(crate) size: PageSize,
}

/// A change to a watched structure's contents (what page-size policies that track the
/// TLB, like Romer's `tlbcount` §3.5.2, need to know).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlbChange {
    Filled {
        slot: u8,
        page: TlbPage,
    },
    /// Pushed out by a fill.
    Evicted {
        slot: u8,
        page: TlbPage,
    },
    /// Removed by an invalidation (shootdown) or a flush.
    Invalidated {
        slot: u8,
        page: TlbPage,
    },
}

impl TlbHierarchy {
    /// The TLBs of `[tlb.NAME]`; the i-th (by name) replaces at random from `seed + i`.
    pub(crate) fn new(settings: &BTreeMap<String, TlbConfig>, seed: u64) -> Result<TlbHierarchy> {
        let mut tlbs = Vec::new();
        for (i, (name, c)) in settings.iter().enumerate() {
            tlbs.push(Tlb::new(name, c, seed.wrapping_add(i as u64))?);
        }
        let max_level = tlbs.iter().map(|t| t.level).max().unwrap_or(1) as usize;
        let mut data = vec![Vec::new(); max_level];
        let mut instr = vec![Vec::new(); max_level];
        for (i, t) in tlbs.iter().enumerate() {
            if t.serves.serves_data() {
                data[t.level as usize - 1].push(i);
            }
            if t.serves.serves_instr() {
                instr[t.level as usize - 1].push(i);
            }
        }
        let last = |side: &Vec<Vec<TlbId>>| side.iter().rev().find(|ids| !ids.is_empty()).map_or(0, |ids| ids[0]);
        let watched = [last(&data), last(&instr)];
        let fills = [&data, &instr].map(|side| {
            (0..64u8)
                .map(|shift| {
                    let mut steps = Vec::new();
                    for (level, ids) in side.iter().enumerate() {
                        for &id in ids {
                            if let Some(piece) = tlbs[id].piece_shift(shift) {
                                steps.push(FillStep { tlb: id as u16, level: level as u8, piece });
                            }
                        }
                    }
                    steps
                })
                .collect()
        });
        let level_hits = [vec![0; max_level], vec![0; max_level]];
        let probe_hits = vec![0; tlbs.len()];
        let mut h =
            TlbHierarchy { tlbs, data, instr, filled_shifts: 0, watched, plans: Default::default(), fills, side_lookups: [0; 2], level_hits, probe_hits };
        h.plan_probes();
        Ok(h)
    }

    /// Rebuild the per-side probe plans for the sizes filled so far.
    fn plan_probes(&mut self) {
        for (side, ids_by_level) in [&self.data, &self.instr].into_iter().enumerate() {
            let plan = &mut self.plans[side];
            plan.probes.clear();
            plan.level_ends.clear();
            for ids in ids_by_level {
                for &id in ids {
                    let t = &self.tlbs[id];
                    if t.any_size() {
                        plan.probes.push(Probe { tlb: id as u16, shift: ANY_SIZE });
                        continue;
                    }
                    let mut sizes = t.held_shifts() & self.filled_shifts;
                    while sizes != 0 {
                        plan.probes.push(Probe { tlb: id as u16, shift: sizes.trailing_zeros() as u8 });
                        sizes &= sizes - 1;
                    }
                }
                plan.level_ends.push(plan.probes.len());
            }
            plan.one_per_level = plan.level_ends.iter().enumerate().all(|(l, &end)| end == l + 1);
        }
    }

    /// Turn the lookups counted per level and the hits per structure into each
    /// structure's lookups, hits and misses. Every structure of a level a lookup
    /// reaches is probed, so its lookups are its levels' on the sides it serves.
    pub(crate) fn fold_counts(&mut self) {
        let reached = |side: usize, l: usize| self.side_lookups[side] - self.level_hits[side][..l].iter().sum::<u64>();
        let level_lookups: [Vec<u64>; 2] = [0, 1].map(|side| (0..self.level_hits[side].len()).map(|l| reached(side, l)).collect());
        for (id, t) in self.tlbs.iter_mut().enumerate() {
            let l = t.level as usize - 1;
            let lookups = t.serves.serves_data() as u64 * level_lookups[0][l] + t.serves.serves_instr() as u64 * level_lookups[1][l];
            let hits = std::mem::take(&mut self.probe_hits[id]);
            t.counters.lookups += lookups;
            t.counters.hits += hits;
            t.counters.misses += lookups - hits;
        }
        self.side_lookups = [0; 2];
        self.level_hits.iter_mut().for_each(|v| v.fill(0));
    }

    /// The watched structure's slot for a side: 0, or 1 for a separate instruction one.
    #[inline(always)]
    pub(crate) fn watched_slot(&self, instr: bool) -> u8 {
        (instr && self.watched[1] != self.watched[0]) as u8
    }

    /// Log (or stop logging) every change to the watched structures' contents, for
    /// `drain_changes`.
    pub(crate) fn watch(&mut self, on: bool) {
        for slot in 0..2 {
            let id = self.watched[slot];
            self.tlbs[id].log = on.then(|| (self.watched_slot(slot == 1), Vec::new()));
        }
    }

    /// Entries of the watched structures (data, instruction).
    pub(crate) fn watched_entries(&self) -> [usize; 2] {
        self.watched.map(|id| self.tlbs[id].entries())
    }

    /// Move the logged changes (fills, evictions, invalidations, flushes) into `out`,
    /// in order per watched structure.
    pub(crate) fn drain_changes(&mut self, out: &mut Vec<TlbChange>) {
        for slot in 0..=(self.watched[1] != self.watched[0]) as usize {
            if let Some((_, log)) = &mut self.tlbs[self.watched[slot]].log {
                out.append(log);
            }
        }
    }

    pub(crate) fn levels(&self) -> usize {
        self.data.len()
    }

    /// The structures an access of this side probes at each level.
    #[inline(always)]
    pub(crate) fn side(&self, instr: bool) -> &[Vec<TlbId>] {
        if instr {
            &self.instr
        } else {
            &self.data
        }
    }

    /// Probe level by level; every structure of a level is probed (in parallel), and
    /// the next level is probed only if all missed. Returns where it hit.
    #[inline]
    pub(crate) fn lookup(&mut self, instr: bool, va: u64, asid: Asid) -> Option<TlbHit> {
        let side = instr as usize;
        self.side_lookups[side] += 1;
        let plan = &self.plans[side];
        if plan.one_per_level {
            // Most hierarchies once one page size is in use: a structure per level.
            for (level, p) in plan.probes.iter().enumerate() {
                if let Some(e) = self.tlbs[p.tlb as usize].probe(va, asid, p.shift) {
                    self.probe_hits[p.tlb as usize] += 1;
                    self.level_hits[side][level] += 1;
                    return Some(TlbHit { level, tlb: p.tlb as usize, entry: e });
                }
            }
            return None;
        }
        let mut from = 0;
        for (level, &to) in plan.level_ends.iter().enumerate() {
            let mut found: Option<TlbHit> = None;
            // A structure stops at its first hitting size.
            let mut hit_tlb = u16::MAX;
            for p in &plan.probes[from..to] {
                if p.tlb == hit_tlb {
                    continue;
                }
                if let Some(e) = self.tlbs[p.tlb as usize].probe(va, asid, p.shift) {
                    hit_tlb = p.tlb;
                    self.probe_hits[p.tlb as usize] += 1;
                    // A translation lives in at most one structure per level in a
                    // well-formed configuration; keep the first hit.
                    found.get_or_insert(TlbHit { level, tlb: p.tlb as usize, entry: e });
                }
            }
            if found.is_some() {
                self.level_hits[side][level] += 1;
                return found;
            }
            from = to;
        }
        None
    }

    /// Fill the translation into every structure of levels `< upto` on this side that
    /// holds its page size (upto = levels() after a walk, = hit level after a hit).
    #[inline]
    pub(crate) fn fill(&mut self, instr: bool, va: u64, asid: Asid, t: &Translation, upto: usize) {
        self.fill_with_buddy(instr, va, asid, t, None, upto);
    }

    /// Whether some structure's entries map page pairs (`pairs`).
    pub(crate) fn pairs(&self) -> bool {
        self.tlbs.iter().any(|t| t.pairs())
    }

    /// `fill`, giving page-pair structures the other page of the pair too (`buddy`:
    /// the translation of the page next to `va`'s in its pair, read by the same walk).
    #[inline]
    pub(crate) fn fill_with_buddy(&mut self, instr: bool, va: u64, asid: Asid, t: &Translation, buddy: Option<&Translation>, upto: usize) {
        let shift = t.size.shift();
        let mut pieces = 0u64;
        for f in &self.fills[instr as usize][shift as usize] {
            if f.level as usize >= upto {
                break;
            }
            let tlb = &mut self.tlbs[f.tlb as usize];
            if f.piece == shift {
                tlb.fill(va, asid, t, buddy);
            } else {
                tlb.note_splinter();
                tlb.fill(va, asid, &piece_of(va, t, f.piece), None);
            }
            pieces |= 1u64 << f.piece;
        }
        if pieces & !self.filled_shifts != 0 {
            // A size filled for the first time: lookups probe for it from now on.
            self.filled_shifts |= pieces;
            self.plan_probes();
        }
    }

    pub(crate) fn invalidate(&mut self, va: u64, asid: Asid) {
        self.tlbs.iter_mut().for_each(|t| t.invalidate(va, asid));
    }
    /// The page of `size` at `va` changed: drop its entries, splinters included. Once
    /// any structure has cached a splinter, its pieces may also have reached others
    /// through refills, so every structure clears the smaller entries inside the page.
    pub(crate) fn invalidate_page(&mut self, va: u64, size: PageSize, asid: Asid) {
        let pieces = self.tlbs.iter().any(|t| t.counters.splinters > 0);
        self.tlbs.iter_mut().for_each(|t| t.invalidate_page(va, size, asid, pieces));
    }
    pub(crate) fn flush_all(&mut self) {
        self.tlbs.iter_mut().for_each(|t| t.flush_all());
    }
    pub(crate) fn flush_asid(&mut self, asid: Asid) {
        self.tlbs.iter_mut().for_each(|t| t.flush_asid(asid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Perms;
    use crate::config::Config;
    use rand::{Rng, SeedableRng};

    /// The planned lookups and fills give the same hits and, once folded, the same
    /// per-structure counters as probing every structure of every level in turn with
    /// `Tlb::lookup` and filling through `entry_for` (the plain reading of the
    /// hierarchy). Split L1s, a unified L2, 4K and 2M pages on both sides, and a
    /// splintering structure.
    #[test]
    fn probe_plan_matches_probing_every_structure() {
        let sets = ["tlb.l1d_2m.splinter=true".to_string()];
        let cfg = Config::load("skylake", &sets).unwrap();
        let mut planned = TlbHierarchy::new(&cfg.tlb, cfg.mmu.seed).unwrap();
        let mut plain = TlbHierarchy::new(&cfg.tlb, cfg.mmu.seed).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(4);
        let mut filled = 0u64;
        for _ in 0..20_000 {
            let instr = rng.gen_bool(0.3);
            let asid = rng.gen_range(0..2u16);
            let size = if rng.gen_bool(0.2) {
                PageSize::G1
            } else if rng.gen_bool(0.3) {
                PageSize::M2
            } else {
                PageSize::K4
            };
            let va = rng.gen_range(0..(8u64 << 30));
            let t = Translation { pa: size.align_down(va) ^ (1 << 40), size, perms: Perms::RW_USER };
            let side = if instr { plain.instr.clone() } else { plain.data.clone() };
            // Reference: every structure of a level, in order; first hit kept.
            let mut expect = None;
            for (level, ids) in side.iter().enumerate() {
                for &id in ids {
                    if plain.tlbs[id].lookup(va, asid, filled).is_some() && expect.is_none() {
                        expect = Some((level, id));
                    }
                }
                if expect.is_some() {
                    break;
                }
            }
            let got = planned.lookup(instr, va, asid).map(|h| (h.level, h.tlb));
            assert_eq!(got, expect);
            let upto = got.map_or(side.len(), |(l, _)| l);
            planned.fill(instr, va, asid, &t, upto);
            for ids in side.iter().take(upto) {
                for &id in ids {
                    if let Some(e) = plain.tlbs[id].entry_for(va, &t) {
                        if e.size != t.size {
                            plain.tlbs[id].note_splinter();
                        }
                        filled |= 1u64 << e.size.shift();
                        plain.tlbs[id].fill(va, asid, &e, None);
                    }
                }
            }
        }
        planned.fold_counts();
        for (p, q) in planned.tlbs.iter().zip(&plain.tlbs) {
            assert_eq!(p.counters, q.counters, "{}", p.name);
        }
        assert!(planned.tlbs.iter().any(|t| t.counters.splinters > 0 && t.counters.hits > 0));
    }
}
