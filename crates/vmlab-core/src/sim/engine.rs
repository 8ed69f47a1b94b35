//! The simulation engine for one page-table organisation `P`: record stream in, stats
//! out. Monomorphised per page-table kind, so the per-access path has no dynamic
//! dispatch and allocates nothing.

use crate::addr::{AccessKind, Asid, PageSize, Perms, Pid};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::mem::thread::{DataRun, RunOp, WalkerThread};
use crate::mem::MemOp;
use crate::mmu::regions::RegionIds;
use crate::mmu::{Lookup, Mmu};
use crate::os::policy::TlbMiss;
use crate::os::{Os, Shootdown};
use crate::pt::{split_walk, FastPaths, Translation, WalkCaches};
use crate::stats::{CycleCounters, RunCounters, WalkCounters};
use crate::time::AccessTime;
use crate::trace::{Access, Dep, Record, TraceSource};

/// The translation of the previous access on one side (data / instruction). While the
/// next access of that side touches the same 4 KiB page, nothing else has touched the
/// L1 TLBs of that side, and no shootdown happened, its L1 lookup is a hit on the same
/// entry, which is already most-recently-used: replaying it would change no state. The
/// engine then only counts it (exact for LRU, tree-PLRU and random replacement).
#[derive(Clone, Copy, Default)]
struct SamePage {
    valid: bool,
    vpn: u64,
    asid: Asid,
    perms: u8,
    /// Physical address of the 4 KiB page.
    pa: u64,
    /// Position (in the side's level-1 structure list) of the structure that hit.
    l1_slot: usize,
}

impl SamePage {
    /// Whether an access at `va` of `asid` needing permission bits `need` is a hit on
    /// this entry.
    #[inline(always)]
    fn covers(&self, va: u64, asid: Asid, need: u8) -> bool {
        self.valid && self.vpn == va >> 12 && self.asid == asid && self.perms & need == need
    }
}

/// How many records ahead the engine prefetches page-table entries.
const PREFETCH_DISTANCE: usize = 12;

/// With a window in instructions, the accesses by which the trace must have counted an
/// instruction (a tick or a fetch); a trace that counts none is an error then, not a
/// run that never stops.
const INSTRUCTIONS_WITHIN: u64 = 1 << 16;

/// Whether a record begins an instruction: a tick of at least one, or a fetch. (An
/// access that is not a fetch belongs to the instruction before it.)
#[inline(always)]
fn begins_instruction(r: &Record) -> bool {
    match r {
        Record::Tick(n) => *n > 0,
        Record::Access(a) => a.kind.is_instr(),
        _ => false,
    }
}

pub struct Engine<P: FastPaths> {
    pub os: Os<P>,
    /// The timing side: the TLBs, and the walker (walk caches, caches), which may run
    /// on a thread of its own: everything that reads the walker outside the per-access
    /// path calls [`Engine::attach`] first.
    mmu: Mmu<P>,
    /// Use a second host thread during `feed` (`use_memory_thread`): for the whole
    /// walker if `split`, else for the cache hierarchy.
    detach: bool,
    split: bool,
    asid_tags: bool,
    data_refs: bool,
    /// Data references may go to the hierarchy in runs (`same_page_run`), on its thread
    /// or inline: no reference's latency feeds back into the simulation
    /// (`MemoryHierarchy::can_detach`: no write buffer; no recolouring, whose buffers
    /// and alarms interrupt the OS after a reference).
    data_runs: bool,
    fault_cycles: u64,
    /// `os.populate`: every new mapping is faulted in whole.
    populate: bool,
    /// Whether the sides share a level-1 structure (then one side's lookups disturb
    /// the other's fast path).
    shared_l1: bool,
    same_page: [SamePage; 2],
    /// same_page_hits[side][slot]: L1 hits counted without a lookup, per structure.
    same_page_hits: [Vec<u64>; 2],
    /// l1_slot_of[side][shift]: the first level-1 structure of the side holding pages
    /// of 2^shift bytes (its position in the side's level-1 list), or u8::MAX.
    l1_slot_of: [[u8; 64]; 2],
    cur_pid: Option<Pid>,
    cur_asid: Asid,
    max_accesses: u64,
    /// Access count at which the statistics warm-up ends (`u64::MAX`: none, or done).
    warmup_at: u64,
    /// The window in instructions: the warm-up ends, or the run stops, before the first
    /// record that begins an instruction once this many have run (`u64::MAX`: none; the
    /// warm-up's also once done).
    max_instructions: u64,
    warmup_instructions_at: u64,
    /// Access count by which the trace must have counted an instruction, with a window
    /// in instructions ([`INSTRUCTIONS_WITHIN`]; `u64::MAX`: none, or checked).
    instructions_by: u64,
    /// The window's key in instructions, for the error of a trace that counts none.
    instruction_key: &'static str,
    /// The next thresholds, kept up to date by [`Engine::update_stops`]: the access
    /// count at which the warm-up ends, `sim.max_accesses` stops the run or the trace
    /// must have counted an instruction, whichever comes first; and the instruction
    /// count from which the warm-up's end or `sim.max_instructions` is due (at the next
    /// record that begins an instruction).
    access_stop: u64,
    instruction_stop: u64,
    /// The counters at the end of the warm-up, subtracted by [`Engine::finish`].
    warmup_base: Option<Box<WarmupBase>>,
    /// The walk caches' counters at the end of the warm-up (subtracted in the stats).
    pub walk_cache_base: Vec<(String, crate::pt::CacheCounters)>,
    /// The run's accesses and instructions at the end of the warm-up, once finished.
    warmup_length: (u64, u64),
    /// The page-size policy watches last-level TLB misses.
    policy_misses: bool,
    /// The recolouring policy watches TLB misses and contents.
    recolor_tlb: bool,
    /// A recolouring policy runs (timer and interrupt checks per access).
    recolor_on: bool,
    /// Someone watches the TLBs (policy_misses || recolor_tlb).
    watching: bool,
    /// Background policy work (khugepaged): next due time, period, and whether the
    /// clock counts instructions (else accesses). `u64::MAX`: never.
    background_at: u64,
    background_every: u64,
    background_by_instr: bool,
    pub run: RunCounters,
    /// Fault and policy cycles during the run; every cycle counter once the run
    /// finished (the MMU's are folded in by `settle_cycles`).
    pub cycles: CycleCounters,
    /// Changes to the watched TLBs, drained for the policy (reused buffer).
    tlb_changes: Vec<crate::mmu::TlbChange>,
    /// Prefetch page-table entries for the next batch (walks were frequent).
    prefetch: bool,
    /// Prefetch the OS page-index slots of the accesses ahead too: faults are frequent
    /// (first touches), and each one's page-index lookup misses the host cache.
    prefetch_faults: bool,
    /// Region IDs with TLB sharing (`mmu.regions.share`, `mmu.regions.share_text`).
    pub regions: Option<RegionIds>,
    /// Some TLB's entries map page pairs (`tlb.NAME.pairs`).
    pairs: bool,
    /// The time model runs (`time.model`): every translation sends it a `MemOp::Time`.
    timed: bool,
    /// Instructions, TLB cycles and OS cycles at the last `MemOp::Time`.
    time_mark: [u64; 3],
    /// The time model's counters at the end of the warm-up, and at the end of the run.
    pub time_base: Option<crate::time::TimeStats>,
    pub time_end: Option<crate::time::TimeStats>,
}

impl<P: FastPaths> Engine<P> {
    pub fn new(cfg: &Config, pt: P, walk_caches: P::Caches) -> Result<Engine<P>> {
        let os = Os::new(cfg, pt)?;
        let mut mmu = Mmu::new(cfg, walk_caches)?;
        let tlbs = &mmu.tlbs;
        let shared_l1 = tlbs.side(false).first().is_some_and(|d| tlbs.side(true).first().is_some_and(|i| d.iter().any(|x| i.contains(x))));
        let l1_len = |instr: bool| tlbs.side(instr).first().map_or(0, |v| v.len());
        let same_page_hits = [vec![0; l1_len(false)], vec![0; l1_len(true)]];
        let mut l1_slot_of = [[u8::MAX; 64]; 2];
        for (side, slots) in l1_slot_of.iter_mut().enumerate() {
            for (shift, slot) in slots.iter_mut().enumerate() {
                let Ok(size) = PageSize::from_shift(shift as u8) else { continue };
                let l1 = tlbs.side(side == 1).first().map_or(&[][..], |v| &v[..]);
                if let Some(p) = l1.iter().position(|&id| tlbs.tlbs[id].holds(size)) {
                    *slot = p as u8;
                }
            }
        }
        let policy_misses = os.policy.wants_tlb_misses();
        let pairs = mmu.tlbs.pairs();
        if pairs && (policy_misses || os.recolor.as_ref().is_some_and(|r| r.wants_tlb())) {
            let name = mmu.tlbs.tlbs.iter().find(|t| t.pairs()).map_or("", |t| &t.name);
            return Err(Error::config(
                format!("tlb.{name}.pairs"),
                "page-pair entries cannot be watched by a page-size or recolouring policy (os.policy, os.recolor) yet",
            ));
        }
        let (background_every, background_by_instr) = os.policy.background_clock().unwrap_or((0, false));
        let timed = cfg.time.model == crate::time::TimeModelKind::Ooo;
        if timed {
            let tm = crate::time::TimeModel::new(&cfg.time, &cfg.cache, &mmu.walker().mem);
            mmu.walker_mut().set_time_model(tm);
        }
        let recolor_on = if let Some(r) = &os.recolor {
            r.install(&mut mmu.walker_mut().mem, os.mm.placement.colors);
            true
        } else {
            false
        };
        let data_runs = cfg.memory.data_refs && !recolor_on && mmu.walker().mem.can_detach();
        let mut e = Engine {
            os,
            mmu,
            detach: false,
            split: false,
            asid_tags: cfg.mmu.asid_tags,
            data_refs: cfg.memory.data_refs,
            data_runs,
            fault_cycles: cfg.os.fault_cycles,
            populate: cfg.os.populate,
            shared_l1,
            same_page: [SamePage::default(); 2],
            same_page_hits,
            l1_slot_of,
            cur_pid: None,
            cur_asid: 0,
            max_accesses: cfg.sim.max_accesses,
            warmup_at: if cfg.sim.warmup_accesses == 0 { u64::MAX } else { cfg.sim.warmup_accesses },
            max_instructions: if cfg.sim.max_instructions == 0 { u64::MAX } else { cfg.sim.max_instructions },
            warmup_instructions_at: if cfg.sim.warmup_instructions == 0 { u64::MAX } else { cfg.sim.warmup_instructions },
            instructions_by: if cfg.sim.by_instructions() { INSTRUCTIONS_WITHIN } else { u64::MAX },
            instruction_key: cfg.sim.instruction_key(),
            access_stop: 0,
            instruction_stop: 0,
            warmup_base: None,
            walk_cache_base: Vec::new(),
            warmup_length: (0, 0),
            policy_misses,
            recolor_tlb: false,
            recolor_on,
            watching: false,
            background_at: if background_every == 0 { u64::MAX } else { background_every },
            background_every,
            background_by_instr,
            run: RunCounters::default(),
            cycles: CycleCounters::default(),
            tlb_changes: Vec::new(),
            prefetch: false,
            prefetch_faults: false,
            regions: (cfg.mmu.regions.share || cfg.mmu.regions.share_text).then(|| RegionIds::new(&cfg.mmu.regions)),
            pairs,
            timed,
            time_mark: [0; 3],
            time_base: None,
            time_end: None,
        };
        e.refresh_policy_hooks();
        e.update_stops();
        Ok(e)
    }

    /// Drain `src` through the model. `on_batch` is called after each batch with the
    /// records consumed so far (progress reporting).
    pub fn run(&mut self, src: &mut dyn TraceSource, mut on_batch: impl FnMut(u64)) -> Result<()> {
        let mut buf = Vec::with_capacity(crate::trace::BATCH);
        while src.next_batch(&mut buf)? {
            crate::interrupt::check()?;
            let done = self.feed(&buf)?;
            on_batch(self.run.records);
            if done {
                break;
            }
        }
        self.finish()
    }

    /// Simulate one batch of records. Returns `true` once `sim.max_accesses` or
    /// `sim.max_instructions` is reached (the rest of the stream is then ignored). Call
    /// [`Engine::finish`] at the end.
    pub fn feed(&mut self, buf: &[Record]) -> Result<bool> {
        // A window in instructions may be due before the batch's first record (the last
        // batch ended with the references of its last instruction).
        if self.run.instructions >= self.next_instruction_threshold() && self.instruction_window(buf.first())? {
            return Ok(true);
        }
        // The loop counts instructions against a threshold only while there is one (it
        // never comes back once passed).
        if self.next_instruction_threshold() == u64::MAX {
            self.feed_batch::<false>(buf)
        } else {
            self.feed_batch::<true>(buf)
        }
    }

    fn feed_batch<const COUNT_INSTRUCTIONS: bool>(&mut self, buf: &[Record]) -> Result<bool> {
        if self.detach {
            self.detach_timing();
        }
        let walks_before = self.walks_so_far();
        let faults_before = self.os.mm.counters.count;
        // Only counting (and, with data references, sending each access's op, gathered
        // into runs) is left for a same-page access while nothing else looks at each
        // access (see `same_page_run`).
        let runs = !self.recolor_on && self.background_at == u64::MAX;
        // The page last prefetched for: consecutive accesses to one page (a read, then
        // its write) need one prefetch.
        let mut prefetched = u64::MAX;
        let mut threshold = self.next_threshold();
        let mut instruction_threshold = self.next_instruction_threshold();
        let mut i = 0;
        while i < buf.len() {
            if runs && (!self.data_refs || self.data_runs) {
                // A cheap look first: a run pays off from two same-page accesses on
                // (gups's write after its read is a run of one, left to the ordinary path).
                // (A tick joins any run: synthetic traces put one before each access.)
                let on_page = |r: &Record| match r {
                    Record::Access(a) => a.vaddr >> 12 == self.same_page[a.kind.is_instr() as usize].vpn,
                    Record::Tick(_) => true,
                    _ => false,
                };
                // The next record first: it is the one that differs when only one
                // access is on the page (gups's read; its write).
                if buf.get(i + 1).is_some_and(on_page) && on_page(&buf[i]) {
                    // (The count-only loop is compiled without the ops' code.)
                    i = if self.data_refs {
                        self.same_page_run::<COUNT_INSTRUCTIONS, true>(buf, i)
                    } else {
                        self.same_page_run::<COUNT_INSTRUCTIONS, false>(buf, i)
                    };
                    if i == buf.len() {
                        break;
                    }
                }
            }
            let r = &buf[i];
            if self.prefetch {
                // Look ahead: the walk of a later access then finds its entries in
                // the host cache. A hint only; no simulated state changes.
                if let Some(Record::Access(a)) = buf.get(i + PREFETCH_DISTANCE) {
                    if Some(a.pid) == self.cur_pid && a.vaddr >> 12 != prefetched {
                        prefetched = a.vaddr >> 12;
                        self.os.mm.pt.prefetch(self.cur_asid, a.vaddr);
                        if self.prefetch_faults {
                            if let Some(s) = self.os.mm.space(a.pid) {
                                s.prefetch_mapping(a.vaddr);
                            }
                        }
                    }
                }
            }
            self.record(r).map_err(|e| self.with_position(e))?;
            self.run.records += 1;
            if self.run.accesses >= threshold || (COUNT_INSTRUCTIONS && self.run.instructions >= instruction_threshold) {
                if self.thresholds(buf.get(i + 1))? {
                    return Ok(true);
                }
                threshold = self.next_threshold();
                instruction_threshold = self.next_instruction_threshold();
            }
            i += 1;
        }
        // Prefetch while walks are frequent (> 1 in 8 records); otherwise it would
        // only cost time.
        self.prefetch = self.walks_so_far().saturating_sub(walks_before) * 8 > buf.len() as u64;
        // And the page index's while faults are (> 1 in 64 records).
        self.prefetch_faults = self.prefetch && (self.os.mm.counters.count - faults_before) * 64 > buf.len() as u64;
        Ok(false)
    }

    /// Walks so far (sent so far, while the walker runs on its own thread).
    fn walks_so_far(&self) -> u64 {
        self.mmu.walks_so_far()
    }

    /// The access count at which the warm-up ends or `sim.max_accesses` stops the run,
    /// or the trace must have counted an instruction, whichever comes first.
    #[inline(always)]
    fn next_threshold(&self) -> u64 {
        self.access_stop
    }

    /// The instruction count from which the warm-up's end or `sim.max_instructions` is
    /// due at the next record that begins an instruction.
    #[inline(always)]
    fn next_instruction_threshold(&self) -> u64 {
        self.instruction_stop
    }

    /// Recompute the next thresholds after one of them passed.
    fn update_stops(&mut self) {
        let max_accesses = if self.max_accesses == 0 { u64::MAX } else { self.max_accesses };
        self.access_stop = self.warmup_at.min(self.instructions_by).min(max_accesses);
        self.instruction_stop = self.warmup_instructions_at.min(self.max_instructions);
    }

    /// A threshold was reached by the record just simulated; `next` is the record after
    /// it (`None` at the end of the batch). End the warm-up, or say that the run stops.
    /// A count of accesses is due at the access that reaches it; a count of instructions
    /// before the next record that begins an instruction, so that the last instruction's
    /// references are in (at the end of the batch, [`Engine::feed`] checks the next
    /// batch's first record).
    #[cold]
    #[inline(never)]
    fn thresholds(&mut self, next: Option<&Record>) -> Result<bool> {
        if self.run.accesses >= self.instructions_by {
            self.instructions_counted()?;
        }
        if self.run.accesses >= self.warmup_at {
            self.end_warmup()?;
        }
        if self.max_accesses != 0 && self.run.accesses >= self.max_accesses {
            return Ok(true);
        }
        if self.run.instructions >= self.next_instruction_threshold() {
            return self.instruction_window(next);
        }
        Ok(false)
    }

    /// The instruction count has reached a threshold of the window in instructions: act
    /// on it if `next` begins an instruction. Returns whether the run stops.
    #[cold]
    fn instruction_window(&mut self, next: Option<&Record>) -> Result<bool> {
        if !next.is_some_and(begins_instruction) {
            return Ok(false);
        }
        if self.run.instructions >= self.warmup_instructions_at {
            self.end_warmup()?;
        }
        Ok(self.run.instructions >= self.max_instructions)
    }

    /// With a window in instructions: the trace must count them (ticks or fetches).
    fn instructions_counted(&mut self) -> Result<()> {
        self.instructions_by = u64::MAX;
        self.update_stops();
        if self.run.instructions == 0 && self.run.accesses > 0 {
            let within = if self.run.accesses >= INSTRUCTIONS_WITHIN { format!(" in its first {INSTRUCTIONS_WITHIN} accesses") } else { String::new() };
            return Err(Error::config(
                self.instruction_key,
                format!(
                    "the trace counts no instructions{within} (no tick or instruction-fetch record), so a window in instructions cannot be measured; state it in accesses (sim.max_accesses, sim.warmup_accesses), or give the synthetic workload instrs_per_access or code"
                ),
            ));
        }
        Ok(())
    }

    /// Consume the records from `from` on that need nothing but counting, and return
    /// the index of the first one that needs more: ticks, and accesses of the running
    /// process within one page that is the page of its side's same-page entry, with the
    /// permissions the access needs (the same-page path of `translate`). Only called
    /// while no per-access hook runs (recolouring, background policy work) and data
    /// references, if on, may go in runs (`data_runs`: no write buffer reads the core's
    /// clock, so they are sent at cycle 0): each access then sends the op `translate`
    /// would, gathered into runs. Stops one access short of the
    /// warm-up's end and of `sim.max_accesses`, and one instruction short of the window
    /// in instructions, so the ordinary path takes the record that reaches them
    /// (`COUNT_INSTRUCTIONS`: while there is one). The counters and the ops end up
    /// exactly as the ordinary path leaves them.
    #[inline]
    fn same_page_run<const COUNT_INSTRUCTIONS: bool, const DATA_REFS: bool>(&mut self, buf: &[Record], from: usize) -> usize {
        let Some(pid) = self.cur_pid else { return from };
        let stop = self.next_threshold();
        let instruction_stop = if COUNT_INSTRUCTIONS { self.next_instruction_threshold() } else { u64::MAX };
        if stop <= self.run.accesses || (COUNT_INSTRUCTIONS && instruction_stop <= self.run.instructions) {
            // A threshold is due after the very next record, whatever it is.
            return from;
        }
        let mut budget = stop - self.run.accesses - 1;
        // Instructions the run may take without reaching the instruction threshold, or
        // (once it has sent ops, it cannot hand its records back) overflowing the count:
        // the ordinary path reports that, at the tick. A count-only run checks for the
        // overflow once, at its end.
        let budgeted = COUNT_INSTRUCTIONS || DATA_REFS;
        let headroom = u64::MAX - self.run.instructions;
        let mut instruction_budget = if COUNT_INSTRUCTIONS { (instruction_stop - self.run.instructions - 1).min(headroom) } else { headroom };
        let (sp, asid) = (self.same_page, self.cur_asid);
        debug_assert_eq!(DATA_REFS, self.data_refs);
        let timed = DATA_REFS && self.timed;
        // For the time model: the instruction count at the run's start, and the TLB
        // and OS cycles not yet sent (the first op carries them; a same-page hit adds
        // none, so the later ones carry 0).
        let (start_instructions, mut tlb, mut os) = if timed {
            let now = self.time_counts();
            (now[0], now[1] - self.time_mark[1], now[2] - self.time_mark[2])
        } else {
            (0, 0, 0)
        };
        let mut marked = self.time_mark[0];
        let mut by_kind = [0u64; 3];
        let mut ticks = 0u64;
        // The data references not yet sent (a scan's references go in one op a page).
        let mut run = DataRun::default();
        let mut i = from;
        while i < buf.len() {
            match buf[i] {
                Record::Access(a) => {
                    let one_page = a.vaddr.wrapping_add(a.size.max(1) as u64 - 1) >> 12 == a.vaddr >> 12;
                    let need = Perms::needed_for(a.kind).bits();
                    let fetch = a.kind.is_instr();
                    if budget == 0
                        || (budgeted && fetch as u64 > instruction_budget)
                        || a.pid != pid
                        || !one_page
                        || !sp[fetch as usize].covers(a.vaddr, asid, need)
                    {
                        break;
                    }
                    budget -= 1;
                    if budgeted {
                        instruction_budget -= fetch as u64;
                    }
                    by_kind[a.kind as usize] += 1;
                    if DATA_REFS {
                        let pa = sp[fetch as usize].pa | (a.vaddr & 0xfff);
                        // `access_time`'s deltas, from the run's own counts.
                        let time = timed.then(|| {
                            let at = start_instructions + ticks + by_kind[AccessKind::Fetch as usize];
                            let time = AccessTime { instrs: at - marked, dep: a.dep, tlb: tlb.min(u32::MAX as u64) as u32, os };
                            (marked, tlb, os) = (at, 0, 0);
                            time
                        });
                        let (write, instr) = (a.kind == AccessKind::Write, fetch);
                        if !run.extend(a.vaddr, pa, write, instr, time) {
                            self.send_run(&mut run);
                            run.start(a.vaddr, pa, write, instr, time);
                        }
                    }
                }
                // (A batch of ticks below 2^32 each cannot overflow `ticks`.)
                Record::Tick(n) if n < 1 << 32 && (!budgeted || n <= instruction_budget) => {
                    if budgeted {
                        instruction_budget -= n;
                    }
                    ticks += n;
                }
                _ => break,
            }
            i += 1;
        }
        if DATA_REFS {
            self.send_run(&mut run);
        }
        let [reads, writes, fetches] = by_kind;
        let Some(instructions) = self.run.instructions.checked_add(fetches + ticks) else {
            // The count would overflow (never once ops were sent: see `budgeted`); the
            // ordinary path reports it at the tick.
            return from;
        };
        if i == from {
            return from;
        }
        if timed && reads + writes + fetches > 0 {
            // As `access_time` leaves it after the run's last access.
            let [_, tlb, os] = self.time_counts();
            self.time_mark = [marked, tlb, os];
        }
        let r = &mut self.run;
        r.records += (i - from) as u64;
        r.accesses += reads + writes + fetches;
        r.translations += reads + writes + fetches;
        r.reads += reads;
        r.writes += writes;
        r.fetches += fetches;
        r.instructions = instructions;
        if reads + writes != 0 {
            self.same_page_hits[0][self.same_page[0].l1_slot] += reads + writes;
        }
        if fetches != 0 {
            self.same_page_hits[1][self.same_page[1].l1_slot] += fetches;
        }
        i
    }

    fn with_position(&self, e: Error) -> Error {
        match e {
            Error::OutOfMemory(m) => Error::OutOfMemory(format!("{m} (at trace record {})", self.run.records)),
            Error::Sim(m) => Error::Sim(format!("{m} (at trace record {})", self.run.records)),
            e => e,
        }
    }

    #[inline]
    pub fn record(&mut self, r: &Record) -> Result<()> {
        match r {
            Record::Access(a) => self.access(a),
            Record::Tick(n) => {
                // A tick this large is a corrupt trace, not a program.
                self.run.instructions =
                    self.run.instructions.checked_add(*n).ok_or_else(|| {
                        Error::Sim(format!("a tick of {n} instructions overflows the instruction count (at trace record {})", self.run.records))
                    })?;
                Ok(())
            }
            other => {
                self.run.os_events += 1;
                if let Record::ContextSwitch { pid } = *other {
                    return self.switch_to(pid);
                }
                self.os.event(other)?;
                self.apply_shootdowns();
                if let (true, &Record::Mmap { pid, start, len, prot, .. }) = (self.populate, other) {
                    self.populate(pid, start, len, prot)?;
                }
                if let Record::Exit { pid } = *other {
                    if self.cur_pid == Some(pid) {
                        // Gone: a later record of the same pid is a new process, created
                        // on first use like any unannounced one.
                        self.cur_pid = None;
                    }
                }
                if let (Some(r), Some(pid)) = (&mut self.regions, self.cur_pid) {
                    r.set_mappings(self.os.mm.shared_mappings(pid))?;
                }
                Ok(())
            }
        }
    }

    fn switch_to(&mut self, pid: Pid) -> Result<()> {
        let switching = self.cur_pid != Some(pid);
        self.os.event(&Record::ContextSwitch { pid })?;
        self.cur_asid = self.os.asid_of(pid)?;
        self.cur_pid = Some(pid);
        if let Some(r) = &mut self.regions {
            if switching {
                // The new process's region map; its keys are loaded on key-miss faults.
                r.set_process(self.os.mm.shared_mappings(pid))?;
            }
        }
        if switching && !self.asid_tags {
            self.mmu.flush_all();
            self.same_page = [SamePage::default(); 2];
        }
        Ok(())
    }

    #[inline]
    fn access(&mut self, a: &Access) -> Result<()> {
        if self.cur_pid != Some(a.pid) {
            // An access of another process implies a switch to it.
            self.switch_to(a.pid)?;
        }
        self.run.accesses += 1;
        match a.kind {
            AccessKind::Read => self.run.reads += 1,
            AccessKind::Write => self.run.writes += 1,
            AccessKind::Fetch => {
                self.run.fetches += 1;
                self.run.instructions += 1;
            }
        }
        if self.background_at != u64::MAX {
            self.maybe_background()?;
        }
        if self.recolor_on {
            let now = self.now();
            if self.mmu.walker().mem.interrupt || now >= self.os.recolor.as_ref().map_or(u64::MAX, |r| r.next_timer) {
                self.recolor_events()?;
            }
        }
        let size = a.size.max(1) as u64;
        let first = a.vaddr >> 12;
        let last = a.vaddr.wrapping_add(size - 1) >> 12;
        if first == last || last < first {
            self.translate(a.kind, a.vaddr, a.dep)
        } else {
            // Each 4 KiB page the access touches is translated.
            self.run.page_crossings += 1;
            let mut page = first;
            loop {
                let va = if page == first { a.vaddr } else { page << 12 };
                self.translate(a.kind, va, a.dep)?;
                if page == last {
                    return Ok(());
                }
                page += 1;
            }
        }
    }

    #[inline(always)]
    fn translate(&mut self, kind: AccessKind, va: u64, dep: Dep) -> Result<()> {
        self.run.translations += 1;
        let side = kind.is_instr() as usize;
        let sp = self.same_page[side];
        let need = Perms::needed_for(kind).bits();
        let pa = if sp.covers(va, self.cur_asid, need) {
            self.same_page_hits[side][sp.l1_slot] += 1;
            sp.pa | (va & 0xfff)
        } else {
            self.translate_slow(kind, va)?
        };
        if self.data_refs {
            let now = self.mem_clock();
            let time = self.timed.then(|| self.access_time(dep));
            self.send_data(va, pa, now, kind == AccessKind::Write, kind.is_instr(), time);
        }
        Ok(())
    }

    /// Send a program reference to the memory model, with its time if the time model
    /// runs: in one op when the time fits, else a `Time` op before the `Data` op.
    #[inline(always)]
    fn send_data(&mut self, va: u64, pa: u64, now: u64, write: bool, instr: bool, time: Option<AccessTime>) {
        if let Some(time) = time {
            if let Some(op) = MemOp::timed_data(va, pa, now, write, instr, time) {
                self.mem_op(op);
                return;
            }
            self.mem_op(MemOp::Time(time));
        }
        self.mem_op(MemOp::Data { va, pa, now, write, instr });
    }

    /// Send the references `run` holds (at cycle 0, as a same-page run sends them), and
    /// empty it.
    #[inline(always)]
    fn send_run(&mut self, run: &mut DataRun) {
        match run.take() {
            Some(RunOp::Run(op)) => self.mem_op(op),
            Some(RunOp::One { va, pa, write, instr, time }) => self.send_data(va, pa, 0, write, instr, time),
            None => {}
        }
    }

    /// What the caches do not see of the translation just made, for the time model.
    #[inline]
    fn access_time(&mut self, dep: Dep) -> AccessTime {
        // TLB cycles move from the MMU to the engine's counters at a warm-up's end: the
        // sum only grows.
        let now = self.time_counts();
        let [i, t, o] = [0, 1, 2].map(|k| now[k] - self.time_mark[k]);
        self.time_mark = now;
        AccessTime { instrs: i, dep, tlb: t.min(u32::MAX as u64) as u32, os: o }
    }

    /// What `time_mark` marks: instructions, TLB cycles and OS cycles so far.
    #[inline(always)]
    fn time_counts(&self) -> [u64; 3] {
        [self.run.instructions, self.cycles.tlb + self.mmu.tlb_cycles, self.os_cycles()]
    }

    /// The OS's cycles so far: faults and key misses, recolouring and page-size policy
    /// work (the time model charges them as traps; page copies reach it as `Copy` ops).
    fn os_cycles(&self) -> u64 {
        let pc = &self.os.mm.pc;
        self.cycles.fault + self.cycles.recolor_policy + pc.bookkeeping_cycles + pc.copy_cycles
    }

    /// The core's cycle: one per instruction plus every stall so far (Romer's single-issue
    /// model, §4.3.2), for the write buffers and the recolouring policies' clocks.
    #[inline(always)]
    fn now(&self) -> u64 {
        let c = &self.cycles;
        let m = self.mmu.cycles_so_far();
        self.run.instructions + c.tlb + c.walk + c.fault + c.data + c.recolor_copy + c.recolor_policy + m
    }

    #[inline(never)]
    fn translate_slow(&mut self, kind: AccessKind, va: u64) -> Result<u64> {
        let instr = kind.is_instr();
        let side = instr as usize;
        // The TLB tag: the process's own, a shared object's global RID (its key is
        // checked), or its program's text RID.
        let (asid, keyed) = match &self.regions {
            Some(r) => r.tag(va, self.cur_asid),
            None => (self.cur_asid, false),
        };
        let need = Perms::needed_for(kind);
        // This lookup changes L1 replacement state of this side (and of the other side
        // if they share a structure).
        self.same_page[side].valid = false;
        if self.shared_l1 {
            self.same_page[1 - side].valid = false;
        }
        let (t, missed) = self.translate_tlbs(kind, va, asid, need)?;
        if t.size != PageSize::K4 {
            // Base pages are touched when mapped; pages of larger ones when translated
            // (the guest frame, in a nested run: the OS counts guest memory).
            let frame = self.os.mm.pt.mapped_frame(asid, va, &t);
            self.os.mm.touched.touch(frame);
        }
        if keyed {
            // A shared object's translation: its protection key must be in a PKR. The
            // same-page shortcut is not taken, so every access to it is checked.
            if let Some(r) = &mut self.regions {
                self.cycles.fault += r.check_key(asid);
            }
        } else {
            if asid != self.cur_asid {
                // Program text under its program's RID: no key to check.
                if let Some(r) = &mut self.regions {
                    r.note_text();
                }
            }
            self.note_same_page(side, va, &t);
        }
        if missed && self.watching {
            if let Some(nt) = self.policy_tlb_miss(instr, va, t)? {
                // The policy moved the page (recolour, promotion): the access uses the
                // new frame, and the TLBs get the new translation.
                let mmu = &mut self.mmu;
                let levels = mmu.tlbs.levels();
                mmu.tlbs.fill(instr, va, asid, &nt, levels);
                self.deliver_tlb_changes();
                if !keyed {
                    self.note_same_page(side, va, &nt);
                }
                return Ok(nt.phys(va));
            }
        }
        Ok(t.phys(va))
    }

    /// The TLB lookup, walk and fills of `translate_slow`. Returns the translation and
    /// whether the TLBs missed.
    #[inline]
    fn translate_tlbs(&mut self, kind: AccessKind, va: u64, asid: Asid, need: Perms) -> Result<(Translation, bool)> {
        let instr = kind.is_instr();
        let mmu = &mut self.mmu;
        let levels = mmu.tlbs.levels();
        let lookup = mmu.lookup(instr, va, asid, self.cur_asid, &mut self.os.mm.pt);
        if std::mem::take(&mut mmu.probed_data_tlb) {
            // A virtual walk reference looked up the data TLBs.
            self.same_page[0].valid = false;
            if self.shared_l1 {
                self.same_page[1].valid = false;
            }
        }
        match lookup {
            Lookup::Hit { t, level } => {
                let t = if !t.perms.contains(need) {
                    let t = self.fault(va, kind)?;
                    self.mmu.tlbs.fill(instr, va, asid, &t, levels);
                    t
                } else {
                    if level > 0 {
                        mmu.tlbs.fill(instr, va, asid, &t, level);
                    }
                    t
                };
                Ok((t, false))
            }
            Lookup::Miss(walked) => {
                let t = match walked {
                    Some(t) if t.perms.contains(need) => t,
                    // Rule (docs/metrics.md): a translation that faults counts as one
                    // TLB miss, one walk and one fault; the mapping the OS installs is
                    // filled into the TLBs without a second walk.
                    _ => {
                        if let Some(e) = self.os.mm.pt.take_error() {
                            return Err(e);
                        }
                        self.mmu.note_faulting_walk();
                        self.fault(va, kind)?
                    }
                };
                if self.watching {
                    self.deliver_tlb_changes();
                }
                if self.pairs {
                    self.fill_pair(instr, va, asid, &t);
                } else {
                    self.mmu.tlbs.fill(instr, va, asid, &t, levels);
                }
                Ok((t, true))
            }
        }
    }

    /// The refill of a page-pair TLB entry (`tlb.NAME.pairs`): when the table's walk read
    /// the PTE pair, the other page of the pair fills the other half (if it is mapped,
    /// with the same size).
    #[cold]
    fn fill_pair(&mut self, instr: bool, va: u64, asid: Asid, t: &Translation) {
        let pt = &self.os.mm.pt;
        let buddy = if pt.holds_pte_pairs() { pt.translate(self.cur_asid, va ^ t.size.bytes()).filter(|b| b.size == t.size) } else { None };
        let levels = self.mmu.tlbs.levels();
        self.mmu.tlbs.fill_with_buddy(instr, va, asid, t, buddy.as_ref(), levels);
    }

    /// Hand the watchers the TLBs' changes since their last look (invalidations,
    /// flushes, fills that were not last-level misses), before a miss's own fill.
    #[inline(never)]
    fn deliver_tlb_changes(&mut self) {
        let mmu = &mut self.mmu;
        mmu.tlbs.drain_changes(&mut self.tlb_changes);
        if !self.tlb_changes.is_empty() {
            if self.policy_misses {
                self.os.policy.tlb_changes(&self.tlb_changes);
            }
            if let (true, Some(r)) = (self.recolor_tlb, &mut self.os.recolor) {
                r.tlb_changes(&self.os.mm, &self.tlb_changes);
            }
            self.tlb_changes.clear();
        }
    }

    /// Report a last-level miss (its fill's changes are the only ones logged since
    /// `deliver_tlb_changes`) to the page-size and recolouring policies, then apply what
    /// they changed. Returns the page's new translation if they moved it.
    #[inline(never)]
    fn policy_tlb_miss(&mut self, instr: bool, va: u64, t: Translation) -> Result<Option<Translation>> {
        let pid = self.cur_pid.expect("access sets the current pid");
        let now = self.now();
        let mmu = &mut self.mmu;
        let m = TlbMiss { pid, asid: self.cur_asid, va, translation: t, slot: mmu.tlbs.watched_slot(instr), instructions: self.run.instructions };
        mmu.tlbs.drain_changes(&mut self.tlb_changes);
        let fill = std::mem::take(&mut self.tlb_changes);
        let mut r = Ok(());
        if self.policy_misses {
            r = self.os.tlb_miss(&m, &fill);
        }
        if let (true, Ok(()), Some(rc)) = (self.recolor_tlb, &r, &mut self.os.recolor) {
            let mut cx = crate::os::recolor::Ctx { mm: &mut self.os.mm, mem: &mut mmu.walker_mut().mem, now };
            r = rc.tlb_miss(&mut cx, &m, &fill);
        }
        self.tlb_changes = fill;
        self.tlb_changes.clear();
        r?;
        let moved = !self.os.mm.shootdowns.is_empty();
        self.after_os_work();
        if !moved {
            return Ok(None);
        }
        Ok(self.os.mm.pt.translate(self.cur_asid, va).filter(|nt| nt.pa != t.pa || nt.size != t.size))
    }

    /// Apply what the OS changed: TLB shootdowns, and the recolouring copies through the
    /// caches.
    fn after_os_work(&mut self) {
        self.apply_shootdowns();
        if !self.os.mm.copies.is_empty() {
            for c in std::mem::take(&mut self.os.mm.copies) {
                for off in (0..c.bytes).step_by(MemOp::MAX_COPY as usize) {
                    let bytes = (c.bytes - off).min(MemOp::MAX_COPY) as u32;
                    let now = self.now();
                    self.mmu.mem_op(MemOp::Copy { from: c.from + off, to: c.to + off, now, bytes });
                }
            }
        }
        if let Some(r) = &self.os.recolor {
            self.cycles.recolor_policy = r.stats.overhead_cycles as u64;
        }
    }

    /// The recolouring policy's timer and the memory system's interrupts.
    #[inline(never)]
    fn recolor_events(&mut self) -> Result<()> {
        let now = self.now();
        let Some(r) = &mut self.os.recolor else { return Ok(()) };
        let mem = &mut self.mmu.walker_mut().mem;
        let mut cx = crate::os::recolor::Ctx { mm: &mut self.os.mm, mem, now };
        if cx.mem.interrupt {
            r.interrupt(&mut cx)?;
        }
        if now >= r.next_timer {
            r.timer(&mut cx)?;
        }
        self.after_os_work();
        Ok(())
    }

    /// Re-read which hooks the policy needs (after the policy was replaced, e.g. for
    /// OFFLINE's second pass).
    pub fn refresh_policy_hooks(&mut self) {
        self.policy_misses = self.os.policy.wants_tlb_misses();
        self.recolor_tlb = self.os.recolor.as_ref().is_some_and(|r| r.wants_tlb());
        self.watching = self.policy_misses || self.recolor_tlb;
        let watching = self.watching;
        self.mmu.tlbs.watch(watching);
        if self.policy_misses {
            let entries = self.mmu.tlbs.watched_entries();
            self.os.policy.watch_entries(entries);
        }
    }

    /// Run the policy's background work if it is due.
    #[inline(never)]
    fn maybe_background(&mut self) -> Result<()> {
        let now = if self.background_by_instr { self.run.instructions } else { self.run.accesses };
        if now >= self.background_at {
            self.background_at = (now / self.background_every + 1) * self.background_every;
            self.os.background()?;
            self.apply_shootdowns();
        }
        Ok(())
    }

    /// Remember the L1 structure that now holds `t`, for the same-page fast path.
    fn note_same_page(&mut self, side: usize, va: u64, t: &Translation) {
        let slot = self.l1_slot_of[side][t.size.shift() as usize];
        if slot != u8::MAX {
            self.same_page[side] =
                SamePage { valid: true, vpn: va >> 12, asid: self.cur_asid, perms: t.perms.bits(), pa: t.phys(va) & !0xfff, l1_slot: slot as usize };
        }
    }

    /// The timing side (TLBs; the walker's walk caches, caches and walk counters once
    /// attached: after [`Engine::attach`], or once the run finished).
    pub fn mmu(&self) -> &Mmu<P> {
        &self.mmu
    }

    /// The core's cycle for a data reference. Only write buffers read it, and they keep
    /// the hierarchy inline, so a detached hierarchy is sent 0 (its cycle counters are
    /// on its thread until `attach`).
    #[inline(always)]
    fn mem_clock(&self) -> u64 {
        if self.mmu.mem_detached() {
            0
        } else {
            self.now()
        }
    }

    /// Send one op to the memory model, wherever it runs.
    #[inline(always)]
    fn mem_op(&mut self, op: MemOp) {
        self.mmu.mem_op(op)
    }

    /// Use a second host thread from the next batch on, if `on` and nothing in this
    /// configuration depends on a reference's latency (`MemoryHierarchy::can_detach`,
    /// no recolouring). The whole walker (walk caches, caches, walk accounting) moves to
    /// it when, in addition, the table splits its walk ([`crate::pt::SplitWalk`]) and
    /// `walker` allows; otherwise only the cache hierarchy does. Results are identical
    /// either way. Returns whether a thread will be used.
    pub fn use_memory_thread(&mut self, on: bool, walker: WalkerThread) -> bool {
        self.detach = on && !self.recolor_on && self.mmu.walker().mem.can_detach();
        let walker_moves = match walker {
            WalkerThread::Never => false,
            WalkerThread::Auto => !self.data_refs,
            WalkerThread::Always => true,
        };
        self.split = self.detach && split_walk::<P>().is_some() && walker_moves;
        self.detach
    }

    /// Whether the whole walker runs on the second thread (`use_memory_thread`).
    pub fn mmu_on_thread(&self) -> bool {
        self.detach && self.split
    }

    /// Move the walker (or its cache hierarchy) to a thread of its own for the batches
    /// to come. If the host cannot start a thread, the run goes on inline (the results
    /// are the same) after a warning.
    #[inline]
    fn detach_timing(&mut self) {
        if !self.mmu.mem_detached() {
            self.detach = self.mmu.detach(self.split);
        }
    }

    /// Bring the walker back (waiting for its thread to apply every op sent). Anything
    /// that reads the walk caches, caches or the walk counters calls this first.
    pub fn attach(&mut self) -> Result<()> {
        self.mmu.attach();
        Ok(())
    }

    /// Move the MMU's cycle counters into the engine's (after `attach`).
    fn settle_cycles(&mut self) {
        let m = self.mmu.take_cycles();
        let c = &mut self.cycles;
        c.tlb += m.tlb;
        c.walk += m.walk;
        c.data += m.data;
        c.recolor_copy += m.recolor_copy;
    }

    fn fault(&mut self, va: u64, kind: AccessKind) -> Result<Translation> {
        let pid = self.cur_pid.expect("access sets the current pid");
        self.cycles.fault += self.fault_cycles;
        let t = self.os.fault(pid, va, kind)?;
        self.apply_shootdowns();
        Ok(t)
    }

    /// `os.populate`: fault in every page of a new mapping, as MAP_POPULATE does (or a
    /// program that writes its memory before its region of interest). A writable
    /// mapping is faulted by writes, an execute-only one by fetches, the rest by reads;
    /// PROT_NONE populates nothing. Each fault goes through the page-size policy like a
    /// demand fault (so THP maps huge pages, TPS fills and promotes its reservations);
    /// no TLB is filled.
    #[cold]
    fn populate(&mut self, pid: Pid, start: u64, len: u64, prot: u8) -> Result<()> {
        use crate::trace::record::prot::{EXEC, READ, WRITE};
        let kind = match prot {
            p if p & WRITE != 0 => AccessKind::Write,
            p if p & READ != 0 => AccessKind::Read,
            p if p & EXEC != 0 => AccessKind::Fetch,
            _ => return Ok(()),
        };
        let asid = self.os.asid_of(pid)?;
        let (mut va, end) = (PageSize::K4.align_down(start), start.saturating_add(len));
        while va < end {
            self.cycles.fault += self.fault_cycles;
            let t = self.os.fault(pid, va, kind)?;
            let next = t.size.align_down(va).saturating_add(t.size.bytes());
            if t.size != PageSize::K4 {
                // The initialisation writes the rest of this larger page too (a policy
                // that promotes at a threshold maps frames no fault has touched yet).
                let frame = self.os.mm.pt.mapped_frame(asid, va, &t);
                for k in 0..(next.min(end) - va).div_ceil(4096) {
                    self.os.mm.touched.touch(frame + k * 4096);
                }
            }
            va = next;
        }
        self.apply_shootdowns();
        Ok(())
    }

    fn apply_shootdowns(&mut self) {
        if self.os.mm.shootdowns.is_empty() {
            return;
        }
        self.same_page = [SamePage::default(); 2];
        let mut shootdowns = std::mem::take(&mut self.os.mm.shootdowns);
        for s in shootdowns.drain(..) {
            self.mmu.shootdown(s);
            if let (Shootdown::Space { asid }, true) = (s, self.policy_misses) {
                self.deliver_tlb_changes();
                self.os.policy.space_gone(asid);
            }
        }
        // Keep the buffer's allocation for the next shootdowns.
        self.os.mm.shootdowns = shootdowns;
        if self.watching {
            self.deliver_tlb_changes();
        }
    }

    /// End of the statistics warm-up: snapshot the counters that timing depends on (to
    /// subtract at the end) and restart the walk statistics.
    #[cold]
    fn end_warmup(&mut self) -> Result<()> {
        self.attach()?;
        self.settle_cycles();
        self.time_base = self.mmu.walker().time_model().map(|tm| tm.snapshot());
        self.warmup_at = u64::MAX;
        self.warmup_instructions_at = u64::MAX;
        self.update_stops();
        self.fold_tlb_counts();
        let m = &mut self.mmu;
        self.warmup_base = Some(Box::new(WarmupBase {
            run: self.run.clone(),
            cycles: self.cycles.clone(),
            tlb_levels: m.tlb_levels.clone(),
            tlbs: m.tlbs.tlbs.iter().map(|t| t.counters.clone()).collect(),
            caches: m.walker().mem.caches.iter().map(|c| c.counters.clone()).collect(),
            write_buffers: m
                .walker()
                .mem
                .caches
                .iter()
                .map(|c| c.write_buffer.as_ref().map_or((0, 0, 0), |w| (w.writes, w.stall_cycles, w.full_stalls)))
                .collect(),
            memory_accesses: m.walker().mem.memory_accesses,
            memory_writes: m.walker().mem.memory_writes,
        }));
        let w = m.walker_mut();
        self.walk_cache_base = w.walk_caches.counters();
        let steps = w.walks.step_refs.len();
        w.walks = WalkCounters { step_refs: vec![0; steps], step_walks: vec![0; steps], ..Default::default() };
        Ok(())
    }

    /// Whether the statistics warm-up ended (or there was none).
    pub fn warmed_up(&self) -> bool {
        self.warmup_at == u64::MAX && self.warmup_instructions_at == u64::MAX
    }

    /// The accesses and instructions of the run when the statistics warm-up ended
    /// ((0, 0) without one); after [`Engine::finish`].
    pub fn warmup_length(&self) -> (u64, u64) {
        self.warmup_length
    }

    /// Once, at the end of a run: fold the TLB lookups and same-page hits into the per-structure
    /// counters, and subtract the warm-up's counts.
    pub fn finish(&mut self) -> Result<()> {
        if self.instructions_by != u64::MAX {
            self.instructions_counted()?;
        }
        // The trace ended with the references of the warm-up's last instruction.
        if self.run.instructions >= self.warmup_instructions_at {
            self.end_warmup()?;
        }
        self.attach()?;
        self.settle_cycles();
        self.fold_tlb_counts();
        let instructions = self.run.instructions;
        self.time_end = self.mmu.walker_mut().time_model_mut().map(|tm| tm.finish(instructions));
        let Some(b) = self.warmup_base.take() else { return Ok(()) };
        self.warmup_length = (b.run.accesses, b.run.instructions);
        self.run = self.run.since(&b.run);
        self.cycles = self.cycles.since(&b.cycles);
        let m = &mut self.mmu;
        for (side, levels) in m.tlb_levels.iter_mut().enumerate() {
            for (l, (lookups, hits)) in levels.iter_mut().enumerate() {
                *lookups -= b.tlb_levels[side][l].0;
                *hits -= b.tlb_levels[side][l].1;
            }
        }
        for (t, base) in m.tlbs.tlbs.iter_mut().zip(&b.tlbs) {
            t.counters = t.counters.since(base);
        }
        let mem = &mut m.walker_mut().mem;
        for ((c, base), wb) in mem.caches.iter_mut().zip(&b.caches).zip(&b.write_buffers) {
            c.counters = c.counters.since(base);
            if let Some(w) = &mut c.write_buffer {
                (w.writes, w.stall_cycles, w.full_stalls) = (w.writes - wb.0, w.stall_cycles - wb.1, w.full_stalls - wb.2);
            }
        }
        mem.memory_accesses -= b.memory_accesses;
        mem.memory_writes -= b.memory_writes;
        Ok(())
    }

    /// Bring every TLB structure's counters up to date: the hierarchy's per-level
    /// lookup counts, then the same-page hits counted per L1 slot.
    fn fold_tlb_counts(&mut self) {
        let m = &mut self.mmu;
        m.tlbs.fold_counts();
        m.fold_lookups();
        for side in 0..2 {
            let total: u64 = self.same_page_hits[side].iter().sum();
            if total == 0 {
                continue;
            }
            m.tlb_levels[side][0].0 += total;
            m.tlb_levels[side][0].1 += total;
            let l1: Vec<usize> = m.tlbs.side(side == 1)[0].clone();
            for (slot, &id) in l1.iter().enumerate() {
                let c = &mut m.tlbs.tlbs[id].counters;
                let hits = self.same_page_hits[side][slot];
                c.lookups += total;
                c.hits += hits;
                c.misses += total - hits;
            }
            self.same_page_hits[side].iter_mut().for_each(|h| *h = 0);
        }
    }
}

/// Counters at the end of the statistics warm-up.
struct WarmupBase {
    run: RunCounters,
    cycles: CycleCounters,
    tlb_levels: [Vec<(u64, u64)>; 2],
    tlbs: Vec<crate::mmu::tlb::TlbCounters>,
    caches: Vec<crate::mem::cache::CacheCounters>,
    /// Per cache level: its write buffer's (writes, stall cycles, full stalls).
    write_buffers: Vec<(u64, u64, u64)>,
    memory_accesses: u64,
    memory_writes: u64,
}
