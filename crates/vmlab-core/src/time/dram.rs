//! DRAM: channels of banks with row buffers, each channel's data bus a calendar of
//! bursts (docs/config.md `[time.dram]`).
//!
//! Address mapping row:bank:channel:column — one row's worth of consecutive bytes sits
//! in one row of one bank, so a sequential stream takes row hits and successive rows
//! spread over the channels and banks. Open-page policy: a bank keeps its last row
//! open. A request to the open row pays tCAS; to a closed bank tRCD + tCAS; to another
//! row tRP + tRCD + tCAS (a conflict). Column commands to an open row pipeline every
//! burst time (tCCD = tBURST).
//!
//! Scheduling: requests reach the controller in the order the core issues them, which
//! is not time order (a dependent load issues late, an independent one after it
//! early). The data bus is therefore a calendar: a burst takes the earliest gap at or
//! after its data is ready, so a late-arriving request can use an earlier idle slot,
//! and no two bursts ever overlap: the achieved bandwidth cannot exceed the peak. Each
//! bank is a calendar too: a request holds its bank from its start (activation, if its
//! row is not open) to its burst, in the earliest gap at or after its arrival, so a
//! request issued late but ready early does not queue behind what was reserved for
//! later times. Issued in time order, this is a bank serving its requests first come,
//! first served. Whether a request finds its row open is decided in issue order (the
//! row the bank's previous request in the trace left open). The first-ready preference
//! of FR-FCFS is what row-hit detection gives a stream: a request to the open row is a
//! row hit whatever was scheduled on other banks in between.

use crate::mmu::assoc::SetIndex;

/// DRAM timing, in core cycles (built from `[time.dram]` by [`super::TimeConfig`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DramTiming {
    pub channels: u32,
    pub banks: u32,
    /// log2 of the row (page) bytes per bank.
    pub row_shift: u32,
    pub t_cas: u64,
    pub t_rcd: u64,
    pub t_rp: u64,
    /// Bytes one request moves: a line of the last cache level.
    pub burst_bytes: u64,
    /// One burst on a channel's data bus (`burst_bytes` at its peak bandwidth).
    pub t_burst: u64,
    /// Controller and interconnect, each way together.
    pub controller: u64,
}

impl DramTiming {
    /// A request's latency with its bank and bus idle, `to_cas` cycles from its bank's
    /// state to the column command (0 for the open row, tRCD for a closed bank, tRP +
    /// tRCD for another row).
    pub fn unloaded(&self, to_cas: u64) -> u64 {
        self.controller + to_cas + self.t_cas + self.t_burst
    }
}

#[derive(Clone, Debug)]
struct Bank {
    /// The open row (as the requests so far left it, in issue order), or `u64::MAX`.
    row: u64,
    /// When the bank is busy: from a request's start to its column command's burst.
    busy: Calendar,
}

/// Busy intervals of a resource, sorted and merged when they touch.
#[derive(Clone, Debug, Default)]
pub struct Calendar {
    /// The intervals from `head` on; those before it were pruned. A vector with a
    /// moving head, not a ring: the searches index a plain slice (a ring's index wraps
    /// at every step), and pruning drops the dead prefix in bulk, not one at a time.
    busy: Vec<(u64, u64)>,
    head: usize,
}

/// Pruned intervals kept before the vector is compacted (they cost memory only).
const DEAD_KEPT: usize = 64;

/// A calendar's last interval (`start..end`) and the end of the one before it
/// (`before`; 0 if none): kept beside a set of calendars searched on every request (an
/// MSHR file's), so that most searches read a few words of one array instead of each
/// calendar's vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tail {
    pub before: u64,
    pub start: u64,
    pub end: u64,
}

impl Tail {
    /// [`Calendar::earliest`] of the calendar this tail was taken from, for a request
    /// at or after `before` (only the last interval can overlap it); `None` before.
    #[inline(always)]
    pub fn earliest(&self, at: u64, len: u64) -> Option<u64> {
        (at >= self.before).then_some(if self.end <= at || self.start >= at + len { at } else { self.end })
    }
}

/// The index in `b` (sorted, disjoint intervals) of the first interval whose end is
/// `after`, and so every one from it on. Requests arrive nearly in time order, so the
/// answer is usually among the last few: those are looked at first, then the rest is
/// bisected (a saturated DRAM's write-backs, issued at dispatch, land tens of
/// intervals back).
#[inline(always)]
fn ending_after(b: &[(u64, u64)], after: impl Fn(u64) -> bool) -> usize {
    let mut i = b.len();
    for _ in 0..4 {
        if i == 0 || !after(b[i - 1].1) {
            return i;
        }
        i -= 1;
    }
    b[..i].partition_point(|&(_, e)| !after(e))
}

impl Calendar {
    /// The earliest start `>= at` of `len` cycles that overlap nothing reserved, and
    /// the index (into `busy`) of the first interval after it.
    #[inline(always)]
    fn gap(&self, at: u64, len: u64) -> (usize, u64) {
        let b = &self.busy[self.head..];
        let mut i = ending_after(b, |e| e > at);
        let mut start = at;
        while i < b.len() && b[i].0 < start + len {
            start = start.max(b[i].1);
            i += 1;
        }
        (self.head + i, start)
    }

    /// Reserve `len` cycles at the earliest start `>= at` that overlaps nothing
    /// reserved; returns the start.
    #[inline(always)]
    pub fn reserve(&mut self, at: u64, len: u64) -> u64 {
        // Most requests come after everything reserved: append, or extend the last.
        // (Every kept interval is live: `prune` empties the vector when none is.)
        match self.busy.last_mut() {
            None => {}
            Some(last) if last.1 == at => {
                last.1 = at + len;
                return at;
            }
            Some(last) if last.1 < at => {}
            Some(_) => return self.reserve_before(at, len),
        }
        self.busy.push((at, at + len));
        at
    }

    /// `reserve` of a request that may fit before the last reservation.
    #[inline(never)]
    fn reserve_before(&mut self, at: u64, len: u64) -> u64 {
        let (i, start) = self.gap(at, len);
        let head = self.head;
        let b = &mut self.busy;
        let end = start + len;
        // Insert at i, merging with a touching neighbour on either side.
        let joins_prev = i > head && b[i - 1].1 == start;
        let joins_next = i < b.len() && b[i].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                b[i - 1].1 = b[i].1;
                b.remove(i);
            }
            (true, false) => b[i - 1].1 = end,
            (false, true) => b[i].0 = start,
            (false, false) => b.insert(i, (start, end)),
        }
        start
    }

    /// The earliest start `>= at` of `len` cycles that overlap nothing reserved (what
    /// [`Calendar::reserve`] would return), without reserving them.
    #[inline(always)]
    pub fn earliest(&self, at: u64, len: u64) -> u64 {
        // One interval kept (an MSHR's or a walker's calendar, nearly always), or a
        // request after the interval before the last: the tail answers.
        self.tail().earliest(at, len).unwrap_or_else(|| self.gap(at, len).1)
    }

    /// Where a request of `len` cycles that can pause runs: from the first free cycle
    /// at or after `at`, through every free stretch after it, until `len` free cycles
    /// are used. Returns (start, end). A page walker serves walks this way in time
    /// order: a walk ready early takes the stretch before one reserved for later, and
    /// what is left of it runs after that one (its start there is `end - len`).
    #[inline(always)]
    pub fn fill(&self, at: u64, len: u64) -> (u64, u64) {
        let b = &self.busy[self.head..];
        if let [(s, e)] = *b {
            return match () {
                _ if e <= at || s >= at + len => (at, at + len),
                _ if s > at => (at, e + len - (s - at)),
                _ => (e, e + len),
            };
        }
        let i = ending_after(b, |e| e > at);
        let (mut t, mut left, mut start) = (at, len, None);
        for &(s, e) in &b[i..] {
            if s > t {
                let start = *start.get_or_insert(t);
                if s - t >= left {
                    return (start, t + left);
                }
                left -= s - t;
            }
            t = t.max(e);
        }
        (start.unwrap_or(t), t + left)
    }

    /// Mark `start..end` busy, whatever it overlaps (the union is kept).
    #[inline(always)]
    pub fn occupy(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        // Most intervals arrive at the back, in time order: extend or append.
        match self.busy.last_mut() {
            None => self.busy.push((start, end)),
            Some(last) if start > last.1 => self.busy.push((start, end)),
            Some(last) if start >= last.0 => last.1 = last.1.max(end),
            Some(_) => self.occupy_before(start, end),
        }
    }

    /// `occupy` of an interval that starts before the last one kept.
    #[inline(never)]
    fn occupy_before(&mut self, start: u64, end: u64) {
        let head = self.head;
        let b = &mut self.busy;
        let i = head + ending_after(&b[head..], |e| e >= start);
        let (mut s, mut e, mut j) = (start, end, i);
        while j < b.len() && b[j].0 <= e {
            s = s.min(b[j].0);
            e = e.max(b[j].1);
            j += 1;
        }
        match j - i {
            0 => b.insert(i, (s, e)),
            1 => b[i] = (s, e),
            _ => {
                b[i] = (s, e);
                b.drain(i + 1..j);
            }
        }
    }

    /// Forget intervals that end by `horizon` (no request can arrive before it).
    /// Returns the cycles they covered.
    pub fn prune(&mut self, horizon: u64) -> u64 {
        let mut covered = 0;
        while let Some(&(s, e)) = self.busy.get(self.head).filter(|&&(_, e)| e <= horizon) {
            covered += e - s;
            self.head += 1;
        }
        if self.head == self.busy.len() {
            self.busy.clear();
            self.head = 0;
        } else if self.head > DEAD_KEPT {
            self.busy.drain(..self.head);
            self.head = 0;
        }
        covered
    }

    /// The last interval kept and the end of the one before it: all a request at or
    /// after that end needs to find its gap ([`Tail::earliest`]).
    #[inline(always)]
    pub fn tail(&self) -> Tail {
        match self.busy[self.head..] {
            [] => Tail::default(),
            [(start, end)] => Tail { before: 0, start, end },
            [.., (_, before), (start, end)] => Tail { before, start, end },
        }
    }

    /// The end of the last interval kept (0 if none): the resource is free from then on.
    #[inline(always)]
    pub fn end(&self) -> u64 {
        self.busy.last().map_or(0, |&(_, e)| e)
    }

    /// Cycles covered by the intervals kept.
    pub fn covered(&self) -> u64 {
        self.busy[self.head..].iter().map(|&(s, e)| e - s).sum()
    }
}

/// DRAM counters (docs/metrics.md, `time.dram`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DramCounters {
    pub reads: u64,
    pub writes: u64,
    pub row_hits: u64,
    pub row_misses: u64,
    pub row_conflicts: u64,
    /// Cycles requests waited for their bank or bus beyond the unloaded latency.
    pub queue_cycles: u64,
}

impl DramCounters {
    /// `f` applied to each counter of `self` and `o`.
    pub fn zip(&self, o: &DramCounters, f: impl Fn(u64, u64) -> u64) -> DramCounters {
        DramCounters {
            reads: f(self.reads, o.reads),
            writes: f(self.writes, o.writes),
            row_hits: f(self.row_hits, o.row_hits),
            row_misses: f(self.row_misses, o.row_misses),
            row_conflicts: f(self.row_conflicts, o.row_conflicts),
            queue_cycles: f(self.queue_cycles, o.queue_cycles),
        }
    }
}

pub struct Dram {
    t: DramTiming,
    /// `t.channels` and `t.banks` as divisors (a 64-bit division is tens of cycles, and
    /// every DRAM reference takes two).
    channels: SetIndex,
    banks_per_channel: SetIndex,
    banks: Vec<Bank>,
    bus: Vec<Calendar>,
    pub counters: DramCounters,
    /// The last request's latency had it found its bank and bus idle.
    pub last_unloaded: u64,
}

impl Dram {
    pub fn new(t: DramTiming) -> Dram {
        let n = (t.channels * t.banks) as usize;
        Dram {
            banks: vec![Bank { row: u64::MAX, busy: Calendar::default() }; n],
            bus: vec![Calendar::default(); t.channels as usize],
            channels: SetIndex::new(t.channels as usize),
            banks_per_channel: SetIndex::new(t.banks as usize),
            t,
            counters: DramCounters::default(),
            last_unloaded: 0,
        }
    }

    pub fn timing(&self) -> &DramTiming {
        &self.t
    }

    /// A line request reaching the controller at `at`; returns when its data is back at
    /// the last-level cache. A write (a dirty line written back) takes its bank and a
    /// burst; nothing waits for it.
    pub fn access(&mut self, pa: u64, at: u64, write: bool) -> u64 {
        let (channel, bank, row) = self.locate(pa);
        let t = &self.t;
        let bank = &mut self.banks[bank];
        let arrive = at + t.controller / 2;
        let c = &mut self.counters;
        let (to_cas, kind) = if bank.row == row {
            (0, &mut c.row_hits)
        } else if bank.row == u64::MAX {
            (t.t_rcd, &mut c.row_misses)
        } else {
            (t.t_rp + t.t_rcd, &mut c.row_conflicts)
        };
        *kind += 1;
        // The bank is busy from the request's start to its burst: the earliest gap at
        // or after its arrival, so that a request the core issued late but which is
        // ready early is not queued behind reservations made for later times.
        let start = bank.busy.reserve(arrive, to_cas + t.t_burst);
        let cas = start + to_cas;
        bank.row = row;
        let ready = cas + t.t_cas;
        let burst = self.bus[channel].reserve(ready, t.t_burst);
        let done = burst + t.t_burst + t.controller - t.controller / 2;
        let unloaded = t.unloaded(to_cas);
        c.queue_cycles += (done - at).saturating_sub(unloaded);
        self.last_unloaded = unloaded;
        if write {
            c.writes += 1;
        } else {
            c.reads += 1;
        }
        done
    }

    /// Where the row:bank:channel:column mapping puts `pa`: its channel, bank (an
    /// index into `banks`) and row.
    #[inline(always)]
    fn locate(&self, pa: u64) -> (usize, usize, u64) {
        let (rest, channel) = self.channels.div_rem(pa >> self.t.row_shift);
        let (row, bank_no) = self.banks_per_channel.div_rem(rest);
        (channel, channel * self.t.banks as usize + bank_no, row)
    }

    /// A request sampled timing skips: it leaves its row open, and takes no time.
    #[inline(always)]
    pub fn warm(&mut self, pa: u64) {
        let (_, bank, row) = self.locate(pa);
        self.banks[bank].row = row;
    }

    /// `warm`, for the skipped requests of one run in turn (`*last`: the row key
    /// `pa >> row_shift` of the one before, `u64::MAX` at the first). A request to the
    /// row the one before left open changes nothing, and a run's lines share rows: a
    /// page's run at stride 64 asks where its row is once, when rows are a page or more.
    #[inline(always)]
    pub fn warm_after(&mut self, pa: u64, last: &mut u64) {
        let key = pa >> self.t.row_shift;
        if key != *last {
            *last = key;
            self.warm(pa);
        }
    }

    /// No request will arrive before `horizon`.
    pub fn prune(&mut self, horizon: u64) {
        for b in &mut self.bus {
            b.prune(horizon);
        }
        for b in &mut self.banks {
            b.busy.prune(horizon);
        }
    }

    /// Peak bytes per cycle over all channels.
    pub fn peak_bytes_per_cycle(&self) -> f64 {
        self.t.channels as f64 * self.t.burst_bytes as f64 / self.t.t_burst as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ddr() -> Dram {
        Dram::new(DramTiming { channels: 1, banks: 8, row_shift: 13, t_cas: 50, t_rcd: 50, t_rp: 50, burst_bytes: 64, t_burst: 10, controller: 20 })
    }

    /// Warming a run's requests in turn leaves every bank's open row where warming
    /// each does: runs forwards and backwards, at strides within a row and across
    /// rows, banks and channels.
    #[test]
    fn warming_a_run_in_turn_opens_the_rows_warming_each_opens() {
        let timing = DramTiming { channels: 2, banks: 4, ..ddr().t };
        let (mut each, mut in_turn) = (Dram::new(timing.clone()), Dram::new(timing));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let stride = [64i64, -64, 4096, 8192, 24_576, 0][(x % 6) as usize];
            let start = (x >> 20) % (1 << 30);
            let mut last = u64::MAX;
            for k in 0..(x >> 8) % 200 {
                let pa = start.wrapping_add((stride * k as i64) as u64) % (1 << 31);
                each.warm(pa);
                in_turn.warm_after(pa, &mut last);
            }
            let rows = |d: &Dram| d.banks.iter().map(|b| b.row).collect::<Vec<_>>();
            assert_eq!(rows(&each), rows(&in_turn));
        }
        assert!(each.banks.iter().all(|b| b.row != u64::MAX), "the runs opened a row in every bank");
    }

    #[test]
    fn row_hit_miss_and_conflict_latencies() {
        let mut d = ddr();
        // Closed bank: controller + tRCD + tCAS + burst.
        assert_eq!(d.access(0, 0, false), 20 + 50 + 50 + 10);
        // The same row, long after: tCAS only.
        assert_eq!(d.access(64, 1000, false) - 1000, 20 + 50 + 10);
        // Another row of the same bank (8 banks of 8 KiB rows: 64 KiB apart).
        assert_eq!(d.access(64 << 10, 2000, false) - 2000, 20 + 150 + 10);
        assert_eq!((d.counters.row_misses, d.counters.row_hits, d.counters.row_conflicts), (1, 1, 1));
    }

    #[test]
    fn a_request_ready_early_does_not_queue_behind_one_its_bank_reserved_later() {
        let mut d = ddr();
        // Issued first, ready at 1000; then the same bank's request ready at 0.
        let late = d.access(0, 1000, false);
        assert_eq!(d.access(64, 0, false), 20 + 50 + 10, "served unloaded: the row is open (issue order) and the bank idle before 1000");
        assert_eq!(late, 1000 + 20 + 50 + 50 + 10);
    }

    #[test]
    fn the_bus_never_carries_two_bursts_at_once() {
        let mut d = ddr();
        // 100 requests at once to 100 different rows and banks, in arbitrary order.
        let mut dones: Vec<u64> = (0..100u64).map(|i| d.access(((i * 37) % 100) << 13, 0, false)).collect();
        dones.sort();
        for w in dones.windows(2) {
            assert!(w[1] - w[0] >= 10, "bursts overlap: {w:?}");
        }
    }

    #[test]
    fn a_late_issued_request_takes_an_earlier_idle_slot() {
        let mut c = Calendar::default();
        assert_eq!(c.reserve(100, 10), 100);
        assert_eq!(c.reserve(130, 10), 130);
        // Issued after them, ready earlier: the gap before 100, then the one at 110.
        assert_eq!(c.reserve(50, 10), 50);
        assert_eq!(c.reserve(105, 10), 110);
        assert_eq!(c.reserve(105, 15), 140, "the gap 120..130 is too short");
        assert_eq!(c.prune(200), 55);
        assert!(c.busy.is_empty());
    }

    /// A seeded linear congruential generator: `next(m)` is in 0..m.
    fn lcg(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |m| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        }
    }

    /// A calendar of 1 to `most` random intervals, pruned at a random horizon, and a
    /// request (ready time, length) to place in it.
    fn random_case(next: &mut impl FnMut(u64) -> u64, most: u64) -> (Calendar, u64, u64) {
        let mut c = Calendar::default();
        for _ in 0..1 + next(most) {
            let s = next(200);
            c.occupy(s, s + 1 + next(40));
        }
        c.prune(next(60));
        let (at, len) = (next(250), 1 + next(50));
        (c, at, len)
    }

    #[test]
    fn the_one_interval_shortcut_finds_what_the_gap_search_finds() {
        let mut next = lcg(3);
        for _ in 0..5000 {
            let (c, at, len) = random_case(&mut next, 3);
            assert_eq!(c.earliest(at, len), c.gap(at, len).1, "{c:?} at {at} len {len}");
        }
    }

    #[test]
    fn a_tail_finds_what_its_calendar_finds_for_a_request_after_the_interval_before_the_last() {
        let mut next = lcg(9);
        let mut answered = 0;
        for _ in 0..5000 {
            let (c, at, len) = random_case(&mut next, 4);
            let tail = c.tail();
            assert_eq!(tail.end, c.end());
            match tail.earliest(at, len) {
                Some(start) => {
                    answered += 1;
                    assert_eq!(start, c.gap(at, len).1, "{c:?} at {at} len {len}");
                }
                None => assert!(at < tail.before, "{c:?} at {at}: only a request before the interval before the last needs the search"),
            }
        }
        assert!(answered > 1000 && answered < 5000, "both cases met: {answered}");
        assert_eq!(Calendar::default().tail().earliest(5, 10), Some(5));
    }

    #[test]
    fn a_pausing_request_fills_every_idle_stretch_until_it_is_done() {
        let mut c = Calendar::default();
        c.occupy(100, 200);
        c.occupy(230, 300);
        // Fits before the first: no pause.
        assert_eq!(c.fill(20, 50), (20, 70));
        // 40 cycles before 100, 30 in 200..230, the last 30 from 300.
        assert_eq!(c.fill(60, 100), (60, 330));
        // Ready inside a reservation: from its end, then pausing at the next.
        assert_eq!(c.fill(150, 40), (200, 310));
        assert_eq!(c.fill(500, 10), (500, 510));
        // Never later than the first gap that fits it whole.
        let mut next = lcg(7);
        for _ in 0..5000 {
            let (c, at, len) = random_case(&mut next, 4);
            let (start, end) = c.fill(at, len);
            let whole = c.earliest(at, len);
            assert!(start >= at && start <= whole && end <= whole + len, "{c:?} at {at} len {len}: {start}..{end}");
            // The free cycles in start..end are exactly len.
            let busy: u64 = c.busy[c.head..].iter().map(|&(s, e)| e.min(end).saturating_sub(s.max(start))).sum();
            assert_eq!(end - start - busy, len, "{c:?} at {at} len {len}: {start}..{end}");
        }
    }

    /// A calendar as a timeline of busy cycles: the reference for every search.
    struct Timeline(Vec<bool>);

    impl Timeline {
        fn free(&self, c: u64) -> bool {
            !self.0.get(c as usize).copied().unwrap_or(false)
        }
        fn earliest(&self, at: u64, len: u64) -> u64 {
            (at..).find(|&s| (s..s + len).all(|c| self.free(c))).unwrap()
        }
        fn fill(&self, at: u64, len: u64) -> (u64, u64) {
            let mut free = (at..).filter(|&c| self.free(c));
            let start = free.next().unwrap();
            let last = if len == 1 { start } else { free.nth(len as usize - 2).unwrap() };
            (start, last + 1)
        }
        fn occupy(&mut self, start: u64, end: u64) {
            if self.0.len() < end as usize {
                self.0.resize(end as usize, false);
            }
            self.0[start as usize..end as usize].iter_mut().for_each(|c| *c = true);
        }
    }

    /// Every search and change agrees with the timeline, on fragmented calendars (tens
    /// of intervals, as a saturated bus's), with requests arriving out of time order
    /// and horizons moving on.
    #[test]
    fn a_calendar_agrees_with_a_timeline_of_busy_cycles() {
        let mut next = lcg(11);
        for round in 0..60 {
            let (mut c, mut t) = (Calendar::default(), Timeline(Vec::new()));
            let (mut horizon, mut most, mut deep) = (0, 0, 0);
            for op in 0..400 {
                most = most.max(c.busy.len() - c.head);
                // Requests from the horizon on, most near the end of what is reserved.
                let at = horizon + next(c.end().saturating_sub(horizon) + 20);
                // (Past four intervals, a search from the back bisects.)
                deep += (c.busy[c.head..].iter().filter(|&&(_, e)| e > at).count() > 4) as u32;
                let len = 1 + next(6);
                let at_ = format!("round {round} op {op}: at {at} len {len}");
                assert_eq!(c.earliest(at, len), t.earliest(at, len), "{at_}");
                assert_eq!(c.fill(at, len), t.fill(at, len), "{at_}");
                match next(5) {
                    // A burst after a short idle gap: a fragmented calendar, as a
                    // saturated bus's is.
                    4 => {
                        let s = c.end() + 1 + next(3);
                        c.occupy(s, s + len);
                        t.occupy(s, s + len);
                    }
                    0 => {
                        let s = c.reserve(at, len);
                        assert_eq!(s, t.earliest(at, len), "{at_}");
                        t.occupy(s, s + len);
                    }
                    1 => {
                        c.occupy(at, at + len);
                        t.occupy(at, at + len);
                    }
                    2 if next(20) == 0 => {
                        horizon += next(30);
                        c.prune(horizon);
                    }
                    _ => {
                        let s = t.earliest(at, len);
                        c.occupy(s, s + len);
                        t.occupy(s, s + len);
                    }
                }
            }
            assert!(most > 16, "round {round}: the calendar fragments");
            assert!(deep > 40, "round {round}: {deep} requests land more than four intervals back");
        }
    }

    #[test]
    fn occupied_intervals_keep_their_union() {
        let mut c = Calendar::default();
        c.occupy(100, 200);
        c.occupy(300, 400);
        // Arriving out of order, overlapping both and the gap between.
        c.occupy(150, 350);
        c.occupy(50, 60);
        assert_eq!(c.covered(), 10 + 300);
        assert_eq!(c.earliest(55, 10), 60);
        assert_eq!(c.earliest(55, 50), 400, "the gap 60..100 is too short");
        assert_eq!(c.prune(70), 10);
        assert_eq!(c.covered(), 300);
    }
}
