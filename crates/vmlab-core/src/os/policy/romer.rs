//! Romer's online superpage promotion (thesis ch. 3, and THROTTLE from §6.5): demand
//! faults map 4K pages; every TLB miss is blamed on potential superpages (prefetch and
//! capacity charges, os/policy/charges.rs), and a superpage is promoted (always by
//! copying, §3.1) once its charges reach a threshold proportional to
//! R = promotion cost / miss cost (§3.3.3; R = 100·S for S KB at 3000 cycles/KB and 30
//! cycles/miss).
//!
//! - **ONLINE** (§3.4.2): promote P when capacity(P) > 0.625·R or prefetch(P) > 0.125·R.
//! - **APPROX-ONLINE** (§3.4.3): prefetch charges only; promote when prefetch(P) ≥ 0.125·R.
//! - **THROTTLE** (§6.5.1): APPROX-ONLINE, except that every `throttle_window`
//!   instructions the window's miss frequency is checked; above `throttle_frequency`
//!   misses per instruction, bookkeeping and promotion are suspended until the
//!   policy's overhead so far (bookkeeping + copying) is below `throttle_target` CPI.
//! - **OFFLINE** (§3.4.1, a greedy approximation of the optimal offline policy): a first
//!   pass over the trace collects prefetch and capacity charges with 4K pages; the
//!   superpages whose charges (misses they would have eliminated) exceed R are chosen
//!   greedily, best benefit/cost first, each choice deducting its charges from the
//!   superpages containing it (as an online promotion does); the second pass creates
//!   the chosen superpages at their first touch, paying the promotion (copy) cost.
//!
//! When several superpages reach their thresholds on one miss, they are promoted largest
//! first (a promotion clears the charges inside it, so the smaller ones inside it are
//! dropped). A superpage that cannot be merged (it crosses a VMA, mixes permissions, or
//! no free block exists) is not tried again (`promotions_failed`).

use super::charges::{Charges, SuperpageCharges};
use super::{map_base_page, map_fresh, PageSizePolicy, TlbMiss};
use crate::addr::{Asid, PageSize, Pid};
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::mmu::TlbChange;
use crate::os::{DemandFault, Mm};
use crate::pt::{PageTable, Translation};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::BinaryHeap;

/// `[os.policy.romer]`: the constants of Romer's policies; the defaults are his.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RomerConfig {
    /// Largest superpage (§3.2: 8M).
    pub max_size: Bytes,
    /// The TLB miss cost in R = promotion cost / miss cost (§3.5.1: 30 cycles).
    pub miss_cycles: u64,
    /// Promote at this fraction of R in prefetch charges (§3.4.2: 0.125).
    pub prefetch_threshold: f64,
    /// ONLINE: or at this fraction of R in capacity charges (§3.4.2: 0.625).
    pub capacity_threshold: f64,
    /// ASAP-4-64's one superpage size (§3.4.4: 64K).
    pub asap_4_64_size: Bytes,
    /// ASAP-4-64 promotes when this fraction of the superpage's base pages is mapped (half).
    pub asap_4_64_fraction: f64,
    /// THROTTLE's window w, in instructions (§6.5.2: 10,000,000).
    pub throttle_window: u64,
    /// THROTTLE activates above this many misses per instruction in a window (f = 0.001).
    pub throttle_frequency: f64,
    /// THROTTLE stays active until the policy's overhead is below this CPI (t = 0.02).
    pub throttle_target: f64,
}

impl Default for RomerConfig {
    fn default() -> Self {
        RomerConfig {
            max_size: Bytes(8 << 20),
            miss_cycles: 30,
            prefetch_threshold: 0.125,
            capacity_threshold: 0.625,
            asap_4_64_size: Bytes(64 << 10),
            asap_4_64_fraction: 0.5,
            throttle_window: 10_000_000,
            throttle_frequency: 0.001,
            throttle_target: 0.02,
        }
    }
}

impl RomerConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == RomerConfig::default()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let key = |k: &str| format!("os.policy.romer.{k}");
        let max = PageSize::from_bytes(self.max_size.0).map_err(|m| Error::config(key("max_size"), m))?;
        if max <= PageSize::K4 {
            return Err(Error::config(key("max_size"), "must be larger than 4K"));
        }
        let s = PageSize::from_bytes(self.asap_4_64_size.0).map_err(|m| Error::config(key("asap_4_64_size"), m))?;
        if s <= PageSize::K4 {
            return Err(Error::config(key("asap_4_64_size"), "must be larger than 4K"));
        }
        if self.miss_cycles == 0 {
            return Err(Error::config(key("miss_cycles"), "must be at least 1"));
        }
        for (k, v) in [("prefetch_threshold", self.prefetch_threshold), ("capacity_threshold", self.capacity_threshold)] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(Error::config(key(k), format!("{v} is not a positive number")));
            }
        }
        if !(self.asap_4_64_fraction > 0.0 && self.asap_4_64_fraction <= 1.0) {
            return Err(Error::config(key("asap_4_64_fraction"), format!("{} is not in (0, 1]", self.asap_4_64_fraction)));
        }
        if self.throttle_window == 0 {
            return Err(Error::config(key("throttle_window"), "must be at least 1"));
        }
        for (k, v) in [("throttle_frequency", self.throttle_frequency), ("throttle_target", self.throttle_target)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::config(key(k), format!("{v} is not a non-negative number")));
            }
        }
        Ok(())
    }

    pub(crate) fn max(&self) -> PageSize {
        PageSize::from_valid_shift(self.max_size.0.trailing_zeros() as u8)
    }

    /// R for a superpage of 2^shift bytes: its promotion (copy) cost over the miss cost.
    pub(crate) fn r(&self, shift: u8, copy_cycles_per_kb: u64) -> f64 {
        ((1u64 << shift) / 1024 * copy_cycles_per_kb) as f64 / self.miss_cycles as f64
    }
}

/// Which of the charge-driven policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnlineVariant {
    Online,
    ApproxOnline,
    Throttle,
    /// OFFLINE's first pass: charges (prefetch and capacity) only, no promotion.
    OfflineAnalysis,
}

/// THROTTLE's state (§6.5.1).
#[derive(Debug)]
struct Throttle {
    window: u64,
    frequency: f64,
    target: f64,
    window_start: u64,
    window_misses: u64,
    active: bool,
    activations: u64,
    suspended_misses: u64,
}

impl Throttle {
    /// Account a miss at `instructions`, with the policy's `overhead` cycles so far;
    /// returns whether bookkeeping and promotion are suspended for it.
    fn suspended(&mut self, instructions: u64, overhead: u64) -> bool {
        self.window_misses += 1;
        if self.active && (overhead as f64) < self.target * instructions as f64 {
            self.active = false;
        }
        if instructions >= self.window_start + self.window {
            let mpi = self.window_misses as f64 / (instructions - self.window_start) as f64;
            if !self.active && mpi > self.frequency {
                self.active = true;
                self.activations += 1;
            }
            self.window_start = instructions;
            self.window_misses = 0;
        }
        if self.active {
            self.suspended_misses += 1;
        }
        self.active
    }
}

/// ONLINE, APPROX-ONLINE, THROTTLE, and OFFLINE's analysis pass.
pub struct OnlinePromotion {
    variant: OnlineVariant,
    charges: SuperpageCharges,
    /// Charges at which a superpage of 2^s bytes is promoted (u32::MAX: never).
    prefetch_at: [u32; 64],
    capacity_at: [u32; 64],
    max: PageSize,
    throttle: Option<Throttle>,
    /// The process of each ASID seen (OFFLINE's plan is per process).
    pids: FxHashMap<Asid, Pid>,
    /// OFFLINE's first pass: the charges of the processes that exited, kept for the
    /// plan, which is made when the pass ends (a traced program's space ends with its
    /// exit record, before then).
    exited: Vec<(Pid, u8, u64, Charges)>,
    failed: u64,
    /// Scratch: the superpages a miss brought to a threshold.
    ready: Vec<(u8, u64)>,
}

impl OnlinePromotion {
    pub(crate) fn new(variant: OnlineVariant, rc: &RomerConfig, copy_cycles_per_kb: u64) -> OnlinePromotion {
        let max = rc.max();
        let mut prefetch_at = [u32::MAX; 64];
        let mut capacity_at = [u32::MAX; 64];
        for s in 13..=max.shift() {
            let r = rc.r(s, copy_cycles_per_kb);
            // ONLINE promotes when a charge *exceeds* its threshold, APPROX-ONLINE when
            // it *reaches* it (§3.4.2, §3.4.3).
            let (p, c) = (rc.prefetch_threshold * r, rc.capacity_threshold * r);
            match variant {
                OnlineVariant::Online => {
                    prefetch_at[s as usize] = p.floor() as u32 + 1;
                    capacity_at[s as usize] = c.floor() as u32 + 1;
                }
                OnlineVariant::ApproxOnline | OnlineVariant::Throttle => prefetch_at[s as usize] = (p.ceil() as u32).max(1),
                OnlineVariant::OfflineAnalysis => {}
            }
        }
        let keeps_capacity = matches!(variant, OnlineVariant::Online | OnlineVariant::OfflineAnalysis);
        let throttle = (variant == OnlineVariant::Throttle).then_some(Throttle {
            window: rc.throttle_window,
            frequency: rc.throttle_frequency,
            target: rc.throttle_target,
            window_start: 0,
            window_misses: 0,
            active: false,
            activations: 0,
            suspended_misses: 0,
        });
        OnlinePromotion {
            variant,
            // Capacity needs the watched TLBs' sizes: set by `watch_entries`.
            charges: SuperpageCharges::new(PageSize::K4, max, keeps_capacity.then_some([0, 0])),
            prefetch_at,
            capacity_at,
            max,
            throttle,
            pids: FxHashMap::default(),
            exited: Vec::new(),
            failed: 0,
            ready: Vec::new(),
        }
    }

    /// The entries of the watched TLBs (capacity charges need N, §3.5.3).
    pub(crate) fn watch_entries(&mut self, entries: [usize; 2]) {
        if matches!(self.variant, OnlineVariant::Online | OnlineVariant::OfflineAnalysis) {
            self.charges = SuperpageCharges::new(PageSize::K4, self.max, Some(entries));
        }
    }

    /// Promote the superpage of 2^shift bytes at `base`.
    fn promote<P: PageTable>(&mut self, mm: &mut Mm<P>, m: &TlbMiss, shift: u8, base: u64) -> Result<()> {
        let size = PageSize::from_valid_shift(shift);
        if mm.promote_by_copy(m.pid, base, size)? {
            self.charges.promoted(m.asid, shift, base);
        } else {
            self.failed += 1;
            self.charges.block(m.asid, shift, base);
        }
        Ok(())
    }

    /// OFFLINE: choose the superpages to build from the first pass's charges.
    pub(crate) fn offline_plan(&self, rc: &RomerConfig, copy_cycles_per_kb: u64) -> OfflinePlan {
        // Benefit: misses the superpage would have eliminated (its charges), of the
        // processes still running and of those that exited.
        let mut benefit: FxHashMap<(Pid, u8, u64), f64> = FxHashMap::default();
        let mut heap = BinaryHeap::new();
        let live = self.charges.iter().filter_map(|(asid, s, base, c)| self.pids.get(&asid).map(|&pid| (pid, s, base, c)));
        for (pid, s, base, c) in live.chain(self.exited.iter().copied()) {
            let b = (c.prefetch + c.capacity) as f64;
            let r = rc.r(s, copy_cycles_per_kb);
            if b > r {
                benefit.insert((pid, s, base), b);
                heap.push(Candidate { ratio: b / r, pid, shift: s, base });
            }
        }
        let mut chosen: FxHashSet<(Pid, u8, u64)> = FxHashSet::default();
        let max = self.max.shift();
        while let Some(c) = heap.pop() {
            let k = (c.pid, c.shift, c.base);
            let b = benefit[&k];
            let r = rc.r(c.shift, copy_cycles_per_kb);
            if b <= r {
                continue;
            }
            if (b / r) < c.ratio {
                // Charges were deducted since it was queued: re-queue at its new ratio.
                heap.push(Candidate { ratio: b / r, ..c });
                continue;
            }
            let inside_chosen = (c.shift + 1..=max).any(|s| chosen.contains(&(c.pid, s, c.base >> s << s)));
            if inside_chosen {
                continue;
            }
            // Superpages chosen inside it are subsumed.
            for s in 13..c.shift {
                for i in 0..1u64 << (c.shift - s) {
                    chosen.remove(&(c.pid, s, c.base + (i << s)));
                }
            }
            chosen.insert(k);
            for s in c.shift + 1..=max {
                if let Some(a) = benefit.get_mut(&(c.pid, s, c.base >> s << s)) {
                    *a = (*a - b).max(0.0);
                }
            }
        }
        OfflinePlan { pages: chosen, max: self.max }
    }
}

/// An OFFLINE candidate, ordered by benefit/cost (then by position, for determinism).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Candidate {
    ratio: f64,
    pid: Pid,
    shift: u8,
    base: u64,
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.ratio.total_cmp(&o.ratio).then((o.pid, o.shift, o.base).cmp(&(self.pid, self.shift, self.base)))
    }
}

impl PageSizePolicy for OnlinePromotion {
    fn granule(&self) -> PageSize {
        self.max
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        map_base_page(mm, f)
    }

    fn wants_tlb_misses(&self) -> bool {
        true
    }

    fn tlb_changes(&mut self, changes: &[TlbChange]) {
        changes.iter().for_each(|c| self.charges.apply(c));
    }

    fn tlb_miss<P: PageTable>(&mut self, mm: &mut Mm<P>, m: &TlbMiss, fill: &[TlbChange]) -> Result<bool> {
        if let Some(t) = &mut self.throttle {
            if t.suspended(m.instructions, mm.pc.bookkeeping_cycles + mm.pc.copy_cycles) {
                self.tlb_changes(fill);
                return Ok(false);
            }
        }
        if self.variant == OnlineVariant::OfflineAnalysis {
            self.pids.insert(m.asid, m.pid);
        }
        let mut ready = std::mem::take(&mut self.ready);
        self.charges.charge_miss(m.slot, m.asid, m.va, m.translation.size, &self.prefetch_at, &self.capacity_at, &mut ready);
        self.tlb_changes(fill);
        // Largest first; a promotion clears the charges inside it and moves prefetch
        // charges out of the pages around it, so each is re-checked.
        for &(s, base) in &ready {
            if self.charges.at_threshold(m.asid, s, base, &self.prefetch_at, &self.capacity_at) {
                self.promote(mm, m, s, base)?;
            }
        }
        self.ready = ready;
        Ok(self.variant != OnlineVariant::OfflineAnalysis)
    }

    fn space_gone(&mut self, asid: Asid) {
        if self.variant == OnlineVariant::OfflineAnalysis {
            if let Some(pid) = self.pids.remove(&asid) {
                self.exited.extend(self.charges.iter().filter(|c| c.0 == asid).map(|(_, s, base, c)| (pid, s, base, c)));
            }
        }
        self.charges.drop_space(asid);
    }

    fn details(&self) -> serde_json::Value {
        let mut d = serde_json::json!({
            "max_size": self.max.to_string(),
            "promotions_failed": self.failed,
            "superpages_charged": self.charges.len(),
        });
        if let Some(t) = &self.throttle {
            d["throttle"] = serde_json::json!({
                "activations": t.activations,
                "active_at_end": t.active,
                "suspended_misses": t.suspended_misses,
            });
        }
        d
    }
}

/// OFFLINE's second pass: the chosen superpages, built at their first touch.
#[derive(Clone, Debug)]
pub struct OfflinePlan {
    /// (pid, log2 size, base).
    pages: FxHashSet<(Pid, u8, u64)>,
    max: PageSize,
}

impl OfflinePlan {
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }
}

/// OFFLINE's second pass as a policy.
pub struct Offline {
    plan: OfflinePlan,
    built: u64,
    fell_back: u64,
}

impl Offline {
    pub(crate) fn new(plan: OfflinePlan) -> Offline {
        Offline { plan, built: 0, fell_back: 0 }
    }
}

impl PageSizePolicy for Offline {
    fn granule(&self) -> PageSize {
        self.plan.max
    }

    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        for s in (13..=self.plan.max.shift()).rev() {
            let size = PageSize::from_valid_shift(s);
            if !self.plan.pages.contains(&(f.pid, s, size.align_down(f.va))) {
                continue;
            }
            if let Some(base) = mm.region_free(f.pid, f.va, size, &f.vma) {
                if let Some(t) = map_fresh(mm, f, base, size)? {
                    // Romer §3.4.1: built at time 0, at the promotion (copy) cost.
                    self.built += 1;
                    mm.count_copied_promotion(size);
                    return Ok(t);
                }
            }
            self.fell_back += 1;
            break;
        }
        map_base_page(mm, f)
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "max_size": self.plan.max.to_string(),
            "planned_superpages": self.plan.len(),
            "built": self.built,
            "not_built": self.fell_back,
        })
    }
}
