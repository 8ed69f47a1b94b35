//! The time model: how long the program takes under a design, not only what the
//! translation path counted (docs/config.md `[time]`, docs/metrics.md `time`).
//!
//! The functional model decides every hit, miss, walk reference and fault; the time
//! model decides when each of them happens. It reads the memory-op stream the engine
//! already sends to the cache hierarchy ([`crate::mem::MemOp`], in trace order, inline
//! or on the memory thread), plus one [`crate::mem::MemOp::Time`] per translation that
//! carries what the caches do not see: the instructions since the last reference, the
//! address dependence, the TLB's lookup cycles and the OS's. So turning it on changes
//! no counter of the count-only model.
//!
//! - [`core`]: an out-of-order window (ROB, load and store queues, dependences);
//! - [`memory`]: MSHRs per cache level, merging misses to a line in flight;
//! - [`dram`]: channels, banks, row buffers and a bandwidth-limited bus;
//! - [`sampling`]: timing a systematic sample of the references and estimating the rest;
//! - here: the page walkers (a pool; a walk holds one from start to end; the
//!   references of one walk step issue together and the step ends with the slowest),
//!   and the `time` section of the stats document.

pub mod core;
pub mod dram;
pub mod memory;
pub mod sampling;

use self::core::{Cause, Core, CoreSettings, FP};
use self::dram::{Calendar, Dram, DramCounters, DramTiming};
use self::memory::{MshrCounters, Path, TimedMemory};
use self::sampling::{Phase, SampleSums, Sampler, SamplingConfig};
use crate::config::{Bytes, Config};
use crate::error::{Error, Result};
use crate::mem::cache::CacheConfig;
use crate::mem::{MemOp, MemoryHierarchy, Timing, MEMORY, WRITES_KEPT};
use crate::trace::Dep;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `time.model`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeModelKind {
    /// Count only: latencies are summed into `cycles`, no execution time.
    #[default]
    None,
    /// The out-of-order core with memory-level parallelism.
    Ooo,
}

/// `time.unknown_deps`: what an access whose trace says nothing of its dependences
/// (lackey logs, version-1 traces) is assumed to depend on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownDeps {
    /// On no load: as much overlap as the window allows (an upper bound on MLP).
    #[default]
    Independent,
    /// On the previous load: a pointer chase (a lower bound).
    PreviousLoad,
}

/// `[time]`: the time model's settings (a key left out takes its value in `default()`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TimeConfig {
    pub model: TimeModelKind,
    /// Core clock, for the DRAM's nanoseconds and bandwidth and for seconds.
    pub frequency_ghz: f64,
    pub unknown_deps: UnknownDeps,
    /// Concurrent hardware page walkers (Skylake has 2).
    pub walkers: u32,
    pub core: CoreConfig,
    pub dram: DramConfig,
    /// Left out of the config echo when off (so the hashes of configs without it stay).
    #[serde(skip_serializing_if = "SamplingConfig::is_default")]
    pub sampling: SamplingConfig,
}

/// `[time.core]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CoreConfig {
    /// Instructions dispatched per cycle at most.
    pub width: u32,
    /// Reorder-buffer entries (instructions in flight).
    pub rob: u32,
    pub load_queue: u32,
    pub store_queue: u32,
    /// Cycles per instruction when nothing stalls (at least 1 / width).
    pub base_cpi: f64,
}

/// `[time.dram]`: DDR timings in nanoseconds, bandwidth per channel in GB/s.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DramConfig {
    pub channels: u32,
    /// Banks per channel.
    pub banks: u32,
    /// Row-buffer bytes per bank.
    pub row: Bytes,
    pub t_cas_ns: f64,
    pub t_rcd_ns: f64,
    pub t_rp_ns: f64,
    /// Peak data bandwidth of one channel.
    pub channel_gbs: f64,
    /// Memory controller and interconnect, there and back.
    pub controller_ns: f64,
}

// Defaults: a Skylake-like core with one DDR4-2400 channel (CL17: 14.16 ns).
impl Default for TimeConfig {
    fn default() -> TimeConfig {
        TimeConfig {
            model: TimeModelKind::None,
            frequency_ghz: 4.0,
            unknown_deps: UnknownDeps::default(),
            walkers: 2,
            core: CoreConfig::default(),
            dram: DramConfig::default(),
            sampling: SamplingConfig::default(),
        }
    }
}

impl Default for CoreConfig {
    fn default() -> CoreConfig {
        CoreConfig { width: 4, rob: 224, load_queue: 72, store_queue: 56, base_cpi: 0.25 }
    }
}

impl Default for DramConfig {
    fn default() -> DramConfig {
        DramConfig { channels: 1, banks: 16, row: Bytes(8192), t_cas_ns: 14.16, t_rcd_ns: 14.16, t_rp_ns: 14.16, channel_gbs: 19.2, controller_ns: 10.0 }
    }
}

/// MSHRs of a cache level whose `mshrs` is not set.
pub const DEFAULT_MSHRS: u32 = 16;

fn positive(key: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::config(key, format!("must be a positive number, not {v}")))
    }
}

/// `v` in [lo, hi]: the structures a count sizes are allocated whole, so an absurd count
/// must be an error, not a host allocation that fails.
fn within(key: &str, v: u32, lo: u32, hi: u32) -> Result<()> {
    if !(lo..=hi).contains(&v) {
        return Err(Error::config(key, format!("must be between {lo} and {hi}, not {v}")));
    }
    Ok(())
}

/// The most a core's window, queues or walkers may hold (65536: far beyond any core,
/// and a few MiB of host memory).
pub const MAX_WINDOW: u32 = 1 << 16;
/// The most DRAM channels, and banks per channel.
pub const MAX_DRAM_UNITS: u32 = 1024;

impl TimeConfig {
    pub fn is_default(&self) -> bool {
        *self == TimeConfig::default()
    }

    pub fn validate(&self, cfg: &Config) -> Result<()> {
        positive("time.frequency_ghz", self.frequency_ghz)?;
        within("time.walkers", self.walkers, 1, MAX_WINDOW)?;
        let c = &self.core;
        within("time.core.width", c.width, 1, MAX_WINDOW)?;
        within("time.core.rob", c.rob, 1, MAX_WINDOW)?;
        within("time.core.load_queue", c.load_queue, 1, MAX_WINDOW)?;
        within("time.core.store_queue", c.store_queue, 1, MAX_WINDOW)?;
        positive("time.core.base_cpi", c.base_cpi)?;
        if c.base_cpi * (c.width as f64) < 1.0 - 1e-9 {
            return Err(Error::config("time.core.base_cpi", format!("{} is below 1 / width (time.core.width = {})", c.base_cpi, c.width)));
        }
        let d = &self.dram;
        within("time.dram.channels", d.channels, 1, MAX_DRAM_UNITS)?;
        within("time.dram.banks", d.banks, 1, MAX_DRAM_UNITS)?;
        if d.row.0 < 64 || !d.row.0.is_power_of_two() {
            return Err(Error::config("time.dram.row", "must be a power of two of at least 64 bytes"));
        }
        for (k, v) in [
            ("time.dram.t_cas_ns", d.t_cas_ns),
            ("time.dram.t_rcd_ns", d.t_rcd_ns),
            ("time.dram.t_rp_ns", d.t_rp_ns),
            ("time.dram.controller_ns", d.controller_ns),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::config(k, format!("must be a number of nanoseconds >= 0, not {v}")));
            }
        }
        positive("time.dram.channel_gbs", d.channel_gbs)?;
        self.sampling.validate()?;
        for (name, cache) in &cfg.cache {
            if let Some(m) = cache.mshrs.filter(|&m| m == 0 || m > memory::MAX_MSHRS) {
                return Err(Error::config(format!("cache.{name}.mshrs"), format!("{m}: must be between 1 and {}", memory::MAX_MSHRS)));
            }
        }
        if self.model == TimeModelKind::Ooo && !cfg.memory.data_refs {
            return Err(Error::config("time.model", "\"ooo\" times every program reference through the caches: set memory.data_refs = true as well"));
        }
        Ok(())
    }

    fn cycles(&self, ns: f64) -> u64 {
        (ns * self.frequency_ghz).round() as u64
    }

    /// The DRAM's timing in core cycles, for a last cache level of `line`-byte lines
    /// (a request moves one of them).
    pub fn dram_timing(&self, line: u64) -> DramTiming {
        let d = &self.dram;
        let burst_ns = line as f64 / d.channel_gbs;
        DramTiming {
            channels: d.channels,
            banks: d.banks,
            row_shift: d.row.0.trailing_zeros(),
            t_cas: self.cycles(d.t_cas_ns),
            t_rcd: self.cycles(d.t_rcd_ns),
            t_rp: self.cycles(d.t_rp_ns),
            burst_bytes: line,
            t_burst: (burst_ns * self.frequency_ghz).ceil().max(1.0) as u64,
            controller: self.cycles(d.controller_ns),
        }
    }

    pub fn core_settings(&self) -> CoreSettings {
        let c = &self.core;
        CoreSettings { rob: c.rob, load_queue: c.load_queue, store_queue: c.store_queue, cpi_fp: (c.base_cpi * FP as f64).round().max(1.0) as u64 }
    }
}

/// Frames whose walk end the time model remembers (a power of two).
const WALKED: usize = 64;

/// What the engine tells the time model about one translation (`MemOp::Time`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessTime {
    /// Instructions since the previous translation's, this access's own included.
    pub instrs: u64,
    pub dep: Dep,
    /// TLB lookup cycles beyond the first level.
    pub tlb: u32,
    /// OS cycles the translation caused (a fault, a policy's work).
    pub os: u64,
}

/// One walk reference as the time model keeps it until its access is timed.
#[derive(Clone, Copy, Debug)]
enum WalkItem {
    Ref {
        pa: u64,
        served: u8,
        new_step: bool,
    },
    Background {
        pa: u64,
        served: u8,
    },
    NestedEnd(u64),
    /// A refill handler's instruction fetch, between steps.
    Fetch {
        pa: u64,
        served: u8,
    },
    End {
        cycles: u64,
        fixed: Option<u64>,
        trap: bool,
    },
}

/// The time model's state.
pub struct TimeModel {
    core: Core,
    mem: TimedMemory,
    /// When each walker is busy (walks are issued in trace order, not time order, so
    /// a walk that is ready early can take a walker before one issued ahead of it).
    walkers: Vec<Calendar>,
    /// Per 4 KiB frame slot, the frame last walked for and when its walk ended: a
    /// reference that hits the TLB entry such a walk filled waits for the walk.
    walked: Box<[(u64, u64); WALKED]>,
    walk: Vec<WalkItem>,
    pending: Option<AccessTime>,
    /// OS cycles (page copies) to charge to the next translation.
    pending_os: u64,
    previous_load: bool,
    l1i_latency: u64,
    frequency_ghz: f64,
    /// The hierarchy's memory writes already booked at the DRAM.
    writes_seen: u64,
    accesses: u64,
    walks: u64,
    walk_cycles: u64,
    /// The part of `walk_cycles` software refill handlers took (on the core, not a walker).
    handler_cycles: u64,
    /// Cycles walkers were busy, summed over walkers (their calendars' pruned part).
    walker_busy: u64,
    walker_wait: u64,
    /// Instructions the trace accounted for (`AccessTime::instrs`).
    traced: u64,
    lat: Latencies,
    /// The unloaded latency of the walk just timed.
    walk_unloaded: u64,
    /// Sampled timing (`[time.sampling]`), if on; `phase` and `left` are its phase and
    /// the references left in it (never running out when every reference is timed).
    sampler: Option<Sampler>,
    phase: Phase,
    left: u64,
    /// OS cycles of the references timed but not measured.
    unmeasured_os: u64,
}

/// Sums over every program reference of its translation latency (from when its
/// address was ready to when it was translated: TLB, walker wait, walk) and its data
/// latency (to when its data was back), as they came out and as they would have
/// unloaded (every walker, MSHR, bank and bus free; no OS work).
#[derive(Clone, Copy, Debug, Default)]
pub struct Latencies {
    pub references: u64,
    pub translation: u64,
    pub data: u64,
    pub translation_unloaded: u64,
    pub data_unloaded: u64,
}

/// The counters the `time` section reports, cumulative (a warm-up subtracts its own).
#[derive(Clone, Debug, Default)]
pub struct TimeStats {
    pub cycles: u64,
    pub instructions: u64,
    pub loads: u64,
    pub stores: u64,
    /// Stall cycles (1/FP cycles) by cause.
    pub data_fp: u64,
    pub translation_fp: u64,
    pub os_fp: u64,
    pub walks: u64,
    pub walk_cycles: u64,
    pub handler_cycles: u64,
    /// Cycles walkers were busy (a union per walker), summed over walkers.
    pub walker_busy: u64,
    pub walker_wait: u64,
    pub queue_wait: u64,
    pub mshrs: Vec<MshrCounters>,
    pub dram: DramCounters,
    pub lat: Latencies,
    /// With sampled timing: the counters above are the measured units' sums, and
    /// these the whole run's totals (`sampling::estimate`).
    pub sample: Option<SampleSums>,
}

impl TimeStats {
    /// `f` applied to each counter of `self` and `o` (`sample` is left out).
    fn zip(&self, o: &TimeStats, f: impl Fn(u64, u64) -> u64 + Copy) -> TimeStats {
        let zero = MshrCounters::default();
        let n = self.mshrs.len().max(o.mshrs.len());
        let (l, m) = (&self.lat, &o.lat);
        TimeStats {
            cycles: f(self.cycles, o.cycles),
            instructions: f(self.instructions, o.instructions),
            loads: f(self.loads, o.loads),
            stores: f(self.stores, o.stores),
            data_fp: f(self.data_fp, o.data_fp),
            translation_fp: f(self.translation_fp, o.translation_fp),
            os_fp: f(self.os_fp, o.os_fp),
            walks: f(self.walks, o.walks),
            walk_cycles: f(self.walk_cycles, o.walk_cycles),
            handler_cycles: f(self.handler_cycles, o.handler_cycles),
            walker_busy: f(self.walker_busy, o.walker_busy),
            walker_wait: f(self.walker_wait, o.walker_wait),
            queue_wait: f(self.queue_wait, o.queue_wait),
            mshrs: (0..n).map(|i| self.mshrs.get(i).unwrap_or(&zero).zip(o.mshrs.get(i).unwrap_or(&zero), f)).collect(),
            dram: self.dram.zip(&o.dram, f),
            lat: Latencies {
                references: f(l.references, m.references),
                translation: f(l.translation, m.translation),
                data: f(l.data, m.data),
                translation_unloaded: f(l.translation_unloaded, m.translation_unloaded),
                data_unloaded: f(l.data_unloaded, m.data_unloaded),
            },
            sample: None,
        }
    }

    pub fn plus(&self, o: &TimeStats) -> TimeStats {
        self.zip(o, |a, b| a + b)
    }

    /// `self` since `base` (counters are cumulative).
    pub fn minus(&self, base: &TimeStats) -> TimeStats {
        let mut d = self.zip(base, u64::saturating_sub);
        d.sample = match (&self.sample, &base.sample) {
            (Some(s), Some(b)) => Some(s.minus(b)),
            (s, _) => s.clone(),
        };
        d
    }

    /// Every counter times `k`.
    pub fn scaled(&self, k: f64) -> TimeStats {
        self.zip(self, |a, _| (a as f64 * k).round() as u64)
    }
}

impl TimeModel {
    /// The time model of `t` over the hierarchy `mem` built from `caches`.
    pub fn new(t: &TimeConfig, caches: &BTreeMap<String, CacheConfig>, mem: &MemoryHierarchy) -> TimeModel {
        // DRAM moves lines of the last level (the largest, should its caches differ).
        let last = caches.values().map(|c| c.level).max();
        let line = caches.values().filter(|c| Some(c.level) == last).map(|c| c.line.0).max().unwrap_or(64);
        let caches: Vec<(u32, u64, u32)> = caches.values().map(|c| (c.latency, c.line.0, c.mshrs.unwrap_or(DEFAULT_MSHRS))).collect();
        let timed = TimedMemory::new(&caches, mem.paths(), Dram::new(t.dram_timing(line)));
        TimeModel {
            core: Core::new(t.core_settings()),
            l1i_latency: timed.first_latency(Path::Instr),
            mem: timed,
            walkers: vec![Calendar::default(); t.walkers as usize],
            walked: Box::new([(u64::MAX, 0); WALKED]),
            walk: Vec::with_capacity(64),
            pending: None,
            pending_os: 0,
            previous_load: t.unknown_deps == UnknownDeps::PreviousLoad,
            frequency_ghz: t.frequency_ghz,
            writes_seen: 0,
            accesses: 0,
            walks: 0,
            walk_cycles: 0,
            handler_cycles: 0,
            walker_busy: 0,
            walker_wait: 0,
            traced: 0,
            lat: Latencies::default(),
            walk_unloaded: 0,
            sampler: None,
            phase: Phase::Measure,
            left: u64::MAX,
            unmeasured_os: 0,
        }
        .with_sampling(&t.sampling)
    }

    fn with_sampling(mut self, cfg: &SamplingConfig) -> TimeModel {
        if let Some(mut s) = Sampler::new(cfg) {
            s.begin_unit(self.detailed(0));
            self.left = cfg.unit;
            self.sampler = Some(s);
        }
        self
    }

    /// Observe one op the hierarchy has just applied (`mem.served` is its reference's).
    #[inline(always)]
    pub fn observe(&mut self, op: MemOp, mem: &MemoryHierarchy, timing: Timing) {
        if self.phase == Phase::Skip {
            self.skip(op, mem, timing)
        } else {
            self.time(op, mem, timing)
        }
    }

    /// `observe` of a reference timed in detail.
    #[inline]
    fn time(&mut self, op: MemOp, mem: &MemoryHierarchy, timing: Timing) {
        match op {
            MemOp::WalkRef { pa, new_step, .. } => self.walk.push(WalkItem::Ref { pa, served: mem.served, new_step }),
            MemOp::Background { pa } => self.walk.push(WalkItem::Background { pa, served: mem.served }),
            MemOp::NestedEnd { cycles } => self.walk.push(WalkItem::NestedEnd(cycles)),
            MemOp::WalkEnd { cycles, fixed, trap } => self.walk.push(WalkItem::End { cycles, fixed, trap }),
            MemOp::HandlerFetch { pa } => self.walk.push(WalkItem::Fetch { pa, served: mem.served }),
            MemOp::Time(t) => self.pending = Some(t),
            MemOp::Data { pa, write, instr, .. } | MemOp::TimedData { pa, write, instr, .. } => {
                if let MemOp::TimedData { time, .. } = op {
                    self.pending = Some(time);
                }
                self.access(pa, mem.served, write, instr);
                self.writebacks(mem);
                self.next_reference();
            }
            MemOp::Copy { .. } => {
                if let Timing::Copy(c) = timing {
                    self.pending_os += c;
                }
            }
            MemOp::DataRun { .. } => unreachable!("`WalkTimer::apply` hands a run's references over one by one"),
        }
    }

    /// Observe an op of a reference sampling skips: count its instructions and OS
    /// cycles; a DRAM reference leaves its row open.
    #[inline(always)]
    fn skip(&mut self, op: MemOp, mem: &MemoryHierarchy, timing: Timing) {
        match op {
            MemOp::Time(t) => self.pending = Some(t),
            MemOp::WalkRef { pa, .. } | MemOp::Background { pa } if mem.served == MEMORY => self.mem.dram.warm(pa),
            MemOp::Data { pa, instr, .. } | MemOp::TimedData { pa, instr, .. } => {
                let info = match op {
                    MemOp::TimedData { time, .. } => time,
                    _ => self.pending.take().unwrap_or_default(),
                };
                self.traced += info.instrs;
                let n = Self::skipped_instructions(instr, self.traced, info.instrs);
                self.unmeasured_os += info.os + std::mem::take(&mut self.pending_os);
                if mem.served == MEMORY {
                    self.mem.dram.warm(pa);
                }
                self.writes_seen = mem.memory_writes;
                if let Some(s) = &mut self.sampler {
                    s.skipped_instructions += n;
                    s.skipped_references += 1;
                }
                self.next_reference();
            }
            MemOp::Copy { .. } => {
                if let Timing::Copy(c) = timing {
                    self.pending_os += c;
                }
            }
            _ => {}
        }
    }

    /// Whether sampling skips the next `count` references and more (its skip phase
    /// outlasts them): then a run of them may be skipped at once ([`TimeModel::skip_run`]).
    #[inline(always)]
    pub fn skips(&self, count: u64) -> bool {
        self.phase == Phase::Skip && self.left > count
    }

    /// A skipped reference of a run that DRAM served leaves its row open (`skip`'s part
    /// that needs each reference); `last` as [`Dram::warm_after`]'s, for one run.
    #[inline(always)]
    pub fn skip_warm(&mut self, pa: u64, last: &mut u64) {
        self.mem.dram.warm_after(pa, last)
    }

    /// `skip`'s counts for `count` references of one run ([`TimeModel::skips`]), each
    /// with `time` (no OS cycles), once the hierarchy has applied them all.
    #[inline]
    pub fn skip_run(&mut self, count: u64, instr: bool, time: AccessTime, mem: &MemoryHierarchy) {
        debug_assert!(self.skips(count) && time.os == 0);
        // Every reference of the run counts as its first does: `traced` is nonzero
        // after it, or stays what it was if the run brings no instruction.
        let n = count * Self::skipped_instructions(instr, self.traced + time.instrs, time.instrs);
        self.traced += count * time.instrs;
        self.unmeasured_os += std::mem::take(&mut self.pending_os);
        self.writes_seen = mem.memory_writes;
        if let Some(s) = &mut self.sampler {
            s.skipped_instructions += n;
            s.skipped_references += count;
        }
        self.left -= count;
    }

    /// The instructions a skipped reference counts, `traced` those of the trace so far
    /// (its own included). As `access` counts them: a fetch, or any reference of a
    /// trace without instructions, is one at least.
    #[inline(always)]
    fn skipped_instructions(instr: bool, traced: u64, instrs: u64) -> u64 {
        if instr || traced == 0 {
            instrs.max(1)
        } else {
            instrs
        }
    }

    #[inline(always)]
    fn next_reference(&mut self) {
        self.left -= 1;
        if self.left == 0 {
            self.next_phase();
        }
    }

    /// The sampling phase ran out: close or open a measured unit.
    #[cold]
    fn next_phase(&mut self) {
        let now = self.sampler.as_ref().map(|_| self.detailed(self.core.horizon()));
        let Some((s, now)) = self.sampler.as_mut().zip(now) else {
            self.left = u64::MAX;
            return;
        };
        if self.phase == Phase::Measure {
            s.end_unit(&now);
        }
        (self.phase, self.left) = s.after(self.phase);
        if self.phase == Phase::Measure {
            s.begin_unit(now);
        }
    }

    /// Dirty lines the last level wrote back go to DRAM when the reference that pushed
    /// them out issues; no one waits for them, but they take the bank and the bus.
    #[inline(always)]
    fn writebacks(&mut self, mem: &MemoryHierarchy) {
        let n = mem.memory_writes;
        if n != self.writes_seen {
            let at = self.core.horizon();
            // More than the hierarchy keeps (never from one reference): the oldest ones'
            // addresses are gone; each goes to a kept address's bank with other row bits.
            for k in self.writes_seen..n {
                let pa = mem.written[k as usize % WRITES_KEPT];
                let pa = if n - k > WRITES_KEPT as u64 { pa ^ (k << 20) } else { pa };
                self.mem.writeback(pa, at);
            }
            self.writes_seen = n;
        }
    }

    fn access(&mut self, pa: u64, served: u8, write: bool, fetch: bool) {
        let info = self.pending.take().unwrap_or_default();
        let os = info.os + std::mem::take(&mut self.pending_os);
        if self.phase == Phase::Warm {
            self.unmeasured_os += os;
        }
        self.traced += info.instrs;
        self.accesses += 1;
        if self.accesses.is_multiple_of(256) {
            self.prune();
        }
        if fetch {
            // The front-end fetches just in time for dispatch; an L1I hit is pipelined,
            // anything slower delays this instruction's dispatch.
            self.core.plain(info.instrs.saturating_sub(1));
            let issue = self.core.next_slot();
            let translated = self.translate(issue + info.tlb as u64, pa);
            let translated_os = if os > 0 { self.core.trap(translated, os) } else { translated };
            let done = self.mem.access(Path::Instr, pa, served, translated_os);
            self.note(translated - issue, done - translated_os, info.tlb);
            let front = done.saturating_sub(self.l1i_latency);
            let cause = share(translated - issue, 0, Cause::Base, front.saturating_sub(issue));
            self.core.begin(front, cause);
            return;
        }
        let d = if info.instrs >= 1 || self.traced == 0 {
            // In a trace that carries no instructions, each reference is one of its own.
            self.core.plain(info.instrs.saturating_sub(1));
            self.core.begin(0, Cause::Base)
        } else {
            // Another reference of the instruction already open.
            self.core.current()
        };
        let mut ready = d + 1;
        let mut waited = (0, Cause::Base);
        let dep = if info.dep.is_known() || !self.previous_load { info.dep } else { Dep::on_load(1) };
        if let Some(k) = dep.distance() {
            if let Some((t, c)) = self.core.producer(k) {
                if t > ready {
                    waited = (t - ready, c);
                    ready = t;
                }
            }
        }
        let ready = self.core.queue_entry(write, ready);
        let translated = self.translate(ready + info.tlb as u64, pa);
        let translated_os = if os > 0 { self.core.trap(translated, os) } else { translated };
        if write {
            let commit = self.core.store_commit(translated_os);
            let written = self.mem.access(Path::Data, pa, served, commit);
            self.note(translated - ready, written - commit, info.tlb);
            let cause = share(translated - ready, waited.0, waited.1, translated_os - d);
            self.core.store_done(translated_os, written, cause);
        } else {
            let done = self.mem.access(Path::Data, pa, served, translated_os);
            self.note(translated - ready, done - translated_os, info.tlb);
            let cause = share(translated - ready, waited.0, waited.1, done - d);
            self.core.load_done(done, cause);
        }
    }

    /// Count a reference's latencies (the data reference just timed is the memory's
    /// last; the walk, if any, `walk_unloaded`).
    #[inline(always)]
    fn note(&mut self, translation: u64, data: u64, tlb: u32) {
        let l = &mut self.lat;
        l.references += 1;
        l.translation += translation;
        l.data += data;
        l.translation_unloaded += tlb as u64 + std::mem::take(&mut self.walk_unloaded);
        l.data_unloaded += self.mem.last_unloaded;
    }

    /// Time the buffered walk, if this translation (of a reference to `pa`) walked,
    /// from `at`; returns when the translation is done.
    fn translate(&mut self, at: u64, pa: u64) -> u64 {
        let frame = pa >> 12;
        let slot = &mut self.walked[(frame as usize) & (WALKED - 1)];
        if self.walk.is_empty() {
            // A TLB hit on an entry whose walk is still in flight waits for it.
            return if slot.0 == frame { at.max(slot.1) } else { at };
        }
        let items = std::mem::take(&mut self.walk);
        let end = if let Some(WalkItem::End { trap: true, .. }) = items.last() {
            // A software refill is an exception: the handler runs once everything older
            // has retired, on the core, and dispatch restarts after its return.
            let start = self.core.drained(at);
            let end = self.time_walk(&items, start);
            self.core.restart(end, Cause::Mem(65535));
            self.walk_cycles += end - start;
            self.handler_cycles += end - start;
            end
        } else {
            // The walker that finishes the walk first, as long as it takes unloaded,
            // using every idle stretch from when it is ready: walks are timed once, in
            // trace order, so one placed earlier in trace order may be reserved for a
            // later time, and a walker serves the walk ready first (`Calendar::fill`).
            // Its references are timed in its last stretch, where it ends. (One placed
            // later in time may still overlap the loaded excess of this one.)
            let need = self.unloaded_walk(&items).max(1);
            let (w, (first, done)) = self.walkers.iter().map(|c| c.fill(at, need)).enumerate().min_by_key(|&(_, (_, e))| e).expect("at least one walker");
            let start = done - need;
            self.walker_wait += start - at;
            let end = self.time_walk(&items, start);
            self.walkers[w].occupy(first, end);
            self.walk_cycles += end - start;
            end
        };
        self.walk = items;
        self.walk.clear();
        self.walked[(frame as usize) & (WALKED - 1)] = (frame, end);
        self.walks += 1;
        end
    }

    /// What the walk in `items` would take with every walker, MSHR, bank and bus free.
    fn unloaded_walk(&self, items: &[WalkItem]) -> u64 {
        let (mut total, mut step) = (0, 0);
        for &item in items {
            match item {
                WalkItem::Ref { served, new_step, .. } => {
                    if new_step {
                        total += std::mem::take(&mut step);
                    }
                    step = step.max(self.mem.unloaded(Path::Walk, served));
                }
                WalkItem::Background { .. } => {}
                WalkItem::NestedEnd(c) => total += std::mem::take(&mut step) + c,
                WalkItem::Fetch { served, .. } => total += std::mem::take(&mut step) + self.mem.unloaded(Path::Instr, served).saturating_sub(self.l1i_latency),
                WalkItem::End { cycles, fixed, .. } => return fixed.unwrap_or(total + step + cycles),
            }
        }
        total + step
    }

    /// Forget what ended before any reference can still be issued.
    fn prune(&mut self) {
        let horizon = self.core.horizon();
        self.mem.prune(horizon);
        for w in &mut self.walkers {
            self.walker_busy += w.prune(horizon);
        }
    }

    /// A walk's references from `start`: a step's references issue together when the
    /// step before has ended, and the step ends with its slowest.
    fn time_walk(&mut self, items: &[WalkItem], start: u64) -> u64 {
        let (mut step_start, mut step_end) = (start, start);
        // The same walk unloaded: finished steps, and the current step's slowest.
        let (mut unloaded, mut step_max) = (0, 0);
        let mut first = true;
        for &item in items {
            match item {
                WalkItem::Ref { pa, served, new_step } => {
                    if new_step || first {
                        step_start = step_end;
                        unloaded += std::mem::take(&mut step_max);
                        first = false;
                    }
                    step_end = step_end.max(self.mem.access(Path::Walk, pa, served, step_start));
                    step_max = step_max.max(self.mem.last_unloaded);
                }
                // A walk-table fill: traffic, no latency.
                WalkItem::Background { pa, served } => {
                    self.mem.access(Path::Walk, pa, served, step_start);
                }
                WalkItem::NestedEnd(c) => {
                    step_end += c;
                    step_start = step_end;
                    unloaded += std::mem::take(&mut step_max) + c;
                    first = true;
                }
                // The handler's next instruction: a hit is pipelined; a miss stalls it.
                WalkItem::Fetch { pa, served } => {
                    step_end = step_end.max(step_start);
                    let done = self.mem.access(Path::Instr, pa, served, step_end);
                    step_end = step_end.max(done.saturating_sub(self.l1i_latency));
                    unloaded += std::mem::take(&mut step_max) + self.mem.last_unloaded.saturating_sub(self.l1i_latency);
                    step_start = step_end;
                    first = true;
                }
                WalkItem::End { cycles, fixed, .. } => {
                    self.walk_unloaded = fixed.unwrap_or(unloaded + step_max + cycles);
                    return match fixed {
                        Some(f) => start + f,
                        None => step_end + cycles,
                    };
                }
            }
        }
        self.walk_unloaded = unloaded + step_max;
        step_end
    }

    /// The counters so far (the core's cycle is its dispatch point; with sampling, the
    /// units measured so far and the run's totals).
    pub fn snapshot(&self) -> TimeStats {
        match &self.sampler {
            None => self.detailed(self.core.horizon()),
            Some(s) => self.sampled(s),
        }
    }

    /// End of the run: `instructions` is the trace's total (ticks after the last
    /// reference still run).
    pub fn finish(&mut self, instructions: u64) -> TimeStats {
        let trailing = instructions.saturating_sub(self.traced);
        self.traced = self.traced.max(instructions);
        let now = self.sampler.as_ref().map(|_| self.detailed(self.core.horizon()));
        if let Some((s, now)) = self.sampler.as_mut().zip(now) {
            s.end_unit(&now);
            s.skipped_instructions += trailing;
            return self.snapshot();
        }
        self.core.plain(trailing);
        let cycles = self.core.finish();
        self.detailed(cycles)
    }

    /// The measured units' counters, with the run's totals.
    fn sampled(&self, s: &Sampler) -> TimeStats {
        let mut m = s.measured.clone();
        m.sample = Some(SampleSums {
            references: self.accesses + s.skipped_references,
            instructions: self.core.instructions + s.skipped_instructions,
            unmeasured_os: self.unmeasured_os,
            ..s.sums.clone()
        });
        m
    }

    /// The detailed model's counters, `cycles` its cycle.
    fn detailed(&self, cycles: u64) -> TimeStats {
        let c = &self.core;
        TimeStats {
            cycles,
            instructions: c.instructions,
            loads: c.loads,
            stores: c.stores,
            data_fp: c.stalls.data,
            translation_fp: c.stalls.translation,
            os_fp: c.stalls.os,
            walks: self.walks,
            walk_cycles: self.walk_cycles,
            handler_cycles: self.handler_cycles,
            walker_busy: self.walker_busy + self.walkers.iter().map(Calendar::covered).sum::<u64>(),
            walker_wait: self.walker_wait,
            queue_wait: c.queue_wait,
            mshrs: self.mem.mshr_counters(),
            dram: self.mem.dram.counters.clone(),
            lat: self.lat,
            sample: None,
        }
    }

    /// The `time` section (docs/metrics.md) of `end` minus `base` (the warm-up).
    pub fn section(&self, cfg: &Config, end: &TimeStats, base: Option<&TimeStats>, cache_names: &[String]) -> Value {
        let d = base.map_or_else(|| end.clone(), |b| end.minus(b));
        let measured_references = d.lat.references;
        let d = if d.sample.is_some() { sampling::estimate(&d) } else { d };
        let cycles = d.cycles;
        let instr = d.instructions;
        let ratio = |a: f64, b: f64| if b == 0.0 { 0.0 } else { a / b };
        let c = |fp: u64| fp as f64 / FP as f64;
        let (data, translation, os) = (c(d.data_fp), c(d.translation_fp), c(d.os_fp));
        let base_cycles = (cycles as f64 - data - translation - os).max(0.0);
        let zero = MshrCounters::default();
        let mut levels = serde_json::Map::new();
        for (i, name) in cache_names.iter().enumerate() {
            let e = d.mshrs.get(i).unwrap_or(&zero);
            let busy = e.busy_cycles as f64;
            levels.insert(
                name.clone(),
                json!({
                    "mshrs": cfg.cache[name].mshrs.unwrap_or(DEFAULT_MSHRS),
                    "misses": e.misses, "merged": e.merged,
                    "mshr_full_cycles": e.full_cycles,
                    "mean_outstanding": ratio(busy, cycles as f64),
                    "mlp": ratio(busy, e.active_cycles as f64),
                }),
            );
        }
        let first_data = self.mem.paths_data_first().map(|i| &cache_names[i]);
        let mlp = first_data.and_then(|n| levels.get(n)).map_or(0.0, |v| v["mlp"].as_f64().unwrap_or(0.0));
        let dr = &d.dram;
        let (reads, writes) = (dr.reads, dr.writes);
        let (hits, misses, conflicts) = (dr.row_hits, dr.row_misses, dr.row_conflicts);
        let bytes = (reads + writes) * self.mem.dram.timing().burst_bytes;
        let seconds = cycles as f64 / (self.frequency_ghz * 1e9);
        let peak = self.mem.dram.peak_bytes_per_cycle();
        let walk_cycles = d.walk_cycles as f64;
        let handler_cycles = d.handler_cycles as f64;
        let walker_busy = d.walker_busy as f64;
        let walks = d.walks;
        let l = &d.lat;
        let refs = l.references as f64;
        let serialized = l.translation_unloaded + l.data_unloaded;
        let mut section = json!({
            "model": "ooo",
            "cycles": cycles,
            "instructions": instr,
            "ipc": ratio(instr as f64, cycles as f64),
            "cpi": ratio(cycles as f64, instr as f64),
            "seconds": seconds,
            "loads": d.loads,
            "stores": d.stores,
            "stalls": {"base": base_cycles, "data": data, "translation": translation, "os": os},
            "cpi_stack": {"base": ratio(base_cycles, instr as f64), "data": ratio(data, instr as f64),
                          "translation": ratio(translation, instr as f64), "os": ratio(os, instr as f64)},
            "mlp": mlp,
            "queue_wait_cycles": d.queue_wait,
            "latency": {
                "references": refs as u64,
                "translation": ratio(l.translation as f64, refs),
                "data": ratio(l.data as f64, refs),
                "translation_unloaded": ratio(l.translation_unloaded as f64, refs),
                "data_unloaded": ratio(l.data_unloaded as f64, refs),
                "serialized_cycles": serialized,
            },
            "caches": levels,
            "walks": {
                "count": walks,
                "walkers": self.walkers.len(),
                "mean_latency": ratio(walk_cycles, walks as f64),
                "walker_wait_cycles": d.walker_wait,
                "handler_cycles": handler_cycles,
                "walker_occupancy": ratio(walker_busy, cycles as f64 * self.walkers.len() as f64),
                "mean_concurrent": ratio(walk_cycles, cycles as f64),
            },
            "dram": {
                "reads": reads, "writes": writes,
                "row_hits": hits, "row_misses": misses, "row_conflicts": conflicts,
                "row_hit_rate": ratio(hits as f64, (hits + misses + conflicts) as f64),
                "queue_cycles": dr.queue_cycles,
                "bytes": bytes,
                "bandwidth_gbs": ratio(bytes as f64, seconds) / 1e9,
                "peak_gbs": peak * self.frequency_ghz,
                "bandwidth_utilisation": ratio(bytes as f64, cycles as f64 * peak),
            },
        });
        if let (Some(s), Some(sums)) = (&self.sampler, &d.sample) {
            section["sampling"] = s.section(sums, measured_references);
        }
        section
    }
}

/// The cause of a reference's latency `total` (from its instruction's dispatch): the
/// share that was translation, counting a wait for a producer as its producer's.
fn share(translation: u64, waited: u64, producer: Cause, total: u64) -> Cause {
    if total == 0 {
        return Cause::Base;
    }
    let from_producer = match producer {
        Cause::Mem(s) => waited as u128 * s as u128,
        Cause::Base => 0,
    };
    let t = (translation as u128 * 65535 + from_producer) / total as u128;
    Cause::Mem(t.min(65535) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MEMORY;

    /// The walk of one load whose walk has `steps` (each a list of addresses issued
    /// together, all served by DRAM): the walk's cycles.
    fn walk_cycles(steps: &[&[u64]]) -> u64 {
        let mut f = Feed::new();
        f.walk(steps);
        f.reference(1, Dep::NONE, 1 << 30, 0, false);
        f.tm.snapshot().walk_cycles
    }

    /// A time model on the skylake preset, fed ops by hand.
    struct Feed {
        mem: MemoryHierarchy,
        tm: TimeModel,
    }

    impl Feed {
        fn new() -> Feed {
            let cfg = Config::load("skylake", &["memory.data_refs=true".into(), "time.model=ooo".into(), "time.walkers=1".into()]).unwrap();
            let mem = MemoryHierarchy::new(&cfg.cache, &cfg.memory, cfg.mmu.seed).unwrap();
            let tm = TimeModel::new(&cfg.time, &cfg.cache, &mem);
            Feed { mem, tm }
        }

        /// A walk of `steps` (each a list of addresses issued together), every
        /// reference served by DRAM.
        fn walk(&mut self, steps: &[&[u64]]) {
            self.mem.served = MEMORY;
            for step in steps {
                for (i, &pa) in step.iter().enumerate() {
                    self.tm.observe(MemOp::WalkRef { pa, new_step: i == 0, nested: false }, &self.mem, Timing::None);
                }
            }
            self.tm.observe(MemOp::WalkEnd { cycles: 0, fixed: None, trap: false }, &self.mem, Timing::None);
        }

        /// A reference of `instrs` instructions' worth, served by cache `served`.
        fn reference(&mut self, instrs: u64, dep: Dep, pa: u64, served: u8, instr: bool) {
            self.tm.observe(MemOp::Time(AccessTime { instrs, dep, tlb: 0, os: 0 }), &self.mem, Timing::None);
            self.mem.served = served;
            self.tm.observe(MemOp::Data { va: 0, pa, now: 0, write: false, instr }, &self.mem, Timing::Data(4));
        }
    }

    #[test]
    fn fetched_instructions_dispatch_several_per_cycle() {
        let mut f = Feed::new();
        let l1i = f.mem.paths().instr[0] as u8;
        for i in 0..4000u64 {
            f.reference(1, Dep::NONE, (i % 16) * 4, l1i, true);
        }
        let t = f.tm.finish(4000);
        // Four wide, every fetch an L1I hit: about 1000 cycles, not one per instruction.
        assert!(t.cycles < 1100, "{} cycles for 4000 instructions", t.cycles);
    }

    #[test]
    fn a_trace_without_instructions_times_one_per_reference() {
        let mut f = Feed::new();
        let l1d = f.mem.paths().data[0] as u8;
        for i in 0..1000u64 {
            f.reference(0, Dep::NONE, i * 8 % 512, l1d, false);
        }
        let t = f.tm.finish(0);
        assert_eq!(t.instructions, 1000);
        assert!(t.cycles >= 250, "{} cycles", t.cycles);
    }

    #[test]
    fn a_tlb_hit_on_a_page_being_walked_waits_for_the_walk() {
        let mut f = Feed::new();
        let l1d = f.mem.paths().data[0] as u8;
        f.walk(&[&[1 << 32]]);
        f.reference(1, Dep::NONE, 0x5000, l1d, false);
        let walk_end = f.tm.snapshot().walk_cycles;
        // The next reference to the frame hits the TLB entry the walk is filling.
        f.reference(1, Dep::NONE, 0x5040, l1d, false);
        let l = f.tm.snapshot().lat;
        assert!(walk_end > 150);
        assert!(l.translation >= 2 * walk_end - 10, "{l:?}, walk {walk_end}");
    }

    #[test]
    fn a_walk_ready_early_takes_the_walker_before_one_issued_ahead_of_it() {
        let mut f = Feed::new();
        let l1d = f.mem.paths().data[0] as u8;
        // Two chained loads from DRAM, then a load that depends on them and walks, then
        // an independent load that walks: its walk fits before the dependent one's.
        f.reference(1, Dep::NONE, 1 << 31, MEMORY, false);
        f.reference(1, Dep::on_load(1), 3 << 31, MEMORY, false);
        f.walk(&[&[1 << 32]]);
        f.reference(1, Dep::on_load(1), 0x5000, l1d, false);
        f.walk(&[&[2 << 32]]);
        f.reference(1, Dep::NONE, 0x9000, l1d, false);
        assert_eq!(f.tm.snapshot().walker_wait, 0);
    }

    #[test]
    fn a_step_of_parallel_dram_references_costs_about_one() {
        // Three rows in three banks.
        let (a, b, c) = (0, 1 << 13, 2 << 13);
        let one = walk_cycles(&[&[a]]);
        let parallel = walk_cycles(&[&[a, b, c]]);
        let sequential = walk_cycles(&[&[a], &[b], &[c]]);
        assert!(one > 150, "a DRAM reference: {one} cycles");
        // Only their bursts queue on the bus.
        assert!(parallel < one + one / 4, "three in parallel: {parallel}, one: {one}");
        assert!(sequential >= 3 * one - 10, "three in sequence: {sequential}, one: {one}");
    }
}
