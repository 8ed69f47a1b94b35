//! The memory model's timing of references, inline or on a thread of its own.
//!
//! The engine describes everything it sends to the cache hierarchy as a [`MemOp`], and
//! one function, [`WalkTimer::apply`], turns ops into cache state and cycles. Inline,
//! the engine applies each op at once. When nothing the engine decides depends on a
//! reference's latency — no write buffers (whose stalls depend on the core's clock) and
//! no recolouring (whose CML buffer and miss interrupts drive the OS) — the latencies
//! only end up in counters. Then a [`MemoryThread`] owns the hierarchy on a second host
//! core and applies the ops in the order they were sent, so every counter and
//! histogram comes out exactly as inline (docs/performance.md, "The memory thread").

use super::MemoryHierarchy;
use crate::stats::{CycleCounters, Histogram};
use crate::time::{AccessTime, TimeModel};
use crate::trace::Dep;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

/// One request to the memory model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemOp {
    /// A reference of the current walk (`nested`: of the nested walk that translates
    /// one of its virtual references). `new_step`: it starts a sequential step; the
    /// references of one step are issued in parallel, so a step costs its slowest.
    WalkRef { pa: u64, new_step: bool, nested: bool },
    /// A walk reference off the critical path (a walk-table fill): cache traffic, no
    /// latency.
    Background { pa: u64 },
    /// The nested walk ended; `cycles` of its own (TLB probe, handler) join its steps',
    /// and the sum joins the outer walk's latency.
    NestedEnd { cycles: u64 },
    /// The walk ended: its latency is `cycles` (probes, handlers, translated virtual
    /// references) plus its steps', or `fixed` if set (`mmu.fixed_miss_cycles`).
    /// `trap`: a software handler made it (an exception: the core drains first).
    WalkEnd { cycles: u64, fixed: Option<u64>, trap: bool },
    /// The refill handler fetches the instruction at `pa` (mmu/refill.rs): between
    /// the walk's steps, in order; what a fetch takes beyond a first-level hit stalls
    /// the handler.
    HandlerFetch { pa: u64 },
    /// A program reference at core cycle `now`.
    Data { va: u64, pa: u64, now: u64, write: bool, instr: bool },
    /// The OS copies `bytes` (at most [`MemOp::MAX_COPY`]) from frame `from` to `to`.
    Copy { from: u64, to: u64, now: u64, bytes: u32 },
    /// For the time model only, before a translation's `Data`: what the caches do not
    /// see of it (instructions, dependence, TLB and OS cycles).
    Time(AccessTime),
    /// `Time` and `Data` in one op, when the time fits in the packed op's spare bits
    /// ([`MemOp::timed_data`]): one op per reference instead of two.
    TimedData { va: u64, pa: u64, now: u64, write: bool, instr: bool, time: AccessTime },
    /// `count` (≥ 2) program references of one kind at cycle 0, at `va` and `pa` and
    /// then every `stride` bytes on: the same as their `count` `Data` ops (`TimedData`,
    /// each with `time`, if set), in one. A same-page run sends its references this
    /// way ([`DataRun`]): a scan hands one op per page to the thread, not one per
    /// reference (docs/performance.md, "The hand-over"). Never seen by the time model:
    /// [`WalkTimer::apply`] hands it the references one by one.
    DataRun { va: u64, pa: u64, stride: i32, count: u32, write: bool, instr: bool, time: Option<AccessTime> },
}

/// Builds [`MemOp::DataRun`]s from a same-page run's references, in order: a
/// reference at the next address of the run, of its kind and with its time, extends
/// it; any other ends it (the caller sends what [`DataRun::take`] returns) and starts
/// the next. A run's time carries no TLB or OS cycles (a same-page hit has none; the
/// run's first reference, which may, goes alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct DataRun {
    va: u64,
    pa: u64,
    stride: i64,
    count: u32,
    write: bool,
    instr: bool,
    time: Option<AccessTime>,
}

/// The (virtual, physical) addresses of a [`MemOp::DataRun`]'s references, in order.
#[inline(always)]
pub(super) fn run_addresses(va: u64, pa: u64, stride: i32, count: u32) -> impl Iterator<Item = (u64, u64)> {
    let step = stride as i64 as u64;
    (0..count as u64).map(move |k| (va.wrapping_add(step.wrapping_mul(k)), pa.wrapping_add(step.wrapping_mul(k))))
}

/// The op a [`DataRun`] hands back: a run, or a lone reference (sent as the engine sends any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOp {
    Run(MemOp),
    One { va: u64, pa: u64, write: bool, instr: bool, time: Option<AccessTime> },
}

impl DataRun {
    /// Add a reference: true if it extends the run. If not, the caller takes the run
    /// and starts the next with [`DataRun::start`].
    #[inline(always)]
    pub fn extend(&mut self, va: u64, pa: u64, write: bool, instr: bool, time: Option<AccessTime>) -> bool {
        if self.count == 0 || write != self.write || instr != self.instr || time != self.time {
            return false;
        }
        if self.count == 1 {
            let stride = va.wrapping_sub(self.va) as i64;
            // The run's first reference may carry a walk's TLB and OS cycles (and
            // `time != self.time` then ends it); the op has no room for them.
            let fits = time.is_none_or(|t| t.tlb == 0 && t.os == 0 && t.instrs <= u32::MAX as u64);
            if pa.wrapping_sub(self.pa) as i64 != stride || i32::try_from(stride).is_err() || !fits {
                return false;
            }
            self.stride = stride;
        } else {
            let at = self.stride.wrapping_mul(self.count as i64) as u64;
            if va != self.va.wrapping_add(at) || pa != self.pa.wrapping_add(at) || self.count == u32::MAX {
                return false;
            }
        }
        self.count += 1;
        true
    }

    /// Start a run at this reference.
    #[inline(always)]
    pub fn start(&mut self, va: u64, pa: u64, write: bool, instr: bool, time: Option<AccessTime>) {
        *self = DataRun { va, pa, stride: 0, count: 1, write, instr, time };
    }

    /// The run so far, to send (None if empty); the builder is then empty.
    #[inline(always)]
    pub fn take(&mut self) -> Option<RunOp> {
        let r = std::mem::take(self);
        let DataRun { va, pa, stride, count, write, instr, time } = r;
        match count {
            0 => None,
            1 => Some(RunOp::One { va, pa, write, instr, time }),
            _ => Some(RunOp::Run(MemOp::DataRun { va, pa, stride: stride as i32, count, write, instr, time })),
        }
    }
}

impl MemOp {
    /// The largest copy one op carries (larger copies are split; splitting is exact,
    /// since a copy is a sequence of line references).
    pub const MAX_COPY: u64 = 1 << 30;

    /// A program reference with its time, as one op if the time fits (no OS cycles,
    /// fewer than 2^30 instructions, fewer than 2^16 TLB cycles).
    #[inline(always)]
    pub fn timed_data(va: u64, pa: u64, now: u64, write: bool, instr: bool, time: AccessTime) -> Option<MemOp> {
        (time.os == 0 && time.instrs < 1 << 30 && time.tlb < 1 << 16).then_some(MemOp::TimedData { va, pa, now, write, instr, time })
    }
}

/// A [`MemOp`] as the memory thread's buffers hold it: four words with no padding, so
/// the engine can write it with streaming stores ([`crate::host::stream_store`]) and
/// the buffer need not travel between the cores' caches line by line
/// (docs/performance.md, "The hand-over"). Word 0 holds the kind in its low byte and
/// the flags above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct PackedOp([u64; 4]);

impl From<MemOp> for PackedOp {
    #[inline(always)]
    fn from(op: MemOp) -> PackedOp {
        let flag = |b: bool, bit: u32| (b as u64) << bit;
        PackedOp(match op {
            MemOp::WalkRef { pa, new_step, nested } => [flag(new_step, 8) | flag(nested, 9), pa, 0, 0],
            MemOp::Background { pa } => [1, pa, 0, 0],
            MemOp::NestedEnd { cycles } => [2, cycles, 0, 0],
            MemOp::WalkEnd { cycles, fixed, trap } => [3 | flag(fixed.is_some(), 8) | flag(trap, 9), cycles, fixed.unwrap_or(0), 0],
            MemOp::Data { va, pa, now, write, instr } => [4 | flag(write, 8) | flag(instr, 9), va, pa, now],
            MemOp::Copy { from, to, now, bytes } => [5 | (bytes as u64) << 32, from, to, now],
            MemOp::Time(t) => [6 | (t.dep.0 as u64) << 8 | (t.tlb as u64) << 16, t.instrs, t.os, 0],
            MemOp::HandlerFetch { pa } => [7, pa, 0, 0],
            // Bits 10..: dependence (8), TLB cycles (16), instructions (30).
            MemOp::TimedData { va, pa, now, write, instr, time } => {
                [8 | flag(write, 8) | flag(instr, 9) | (time.dep.0 as u64) << 10 | (time.tlb as u64) << 18 | time.instrs << 34, va, pa, now]
            }
            // Bits 10..: timed (1), dependence (8); 32..: count. Word 3: the stride, and
            // the instructions above it (a run's time has no TLB or OS cycles).
            MemOp::DataRun { va, pa, stride, count, write, instr, time } => {
                let t = time.unwrap_or_default();
                let w = 9 | flag(write, 8) | flag(instr, 9) | flag(time.is_some(), 10) | (t.dep.0 as u64) << 11 | (count as u64) << 32;
                [w, va, pa, stride as u32 as u64 | t.instrs << 32]
            }
        })
    }
}

impl PackedOp {
    /// The op this was packed from.
    #[inline(always)]
    pub fn unpack(self) -> MemOp {
        let [w, a, b, c] = self.0;
        let bit = |i: u32| w >> i & 1 != 0;
        match w & 0xff {
            0 => MemOp::WalkRef { pa: a, new_step: bit(8), nested: bit(9) },
            1 => MemOp::Background { pa: a },
            2 => MemOp::NestedEnd { cycles: a },
            3 => MemOp::WalkEnd { cycles: a, fixed: bit(8).then_some(b), trap: bit(9) },
            4 => MemOp::Data { va: a, pa: b, now: c, write: bit(8), instr: bit(9) },
            5 => MemOp::Copy { from: a, to: b, now: c, bytes: (w >> 32) as u32 },
            7 => MemOp::HandlerFetch { pa: a },
            8 => MemOp::TimedData {
                va: a,
                pa: b,
                now: c,
                write: bit(8),
                instr: bit(9),
                time: AccessTime { instrs: w >> 34, dep: Dep((w >> 10) as u8), tlb: (w >> 18) as u32 & 0xffff, os: 0 },
            },
            9 => MemOp::DataRun {
                va: a,
                pa: b,
                stride: c as u32 as i32,
                count: (w >> 32) as u32,
                write: bit(8),
                instr: bit(9),
                time: bit(10).then_some(AccessTime { instrs: c >> 32, dep: Dep((w >> 11) as u8), tlb: 0, os: 0 }),
            },
            _ => MemOp::Time(AccessTime { instrs: a, dep: Dep((w >> 8) as u8), tlb: (w >> 16) as u32, os: b }),
        }
    }
}

/// What an op cost, for the engine's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    None,
    Walk(u64),
    Data(u64),
    Copy(u64),
}

impl Timing {
    /// Add to the cycle counters and the walk-latency histogram.
    #[inline(always)]
    pub fn account(self, cycles: &mut CycleCounters, walk_latency: &mut Histogram) {
        match self {
            Timing::None => {}
            Timing::Walk(l) => {
                walk_latency.record(l);
                cycles.walk += l;
            }
            Timing::Data(l) => cycles.data += l,
            Timing::Copy(c) => cycles.recolor_copy += c,
        }
    }
}

/// The latency of a walk being timed: finished steps, and the slowest reference of the
/// current one.
#[derive(Clone, Copy, Debug, Default)]
struct Steps {
    latency: u64,
    step_max: u64,
}

impl Steps {
    #[inline(always)]
    fn add(&mut self, l: u64, new_step: bool) {
        if new_step {
            self.latency += self.step_max;
            self.step_max = 0;
        }
        self.step_max = self.step_max.max(l);
    }

    #[inline(always)]
    fn end(&mut self) -> u64 {
        let l = self.latency + self.step_max;
        *self = Steps::default();
        l
    }
}

/// Times the walk in progress (and the nested walk inside it) as its references go
/// through the hierarchy, and feeds the time model every op if it runs.
#[derive(Default)]
pub struct WalkTimer {
    outer: Steps,
    nested: Steps,
    pub time: Option<Box<TimeModel>>,
}

impl WalkTimer {
    /// Apply one op to the hierarchy (a run: as its references one by one; its timing
    /// is theirs summed).
    #[inline(always)]
    pub fn apply(&mut self, mem: &mut MemoryHierarchy, op: MemOp) -> Timing {
        let MemOp::DataRun { va, pa, stride, count, write, instr, time } = op else {
            return self.apply_one(mem, op);
        };
        match (&mut self.time, time) {
            // Count-only: the caches take the run level by level (mem/run.rs).
            (None, _) => return Timing::Data(mem.data_run(va, pa, stride, count, write, instr, |_| {})),
            (Some(tm), Some(time)) if tm.skips(count as u64) => {
                // Sampling skips the whole run: the caches take it, the time model only
                // what each skipped reference leaves (its DRAM row), then the counts at
                // once.
                let mut row = u64::MAX;
                let cycles = mem.data_run(va, pa, stride, count, write, instr, |pa| tm.skip_warm(pa, &mut row));
                tm.skip_run(count as u64, instr, time, mem);
                return Timing::Data(cycles);
            }
            _ => {}
        }
        let mut cycles = 0;
        for (va, pa) in run_addresses(va, pa, stride, count) {
            let op = match time {
                Some(time) => MemOp::TimedData { va, pa, now: 0, write, instr, time },
                None => MemOp::Data { va, pa, now: 0, write, instr },
            };
            if let Timing::Data(l) = self.apply_one(mem, op) {
                cycles += l;
            }
        }
        Timing::Data(cycles)
    }

    #[inline(always)]
    fn apply_one(&mut self, mem: &mut MemoryHierarchy, op: MemOp) -> Timing {
        let t = self.count(mem, op);
        if let Some(tm) = &mut self.time {
            tm.observe(op, mem, t);
        }
        t
    }

    /// The count-only model's part of `apply`.
    #[inline(always)]
    fn count(&mut self, mem: &mut MemoryHierarchy, op: MemOp) -> Timing {
        match op {
            MemOp::WalkRef { pa, new_step, nested } => {
                let l = mem.walk_ref(pa) as u64;
                if nested {
                    self.nested.add(l, new_step);
                } else {
                    self.outer.add(l, new_step);
                }
                Timing::None
            }
            MemOp::Background { pa } => {
                mem.walk_ref(pa);
                Timing::None
            }
            MemOp::NestedEnd { cycles } => {
                self.outer.latency += self.nested.end() + cycles;
                Timing::None
            }
            MemOp::WalkEnd { cycles, fixed, .. } => {
                let l = self.outer.end() + cycles;
                Timing::Walk(fixed.unwrap_or(l))
            }
            MemOp::HandlerFetch { pa } => {
                self.outer.latency += mem.handler_fetch(pa) as u64;
                Timing::None
            }
            MemOp::Data { va, pa, now, write, instr } | MemOp::TimedData { va, pa, now, write, instr, .. } => {
                Timing::Data(mem.data_ref(va, pa, write, instr, now) as u64)
            }
            MemOp::Copy { from, to, now, bytes } => Timing::Copy(mem.copy(from, to, bytes as u64, now)),
            MemOp::Time(_) => Timing::None,
            MemOp::DataRun { .. } => unreachable!("`apply` hands a run's references over one by one"),
        }
    }
}

/// Ops per buffer handed to the thread: large enough that the hand-over is rare.
const OPS_PER_BUFFER: usize = 2048;
/// Buffers in flight; the engine waits when the thread is this far behind.
const BUFFERS: usize = 4;

/// State a worker thread owns and updates op by op, in the order the ops were sent.
pub trait OpSink: Send + 'static {
    type Op: Copy + Send + 'static;
    /// (By reference: the buffer is read in place, a large op is not copied first.)
    fn apply(&mut self, op: &Self::Op);

    /// Write `op` into the buffer slot `dst`, which the thread reads once the buffer
    /// is handed over (after a `host::stream_fence`). A plain store; a sink may stream
    /// its ops instead (`host::stream_store` for ops without padding,
    /// `host::stream_copy` for others).
    ///
    /// # Safety
    /// `dst` is valid for a write of one op and aligned for it.
    #[inline(always)]
    unsafe fn store(dst: *mut Self::Op, op: Self::Op) {
        // SAFETY: the caller's contract.
        unsafe { dst.write(op) }
    }
}

/// What the memory thread hands back when it stops: the hierarchy, and the cycles and
/// walk latencies of the ops it applied.
pub struct Detached {
    pub mem: MemoryHierarchy,
    pub cycles: CycleCounters,
    pub walk_latency: Histogram,
    pub timer: WalkTimer,
}

impl OpSink for Detached {
    type Op = PackedOp;
    #[inline(always)]
    fn apply(&mut self, op: &PackedOp) {
        self.timer.apply(&mut self.mem, op.unpack()).account(&mut self.cycles, &mut self.walk_latency);
    }
    #[inline(always)]
    unsafe fn store(dst: *mut PackedOp, op: PackedOp) {
        // SAFETY: the caller's contract; a PackedOp is 16-byte aligned words.
        unsafe { crate::host::stream_store(dst as *mut [u64; 4], op.0) }
    }
}

/// Polls of an empty queue before the worker thread sleeps (roughly a millisecond).
const SPIN_POLLS: u32 = 20_000;

/// The next buffer from `rx`, or None once the other side hung up. It polls a while
/// before it sleeps: a buffer comes every few tens of microseconds, and waking a
/// sleeping thread would cost the other thread a system call each time.
fn next_buffer<T>(rx: &Receiver<Vec<T>>) -> Option<Vec<T>> {
    for _ in 0..SPIN_POLLS {
        match rx.try_recv() {
            Ok(ops) => return Some(ops),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    rx.recv().ok()
}

/// A state `S` running on a thread of its own, fed ops in order (the memory hierarchy,
/// or the MMU's whole walker: `crate::mmu::Walker`).
pub struct OpThread<S: OpSink> {
    buf: Vec<S::Op>,
    full: Option<SyncSender<Vec<S::Op>>>,
    empty: Receiver<Vec<S::Op>>,
    /// Buffers made so far (at most `BUFFERS + 1`: no allocation once running).
    made: usize,
    handle: Option<JoinHandle<S>>,
}

/// The memory hierarchy on a thread of its own.
pub type MemoryThread = OpThread<Detached>;

impl MemoryThread {
    /// Move `mem` to a new thread. Fails only if the host cannot start a thread; then
    /// `mem` comes back (after a warning), so the caller can run it inline.
    /// `timer` (with the time model, if one runs) goes along.
    // The failure hands the hierarchy back by value, at most once per run.
    #[allow(clippy::result_large_err)]
    pub fn start_memory(mem: MemoryHierarchy, timer: WalkTimer) -> std::result::Result<MemoryThread, (MemoryHierarchy, WalkTimer)> {
        let d = Detached { mem, cycles: CycleCounters::default(), walk_latency: Histogram::default(), timer };
        OpThread::start_or_inline("vmlab-memory", d, "the caches").map_err(|d| (d.mem, d.timer))
    }
}

impl<S: OpSink> OpThread<S> {
    /// `start`, for a caller that goes on inline if the host cannot start a thread:
    /// then `state` comes back after a warning naming `what` runs inline.
    pub fn start_or_inline(name: &str, state: S, what: &str) -> std::result::Result<OpThread<S>, S> {
        OpThread::start(name, state).map_err(|failed| {
            let (state, e) = *failed;
            eprintln!("vmlab: warning: cannot start the {name} thread ({e}); simulating {what} inline");
            state
        })
    }

    /// Move `state` to a new thread. Fails only if the host cannot start a thread; then
    /// `state` comes back with the error, so the caller can run it inline.
    pub fn start(name: &str, state: S) -> std::result::Result<OpThread<S>, Box<(S, std::io::Error)>> {
        let (full_tx, full_rx) = sync_channel::<Vec<S::Op>>(BUFFERS);
        let (empty_tx, empty_rx) = sync_channel::<Vec<S::Op>>(BUFFERS + 1);
        // The state follows the thread's start over a channel: a failed spawn drops
        // only the closure, not the state.
        let (state_tx, state_rx) = sync_channel::<S>(1);
        let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
            let mut s = state_rx.recv().expect("the engine sends the state once the thread starts");
            while let Some(mut ops) = next_buffer(&full_rx) {
                for op in &ops {
                    s.apply(op);
                }
                ops.clear();
                // The engine may have stopped listening (it is finishing): fine.
                let _ = empty_tx.try_send(ops);
            }
            s
        });
        let handle = match spawned {
            Ok(h) => h,
            Err(e) => return Err(Box::new((state, e))),
        };
        state_tx.send(state).expect("the worker thread waits for its state");
        Ok(OpThread { buf: Vec::with_capacity(OPS_PER_BUFFER), full: Some(full_tx), empty: empty_rx, made: 1, handle: Some(handle) })
    }

    /// Queue one op.
    #[inline(always)]
    pub fn push(&mut self, op: S::Op) {
        self.put(op);
        if self.buf.len() == OPS_PER_BUFFER {
            self.hand_over();
        }
    }

    /// Queue `ops`: one check for room, not one per op.
    #[inline(always)]
    pub fn push_batch(&mut self, ops: impl ExactSizeIterator<Item = S::Op>) {
        let n = ops.len();
        if n > OPS_PER_BUFFER {
            ops.for_each(|op| self.push(op));
            return;
        }
        // The buffer never grows past its capacity: no allocation once running.
        if self.buf.len() + n > OPS_PER_BUFFER {
            self.hand_over();
        }
        for op in ops {
            self.put(op);
        }
        if self.buf.len() == OPS_PER_BUFFER {
            self.hand_over();
        }
    }

    /// Append `op` with the sink's store. The buffer has room: every push hands a full
    /// one over.
    #[inline(always)]
    fn put(&mut self, op: S::Op) {
        let n = self.buf.len();
        if n == self.buf.capacity() {
            self.buf.push(op);
            return;
        }
        // SAFETY: slot n is within the capacity, and a Vec's slots are aligned.
        unsafe {
            S::store(self.buf.as_mut_ptr().add(n), op);
            self.buf.set_len(n + 1);
        }
    }

    #[inline(never)]
    fn hand_over(&mut self) {
        // The thread must see streamed ops once it sees their buffer.
        crate::host::stream_fence();
        let next = match self.empty.try_recv() {
            Ok(b) => b,
            Err(_) if self.made <= BUFFERS => {
                self.made += 1;
                Vec::with_capacity(OPS_PER_BUFFER)
            }
            // All buffers are in flight: wait for the thread to return one, polling
            // first, as the thread does: a sleeping engine would cost the thread a
            // system call to wake it, on every buffer while the thread is the slower.
            Err(_) => next_buffer(&self.empty).unwrap_or_else(|| Vec::with_capacity(OPS_PER_BUFFER)),
        };
        let ops = std::mem::replace(&mut self.buf, next);
        if let Some(tx) = &self.full {
            // A send fails only if the thread died; `stop` then reports its panic.
            let _ = tx.send(ops);
        }
    }

    /// Apply everything queued, stop the thread and take the state back.
    pub fn stop(mut self) -> S {
        if !self.buf.is_empty() {
            self.hand_over();
        }
        self.full = None;
        let handle = self.handle.take().expect("a running worker thread");
        match handle.join() {
            Ok(s) => s,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl<S: OpSink> Drop for OpThread<S> {
    /// A run abandoned mid-way (an error): let the thread finish and discard its state.
    fn drop(&mut self) {
        self.full = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// When a second thread runs the MMU's whole walker (`crate::mmu::Walker`: walk caches,
/// walk accounting and caches) rather than the cache hierarchy only. Either way only
/// wall time changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkerThread {
    /// Never: the walker stays on the engine's thread.
    Never,
    /// When the table splits its walk and program references stay off the caches
    /// (`memory.data_refs` off). With them on, the caches are most of the second
    /// thread's work, and the walk caches' is better left to the engine's thread
    /// (docs/performance.md, "The walker thread").
    Auto,
    /// Whenever the table splits its walk.
    Always,
}

/// The host threads a single simulation may use, from the environment: whether it may
/// use a second thread (`VMLAB_MEMORY_THREAD` = `on`, `off`, or `auto`, the default:
/// when the host has two or more cores), and where its walker goes then
/// (`VMLAB_TIMING_THREAD`: `off` is [`WalkerThread::Never`], `on`
/// [`WalkerThread::Always`], `auto` [`WalkerThread::Auto`]). Results are identical
/// either way; only wall time changes. A bad value of either stops the run at its
/// start, with an error naming the variable.
pub fn thread_settings() -> crate::Result<(bool, WalkerThread)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let timing = std::env::var("VMLAB_TIMING_THREAD").ok();
    parse_thread_setting("VMLAB_TIMING_THREAD", timing.as_deref(), cores)?;
    let walker = match timing.as_deref().map(str::trim) {
        Some("off") => WalkerThread::Never,
        Some("on") => WalkerThread::Always,
        _ => WalkerThread::Auto,
    };
    let memory = parse_thread_setting("VMLAB_MEMORY_THREAD", std::env::var("VMLAB_MEMORY_THREAD").ok().as_deref(), cores)?;
    Ok((memory, walker))
}

fn parse_thread_setting(name: &str, value: Option<&str>, cores: usize) -> crate::Result<bool> {
    match value.map(str::trim) {
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        None | Some("") | Some("auto") => Ok(cores >= 2),
        Some(other) => Err(crate::Error::Sim(format!("environment variable {name}=`{other}`: expected on, off or auto"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn skylake() -> MemoryHierarchy {
        let c = Config::load("skylake", &[]).unwrap();
        MemoryHierarchy::new(&c.cache, &c.memory, c.mmu.seed).unwrap()
    }

    /// A mixed op stream: walks with parallel steps and nested walks, background
    /// references, data references, copies and fixed-cost walks.
    fn ops(n: u64) -> Vec<MemOp> {
        let mut v = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pa = (x % (64 << 20)) & !7;
            v.push(MemOp::WalkRef { pa, new_step: true, nested: false });
            v.push(MemOp::WalkRef { pa: pa ^ 0x1000, new_step: i % 3 != 0, nested: false });
            if i % 5 == 0 {
                v.push(MemOp::WalkRef { pa: pa ^ 0x40_0000, new_step: true, nested: true });
                v.push(MemOp::NestedEnd { cycles: 9 });
            }
            if i % 7 == 0 {
                v.push(MemOp::Background { pa: pa ^ 0x80_0000 });
            }
            if i % 13 == 0 {
                v.push(MemOp::HandlerFetch { pa: 0x7000 + i * 4 });
            }
            v.push(MemOp::WalkEnd { cycles: 1, fixed: (i % 11 == 0).then_some(30), trap: i % 13 == 0 });
            v.push(MemOp::Data { va: x, pa: pa ^ 0x20_0000, now: i, write: i % 2 == 0, instr: false });
            if i % 3 == 0 {
                let time = AccessTime { instrs: (x >> 34) | (i % 2) << 29, dep: Dep((x >> 8) as u8), tlb: (x >> 16) as u32 & 0xffff, os: 0 };
                v.push(MemOp::timed_data(x, pa ^ 0x30_0000, i, i % 4 == 0, i % 9 == 0, time).expect("the time fits"));
            }
            if i % 17 == 0 {
                let time = (i % 2 == 0).then_some(AccessTime { instrs: (x >> 60) + (i % 3) * 5, dep: Dep((x >> 3) as u8), tlb: 0, os: 0 });
                let stride = [64, -64, 8, 0, 4095][(i % 5) as usize];
                v.push(MemOp::DataRun { va: x, pa: pa ^ 0x50_0000, stride, count: 2 + (i % 70) as u32, write: i % 4 == 1, instr: i % 6 == 0, time });
            }
            if i % 1000 == 0 {
                v.push(MemOp::Copy { from: pa & !0xfff, to: (pa ^ 0x100_0000) & !0xfff, now: i, bytes: 4096 });
            }
        }
        v
    }

    #[test]
    fn the_thread_times_every_op_exactly_as_inline() {
        let stream = ops(20_000);
        let mut inline = skylake();
        let (mut cycles, mut hist, mut timer) = (CycleCounters::default(), Histogram::default(), WalkTimer::default());
        for &op in &stream {
            timer.apply(&mut inline, op).account(&mut cycles, &mut hist);
        }
        let mut t = MemoryThread::start_memory(skylake(), WalkTimer::default()).ok().unwrap();
        for &op in &stream {
            t.push(op.into());
        }
        let d = t.stop();
        assert!(cycles.walk > 0 && cycles.data > 0 && cycles.recolor_copy > 0);
        assert_eq!((d.cycles.walk, d.cycles.data, d.cycles.recolor_copy), (cycles.walk, cycles.data, cycles.recolor_copy));
        assert_eq!(d.walk_latency.buckets(), hist.buckets());
        assert_eq!(d.mem.memory_accesses, inline.memory_accesses);
        for (a, b) in d.mem.caches.iter().zip(&inline.caches) {
            assert_eq!(a.counters, b.counters, "cache {}", a.name);
        }
    }

    /// The memory thread's store writes exactly the op it is given: the mixed stream
    /// (every variant and flag), packed and streamed into a buffer that another thread
    /// then reads and unpacks.
    #[test]
    fn streamed_ops_read_back_as_written() {
        let ops = ops(2_000);
        let mut buf: Vec<PackedOp> = Vec::with_capacity(ops.len());
        for (i, &op) in ops.iter().enumerate() {
            // SAFETY: within the capacity, and a Vec's slots are aligned.
            unsafe { <Detached as OpSink>::store(buf.as_mut_ptr().add(i), op.into()) };
        }
        crate::host::stream_fence();
        // SAFETY: every slot was written.
        unsafe { buf.set_len(ops.len()) };
        let read = std::thread::spawn(move || buf.into_iter().map(PackedOp::unpack).collect::<Vec<_>>()).join().unwrap();
        assert_eq!(read, ops);
    }

    /// A run is its references one by one: the same cache changes and counters, the
    /// same time model's view, and its timing their latencies summed.
    #[test]
    fn a_data_run_is_its_references_one_by_one() {
        // Every reference timed, and sampled: units, warm-ups and skips shorter and
        // longer than runs, so that runs are skipped whole and cut by phases.
        a_data_run_is_its_references_one_by_one_under(&[]);
        a_data_run_is_its_references_one_by_one_under(&["time.sampling.period=300", "time.sampling.unit=20", "time.sampling.warmup=30"]);
    }

    fn a_data_run_is_its_references_one_by_one_under(sets: &[&str]) {
        let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        sets.extend(["memory.data_refs=true".into(), "time.model=\"ooo\"".into()]);
        let c = Config::load("skylake", &sets).unwrap();
        let (mut whole, mut one_by_one) = (skylake(), skylake());
        let timer = || WalkTimer { time: Some(Box::new(crate::time::TimeModel::new(&c.time, &c.cache, &whole))), ..WalkTimer::default() };
        let (mut t_whole, mut t_one) = (timer(), timer());
        let (mut c_whole, mut c_one) = (0u64, 0u64);
        let mut ops_one = 0;
        // (The core model steps through the instructions: keep them few.)
        let few = |t: AccessTime| AccessTime { instrs: t.instrs % 64, os: t.os % 1000, ..t };
        let sane = ops(3_000).into_iter().map(|op| match op {
            MemOp::TimedData { va, pa, now, write, instr, time } => MemOp::TimedData { va, pa, now, write, instr, time: few(time) },
            MemOp::Time(t) => MemOp::Time(few(t)),
            op => op,
        });
        for op in sane {
            let split: Vec<MemOp> = match op {
                MemOp::DataRun { va, pa, stride, count, write, instr, time } => (0..count as u64)
                    .map(|k| {
                        let d = (stride as i64 as u64).wrapping_mul(k);
                        let (va, pa) = (va.wrapping_add(d), pa.wrapping_add(d));
                        match time {
                            Some(time) => MemOp::TimedData { va, pa, now: 0, write, instr, time },
                            None => MemOp::Data { va, pa, now: 0, write, instr },
                        }
                    })
                    .collect(),
                op => vec![op],
            };
            ops_one += split.len();
            let data = |t: Timing| if let Timing::Data(l) = t { l } else { 0 };
            c_whole += data(t_whole.apply(&mut whole, op));
            for op in split {
                c_one += data(t_one.apply(&mut one_by_one, op));
            }
        }
        assert!(ops_one > 3_000 * 3 && c_whole > 0);
        assert_eq!(c_whole, c_one);
        for (a, b) in whole.caches.iter().zip(&one_by_one.caches) {
            assert_eq!(a.counters, b.counters, "cache {}", a.name);
        }
        assert_eq!(whole.memory_accesses, one_by_one.memory_accesses);
        let stats = |t: &WalkTimer| format!("{:?}", t.time.as_ref().unwrap().snapshot());
        assert_eq!(stats(&t_whole), stats(&t_one));
    }

    /// The builder joins references at one stride, of one kind and with one time,
    /// and ends a run at anything else.
    #[test]
    fn a_run_holds_equally_spaced_references_of_one_kind_and_time() {
        let t = |instrs, tlb| Some(AccessTime { instrs, dep: Dep(0), tlb, os: 0 });
        let mut r = DataRun::default();
        assert_eq!(r.take(), None);
        assert!(!r.extend(0x1000, 0x9000, false, false, None), "an empty run takes nothing");
        r.start(0x1000, 0x9000, false, false, t(3, 0));
        for k in 1..5u64 {
            assert!(r.extend(0x1000 + 64 * k, 0x9000 + 64 * k, false, false, t(3, 0)));
        }
        let mut probe = r;
        assert!(!probe.extend(0x1000 + 64 * 6, 0x9000 + 64 * 6, false, false, t(3, 0)), "a gap ends the run");
        for (va, pa, write, instr, time) in [
            (0x1140, 0x9140, true, false, t(3, 0)),
            (0x1140, 0x9140, false, true, t(3, 0)),
            (0x1140, 0x9140, false, false, t(4, 0)),
            (0x1140, 0x9140, false, false, None),
            (0x1140, 0x9148, false, false, t(3, 0)),
        ] {
            let mut probe = r;
            assert!(!probe.extend(va, pa, write, instr, time), "{va:x} {pa:x} {write} {instr} {time:?}");
        }
        assert_eq!(r.take(), Some(RunOp::Run(MemOp::DataRun { va: 0x1000, pa: 0x9000, stride: 64, count: 5, write: false, instr: false, time: t(3, 0) })));
        assert_eq!(r.take(), None, "taking empties it");
        // A first reference with TLB cycles goes alone; a descending run; a lone one.
        r.start(0x2000, 0x5000, true, false, t(1, 7));
        assert!(!r.extend(0x1ff8, 0x4ff8, true, false, t(1, 7)), "TLB cycles do not fit a run");
        r.start(0x2000, 0x5000, true, false, None);
        assert!(r.extend(0x1ff8, 0x4ff8, true, false, None) && r.extend(0x1ff0, 0x4ff0, true, false, None));
        assert_eq!(r.take(), Some(RunOp::Run(MemOp::DataRun { va: 0x2000, pa: 0x5000, stride: -8, count: 3, write: true, instr: false, time: None })));
        r.start(0x2000, 0x5000, false, true, t(9, 0));
        assert_eq!(r.take(), Some(RunOp::One { va: 0x2000, pa: 0x5000, write: false, instr: true, time: t(9, 0) }));
        // A stride too wide for the op.
        r.start(0, 0, false, false, None);
        assert!(!r.extend(1 << 40, 1 << 40, false, false, None));
    }

    #[test]
    fn the_environment_setting_is_on_off_or_auto() {
        let parse = |v, cores| parse_thread_setting("VMLAB_MEMORY_THREAD", v, cores);
        assert!(parse(Some("on"), 1).unwrap());
        assert!(!parse(Some("off"), 8).unwrap());
        assert!(parse(None, 2).unwrap() && !parse(None, 1).unwrap());
        assert!(parse(Some(" auto "), 4).unwrap());
        let e = parse(Some("yes"), 2).unwrap_err().to_string();
        assert!(e.contains("VMLAB_MEMORY_THREAD") && e.contains("yes"), "{e}");
        let e = parse_thread_setting("VMLAB_TIMING_THREAD", Some("1"), 2).unwrap_err().to_string();
        assert!(e.contains("VMLAB_TIMING_THREAD") && e.contains("`1`"), "{e}");
    }

    #[test]
    fn a_walk_costs_its_steps_slowest_references_plus_its_own_cycles() {
        let mut mem = skylake();
        let mut timer = WalkTimer::default();
        // Cold: every reference goes to memory (200 cycles); the second of step 0 is
        // parallel, so step 0 costs 200, step 1 another 200, the nested walk 200 + 5.
        let walk = [
            MemOp::WalkRef { pa: 0x1000, new_step: true, nested: false },
            MemOp::WalkRef { pa: 0x2000, new_step: false, nested: false },
            MemOp::WalkRef { pa: 0x3000, new_step: true, nested: true },
            MemOp::NestedEnd { cycles: 5 },
            MemOp::WalkRef { pa: 0x4000, new_step: true, nested: false },
        ];
        for op in walk {
            assert_eq!(timer.apply(&mut mem, op), Timing::None);
        }
        assert_eq!(timer.apply(&mut mem, MemOp::WalkEnd { cycles: 3, fixed: None, trap: false }), Timing::Walk(200 + 205 + 200 + 3));
        // Warm: L1 hits (4 cycles) per step.
        for op in walk {
            timer.apply(&mut mem, op);
        }
        assert_eq!(timer.apply(&mut mem, MemOp::WalkEnd { cycles: 0, fixed: None, trap: false }), Timing::Walk(4 + 9 + 4));
        assert_eq!(timer.apply(&mut mem, MemOp::WalkEnd { cycles: 0, fixed: Some(77), trap: false }), Timing::Walk(77));
    }
}
