//! The MMU's timing side: the TLB hierarchy (`Mmu`), and the walker (`Walker`): the
//! walk caches, the walker's accounting and the cache hierarchy the walks go through.
//! The engine (`crate::sim::engine`) keeps the functional side (trace, OS model, page table)
//! and the TLBs, and drives the walker inline. When the page table splits its walk
//! ([`SplitWalk`]) and nothing on the engine's side reads the walker per
//! access, the walker runs on a thread of its own instead: on a TLB miss the engine
//! finds the walk's functional path and sends it as a [`WalkerOp`]; the thread replays
//! it through the walk caches and the cache hierarchy (docs/performance.md, "The walker
//! thread"). Both ways run the same code below, so the results are identical.

use crate::addr::Asid;
use crate::error::Result;
use crate::mem::cache::CacheConfig;
use crate::mem::thread::{OpSink, OpThread};
use crate::mem::{MemOp, MemoryConfig, MemoryHierarchy, MemoryThread, WalkTimer};
use crate::mmu::refill::{RefillHandler, RefillTable};
use crate::mmu::tlb::TlbConfig;
use crate::mmu::{MmuConfig, TlbHierarchy};
use crate::os::Shootdown;
use crate::pt::{split_walk, FastPaths, PathOf, SplitWalk, Translation, WalkCaches, WalkPath, WalkRef};
use crate::stats::{CycleCounters, WalkCounters};
use std::collections::BTreeMap;

/// What the MMU is built from: its own settings (`[mmu]`), the TLB structures
/// (`[tlb]`), the cache hierarchy its walker owns (`[cache]`, `[memory]`), and the
/// table a software refill handler walks. `config.rs` builds it from a whole
/// configuration (a `&Config` converts into it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MmuSettings<'a> {
    pub(crate) mmu: &'a MmuConfig,
    pub(crate) tlb: &'a BTreeMap<String, TlbConfig>,
    pub(crate) cache: &'a BTreeMap<String, CacheConfig>,
    pub(crate) memory: &'a MemoryConfig,
    pub(crate) refill_table: RefillTable,
}

/// The TLB hierarchy, and the walker behind it (here, or on a thread of its own).
pub struct Mmu<P: FastPaths> {
    pub tlbs: TlbHierarchy,
    /// Cumulative TLB latency when a lookup stops at level l (index) per side.
    tlb_latency: [Vec<u64>; 2],
    /// Per side (0 data, 1 instruction) and TLB level (0-based): (lookups, hits), up to
    /// the last `fold_lookups`.
    pub(crate) tlb_levels: [Vec<(u64, u64)>; 2],
    /// Per side: lookups since then that hit at level l (index), or missed every level
    /// (last index). One count per lookup; `fold_lookups` turns them into `tlb_levels`.
    lookup_ends: [Vec<u64>; 2],
    /// TLB cycles (the walker counts walk, data-reference and copy cycles).
    pub(crate) tlb_cycles: u64,
    /// A walk's virtual reference probed the data TLB since the engine last looked
    /// (its same-page entries may then be stale).
    pub(crate) probed_data_tlb: bool,
    /// The walker, while it runs here (every reader outside the per-access path calls
    /// [`Mmu::attach`] first).
    walker: Option<Walker<P>>,
    /// The walker on a thread of its own, while the run goes on.
    walker_thread: Option<Detached<P>>,
    /// Walks that faulted while the walker is on its thread (added on `attach`).
    faulting: u64,
    /// Walks sent to the walker's thread.
    walks_sent: u64,
}

/// The walker on a thread of its own: the table's half of each walk is made here and
/// sent to it.
struct Detached<P: FastPaths> {
    thread: OpThread<Walker<P>>,
    /// The walk caches the table's functional path consults
    /// ([`SplitWalk::split_caches`]; rejoined on `attach`).
    front: P::Caches,
    /// The table's walk splits.
    split: P::Split,
}

/// The walk caches, the walker's accounting and the cache hierarchy.
pub struct Walker<P: FastPaths> {
    pub(crate) walk_caches: P::Caches,
    /// The cache hierarchy (a placeholder while it runs on `mem_thread`).
    pub(crate) mem: MemoryHierarchy,
    /// Times the walk in progress when the hierarchy runs inline.
    timer: WalkTimer,
    /// The hierarchy on a thread of its own (when the walker stays with the engine).
    mem_thread: Option<MemoryThread>,
    path: WalkPath,
    /// The walk in `path` awaits more pieces ([`SplitWalk::path_continues`]).
    walk_open: bool,
    /// The nested walk of a virtual walk reference.
    nested_path: WalkPath,
    pub(crate) walks: WalkCounters,
    /// Walk, data-reference and copy cycles.
    pub(crate) cycles: CycleCounters,
    /// `mmu.fixed_miss_cycles`: a fixed cost per walk instead of the modelled one.
    fixed_miss_cycles: Option<u64>,
    /// A software refill handler (`mmu.refill`), and the latency of a walk reference
    /// that hits the first level (pipelined with the handler's load instruction).
    refill: Option<RefillHandler>,
    first_hit: u64,
}

/// What a TLB lookup found: a hit at a level (0-based), or a miss and its walk's result.
#[derive(Clone, Copy, Debug)]
pub enum Lookup {
    Hit { t: Translation, level: usize },
    Miss(Option<Translation>),
}

/// A change to the walk caches' contents (the walk-cache half of a shootdown).
#[derive(Clone, Copy, Debug)]
pub enum WalkCacheOp {
    Invalidate { asid: Asid, va: u64 },
    FlushAsid(Asid),
    FlushAll,
}

impl WalkCacheOp {
    /// Apply to a kind's walk caches.
    fn apply(self, c: &mut impl WalkCaches) {
        match self {
            WalkCacheOp::Invalidate { asid, va } => c.invalidate(asid, va),
            WalkCacheOp::FlushAsid(asid) => c.flush_asid(asid),
            WalkCacheOp::FlushAll => c.flush_all(),
        }
    }
}

/// One request to a walker running on its own thread, in trace order.
#[derive(Clone, Copy, Debug)]
pub enum WalkerOp<S: Copy, T: Copy> {
    /// A walk of `va` in address space `space`, along the functional path `full`
    /// (`split`: the table's walk splits).
    Walk {
        split: S,
        space: Asid,
        va: u64,
        full: T,
    },
    WalkCaches(WalkCacheOp),
    Mem(MemOp),
}

impl<P: FastPaths> Mmu<P> {
    /// The MMU of `settings` (or a whole `&Config`), with the kind's walk caches.
    pub(crate) fn new<'a>(settings: impl Into<MmuSettings<'a>>, walk_caches: P::Caches) -> Result<Mmu<P>> {
        let s: MmuSettings = settings.into();
        let tlbs = TlbHierarchy::new(s.tlb, s.mmu.seed)?;
        let mem = MemoryHierarchy::new(s.cache, s.memory, s.mmu.seed)?;
        let levels = tlbs.levels();
        let mut tlb_latency = [Vec::new(), Vec::new()];
        for (side, lat) in tlb_latency.iter_mut().enumerate() {
            let mut acc = 0u64;
            for ids in tlbs.side(side == 1) {
                acc += ids.iter().map(|&i| tlbs.tlbs[i].latency as u64).max().unwrap_or(0);
                lat.push(acc);
            }
        }
        let first_hit = mem.paths().walk.first().map_or(0, |&id| mem.caches[id].latency as u64);
        let walker = Walker {
            walk_caches,
            mem,
            timer: WalkTimer::default(),
            mem_thread: None,
            path: WalkPath::new(),
            walk_open: false,
            nested_path: WalkPath::new(),
            walks: WalkCounters {
                step_refs: vec![0; crate::stats::TRACKED_STEPS],
                step_walks: vec![0; crate::stats::TRACKED_STEPS],
                ..WalkCounters::default()
            },
            cycles: CycleCounters::default(),
            fixed_miss_cycles: s.mmu.fixed_miss_cycles,
            refill: RefillHandler::new(&s.mmu.refill, s.refill_table),
            first_hit,
        };
        Ok(Mmu {
            tlbs,
            tlb_latency,
            tlb_levels: [vec![(0, 0); levels], vec![(0, 0); levels]],
            lookup_ends: [vec![0; levels + 1], vec![0; levels + 1]],
            tlb_cycles: 0,
            probed_data_tlb: false,
            walker: Some(walker),
            walker_thread: None,
            faulting: 0,
            walks_sent: 0,
        })
    }

    /// Bring `tlb_levels` up to date: a lookup that ended at level h (hit there, or
    /// missed them all) reached every level up to h.
    pub(crate) fn fold_lookups(&mut self) {
        for (levels, ends) in self.tlb_levels.iter_mut().zip(&mut self.lookup_ends) {
            let mut reached = 0;
            for h in (0..ends.len()).rev() {
                reached += ends[h];
                if h < levels.len() {
                    levels[h].0 += reached;
                    levels[h].1 += ends[h];
                }
            }
            ends.iter_mut().for_each(|e| *e = 0);
        }
    }

    /// The walker (attached: outside the per-access path, after [`Mmu::attach`]).
    pub(crate) fn walker(&self) -> &Walker<P> {
        self.walker.as_ref().expect("the walker is attached")
    }

    pub(crate) fn walker_mut(&mut self) -> &mut Walker<P> {
        self.walker.as_mut().expect("the walker is attached")
    }

    /// Look `va` up in the TLBs of a side with tag `asid`, and walk the table (for
    /// address space `space`) if they miss. Counts the lookup and the walk; fills
    /// nothing.
    #[inline]
    pub(crate) fn lookup(&mut self, instr: bool, va: u64, asid: Asid, space: Asid, pt: &mut P) -> Lookup {
        let side = instr as usize;
        match self.tlbs.lookup(instr, va, asid) {
            Some(hit) => {
                self.tlb_cycles += self.tlb_latency[side][hit.level];
                self.lookup_ends[side][hit.level] += 1;
                Lookup::Hit { t: hit.entry.translation(), level: hit.level }
            }
            None => {
                let levels = self.tlbs.levels();
                self.tlb_cycles += self.tlb_latency[side][levels - 1];
                self.lookup_ends[side][levels] += 1;
                Lookup::Miss(self.walk(space, va, pt))
            }
        }
    }

    /// One page walk: here, or, with the walker on its thread, the table's functional
    /// path, sent to be replayed there.
    #[inline]
    fn walk(&mut self, space: Asid, va: u64, pt: &mut P) -> Option<Translation> {
        if let Some(Detached { thread: th, front, split }) = &mut self.walker_thread {
            let split = *split;
            let t = if P::Split::ONE_PIECE {
                let mut full = PathOf::<P>::default();
                let t = split.full_path_into(pt, space, va, front, &mut full);
                th.push(WalkerOp::Walk { split, space, va, full });
                t
            } else {
                split.full_path(pt, space, va, front, |full| th.push(WalkerOp::Walk { split, space, va, full }))
            };
            self.walks_sent += 1;
            return t;
        }
        let w = self.walker.as_mut().expect("the walker is attached");
        w.path.clear();
        let t = pt.walk(space, va, &mut w.walk_caches, &mut w.path);
        let (tlbs, tlb_latency, probed) = (&mut self.tlbs, &self.tlb_latency, &mut self.probed_data_tlb);
        w.time_walk(|w, array_va| {
            // The probe changes data-side TLB state.
            *probed = true;
            w.translate_array(tlbs, tlb_latency, pt, space, array_va)
        });
        t
    }

    /// A walk that faulted (the walker counts it with the walk's other counters).
    #[inline]
    pub(crate) fn note_faulting_walk(&mut self) {
        match &mut self.walker {
            Some(w) => w.walks.faulting += 1,
            None => self.faulting += 1,
        }
    }

    /// Apply a TLB and walk-cache invalidation.
    pub(crate) fn shootdown(&mut self, s: Shootdown) {
        match s {
            Shootdown::Page { asid, va, size } => {
                self.tlbs.invalidate_page(va, size, asid);
                self.walk_cache_op(WalkCacheOp::Invalidate { asid, va });
            }
            Shootdown::Space { asid } => {
                self.tlbs.flush_asid(asid);
                self.walk_cache_op(WalkCacheOp::FlushAsid(asid));
            }
            Shootdown::TlbEntry { asid, va } => self.tlbs.invalidate(va, asid),
            Shootdown::TlbFlush => self.tlbs.flush_all(),
        }
    }

    /// A context switch without ASID tags.
    pub(crate) fn flush_all(&mut self) {
        self.tlbs.flush_all();
        self.walk_cache_op(WalkCacheOp::FlushAll);
    }

    fn walk_cache_op(&mut self, op: WalkCacheOp) {
        match &mut self.walker_thread {
            Some(d) => {
                d.thread.push(WalkerOp::WalkCaches(op));
                op.apply(&mut d.front);
            }
            None => op.apply(&mut self.walker_mut().walk_caches),
        }
    }

    /// Send one op to the memory model, wherever it runs.
    #[inline(always)]
    pub(crate) fn mem_op(&mut self, op: MemOp) {
        match &mut self.walker_thread {
            Some(d) => d.thread.push(WalkerOp::Mem(op)),
            None => self.walker.as_mut().expect("the walker is attached").mem_op(op),
        }
    }

    /// Whether the cache hierarchy's timing is elsewhere (on a thread) until `attach`.
    #[inline(always)]
    pub(crate) fn mem_detached(&self) -> bool {
        self.walker.as_ref().is_none_or(|w| w.mem_thread.is_some())
    }

    /// Walks so far: done, and sent to the walker's thread.
    #[inline]
    pub(crate) fn walks_so_far(&self) -> u64 {
        self.walks_sent + self.walker.as_ref().map_or(0, |w| w.walks.count)
    }

    /// Move the walker (`whole`, if the table splits its walk: its walk caches divide
    /// too, [`SplitWalk::split_caches`]) or only its cache hierarchy to a thread of
    /// its own. If the host cannot start one, the run goes
    /// on inline (the results are the same) after a warning. Returns whether it moved.
    #[cold]
    pub(crate) fn detach(&mut self, whole: bool) -> bool {
        let Some(split) = split_walk::<P>().filter(|_| whole) else {
            return self.walker_mut().detach_mem();
        };
        let mut w = self.walker.take().expect("the walker is attached");
        let front = split.split_caches(&mut w.walk_caches);
        match OpThread::start_or_inline("vmlab-walker", w, "the walker") {
            Ok(thread) => self.walker_thread = Some(Detached { thread, front, split }),
            Err(mut w) => {
                split.rejoin_caches(&mut w.walk_caches, front);
                self.walker = Some(w);
            }
        }
        self.walker_thread.is_some()
    }

    /// Bring the walker and its cache hierarchy back (waiting for their threads to
    /// apply every op sent).
    pub(crate) fn attach(&mut self) {
        if let Some(d) = self.walker_thread.take() {
            let mut w = d.thread.stop();
            d.split.rejoin_caches(&mut w.walk_caches, d.front);
            w.walks.faulting += std::mem::take(&mut self.faulting);
            self.walks_sent = 0;
            self.walker = Some(w);
        }
        self.walker_mut().attach_mem();
    }

    /// Take the TLB, walk, data-reference and copy cycles counted so far (after
    /// `attach`).
    pub(crate) fn take_cycles(&mut self) -> CycleCounters {
        let mut c = std::mem::take(&mut self.walker_mut().cycles);
        c.tlb += std::mem::take(&mut self.tlb_cycles);
        c
    }

    /// Cycles so far, for the core's clock (the walker's only while it is here).
    #[inline(always)]
    pub(crate) fn cycles_so_far(&self) -> u64 {
        self.tlb_cycles + self.walker.as_ref().map_or(0, |w| w.cycles.walk + w.cycles.data + w.cycles.recolor_copy)
    }
}

impl<P: FastPaths> Walker<P> {
    /// Time the walk whose references are in `path`: they go through the cache
    /// hierarchy step by step; a step's references are issued in parallel, so a step
    /// costs its slowest reference. A virtual reference (linear arrays) is translated by
    /// `virt` (through the data TLB, or a nested walk: Elphinstone §3.3), which returns
    /// (physical address, TLB cycles of a hit, nested refs, nested steps).
    #[inline]
    fn time_walk(&mut self, mut virt: impl FnMut(&mut Walker<P>, u64) -> (Option<u64>, u64, u64, u64)) {
        // Cycles of the walk's own besides its steps' references.
        let mut cycles = self.walk_caches.probe_latency() + self.path.extra_cycles();
        let mut step = u16::MAX;
        let (mut refs, mut steps) = (self.path.refs().len() as u64, self.path.steps() as u64);
        // The steps a software handler runs (its code's fetches go between them).
        let handler = self.refill.take();
        let handled = handler.as_ref().and_then(|h| h.handled_steps(steps));
        let batched = match &mut self.mem_thread {
            // Physical references only, to the memory thread: queued in one batch.
            Some(t) if !self.path.has_virtual_refs() && handled.is_none() => {
                let ops = self.path.refs().iter().map(|r| {
                    let new_step = r.step != step;
                    step = r.step;
                    MemOp::WalkRef { pa: r.pa, new_step, nested: false }.into()
                });
                t.push_batch(ops);
                true
            }
            _ => false,
        };
        if let (Some(h), Some(0)) = (&handler, handled.as_ref().map(|r| r.start)) {
            // Every refill is the handler's: it starts before the first step.
            self.handler_fetches(h.prologue_fetches());
        }
        // References left to send one by one.
        let one_by_one = if batched { 0 } else { self.path.refs().len() };
        for i in 0..one_by_one {
            let r = self.path.refs()[i];
            let pa = if r.what == WalkRef::VIRTUAL {
                let (pa, tlb_cycles, nested_refs, nested_steps) = virt(self, r.pa);
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
            if let (true, Some(h), Some(steps)) = (new_step, &handler, &handled) {
                let k = r.step as u64;
                if k == steps.start && k > 0 {
                    self.handler_fetches(h.prologue_fetches());
                }
                if steps.contains(&k) {
                    self.handler_fetches(h.step_fetches());
                }
            }
            self.mem_op(MemOp::WalkRef { pa, new_step, nested: false });
        }
        if let (Some(h), Some(steps)) = (&handler, &handled) {
            // Exception entry and return and the instructions; a load that hits the
            // first level hides behind its own instruction (refill.rs).
            let n = steps.end - steps.start;
            self.handler_fetches(h.epilogue_fetches());
            let code = h.cycles(n);
            cycles += code - (n * self.first_hit).min(code);
            self.walks.handler_refills += 1;
            self.walks.handler_instructions += h.instructions(n);
        }
        self.refill = handler;
        // Background references (walk-table fills): cache traffic and MMU requests, no latency.
        for i in 0..self.path.background().len() {
            self.mem_op(MemOp::Background { pa: self.path.background()[i] });
        }
        let background = self.path.background().len() as u64;
        refs += background;
        self.walks.background_refs += background;
        // Parallel references per step of the walk's own path (Stojkovic et al. Fig. 11).
        let last = crate::stats::TRACKED_STEPS - 1;
        let n_steps = self.path.steps() as usize;
        if self.path.one_ref_per_step() && n_steps <= last {
            debug_assert_eq!(self.path.refs().len(), n_steps);
            for k in 0..n_steps {
                self.walks.step_refs[k] += 1;
                self.walks.step_walks[k] += 1;
            }
        } else {
            for r in self.path.refs() {
                self.walks.step_refs[(r.step as usize).min(last)] += 1;
            }
            for k in 0..n_steps.min(last + 1) {
                self.walks.step_walks[k] += 1;
            }
        }
        self.walks.count += 1;
        self.walks.refs += refs;
        self.walks.steps += steps;
        // A fixed miss-handler cost replaces the modelled latency (Romer §3.5.1).
        self.mem_op(MemOp::WalkEnd { cycles, fixed: self.fixed_miss_cycles, trap: handled.is_some() });
    }

    /// Translate an address of the page table's own virtual array: through the data TLB,
    /// or by a nested walk (whose references and cycles go to the memory model as the
    /// walk's nested part). Returns (physical address, TLB cycles of a hit, nested refs,
    /// nested steps).
    fn translate_array(&mut self, tlbs: &mut TlbHierarchy, tlb_latency: &[Vec<u64>; 2], pt: &mut P, asid: Asid, va: u64) -> (Option<u64>, u64, u64, u64) {
        self.walks.nested_lookups += 1;
        if let Some(hit) = tlbs.lookup(false, va, asid) {
            let t = hit.entry.translation();
            if hit.level > 0 {
                tlbs.fill(false, va, asid, &t, hit.level);
            }
            return (Some(t.phys(va)), tlb_latency[0][hit.level], 0, 0);
        }
        self.walks.nested_misses += 1;
        let levels = tlbs.levels();
        self.nested_path.clear();
        let t = pt.walk_nested(asid, va, &mut self.walk_caches, &mut self.nested_path);
        let cycles = tlb_latency[0][levels - 1] + self.nested_path.extra_cycles();
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
            tlbs.fill(false, va, asid, &t, levels);
            t.phys(va)
        });
        (pa, 0, n_refs, n_steps)
    }

    /// The refill handler fetches its instructions at `pcs`, in order.
    fn handler_fetches(&mut self, pcs: impl Iterator<Item = u64>) {
        for pa in pcs {
            self.mem_op(MemOp::HandlerFetch { pa });
        }
    }

    /// Send one op to the memory model: inline, or to its thread.
    #[inline(always)]
    fn mem_op(&mut self, op: MemOp) {
        match &mut self.mem_thread {
            Some(t) => t.push(op.into()),
            None => self.timer.apply(&mut self.mem, op).account(&mut self.cycles, &mut self.walks.latency),
        }
    }

    /// Move the hierarchy (and the time model) to its own thread (see [`Mmu::detach`]).
    #[cold]
    fn detach_mem(&mut self) -> bool {
        match MemoryThread::start_memory(std::mem::take(&mut self.mem), std::mem::take(&mut self.timer)) {
            Ok(t) => self.mem_thread = Some(t),
            Err((mem, timer)) => (self.mem, self.timer) = (mem, timer),
        }
        self.mem_thread.is_some()
    }

    /// Run the time model on the op stream from now on.
    pub(crate) fn set_time_model(&mut self, tm: crate::time::TimeModel) {
        self.timer.time = Some(Box::new(tm));
    }

    /// The time model (attached: after [`Mmu::attach`]).
    pub(crate) fn time_model(&self) -> Option<&crate::time::TimeModel> {
        self.timer.time.as_deref()
    }

    pub(crate) fn time_model_mut(&mut self) -> Option<&mut crate::time::TimeModel> {
        self.timer.time.as_deref_mut()
    }

    /// Bring the memory model back inline (waiting for its thread to apply every op
    /// sent), with the cycles and walk latencies it timed.
    fn attach_mem(&mut self) {
        if let Some(t) = self.mem_thread.take() {
            let d = t.stop();
            self.mem = d.mem;
            self.timer = d.timer;
            self.cycles.walk += d.cycles.walk;
            self.cycles.data += d.cycles.data;
            self.cycles.recolor_copy += d.cycles.recolor_copy;
            self.walks.latency.merge(&d.walk_latency);
        }
    }
}

impl<P: FastPaths> OpSink for Walker<P> {
    type Op = WalkerOp<P::Split, PathOf<P>>;

    /// The walk of `Mmu::walk` after a TLB miss, along the path the engine found: the
    /// same walk-cache probes and fills, references and accounting.
    #[inline]
    fn apply(&mut self, op: &Self::Op) {
        match op {
            WalkerOp::Walk { split, space, va, full } => {
                if !self.walk_open {
                    self.path.clear();
                }
                split.replay(full, *space, *va, &mut self.walk_caches, &mut self.path);
                // A walk sent in pieces is timed once its last piece is in.
                self.walk_open = split.path_continues(full);
                if self.walk_open {
                    return;
                }
                // Only tables that do not split make virtual references, and those walk inline.
                self.time_walk(|_, _| unreachable!("a virtual walk reference from a table that splits its walk"));
            }
            WalkerOp::WalkCaches(op) => op.apply(&mut self.walk_caches),
            WalkerOp::Mem(op) => self.mem_op(*op),
        }
    }

    /// Streamed, as the memory thread's ops are (`mem::thread`, "The hand-over" in
    /// docs/performance.md): a plain store would first take the line back from the
    /// walker's core, which has just read the buffer.
    #[inline(always)]
    unsafe fn store(dst: *mut Self::Op, op: Self::Op) {
        // SAFETY: the caller's contract.
        unsafe { crate::host::stream_copy(dst, &op) }
    }
}
