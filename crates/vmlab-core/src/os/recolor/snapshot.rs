//! Snapshot policies (Romer §4.2.3): take a "snapshot" of the working set by flushing
//! the TLB and recording the next `snapshot_pages` (16) distinct base pages that miss.
//! - `snapshot`: every `period` cycles; recolour one page of a same-coloured group;
//! - `snapshot-delay`: a confirmation snapshot `delay` cycles after the first; recolour
//!   a page only if it conflicts in both;
//! - `snapshot-miss`: like snapshot-delay, with period and delay counted in L2 misses
//!   (a cache-miss-counter interrupt, Romer §4.5.1) rather than cycles.
//!
//! A snapshot still incomplete when the next activation comes is analysed as it is.

use super::{Ctx, RecolorKind, Shared};
use crate::addr::{PageSize, Pid};
use crate::error::Result;
use crate::os::policy::TlbMiss;
use crate::os::Shootdown;
use crate::pt::PageTable;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Recording snapshot 1 (first) or 2 (confirmation).
    Collecting(u8),
    /// Between the first snapshot and the confirmation.
    Waiting,
}

pub(crate) struct Snapshot {
    kind: RecolorKind,
    phase: Phase,
    /// (pid, page, colour) in miss order.
    current: Vec<(Pid, u64, u64)>,
    first: Vec<(Pid, u64, u64)>,
    /// Start of the current activation (cycles, or L2 misses for snapshot-miss).
    started: u64,
}

impl Snapshot {
    pub(crate) fn new(kind: RecolorKind) -> Snapshot {
        Snapshot { kind, phase: Phase::Idle, current: Vec::new(), first: Vec::new(), started: 0 }
    }

    fn confirms(&self) -> bool {
        self.kind != RecolorKind::Snapshot
    }

    fn start<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>, which: u8) {
        sh.stats.snapshots += 1;
        self.current.clear();
        self.phase = Phase::Collecting(which);
        cx.mm.shootdowns.push(Shootdown::TlbFlush);
    }

    pub(crate) fn tlb_miss<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>, m: &TlbMiss) -> Result<()> {
        let Phase::Collecting(which) = self.phase else { return Ok(()) };
        if m.translation.size != PageSize::K4 {
            return Ok(());
        }
        let page = PageSize::K4.align_down(m.va);
        if self.current.iter().any(|&(p, v, _)| p == m.pid && v == page) {
            return Ok(());
        }
        sh.stats.tlb_misses_recorded += 1;
        sh.stats.overhead_cycles += sh.params.costs.record;
        self.current.push((m.pid, page, cx.mm.placement.color_of(m.translation.phys(m.va))));
        if self.current.len() >= sh.params.snapshot_pages {
            self.finish(sh, cx, which)?;
        }
        Ok(())
    }

    /// A snapshot is complete: analyse it, or keep it for confirmation.
    fn finish<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>, which: u8) -> Result<()> {
        if which == 1 && self.confirms() {
            self.first = std::mem::take(&mut self.current);
            self.phase = Phase::Waiting;
            return Ok(());
        }
        sh.stats.analyses += 1;
        sh.stats.overhead_cycles += sh.params.costs.analyze;
        let mut groups = Shared::conflicts(&self.current);
        if self.confirms() {
            // Keep pages that conflicted in the first snapshot too, with the same colour.
            let before: BTreeMap<(Pid, u64), u64> = Shared::conflicts(&self.first).into_iter().flat_map(|(c, g)| g.into_iter().map(move |k| (k, c))).collect();
            for (c, g) in groups.iter_mut() {
                g.retain(|k| before.get(k) == Some(c));
            }
            groups.retain(|_, g| g.len() >= 2);
        }
        sh.stats.conflicts += groups.len() as u64;
        // Recolour the later-missing page of the largest group.
        if let Some((_, g)) = groups.iter().max_by_key(|(c, g)| (g.len(), std::cmp::Reverse(**c))) {
            let (pid, va) = g[g.len() - 1];
            let avoid: Vec<u64> = groups.keys().copied().collect();
            sh.recolor(cx, pid, va, &avoid)?;
        }
        self.phase = Phase::Idle;
        self.current.clear();
        self.first.clear();
        Ok(())
    }

    /// Cycle timer (snapshot, snapshot-delay); returns the next timer cycle.
    pub(crate) fn timer<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>) -> Result<u64> {
        sh.stats.interrupts += 1;
        sh.stats.overhead_cycles += sh.params.costs.interrupt;
        self.activate(sh, cx, cx.now)?;
        Ok(self.next_activation(sh).max(cx.now + 1))
    }

    /// When the next activation is due, on the policy's clock.
    fn next_activation(&self, sh: &Shared) -> u64 {
        match self.phase {
            Phase::Collecting(1) | Phase::Waiting if self.confirms() => self.started + sh.params.delay.max(1),
            _ => self.started + sh.params.period.max(1),
        }
    }

    /// The L2 miss counter reached its alarm (snapshot-miss).
    pub(crate) fn miss_alarm<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>) -> Result<()> {
        sh.stats.interrupts += 1;
        sh.stats.overhead_cycles += sh.params.costs.interrupt;
        let misses = cx.mem.memory_accesses;
        self.activate(sh, cx, misses)?;
        cx.mem.miss_alarm = self.next_activation(sh).max(misses + 1);
        Ok(())
    }

    /// One activation at clock `t`: begin a snapshot, or the confirmation.
    fn activate<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>, t: u64) -> Result<()> {
        match self.phase {
            Phase::Collecting(which) => {
                self.finish(sh, cx, which)?;
                if self.phase == Phase::Waiting {
                    // The first snapshot ran out of time: confirm right away.
                    self.start(sh, cx, 2);
                    return Ok(());
                }
                self.started = t;
                self.start(sh, cx, 1);
            }
            Phase::Waiting => self.start(sh, cx, 2),
            Phase::Idle => {
                self.started = t;
                self.start(sh, cx, 1);
            }
        }
        Ok(())
    }
}
