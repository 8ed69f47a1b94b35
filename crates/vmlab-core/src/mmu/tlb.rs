//! One TLB structure: set-associative (or fully associative), holding one or several
//! page sizes. A lookup probes each held size with its own set index (VPN mod sets), as
//! a hardware structure holding several sizes does.

use super::assoc::{AssocCache, Evicted};
use crate::addr::{Asid, PageSize, Perms};
use crate::config::{Serves, TlbConfig};
use crate::error::{Error, Result};
use crate::pt::Translation;
use serde::Serialize;

/// What a TLB entry holds besides its tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbPayload {
    pub pa: u64,
    pub shift: u8,
    pub perms: u8,
}

impl TlbPayload {
    #[inline(always)]
    pub fn translation(&self) -> Translation {
        Translation {
            pa: self.pa,
            size: PageSize::from_valid_shift(self.shift),
            perms: Perms::from_bits(self.perms),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct TlbCounters {
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
    pub fills: u64,
    pub evictions: u64,
    /// Entries removed by unmap/protect shootdowns and flushes.
    pub invalidations: u64,
}

pub struct Tlb {
    pub name: String,
    pub level: u8,
    pub serves: Serves,
    pub latency: u32,
    sizes: Vec<PageSize>,
    store: AssocCache<TlbPayload>,
    pub counters: TlbCounters,
}

/// Tag of a page of `size` containing `va`: the VPN, with the size folded in so pages of
/// different sizes never alias within one structure.
#[inline(always)]
fn key(vpn: u64, shift: u8) -> u64 {
    (vpn << 6) | shift as u64
}

impl Tlb {
    pub fn new(name: &str, c: &TlbConfig, seed: u64) -> Result<Tlb> {
        let key_path = format!("tlb.{name}");
        let mut sizes = Vec::new();
        for b in &c.page_sizes {
            let s = PageSize::from_bytes(b.0).map_err(|m| Error::config(format!("{key_path}.page_sizes"), m))?;
            if !sizes.contains(&s) {
                sizes.push(s);
            }
        }
        sizes.sort();
        Ok(Tlb {
            name: name.to_string(),
            level: c.level,
            serves: c.serves,
            latency: c.latency,
            sizes,
            store: AssocCache::new(c.entries, c.ways, c.replacement, seed, &key_path)?,
            counters: TlbCounters::default(),
        })
    }

    pub fn holds(&self, size: PageSize) -> bool {
        self.sizes.contains(&size)
    }

    pub fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    /// Probe every held page size; counts one lookup and one hit or miss.
    /// `filled` has bit s set if a page of size 2^s was ever filled into any TLB: other
    /// sizes cannot be present, so their probe is skipped (same outcome, less work).
    #[inline]
    pub fn lookup(&mut self, va: u64, asid: Asid, filled: u64) -> Option<TlbPayload> {
        self.counters.lookups += 1;
        for i in 0..self.sizes.len() {
            let shift = self.sizes[i].shift();
            if filled & (1u64 << shift) == 0 {
                continue;
            }
            let vpn = va >> shift;
            let set = self.store.set_of(vpn);
            if let Some(p) = self.store.lookup(set, key(vpn, shift), asid) {
                self.counters.hits += 1;
                return Some(p);
            }
        }
        self.counters.misses += 1;
        None
    }

    /// Install the translation of `va`, which this structure just missed (so no entry
    /// for it exists); the caller checks `holds(t.size)`.
    #[inline]
    pub fn fill(&mut self, va: u64, asid: Asid, t: &Translation) -> Option<Evicted<TlbPayload>> {
        let shift = t.size.shift();
        let vpn = va >> shift;
        let set = self.store.set_of(vpn);
        self.counters.fills += 1;
        debug_assert!(self.store.peek(set, key(vpn, shift), asid).is_none(), "fill of a present entry");
        let ev = self.store.fill_absent(
            set,
            key(vpn, shift),
            asid,
            TlbPayload { pa: t.pa, shift, perms: t.perms.bits() },
        );
        if ev.is_some() {
            self.counters.evictions += 1;
        }
        ev
    }

    /// Drop any entry translating `va` for `asid` (all held sizes).
    pub fn invalidate(&mut self, va: u64, asid: Asid) {
        for i in 0..self.sizes.len() {
            let shift = self.sizes[i].shift();
            let vpn = va >> shift;
            let set = self.store.set_of(vpn);
            if self.store.invalidate(set, key(vpn, shift), asid) {
                self.counters.invalidations += 1;
            }
        }
    }

    /// Drop every entry of `asid` overlapping [start, end).
    pub fn invalidate_range(&mut self, start: u64, end: u64, asid: Asid) {
        let n = self.store.invalidate_where(|k, a, _| {
            let shift = (k & 63) as u32;
            let base = (k >> 6) << shift;
            a == asid && base < end && base.wrapping_add(1u64 << shift) > start
        });
        self.counters.invalidations += n;
    }

    pub fn flush_all(&mut self) {
        self.counters.invalidations += self.store.occupancy() as u64;
        self.store.flush_all();
    }

    pub fn flush_asid(&mut self, asid: Asid) {
        self.counters.invalidations += self.store.flush_asid(asid);
    }

    pub fn entries(&self) -> usize {
        self.store.entries()
    }
    pub fn ways(&self) -> usize {
        self.store.ways()
    }
}
