//! TLB entries that each map an even/odd pair of pages, as the MIPS R4x00's do
//! (Elphinstone §6.1; docs/reproductions/elphinstone.md, "Page-pair
//! entries"). An entry has one tag, VPN2
//! (the page number without its lowest bit), and two halves (EntryLo0 for the even page,
//! EntryLo1 for the odd one), each with its own frame and valid bit; the page-number bit
//! below VPN2 picks the half.
//!
//! A lookup that matches the tag but finds its half invalid is a miss: the R4x00 raises
//! a TLB-invalid exception, which L4/MIPS handles on its refill path, and the refill
//! rewrites the matching entry rather than a replacement victim. A refill writes the
//! missed half; it writes the other half too when the page table holds PTE pairs (its
//! walk reads both PTEs of the pair), and otherwise leaves that half as it was (invalid
//! in a new entry).

use super::assoc::AssocCache;
use super::assoc::Replacement;
use super::tlb::{key, TlbPayload};
use crate::addr::{Asid, PageSize};
use crate::error::Result;
use crate::pt::Translation;

/// The two halves of an entry: [even page, odd page]; `TlbPayload::INVALID` if invalid.
type Halves = [TlbPayload; 2];

pub(crate) struct PairEntries {
    store: AssocCache<Halves>,
    /// The one page size the structure holds.
    shift: u8,
}

impl PairEntries {
    pub(crate) fn new(entries: usize, ways: usize, repl: Replacement, seed: u64, key_path: &str, size: PageSize) -> Result<PairEntries> {
        Ok(PairEntries { store: AssocCache::new(entries, ways, repl, seed, key_path)?, shift: size.shift() })
    }

    /// The set, tag and half (0 even, 1 odd) of the pair holding `va`.
    #[inline(always)]
    fn locate(&self, va: u64) -> (usize, u64, usize) {
        let vpn = va >> self.shift;
        let vpn2 = vpn >> 1;
        (self.store.set_of(vpn2), key(vpn2, self.shift), (vpn & 1) as usize)
    }

    /// Look `va` up: the half that translates it, `Some(INVALID)` if the tag matched
    /// but the half is invalid (a miss), `None` if no tag matched. A matching entry
    /// becomes most recently used either way (a refill then rewrites it).
    #[inline]
    pub(crate) fn probe(&mut self, va: u64, asid: Asid) -> Option<TlbPayload> {
        let (set, k, half) = self.locate(va);
        self.store.lookup(set, k, asid).map(|e| e[half])
    }

    /// Refill the half translating `va` with `t`, and the other half with `buddy` if
    /// given (else it keeps what it holds). Returns whether a valid entry was pushed out.
    pub(crate) fn fill(&mut self, va: u64, asid: Asid, t: &Translation, buddy: Option<&Translation>) -> bool {
        debug_assert_eq!(t.size.shift(), self.shift, "a pair structure holds one page size");
        let (set, k, half) = self.locate(va);
        let mut e = self.store.peek(set, k, asid).unwrap_or([TlbPayload::INVALID; 2]);
        e[half] = TlbPayload::new(t);
        if let Some(b) = buddy {
            debug_assert_eq!(b.size, t.size);
            e[half ^ 1] = TlbPayload::new(b);
        }
        self.store.insert(set, k, asid, e).is_some()
    }

    /// Invalidate the half translating `va` (the entry goes once both halves are
    /// invalid). Returns the halves invalidated (0 or 1).
    pub(crate) fn invalidate(&mut self, va: u64, asid: Asid) -> u64 {
        let (set, k, half) = self.locate(va);
        match self.store.peek(set, k, asid) {
            Some(e) if e[half].is_valid() => {
                if e[half ^ 1].is_valid() {
                    self.store.update(set, k, asid, |e| e[half] = TlbPayload::INVALID);
                } else {
                    self.store.invalidate(set, k, asid);
                }
                1
            }
            _ => 0,
        }
    }

    /// Invalidate every half for which `hit(asid, page base)` holds; returns how many.
    fn invalidate_halves(&mut self, hit: impl Fn(Asid, u64) -> bool) -> u64 {
        let shift = self.shift;
        let mut n = 0;
        self.store.update_where(|k, a, e| {
            let base = (k >> 6) << (shift + 1);
            for (h, p) in e.iter_mut().enumerate() {
                if p.is_valid() && hit(a, base + ((h as u64) << shift)) {
                    *p = TlbPayload::INVALID;
                    n += 1;
                }
            }
            !e[0].is_valid() && !e[1].is_valid()
        });
        n
    }

    /// Invalidate the halves of `asid` whose pages overlap [start, end).
    pub(crate) fn invalidate_range(&mut self, start: u64, end: u64, asid: Asid) -> u64 {
        let bytes = 1u64 << self.shift;
        self.invalidate_halves(|a, base| a == asid && base < end && base.wrapping_add(bytes) > start)
    }

    pub(crate) fn flush_asid(&mut self, asid: Asid) -> u64 {
        self.invalidate_halves(|a, _| a == asid)
    }

    pub(crate) fn flush_all(&mut self) -> u64 {
        self.invalidate_halves(|_, _| true)
    }

    /// Every valid half: its ASID, page base and translation.
    pub(crate) fn for_each_half(&self, mut f: impl FnMut(Asid, u64, Translation)) {
        let shift = self.shift;
        self.store.for_each_valid(|k, a, e| {
            let base = (k >> 6) << (shift + 1);
            for (h, p) in e.iter().enumerate() {
                if p.is_valid() {
                    f(a, base + ((h as u64) << shift), p.translation());
                }
            }
        });
    }

    pub(crate) fn entries(&self) -> usize {
        self.store.entries()
    }
    pub(crate) fn ways(&self) -> usize {
        self.store.ways()
    }
}

#[cfg(test)]
mod tests {
    use crate::addr::{PageSize, Perms};
    use crate::config::{Bytes, Serves};
    use crate::mmu::tlb::TlbConfig;
    use crate::mmu::Tlb;
    use crate::pt::Translation;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Clone, Debug)]
    enum Op {
        /// Look the page up; on a miss, refill it (with its buddy, or keeping the other half).
        Access {
            asid: u16,
            vpn: u64,
            buddy: bool,
        },
        Invalidate {
            asid: u16,
            vpn: u64,
        },
        Range {
            asid: u16,
            vpn: u64,
            pages: u64,
        },
        FlushAsid(u16),
        FlushAll,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            12 => (0u16..2, 0u64..40, any::<bool>()).prop_map(|(asid, vpn, buddy)| Op::Access { asid, vpn, buddy }),
            2 => (0u16..2, 0u64..40).prop_map(|(asid, vpn)| Op::Invalidate { asid, vpn }),
            1 => (0u16..2, 0u64..40, 1u64..6).prop_map(|(asid, vpn, pages)| Op::Range { asid, vpn, pages }),
            1 => (0u16..2).prop_map(Op::FlushAsid),
            1 => Just(Op::FlushAll),
        ]
    }

    /// The frame a page maps to in these tests (any function of asid and page will do).
    fn frame(asid: u16, vpn: u64) -> u64 {
        ((vpn * 7 + asid as u64 * 1000) & 0xffff) << 12
    }

    fn tr(asid: u16, vpn: u64) -> Translation {
        Translation { pa: frame(asid, vpn), size: PageSize::K4, perms: Perms::RW_USER }
    }

    /// Reference: per set (VPN2 mod sets), the entries (asid, VPN2, valid halves) in LRU
    /// order, most recent first.
    struct Reference {
        sets: Vec<VecDeque<(u16, u64, [bool; 2])>>,
        ways: usize,
        counts: [u64; 5], // hits, misses, half misses, evictions, invalidations
    }

    impl Reference {
        fn access(&mut self, asid: u16, vpn: u64, buddy: bool) -> bool {
            let n = self.sets.len() as u64;
            let (vpn2, half) = (vpn >> 1, (vpn & 1) as usize);
            let l = &mut self.sets[(vpn2 % n) as usize];
            let found = l.iter().position(|e| e.0 == asid && e.1 == vpn2).map(|p| l.remove(p).unwrap());
            let mut e = match found {
                Some(e) if e.2[half] => {
                    self.counts[0] += 1;
                    l.push_front(e);
                    return true;
                }
                Some(e) => {
                    self.counts[1] += 1;
                    self.counts[2] += 1;
                    e
                }
                None => {
                    self.counts[1] += 1;
                    if l.len() == self.ways {
                        l.pop_back();
                        self.counts[3] += 1;
                    }
                    (asid, vpn2, [false; 2])
                }
            };
            e.2[half] = true;
            if buddy {
                e.2[half ^ 1] = true;
            }
            l.push_front(e);
            false
        }

        fn invalidate(&mut self, hit: impl Fn(u16, u64) -> bool) {
            for l in &mut self.sets {
                for e in l.iter_mut() {
                    for h in 0..2 {
                        if e.2[h] && hit(e.0, e.1 * 2 + h as u64) {
                            e.2[h] = false;
                            self.counts[4] += 1;
                        }
                    }
                }
                l.retain(|e| e.2[0] || e.2[1]);
            }
        }
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(200))]
        /// A page-pair structure gives the hits, misses, half misses, evictions,
        /// invalidations and translations of per-set LRU lists of (tag, two valid bits).
        #[test]
        fn pair_entries_match_reference(ops in proptest::collection::vec(op(), 1..400), geometry in prop_oneof![Just((8usize, 0usize)), Just((8, 2)), Just((6, 3)), Just((4, 1))]) {
            let (entries, ways) = geometry;
            let c = TlbConfig {
                level: 1, serves: Serves::Unified, entries, ways, page_sizes: vec![Bytes(4096)],
                replacement: Default::default(), latency: 0, any_size: false, splinter: false, pairs: true,
            };
            let mut t = Tlb::new("pairs", &c, 0).unwrap();
            let ways = if ways == 0 { entries } else { ways };
            let mut r = Reference { sets: vec![VecDeque::new(); entries / ways], ways, counts: [0; 5] };
            for op in ops {
                match op {
                    Op::Access { asid, vpn, buddy } => {
                        let va = vpn << 12 | 0x123;
                        let got = t.lookup(va, asid, u64::MAX);
                        let hit = r.access(asid, vpn, buddy);
                        prop_assert_eq!(got.is_some(), hit, "{:?}", op);
                        match got {
                            Some(p) => prop_assert_eq!(p.translation(), tr(asid, vpn)),
                            None => t.fill(va, asid, &tr(asid, vpn), buddy.then(|| tr(asid, vpn ^ 1)).as_ref()),
                        }
                    }
                    Op::Invalidate { asid, vpn } => {
                        t.invalidate(vpn << 12, asid);
                        r.invalidate(|a, v| a == asid && v == vpn);
                    }
                    Op::Range { asid, vpn, pages } => {
                        t.invalidate_range((vpn << 12) + 0x800, (vpn + pages) << 12, asid);
                        r.invalidate(|a, v| a == asid && v >= vpn && v < vpn + pages);
                    }
                    Op::FlushAsid(asid) => {
                        t.flush_asid(asid);
                        r.invalidate(|a, _| a == asid);
                    }
                    Op::FlushAll => {
                        t.flush_all();
                        r.invalidate(|_, _| true);
                    }
                }
                let k = &t.counters;
                prop_assert_eq!([k.hits, k.misses, k.half_misses, k.evictions, k.invalidations], r.counts);
            }
            let mut held = Vec::new();
            t.for_each_entry(|a, va, tt| held.push((a, va >> 12, tt)));
            held.sort_by_key(|h| (h.0, h.1));
            let mut want: Vec<_> = r.sets.iter().flatten().flat_map(|e| (0..2).filter(|&h| e.2[h]).map(move |h| (e.0, e.1 * 2 + h as u64))).map(|(a, v)| (a, v, tr(a, v))).collect();
            want.sort_by_key(|h| (h.0, h.1));
            prop_assert_eq!(held, want);
        }
    }
}
