//! The MMU's timing side: the TLB hierarchy, the walk caches, the walker's accounting,
//! and the cache hierarchy the walks go through. The engine (`super::engine`) keeps the
//! functional side (trace, OS model, page table) and drives this inline. When nothing on
//! the engine's side reads the timing side per access, and the page table splits its
//! walk ([`PageTable::SPLITS`]), the `Mmu` runs on a thread of its own instead, fed
//! [`MmuOp`]s in trace order (docs/dev/timing-thread-plan.md). Both ways run the same
//! code below, so the results are identical.

use crate::addr::{Asid, Perms};
use crate::config::Config;
use crate::error::Result;
use crate::mem::thread::OpSink;
use crate::mem::{MemOp, MemoryHierarchy, MemoryThread, WalkTimer};
use crate::mmu::TlbHierarchy;
use crate::os::Shootdown;
use crate::pt::{PageTable, Translation, WalkCaches, WalkPath, WalkRef};
use crate::stats::{CycleCounters, WalkCounters};

pub struct Mmu<P: PageTable> {
    pub tlbs: TlbHierarchy,
    pub walk_caches: P::Caches,
    /// The cache hierarchy (a placeholder while it runs on `mem_thread`: every reader
    /// outside the per-access path calls [`Mmu::attach_mem`] first).
    pub mem: MemoryHierarchy,
    /// Times the walk in progress when the hierarchy runs inline.
    timer: WalkTimer,
    /// The hierarchy on a thread of its own, while the run goes on.
    mem_thread: Option<MemoryThread>,
    path: WalkPath,
    /// The nested walk of a virtual walk reference.
    nested_path: WalkPath,
    /// Cumulative TLB latency when a lookup stops at level l (index) per side.
    tlb_latency: [Vec<u64>; 2],
    /// Per side (0 data, 1 instruction) and TLB level (0-based): (lookups, hits).
    pub tlb_levels: [Vec<(u64, u64)>; 2],
    pub walks: WalkCounters,
    /// TLB, walk, data-reference and copy cycles (the engine counts the others).
    pub cycles: CycleCounters,
    /// `mmu.fixed_miss_cycles`: a fixed cost per walk instead of the modelled one.
    fixed_miss_cycles: Option<u64>,
    /// A walk's virtual reference probed the data TLB since the engine last looked
    /// (its same-page entries may then be stale).
    pub probed_data_tlb: bool,
    /// On its own thread: the last `Translate` faulted and waits for its `FaultFill`
    /// (side, address, TLB tag).
    pending_fill: Option<(bool, u64, Asid)>,
    /// On its own thread: `Translate`s whose fault the engine predicted wrongly (an
    /// internal error, reported when the engine takes the MMU back).
    pub diverged: u64,
}

/// Where a walk finds the table: the table itself (inline), or the functional path the
/// engine found for it (on the MMU's thread).
pub enum WalkSource<'a, P: PageTable> {
    Table(&'a mut P),
    Path(&'a P::Path),
}

/// What a TLB lookup found: a hit at a level (0-based), or a miss and its walk's result.
#[derive(Clone, Copy, Debug)]
pub enum Lookup {
    Hit { t: Translation, level: usize },
    Miss(Option<Translation>),
}

/// One request to an MMU running on its own thread, in trace order.
#[derive(Clone, Copy, Debug)]
pub enum MmuOp<T: Copy> {
    /// A translation the engine could not prove a same-page hit. `faults`: the table
    /// lacks the mapping or the rights (the engine has resolved the fault); `full` is
    /// the walk's path before the fault.
    Translate { instr: bool, va: u64, asid: Asid, need: Perms, faults: bool, full: T },
    /// The mapping the OS installed for the last `Translate`'s fault.
    FaultFill(Translation),
    Shootdown(Shootdown),
    /// A context switch without ASID tags.
    FlushAll,
    Mem(MemOp),
}

impl<P: PageTable> Mmu<P> {
    pub fn new(cfg: &Config, walk_caches: P::Caches) -> Result<Mmu<P>> {
        let tlbs = TlbHierarchy::new(cfg)?;
        let mem = MemoryHierarchy::new(cfg)?;
        let levels = tlbs.levels();
        let mut tlb_latency = [Vec::new(), Vec::new()];
        for (side, lat) in tlb_latency.iter_mut().enumerate() {
            let mut acc = 0u64;
            for ids in tlbs.side(side == 1) {
                acc += ids.iter().map(|&i| tlbs.tlbs[i].latency as u64).max().unwrap_or(0);
                lat.push(acc);
            }
        }
        Ok(Mmu {
            tlbs,
            walk_caches,
            mem,
            timer: WalkTimer::default(),
            mem_thread: None,
            path: WalkPath::new(),
            nested_path: WalkPath::new(),
            tlb_latency,
            tlb_levels: [vec![(0, 0); levels], vec![(0, 0); levels]],
            walks: WalkCounters {
                step_refs: vec![0; crate::stats::TRACKED_STEPS],
                step_walks: vec![0; crate::stats::TRACKED_STEPS],
                ..WalkCounters::default()
            },
            cycles: CycleCounters::default(),
            fixed_miss_cycles: cfg.mmu.fixed_miss_cycles,
            probed_data_tlb: false,
            pending_fill: None,
            diverged: 0,
        })
    }

    /// Look `va` up in the TLBs of a side with tag `asid`, and walk the table (for
    /// address space `space`) if they miss. Counts the lookup and the walk; fills
    /// nothing.
    #[inline]
    pub fn lookup(&mut self, instr: bool, va: u64, asid: Asid, space: Asid, src: WalkSource<P>) -> Lookup {
        let side = instr as usize;
        match self.tlbs.lookup(instr, va, asid) {
            Some(hit) => {
                self.cycles.tlb += self.tlb_latency[side][hit.level];
                for l in 0..=hit.level {
                    self.tlb_levels[side][l].0 += 1;
                }
                self.tlb_levels[side][hit.level].1 += 1;
                Lookup::Hit { t: hit.entry.translation(), level: hit.level }
            }
            None => {
                let levels = self.tlbs.levels();
                self.cycles.tlb += self.tlb_latency[side][levels - 1];
                for l in 0..levels {
                    self.tlb_levels[side][l].0 += 1;
                }
                Lookup::Miss(self.walk(space, va, src))
            }
        }
    }

    /// One page walk: references go through the cache hierarchy step by step; a step's
    /// references are issued in parallel, so a step costs its slowest reference. A
    /// virtual reference (linear arrays) is first translated through the data TLB; if
    /// that misses, a nested walk resolves it and fills the TLB (Elphinstone §3.3).
    #[inline]
    fn walk(&mut self, space: Asid, va: u64, src: WalkSource<P>) -> Option<Translation> {
        self.path.clear();
        let (t, mut table) = match src {
            WalkSource::Table(pt) => (pt.walk(space, va, &mut self.walk_caches, &mut self.path), Some(pt)),
            WalkSource::Path(full) => (P::replay(full, space, va, &mut self.walk_caches, &mut self.path), None),
        };
        // Cycles of the walk's own besides its steps' references.
        let mut cycles = self.walk_caches.probe_latency() + self.path.extra_cycles();
        let mut step = u16::MAX;
        let (mut refs, mut steps) = (self.path.refs().len() as u64, self.path.steps() as u64);
        for i in 0..self.path.refs().len() {
            let r = self.path.refs()[i];
            let pa = if r.what == WalkRef::VIRTUAL {
                // Only tables that do not split make virtual references, and those walk inline.
                let pt = table.as_deref_mut().expect("a virtual walk reference comes from a walk of the table itself");
                let (pa, tlb_cycles, nested_refs, nested_steps) = self.translate_array(pt, space, r.pa);
                cycles += tlb_cycles;
                refs += nested_refs;
                steps += nested_steps;
                match pa {
                    Some(pa) => pa,
                    // No array page: nothing to read (the walk finds no mapping).
                    None => {
                        refs -= 1;
                        continue;
                    }
                }
            } else {
                r.pa
            };
            let new_step = r.step != step;
            step = r.step;
            self.mem_op(MemOp::WalkRef { pa, new_step, nested: false });
        }
        // Background references (walk-table fills): cache traffic and MMU requests, no latency.
        for i in 0..self.path.background().len() {
            self.mem_op(MemOp::Background { pa: self.path.background()[i] });
        }
        let background = self.path.background().len() as u64;
        refs += background;
        self.walks.background_refs += background;
        // Parallel references per step of the walk's own path (Stojkovic et al. Fig. 11).
        let last = crate::stats::TRACKED_STEPS - 1;
        for r in self.path.refs() {
            self.walks.step_refs[(r.step as usize).min(last)] += 1;
        }
        for k in 0..(self.path.steps() as usize).min(last + 1) {
            self.walks.step_walks[k] += 1;
        }
        self.walks.count += 1;
        self.walks.refs += refs;
        self.walks.steps += steps;
        // A fixed miss-handler cost replaces the modelled latency (Romer §3.5.1).
        self.mem_op(MemOp::WalkEnd { cycles, fixed: self.fixed_miss_cycles });
        t
    }

    /// Translate an address of the page table's own virtual array: through the data TLB,
    /// or by a nested walk (whose references and cycles go to the memory model as the
    /// walk's nested part). Returns (physical address, TLB cycles of a hit, nested refs,
    /// nested steps).
    fn translate_array(&mut self, pt: &mut P, asid: Asid, va: u64) -> (Option<u64>, u64, u64, u64) {
        self.walks.nested_lookups += 1;
        // The probe changes data-side TLB state.
        self.probed_data_tlb = true;
        if let Some(hit) = self.tlbs.lookup(false, va, asid) {
            let t = hit.entry.translation();
            if hit.level > 0 {
                self.tlbs.fill(false, va, asid, &t, hit.level);
            }
            return (Some(t.phys(va)), self.tlb_latency[0][hit.level], 0, 0);
        }
        self.walks.nested_misses += 1;
        let levels = self.tlbs.levels();
        self.nested_path.clear();
        let t = pt.walk_nested(asid, va, &mut self.walk_caches, &mut self.nested_path);
        let cycles = self.tlb_latency[0][levels - 1] + self.nested_path.extra_cycles();
        let mut step = u16::MAX;
        for i in 0..self.nested_path.refs().len() {
            let r = self.nested_path.refs()[i];
            let new_step = r.step != step;
            step = r.step;
            self.mem_op(MemOp::WalkRef { pa: r.pa, new_step, nested: true });
        }
        self.mem_op(MemOp::NestedEnd { cycles });
        let (n_refs, n_steps) = (self.nested_path.refs().len() as u64, self.nested_path.steps() as u64);
        let pa = t.map(|t| {
            self.tlbs.fill(false, va, asid, &t, levels);
            t.phys(va)
        });
        (pa, 0, n_refs, n_steps)
    }

    /// Apply a TLB and walk-cache invalidation.
    pub fn shootdown(&mut self, s: Shootdown) {
        match s {
            Shootdown::Page { asid, va, size } => {
                self.tlbs.invalidate_page(va, size, asid);
                self.walk_caches.invalidate(asid, va);
            }
            Shootdown::Space { asid } => {
                self.tlbs.flush_asid(asid);
                self.walk_caches.flush_asid(asid);
            }
            Shootdown::TlbEntry { asid, va } => self.tlbs.invalidate(va, asid),
            Shootdown::TlbFlush => self.tlbs.flush_all(),
        }
    }

    /// A context switch without ASID tags.
    pub fn flush_all(&mut self) {
        self.tlbs.flush_all();
        self.walk_caches.flush_all();
    }

    /// Send one op to the memory model: inline, or to its thread.
    #[inline(always)]
    pub fn mem_op(&mut self, op: MemOp) {
        match &mut self.mem_thread {
            Some(t) => t.push(op),
            None => self.timer.apply(&mut self.mem, op).account(&mut self.cycles, &mut self.walks.latency),
        }
    }

    /// Whether the memory model runs on its own thread.
    #[inline(always)]
    pub fn mem_detached(&self) -> bool {
        self.mem_thread.is_some()
    }

    /// Move the hierarchy to its own thread. If the host cannot start one, the run goes
    /// on inline (the results are the same) after a warning. Returns whether it moved.
    #[cold]
    pub fn detach_mem(&mut self) -> bool {
        match MemoryThread::start_memory(std::mem::take(&mut self.mem)) {
            Ok(t) => {
                self.mem_thread = Some(t);
                true
            }
            Err(failed) => {
                let (mem, e) = *failed;
                eprintln!("vmlab: warning: cannot start the memory-model thread ({e}); simulating the caches inline");
                self.mem = mem;
                false
            }
        }
    }

    /// Bring the memory model back inline (waiting for its thread to apply every op
    /// sent), with the cycles and walk latencies it timed.
    pub fn attach_mem(&mut self) {
        if let Some(t) = self.mem_thread.take() {
            let d = t.stop();
            self.mem = d.mem;
            self.cycles.walk += d.cycles.walk;
            self.cycles.data += d.cycles.data;
            self.cycles.recolor_copy += d.cycles.recolor_copy;
            self.walks.latency.merge(&d.walk_latency);
        }
    }
}

impl<P: PageTable> OpSink for Mmu<P> {
    type Op = MmuOp<P::Path>;

    /// The timing side of `Engine::translate_slow`, with the fault already resolved by
    /// the engine: the same lookup, walk and fills, in the same order.
    #[inline]
    fn apply(&mut self, op: MmuOp<P::Path>) {
        match op {
            MmuOp::Translate { instr, va, asid, need, faults, full } => {
                let levels = self.tlbs.levels();
                let ok = match self.lookup(instr, va, asid, asid, WalkSource::Path(&full)) {
                    Lookup::Hit { t, level } if t.perms.contains(need) => {
                        if level > 0 {
                            self.tlbs.fill(instr, va, asid, &t, level);
                        }
                        true
                    }
                    Lookup::Hit { .. } => false,
                    Lookup::Miss(Some(t)) if t.perms.contains(need) => {
                        self.tlbs.fill(instr, va, asid, &t, levels);
                        true
                    }
                    Lookup::Miss(_) => {
                        self.walks.faulting += 1;
                        false
                    }
                };
                if ok == faults {
                    self.diverged += 1;
                }
                self.pending_fill = (!ok).then_some((instr, va, asid));
            }
            MmuOp::FaultFill(t) => {
                if let Some((instr, va, asid)) = self.pending_fill.take() {
                    let levels = self.tlbs.levels();
                    self.tlbs.fill(instr, va, asid, &t, levels);
                } else {
                    self.diverged += 1;
                }
            }
            MmuOp::Shootdown(s) => self.shootdown(s),
            MmuOp::FlushAll => self.flush_all(),
            MmuOp::Mem(op) => self.mem_op(op),
        }
    }
}

