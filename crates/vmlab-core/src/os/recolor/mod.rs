//! Dynamic recolouring policies (`[os.recolor]`): the OS moves pages whose lines
//! conflict in a physically indexed cache to frames of other colours (Romer ch. 4-5).
//!
//! - Software policies (Romer §4.2, Table 4-1), which learn the working set from a
//!   software-filled TLB: `active-naive`, `active-delay`, `active-throttle`
//!   (active.rs), `periodic-random`, `periodic-color` (periodic.rs), `snapshot`,
//!   `snapshot-delay`, `snapshot-miss` (snapshot.rs);
//! - `cml`: the CML buffer counts misses per frame in hardware (Romer ch. 5, cml.rs).
//!
//! A policy only decides; `Mm::recolor_page` (remap.rs) moves a page, and the engine
//! runs the copy through the caches. Hooks (all off the per-access path): last-level TLB
//! misses and the watched TLBs' changes (software policies), a cycle timer, and the
//! memory system's interrupt (a cache-miss counter alarm or the CML buffer). Fixed costs
//! come from Romer Tables 4-7 and 5-1 (`[os.recolor.costs]`); the copy's memory
//! references are simulated, so the measured 29,000-cycle remap of Table 4-7 is not
//! charged as a constant.

mod active;
mod cml;
mod periodic;
pub mod remap;
mod snapshot;

pub use remap::{RecolorCounters, RecolorHistogram, COPIED_BY_PROMOTION, COPIED_BY_RECOLOR};

use super::placement::Placement;
use super::policy::TlbMiss;
use super::Mm;
use crate::addr::{Asid, PageSize, Pid};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::mem::{CmlTuple, MemoryHierarchy};
use crate::mmu::TlbChange;
use crate::pt::PageTable;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `os.recolor.kind`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RecolorKind {
    #[default]
    None,
    ActiveNaive,
    ActiveDelay,
    ActiveThrottle,
    PeriodicRandom,
    PeriodicColor,
    Snapshot,
    SnapshotDelay,
    SnapshotMiss,
    Cml,
}

impl RecolorKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RecolorKind::None => "none",
            RecolorKind::ActiveNaive => "active-naive",
            RecolorKind::ActiveDelay => "active-delay",
            RecolorKind::ActiveThrottle => "active-throttle",
            RecolorKind::PeriodicRandom => "periodic-random",
            RecolorKind::PeriodicColor => "periodic-color",
            RecolorKind::Snapshot => "snapshot",
            RecolorKind::SnapshotDelay => "snapshot-delay",
            RecolorKind::SnapshotMiss => "snapshot-miss",
            RecolorKind::Cml => "cml",
        }
    }

    /// Romer Table 4-5: (period, delay). Period: cycles between activations (the cap on
    /// the recolouring rate), or L2 misses for snapshot-miss; 0 = none. Delay: TLB
    /// misses (active), cycles (snapshot-delay) or L2 misses (snapshot-miss).
    fn table_4_5(self) -> (u64, u64) {
        match self {
            RecolorKind::ActiveDelay => (0, 100),
            RecolorKind::ActiveThrottle => (1_000_000, 100),
            RecolorKind::PeriodicRandom | RecolorKind::PeriodicColor | RecolorKind::Snapshot => (2_000_000, 0),
            RecolorKind::SnapshotDelay => (2_000_000, 200_000),
            RecolorKind::SnapshotMiss => (10_000, 1_000),
            _ => (0, 0),
        }
    }
}

/// `os.recolor.target`: the colour a recoloured page moves to (Romer §5.6.3). None of
/// them picks the page's own colour or another conflicting one.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// Colours in turn.
    #[default]
    Sequential,
    /// The colour of the least referenced cache page (needs a counter per cache page).
    ColdestRef,
    /// The colour of the least missing page in the CML buffer.
    ColdestMiss,
    Random,
}

/// `[os.recolor.costs]`: cycles (Romer Tables 4-7 and 5-1).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RecolorCosts {
    /// Deliver a cache-miss-counter, CML or timer interrupt.
    pub interrupt: f64,
    /// Per TLB miss: decide whether to record it (active and snapshot policies).
    pub check: f64,
    /// Record a TLB miss.
    pub record: f64,
    /// Analyse the recorded TLB misses (software policies).
    pub analyze: f64,
    /// Scan the CML buffer (16 + 16 tuples).
    pub cml_scan: f64,
    /// Analyse the CML buffer's contents.
    pub cml_analyze: f64,
    /// The copy loop's instructions, per 4 KiB page (Table 5-1: 4800 per 8 KiB page is
    /// the same per-byte rate; the copy's memory references are simulated).
    pub copy: f64,
    /// Update the page table entry.
    pub pte: f64,
}

impl Default for RecolorCosts {
    fn default() -> Self {
        RecolorCosts { interrupt: 70.0, check: 6.5, record: 10.0, analyze: 11_000.0, cml_scan: 600.0, cml_analyze: 300.0, copy: 2400.0, pte: 200.0 }
    }
}

/// The most tuples either part of the CML buffer may have.
pub(crate) const MAX_CML_TUPLES: usize = 1 << 16;

/// `[os.recolor]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecolorConfig {
    #[serde(default)]
    pub kind: RecolorKind,
    /// Table 4-5's period (unset: the kind's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// Table 4-5's delay (unset: the kind's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<u64>,
    /// Pages a snapshot records after its TLB flush (Romer §4.5.1: 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_pages: Option<usize>,
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub target: TargetKind,
    /// CML buffer segments (Romer §5.2.1: 16 + 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cml_lru: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cml_hot: Option<usize>,
    /// CML: a page conflicts with this many misses (default: lines per page + 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recolor_threshold: Option<u32>,
    /// CML: interrupt when a counter reaches this (default: recolour threshold + 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_threshold: Option<u32>,
    /// CML: clear the buffer's counters every this many cycles (Romer §5.3.1: 5M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear_every: Option<u64>,
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub costs: RecolorCosts,
    /// Seed of the random choices (periodic-random, random target).
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub seed: u64,
}

impl RecolorConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == RecolorConfig::default()
    }

    pub(crate) fn validate(&self, cfg: &Config) -> Result<()> {
        if self.snapshot_pages == Some(0) {
            return Err(Error::config("os.recolor.snapshot_pages", "must be at least 1"));
        }
        if self.kind == RecolorKind::None {
            return Ok(());
        }
        if crate::os::placement::color_cache(&cfg.cache).is_none() {
            return Err(Error::config("os.recolor.kind", "recolouring needs a data-side cache (no [cache.*] serves data)"));
        }
        if self.kind == RecolorKind::Cml && self.cml_lru.unwrap_or(16) + self.cml_hot.unwrap_or(16) == 0 {
            return Err(Error::config("os.recolor.cml_lru", "the CML buffer needs at least one tuple"));
        }
        // Romer's buffer has 16 + 16 tuples (Table 5-1); it is scanned whole on every interrupt.
        for (key, n) in [("os.recolor.cml_lru", self.cml_lru), ("os.recolor.cml_hot", self.cml_hot)] {
            if n.is_some_and(|n| n > MAX_CML_TUPLES) {
                return Err(Error::config(key, format!("at most {MAX_CML_TUPLES} tuples")));
            }
        }
        if self.kind != RecolorKind::Cml && self.target == TargetKind::ColdestMiss {
            return Err(Error::config("os.recolor.target", "coldest-miss reads the CML buffer: only with kind = \"cml\""));
        }
        if matches!(
            self.kind,
            RecolorKind::PeriodicRandom | RecolorKind::PeriodicColor | RecolorKind::Snapshot | RecolorKind::SnapshotDelay | RecolorKind::SnapshotMiss
        ) && self.period == Some(0)
        {
            return Err(Error::config("os.recolor.period", format!("{} needs a period > 0", self.kind.as_str())));
        }
        Ok(())
    }
}

/// Counters of the policy itself (the page moves are in `Mm::rc`).
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct RecolorerStats {
    /// Timer, miss-counter and CML interrupts taken.
    pub(crate) interrupts: u64,
    pub(crate) tlb_misses_recorded: u64,
    pub(crate) snapshots: u64,
    /// Analyses of TLB snapshots or CML scans.
    pub(crate) analyses: u64,
    /// Groups of two or more same-coloured pages found.
    pub(crate) conflicts: u64,
    /// TLB entries the policy invalidated to provoke misses (active-delay/throttle).
    pub(crate) tlb_invalidations: u64,
    /// Fixed policy cycles (Tables 4-7, 5-1); the copies' memory cycles are separate.
    pub(crate) overhead_cycles: f64,
    /// CML buffer clears.
    pub(crate) cml_clears: u64,
}

/// The 4 KiB pages in the watched TLBs, with their colours (software policies learn
/// the working set from it, Romer §4.2.1).
#[derive(Clone, Debug, Default)]
pub(crate) struct TlbMirror {
    pages: BTreeMap<(Asid, u64), (Pid, u64)>,
    per_color: Vec<u32>,
}

impl TlbMirror {
    fn apply<P: PageTable>(&mut self, mm: &Mm<P>, c: &TlbChange) {
        match *c {
            TlbChange::Filled { page, .. } if page.size == PageSize::K4 => {
                let Some(pid) = mm.pid_of(page.asid) else { return };
                let Some(t) = mm.translation_at(pid, page.va) else { return };
                let color = mm.placement.color_of(t.phys(page.va));
                if let Some((_, old)) = self.pages.insert((page.asid, page.va), (pid, color)) {
                    self.per_color[old as usize] -= 1;
                }
                self.per_color[color as usize] += 1;
            }
            TlbChange::Evicted { page, .. } | TlbChange::Invalidated { page, .. } => {
                if let Some((_, color)) = self.pages.remove(&(page.asid, page.va)) {
                    self.per_color[color as usize] -= 1;
                }
            }
            TlbChange::Filled { .. } => {}
        }
    }

    /// Pages held, as (asid, va, pid, colour).
    fn pages(&self) -> impl Iterator<Item = (Asid, u64, Pid, u64)> + '_ {
        self.pages.iter().map(|(&(a, v), &(p, c))| (a, v, p, c))
    }

    fn count(&self, color: u64) -> u32 {
        self.per_color[color as usize]
    }

    fn colors_present(&self) -> Vec<u64> {
        (0..self.per_color.len() as u64).filter(|&c| self.per_color[c as usize] > 0).collect()
    }
}

/// Picks target colours (Romer §5.3.2, §5.6.3).
struct Targets {
    kind: TargetKind,
    colors: u64,
    next: u64,
    rng: Xoshiro256PlusPlus,
}

impl Targets {
    /// A colour not in `avoid` (if every colour is to be avoided, the next in turn).
    fn pick(&mut self, avoid: &[u64], mem: &MemoryHierarchy, cml: &[CmlTuple], color_of_page: impl Fn(u64) -> u64) -> u64 {
        let ok = |c: u64| !avoid.contains(&c);
        match self.kind {
            TargetKind::ColdestRef => {
                if let Some((_, refs)) = &mem.color_refs {
                    if let Some(c) = (0..self.colors).filter(|&c| ok(c)).min_by_key(|&c| refs[c as usize]) {
                        return c;
                    }
                }
            }
            TargetKind::ColdestMiss => {
                if let Some(t) = cml.iter().filter(|t| ok(color_of_page(t.page))).min_by_key(|t| t.count) {
                    return color_of_page(t.page);
                }
            }
            TargetKind::Random => {
                for _ in 0..4 * self.colors {
                    let c = self.rng.next_u64() % self.colors;
                    if ok(c) {
                        return c;
                    }
                }
            }
            TargetKind::Sequential => {}
        }
        for _ in 0..self.colors {
            let c = self.next;
            self.next = (self.next + 1) % self.colors;
            if ok(c) {
                return c;
            }
        }
        let c = self.next;
        self.next = (self.next + 1) % self.colors;
        c
    }
}

/// Resolved parameters every policy reads.
#[derive(Clone, Debug)]
struct Params {
    period: u64,
    delay: u64,
    snapshot_pages: usize,
    costs: RecolorCosts,
}

enum Policy {
    Active(active::Active),
    Periodic(periodic::Periodic),
    Snapshot(snapshot::Snapshot),
    Cml(cml::Cml),
}

/// What a policy may act on in one hook.
pub(crate) struct Ctx<'a, P: PageTable> {
    pub(crate) mm: &'a mut Mm<P>,
    pub(crate) mem: &'a mut MemoryHierarchy,
    /// The core's cycle.
    pub(crate) now: u64,
}

/// The recolouring policy of a run.
pub(crate) struct Recolorer {
    pub(crate) kind: RecolorKind,
    params: Params,
    policy: Policy,
    tlb: TlbMirror,
    targets: Targets,
    pub(crate) stats: RecolorerStats,
    /// Cycle of the next timer event (u64::MAX: none).
    pub(crate) next_timer: u64,
}

impl Recolorer {
    /// The recolouring policy of `rc`, over `placement`'s colours of the colour cache,
    /// whose lines are `line` bytes (`None`: no cache serves data).
    pub(crate) fn new(rc: &RecolorConfig, placement: &Placement, line: Option<u64>) -> Result<Recolorer> {
        let (period, delay) = rc.kind.table_4_5();
        let params = Params {
            period: rc.period.unwrap_or(period),
            delay: rc.delay.unwrap_or(delay),
            snapshot_pages: rc.snapshot_pages.unwrap_or(16),
            costs: rc.costs.clone(),
        };
        let policy = match rc.kind {
            RecolorKind::ActiveNaive | RecolorKind::ActiveDelay | RecolorKind::ActiveThrottle => {
                Policy::Active(active::Active::new(placement.colors, params.delay, params.period))
            }
            RecolorKind::PeriodicRandom | RecolorKind::PeriodicColor => {
                Policy::Periodic(periodic::Periodic::new(rc.kind == RecolorKind::PeriodicRandom, rc.seed))
            }
            RecolorKind::Snapshot | RecolorKind::SnapshotDelay | RecolorKind::SnapshotMiss => Policy::Snapshot(snapshot::Snapshot::new(rc.kind)),
            RecolorKind::Cml => {
                let line = line.ok_or_else(|| Error::config("os.recolor.kind", "cml needs a data-side cache"))?;
                Policy::Cml(cml::Cml::new(rc, line)?)
            }
            RecolorKind::None => return Err(Error::config("os.recolor.kind", "none has no policy")),
        };
        let next_timer = match rc.kind {
            RecolorKind::PeriodicRandom | RecolorKind::PeriodicColor | RecolorKind::Snapshot | RecolorKind::SnapshotDelay => params.period,
            RecolorKind::Cml => rc.clear_every.unwrap_or(5_000_000).max(1),
            _ => u64::MAX,
        };
        Ok(Recolorer {
            kind: rc.kind,
            params,
            policy,
            tlb: TlbMirror { pages: BTreeMap::new(), per_color: vec![0; placement.colors as usize] },
            targets: Targets { kind: rc.target, colors: placement.colors, next: 0, rng: Xoshiro256PlusPlus::seed_from_u64(rc.seed ^ 0x5ca1ab1e) },
            stats: RecolorerStats::default(),
            next_timer,
        })
    }

    /// Whether the policy starts from physical pages (needs the reverse map).
    pub(crate) fn needs_rmap(&self) -> bool {
        matches!(self.policy, Policy::Cml(_))
    }

    /// Whether the policy watches TLB misses and contents.
    pub(crate) fn wants_tlb(&self) -> bool {
        !matches!(self.policy, Policy::Cml(_))
    }

    /// Install the hardware the policy reads: the CML buffer, the miss-counter alarm,
    /// per-colour reference counters.
    pub(crate) fn install(&self, mem: &mut MemoryHierarchy, colors: u64) {
        if let Policy::Cml(c) = &self.policy {
            mem.cml = Some(c.buffer());
        }
        if self.kind == RecolorKind::SnapshotMiss {
            mem.miss_alarm = self.params.period;
        }
        if self.targets.kind == TargetKind::ColdestRef {
            mem.color_refs = Some((colors, vec![0; colors as usize]));
        }
    }

    /// Changes to the watched TLBs (every fill, eviction, invalidation, flush).
    pub(crate) fn tlb_changes<P: PageTable>(&mut self, mm: &Mm<P>, changes: &[TlbChange]) {
        for c in changes {
            self.tlb.apply(mm, c);
        }
    }

    /// A last-level TLB miss, after its fill (`fill`: the changes the fill made).
    pub(crate) fn tlb_miss<P: PageTable>(&mut self, cx: &mut Ctx<P>, m: &TlbMiss, fill: &[TlbChange]) -> Result<()> {
        self.tlb_changes(cx.mm, fill);
        if matches!(self.policy, Policy::Active(_) | Policy::Snapshot(_)) {
            // Table 4-7: the miss handler decides whether to record this miss.
            self.stats.overhead_cycles += self.params.costs.check;
        }
        let mut sh = Shared { params: &self.params, tlb: &self.tlb, targets: &mut self.targets, stats: &mut self.stats };
        match &mut self.policy {
            Policy::Active(a) => a.tlb_miss(&mut sh, cx, m),
            Policy::Snapshot(s) => s.tlb_miss(&mut sh, cx, m),
            Policy::Periodic(_) | Policy::Cml(_) => Ok(()),
        }
    }

    /// The timer expired (`now >= next_timer`).
    pub(crate) fn timer<P: PageTable>(&mut self, cx: &mut Ctx<P>) -> Result<()> {
        let mut sh = Shared { params: &self.params, tlb: &self.tlb, targets: &mut self.targets, stats: &mut self.stats };
        self.next_timer = match &mut self.policy {
            Policy::Periodic(p) => p.timer(&mut sh, cx)?,
            Policy::Snapshot(s) => s.timer(&mut sh, cx)?,
            Policy::Cml(c) => c.timer(&mut sh, cx),
            Policy::Active(_) => u64::MAX,
        };
        Ok(())
    }

    /// The memory system interrupted (`mem.interrupt`).
    pub(crate) fn interrupt<P: PageTable>(&mut self, cx: &mut Ctx<P>) -> Result<()> {
        cx.mem.interrupt = false;
        let mut sh = Shared { params: &self.params, tlb: &self.tlb, targets: &mut self.targets, stats: &mut self.stats };
        match &mut self.policy {
            Policy::Cml(c) => c.interrupt(&mut sh, cx),
            Policy::Snapshot(s) => s.miss_alarm(&mut sh, cx),
            _ => Ok(()),
        }
    }

    pub(crate) fn details(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.stats).unwrap_or_default();
        v["period"] = self.params.period.into();
        v["delay"] = self.params.delay.into();
        if let Policy::Cml(c) = &self.policy {
            v["recolor_threshold"] = c.recolor_threshold.into();
            v["interrupt_threshold"] = c.interrupt_threshold.into();
        }
        v
    }
}

/// The state every policy shares, borrowed for one hook.
struct Shared<'a> {
    params: &'a Params,
    tlb: &'a TlbMirror,
    targets: &'a mut Targets,
    stats: &'a mut RecolorerStats,
}

impl Shared<'_> {
    /// Recolour `pid`'s page at `va` away from the colours in `avoid`, charging the
    /// copy instructions and the PTE update. Returns whether the page moved.
    fn recolor<P: PageTable>(&mut self, cx: &mut Ctx<P>, pid: Pid, va: u64, avoid: &[u64]) -> Result<bool> {
        let cml: Vec<CmlTuple> = match (&self.targets.kind, &cx.mem.cml) {
            (TargetKind::ColdestMiss, Some(b)) => b.scan(),
            _ => Vec::new(),
        };
        let shift = cx.mem.cml.as_ref().map_or(12, |b| b.page_shift());
        let placement = &cx.mm.placement;
        let color = self.targets.pick(avoid, cx.mem, &cml, |page| placement.color_of(page << shift));
        let moved = cx.mm.recolor_page(pid, va, color)?.is_some();
        if moved {
            self.stats.overhead_cycles += self.params.costs.copy + self.params.costs.pte;
        }
        Ok(moved)
    }

    /// Groups of two or more pages of one colour among `pages` (pid, va, colour), by
    /// colour, each in the given order.
    fn conflicts(pages: &[(Pid, u64, u64)]) -> BTreeMap<u64, Vec<(Pid, u64)>> {
        let mut by: BTreeMap<u64, Vec<(Pid, u64)>> = BTreeMap::new();
        for &(pid, va, c) in pages {
            by.entry(c).or_default().push((pid, va));
        }
        by.retain(|_, v| v.len() >= 2);
        by
    }
}
