//! Itanium region IDs and TLB sharing (Chapman et al., §2.2, §3.2, §3.3).
//!
//! Itanium tags TLB entries with the region ID (RID) of the address's region instead of
//! an ASID. Linux gives each process its own RIDs, so private translations are tagged
//! per process (in vmlab: by its ASID). With sharing, each shared object gets a region
//! of its own with a *global* RID: every process that maps the object hits the same TLB
//! entries, and access is checked by the entry's protection key (PK), which the process
//! must hold in one of the CPU's protection key registers (PKRs). A key not in the PKRs
//! raises a key-miss fault; the OS loads the key (LRU replacement) and returns.
//!
//! Region-based sharing of program text (§3.2) needs no keys: Linux/ia64 gives the text
//! region (VRN 2) a RID per program instead of per process, so every process running
//! the executable hits the same TLB entries for its text. In vmlab a program's text is
//! a shared object too (`mmu.regions.share_text`): every private, file-backed, execute
//! and not writable mapping, inherited through fork (vmlab's traces have no exec, so a
//! program is a process and the children forked from it), with one RID and no key.
//!
//! vmlab keeps the trace's virtual addresses, so it cannot move a shared object into a
//! separate eighth of the address space as the hardware's region registers require;
//! the region of an address is looked up in the current process's shared mappings
//! instead (a range check, done on the TLB slow path only). Shared objects are mapped
//! at the same address in every sharer (they are inherited through fork), as Itanium
//! sharing requires.

use crate::addr::Asid;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Global RIDs are `GLOBAL_RID_BASE + object`; process ASIDs stay below it.
pub(crate) const GLOBAL_RID_BASE: Asid = 0x8000;

/// `[mmu.regions]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RegionConfig {
    /// Give each shared object a region with a global RID, its TLB entries a protection
    /// key (the paper's TLB sharing). Off: every translation is tagged per process.
    pub share: bool,
    /// Give each program's text a region with one RID for all the processes running it
    /// (§3.2): their TLB entries for text are shared, with no key check.
    pub share_text: bool,
    /// Protection key registers per CPU (Itanium has at least 16).
    pub pkrs: usize,
    /// Cycles of a key-miss fault: the OS handler that loads a key into a PKR.
    pub key_miss_cycles: u64,
    /// What a context switch does to the PKRs, which are process context (§2.2.2):
    /// `reload` the new process's keys (as many as fit; part of the switch, not
    /// charged here) or `flush` them (each key then costs a key-miss fault).
    pub pkr_switch: PkrSwitch,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PkrSwitch {
    #[default]
    Reload,
    Flush,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig { share: false, share_text: false, pkrs: 16, key_miss_cycles: 100, pkr_switch: PkrSwitch::Reload }
    }
}

impl RegionConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == RegionConfig::default()
    }

    pub(crate) fn validate(&self, asid_tags: bool, page_table: crate::config::PageTableKind) -> Result<()> {
        if self.share && !asid_tags {
            return Err(Error::config("mmu.regions.share", "needs tagged TLB entries (mmu.asid_tags = true)"));
        }
        if self.share_text && !asid_tags {
            return Err(Error::config("mmu.regions.share_text", "needs tagged TLB entries (mmu.asid_tags = true)"));
        }
        if self.share && page_table == crate::config::PageTableKind::Linear {
            // §2.2.3: short-VHPT entries take their key from the region register, so
            // selected pages of a region cannot be shared; sharing needs the long format.
            return Err(Error::config(
                "mmu.regions.share",
                "the short VHPT (page_table.kind = \"linear\") has no per-page protection keys; use a long-format VHPT",
            ));
        }
        if self.pkrs == 0 {
            return Err(Error::config("mmu.regions.pkrs", "must be at least 1"));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct RegionCounters {
    /// TLB slow-path translations of addresses in a shared object (global RID, key
    /// checked).
    pub(crate) shared_translations: u64,
    /// TLB slow-path translations of addresses in a program's shared text (its RID, no
    /// key).
    pub(crate) text_translations: u64,
    /// Protection-key checks (one per shared translation).
    pub(crate) key_checks: u64,
    /// Checks whose key was not in the PKRs: key-miss faults.
    pub(crate) key_misses: u64,
    pub(crate) key_miss_cycles: u64,
}

/// The current process's region map and the CPU's protection key registers.
pub struct RegionIds {
    /// The current process's shared mappings: [start, end), the object's global RID,
    /// and whether its translations carry a protection key (not program text).
    shared: Vec<(u64, u64, Asid, bool)>,
    /// Which objects get a region: shared mappings (`share`), program text
    /// (`share_text`).
    share: bool,
    share_text: bool,
    /// Keys held, most recently used first.
    pkrs: Vec<Asid>,
    capacity: usize,
    key_miss_cycles: u64,
    reload: bool,
    pub(crate) counters: RegionCounters,
}

impl RegionIds {
    pub(crate) fn new(cfg: &RegionConfig) -> RegionIds {
        RegionIds {
            shared: Vec::new(),
            share: cfg.share,
            share_text: cfg.share_text,
            pkrs: Vec::with_capacity(cfg.pkrs),
            capacity: cfg.pkrs,
            key_miss_cycles: cfg.key_miss_cycles,
            reload: cfg.pkr_switch == PkrSwitch::Reload,
            counters: RegionCounters::default(),
        }
    }

    /// The global RID of a shared object.
    pub(crate) fn global_rid(object: u32) -> Result<Asid> {
        // Asid::MAX is reserved (ANY_ASID, global entries).
        Asid::try_from(object)
            .ok()
            .and_then(|o| GLOBAL_RID_BASE.checked_add(o))
            .filter(|&r| r < Asid::MAX)
            .ok_or_else(|| Error::Sim(format!("region IDs: more than {} shared objects", Asid::MAX - GLOBAL_RID_BASE)))
    }

    /// Switch to a process with these shared mappings (start, end, object, whether the
    /// object is program text). The PKRs are reloaded with its keys (as many as fit) or
    /// flushed, per `pkr_switch`.
    pub(crate) fn set_process(&mut self, shared: impl Iterator<Item = (u64, u64, u32, bool)>) -> Result<()> {
        self.set_mappings(shared)?;
        self.pkrs.clear();
        if self.reload {
            for &(_, _, rid, keyed) in &self.shared {
                if keyed && self.pkrs.len() < self.capacity && !self.pkrs.contains(&rid) {
                    self.pkrs.push(rid);
                }
            }
        }
        Ok(())
    }

    /// The mappings changed (mmap, munmap, fork): keep the keys, refresh the map. Only
    /// the objects this configuration shares get a region.
    pub(crate) fn set_mappings(&mut self, shared: impl Iterator<Item = (u64, u64, u32, bool)>) -> Result<()> {
        self.shared.clear();
        for (s, e, o, text) in shared {
            if (text && self.share_text) || (!text && self.share) {
                self.shared.push((s, e, Self::global_rid(o)?, !text));
            }
        }
        Ok(())
    }

    /// The TLB tag of `va` for the process with `asid`, and whether the translation's
    /// protection key must be checked: a shared object's global RID (keyed), a
    /// program's text RID (not keyed), else the process's own (not keyed).
    #[inline]
    pub(crate) fn tag(&self, va: u64, asid: Asid) -> (Asid, bool) {
        self.shared.iter().find(|&&(s, e, _, _)| va >= s && va < e).map_or((asid, false), |&(_, _, rid, keyed)| (rid, keyed))
    }

    /// A translation of program text tagged with its program's RID (no key to check).
    #[inline]
    pub(crate) fn note_text(&mut self) {
        self.counters.text_translations += 1;
    }

    /// Check the protection key of a shared translation; returns the stall cycles (a
    /// key-miss fault loads the key, evicting the least recently used one).
    pub(crate) fn check_key(&mut self, key: Asid) -> u64 {
        self.counters.shared_translations += 1;
        self.counters.key_checks += 1;
        if let Some(i) = self.pkrs.iter().position(|&k| k == key) {
            self.pkrs[..=i].rotate_right(1);
            return 0;
        }
        self.counters.key_misses += 1;
        self.counters.key_miss_cycles += self.key_miss_cycles;
        if self.pkrs.len() == self.capacity {
            self.pkrs.pop();
        }
        self.pkrs.insert(0, key);
        self.key_miss_cycles
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_ranges_get_global_rids_and_keys_miss_once_per_switch() {
        let cfg = RegionConfig { share: true, share_text: false, pkrs: 2, key_miss_cycles: 7, pkr_switch: PkrSwitch::Flush };
        let mut r = RegionIds::new(&cfg);
        r.set_process([(0x1000, 0x3000, 0, false), (0x8000, 0x9000, 5, false), (0x20000, 0x30000, 6, true)].into_iter()).unwrap();
        assert_eq!(r.tag(0x1fff, 3), (GLOBAL_RID_BASE, true));
        assert_eq!(r.tag(0x3000, 3), (3, false));
        assert_eq!(r.tag(0x8000, 3), (GLOBAL_RID_BASE + 5, true));
        assert_eq!(r.tag(0x20000, 3), (3, false), "text is not shared unless share_text");
        // Keys a, b, a, c (evicts b), b (miss again).
        let a = GLOBAL_RID_BASE;
        let b = GLOBAL_RID_BASE + 5;
        let c = GLOBAL_RID_BASE + 9;
        let cycles: Vec<u64> = [a, b, a, c, b, a].iter().map(|&k| r.check_key(k)).collect();
        assert_eq!(cycles, [7, 7, 0, 7, 7, 7]);
        assert_eq!((r.counters.key_checks, r.counters.key_misses), (6, 5));
        // A context switch flushes the keys ...
        r.set_process([(0x1000, 0x3000, 0, false)].into_iter()).unwrap();
        assert_eq!(r.check_key(a), 7);
        // ... or reloads the new process's keys, as many as fit (text has none).
        let mut r = RegionIds::new(&RegionConfig { pkr_switch: PkrSwitch::Reload, share_text: true, ..cfg });
        let maps = [(0x1000, 0x2000, 0, false), (0x2000, 0x3000, 7, true), (0x3000, 0x4000, 1, false), (0x4000, 0x5000, 2, false)];
        r.set_process(maps.into_iter()).unwrap();
        let got: Vec<u64> = [0, 1, 2].iter().map(|&o| r.check_key(GLOBAL_RID_BASE + o)).collect();
        assert_eq!(got, [0, 0, 7]);
        assert!(RegionIds::global_rid(0x7fff).is_err() && RegionIds::global_rid(0x7ffe).is_ok());
    }

    /// Program text alone (§3.2): text gets its object's RID with no key; other shared
    /// objects stay tagged by the process.
    #[test]
    fn text_regions_share_a_rid_without_keys() {
        let cfg = RegionConfig { share_text: true, ..RegionConfig::default() };
        let mut r = RegionIds::new(&cfg);
        r.set_process([(0x1000, 0x3000, 0, false), (0x40_0000, 0x50_0000, 4, true)].into_iter()).unwrap();
        assert_eq!(r.tag(0x1000, 3), (3, false));
        assert_eq!(r.tag(0x40_1234, 3), (GLOBAL_RID_BASE + 4, false));
        assert_eq!(r.tag(0x40_1234, 9), (GLOBAL_RID_BASE + 4, false), "every process of the program");
        assert_eq!(r.tag(0x50_0000, 3), (3, false));
    }
}
