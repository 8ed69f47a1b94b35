//! A khugepaged-like background collapser (Linux mm/khugepaged.c), usable with every
//! policy. Every `every` accesses (or instructions) it wakes and scans the next
//! `pages_to_scan / pages-per-huge-page` aligned huge regions that lie inside private
//! VMAs, process by process (ascending pid) and address by address, resuming where the
//! last wake-up stopped and wrapping around. A region made of base pages only, with at
//! least `pages − max_ptes_none` of them populated, is collapsed by copying into a
//! freshly allocated huge block (`Mm::promote_by_copy`: the whole huge page is charged as
//! copied, at `os.policy.copy_cycles_per_kb`). Regions holding a reservation are left
//! to it. Without a free huge block the collapse fails (compaction is not modelled).

use crate::addr::{PageSize, Pid};
use crate::error::{Error, Result};
use crate::os::Mm;
use crate::pt::PageTable;
use serde::{Deserialize, Serialize};

/// What `os.policy.khugepaged.every` counts.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClockUnit {
    #[default]
    Accesses,
    Instructions,
}

/// `[os.policy.khugepaged]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct KhugepagedConfig {
    /// Wake up every this many accesses or instructions; 0 = off.
    pub every: u64,
    pub unit: ClockUnit,
    /// Base pages scanned per wake-up (Linux's default: 4096, i.e. 8 regions of 2M).
    pub pages_to_scan: u64,
    /// Unpopulated base pages a collapsed region may have (default: pages − 1, Linux's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ptes_none: Option<u64>,
}

impl Default for KhugepagedConfig {
    fn default() -> Self {
        KhugepagedConfig { every: 0, unit: ClockUnit::Accesses, pages_to_scan: 4096, max_ptes_none: None }
    }
}

impl KhugepagedConfig {
    pub(crate) fn validate(&self, huge: PageSize) -> Result<()> {
        if self.pages_to_scan == 0 {
            return Err(Error::config("os.policy.khugepaged.pages_to_scan", "must be at least 1"));
        }
        if let Some(n) = self.max_ptes_none {
            if n >= huge.base_pages() {
                return Err(Error::config(
                    "os.policy.khugepaged.max_ptes_none",
                    format!("must be below the {} base pages of a {huge} page", huge.base_pages()),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct KhugepagedCounters {
    pub(crate) wakeups: u64,
    pub(crate) regions_scanned: u64,
    pub(crate) collapses: u64,
    /// Collapses that found no free huge block.
    pub(crate) alloc_failures: u64,
    /// Completed passes over every process.
    pub(crate) full_scans: u64,
}

pub struct Khugepaged {
    huge: PageSize,
    every: u64,
    by_instr: bool,
    regions_per_wake: u64,
    min_populated: u64,
    /// Where the next scan resumes: (pid, address).
    cursor: (Pid, u64),
    pub(crate) counters: KhugepagedCounters,
}

impl Khugepaged {
    pub(crate) fn new(c: &KhugepagedConfig, huge: PageSize) -> Khugepaged {
        let pages = huge.base_pages();
        Khugepaged {
            huge,
            every: c.every,
            by_instr: c.unit == ClockUnit::Instructions,
            regions_per_wake: (c.pages_to_scan / pages).max(1),
            min_populated: pages - c.max_ptes_none.unwrap_or(pages - 1),
            cursor: (0, 0),
            counters: KhugepagedCounters::default(),
        }
    }

    /// (period, counts instructions).
    pub(crate) fn clock(&self) -> (u64, bool) {
        (self.every, self.by_instr)
    }

    /// The first aligned huge region at or after the cursor inside a private VMA.
    fn next_region<P: PageTable>(&self, mm: &Mm<P>) -> Option<(Pid, u64)> {
        let (cpid, cva) = self.cursor;
        for pid in mm.pids().into_iter().filter(|&p| p >= cpid) {
            let from = if pid == cpid { cva } else { 0 };
            let space = mm.space(pid)?;
            for v in space.vmas.iter().filter(|v| v.end > from && v.object.is_none()) {
                let start = v.start.max(from);
                let base = self.huge.align_down(start.saturating_add(self.huge.bytes() - 1));
                if base >= start && base.checked_add(self.huge.bytes()).is_some_and(|e| e <= v.end) {
                    return Some((pid, base));
                }
            }
        }
        None
    }

    pub(crate) fn wake<P: PageTable>(&mut self, mm: &mut Mm<P>) -> Result<()> {
        self.counters.wakeups += 1;
        let mut budget = self.regions_per_wake;
        let mut wrapped = false;
        while budget > 0 {
            let Some((pid, base)) = self.next_region(mm) else {
                if wrapped || self.cursor == (0, 0) {
                    return Ok(());
                }
                self.cursor = (0, 0);
                self.counters.full_scans += 1;
                wrapped = true;
                continue;
            };
            self.cursor = (pid, base + self.huge.bytes());
            budget -= 1;
            self.counters.regions_scanned += 1;
            let pages = mm.pages_in(pid, base, base + self.huge.bytes());
            let populated = pages.len() as u64;
            if populated == 0 || populated < self.min_populated || pages.iter().any(|(_, m)| m.size != PageSize::K4) {
                continue;
            }
            if !mm.mem.has_free(self.huge) {
                self.counters.alloc_failures += 1;
                continue;
            }
            if mm.promote_by_copy(pid, base, self.huge)? {
                self.counters.collapses += 1;
            }
        }
        Ok(())
    }

    pub(crate) fn details(&self) -> serde_json::Value {
        serde_json::to_value(&self.counters).unwrap_or_default()
    }
}
