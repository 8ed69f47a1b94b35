//! The out-of-order core: a first-order reorder-buffer window model, in the spirit of
//! interval simulation (Karkhanis & Smith, ISCA 2004; Genbrugge, Eyerman & Eeckhout,
//! HPCA 2010, as Sniper uses it).
//!
//! Instructions dispatch in order at `base_cpi` cycles each (at least 1/width) into a
//! ROB of `rob` entries, and retire in order. Instruction i cannot dispatch before
//! instruction i - rob has retired: a long-latency instruction at the head stalls
//! dispatch once the window behind it is full, and every independent miss inside that
//! window overlaps with it. A load issues when its address is ready — at dispatch, or
//! when the load its address depends on has its data — and completes when its
//! translation and its data reference are done; only what depends on it waits. A load
//! needs a load-queue entry (freed when it retires), a store a store-queue entry (freed
//! when its write has drained to the cache, in order, after it retired).
//!
//! The cycles are split into a CPI stack: every cycle dispatch loses to a full window,
//! a full front-end or an OS trap is charged to what caused it — translation, data
//! (program references to the caches and DRAM) or the OS — and the rest is base.

use std::collections::VecDeque;

/// Fixed-point fraction of a cycle (dispatch advances by fractions of a cycle).
pub const FP: u64 = 1024;

/// What the core model needs of `[time.core]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreSettings {
    pub rob: u32,
    pub load_queue: u32,
    pub store_queue: u32,
    /// Cycles per instruction at dispatch when nothing stalls, in 1/[`FP`] cycles.
    pub cpi_fp: u64,
}

/// What made an instruction slow (and so what a stall behind it is charged to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Nothing: it ran at its base rate.
    Base,
    /// A memory instruction; the share of its latency (out of 65535) that was
    /// translation, the rest data.
    Mem(u16),
}

/// Stall cycles by cause (1/[`FP`] cycles).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stalls {
    pub data: u64,
    pub translation: u64,
    pub os: u64,
}

impl Stalls {
    fn charge(&mut self, fp_cycles: u64, cause: Cause) {
        if let Cause::Mem(share) = cause {
            let t = fp_cycles * share as u64 / 65535;
            self.translation += t;
            self.data += fp_cycles - t;
        }
    }
}

/// A run of instructions that dispatched back to back (one memory instruction, or up
/// to a window's worth of others): enough to find any one's retire time.
#[derive(Clone, Copy, Debug)]
struct Group {
    first: u64,
    last: u64,
    /// Dispatch of the first, and the spacing (1/FP cycles).
    d0_fp: u64,
    step_fp: u64,
    /// The retire time of the instruction before the group.
    floor: u64,
    /// The retire time of the last.
    retire: u64,
    cause: Cause,
}

impl Group {
    fn retire_of(&self, j: u64) -> u64 {
        if j >= self.last {
            return self.retire;
        }
        let own = (self.d0_fp + (j - self.first) * self.step_fp) / FP + 1;
        self.floor.max(own).min(self.retire)
    }
}

/// The instruction whose memory operations are still arriving.
#[derive(Clone, Copy, Debug)]
struct Open {
    index: u64,
    dispatch: u64,
    complete: u64,
    cause: Cause,
}

pub struct Core {
    s: CoreSettings,
    /// The next dispatch slot (1/FP cycles).
    dispatch_fp: u64,
    /// Instructions dispatched.
    pub instructions: u64,
    groups: VecDeque<Group>,
    retire: u64,
    retire_cause: Cause,
    open: Option<Open>,
    /// Per load-queue entry: when its load retires; per store-queue entry: when its
    /// store has drained.
    lq: Vec<u64>,
    sq: Vec<u64>,
    /// The entries the next load and store take (`loads` and `stores` modulo the
    /// queues' sizes, kept as they advance: a division per reference costs more).
    lq_next: usize,
    sq_next: usize,
    pub loads: u64,
    pub stores: u64,
    /// The last store's drain.
    drain: u64,
    /// The last 256 loads' (data ready, cause), by load number.
    producers: Vec<(u64, Cause)>,
    pub stalls: Stalls,
    /// Cycles loads and stores waited for a queue entry.
    pub queue_wait: u64,
}

/// The queue entry after `i` in a ring of `len`.
#[inline(always)]
fn next_entry(i: usize, len: usize) -> usize {
    if i + 1 == len {
        0
    } else {
        i + 1
    }
}

impl Core {
    pub fn new(s: CoreSettings) -> Core {
        Core {
            lq: vec![0; s.load_queue as usize],
            sq: vec![0; s.store_queue as usize],
            lq_next: 0,
            sq_next: 0,
            s,
            dispatch_fp: 0,
            instructions: 0,
            groups: VecDeque::new(),
            retire: 0,
            retire_cause: Cause::Base,
            open: None,
            loads: 0,
            stores: 0,
            drain: 0,
            producers: vec![(0, Cause::Base); 256],
            stalls: Stalls::default(),
            queue_wait: 0,
        }
    }

    /// The retire time of instruction `j` and what set it. Queries come in increasing
    /// `j` (the window's tail), so groups before it are dropped.
    fn retire_of(&mut self, j: u64) -> (u64, Cause) {
        while self.groups.front().is_some_and(|g| g.last < j) {
            self.groups.pop_front();
        }
        match self.groups.front() {
            Some(g) if g.first <= j => (g.retire_of(j), g.cause),
            // Retired before anything kept.
            _ => (0, Cause::Base),
        }
    }

    /// The earliest dispatch of instruction `i` the window allows, from `natural`.
    fn window(&mut self, i: u64, natural: u64) -> u64 {
        let rob = self.s.rob as u64;
        if i < rob {
            return natural;
        }
        let (r, cause) = self.retire_of(i - rob);
        let r = r * FP;
        if r > natural {
            self.stalls.charge(r - natural, cause);
            r
        } else {
            natural
        }
    }

    /// Close the open instruction: it retires after its predecessor, once complete.
    fn close(&mut self) {
        if let Some(o) = self.open.take() {
            let (retire, cause) = if o.complete > self.retire { (o.complete, o.cause) } else { (self.retire, self.retire_cause) };
            self.groups.push_back(Group { first: o.index, last: o.index, d0_fp: o.dispatch * FP, step_fp: 0, floor: self.retire, retire, cause });
            self.retire = retire;
            self.retire_cause = cause;
        }
    }

    /// `n` instructions that make no memory reference.
    pub fn plain(&mut self, mut n: u64) {
        self.close();
        let chunk = (self.s.rob as u64 / 8).max(1);
        while n > 0 {
            let k = n.min(chunk);
            let i0 = self.instructions;
            let d0 = self.window(i0, self.dispatch_fp);
            let natural_last = d0 + (k - 1) * self.s.cpi_fp;
            let d_last = if k > 1 { self.window(i0 + k - 1, natural_last) } else { d0 };
            let own = d_last / FP + 1;
            let (retire, cause) = if own > self.retire { (own, Cause::Base) } else { (self.retire, self.retire_cause) };
            let step_fp = if k > 1 { (d_last - d0) / (k - 1) } else { 0 };
            self.groups.push_back(Group { first: i0, last: i0 + k - 1, d0_fp: d0, step_fp, floor: self.retire, retire, cause });
            self.retire = retire;
            self.retire_cause = cause;
            self.dispatch_fp = d_last + self.s.cpi_fp;
            self.instructions += k;
            n -= k;
        }
    }

    /// The cycle in which the next instruction would dispatch, if nothing stalls it.
    /// (Rounded down: a front end that delivers by then does not delay it, so several
    /// instructions can dispatch in one cycle.)
    pub fn next_slot(&self) -> u64 {
        self.dispatch_fp / FP
    }

    /// Dispatch a new instruction that will make memory references, not before
    /// `front` (its fetch; charged to `front_cause`). Returns its dispatch cycle.
    pub fn begin(&mut self, front: u64, front_cause: Cause) -> u64 {
        self.close();
        let i = self.instructions;
        let natural = self.dispatch_fp;
        let f = front * FP;
        let after_front = if f > natural {
            self.stalls.charge(f - natural, front_cause);
            f
        } else {
            natural
        };
        let d_fp = self.window(i, after_front);
        self.dispatch_fp = d_fp + self.s.cpi_fp;
        self.instructions += 1;
        let d = d_fp.div_ceil(FP);
        self.open = Some(Open { index: i, dispatch: d, complete: d + 1, cause: Cause::Base });
        d
    }

    /// The open instruction's dispatch cycle (a new one begins if none is open).
    pub fn current(&mut self) -> u64 {
        match self.open {
            Some(o) => o.dispatch,
            None => self.begin(0, Cause::Base),
        }
    }

    /// Whether an instruction is open (a memory reference can join it).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// When the load `k` loads back has its data, and what made it late.
    pub fn producer(&self, k: u8) -> Option<(u64, Cause)> {
        let k = k as u64;
        (self.loads >= k).then(|| self.producers[((self.loads - k) & 255) as usize])
    }

    /// The earliest a load (`store` false) or store can issue, from `at`: a free queue
    /// entry.
    pub fn queue_entry(&mut self, store: bool, at: u64) -> u64 {
        let free = if store { self.sq[self.sq_next] } else { self.lq[self.lq_next] };
        self.queue_wait += free.saturating_sub(at);
        at.max(free)
    }

    /// An OS trap (a page fault, a policy's work) raised by the open instruction, whose
    /// translation ended at `at`: it runs once everything older has retired, and
    /// dispatch restarts after it. Returns when it ends.
    pub fn trap(&mut self, at: u64, cycles: u64) -> u64 {
        let end = self.drained(at) + cycles;
        let e = end * FP;
        if e > self.dispatch_fp {
            self.stalls.os += e - self.dispatch_fp;
            self.dispatch_fp = e;
        }
        end
    }

    /// When an exception the open instruction raises at `at` can start: once
    /// everything older has retired.
    pub fn drained(&self, at: u64) -> u64 {
        at.max(self.retire)
    }

    /// An exception's handler ran until `end`: dispatch restarts after it; the cycles
    /// dispatch lost are charged to `cause`.
    pub fn restart(&mut self, end: u64, cause: Cause) {
        let e = end * FP;
        if e > self.dispatch_fp {
            self.stalls.charge(e - self.dispatch_fp, cause);
            self.dispatch_fp = e;
        }
    }

    /// A load of the open instruction completes at `done`.
    pub fn load_done(&mut self, done: u64, cause: Cause) {
        self.producers[(self.loads & 255) as usize] = (done, cause);
        self.lq[self.lq_next] = done.max(self.retire);
        self.lq_next = next_entry(self.lq_next, self.lq.len());
        self.loads += 1;
        self.op_done(done, cause);
    }

    /// A store of the open instruction is translated at `done` (it can retire); its
    /// write, which completes at `written`, drains in order after that.
    pub fn store_done(&mut self, done: u64, written: u64, cause: Cause) {
        self.drain = self.drain.max(written);
        self.sq[self.sq_next] = self.drain;
        self.sq_next = next_entry(self.sq_next, self.sq.len());
        self.stores += 1;
        self.op_done(done, cause);
    }

    /// The earliest a retired store's write can start, if it was translated at `done`.
    pub fn store_commit(&self, done: u64) -> u64 {
        done.max(self.retire)
    }

    fn op_done(&mut self, done: u64, cause: Cause) {
        if let Some(o) = &mut self.open {
            if done > o.complete {
                o.complete = done;
                o.cause = cause;
            }
        }
    }

    /// No reference issued from now on starts before this cycle.
    pub fn horizon(&self) -> u64 {
        match self.open {
            Some(o) => o.dispatch,
            None => self.dispatch_fp / FP,
        }
    }

    /// End of the run: the last instruction retires and the last store drains. Returns
    /// the total cycles; the cycles after the last dispatch are charged to what the
    /// last retirement waited for.
    pub fn finish(&mut self) -> u64 {
        self.close();
        let end = self.retire.max(self.drain);
        let tail = (end * FP).saturating_sub(self.dispatch_fp);
        let cause = self.retire_cause;
        self.stalls.charge(tail, cause);
        end
    }

    /// Cycles dispatch advanced at its base rate, so far (1/FP cycles).
    pub fn dispatched_fp(&self) -> u64 {
        self.dispatch_fp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> Core {
        Core::new(CoreSettings { rob: 8, load_queue: 4, store_queue: 4, cpi_fp: FP / 4 })
    }

    #[test]
    fn plain_instructions_run_at_the_base_rate() {
        let mut c = core();
        c.plain(4000);
        let end = c.finish();
        assert!((1000..=1002).contains(&end), "{end}");
        assert_eq!(c.stalls, Stalls::default());
    }

    #[test]
    fn a_long_load_stalls_dispatch_once_the_window_is_full() {
        let mut c = core();
        let d = c.begin(0, Cause::Base);
        c.load_done(d + 200, Cause::Mem(0));
        c.plain(100);
        let end = c.finish();
        // 7 instructions fit behind the load; the rest wait for it to retire.
        assert!((200 + 23..=200 + 30).contains(&end), "{end}");
        assert!(c.stalls.data > 150 * FP, "{:?}", c.stalls);
    }

    /// A core with `n` independent 200-cycle loads dispatched.
    fn with_loads(n: usize) -> Core {
        let mut c = core();
        for _ in 0..n {
            let d = c.begin(0, Cause::Base);
            c.load_done(d + 200, Cause::Mem(0));
        }
        c
    }

    #[test]
    fn independent_loads_in_the_window_overlap() {
        let mut c = with_loads(4);
        let end = c.finish();
        assert!(end < 210, "four overlapping 200-cycle loads: {end}");
    }

    #[test]
    fn a_full_load_queue_holds_the_next_load_back() {
        let mut c = with_loads(4);
        let d = c.begin(0, Cause::Base);
        assert!(c.queue_entry(false, d) >= 200, "the fifth load waits for the first to retire");
    }
}
