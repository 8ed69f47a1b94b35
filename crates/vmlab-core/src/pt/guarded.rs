//! Guarded page table (Liedtke; Elphinstone §3.7, ch. 4) with a single node size
//! S = 2^s entries (Elphinstone's G2 ... G256).
//!
//! The virtual page number (VA bits 12 .. va_bits) is read as D digits of s bits, the
//! top digit padded with zeros. Every node decodes one digit; every entry carries a
//! guard — the digits skipped between the digit its node decodes and the next node (or
//! the page) — so single-entry levels never exist: inserting splits an entry at the
//! first digit where its guard and the new page differ, and removing a page merges a
//! node left with one entry back into its parent's guard. Every node therefore holds at
//! least two entries (Elphinstone's Lemma 1), giving at most S(k−1) node entries for k
//! mapped pages (Theorem 1; 2(k−1) for G2, Liedtke's "small" GPT).
//!
//! Entries are 16 bytes (guard and its length, then a node pointer or a PTE). The root
//! entry of each address space lives in a 16-byte slot of its own. A walk reads the root
//! entry, then one entry per node on the path: each is a sequential step.
//!
//! Aligning digits to the page number's low end is what produces Elphinstone's
//! spill-over effect: the top digit is partial, and nodes fill unevenly as the number
//! of mapped pages crosses powers of S.
//!
//! Pages of 2^(12 + k·s) bytes (up to 1 GiB) sit at any level: their leaf's guard stops
//! k digits early, and those digits are the page offset ("a GPT page sits at any
//! level"). G2 thus maps every power of two; G16 maps 4K, 64K, 1M, 16M, 256M.

use super::slab::Slab;
use super::{FastPaths, NoSplit, NoWalkCaches, PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::BuddyAllocator;
use serde::{Deserialize, Serialize};
use std::cell::Cell;

const ENTRY_BYTES: u64 = 16;
const EMPTY: u8 = 0;
const LEAF: u8 = 1;
const NODE: u8 = 2;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GuardedConfig {
    /// Entries per node S (a power of two, 2 ..= 256): G2 ... G256.
    pub node_entries: usize,
    /// Virtual-address bits translated (pages above 2^va_bits are an error).
    pub va_bits: u8,
}

impl Default for GuardedConfig {
    fn default() -> Self {
        GuardedConfig { node_entries: 16, va_bits: 48 }
    }
}

#[derive(Clone, Copy, Default, Debug)]
struct Entry {
    kind: u8,
    /// Guard length in digits, and the guard's digits packed (most significant first).
    glen: u8,
    /// Node: the node's index (simulator-only; it sits in the padding, so an entry is
    /// still 24 bytes of host memory).
    node: u32,
    guard: u64,
    /// Leaf: physical page | page-size digits << 4 | permission bits. Node: the node's
    /// simulated physical address, so a walk step reads one host entry, not the entry
    /// and then the node's record.
    val: u64,
}

#[derive(Clone, Copy)]
struct Node {
    pa: u64,
    live: u16,
}

/// Where an entry lives: an address space's root slot, or entry i of the node array.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Root(Asid),
    At(usize),
}

pub struct GuardedPageTable {
    s: u32,
    /// Digits in a page number.
    digits: u32,
    va_bits: u8,
    nodes: Vec<Node>,
    entries: Vec<Entry>,
    free_nodes: Vec<u32>,
    live_nodes: u64,
    node_slab: Slab,
    root_slab: Slab,
    /// Per ASID: root entry and its simulated address.
    roots: Vec<Option<(Entry, u64)>>,
    mapped: u64,
    /// Page sizes: 2^(12 + k·s) bytes up to 1 GiB — a leaf k digits above the bottom.
    sizes: Vec<PageSize>,
    /// Simulator-only (nothing simulated reads or changes them): the walks `prefetch`
    /// started for later accesses, each advanced one node per call — interleaved
    /// pointer chasing, so the deep entries of a small-node table (G2: 17 dependent
    /// reads) are in the host cache when the engine walks. A ring, oldest overwritten.
    chases: Box<[Cell<Chase>]>,
    next_chase: Cell<usize>,
    /// Entries the last walk read, to start a chase near where its misses begin.
    last_walk_depth: u32,
    /// Simulator-only, like `chases`: where walks passed the depth a chase starts at,
    /// by the page-number prefix above it (a direct-mapped table, entries overwritten).
    /// `prefetch` starts a chase there instead of descending from the root, so the top
    /// of a path (read again by the walk itself) is read once per access, not twice.
    chase_starts: Box<[Cell<ChaseStart>]>,
    /// Digits decoded above the last recorded chase start: the prefix `prefetch` looks up.
    start_digits: Cell<u32>,
}

/// A recorded chase start: the entry a walk read after decoding `d` digits of a page
/// number whose first `d` digits are `prefix`, in address space `asid`.
#[derive(Clone, Copy)]
struct ChaseStart {
    prefix: u64,
    asid: Asid,
    d: u32,
    entry: u32,
}

impl ChaseStart {
    const NONE: ChaseStart = ChaseStart { prefix: u64::MAX, asid: Asid::MAX, d: u32::MAX, entry: u32::MAX };
}

/// Slots of `chase_starts` (a power of two).
const CHASE_STARTS: usize = 4096;

/// A walk `prefetch` started: the next entry to read (already prefetched into the host
/// cache), the digit its node decodes, and the page number sought.
#[derive(Clone, Copy)]
struct Chase {
    key: u64,
    entry: u32,
    d: u32,
}

impl Chase {
    // No page number is u64::MAX (VA bits 12..64 give at most 52 bits).
    const IDLE: Chase = Chase { key: u64::MAX, entry: u32::MAX, d: 0 };
}

/// Chases in flight: the engine prefetches 12 records ahead, one call per page.
const CHASES: usize = 12;
/// Calls a chase can count on before its walk (gups: a read and a write per page).
const CHASE_STEPS: u32 = 6;

impl GuardedPageTable {
    pub fn new(cfg: &GuardedConfig) -> Result<GuardedPageTable> {
        let n = cfg.node_entries;
        if !(2..=256).contains(&n) || !n.is_power_of_two() {
            return Err(Error::config("page_table.guarded.node_entries", "must be a power of two from 2 to 256"));
        }
        if !(20..=64).contains(&cfg.va_bits) {
            return Err(Error::config("page_table.guarded.va_bits", "must be between 20 and 64"));
        }
        let s = n.trailing_zeros();
        let t = cfg.va_bits as u32 - 12;
        Ok(GuardedPageTable {
            s,
            digits: t.div_ceil(s),
            va_bits: cfg.va_bits,
            nodes: Vec::new(),
            entries: Vec::new(),
            free_nodes: Vec::new(),
            live_nodes: 0,
            node_slab: Slab::new(n as u64 * ENTRY_BYTES),
            root_slab: Slab::new(ENTRY_BYTES),
            roots: Vec::new(),
            mapped: 0,
            sizes: (0..).map(|k| 12 + k * s).take_while(|&sh| sh <= 30 && sh < cfg.va_bits as u32).map(|sh| PageSize::from_valid_shift(sh as u8)).collect(),
            chases: (0..CHASES).map(|_| Cell::new(Chase::IDLE)).collect(),
            next_chase: Cell::new(0),
            last_walk_depth: 0,
            chase_starts: (0..CHASE_STARTS).map(|_| Cell::new(ChaseStart::NONE)).collect(),
            start_digits: Cell::new(0),
        })
    }

    #[inline]
    fn chase_start_slot(prefix: u64, d: u32, asid: Asid) -> usize {
        let h = (prefix ^ ((d as u64) << 56) ^ ((asid as u64) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - CHASE_STARTS.trailing_zeros())) as usize
    }

    /// Node entries a chase descends before its own steps: it is left the last
    /// CHASE_STEPS entries of the previous walk's depth.
    #[inline]
    fn chase_skip(&self) -> u32 {
        self.last_walk_depth.saturating_sub(CHASE_STEPS + 1)
    }

    /// One step of a chase from entry `e` (read at digit `d`): the next entry on the
    /// path to `key`, prefetched, or IDLE where the path ends. Reads only; the indices
    /// are checked, since the table may have changed since the chase began.
    #[inline]
    fn chase_from(&self, e: Entry, key: u64, d: u32) -> Chase {
        // A node decodes a digit below the guard: a stale chase can hold any `d`.
        if e.kind != NODE || d + e.glen as u32 >= self.digits || !self.guard_matches(&e, key, d) {
            return Chase::IDLE;
        }
        let d = d + e.glen as u32;
        let entry = e.node as usize * self.entries_per_node() + self.digit(key, d);
        match self.entries.get(entry) {
            Some(next) => {
                crate::host::prefetch(next);
                Chase { key, entry: entry as u32, d: d + 1 }
            }
            None => Chase::IDLE,
        }
    }

    #[inline]
    fn chase_step(&self, c: Chase) -> Chase {
        match self.entries.get(c.entry as usize) {
            Some(&e) => self.chase_from(e, c.key, c.d),
            None => Chase::IDLE,
        }
    }

    fn entries_per_node(&self) -> usize {
        1 << self.s
    }

    /// `len` digits of `key` starting at digit `from` (0 = most significant).
    #[inline]
    fn digits_of(&self, key: u64, from: u32, len: u32) -> u64 {
        if len == 0 {
            return 0;
        }
        let shift = self.s * (self.digits - from - len);
        let bits = self.s * len;
        let v = key.checked_shr(shift).unwrap_or(0);
        if bits >= 64 {
            v
        } else {
            v & ((1u64 << bits) - 1)
        }
    }

    #[inline]
    fn digit(&self, key: u64, d: u32) -> usize {
        self.digits_of(key, d, 1) as usize
    }

    /// Digit i of a guard of `glen` digits.
    fn guard_digit(&self, e: &Entry, i: u32) -> usize {
        ((e.guard >> (self.s * (e.glen as u32 - 1 - i))) & ((1 << self.s) - 1)) as usize
    }

    /// Common leading digits of `e`'s guard and `key` from digit `d`.
    fn common(&self, e: &Entry, key: u64, d: u32) -> u32 {
        let g = e.glen as u32;
        (0..g).find(|&i| self.guard_digit(e, i) != self.digit(key, d + i)).unwrap_or(g)
    }

    /// Whether `e`'s whole guard matches `key` from digit `d`: one masked compare of
    /// the packed digits (a guard holds exactly its `glen` digits), where `common`
    /// counts digit by digit (map and unmap need the count; a walk does not).
    #[inline]
    fn guard_matches(&self, e: &Entry, key: u64, d: u32) -> bool {
        self.digits_of(key, d, e.glen as u32) == e.guard
    }

    fn get(&self, slot: Slot) -> Entry {
        match slot {
            Slot::Root(a) => self.roots[a as usize].expect("live space").0,
            Slot::At(i) => self.entries[i],
        }
    }

    fn set(&mut self, slot: Slot, e: Entry) {
        match slot {
            Slot::Root(a) => self.roots[a as usize].as_mut().expect("live space").0 = e,
            Slot::At(i) => self.entries[i] = e,
        }
    }

    fn key_of(&self, va: u64) -> Result<u64> {
        if self.va_bits < 64 && va >> self.va_bits != 0 {
            return Err(Error::Sim(format!("virtual address {va:#x} is beyond the guarded table's {} bits (page_table.guarded.va_bits)", self.va_bits)));
        }
        Ok(va >> 12)
    }

    fn alloc_node(&mut self, mem: &mut BuddyAllocator) -> Result<u32> {
        let pa = self.node_slab.alloc(mem)?;
        let per = self.entries_per_node();
        let idx = match self.free_nodes.pop() {
            Some(i) => {
                self.nodes[i as usize] = Node { pa, live: 0 };
                self.entries[i as usize * per..(i as usize + 1) * per].fill(Entry::default());
                i
            }
            None => {
                self.nodes.push(Node { pa, live: 0 });
                self.entries.resize(self.nodes.len() * per, Entry::default());
                (self.nodes.len() - 1) as u32
            }
        };
        self.live_nodes += 1;
        Ok(idx)
    }

    fn free_node(&mut self, mem: &mut BuddyAllocator, n: u32) {
        self.node_slab.free(mem, self.nodes[n as usize].pa);
        self.free_nodes.push(n);
        self.live_nodes -= 1;
    }

    /// Follow `key` to its leaf, recording the slots visited (root first) in `trail` if
    /// given. None if unmapped.
    fn find(&self, asid: Asid, key: u64, mut trail: Option<&mut Vec<Slot>>) -> Option<Slot> {
        self.roots.get(asid as usize)?.as_ref()?;
        let per = self.entries_per_node();
        let mut slot = Slot::Root(asid);
        let mut d = 0u32;
        loop {
            if let Some(t) = trail.as_mut() {
                t.push(slot);
            }
            let e = self.get(slot);
            if e.kind == EMPTY || !self.guard_matches(&e, key, d) {
                return None;
            }
            d += e.glen as u32;
            if e.kind == LEAF {
                return Some(slot);
            }
            slot = Slot::At(e.node as usize * per + self.digit(key, d));
            d += 1;
        }
    }

    fn leaf_translation(&self, e: &Entry) -> Translation {
        let k = ((e.val >> 4) & 0xff) as u32;
        Translation { pa: e.val & !0xfff, size: PageSize::from_valid_shift((12 + k * self.s) as u8), perms: Perms::from_bits(e.val as u8 & 0xf) }
    }

    fn free_subtree(&mut self, mem: &mut BuddyAllocator, e: Entry) {
        if e.kind == LEAF {
            self.mapped -= 1;
        } else if e.kind == NODE {
            let per = self.entries_per_node();
            let n = e.node as usize;
            for i in 0..per {
                let c = self.entries[n * per + i];
                self.free_subtree(mem, c);
            }
            self.free_node(mem, n as u32);
        }
    }
}

impl PageTable for GuardedPageTable {
    type Caches = NoWalkCaches;

    fn kind(&self) -> &'static str {
        "guarded"
    }

    fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        if self.roots.len() <= asid as usize {
            self.roots.resize(asid as usize + 1, None);
        }
        if self.roots[asid as usize].is_none() {
            let pa = self.root_slab.alloc(mem)?;
            self.roots[asid as usize] = Some((Entry::default(), pa));
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let Some(Some((root, pa))) = self.roots.get(asid as usize).copied() else { return };
        self.free_subtree(mem, root);
        self.root_slab.free(mem, pa);
        self.roots[asid as usize] = None;
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        if !self.sizes.contains(&size) {
            return Err(Error::config(
                "os.page_size",
                format!(
                    "a guarded table with {}-entry nodes maps pages of 2^(12+{}k) bytes ({}), not {size}",
                    1u32 << self.s,
                    self.s,
                    self.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        // A page of 2^(12 + k·s) bytes is a leaf whose guard stops k digits early.
        let k = (size.shift() as u32 - 12) / self.s;
        let end = self.digits - k;
        let key = self.key_of(va)?;
        if self.roots.get(asid as usize).is_none_or(|r| r.is_none()) {
            return Err(Error::Sim(format!("map into unknown address space {asid}")));
        }
        let per = self.entries_per_node();
        let leaf_val = (pa & !0xfff) | ((k as u64) << 4) | perms.bits() as u64;
        let mut slot = Slot::Root(asid);
        let mut d = 0u32;
        loop {
            let e = self.get(slot);
            if e.kind == EMPTY {
                if d > end {
                    return Err(Error::Sim(format!("map {va:#x}: a {size} page cannot sit below a node decoding its offset bits")));
                }
                let glen = end - d;
                self.set(slot, Entry { kind: LEAF, glen: glen as u8, node: 0, guard: self.digits_of(key, d, glen), val: leaf_val });
                if let Slot::At(i) = slot {
                    self.nodes[i / per].live += 1;
                }
                self.mapped += 1;
                return Ok(());
            }
            // Compare only the digits the new page's number has.
            let c = self.common(&e, key, d).min(end.saturating_sub(d));
            if c == e.glen as u32 || d + c >= end {
                if e.kind == LEAF || d + c >= end {
                    return Err(Error::Sim(format!("map {va:#x}: overlaps an existing mapping")));
                }
                d += c;
                slot = Slot::At(e.node as usize * per + self.digit(key, d));
                d += 1;
                continue;
            }
            // Split at the first differing digit: a node decoding digit d + c holds the
            // old entry (rest of its guard) and the new page.
            let n = self.alloc_node(mem)? as usize;
            let rest = e.glen as u32 - c - 1;
            let rest_mask = if self.s * rest >= 64 { u64::MAX } else { (1u64 << (self.s * rest)) - 1 };
            let old = Entry { glen: rest as u8, guard: e.guard & rest_mask, ..e };
            let dn = d + c;
            let new_glen = end - dn - 1;
            let new = Entry { kind: LEAF, glen: new_glen as u8, node: 0, guard: self.digits_of(key, dn + 1, new_glen), val: leaf_val };
            let (old_at, new_at) = (self.guard_digit(&e, c), self.digit(key, dn));
            self.entries[n * per + old_at] = old;
            self.entries[n * per + new_at] = new;
            self.nodes[n].live = 2;
            let head = if c == 0 { 0 } else { e.guard >> (self.s * (e.glen as u32 - c)) };
            self.set(slot, Entry { kind: NODE, glen: c as u8, node: n as u32, guard: head, val: self.nodes[n].pa });
            self.mapped += 1;
            return Ok(());
        }
    }

    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let key = self.key_of(va).ok()?;
        let mut trail = Vec::with_capacity(16);
        let leaf_slot = self.find(asid, key, Some(&mut trail))?;
        let t = self.leaf_translation(&self.get(leaf_slot));
        self.set(leaf_slot, Entry::default());
        self.mapped -= 1;
        let per = self.entries_per_node();
        if let Slot::At(i) = leaf_slot {
            let n = i / per;
            self.nodes[n].live -= 1;
            if self.nodes[n].live == 1 {
                // Merge the node's last entry into the entry that points at the node.
                let parent = trail[trail.len() - 2];
                let p = self.get(parent);
                let j = (0..per).find(|&j| self.entries[n * per + j].kind != EMPTY).expect("one live entry");
                let r = self.entries[n * per + j];
                let glen = p.glen as u32 + 1 + r.glen as u32;
                let guard = (((p.guard << self.s) | j as u64) << (self.s * r.glen as u32)) | r.guard;
                self.set(parent, Entry { glen: glen as u8, guard, ..r });
                self.free_node(mem, n as u32);
            }
        }
        Some(t)
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Ok(key) = self.key_of(va) else { return false };
        let Some(slot) = self.find(asid, key, None) else { return false };
        let mut e = self.get(slot);
        // Keep the page-size digits (bits 4..12); replace the permission bits.
        e.val = (e.val & !0xf) | perms.bits() as u64;
        self.set(slot, e);
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        let key = self.key_of(va).ok()?;
        let slot = self.find(asid, key, None)?;
        Some(self.leaf_translation(&self.get(slot)))
    }

    fn walk(&mut self, asid: Asid, va: u64, _: &mut NoWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        let key = self.key_of(va).ok()?;
        // This page's chase has done its work: stop advancing it.
        for c in self.chases.iter_mut() {
            if c.get_mut().key == key {
                *c.get_mut() = Chase::IDLE;
            }
        }
        let (mut e, root_pa) = (*self.roots.get(asid as usize)?)?;
        path.push_step(root_pa, 0);
        let per = self.entries_per_node();
        let mut d = 0u32;
        let mut depth = 1u8;
        // The depth after reading the node entry a chase would start at (`prefetch`).
        let start_depth = self.chase_skip() + 2;
        loop {
            if e.kind == EMPTY || !self.guard_matches(&e, key, d) {
                self.last_walk_depth = depth as u32;
                return None;
            }
            d += e.glen as u32;
            if e.kind == LEAF {
                self.last_walk_depth = depth as u32;
                return Some(self.leaf_translation(&e));
            }
            let i = self.digit(key, d);
            path.push_step(e.val + i as u64 * ENTRY_BYTES, depth);
            let at = e.node as usize * per + i;
            e = self.entries[at];
            d += 1;
            depth = depth.saturating_add(1);
            if depth as u32 == start_depth {
                let prefix = self.digits_of(key, 0, d);
                self.chase_starts[Self::chase_start_slot(prefix, d, asid)].set(ChaseStart { prefix, asid, d, entry: at as u32 });
                self.start_digits.set(d);
            }
        }
    }

    fn footprint(&self) -> PtFootprint {
        PtFootprint { bytes: self.node_slab.bytes() + self.root_slab.bytes(), nodes: self.live_nodes, mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        let per = self.entries_per_node() as u64;
        serde_json::json!({
            "node_entries": per, "va_bits": self.va_bits, "digits": self.digits,
            "entry_bytes": ENTRY_BYTES,
            "node_entries_total": self.live_nodes * per,
            "entry_bytes_per_mapped_page": if self.mapped == 0 { 0.0 } else { (self.live_nodes * per * ENTRY_BYTES) as f64 / self.mapped as f64 },
        })
    }
}

impl FastPaths for GuardedPageTable {
    type Split = NoSplit;
    const PREFETCHES: bool = true;

    fn prefetch(&self, asid: Asid, va: u64) {
        for c in self.chases.iter() {
            let chase = c.get();
            if chase.entry != u32::MAX {
                c.set(self.chase_step(chase));
            }
        }
        let Some(Some((root, _))) = self.roots.get(asid as usize) else { return };
        let Ok(key) = self.key_of(va) else { return };
        // Start where an earlier walk of a page with the same prefix passed the start
        // depth; else read the first entries of the path now (few, and in the host
        // cache). Either way the chase is left the last CHASE_STEPS of the previous
        // walk's depth.
        let skip = self.chase_skip();
        let d = self.start_digits.get();
        let prefix = self.digits_of(key, 0, d);
        let start = self.chase_starts[Self::chase_start_slot(prefix, d, asid)].get();
        let chase = if skip > 0 && start.prefix == prefix && start.d == d && start.asid == asid && (start.entry as usize) < self.entries.len() {
            crate::host::prefetch(&self.entries[start.entry as usize]);
            Chase { key, entry: start.entry, d }
        } else {
            let mut chase = self.chase_from(*root, key, 0);
            for _ in 0..skip {
                if chase.entry == u32::MAX {
                    break;
                }
                chase = self.chase_step(chase);
            }
            chase
        };
        let slot = self.next_chase.get();
        self.chases[slot].set(chase);
        self.next_chase.set((slot + 1) % CHASES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt(s: usize) -> (GuardedPageTable, BuddyAllocator) {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = GuardedPageTable::new(&GuardedConfig { node_entries: s, va_bits: 48 }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        (pt, mem)
    }

    /// `prefetch` is a host-cache hint only: with chases started, advanced and left
    /// stale by maps and unmaps between them (nodes split, merged, freed and reused),
    /// every walk returns what it returns on a table that is never prefetched, with
    /// the same references.
    #[test]
    fn prefetch_changes_no_walk() {
        use rand::{Rng, SeedableRng};
        for s in [2usize, 16] {
            let (mut plain, mut mem_a) = gpt(s);
            let (mut hinted, mut mem_b) = gpt(s);
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(s as u64);
            let (mut pa, mut pb) = (WalkPath::new(), WalkPath::new());
            let page = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| 0x7f00_0000_0000u64 + (rng.gen_range(0..4096u64) << 12);
            for step in 0..20_000 {
                let va = page(&mut rng);
                match rng.gen_range(0..8) {
                    0 => {
                        if plain.translate(0, va).is_none() {
                            let frame = 0x1_0000_0000 + (va & 0xff_ffff_f000);
                            plain.map(&mut mem_a, 0, va, frame, PageSize::K4, Perms::RW_USER).unwrap();
                            hinted.map(&mut mem_b, 0, va, frame, PageSize::K4, Perms::RW_USER).unwrap();
                        }
                    }
                    1 => assert_eq!(plain.unmap(&mut mem_a, 0, va), hinted.unmap(&mut mem_b, 0, va)),
                    _ => {
                        for _ in 0..rng.gen_range(0..3) {
                            hinted.prefetch(0, page(&mut rng));
                        }
                        hinted.prefetch(0, va);
                        pa.clear();
                        pb.clear();
                        let a = plain.walk(0, va, &mut NoWalkCaches, &mut pa);
                        let b = hinted.walk(0, va, &mut NoWalkCaches, &mut pb);
                        assert_eq!(a, b, "G{s} step {step}");
                        assert_eq!(pa.refs(), pb.refs(), "G{s} step {step}");
                    }
                }
            }
        }
    }

    #[test]
    fn one_page_is_found_through_the_root_entry_alone() {
        let (mut pt, mut mem) = gpt(16);
        pt.map(&mut mem, 0, 0x7f12_3456_7000, 0x9000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        assert_eq!(pt.walk(0, 0x7f12_3456_7abc, &mut NoWalkCaches, &mut path).unwrap().pa, 0x9000);
        assert_eq!(path.refs().len(), 1);
        assert!(pt.walk(0, 0x7f12_3456_8000, &mut NoWalkCaches, &mut path).is_none(), "the guard rejects a neighbour");
        assert_eq!(pt.footprint().nodes, 0);
    }

    #[test]
    fn small_gpt_keeps_liedtkes_bound() {
        // k isolated pages in a binary GPT use at most 2(k-1) node entries.
        let (mut pt, mut mem) = gpt(2);
        let mut x = 0x1234_5678u64;
        for k in 1..=300u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let va = ((x >> 20) & ((1 << 36) - 1)) << 12;
            if pt.translate(0, va).is_some() {
                continue;
            }
            pt.map(&mut mem, 0, va, k << 12, PageSize::K4, Perms::RW_USER).unwrap();
            let m = pt.footprint().mapped_pages;
            assert!(pt.footprint().nodes * 2 <= 2 * (m - 1), "{} nodes for {m} pages", pt.footprint().nodes);
        }
    }

    #[test]
    fn large_pages_sit_at_inner_levels() {
        let (mut pt, mut mem) = gpt(16);
        let k64 = PageSize::from_bytes(64 << 10).unwrap();
        assert!(pt.page_sizes().contains(&k64) && !pt.page_sizes().contains(&PageSize::M2));
        pt.map(&mut mem, 0, 0x4000_0000, 0x10_0000, k64, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, 0x4001_0000, 0x20_0000, PageSize::K4, Perms::RW_USER).unwrap();
        let t = pt.translate(0, 0x4000_fabc).unwrap();
        assert_eq!((t.pa, t.size), (0x10_0000, k64));
        assert_eq!(pt.translate(0, 0x4001_0123).unwrap().size, PageSize::K4);
        // A 4K page inside the 64K page, or a 64K page over the 4K one, overlap.
        assert!(pt.map(&mut mem, 0, 0x4000_3000, 0x5000, PageSize::K4, Perms::RW_USER).is_err());
        assert!(pt.map(&mut mem, 0, 0x4001_0000, 0x30_0000, k64, Perms::RW_USER).is_err());
        assert!(pt.map(&mut mem, 0, 0, 0, PageSize::M2, Perms::RW_USER).is_err());
        let mut path = WalkPath::new();
        assert_eq!(pt.walk(0, 0x4000_8000, &mut NoWalkCaches, &mut path).unwrap().size, k64);
    }

    #[test]
    fn removing_pages_merges_nodes_back() {
        let (mut pt, mut mem) = gpt(16);
        let base = 0x5000_0000u64;
        for p in 0..40u64 {
            pt.map(&mut mem, 0, base + p * 4096, p << 12, PageSize::K4, Perms::RW_USER).unwrap();
        }
        assert!(pt.footprint().nodes >= 3);
        for p in 1..40u64 {
            pt.unmap(&mut mem, 0, base + p * 4096).unwrap();
        }
        assert_eq!(pt.footprint().nodes, 0, "one page left: no node needed");
        assert_eq!(pt.translate(0, base).unwrap().pa, 0);
        assert!(pt.map(&mut mem, 0, 1u64 << 50, 0, PageSize::K4, Perms::RW_USER).is_err());
    }
}
