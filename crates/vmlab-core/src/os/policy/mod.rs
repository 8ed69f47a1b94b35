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
//! - `tlb_miss`: every last-level TLB miss (one per walk), with the page that missed
//!   and the entry the fill evicted from the last level, after the fill (Romer §3.5.2's
//!   `tlbcount` needs both). Only called if `wants_tlb_misses()`;
//! - `background`: periodic work (`os.policy.khugepaged.every` accesses or
//!   instructions), shared by every policy through [`Khugepaged`].
//!
//! Dispatch is by `match` on [`PolicyKind`] (no dynamic dispatch per access); a new
//! policy is a new file, a new variant, and one arm per hook below.

pub mod fixed;
pub mod khugepaged;
pub mod thp_eager;
pub mod thp_reserve;

pub use fixed::Fixed;
pub use khugepaged::{Khugepaged, KhugepagedConfig};
pub use thp_eager::ThpEager;
pub use thp_reserve::ThpReserve;

use super::buddy::FrameUse;
use super::{DemandFault, Mm};
use crate::addr::{Asid, PageSize, Pid};
use crate::config::{Bytes, Config};
use crate::error::{Error, Result};
use crate::mmu::EvictedEntry;
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
}

impl PolicyName {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Fixed => "fixed",
            PolicyName::ThpEager => "thp-eager",
            PolicyName::ThpReserve => "thp-reserve",
        }
    }
}

/// `[os.policy]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    #[serde(default)]
    pub kind: PolicyName,
    /// The huge page size of the THP policies (and of khugepaged).
    #[serde(default = "m2")]
    pub huge_size: Bytes,
    /// thp-reserve: promote when this fraction of the huge page's base pages is populated.
    #[serde(default = "one")]
    pub threshold: f64,
    /// Cycles charged per last-level TLB miss for the policy's bookkeeping (Romer §3.5.4).
    #[serde(default)]
    pub bookkeeping_cycles: u64,
    /// Cycles charged per KiB a promotion copies (Romer §3.5.1: 3000).
    #[serde(default = "c3000")]
    pub copy_cycles_per_kb: u64,
    #[serde(default)]
    pub khugepaged: KhugepagedConfig,
}

fn m2() -> Bytes {
    Bytes(2 << 20)
}
fn one() -> f64 {
    1.0
}
fn c3000() -> u64 {
    3000
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            kind: PolicyName::Fixed,
            huge_size: m2(),
            threshold: 1.0,
            bookkeeping_cycles: 0,
            copy_cycles_per_kb: 3000,
            khugepaged: KhugepagedConfig::default(),
        }
    }
}

impl PolicyConfig {
    /// Left out of the resolved config when default, so documents and config hashes of
    /// runs that do not use it are unchanged.
    pub fn is_default(&self) -> bool {
        *self == PolicyConfig::default()
    }

    /// Checks that need no page table (config validation).
    pub fn validate(&self, cfg: &Config) -> Result<()> {
        let huge = PageSize::from_bytes(self.huge_size.0).map_err(|m| Error::config("os.policy.huge_size", m))?;
        if huge == PageSize::K4 {
            return Err(Error::config("os.policy.huge_size", "must be larger than 4K"));
        }
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err(Error::config("os.policy.threshold", format!("{} is not in (0, 1]", self.threshold)));
        }
        if self.kind != PolicyName::Fixed && cfg.os.page_size.0 != 4096 {
            return Err(Error::config(
                "os.page_size",
                format!("must be 4K with os.policy.kind = \"{}\" (its base page size)", self.kind.as_str()),
            ));
        }
        self.khugepaged.validate(huge)
    }
}

/// Counters of the `policy` section (docs/metrics.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyCounters {
    /// Pages installed over the run, by size (faults, promotions, demotions).
    pub mapped_total: BTreeMap<PageSize, u64>,
    pub promotions: u64,
    pub promotions_in_place: u64,
    pub promotions_copied: u64,
    pub demotions: u64,
    pub bytes_copied: u64,
    pub copy_cycles: u64,
    pub bookkeeping_cycles: u64,
    pub reservations_made: u64,
    pub reservations_promoted: u64,
    pub reservations_broken: u64,
    pub reservations_released: u64,
    pub bloat_peak_frames: u64,
}

/// A last-level TLB miss, as the engine reports it to the policy.
#[derive(Clone, Copy, Debug)]
pub struct TlbMiss {
    pub pid: Pid,
    pub asid: Asid,
    /// The address that missed.
    pub va: u64,
    /// The translation the walk (or fault) produced and the TLBs were filled with.
    pub translation: Translation,
    /// The entry that fill evicted from the last TLB level, if it evicted one.
    pub evicted: Option<EvictedEntry>,
}

/// The interface of a page-size policy. Generic over the page table (monomorphised per
/// run, like the engine).
pub trait PageSizePolicy {
    /// The largest page the policy maps at a fault: implicit VMAs are this aligned size.
    fn granule(&self) -> PageSize;
    /// Resolve a demand fault on private memory; returns the translation now mapped.
    fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation>;
    /// Whether `tlb_miss` must be called (policies that watch the miss stream).
    fn wants_tlb_misses(&self) -> bool {
        false
    }
    /// A last-level TLB miss; may promote or demote (shootdowns go through `mm`).
    fn tlb_miss<P: PageTable>(&mut self, _mm: &mut Mm<P>, _m: &TlbMiss) -> Result<()> {
        Ok(())
    }
    /// Policy-specific numbers for the stats document.
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The policies vmlab has, one variant each.
pub enum PolicyKind {
    Fixed(Fixed),
    ThpEager(ThpEager),
    ThpReserve(ThpReserve),
}

/// The configured policy with what every policy shares: khugepaged, the bookkeeping
/// charge per TLB miss, and the background clock.
pub struct PagePolicy {
    pub kind: PolicyKind,
    pub khugepaged: Option<Khugepaged>,
    bookkeeping_cycles: u64,
    huge: PageSize,
}

impl PagePolicy {
    pub fn new<P: PageTable>(cfg: &Config, pt: &P) -> Result<PagePolicy> {
        let pc = &cfg.os.policy;
        pc.validate(cfg)?;
        let huge = PageSize::from_bytes(pc.huge_size.0).map_err(|m| Error::config("os.policy.huge_size", m))?;
        let kind = match pc.kind {
            PolicyName::Fixed => PolicyKind::Fixed(Fixed::new(cfg, pt)?),
            PolicyName::ThpEager => PolicyKind::ThpEager(ThpEager::new(supported(pt, huge)?)),
            PolicyName::ThpReserve => PolicyKind::ThpReserve(ThpReserve::new(supported(pt, huge)?, pc.threshold)),
        };
        let khugepaged = if pc.khugepaged.every > 0 { Some(Khugepaged::new(&pc.khugepaged, supported(pt, huge)?)) } else { None };
        Ok(PagePolicy { kind, khugepaged, bookkeeping_cycles: pc.bookkeeping_cycles, huge })
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            PolicyKind::Fixed(_) => "fixed",
            PolicyKind::ThpEager(_) => "thp-eager",
            PolicyKind::ThpReserve(_) => "thp-reserve",
        }
    }

    pub fn huge_size(&self) -> PageSize {
        self.huge
    }

    pub fn granule(&self) -> PageSize {
        match &self.kind {
            PolicyKind::Fixed(p) => p.granule(),
            PolicyKind::ThpEager(p) => p.granule(),
            PolicyKind::ThpReserve(p) => p.granule(),
        }
    }

    pub fn fault<P: PageTable>(&mut self, mm: &mut Mm<P>, f: &DemandFault) -> Result<Translation> {
        match &mut self.kind {
            PolicyKind::Fixed(p) => p.fault(mm, f),
            PolicyKind::ThpEager(p) => p.fault(mm, f),
            PolicyKind::ThpReserve(p) => p.fault(mm, f),
        }
    }

    /// Whether the engine must report last-level TLB misses.
    pub fn wants_tlb_misses(&self) -> bool {
        self.bookkeeping_cycles > 0
            || match &self.kind {
                PolicyKind::Fixed(p) => p.wants_tlb_misses(),
                PolicyKind::ThpEager(p) => p.wants_tlb_misses(),
                PolicyKind::ThpReserve(p) => p.wants_tlb_misses(),
            }
    }

    pub fn tlb_miss<P: PageTable>(&mut self, mm: &mut Mm<P>, m: &TlbMiss) -> Result<()> {
        mm.pc.bookkeeping_cycles += self.bookkeeping_cycles;
        match &mut self.kind {
            PolicyKind::Fixed(p) => p.tlb_miss(mm, m),
            PolicyKind::ThpEager(p) => p.tlb_miss(mm, m),
            PolicyKind::ThpReserve(p) => p.tlb_miss(mm, m),
        }
    }

    /// (every, counts instructions) of the background work, if any.
    pub fn background_clock(&self) -> Option<(u64, bool)> {
        self.khugepaged.as_ref().map(|k| k.clock())
    }

    pub fn background<P: PageTable>(&mut self, mm: &mut Mm<P>) -> Result<()> {
        match &mut self.khugepaged {
            Some(k) => k.wake(mm),
            None => Ok(()),
        }
    }

    pub fn details(&self) -> serde_json::Value {
        let mut d = match &self.kind {
            PolicyKind::Fixed(p) => p.details(),
            PolicyKind::ThpEager(p) => p.details(),
            PolicyKind::ThpReserve(p) => p.details(),
        };
        if let Some(k) = &self.khugepaged {
            if !d.is_object() {
                d = serde_json::json!({});
            }
            d["khugepaged"] = k.details();
        }
        d
    }
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
    let pa = mm.alloc_frames(PageSize::K4, FrameUse::Data).ok_or_else(|| mm.oom(f.pid, f.va))?;
    mm.map_page(f.pid, f.asid, base, pa, PageSize::K4, f.perms, None).inspect_err(|_| mm.free_data(pa, PageSize::K4))
}

/// Map a page of `size` at `base` from a fresh block (no reservation breaking); None if
/// no free block of that size exists.
pub(crate) fn map_fresh<P: PageTable>(mm: &mut Mm<P>, f: &DemandFault, base: u64, size: PageSize) -> Result<Option<Translation>> {
    let Some(pa) = mm.mem.try_alloc(size, FrameUse::Data) else { return Ok(None) };
    mm.map_page(f.pid, f.asid, base, pa, size, f.perms, None).inspect_err(|_| mm.free_data(pa, size)).map(Some)
}
