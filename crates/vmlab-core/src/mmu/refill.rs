//! Software-managed TLB refill as code (docs/config.md `[mmu.refill]`).
//!
//! On a MIPS-style machine a TLB miss raises an exception whose handler walks the page
//! table in software (Elphinstone ch. 2, §4.2.1); on Itanium the hardware walker reads
//! one VHPT entry and a miss there traps to a handler that walks the real table
//! (Chapman et al. §3.1). Either way the refill is code: an exception entry, the
//! handler's instructions (a fixed part, and a loop body per sequential step of the
//! walk: a level, a chain link, a guard), each fetched through the instruction cache
//! from the handler's address, its loads (the walk's references) through the data
//! cache, and the exception return. So handler length and cache priming show up in the
//! refill's cycles, and the handler's fetches and loads compete with the program for
//! the caches.
//!
//! The handler's shape in the I-cache: `prologue` instructions (half the fixed part),
//! the loop body of `per_step` instructions run once per step, the rest of the fixed
//! part. A load that hits the first cache level costs no cycle beyond its instruction
//! (the R4x00's load delay slot is filled, Elphinstone App. B.1.3); anything slower
//! stalls the handler, as an I-cache miss does.

use crate::config::PageTableKind;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// `mmu.refill.kind`: who refills the TLB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefillKind {
    /// A hardware walker: the walk's references only (no code, no exception).
    #[default]
    Hardware,
    /// Every refill is an exception whose handler walks the table (MIPS).
    Software,
    /// The hardware walker probes the table's STLB (`page_table.stlb`, as Itanium's
    /// walker probes the long-format VHPT); a probe that misses traps to the handler,
    /// which walks the table behind it.
    StlbMiss,
}

/// `[mmu.refill]`: the refill handler's settings.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RefillConfig {
    pub kind: RefillKind,
    /// Cycles from the miss to the handler's first instruction (the pipeline drains
    /// and restarts at the refill vector). Default 5: the R4700's five stages.
    pub entry_cycles: Option<u64>,
    /// Cycles of the exception return. Default 2: the R4x00's jump latency
    /// (Elphinstone App. B.1.2).
    pub exit_cycles: Option<u64>,
    /// The handler's instructions outside its per-step loop. Default per page-table
    /// kind ([`handler_length`]).
    pub instructions: Option<u64>,
    /// The handler's instructions per sequential step of the walk. Default per kind.
    pub instructions_per_step: Option<u64>,
    /// Cycles per handler instruction when its fetches and loads hit the first cache
    /// level (1: the R4700 is single-issue with its delay slots filled).
    pub cycles_per_instruction: Option<f64>,
    /// Physical address of the handler's code (unmapped, cached: MIPS kseg0). Default:
    /// just past the simulated physical memory, so no program frame shares its lines.
    pub code: Option<u64>,
}

impl RefillConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == RefillConfig::default()
    }

    /// Checks against the page table's STLB entries (`page_table.stlb.entries`) and
    /// whether `mmu.fixed_miss_cycles` replaces every walk's cost.
    pub(crate) fn validate(&self, stlb_entries: usize, fixed_miss_cycles: bool) -> Result<()> {
        if let Some(c) = self.cycles_per_instruction.filter(|c| !c.is_finite() || *c <= 0.0) {
            return Err(Error::config("mmu.refill.cycles_per_instruction", format!("must be a positive number, not {c}")));
        }
        if self.kind == RefillKind::Hardware {
            let set = [
                self.entry_cycles.is_some(),
                self.exit_cycles.is_some(),
                self.instructions.is_some(),
                self.instructions_per_step.is_some(),
                self.cycles_per_instruction.is_some(),
                self.code.is_some(),
            ];
            if set.contains(&true) {
                return Err(Error::config("mmu.refill.kind", "the handler's settings apply to a software refill: set kind = \"software\" or \"stlb-miss\""));
            }
            return Ok(());
        }
        if fixed_miss_cycles {
            return Err(Error::config(
                "mmu.refill.kind",
                "a software handler's cost is modelled from its code; unset mmu.fixed_miss_cycles, which replaces it",
            ));
        }
        // Every refill runs the handler instruction by instruction through the I-cache.
        for (key, n) in [("mmu.refill.instructions", self.instructions), ("mmu.refill.instructions_per_step", self.instructions_per_step)] {
            if n.is_some_and(|n| n > MAX_HANDLER_INSTRUCTIONS) {
                return Err(Error::config(key, format!("at most {MAX_HANDLER_INSTRUCTIONS} instructions (a refill handler is tens)")));
            }
        }
        if self.kind == RefillKind::StlbMiss && stlb_entries == 0 {
            return Err(Error::config("mmu.refill.kind", "\"stlb-miss\" traps on a miss of the page table's STLB; set page_table.stlb.entries"));
        }
        Ok(())
    }
}

/// The longest handler (its fixed part, or its per-step loop) vmlab runs.
pub(crate) const MAX_HANDLER_INSTRUCTIONS: u64 = 1 << 16;

/// The default handler length for a page-table kind: (instructions outside the loop,
/// instructions per step). Elphinstone's best cases (Table 6.4, all cache hits, no
/// exception cost) fix them with a 10-instruction frame (save the two free registers'
/// worth of state, read the faulting address, write the TLB, return):
/// - MPT: 34 cycles for 6 levels, so 4 per level (shift, mask, add, load);
/// - HPT: 19 for one bucket, so 9 per probe (hash, load tag, compare, load pair);
/// - CPT: 27, 8 more than the HPT (§6.3.1: the sub-block index);
/// - GPT: 8 instructions per translation step (App. B.1.3);
/// - STLB in front of a GPT: 18 cycles for a hit (§5.2.2), the GPT's 10 + 8;
/// - linear array: 10 cycles at best on earlier MIPS ([DMM86], §6.4.2): 6 + 4;
/// - radix: the MPT's 4 per level; inverted: the HPT's probe per chain link; other
///   kinds (never software-refilled in their papers): 4 per step.
pub(crate) fn handler_length(kind: PageTableKind, subblock: u32) -> (u64, u64) {
    match kind {
        PageTableKind::Mpt | PageTableKind::Radix => (10, 4),
        PageTableKind::Hashed if subblock > 2 => (18, 9),
        PageTableKind::Hashed | PageTableKind::Inverted => (10, 9),
        PageTableKind::Guarded => (10, 8),
        PageTableKind::Linear => (6, 4),
        _ => (10, 4),
    }
}

/// A software refill handler, resolved for one machine.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RefillHandler {
    pub(crate) kind: RefillKind,
    entry: u64,
    exit: u64,
    fixed: u64,
    per_step: u64,
    cpi: f64,
    code: u64,
}

/// Bytes per handler instruction (MIPS and Itanium's slots alike, for the I-cache).
const INSTRUCTION_BYTES: u64 = 4;

/// What a refill handler needs to know of the table it walks and the machine it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RefillTable {
    /// `page_table.kind`.
    pub(crate) kind: PageTableKind,
    /// `page_table.hashed.subblock`: a hashed table's PTEs per bucket.
    pub(crate) subblock: u32,
    /// `machine.phys_mem`: the handler's code sits at its end by default.
    pub(crate) phys_mem: u64,
}

impl RefillHandler {
    /// The handler `c` describes for the table `t`; `None` for hardware refill.
    pub(crate) fn new(c: &RefillConfig, t: RefillTable) -> Option<RefillHandler> {
        if c.kind == RefillKind::Hardware {
            return None;
        }
        let (fixed, per_step) = handler_length(t.kind, t.subblock);
        Some(RefillHandler {
            kind: c.kind,
            entry: c.entry_cycles.unwrap_or(5),
            exit: c.exit_cycles.unwrap_or(2),
            fixed: c.instructions.unwrap_or(fixed),
            per_step: c.instructions_per_step.unwrap_or(per_step),
            cpi: c.cycles_per_instruction.unwrap_or(1.0),
            code: c.code.unwrap_or(t.phys_mem),
        })
    }

    /// The steps of a walk of `steps` steps the handler runs, if it runs: all of them,
    /// or (`stlb-miss`) those after the hardware's STLB probe, when it missed.
    #[inline]
    pub(crate) fn handled_steps(&self, steps: u64) -> Option<std::ops::Range<u64>> {
        match self.kind {
            RefillKind::StlbMiss if steps <= 1 => None,
            RefillKind::StlbMiss => Some(1..steps),
            _ => Some(0..steps),
        }
    }

    /// Instructions the handler runs for `steps` steps.
    pub(crate) fn instructions(&self, steps: u64) -> u64 {
        self.fixed + self.per_step * steps
    }

    /// Cycles of a refill of `steps` handled steps besides its fetch and load stalls:
    /// exception entry and exit and the instructions at their base rate.
    pub(crate) fn cycles(&self, steps: u64) -> u64 {
        self.entry + self.exit + (self.instructions(steps) as f64 * self.cpi).round() as u64
    }

    fn prologue(&self) -> u64 {
        self.fixed / 2
    }

    /// The code addresses fetched before the first step.
    pub(crate) fn prologue_fetches(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.prologue()).map(|i| self.code + i * INSTRUCTION_BYTES)
    }

    /// The code addresses fetched for each step (the loop body).
    pub(crate) fn step_fetches(&self) -> impl Iterator<Item = u64> + '_ {
        let base = self.code + self.prologue() * INSTRUCTION_BYTES;
        (0..self.per_step).map(move |i| base + i * INSTRUCTION_BYTES)
    }

    /// The code addresses fetched after the last step.
    pub(crate) fn epilogue_fetches(&self) -> impl Iterator<Item = u64> + '_ {
        let base = self.code + (self.prologue() + self.per_step) * INSTRUCTION_BYTES;
        (0..self.fixed - self.prologue()).map(move |i| base + i * INSTRUCTION_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn software(kind: PageTableKind, subblock: u32) -> RefillHandler {
        RefillHandler::new(&RefillConfig { kind: RefillKind::Software, ..Default::default() }, RefillTable { kind, subblock, phys_mem: 1 << 30 }).unwrap()
    }

    #[test]
    fn best_case_lengths_match_elphinstones_table_6_4() {
        // All hits, no exception cost: instructions = cycles on the R4700.
        assert_eq!(software(PageTableKind::Mpt, 2).instructions(6), 34);
        assert_eq!(software(PageTableKind::Hashed, 2).instructions(1), 19);
        assert_eq!(software(PageTableKind::Hashed, 4).instructions(1), 27);
        assert_eq!(software(PageTableKind::Guarded, 0).instructions(1), 18, "an STLB hit in front of a GPT (§5.2.2)");
    }

    #[test]
    fn the_handler_fetches_each_instruction_once_per_run_of_its_code() {
        let h = software(PageTableKind::Guarded, 0);
        let steps = 3;
        let n = h.prologue_fetches().count() + steps * h.step_fetches().count() + h.epilogue_fetches().count();
        assert_eq!(n as u64, h.instructions(steps as u64));
        // The loop body is one piece of code, between the prologue and the epilogue.
        let body: Vec<u64> = h.step_fetches().collect();
        assert_eq!(body[0], (1 << 30) + 4 * 5);
        assert_eq!(h.epilogue_fetches().next(), Some(body[7] + 4));
    }

    #[test]
    fn hardware_refill_has_no_handler_and_an_stlb_hit_runs_none() {
        assert!(RefillHandler::new(&RefillConfig::default(), RefillTable { kind: PageTableKind::Radix, subblock: 0, phys_mem: 1 << 30 }).is_none());
        let h = RefillHandler::new(
            &RefillConfig { kind: RefillKind::StlbMiss, ..Default::default() },
            RefillTable { kind: PageTableKind::Radix, subblock: 0, phys_mem: 1 << 30 },
        )
        .unwrap();
        assert_eq!(h.handled_steps(1), None);
        assert_eq!(h.handled_steps(5), Some(1..5));
    }
}
