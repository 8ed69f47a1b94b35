//! `vmlab mrc`: TLB miss-ratio curves of a trace in one pass (mmu/stack_distance.rs).
//!
//! The reference stream is the trace's page references at one page size on one side
//! (data, instruction or both), tagged by process (an ASID-tagged TLB). An access that
//! crosses a page boundary references each page it touches, as in the engine. The
//! curves are exact for that stream and LRU replacement; they model no invalidations
//! (munmap, mprotect) and no page-size policy.

use crate::addr::{AccessKind, PageSize};
use crate::error::{Error, Result};
use crate::mmu::stack_distance::{FullyAssociativeStack, SetAssociativeStacks};
use crate::trace::{Record, TraceSource};
use serde::Serialize;

/// Which accesses feed the TLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Data,
    Instr,
    Unified,
}

impl std::str::FromStr for Side {
    type Err = Error;
    fn from_str(s: &str) -> Result<Side> {
        match s {
            "data" => Ok(Side::Data),
            "instr" => Ok(Side::Instr),
            "unified" => Ok(Side::Unified),
            _ => Err(Error::arg("--side", format!("`{s}` is not one of data, instr, unified"))),
        }
    }
}

#[derive(Clone, Debug)]
pub struct MrcOptions {
    pub page_size: PageSize,
    pub side: Side,
    /// Set counts for set-associative curves (each a power of two).
    pub sets: Vec<usize>,
    /// Largest associativity tracked per set count.
    pub max_ways: usize,
    /// Largest fully associative size reported (sizes are the powers of two up to it).
    pub max_entries: usize,
}

impl Default for MrcOptions {
    fn default() -> Self {
        MrcOptions { page_size: PageSize::from_valid_shift(12), side: Side::Data, sets: vec![], max_ways: 16, max_entries: 1 << 16 }
    }
}

/// One point of a curve.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MrcPoint {
    /// 1 for a fully associative TLB.
    pub sets: usize,
    pub ways: usize,
    pub entries: usize,
    pub misses: u64,
    pub(crate) miss_rate: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MissRatioCurves {
    pub(crate) page_size: String,
    pub(crate) side: Side,
    pub references: u64,
    pub(crate) distinct_pages: u64,
    /// Fully associative LRU, at every power-of-two size up to `max_entries`.
    pub fully_associative: Vec<MrcPoint>,
    /// For each requested set count, every associativity 1..=max_ways.
    pub set_associative: Vec<MrcPoint>,
}

/// Most stack entries the set-associative curves keep, over every set count (2^26, as
/// for a TLB's entries).
pub(crate) const MAX_SET_ENTRIES: usize = 1 << 26;

/// Compute the curves over `src` in one pass.
pub(crate) fn miss_ratio_curves(src: &mut dyn TraceSource, opts: &MrcOptions) -> Result<MissRatioCurves> {
    for &s in &opts.sets {
        if s == 0 || !s.is_power_of_two() {
            return Err(Error::arg("--sets", format!("{s} is not a power of two")));
        }
    }
    if opts.max_ways == 0 || opts.max_ways > 1024 {
        return Err(Error::arg("--max-ways", "must be 1..=1024"));
    }
    // Each set count keeps sets × ways stack entries: bounded like a TLB's entries.
    let entries = opts.sets.iter().try_fold(0usize, |n, &s| n.checked_add(s.checked_mul(opts.max_ways)?));
    if entries.is_none_or(|n| n > MAX_SET_ENTRIES) {
        return Err(Error::arg("--sets", format!("sets × --max-ways over all set counts must be at most {MAX_SET_ENTRIES}")));
    }
    if opts.max_entries == 0 {
        return Err(Error::arg("--max-entries", "must be at least 1"));
    }
    let shift = opts.page_size.shift();
    let mut fa = FullyAssociativeStack::new();
    let mut sa: Vec<SetAssociativeStacks> = opts.sets.iter().map(|&s| SetAssociativeStacks::new(s, opts.max_ways)).collect();
    let mut buf = Vec::with_capacity(crate::trace::BATCH);
    while src.next_batch(&mut buf)? {
        crate::interrupt::check()?;
        for r in &buf {
            let Record::Access(a) = r else { continue };
            let wanted = match opts.side {
                Side::Data => a.kind != AccessKind::Fetch,
                Side::Instr => a.kind == AccessKind::Fetch,
                Side::Unified => true,
            };
            if !wanted {
                continue;
            }
            let first = a.vaddr >> shift;
            let last = a.vaddr.saturating_add(a.size.max(1) as u64 - 1) >> shift;
            for vpn in first..=last {
                let key = (a.pid, vpn);
                fa.reference(key);
                for s in &mut sa {
                    s.reference(key);
                }
            }
        }
    }
    let refs = fa.references;
    let rate = |m: u64| if refs == 0 { 0.0 } else { m as f64 / refs as f64 };
    let fully_associative = std::iter::successors(Some(1usize), |&c| c.checked_mul(2))
        .take_while(|&c| c <= opts.max_entries)
        .map(|c| {
            let m = fa.misses(c);
            MrcPoint { sets: 1, ways: c, entries: c, misses: m, miss_rate: rate(m) }
        })
        .collect();
    let set_associative = sa
        .iter()
        .flat_map(|s| {
            (1..=s.max_ways).map(move |w| {
                let m = s.misses(w);
                MrcPoint { sets: s.sets, ways: w, entries: s.sets * w, misses: m, miss_rate: rate(m) }
            })
        })
        .collect();
    Ok(MissRatioCurves {
        page_size: opts.page_size.to_string(),
        side: opts.side,
        references: refs,
        distinct_pages: fa.distinct_pages(),
        fully_associative,
        set_associative,
    })
}
