//! Romer's miss charges (ch. 3): for every potential superpage P, `prefetch(P)` and
//! `capacity(P)` count the past TLB misses P would have prevented, and `tlbcount(P)`
//! says whether P or a page inside it is in the TLB (§3.5.2).
//!
//! Potential superpages are the aligned powers of two from twice the base page up to
//! `max` (Romer: 8K to 8M); they live in a hash map keyed by (ASID, size, VPN), created
//! on first use, so the space is proportional to the pages touched (the paper's ~3
//! counters per base page).
//!
//! The policy feeds in every change to the watched TLB (mmu/mod.rs) and every miss:
//!
//! - **tlbcount** (§3.5.2): 0 if no translation inside P is in the TLB; 1 if P itself
//!   is, or exactly one of its two halves holds one; 2 if both halves do. A fill walks
//!   up from the filled page incrementing every 0 and the first positive count; an
//!   eviction walks up decrementing until (and including) the first 2. ("Promoted"
//!   (−1) is not stored: a page's current size is known from the translation, and
//!   charges start above it.)
//! - **prefetch** (§3.3.2): a miss to p increments prefetch(P) for every P ⊃ p with
//!   tlbcount(P) > 0, i.e. covering p and a page already in the TLB. Once one P has a
//!   positive count, every larger one does too.
//! - **capacity** (§3.3.2, §3.5.3; ONLINE only), by §3.5.3's algorithm: `lru-depth`
//!   is p's position in the LRU stack of pages evicted from the TLB (1 = the most
//!   recently evicted; footnote 2: the TLB's own contents are a set, the evicted pages
//!   an exact LRU order); coverage(Q) counts the TLB entries inside superpage Q; every
//!   Q whose coverage reaches lru-depth is charged. Coverage cannot exceed the N
//!   entries of the TLB, so only the N most recently evicted pages are kept.
//!
//! On a promotion of P (§3.3.2, §3.4.2): prefetch(P') −= prefetch(P) for every P' ⊃ P,
//! capacity is reset to zero for P and every P' ⊃ P, and the charges inside P are
//! cleared (they start again if P is ever demoted).

use crate::addr::{Asid, PageSize};
use crate::mmu::{TlbChange, TlbPage};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// The counters of one potential superpage (or, for `tlbcount`, of any page).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charges {
    pub prefetch: u32,
    pub capacity: u32,
    /// Per watched TLB (data, and instruction if separate).
    pub tlbcount: [u8; 2],
    /// Promotion was tried and the region cannot be merged (crosses a VMA, mixed
    /// permissions, shared): not tried again.
    pub blocked: bool,
}

/// Key of the page of 2^shift bytes containing `va` in `asid`.
#[inline(always)]
fn key(asid: Asid, shift: u8, va: u64) -> (u64, u64) {
    (((asid as u64) << 8) | shift as u64, va >> shift)
}

/// One watched TLB's contents and the top of its LRU stack of evicted pages, for
/// capacity charges.
#[derive(Default)]
struct EvictedStack {
    /// The N most recently evicted pages, most recent first.
    recent: VecDeque<TlbPage>,
    /// Pages now in the TLB.
    resident: Vec<TlbPage>,
}

/// Charges of every potential superpage of every address space.
pub struct SuperpageCharges {
    base: u8,
    max: u8,
    nodes: FxHashMap<(u64, u64), Charges>,
    /// ONLINE's capacity charges: the LRU stack per watched TLB, and its size.
    capacity: Option<([EvictedStack; 2], [usize; 2])>,
    /// Scratch for the per-miss coverage count (reused: no allocation per miss).
    cover: FxHashMap<(u8, u64), u32>,
}

impl SuperpageCharges {
    /// Superpages from 2^(base+1) to 2^max bytes. `tlb_entries`: the watched TLBs'
    /// sizes, if capacity charges are kept.
    pub fn new(base: PageSize, max: PageSize, tlb_entries: Option<[usize; 2]>) -> SuperpageCharges {
        SuperpageCharges {
            base: base.shift(),
            max: max.shift(),
            nodes: FxHashMap::default(),
            capacity: tlb_entries.map(|n| (Default::default(), n)),
            cover: FxHashMap::default(),
        }
    }

    pub fn max_shift(&self) -> u8 {
        self.max
    }

    /// The charges of the superpage of 2^shift bytes containing `va` (zero if none).
    pub fn get(&self, asid: Asid, shift: u8, va: u64) -> Charges {
        self.nodes.get(&key(asid, shift, va)).copied().unwrap_or_default()
    }

    fn node(&mut self, asid: Asid, shift: u8, va: u64) -> &mut Charges {
        self.nodes.entry(key(asid, shift, va)).or_default()
    }

    /// Every (asid, shift, base) with charges, for OFFLINE's selection.
    pub fn iter(&self) -> impl Iterator<Item = (Asid, u8, u64, &Charges)> {
        self.nodes.iter().filter(|(k, _)| (k.0 & 0xff) as u8 > self.base).map(|(k, c)| {
            let shift = (k.0 & 0xff) as u8;
            ((k.0 >> 8) as Asid, shift, k.1 << shift, c)
        })
    }

    /// Apply a change to a watched TLB's contents.
    pub fn apply(&mut self, c: &TlbChange) {
        match *c {
            TlbChange::Filled { slot, page } => {
                self.tlbcount_fill(slot, &page);
                if let Some((stacks, _)) = &mut self.capacity {
                    let st = &mut stacks[slot as usize];
                    st.recent.retain(|q| *q != page);
                    st.resident.push(page);
                }
            }
            TlbChange::Evicted { slot, page } | TlbChange::Invalidated { slot, page } => {
                self.tlbcount_remove(slot, &page);
                if let Some((stacks, entries)) = &mut self.capacity {
                    let st = &mut stacks[slot as usize];
                    if let Some(i) = st.resident.iter().position(|p| *p == page) {
                        st.resident.swap_remove(i);
                    }
                    // Only evictions enter the LRU stack: an invalidated page changed
                    // (unmapped, re-protected or merged into a superpage).
                    if matches!(c, TlbChange::Evicted { .. }) {
                        st.recent.push_front(page);
                        st.recent.truncate(entries[slot as usize].max(1));
                    }
                }
            }
        }
    }

    /// §3.5.2: increment each 0 from the page up, and the first positive count.
    fn tlbcount_fill(&mut self, slot: u8, page: &TlbPage) {
        for s in page.size.shift()..=self.max {
            let n = &mut self.node(page.asid, s, page.va).tlbcount[slot as usize];
            *n += 1;
            if *n > 1 {
                break;
            }
        }
    }

    /// §3.5.2: decrement from the page up to and including the first 2.
    fn tlbcount_remove(&mut self, slot: u8, page: &TlbPage) {
        for s in page.size.shift()..=self.max {
            let Some(c) = self.nodes.get_mut(&key(page.asid, s, page.va)) else { return };
            let n = &mut c.tlbcount[slot as usize];
            let was = *n;
            *n = n.saturating_sub(1);
            if was != 1 {
                break;
            }
        }
    }

    /// Charge a miss to `va` (mapped by a page of `size`) in `slot`'s TLB, before the
    /// miss's own fill is applied. Returns the largest superpage size whose charges
    /// reached a threshold: `prefetch_at[s]` / `capacity_at[s]` (u32::MAX: never).
    pub fn charge_miss(&mut self, slot: u8, asid: Asid, va: u64, size: PageSize, prefetch_at: &[u32; 64], capacity_at: &[u32; 64]) -> Option<u8> {
        let mut best = None;
        let mut covered = false;
        for s in size.shift() + 1..=self.max {
            let c = self.node(asid, s, va);
            covered = covered || c.tlbcount[slot as usize] > 0;
            if covered {
                c.prefetch += 1;
            }
            if !c.blocked && (c.prefetch >= prefetch_at[s as usize] || c.capacity >= capacity_at[s as usize]) {
                best = Some(s);
            }
        }
        if self.capacity.is_some() {
            if let Some(s) = self.charge_capacity(slot, asid, va, size, capacity_at) {
                best = best.max(Some(s));
            }
        }
        best
    }

    /// ONLINE's capacity charges for a miss to p (§3.5.3).
    fn charge_capacity(&mut self, slot: u8, asid: Asid, va: u64, size: PageSize, capacity_at: &[u32; 64]) -> Option<u8> {
        let (stacks, _) = self.capacity.as_ref().expect("capacity kept");
        let st = &stacks[slot as usize];
        let p = TlbPage { asid, va: size.align_down(va), size };
        let lru_depth = st.recent.iter().position(|q| *q == p)? as u32 + 1;
        self.cover.clear();
        for q in st.resident.iter().filter(|q| q.asid == asid) {
            for s in q.size.shift() + 1..=self.max {
                *self.cover.entry((s, q.va >> s)).or_default() += 1;
            }
        }
        let mut best = None;
        for (&(s, vpn), &c) in &self.cover {
            if c >= lru_depth {
                let node = self.nodes.entry(key(asid, s, vpn << s)).or_default();
                node.capacity += 1;
                if !node.blocked && node.capacity >= capacity_at[s as usize] {
                    best = best.max(Some(s));
                }
            }
        }
        best
    }

    /// Account a promotion of the superpage of 2^shift bytes at `base` (§3.3.2).
    pub fn promoted(&mut self, asid: Asid, shift: u8, base: u64) {
        let charged = self.get(asid, shift, base).prefetch;
        for s in shift..=self.max {
            let c = self.node(asid, s, base);
            if s > shift {
                c.prefetch = c.prefetch.saturating_sub(charged);
            }
            c.capacity = 0;
        }
        // Clear the charges inside P (its tlbcounts stay exact: the shootdowns of its
        // old pages arrive as invalidations).
        for s in self.base + 1..=shift {
            for i in 0..1u64 << (shift - s) {
                if let Some(c) = self.nodes.get_mut(&key(asid, s, base + (i << s))) {
                    c.prefetch = 0;
                    c.capacity = 0;
                }
            }
        }
    }

    /// Never try to promote this superpage again.
    pub fn block(&mut self, asid: Asid, shift: u8, va: u64) {
        self.node(asid, shift, va).blocked = true;
    }

    /// Forget an address space (its ASID may be reused).
    pub fn drop_space(&mut self, asid: Asid) {
        self.nodes.retain(|k, _| (k.0 >> 8) as Asid != asid);
        if let Some((stacks, _)) = &mut self.capacity {
            for st in stacks.iter_mut() {
                st.recent.retain(|p| p.asid != asid);
                st.resident.retain(|p| p.asid != asid);
            }
        }
    }

    /// Potential superpages with a record (for the stats document).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Bytes, Serves, TlbConfig};
    use crate::mmu::Tlb;
    use crate::pt::Translation;
    use proptest::prelude::*;

    fn tlb(entries: usize, sizes: &[u64], any_size: bool) -> Tlb {
        let c = TlbConfig {
            level: 1,
            serves: Serves::Data,
            entries,
            ways: 0,
            page_sizes: sizes.iter().map(|&b| Bytes(b)).collect(),
            replacement: Default::default(),
            latency: 0,
            any_size,
        };
        let mut t = Tlb::new("t", &c, 0).unwrap();
        t.log = Some((0, Vec::new()));
        t
    }

    const NEVER: [u32; 64] = [u32::MAX; 64];

    /// Drive a miss through the TLB and the charges as the policy does: charge with
    /// the TLB as it was, then apply the fill's changes (returned).
    fn reference(t: &mut Tlb, ch: &mut SuperpageCharges, page: u64, shift: u8) -> Vec<TlbChange> {
        let va = page << 12;
        if t.lookup(va, 0, u64::MAX).is_some() {
            return Vec::new();
        }
        let size = PageSize::from_valid_shift(shift);
        ch.charge_miss(0, 0, va, size, &NEVER, &NEVER);
        t.fill(va, 0, &Translation { pa: size.align_down(va), size, perms: crate::addr::Perms::RW_USER });
        let changes: Vec<TlbChange> = t.log.as_mut().unwrap().1.drain(..).collect();
        changes.iter().for_each(|c| ch.apply(c));
        changes
    }

    /// Romer Fig. 3-2: a 3-entry LRU TLB and the reference stream 8,1,7,6,5,0,1. The
    /// final miss to 1 charges prefetch({0,1}) (0 is in the TLB) and capacity({4..7})
    /// (coalescing the TLB's 5 and 6 frees the slot 1 needed: 1 is 2nd in the stack of
    /// evicted pages 7, 1, 8, so lru-depth = 2 = coverage({4..7})). The other charges
    /// are the hand count of the whole stream with superpages up to 64K (16 pages):
    /// §3.5.3's loop also charges {0..7} and {0..15}, which cover 0, 5 and 6.
    #[test]
    fn romer_figure_3_2_charges() {
        let mut t = tlb(3, &[4096], false);
        let mut ch = SuperpageCharges::new(PageSize::K4, PageSize::from_valid_shift(16), Some([3, 3]));
        for p in [8u64, 1, 7, 6, 5, 0] {
            assert!(!reference(&mut t, &mut ch, p, 12).is_empty(), "every reference misses");
        }
        // Before the final miss only prefetch charges exist (all earlier misses are
        // first references, so no capacity charge).
        let sp = |pages: u64, first: u64| ch.get(0, 12 + pages.trailing_zeros() as u8, first << 12);
        assert_eq!(sp(2, 0).prefetch, 0);
        assert_eq!(sp(4, 4).prefetch, 2);
        assert!(!reference(&mut t, &mut ch, 1, 12).is_empty());
        let sp = |pages: u64, first: u64| ch.get(0, 12 + pages.trailing_zeros() as u8, first << 12);
        assert_eq!(sp(2, 0).prefetch, 1, "prefetch({{0,1}})");
        assert_eq!(sp(4, 4).capacity, 1, "capacity({{4,5,6,7}})");
        // The whole table, by hand: prefetch {0,1}=1 {6,7}=1 {0..3}=1 {4..7}=2
        // {0..7}=5 {0..15}=6; capacity {4..7}=1 {0..7}=1 {0..15}=1.
        let expect_prefetch = [((2, 0), 1), ((2, 4), 0), ((2, 6), 1), ((4, 0), 1), ((4, 4), 2), ((8, 0), 5), ((16, 0), 6), ((2, 8), 0), ((8, 8), 0)];
        for ((n, first), want) in expect_prefetch {
            assert_eq!(sp(n, first).prefetch, want, "prefetch of {n} pages at {first}");
        }
        for ((n, first), want) in [((2, 0), 0), ((2, 4), 0), ((2, 6), 0), ((4, 0), 0), ((8, 0), 1), ((16, 0), 1), ((8, 8), 0)] {
            assert_eq!(sp(n, first).capacity, want, "capacity of {n} pages at {first}");
        }
        // TLB now holds 1, 0, 5 (6 was evicted): tlbcounts follow.
        assert_eq!(sp(2, 0).tlbcount[0], 2);
        assert_eq!(sp(4, 4).tlbcount[0], 1);
        assert_eq!(sp(2, 6).tlbcount[0], 0);
        assert_eq!(sp(8, 0).tlbcount[0], 2);
        assert_eq!(sp(16, 0).tlbcount[0], 1);
    }

    #[test]
    fn promotion_moves_prefetch_charges_out_of_larger_superpages() {
        let mut ch = SuperpageCharges::new(PageSize::K4, PageSize::from_valid_shift(16), None);
        ch.node(0, 13, 0).prefetch = 5;
        ch.node(0, 14, 0).prefetch = 7;
        ch.node(0, 15, 0).prefetch = 3;
        ch.node(0, 14, 0).capacity = 2;
        ch.promoted(0, 13, 0);
        assert_eq!(ch.get(0, 13, 0).prefetch, 0);
        assert_eq!(ch.get(0, 14, 0).prefetch, 2);
        assert_eq!(ch.get(0, 15, 0).prefetch, 0);
        assert_eq!(ch.get(0, 14, 0).capacity, 0);
    }

    proptest! {
        /// tlbcount(P) > 0 exactly when a page inside P is in the TLB, whatever mix of
        /// page sizes the TLB holds (an any-size LRU TLB, pages of 4K-64K).
        #[test]
        fn tlbcount_tracks_tlb_contents(refs in proptest::collection::vec(0u64..128, 1..300), entries in 1usize..9) {
            let mut t = tlb(entries, &[4096, 64 << 10], true);
            let mut ch = SuperpageCharges::new(PageSize::K4, PageSize::from_valid_shift(16), None);
            let mut resident: Vec<TlbPage> = Vec::new(); // pages in the TLB
            for page in refs {
                // Each 64K region is mapped by pages of one size, 4K to 64K.
                let shift = 12 + ((page >> 4) % 5) as u8;
                for c in reference(&mut t, &mut ch, page, shift) {
                    match c {
                        TlbChange::Filled { page, .. } => resident.push(page),
                        TlbChange::Evicted { page, .. } | TlbChange::Invalidated { page, .. } => resident.retain(|&q| q != page),
                    }
                }
                for s in 13..=16u8 {
                    for sp in 0..(128u64 << 12 >> s) {
                        // Charges exist only for superpages larger than the pages inside.
                        if resident.iter().any(|q| q.va >> s == sp && q.size.shift() > s) {
                            continue;
                        }
                        let any = resident.iter().any(|q| q.va >> s == sp);
                        prop_assert_eq!(ch.get(0, s, sp << s).tlbcount[0] > 0, any, "superpage {:#x} of 2^{}", sp << s, s);
                    }
                }
            }
        }
    }
}
