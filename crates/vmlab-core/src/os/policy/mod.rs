//! Page-size policies: what the OS maps at a demand fault, and when it promotes or
//! demotes pages afterwards (`[os.policy]`, docs/config.md).
//!
//! A policy implements [`PageSizePolicy`]. It is handed the memory-management state
//! ([`Mm`]) and builds on its primitives: `map_page`/`unmap_page`, `alloc_frames`,
//! reservations (`reserve`, `populate_reserved`, `promote_reservation`), and
//! promotion/demotion (`promote_in_place`, `promote_by_copy`, `demote`, os/promotion.rs).
//! Those keep the page table, the OS page index, frame accounting and TLB shootdowns in
//! sync, so a policy only decides. The hooks:
//!
//! - `fault`: every demand fault on private memory (shared objects always get 4K pages);
//! - `tlb_miss`: every last-level TLB miss (one per walk), after the fill, with the
//!   changes that fill made to the watched TLB (the victim and the new entry);
//!   `tlb_changes` delivers every other change to it (invalidations, flushes, fills
//!   after faults) in order, before the next miss. Romer's `tlbcount` (§3.5.2) needs
//!   both. Only called if `wants_tlb_misses()`;
//! - `background`: periodic work (`os.policy.khugepaged.every` accesses or
//!   instructions), shared by every policy through [`Khugepaged`].
//!
//! Dispatch is by `match` on [`PolicyKind`] (no dynamic dispatch per access); a new
//! policy is a new file, a new variant, and one arm per hook below.

pub mod asap;
pub mod charges;
pub mod fixed;
pub mod khugepaged;
pub mod romer;
pub mod thp_eager;
pub mod thp_reserve;
pub mod tps;

pub use asap::{Asap, Asap464};
pub use fixed::Fixed;
pub use khugepaged::{Khugepaged, KhugepagedConfig};
pub use romer::{Offline, OfflinePlan, OnlinePromotion, OnlineVariant, RomerConfig};
pub use thp_eager::ThpEager;
pub use thp_reserve::ThpReserve;
pub use tps::{TailoredPageSizes, TpsConfig};

use super::buddy::FrameUse;
use super::{DemandFault, Mm};
use crate::addr::{Asid, PageSize, Pid};
use crate::config::Bytes;
use crate::error::{Error, Result};
use crate::mmu::TlbChange;
use crate::pt::{PageTable, Translation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `os.policy.kind`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    /// FIXED(os.page_size), with fallback to smaller sizes.
    #[default]
    Fixed,
    /// Linux THP `enabled=always` with `defrag`: a huge page at first touch.
    ThpEager,
    /// Reservation-based THP (FreeBSD, the TPS paper's baseline).
    ThpReserve,
    /// Romer §3.4.2: prefetch and capacity charges.
    Online,
    /// Romer §3.4.3: prefetch charges only.
    ApproxOnline,
    /// Romer §3.4.4: promote when fully populated.
    Asap,
    /// Romer §3.4.4 (Talluri): 4K and 64K, promote when half populated.
    #[serde(rename = "asap-4-64")]
    Asap464,
    /// Romer §3.4.1: greedy offline choice over a first pass (two passes).
    Offline,
    /// Romer §6.5: APPROX-ONLINE with an overhead throttle.
    Throttle,
    /// Tailored Page Sizes: reservations that grow in place through every 2^n size.
    Tps,
}

impl PolicyName {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PolicyName::Fixed => "fixed",
            PolicyName::ThpEager => "thp-eager",
            PolicyName::ThpReserve => "thp-reserve",
            PolicyName::Online => "online",
            PolicyName::ApproxOnline => "approx-online",
            PolicyName::Asap => "asap",
            PolicyName::Asap464 => "asap-4-64",
            PolicyName::Offline => "offline",
            PolicyName::Throttle => "throttle",
            PolicyName::Tps => "tps",
        }
    }

    /// Romer's per-miss bookkeeping cost (Table 3-3, less the 30-cycle baseline miss).
    pub(crate) fn default_bookkeeping_cycles(self) -> u64 {
        match self {
            PolicyName::Online => 2570,
            PolicyName::ApproxOnline | PolicyName::Throttle => 100,
            _ => 0,
        }
    }
}

/// `[os.policy]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    pub kind: PolicyName,
    /// The huge page size of the THP policies (and of khugepaged).
    pub huge_size: Bytes,
    /// thp-reserve: promote when this fraction of the huge page's base pages is populated.
    pub threshold: f64,
    /// Cycles charged per last-level TLB miss for the policy's bookkeeping (Romer §3.5.4;
    /// unset: the policy's own, Table 3-3: ONLINE 2570, APPROX-ONLINE and THROTTLE 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bookkeeping_cycles: Option<u64>,
    /// Cycles charged per KiB a promotion copies (Romer §3.5.1: 3000).
    pub copy_cycles_per_kb: u64,
    pub khugepaged: KhugepagedConfig,
    /// The constants of Romer's policies.
    #[serde(skip_serializing_if = "RomerConfig::is_default")]
    pub romer: RomerConfig,
    /// Tailored Page Sizes.
    #[serde(skip_serializing_if = "TpsConfig::is_default")]
    pub tps: TpsConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            kind: PolicyName::Fixed,
            huge_size: Bytes(2 << 20),
            threshold: 1.0,
            bookkeeping_cycles: None,
            copy_cycles_per_kb: 3000,
            khugepaged: KhugepagedConfig::default(),
            romer: RomerConfig::default(),
            tps: TpsConfig::default(),
        }
    }
}

impl PolicyConfig {
    /// Left out of the resolved config when default, so documents and config hashes of
    /// runs that do not use it are unchanged.
    pub(crate) fn is_default(&self) -> bool {
        *self == PolicyConfig::default()
    }

    /// Checks that need no page table (config validation), with `os.page_size`.
    pub(crate) fn validate(&self, page_size: Bytes) -> Result<()> {
        let huge = PageSize::from_bytes(self.huge_size.0).map_err(|m| Error::config("os.policy.huge_size", m))?;
        if huge == PageSize::K4 {
            return Err(Error::config("os.policy.huge_size", "must be larger than 4K"));
        }
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err(Error::config("os.policy.threshold", format!("{} is not in (0, 1]", self.threshold)));
        }
        if self.kind != PolicyName::Fixed && page_size.0 != 4096 {
            return Err(Error::config("os.page_size", format!("must be 4K with os.policy.kind = \"{}\" (its base page size)", self.kind.as_str())));
        }
        self.romer.validate()?;
        self.tps.max()?;
        self.khugepaged.validate(huge)
    }
}

/// Counters of the `policy` section (docs/metrics.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PolicyCounters {
    /// Pages installed over the run, by size (faults, promotions, demotions).
    pub(crate) mapped_total: BTreeMap<PageSize, u64>,
    pub(crate) promotions: u64,
    pub(crate) promotions_in_place: u64,
    pub(crate) promotions_copied: u64,
    pub(crate) demotions: u64,
    pub(crate) bytes_copied: u64,
    pub(crate) copy_cycles: u64,
    pub(crate) bookkeeping_cycles: u64,
    pub(crate) reservations_made: u64,
    pub(crate) reservations_promoted: u64,
    pub(crate) reservations_broken: u64,
    pub(crate) reservations_released: u64,
    pub(crate) bloat_peak_frames: u64,
}

/// A last-level TLB miss, as the engine reports it to the policy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TlbMiss {
    pub(crate) pid: Pid,
    pub(crate) asid: Asid,
    /// The address that missed.
    pub(crate) va: u64,
    /// The translation the walk (or fault) produced and the TLBs were filled with.
    pub(crate) translation: Translation,
    /// The watched TLB of the missing side (mmu/mod.rs).
    pub(crate) slot: u8,
    /// Instructions executed so far.
    pub(crate) instructions: u64,
}

/// The interface of a page-size policy. Generic over the page table (monomorphised per
/// run, like the engine).
pub(crate) trait PageSizePolicy {
    /// The largest page the policy maps at a fault: implicit VMAs are this aligned size.
    fn granule(&self) -> PageSize;
    /// Resolve a demand fault on private memory; returns the translation now mapped.
    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation>;
    /// Whether `tlb_miss` must be called (policies that watch the miss stream).
    fn wants_tlb_misses(&self) -> bool {
        false
    }
    /// Changes to the watched TLBs since the last call (not those of a miss's fill).
    fn tlb_changes(&mut self, _changes: &[TlbChange]) {}
    /// A last-level TLB miss, with the changes its fill made to the watched TLB; may
    /// promote or demote (shootdowns go through `mm`). Returns whether the policy did
    /// its bookkeeping (and is charged for it).
    fn tlb_miss<P: PageTable>(&mut self, _mm: &mut Mm<P>, _m: &TlbMiss, _fill: &[TlbChange]) -> Result<bool> {
        Ok(true)
    }
    /// An address space ended (its ASID may be reused).
    fn space_gone(&mut self, _asid: Asid) {}
    /// Policy-specific numbers for the stats document.
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The policies vmlab has, one variant each. (One lives per run, and the engine
/// consults it on TLB misses: its variants stay inline rather than boxed, which would
/// put a pointer chase on that path.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum PolicyKind {
    Fixed(Fixed),
    ThpEager(ThpEager),
    ThpReserve(ThpReserve),
    /// ONLINE, APPROX-ONLINE, THROTTLE and OFFLINE's first pass.
    Online(OnlinePromotion),
    Asap(Asap),
    Asap464(Asap464),
    /// OFFLINE's second pass.
    Offline(Offline),
    Tps(TailoredPageSizes),
}

/// Call `$body` with `$p` bound to the policy inside any variant.
macro_rules! each_policy {
    ($kind:expr, $p:ident => $body:expr) => {
        match $kind {
            PolicyKind::Fixed($p) => $body,
            PolicyKind::ThpEager($p) => $body,
            PolicyKind::ThpReserve($p) => $body,
            PolicyKind::Online($p) => $body,
            PolicyKind::Asap($p) => $body,
            PolicyKind::Asap464($p) => $body,
            PolicyKind::Offline($p) => $body,
            PolicyKind::Tps($p) => $body,
        }
    };
}

/// The configured policy with what every policy shares: khugepaged, the bookkeeping
/// charge per TLB miss, and the background clock.
pub(crate) struct PagePolicy {
    pub(crate) kind: PolicyKind,
    pub(crate) khugepaged: Option<Khugepaged>,
    name: PolicyName,
    bookkeeping_cycles: u64,
    huge: PageSize,
}

impl PagePolicy {
    /// The policy `pc` describes over `pt`, with FIXED's page size `page_size`
    /// (`os.page_size`).
    pub(crate) fn new<P: PageTable>(pc: &PolicyConfig, page_size: Bytes, pt: &P) -> Result<PagePolicy> {
        pc.validate(page_size)?;
        let huge = PageSize::from_bytes(pc.huge_size.0).map_err(|m| Error::config("os.policy.huge_size", m))?;
        let rc = &pc.romer;
        let online = |v| -> Result<PolicyKind> {
            superpages_supported(pt, rc.max(), "os.policy.romer.max_size")?;
            Ok(PolicyKind::Online(OnlinePromotion::new(v, rc, pc.copy_cycles_per_kb)))
        };
        let kind = match pc.kind {
            PolicyName::Fixed => PolicyKind::Fixed(Fixed::new(page_size, pt)?),
            PolicyName::ThpEager => PolicyKind::ThpEager(ThpEager::new(supported(pt, huge)?)),
            PolicyName::ThpReserve => PolicyKind::ThpReserve(ThpReserve::new(supported(pt, huge)?, pc.threshold)),
            PolicyName::Online => online(OnlineVariant::Online)?,
            PolicyName::ApproxOnline => online(OnlineVariant::ApproxOnline)?,
            PolicyName::Throttle => online(OnlineVariant::Throttle)?,
            // The first pass; `set_offline_plan` switches to the second.
            PolicyName::Offline => online(OnlineVariant::OfflineAnalysis)?,
            PolicyName::Tps => {
                let max = pc.tps.max()?;
                superpages_supported(pt, max, "os.policy.tps.max_size")?;
                PolicyKind::Tps(TailoredPageSizes::new(max, pc.threshold, pc.tps.rounding))
            }
            PolicyName::Asap => {
                superpages_supported(pt, rc.max(), "os.policy.romer.max_size")?;
                PolicyKind::Asap(Asap::new(rc))
            }
            PolicyName::Asap464 => {
                let s = PageSize::from_valid_shift(rc.asap_4_64_size.0.trailing_zeros() as u8);
                supported(pt, s).map_err(|e| Error::config("os.policy.romer.asap_4_64_size", e.to_string()))?;
                PolicyKind::Asap464(Asap464::new(rc))
            }
        };
        let khugepaged = if pc.khugepaged.every > 0 { Some(Khugepaged::new(&pc.khugepaged, supported(pt, huge)?)) } else { None };
        let bookkeeping_cycles = pc.bookkeeping_cycles.unwrap_or(pc.kind.default_bookkeeping_cycles());
        Ok(PagePolicy { kind, khugepaged, name: pc.kind, bookkeeping_cycles, huge })
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name.as_str()
    }

    pub(crate) fn huge_size(&self) -> PageSize {
        self.huge
    }

    pub(crate) fn granule(&self) -> PageSize {
        each_policy!(&self.kind, p => p.granule())
    }

    pub(crate) fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        each_policy!(&mut self.kind, p => p.fault(mm, f))
    }

    /// Whether the engine must report last-level TLB misses.
    pub(crate) fn wants_tlb_misses(&self) -> bool {
        self.bookkeeping_cycles > 0 || each_policy!(&self.kind, p => p.wants_tlb_misses())
    }

    /// The sizes of the watched TLBs (data, instruction), once the MMU is built.
    pub(crate) fn watch_entries(&mut self, entries: [usize; 2]) {
        if let PolicyKind::Online(p) = &mut self.kind {
            p.watch_entries(entries);
        }
    }

    pub(crate) fn tlb_changes(&mut self, changes: &[TlbChange]) {
        each_policy!(&mut self.kind, p => p.tlb_changes(changes))
    }

    pub(crate) fn tlb_miss<P: PageTable>(&mut self, mm: &mut Mm<P>, m: &TlbMiss, fill: &[TlbChange]) -> Result<()> {
        if each_policy!(&mut self.kind, p => p.tlb_miss(mm, m, fill))? {
            mm.pc.bookkeeping_cycles += self.bookkeeping_cycles;
        }
        Ok(())
    }

    pub(crate) fn space_gone(&mut self, asid: Asid) {
        each_policy!(&mut self.kind, p => p.space_gone(asid))
    }

    /// OFFLINE: after the first pass, the superpages to build (None for other policies),
    /// by the settings `pc` the policy was built from.
    pub(crate) fn offline_plan(&self, pc: &PolicyConfig) -> Option<OfflinePlan> {
        match &self.kind {
            PolicyKind::Online(p) if self.name == PolicyName::Offline => Some(p.offline_plan(&pc.romer, pc.copy_cycles_per_kb)),
            _ => None,
        }
    }

    /// OFFLINE: run the second pass with `plan`.
    pub(crate) fn set_offline_plan(&mut self, plan: OfflinePlan) {
        self.kind = PolicyKind::Offline(Offline::new(plan));
        self.bookkeeping_cycles = 0;
    }

    /// (every, counts instructions) of the background work, if any.
    pub(crate) fn background_clock(&self) -> Option<(u64, bool)> {
        self.khugepaged.as_ref().map(|k| k.clock())
    }

    pub(crate) fn background<P: PageTable>(&mut self, mm: &mut Mm<P>) -> Result<()> {
        match &mut self.khugepaged {
            Some(k) => k.wake(mm),
            None => Ok(()),
        }
    }

    pub(crate) fn details(&self) -> serde_json::Value {
        let mut d = each_policy!(&self.kind, p => p.details());
        if let Some(k) = &self.khugepaged {
            if !d.is_object() {
                d = serde_json::json!({});
            }
            d["khugepaged"] = k.details();
        }
        d
    }
}

/// Every size from 8K to `max` must be mappable (Romer's policies and TPS build them
/// all); `key` names the setting in the error.
fn superpages_supported<P: PageTable>(pt: &P, max: PageSize, key: &str) -> Result<()> {
    let missing: Vec<String> = (13..=max.shift()).map(PageSize::from_valid_shift).filter(|s| !pt.page_sizes().contains(s)).map(|s| s.to_string()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::config(
        key,
        format!(
            "superpages up to {max} need every power of two from 8K, but a {} page table cannot map {} (use page_table.radix.tailored = true)",
            pt.kind(),
            missing.join(", ")
        ),
    ))
}

/// `size` if the page table maps it, else a config error naming `os.policy.huge_size`.
fn supported<P: PageTable>(pt: &P, size: PageSize) -> Result<PageSize> {
    if pt.page_sizes().contains(&size) {
        return Ok(size);
    }
    Err(Error::config(
        "os.policy.huge_size",
        format!(
            "a {} page table cannot map {} pages (it maps {})",
            pt.kind(),
            size,
            pt.page_sizes().iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        ),
    ))
}

/// Map the base page of the fault from a fresh frame (breaking reservations if memory
/// is short); the fallback of every policy.
pub(crate) fn map_base_page<P: PageTable>(mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
    let base = PageSize::K4.align_down(f.va);
    let pa = mm.alloc_base_frame(base).ok_or_else(|| mm.oom(f.pid, f.va))?;
    mm.map_page(f.pid, f.asid, base, pa, PageSize::K4, f.perms, None).inspect_err(|_| mm.free_data(pa, PageSize::K4))
}

/// Map a page of `size` at `base` from a fresh block (no reservation breaking); None if
/// no free block of that size exists.
pub(crate) fn map_fresh<P: PageTable>(mm: &mut Mm<P>, f: &DemandFault, base: u64, size: PageSize) -> Result<Option<Translation>> {
    let Some(pa) = mm.mem.try_alloc(size, FrameUse::Data) else { return Ok(None) };
    mm.map_page(f.pid, f.asid, base, pa, size, f.perms, None).inspect_err(|_| mm.free_data(pa, size)).map(Some)
}
