//! Romer's miss charges (ch. 3): for every potential superpage P, `prefetch(P)` and
//! `capacity(P)` count the past TLB misses P would have prevented, and `tlbcount(P)`
//! says whether P or a page inside it is in the TLB (§3.5.2).
//!
//! Potential superpages are the aligned powers of two from twice the base page up to
//! `max` (Romer: 8K to 8M). Their counters live in dense tiers created on first use,
//! so the space is proportional to the regions touched (the paper's ~3 counters per
//! base page).
//!
//! The policy feeds in every change to the watched TLB (mmu/mod.rs) and every miss:
//!
//! - **tlbcount** (§3.5.2): 0 if no translation inside P is in the TLB; 1 if P itself
//!   is, or exactly one of its two halves holds one; 2 if both halves do. The charges
//!   only ask whether it is positive, and for the pages containing a missed page p the
//!   answer is a prefix question: the smallest P ⊃ p with tlbcount(P) > 0 is the
//!   smallest one holding p's nearest neighbour in the TLB. So instead of Romer's
//!   per-node counts (a walk up every size on each fill and each eviction), the
//!   watched TLB's pages are kept sorted and the neighbours found by binary search:
//!   the same values, at a fraction of the simulator's time. (The bookkeeping cycles
//!   *charged* to the simulated machine are the configured per-miss cost either way.)
//!   `tlbcount` answers the full 0/1/2 query for tests and inspection.
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

/// The counters of one potential superpage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Charges {
    pub(crate) prefetch: u32,
    pub(crate) capacity: u32,
    /// Promotion was tried and the region cannot be merged (crosses a VMA, mixed
    /// permissions, shared): not tried again.
    pub(crate) blocked: bool,
}

/// The counters live in dense *tiers*: a tier holds every node of a few consecutive
/// page sizes inside one aligned region, as an implicit binary tree (node 0 the
/// region's page, then its halves, ...). The sizes from `max` down to twice the base
/// page are split into at most `MAX_TIERS` depths, so one page's walk up the sizes reads a
/// few dense blocks found by one hash probe (its `Path`), instead of one hash-map entry
/// per size.
const MAX_TIERS: usize = 4;

/// The stored counters of one potential superpage (8 bytes: a tier's path of nodes
/// spans at most two host cache lines). `capacity == BLOCKED` marks a superpage that
/// cannot be promoted; its capacity is not needed (it is only compared with the
/// threshold).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Node {
    prefetch: u32,
    capacity: u32,
}

const BLOCKED: u32 = u32::MAX;

impl Node {
    fn blocked(&self) -> bool {
        self.capacity == BLOCKED
    }

    fn charge_capacity(&mut self) {
        if self.capacity < BLOCKED - 1 {
            self.capacity += 1;
        }
    }

    fn clear_capacity(&mut self) {
        if !self.blocked() {
            self.capacity = 0;
        }
    }

    fn charges(&self) -> Charges {
        let blocked = self.blocked();
        Charges { prefetch: self.prefetch, capacity: if blocked { 0 } else { self.capacity }, blocked }
    }
}

/// Eight nodes on one host cache line. A tier's nodes are stored in heap order from
/// a line boundary, with a stride of 2^levels nodes (one unused), so the nodes of one
/// page's sizes (one per level) lie on at most two lines.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Line([Node; 8]);

/// The tiers at one depth: sizes `top` down to `top - levels + 1`.
struct Depth {
    top: u8,
    levels: u8,
    lines: Vec<Line>,
    /// Tier of each (ASID, aligned 2^top region).
    tiers: FxHashMap<(Asid, u64), u32>,
    free: Vec<u32>,
}

impl Depth {
    /// Nodes per tier, a multiple of a line's 8 (node 2^levels - 1 is unused).
    fn stride(&self) -> usize {
        (1usize << self.levels).max(8)
    }

    fn node(&self, i: usize) -> &Node {
        &self.lines[i >> 3].0[i & 7]
    }

    fn node_mut(&mut self, i: usize) -> &mut Node {
        &mut self.lines[i >> 3].0[i & 7]
    }

    /// The node of the 2^shift page containing `va` in `tier`.
    #[inline(always)]
    fn index(&self, tier: u32, shift: u8, va: u64) -> usize {
        let r = self.top - shift;
        tier as usize * self.stride() + (1usize << r) - 1 + ((va >> shift) as usize & ((1usize << r) - 1))
    }

    /// The tier of `va`'s region, created if missing.
    fn tier_mut(&mut self, asid: Asid, va: u64) -> u32 {
        let key = (asid, va >> self.top);
        if let Some(&t) = self.tiers.get(&key) {
            return t;
        }
        let lines = self.stride() / 8;
        let t = match self.free.pop() {
            Some(t) => {
                self.lines[t as usize * lines..(t as usize + 1) * lines].fill(Line::default());
                t
            }
            None => {
                self.lines.resize(self.lines.len() + lines, Line::default());
                (self.lines.len() / lines - 1) as u32
            }
        };
        self.tiers.insert(key, t);
        t
    }
}

/// The tier at every depth for one region of the deepest depth.
type Path = [u32; MAX_TIERS];

/// A TLB page as one integer ordered by (ASID, address): ASID in the high word, the
/// page-aligned address in the low one with log2 of the size in its low bits (a page
/// is at least 4K). One compare per step of a binary search, one per page in a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct PageKey(u128);

impl PageKey {
    fn of(p: &TlbPage) -> PageKey {
        PageKey(((p.asid as u128) << 64) | (p.va | p.size.shift() as u64) as u128)
    }
    /// Sorts before every page of `asid` at `va` or above.
    fn at(asid: Asid, va: u64) -> PageKey {
        PageKey(((asid as u128) << 64) | va as u128)
    }
    fn asid(self) -> Asid {
        (self.0 >> 64) as Asid
    }
    fn va(self) -> u64 {
        self.0 as u64 & !0xfff
    }
    fn shift(self) -> u8 {
        (self.0 & 0x3f) as u8
    }
}

/// The top of the LRU stack of pages evicted from a TLB (§3.5.3), most recent first,
/// with a counting filter in front: most misses are to pages not in it, and most fills
/// are of such pages, so most look-ups skip the scan.
#[derive(Default)]
struct EvictedStack {
    pages: VecDeque<PageKey>,
    /// How many pages in the stack hash to each bucket (a power of two of them).
    filter: Vec<u16>,
}

impl EvictedStack {
    fn bucket(&self, k: PageKey) -> usize {
        let h = ((k.0 as u64) ^ (k.0 >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & (self.filter.len() - 1)
    }

    /// 1 for the most recently evicted page; `None` if `k` is not in the stack.
    fn depth(&self, k: PageKey) -> Option<u32> {
        if self.filter.is_empty() || self.filter[self.bucket(k)] == 0 {
            return None;
        }
        self.pages.iter().position(|q| *q == k).map(|i| i as u32 + 1)
    }

    /// Remove `k` (refilled into the TLB) if it is in the stack.
    fn remove(&mut self, k: PageKey) {
        if let Some(d) = self.depth(k) {
            self.pages.remove(d as usize - 1);
            let b = self.bucket(k);
            self.filter[b] -= 1;
        }
    }

    /// Push an evicted page, keeping the `keep` most recent.
    fn push(&mut self, k: PageKey, keep: usize) {
        if self.filter.is_empty() {
            self.filter = vec![0; (keep * 8).next_power_of_two()];
        }
        self.pages.push_front(k);
        let b = self.bucket(k);
        self.filter[b] += 1;
        while self.pages.len() > keep {
            let old = self.pages.pop_back().expect("longer than keep");
            let b = self.bucket(old);
            self.filter[b] -= 1;
        }
    }

    fn retain(&mut self, keep: impl Fn(&PageKey) -> bool) {
        self.pages.retain(keep);
        self.filter.fill(0);
        for i in 0..self.pages.len() {
            let b = self.bucket(self.pages[i]);
            self.filter[b] += 1;
        }
    }
}

/// One watched TLB's contents, and the top of its LRU stack of evicted pages for
/// capacity charges.
#[derive(Default)]
struct WatchedTlb {
    /// Pages now in the TLB, sorted: the pages of one superpage are adjacent, and a
    /// page's nearest neighbours are next to where it would sit.
    resident: Vec<PageKey>,
    /// The N most recently evicted pages (ONLINE only).
    recent: EvictedStack,
    /// The last position searched for (a miss's fill goes where its charge looked).
    hint: usize,
}

impl WatchedTlb {
    /// Where a page at (asid, va) sits (or would sit) in `resident`.
    fn search(&self, asid: Asid, va: u64) -> usize {
        let k = PageKey::at(asid, va);
        self.resident.partition_point(|q| *q < k)
    }

    /// `search`, trying the last position first.
    fn position(&mut self, asid: Asid, va: u64) -> usize {
        let k = PageKey::at(asid, va);
        let r = &self.resident;
        let at = |i: usize| (i == 0 || r[i - 1] < k) && (i == r.len() || r[i] >= k);
        // The hint, or the place before it when an eviction came in between.
        let h = self.hint.min(r.len());
        self.hint = if at(h) {
            h
        } else if h > 0 && at(h - 1) {
            h - 1
        } else {
            self.search(asid, va)
        };
        self.hint
    }

    /// The smallest superpage size 2^s containing `va` and a page in the TLB (s ≥
    /// that page's size), or 64 if none: tlbcount(P) > 0 exactly for P of 2^s and up.
    fn covered_from(&mut self, asid: Asid, va: u64) -> u8 {
        let i = self.position(asid, va);
        let mut from = 64u8;
        for q in [i.checked_sub(1).and_then(|j| self.resident.get(j)), self.resident.get(i)].into_iter().flatten() {
            if q.asid() == asid {
                let differ = (64 - (q.va() ^ va).leading_zeros()) as u8;
                from = from.min(differ.max(q.shift()));
            }
        }
        from
    }
}

/// Charges of every potential superpage of every address space.
///
/// Stored in dense tiers created on first use, so the space is proportional to the
/// regions touched (Romer §3.5.2 counts ~3 counters per base page).
pub(crate) struct SuperpageCharges {
    base: u8,
    max: u8,
    /// The depth holding each size (a table: this is on every miss's path).
    depth_at: [u8; 64],
    depths: Vec<Depth>,
    /// The path of every (ASID, region of the deepest depth) touched.
    paths: FxHashMap<(Asid, u64), Path>,
    /// The last path used (neighbouring misses share it).
    last: Option<((Asid, u64), Path)>,
    /// The watched TLBs (data, and instruction if separate).
    tlbs: [WatchedTlb; 2],
    /// ONLINE's capacity charges: the watched TLBs' sizes N.
    capacity: Option<[usize; 2]>,
    /// Scratch for the superpages a miss charges capacity to: per TLB page, the sizes
    /// of the charged superpages it is the first page of (reused: no allocation per
    /// miss).
    cover: Vec<(u64, u64)>,
}

impl SuperpageCharges {
    /// Superpages from 2^(base+1) to 2^max bytes. `tlb_entries`: the watched TLBs'
    /// sizes, if capacity charges are kept.
    pub(crate) fn new(base: PageSize, max: PageSize, tlb_entries: Option<[usize; 2]>) -> SuperpageCharges {
        let (base, max) = (base.shift(), max.shift().max(base.shift()));
        let sizes = max - base;
        let per_tier = sizes.div_ceil(MAX_TIERS as u8).max(4);
        let mut depths = Vec::new();
        let mut top = max as i32;
        while top > base as i32 {
            let levels = (per_tier as i32).min(top - base as i32) as u8;
            depths.push(Depth { top: top as u8, levels, lines: Vec::new(), tiers: FxHashMap::default(), free: Vec::new() });
            top -= levels as i32;
        }
        let mut depth_at = [0u8; 64];
        for (d, depth) in depths.iter().enumerate() {
            for s in depth.top + 1 - depth.levels..=depth.top {
                depth_at[s as usize] = d as u8;
            }
        }
        SuperpageCharges {
            base,
            max,
            depth_at,
            depths,
            paths: FxHashMap::default(),
            last: None,
            tlbs: Default::default(),
            capacity: tlb_entries,
            cover: Vec::new(),
        }
    }

    #[inline(always)]
    fn depth_of(&self, shift: u8) -> usize {
        self.depth_at[shift as usize] as usize
    }

    /// The path's key: every page inside one region of the deepest depth shares it.
    #[inline(always)]
    fn path_key(&self, asid: Asid, va: u64) -> (Asid, u64) {
        (asid, va >> self.depths.last().map_or(63, |d| d.top))
    }

    /// The tiers for `va`, created where missing.
    #[inline]
    fn path_mut(&mut self, asid: Asid, va: u64) -> Path {
        let key = self.path_key(asid, va);
        if let Some((k, p)) = &self.last {
            if *k == key {
                return *p;
            }
        }
        let path = match self.paths.get(&key) {
            Some(p) => *p,
            None => {
                let mut path = [u32::MAX; MAX_TIERS];
                for (d, depth) in self.depths.iter_mut().enumerate() {
                    path[d] = depth.tier_mut(asid, va);
                }
                self.paths.insert(key, path);
                path
            }
        };
        self.last = Some((key, path));
        path
    }

    /// The tier at `depth` for `va`, if it exists.
    fn tier(&self, asid: Asid, va: u64, depth: usize) -> Option<u32> {
        let d = &self.depths[depth];
        d.tiers.get(&(asid, va >> d.top)).copied()
    }

    #[inline(always)]
    fn at(&mut self, path: &Path, shift: u8, va: u64) -> &mut Node {
        let d = self.depth_of(shift);
        let depth = &mut self.depths[d];
        let i = depth.index(path[d], shift, va);
        depth.node_mut(i)
    }

    /// The charges of the superpage of 2^shift bytes containing `va` (zero if none).
    pub(crate) fn get(&self, asid: Asid, shift: u8, va: u64) -> Charges {
        if shift <= self.base || shift > self.max {
            return Charges::default();
        }
        let d = self.depth_of(shift);
        let depth = &self.depths[d];
        self.tier(asid, va, d).map_or_else(Charges::default, |t| depth.node(depth.index(t, shift, va)).charges())
    }

    fn node(&mut self, asid: Asid, shift: u8, va: u64) -> &mut Node {
        let path = self.path_mut(asid, va);
        self.at(&path, shift, va)
    }

    /// Every (asid, shift, base) with a nonzero counter, for OFFLINE's selection.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Asid, u8, u64, Charges)> + '_ {
        self.depths.iter().flat_map(move |depth| {
            let mut tiers: Vec<_> = depth.tiers.iter().map(|(&(asid, r), &t)| (asid, r, t)).collect();
            tiers.sort_unstable();
            tiers.into_iter().flat_map(move |(asid, r, t)| {
                (0..depth.levels).flat_map(move |lv| {
                    let shift = depth.top - lv;
                    (0..1u64 << lv).filter_map(move |i| {
                        let va = (r << depth.top) + (i << shift);
                        let c = depth.node(depth.index(t, shift, va)).charges();
                        (c != Charges::default()).then_some((asid, shift, va, c))
                    })
                })
            })
        })
    }

    /// Apply a change to a watched TLB's contents.
    pub(crate) fn apply(&mut self, c: &TlbChange) {
        match *c {
            TlbChange::Filled { slot, page } => {
                let t = &mut self.tlbs[slot as usize];
                let (i, k) = (t.position(page.asid, page.va), PageKey::of(&page));
                t.resident.insert(i, k);
                t.recent.remove(k);
            }
            TlbChange::Evicted { slot, page } | TlbChange::Invalidated { slot, page } => {
                let t = &mut self.tlbs[slot as usize];
                let (i, k) = (t.search(page.asid, page.va), PageKey::of(&page));
                if t.resident.get(i) == Some(&k) {
                    t.resident.remove(i);
                }
                // Only evictions enter the LRU stack: an invalidated page changed
                // (unmapped, re-protected or merged into a superpage).
                if let (Some(entries), TlbChange::Evicted { .. }) = (self.capacity, c) {
                    t.recent.push(k, entries[slot as usize].max(1));
                }
            }
        }
    }

    #[cfg(test)]
    /// tlbcount(P) for the superpage of 2^shift bytes containing `va` (§3.5.2): 1 if
    /// P itself is in the TLB, else how many of its halves hold a page in it.
    pub(crate) fn tlbcount(&self, slot: u8, asid: Asid, shift: u8, va: u64) -> u8 {
        let t = &self.tlbs[slot as usize];
        let base = va >> shift << shift;
        let holds = |lo: u64, s: u8| {
            let i = t.search(asid, lo);
            t.resident[i..].iter().take_while(|q| q.asid() == asid && q.va() >> s == lo >> s).any(|q| q.shift() <= s)
        };
        if t.resident.iter().any(|q| q.asid() == asid && q.va() == base && q.shift() == shift) {
            return 1;
        }
        holds(base, shift - 1) as u8 + holds(base + (1 << (shift - 1)), shift - 1) as u8
    }

    /// Charge a miss to `va` (mapped by a page of `size`) in `slot`'s TLB, before the
    /// miss's own fill is applied. Appends to `ready` every superpage (log2 size, base)
    /// whose charges reached a threshold, `prefetch_at[s]` / `capacity_at[s]`
    /// (u32::MAX: never), largest first.
    ///
    /// The caller promotes (or blocks) every superpage in `ready`, so after a miss no
    /// unblocked counter is at its threshold: a counter this miss does not charge
    /// cannot reach it, and is not read.
    #[allow(clippy::too_many_arguments)] // the per-miss path: the tables are the policy's, passed in
    pub(crate) fn charge_miss(
        &mut self,
        slot: u8,
        asid: Asid,
        va: u64,
        size: PageSize,
        prefetch_at: &[u32; 64],
        capacity_at: &[u32; 64],
        ready: &mut Vec<(u8, u64)>,
    ) {
        ready.clear();
        // Prefetch charges go to the pages from 2^from up (§3.3.2).
        let from = self.tlbs[slot as usize].covered_from(asid, va).max(size.shift() + 1);
        if from <= self.max {
            let deepest = self.depths.len() - 1;
            let path = if from <= self.depths[deepest].top {
                self.path_mut(asid, va)
            } else {
                // Only the shallow tiers are charged (the common case when the TLB's
                // pages are far apart): no path lookup, no deep tiers created.
                let mut path = [u32::MAX; MAX_TIERS];
                for (d, tier) in path.iter_mut().enumerate().take(self.depth_of(from) + 1) {
                    *tier = self.depths[d].tier_mut(asid, va);
                }
                path
            };
            for s in (from..=self.max).rev() {
                let c = self.at(&path, s, va);
                c.prefetch += 1;
                if (c.prefetch >= prefetch_at[s as usize] || c.capacity >= capacity_at[s as usize]) && !c.blocked() {
                    ready.push((s, va >> s << s));
                }
            }
        }
        if self.capacity.is_some() {
            self.charge_capacity(slot, asid, va, size, capacity_at, ready);
            ready.sort_by_key(|r| std::cmp::Reverse(r.0));
        }
    }

    /// Whether the superpage of 2^shift bytes at `base` is at a threshold and not blocked.
    pub(crate) fn at_threshold(&self, asid: Asid, shift: u8, base: u64, prefetch_at: &[u32; 64], capacity_at: &[u32; 64]) -> bool {
        let c = self.get(asid, shift, base);
        !c.blocked && (c.prefetch >= prefetch_at[shift as usize] || c.capacity >= capacity_at[shift as usize])
    }

    /// ONLINE's capacity charges for a miss to p (§3.5.3).
    fn charge_capacity(&mut self, slot: u8, asid: Asid, va: u64, size: PageSize, capacity_at: &[u32; 64], ready: &mut Vec<(u8, u64)>) {
        let st = &self.tlbs[slot as usize];
        let p = PageKey::of(&TlbPage { asid, va: size.align_down(va), size });
        let Some(lru_depth) = st.recent.depth(p) else {
            return;
        };
        let lo = st.resident.partition_point(|q| q.asid() < asid);
        let hi = st.resident.partition_point(|q| q.asid() <= asid);
        let mine = &st.resident[lo..hi];
        if (mine.len() as u32) < lru_depth {
            return;
        }
        // coverage(Q) per superpage size: the pages inside Q are a run of `mine`. Each
        // charged Q is noted on its run's first page (a bit per size), so the charges
        // go page by page, one path lookup each.
        let mut cover = std::mem::take(&mut self.cover);
        cover.clear();
        cover.extend(mine.iter().map(|q| (q.va(), 0u64)));
        let smallest = mine.iter().map(|q| q.shift()).min().unwrap_or(self.max);
        for s in smallest + 1..=self.max {
            let mut i = 0;
            while i < mine.len() {
                let first = i;
                let vpn = mine[i].va() >> s;
                let mut n = 0;
                while i < mine.len() && mine[i].va() >> s == vpn {
                    n += (mine[i].shift() < s) as u32;
                    i += 1;
                }
                if n >= lru_depth {
                    cover[first].1 |= 1 << s;
                }
            }
        }
        for &(qva, mut sizes) in &cover {
            if sizes == 0 {
                continue;
            }
            let path = self.path_mut(asid, qva);
            while sizes != 0 {
                let s = sizes.trailing_zeros() as u8;
                sizes &= sizes - 1;
                let node = self.at(&path, s, qva);
                node.charge_capacity();
                if node.capacity >= capacity_at[s as usize] && !node.blocked() {
                    // Q need not contain p (Fig. 3-2 charges {4..7} for a miss to 1).
                    ready.push((s, qva >> s << s));
                }
            }
        }
        self.cover = cover;
    }

    /// Account a promotion of the superpage of 2^shift bytes at `base` (§3.3.2).
    pub(crate) fn promoted(&mut self, asid: Asid, shift: u8, base: u64) {
        let charged = self.get(asid, shift, base).prefetch;
        for s in shift..=self.max {
            let c = self.node(asid, s, base);
            if s > shift {
                c.prefetch = c.prefetch.saturating_sub(charged);
            }
            c.clear_capacity();
        }
        // Clear the charges inside P (the TLB contents stay exact: the shootdowns of
        // its old pages arrive as invalidations).
        for s in self.base + 1..=shift {
            let d = self.depth_of(s);
            for i in 0..1u64 << (shift - s) {
                let va = base + (i << s);
                if let Some(t) = self.tier(asid, va, d) {
                    let depth = &mut self.depths[d];
                    let c = depth.node_mut(depth.index(t, s, va));
                    c.prefetch = 0;
                    c.clear_capacity();
                }
            }
        }
    }

    /// Never try to promote this superpage again.
    pub(crate) fn block(&mut self, asid: Asid, shift: u8, va: u64) {
        self.node(asid, shift, va).capacity = BLOCKED;
    }

    /// Forget an address space (its ASID may be reused).
    pub(crate) fn drop_space(&mut self, asid: Asid) {
        for depth in &mut self.depths {
            let gone: Vec<u32> = depth.tiers.iter().filter(|(k, _)| k.0 == asid).map(|(_, &t)| t).collect();
            depth.tiers.retain(|k, _| k.0 != asid);
            depth.free.extend(gone);
        }
        self.paths.retain(|k, _| k.0 != asid);
        self.last = None;
        for t in self.tlbs.iter_mut() {
            t.recent.retain(|p| p.asid() != asid);
            t.resident.retain(|p| p.asid() != asid);
        }
    }

    /// Potential superpages with a nonzero counter (for the stats document).
    pub(crate) fn len(&self) -> usize {
        self.iter().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Bytes, Serves};
    use crate::mmu::tlb::TlbConfig;
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
            splinter: false,
            pairs: false,
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
        ch.charge_miss(0, 0, va, size, &NEVER, &NEVER, &mut Vec::new());
        t.fill(va, 0, &Translation { pa: size.align_down(va), size, perms: crate::addr::Perms::RW_USER }, None);
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
        let tc = |pages: u64, first: u64| ch.tlbcount(0, 0, 12 + pages.trailing_zeros() as u8, first << 12);
        assert_eq!(tc(2, 0), 2);
        assert_eq!(tc(4, 4), 1);
        assert_eq!(tc(2, 6), 0);
        assert_eq!(tc(8, 0), 2);
        assert_eq!(tc(16, 0), 1);
    }

    /// A capacity charge can bring a superpage that does not contain the missed page
    /// to its threshold: Fig. 3-2's final miss to 1 makes {4..7} ready, not {0..3}.
    #[test]
    fn capacity_charges_ready_the_superpage_they_charge() {
        let mut t = tlb(3, &[4096], false);
        let mut ch = SuperpageCharges::new(PageSize::K4, PageSize::from_valid_shift(16), Some([3, 3]));
        for p in [8u64, 1, 7, 6, 5, 0] {
            reference(&mut t, &mut ch, p, 12);
        }
        let mut capacity_at = NEVER;
        capacity_at[14] = 1;
        let mut ready = Vec::new();
        ch.charge_miss(0, 0, 1 << 12, PageSize::K4, &NEVER, &capacity_at, &mut ready);
        assert_eq!(ready, vec![(14, 4 << 12)]);
        assert!(ch.at_threshold(0, 14, 4 << 12, &NEVER, &capacity_at));
        assert!(!ch.at_threshold(0, 14, 0, &NEVER, &capacity_at));
        ch.block(0, 14, 4 << 12);
        assert!(!ch.at_threshold(0, 14, 4 << 12, &NEVER, &capacity_at), "a blocked superpage is never ready");
        assert!(ch.get(0, 14, 4 << 12).blocked);
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
        #![proptest_config(crate::testing::proptest_config(256))]
        /// Against a brute-force model of §3.3.2 and §3.5.2 over the same TLB (an
        /// any-size LRU TLB, pages of 4K-64K): every miss charges prefetch(P) for each
        /// P ⊃ p holding a page in the TLB, and tlbcount(P) is 1 when P itself is in
        /// the TLB, else the number of its halves holding one.
        #[test]
        fn charges_and_tlbcount_match_a_brute_force_model(refs in proptest::collection::vec(0u64..128, 1..300), entries in 1usize..9) {
            let mut t = tlb(entries, &[4096, 64 << 10], true);
            let mut ch = SuperpageCharges::new(PageSize::K4, PageSize::from_valid_shift(16), None);
            let mut resident: Vec<TlbPage> = Vec::new(); // pages in the TLB
            let mut prefetch: std::collections::HashMap<(u8, u64), u32> = Default::default();
            let inside = |resident: &[TlbPage], s: u8, sp: u64| resident.iter().any(|q| q.va >> s == sp && q.size.shift() <= s);
            for page in refs {
                // Each 64K region is mapped by pages of one size, 4K to 64K.
                let shift = 12 + ((page >> 4) % 5) as u8;
                let va = page << 12;
                if !resident.iter().any(|q| q.va >> q.size.shift() == va >> q.size.shift()) {
                    for s in shift + 1..=16 {
                        if inside(&resident, s, va >> s) {
                            *prefetch.entry((s, va >> s)).or_default() += 1;
                        }
                    }
                }
                for c in reference(&mut t, &mut ch, page, shift) {
                    match c {
                        TlbChange::Filled { page, .. } => resident.push(page),
                        TlbChange::Evicted { page, .. } | TlbChange::Invalidated { page, .. } => resident.retain(|&q| q != page),
                    }
                }
                for s in 13..=16u8 {
                    for sp in 0..(128u64 << 12 >> s) {
                        prop_assert_eq!(ch.get(0, s, sp << s).prefetch, prefetch.get(&(s, sp)).copied().unwrap_or(0), "prefetch of {:#x} (2^{})", sp << s, s);
                        // tlbcount is defined for superpages larger than the pages inside.
                        if resident.iter().any(|q| q.va >> s == sp && q.size.shift() > s) {
                            continue;
                        }
                        let whole = resident.iter().any(|q| q.va == sp << s && q.size.shift() == s);
                        let halves = inside(&resident, s - 1, sp * 2) as u8 + inside(&resident, s - 1, sp * 2 + 1) as u8;
                        prop_assert_eq!(ch.tlbcount(0, 0, s, sp << s), if whole { 1 } else { halves }, "tlbcount of {:#x} (2^{})", sp << s, s);
                    }
                }
            }
        }
    }
}
