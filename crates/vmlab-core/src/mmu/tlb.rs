//! One TLB structure: set-associative (or fully associative), holding one or several
//! page sizes. A lookup probes each held size with its own set index (VPN mod sets), as
//! a hardware structure holding several sizes does.

use super::assoc::{AssocCache, Evicted, Replacement};
use super::pair_tlb::PairEntries;
use super::{TlbChange, TlbPage};
use crate::addr::{Asid, PageSize, Perms};
use crate::config::{Bytes, Serves};
use crate::error::{Error, Result};
use crate::pt::Translation;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    /// 1 = first level probed; higher levels are probed on a miss in all lower ones.
    pub level: u8,
    pub serves: Serves,
    pub entries: usize,
    /// Associativity; 0 (or = entries) means fully associative.
    #[serde(default)]
    pub ways: usize,
    /// Page sizes the structure holds, e.g. ["4K"] or ["4K", "2M"].
    pub page_sizes: Vec<Bytes>,
    /// An any-size structure (TPS §III-A2; Romer's 4K-8M TLBs): holds every power of
    /// two from the smallest to the largest of `page_sizes`, each entry matching when
    /// `(vpn & mask) == tag`. Must be fully associative.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_size: bool,
    /// Cache a page larger than every size held here as its piece of the largest held
    /// size below it (TLB splintering), instead of not caching it at all.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub splinter: bool,
    /// Each entry maps an even/odd pair of pages under one tag, with a valid bit per
    /// half (the MIPS R4x00's TLB, Elphinstone §6.1; mmu/pair_tlb.rs). One page size,
    /// a hierarchy of one level.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pairs: bool,
    #[serde(default)]
    pub replacement: Replacement,
    /// Cycles a lookup that reaches this level costs (L1 usually 0: overlapped with the
    /// cache access).
    #[serde(default)]
    pub latency: u32,
}

/// What a TLB entry holds besides its tag: the page's physical base, its size and
/// permissions, in one word (the base is aligned to at least 4 KiB, so the low bits
/// carry the shift and permissions). One word, not a 16-byte struct: a fill built the
/// struct on the stack in two stores and copied it with one 16-byte load, which the
/// host cannot forward from the two stores, so every fill waited for the store buffer
/// to drain (behind the walker thread's ops, whose lines the other core holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbPayload(u64);

impl TlbPayload {
    const SHIFT_AT: u32 = 4;
    const PERMS_MASK: u64 = 0xf;
    /// No translation (an invalid half of a page-pair entry): every valid payload has a
    /// shift of at least 12, so it is never 0.
    pub(crate) const INVALID: TlbPayload = TlbPayload(0);

    #[inline(always)]
    pub(crate) fn is_valid(self) -> bool {
        self != Self::INVALID
    }

    #[inline(always)]
    pub(crate) fn new(t: &Translation) -> TlbPayload {
        debug_assert_eq!(t.pa & 0xfff, 0, "a page's physical base is 4 KiB-aligned");
        TlbPayload(t.pa | (t.size.shift() as u64) << Self::SHIFT_AT | t.perms.bits() as u64)
    }
    #[inline(always)]
    pub(crate) fn pa(self) -> u64 {
        self.0 & !0xfff
    }
    #[inline(always)]
    pub(crate) fn shift(self) -> u8 {
        (self.0 >> Self::SHIFT_AT) as u8 & 0x3f
    }
    #[inline(always)]
    pub(crate) fn translation(self) -> Translation {
        Translation { pa: self.pa(), size: PageSize::from_valid_shift(self.shift()), perms: Perms::from_bits((self.0 & Self::PERMS_MASK) as u8) }
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct TlbCounters {
    pub(crate) lookups: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) fills: u64,
    pub(crate) evictions: u64,
    /// Entries removed by unmap/protect shootdowns and flushes.
    pub(crate) invalidations: u64,
    /// Fills of a piece of a page larger than any size the structure holds (`splinter`).
    pub(crate) splinters: u64,
    /// Page-pair entries (`pairs`): misses whose tag matched an entry with the half
    /// invalid (the R4x00's TLB-invalid exception), counted in `misses` too.
    pub(crate) half_misses: u64,
}

crate::counters_since!(TlbCounters { lookups, hits, misses, fills, evictions, invalidations, splinters, half_misses });

pub struct Tlb {
    pub name: String,
    pub(crate) level: u8,
    pub(crate) serves: Serves,
    pub(crate) latency: u32,
    sizes: Vec<PageSize>,
    /// Bit s set if the structure holds pages of 2^s bytes.
    held: u64,
    /// How probes and fills go, chosen once from the geometry.
    layout: Layout,
    /// Cache a page larger than every held size as its piece of the largest held size
    /// below it (`splinter`).
    splinter: bool,
    store: AssocCache<TlbPayload>,
    /// Entries that each map an even/odd pair of pages (`pairs`); then `store` is an
    /// unused one-entry placeholder and every operation goes here.
    pairs: Option<Box<PairEntries>>,
    pub(crate) counters: TlbCounters,
    /// A watched structure logs every change to its contents (mmu/mod.rs), with its slot.
    pub(crate) log: Option<(u8, Vec<TlbChange>)>,
}

/// How a structure's probes and fills go, chosen once from its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// LRU of W ways (one of `assoc::PACKED_LRU_WIDTHS`) with a packed recency order: the
    /// tag match and recency update specialised for W (TLB probes of miss-heavy runs
    /// spent as much on dispatching on the geometry as on the tag match).
    PackedLru(u8),
    /// Any other set-associative geometry or replacement policy.
    General,
    /// Fully associative, matched by one masked compare per entry (`any_size`).
    AnySize,
    /// Entries that each map an even/odd pair of pages (`pairs`).
    Pairs,
}

/// The page an entry's key and payload describe.
#[inline(always)]
fn page_of(k: u64, asid: Asid, p: &TlbPayload) -> TlbPage {
    TlbPage { asid, va: (k >> 6) << p.shift(), size: PageSize::from_valid_shift(p.shift()) }
}

/// `Tlb::probe`'s shift for an any-size structure (no page size is 2^255 bytes).
pub(crate) const ANY_SIZE: u8 = u8::MAX;

/// The piece of 2^piece bytes of `t` (the translation of `va`) that holds `va`.
#[inline(always)]
pub(crate) fn piece_of(va: u64, t: &Translation, piece: u8) -> Translation {
    if piece == t.size.shift() {
        return *t;
    }
    let s = PageSize::from_valid_shift(piece);
    Translation { pa: t.pa + (s.align_down(va) - t.size.align_down(va)), size: s, perms: t.perms }
}

/// Tag of a page of `size` containing `va`: the VPN, with the size folded in so pages of
/// different sizes never alias within one structure.
#[inline(always)]
pub(super) fn key(vpn: u64, shift: u8) -> u64 {
    (vpn << 6) | shift as u64
}

impl Tlb {
    pub(crate) fn new(name: &str, c: &TlbConfig, seed: u64) -> Result<Tlb> {
        let key_path = format!("tlb.{name}");
        let mut sizes = Vec::new();
        for b in &c.page_sizes {
            let s = PageSize::from_bytes(b.0).map_err(|m| Error::config(format!("{key_path}.page_sizes"), m))?;
            if !sizes.contains(&s) {
                sizes.push(s);
            }
        }
        sizes.sort();
        if c.any_size {
            let (lo, hi) = (sizes[0].shift(), sizes[sizes.len() - 1].shift());
            sizes = (lo..=hi).map(PageSize::from_valid_shift).collect();
        }
        let held = sizes.iter().fold(0u64, |m, s| m | 1u64 << s.shift());
        // Config::validate checks that a pair structure holds one size, not any size.
        let (store, pairs) = if c.pairs {
            let p = PairEntries::new(c.entries, c.ways, c.replacement, seed, &key_path, sizes[0])?;
            (AssocCache::new(1, 1, c.replacement, seed, &key_path)?, Some(Box::new(p)))
        } else {
            (AssocCache::new(c.entries, c.ways, c.replacement, seed, &key_path)?, None)
        };
        let layout = match store.packed_lru_ways() {
            _ if c.pairs => Layout::Pairs,
            _ if c.any_size => Layout::AnySize,
            w if super::assoc::PACKED_LRU_WIDTHS.contains(&w) => Layout::PackedLru(w as u8),
            _ => Layout::General,
        };
        Ok(Tlb {
            name: name.to_string(),
            level: c.level,
            serves: c.serves,
            latency: c.latency,
            sizes,
            held,
            layout,
            splinter: c.splinter,
            store,
            pairs,
            counters: TlbCounters::default(),
            log: None,
        })
    }

    #[inline(always)]
    pub(crate) fn holds(&self, size: PageSize) -> bool {
        self.held & (1u64 << size.shift()) != 0
    }

    #[cfg(test)]
    /// The entry this structure caches for `t`, the translation of `va`: `t` itself if
    /// it holds the size; if it splinters, the piece of `t` around `va` of the largest
    /// held size below `t`'s; else none.
    #[inline(always)]
    pub(crate) fn entry_for(&self, va: u64, t: &Translation) -> Option<Translation> {
        let piece = self.piece_shift(t.size.shift())?;
        Some(piece_of(va, t, piece))
    }

    /// The size (shift) of the entry this structure caches for a page of 2^shift bytes:
    /// the page's own if held; the largest held size below it if the structure
    /// splinters; else none.
    pub(crate) fn piece_shift(&self, shift: u8) -> Option<u8> {
        if self.held & (1u64 << shift) != 0 {
            return Some(shift);
        }
        let below = self.held & ((1u64 << shift) - 1);
        (self.splinter && below != 0).then(|| 63 - below.leading_zeros() as u8)
    }

    /// The sizes held, as a bit mask (bit s: pages of 2^s bytes).
    pub(crate) fn held_shifts(&self) -> u64 {
        self.held
    }

    /// Fully associative with a per-entry page mask (`any_size`).
    pub(crate) fn any_size(&self) -> bool {
        self.layout == Layout::AnySize
    }

    /// Every valid entry: its ASID, the virtual base of what it maps, and the
    /// translation it gives.
    pub fn for_each_entry(&self, mut f: impl FnMut(Asid, u64, Translation)) {
        if let Some(p) = &self.pairs {
            return p.for_each_half(f);
        }
        self.store.for_each_valid(|k, a, p| f(a, (k >> 6) << p.shift(), p.translation()));
    }

    /// Count a fill of a splinter (`entry_for` returned a piece of a larger page).
    #[cold]
    pub(crate) fn note_splinter(&mut self) {
        self.counters.splinters += 1;
    }

    pub(crate) fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    /// Probe every held page size; counts one lookup and one hit or miss (a test's
    /// view of one structure; the hierarchy probes through its plans and counts per
    /// level).
    #[cfg(test)]
    pub(crate) fn lookup(&mut self, va: u64, asid: Asid, filled: u64) -> Option<TlbPayload> {
        self.counters.lookups += 1;
        let mut sizes = if self.layout == Layout::AnySize { 1 } else { self.held & filled };
        let mut hit = None;
        // Held sizes, smallest first.
        while sizes != 0 && hit.is_none() {
            let shift = sizes.trailing_zeros() as u8;
            sizes &= sizes - 1;
            hit = self.probe(va, asid, shift);
        }
        match hit {
            Some(_) => self.counters.hits += 1,
            None => self.counters.misses += 1,
        }
        hit
    }

    /// Whether entries map page pairs (`pairs`).
    pub(crate) fn pairs(&self) -> bool {
        self.layout == Layout::Pairs
    }

    /// Probe for the page of 2^shift bytes holding `va` (an any-size structure ignores
    /// `shift`: each entry masks the address with its own page size); a hit becomes
    /// most recently used. Counts nothing (the hierarchy counts its lookups per level,
    /// mmu/mod.rs) but a page-pair entry's invalid half.
    #[inline(always)]
    pub(crate) fn probe(&mut self, va: u64, asid: Asid, shift: u8) -> Option<TlbPayload> {
        // An any-size probe passes `ANY_SIZE` (255) and never reads `vpn`: a wrapping
        // shift keeps that well defined (a plain `>>` by 255 is an overflow).
        let vpn = va.wrapping_shr(shift as u32);
        match self.layout {
            Layout::PackedLru(w) => {
                let (set, k) = (self.store.set_of(vpn), key(vpn, shift));
                match w {
                    1 => self.store.lookup_lru::<1>(set, k, asid),
                    2 => self.store.lookup_lru::<2>(set, k, asid),
                    4 => self.store.lookup_lru::<4>(set, k, asid),
                    8 => self.store.lookup_lru::<8>(set, k, asid),
                    _ => self.store.lookup_lru::<12>(set, k, asid),
                }
            }
            Layout::General => self.store.lookup(self.store.set_of(vpn), key(vpn, shift), asid),
            // TPS Fig. 7: each entry masks the incoming VPN with its own page mask.
            Layout::AnySize => self.store.lookup_where(0, asid, |k| (va >> (k & 63)) == k >> 6),
            Layout::Pairs => {
                let hit = self.pairs.as_mut().expect("a page-pair structure").probe(va, asid)?;
                if hit.is_valid() {
                    return Some(hit);
                }
                // The R4x00's TLB-invalid exception.
                self.counters.half_misses += 1;
                None
            }
        }
    }

    /// Install the translation of `va`, which this structure just missed (so no entry
    /// for it exists); the caller checks that it holds `t`'s size. A page-pair entry
    /// gives the other half `buddy` if the page table read it too, or keeps what it
    /// holds.
    #[inline(always)]
    pub(crate) fn fill(&mut self, va: u64, asid: Asid, t: &Translation, buddy: Option<&Translation>) {
        let evicted = match self.layout {
            Layout::Pairs => self.pairs.as_mut().expect("a page-pair structure").fill(va, asid, t, buddy),
            // A watched structure logs what it pushes out (never a page-pair one:
            // Config::validate).
            _ if self.log.is_some() => {
                self.fill_logged(va, asid, t);
                return;
            }
            Layout::PackedLru(w) => {
                let (set, k, payload) = self.fill_entry(va, asid, t);
                match w {
                    1 => self.store.fill_absent_lru::<1>(set, k, asid, payload),
                    2 => self.store.fill_absent_lru::<2>(set, k, asid, payload),
                    4 => self.store.fill_absent_lru::<4>(set, k, asid, payload),
                    8 => self.store.fill_absent_lru::<8>(set, k, asid, payload),
                    _ => self.store.fill_absent_lru::<12>(set, k, asid, payload),
                }
            }
            Layout::AnySize | Layout::General => {
                let (set, k, payload) = self.fill_entry(va, asid, t);
                self.store.fill_absent_evicts(set, k, asid, payload)
            }
        };
        self.counters.fills += 1;
        self.counters.evictions += evicted as u64;
    }

    /// `fill` of a watched structure: the entry it pushed out, logged with the fill.
    #[cold]
    fn fill_logged(&mut self, va: u64, asid: Asid, t: &Translation) -> Option<Evicted<TlbPayload>> {
        let (set, k, payload) = self.fill_entry(va, asid, t);
        let ev = self.store.fill_absent(set, k, asid, payload);
        self.counters.fills += 1;
        self.counters.evictions += ev.is_some() as u64;
        if let Some((slot, log)) = &mut self.log {
            if let Some(e) = &ev {
                log.push(TlbChange::Evicted { slot: *slot, page: page_of(e.key, e.asid, &e.val) });
            }
            log.push(TlbChange::Filled { slot: *slot, page: TlbPage { asid, va: t.size.align_down(va), size: t.size } });
        }
        ev
    }

    /// The set, key and payload of a fill of `t` (the translation of `va`).
    #[inline(always)]
    fn fill_entry(&self, va: u64, asid: Asid, t: &Translation) -> (usize, u64, TlbPayload) {
        let shift = t.size.shift();
        let vpn = va >> shift;
        let set = self.store.set_of(vpn);
        debug_assert!(self.holds(t.size), "fill of a size the structure does not hold");
        debug_assert!(self.store.peek(set, key(vpn, shift), asid).is_none(), "fill of a present entry");
        (set, key(vpn, shift), TlbPayload::new(t))
    }

    /// Drop any entry translating `va` for `asid` (all held sizes).
    pub(crate) fn invalidate(&mut self, va: u64, asid: Asid) {
        if let Some(p) = &mut self.pairs {
            self.counters.invalidations += p.invalidate(va, asid);
            return;
        }
        if self.layout == Layout::AnySize {
            self.remove_where(|k, a| a == asid && (va >> (k & 63)) == k >> 6);
            return;
        }
        for i in 0..self.sizes.len() {
            let shift = self.sizes[i].shift();
            let vpn = va >> shift;
            let set = self.store.set_of(vpn);
            let k = key(vpn, shift);
            if let Some((slot, log)) = &mut self.log {
                if let Some(p) = self.store.peek(set, k, asid) {
                    log.push(TlbChange::Invalidated { slot: *slot, page: page_of(k, asid, &p) });
                }
            }
            if self.store.invalidate(set, k, asid) {
                self.counters.invalidations += 1;
            }
        }
    }

    /// The page of `size` at `va` changed: drop the entries translating it; with
    /// `pieces` (some structure splinters: its pieces also reach other structures on
    /// refills), also the entries of smaller sizes anywhere inside it.
    pub(crate) fn invalidate_page(&mut self, va: u64, size: PageSize, asid: Asid, pieces: bool) {
        self.invalidate(va, asid);
        if !pieces {
            return;
        }
        for i in 0..self.sizes.len() {
            let s = self.sizes[i];
            if s >= size {
                break;
            }
            let n = size.bytes() >> s.shift();
            if n > 64 {
                // Cheaper to scan the structure than to probe every piece.
                self.invalidate_range(va, va + size.bytes(), asid);
                return;
            }
            for p in 1..n {
                self.invalidate(va + (p << s.shift()), asid);
            }
        }
    }

    /// Drop every entry for which `pred(key, asid)` holds, counting (and recording) it.
    fn remove_where(&mut self, pred: impl Fn(u64, Asid) -> bool) {
        let log = &mut self.log;
        self.counters.invalidations += self.store.invalidate_where(|k, a, p| {
            let hit = pred(k, a);
            if let (true, Some((slot, log))) = (hit, log.as_mut()) {
                log.push(TlbChange::Invalidated { slot: *slot, page: page_of(k, a, p) });
            }
            hit
        });
    }

    /// Drop every entry of `asid` overlapping [start, end).
    pub(crate) fn invalidate_range(&mut self, start: u64, end: u64, asid: Asid) {
        if let Some(p) = &mut self.pairs {
            self.counters.invalidations += p.invalidate_range(start, end, asid);
            return;
        }
        self.remove_where(|k, a| {
            let shift = (k & 63) as u32;
            let base = (k >> 6) << shift;
            a == asid && base < end && base.wrapping_add(1u64 << shift) > start
        });
    }

    pub(crate) fn flush_all(&mut self) {
        if let Some(p) = &mut self.pairs {
            self.counters.invalidations += p.flush_all();
            return;
        }
        if let Some((slot, log)) = &mut self.log {
            self.store.for_each_valid(|k, a, p| log.push(TlbChange::Invalidated { slot: *slot, page: page_of(k, a, p) }));
        }
        self.counters.invalidations += self.store.occupancy() as u64;
        self.store.flush_all();
    }

    pub(crate) fn flush_asid(&mut self, asid: Asid) {
        if let Some(p) = &mut self.pairs {
            self.counters.invalidations += p.flush_asid(asid);
            return;
        }
        self.remove_where(|_, a| a == asid);
    }

    pub(crate) fn entries(&self) -> usize {
        self.pairs.as_ref().map_or(self.store.entries(), |p| p.entries())
    }
    pub(crate) fn ways(&self) -> usize {
        self.pairs.as_ref().map_or(self.store.ways(), |p| p.ways())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{MAX_PAGE_SHIFT, MIN_PAGE_SHIFT};
    use crate::config::Bytes;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        /// The one-word payload gives back the translation it was made from, for every
        /// page size, permission set and page-aligned frame (the highest included).
        #[test]
        fn payload_round_trips(shift in MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT, perms in 0u8..16, frame in any::<u64>()) {
            let size = PageSize::from_valid_shift(shift);
            let t = Translation { pa: size.align_down(frame), size, perms: Perms::from_bits(perms) };
            let p = TlbPayload::new(&t);
            prop_assert_eq!(p.translation(), t);
            prop_assert_eq!((p.pa(), p.shift()), (t.pa, shift));
        }
    }

    fn any_size_tlb(entries: usize) -> Tlb {
        let c = TlbConfig {
            level: 1,
            serves: Serves::Data,
            entries,
            ways: 0,
            page_sizes: vec![Bytes(4 << 10), Bytes(8 << 20)],
            replacement: Default::default(),
            latency: 0,
            any_size: true,
            splinter: false,
            pairs: false,
        };
        Tlb::new("any", &c, 0).unwrap()
    }

    /// A 64-entry 4-way 4K/2M structure, splintering or not.
    fn stlb(splinter: bool) -> Tlb {
        let c = TlbConfig {
            level: 2,
            serves: Serves::Unified,
            entries: 64,
            ways: 4,
            page_sizes: vec![Bytes(4 << 10), Bytes(2 << 20)],
            replacement: Default::default(),
            latency: 0,
            any_size: false,
            splinter,
            pairs: false,
        };
        Tlb::new("stlb", &c, 0).unwrap()
    }

    /// Fill what the structure caches for `t` at `va`, as the hierarchy does.
    fn fill_splintered(t: &mut Tlb, va: u64, page: &Translation) -> Option<Translation> {
        let e = t.entry_for(va, page)?;
        if e.size != page.size {
            t.note_splinter();
        }
        t.fill(va, 1, &e, None);
        Some(e)
    }

    #[test]
    fn splintering_caches_the_piece_around_the_access() {
        let page = tr(0x80_0000, 16); // a 64K page at va 0x41_0000
        assert!(stlb(false).entry_for(0x41_3123, &page).is_none(), "without splintering: not cached");
        let mut t = stlb(true);
        let e = fill_splintered(&mut t, 0x41_3123, &page).unwrap();
        assert_eq!((e.size, e.pa), (PageSize::K4, 0x80_3000));
        assert_eq!(t.lookup(0x41_3fff, 1, u64::MAX).map(|p| p.translation().phys(0x41_3fff)), Some(0x80_3fff));
        assert!(t.lookup(0x41_4000, 1, u64::MAX).is_none(), "other pieces are not cached");
        assert_eq!(t.counters.splinters, 1);
        // A 1G page splinters into the 2M piece around the access.
        let e = t.entry_for(0x4000_0000 + (5 << 21) + 7, &tr(0x1_0000_0000, 30)).unwrap();
        assert_eq!((e.size, e.pa), (PageSize::M2, 0x1_0000_0000 + (5 << 21)));
        // A held size is cached as is.
        assert_eq!(t.entry_for(0x20_0000, &tr(0x60_0000, 21)), Some(tr(0x60_0000, 21)));
    }

    #[test]
    fn a_page_shootdown_drops_its_splinters_everywhere_inside_it() {
        // One access per piece (the 4M page's two 2M pieces: a second fill of a piece
        // would be a fill of a present entry).
        for (shift, offsets) in [(16u8, vec![0u64, 0x3000, 0xf000]), (22, vec![0x1000, 0x3f_f000])] {
            let mut t = stlb(true);
            let (va, page) = (1u64 << 30, tr(0x8000_0000, shift));
            for &o in &offsets {
                fill_splintered(&mut t, va + o, &page).unwrap();
            }
            let neighbor = va + (1 << shift);
            t.fill(neighbor, 1, &tr(0x9000_0000, 12), None);
            t.invalidate_page(va, PageSize::from_valid_shift(shift), 1, true);
            for &o in &offsets {
                assert!(t.lookup(va + o, 1, u64::MAX).is_none(), "splinter at +{o:#x} of a 2^{shift} page survived");
            }
            assert!(t.lookup(neighbor, 1, u64::MAX).is_some(), "the next page is untouched");
        }
    }

    fn tr(pa: u64, shift: u8) -> Translation {
        Translation { pa, size: PageSize::from_valid_shift(shift), perms: Perms::RW_USER }
    }

    #[test]
    fn any_size_tlb_holds_every_power_of_two_in_range() {
        let t = any_size_tlb(4);
        assert_eq!(t.page_sizes().len(), 12, "4K..8M");
        assert!(t.holds(PageSize::from_shift(15).unwrap()));
        assert!(!t.holds(PageSize::G1));
    }

    #[test]
    fn any_size_entry_matches_every_address_of_its_page() {
        let mut t = any_size_tlb(4);
        t.fill(0x12_3456, 1, &tr(0x40_0000, 15), None);
        for va in [0x12_0000u64, 0x12_7fff, 0x12_3456] {
            assert_eq!(t.lookup(va, 1, 0).map(|p| p.translation().phys(va)), Some(0x40_0000 + (va & 0x7fff)));
        }
        assert!(t.lookup(0x12_8000, 1, 0).is_none(), "next 32K page");
        assert!(t.lookup(0x12_0000, 2, 0).is_none(), "other ASID");
        t.invalidate(0x12_7000, 1);
        assert!(t.lookup(0x12_0000, 1, 0).is_none());
    }

    /// Which base-page-aligned region maps which size: 8M regions, each of one size.
    fn shift_of(va: u64) -> u8 {
        12 + ((va >> 23) % 12) as u8
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        /// An any-size fully associative LRU TLB behaves as an LRU list of pages.
        #[test]
        fn any_size_tlb_matches_lru_list(vas in proptest::collection::vec(0u64..(64 << 20), 1..400), entries in 1usize..9) {
            let mut t = any_size_tlb(entries);
            let mut list: Vec<u64> = Vec::new(); // page bases, most recent first
            for va in vas {
                let shift = shift_of(va);
                let base = va >> shift << shift;
                let hit = t.lookup(va, 0, 0).is_some();
                let pos = list.iter().position(|&b| b == base);
                prop_assert_eq!(hit, pos.is_some(), "va {:#x}", va);
                match pos {
                    Some(p) => {
                        list.remove(p);
                    }
                    None => {
                        let ev = t.fill_logged(va, 0, &tr(base, shift));
                        let expect = (list.len() == entries).then(|| list.pop().unwrap());
                        prop_assert_eq!(ev.map(|e| (e.key >> 6) << e.val.shift()), expect);
                    }
                }
                list.insert(0, base);
            }
        }
    }
}
