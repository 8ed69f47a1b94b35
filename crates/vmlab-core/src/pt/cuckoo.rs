//! An elastic d-ary cuckoo hash table of page-table entry clusters (Skarlatos et al.,
//! ASPLOS'20, as summarised by Stojkovic et al. §2.3): d ways, each an array of 64-byte
//! entries in simulated memory; an entry holds the tag of a cluster of 8 consecutive
//! pages and their 8 PTEs. A key may live in way w only at slot h_w(key).
//!
//! Insertion places the key in the first way whose slot is free, else displaces the
//! occupant of a way (cycling through the ways) and re-inserts it elsewhere, at most
//! `max_kicks` times. Elastic resizing: when occupancy passes the threshold (or kicks
//! run out) every way gets a new array of `growth`× the slots, and entries migrate
//! gradually, `migrate_per_insert` slots per insertion. Way w keeps a migration pointer:
//! old slots below it have moved, so a lookup of key k in way w reads the new array if
//! h_w(k) mod old_slots is below the pointer and the old one otherwise. Because the new
//! size is a multiple of the old, an entry from old slot p lands at a new slot ≡ p (mod
//! old_slots): migration never collides with entries inserted into the migrated range.
//!
//! Host layout (the simulator's, not the model's): a way keeps its tags in a dense array
//! beside its 64-byte PTE lines. A lookup checks d tags, 8 to a host cache line, then
//! reads one PTE line: a 72-byte tag-and-PTEs record straddled two host lines and a
//! large table's tags did not stay in the host's cache.

use crate::addr::PageSize;
use crate::error::{Error, Result};
use crate::host::{HugeArray, Zeroable};
use crate::os::buddy::{BuddyAllocator, FrameUse};
use std::cell::Cell;

/// Most ways a table may have (`page_table.ecpt.ways`).
pub(crate) const MAX_WAYS: usize = 8;

/// PTEs per entry (one 64-byte line).
pub(crate) const CLUSTER: usize = 8;
pub(crate) const ENTRY_BYTES: u64 = 64;

/// An entry's 8 PTEs: one 64-byte line, aligned as the model's line is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct PteLine(pub [u64; CLUSTER]);

// SAFETY: plain u64s; the zero line is an empty entry's.
unsafe impl Zeroable for PteLine {}

impl PteLine {
    pub(crate) fn is_empty_line(&self) -> bool {
        self.0.iter().all(|&p| p == 0)
    }
}

impl std::ops::Index<usize> for PteLine {
    type Output = u64;
    #[inline(always)]
    fn index(&self, i: usize) -> &u64 {
        &self.0[i]
    }
}

impl std::ops::IndexMut<usize> for PteLine {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut u64 {
        &mut self.0[i]
    }
}

/// An entry while it moves (a displacement or a migration): key + 1, and its PTEs.
#[derive(Clone, Copy)]
struct Entry {
    tag: u64,
    line: PteLine,
}

impl Entry {
    fn key(&self) -> u64 {
        self.tag - 1
    }
}

/// One way's array and its simulated memory.
struct WayArray {
    /// Key + 1 of the entry in each slot (0 = empty).
    tags: HugeArray<u64>,
    lines: HugeArray<PteLine>,
    pa: u64,
    size: PageSize,
}

impl WayArray {
    fn new(mem: &mut BuddyAllocator, slots: usize) -> Result<WayArray> {
        let size = PageSize::from_bytes(Self::bytes(slots)).map_err(|m| Error::config("page_table.ecpt", m))?;
        let pa = mem.alloc(size, FrameUse::PageTable)?;
        Ok(WayArray { tags: HugeArray::zeroed(slots), lines: HugeArray::zeroed(slots), pa, size })
    }
    /// Simulated bytes of an array of `slots` entries (at least a 4K page).
    fn bytes(slots: usize) -> u64 {
        (slots as u64 * ENTRY_BYTES).max(4096)
    }
    fn slots(&self) -> usize {
        self.tags.len()
    }
    fn take(&mut self, i: usize) -> Entry {
        let e = Entry { tag: self.tags[i], line: self.lines[i] };
        self.tags[i] = 0;
        self.lines[i] = PteLine::default();
        e
    }
    /// Whether slot `i` (which must exist) holds `key`.
    #[inline(always)]
    fn holds(&self, i: usize, key: u64) -> bool {
        self.tags[i] == key.wrapping_add(1)
    }
    fn put(&mut self, i: usize, e: Entry) {
        self.tags[i] = e.tag;
        self.lines[i] = e.line;
    }
    fn free(self, mem: &mut BuddyAllocator) {
        mem.free(self.pa, self.size, FrameUse::PageTable);
    }
}

/// Tunables shared by every table of an ECPT.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CuckooParams {
    pub(crate) ways: usize,
    pub(crate) max_kicks: usize,
    pub(crate) threshold: f64,
    pub(crate) growth: usize,
    pub(crate) migrate_per_insert: usize,
}

/// Where a key was found: way, physical address of its entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Probe {
    /// Read by the unit tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) way: usize,
    pub(crate) pa: u64,
}

pub(crate) struct ElasticCuckooTable {
    p: CuckooParams,
    /// Current arrays (the new ones while migrating).
    cur: Vec<WayArray>,
    /// Old arrays and per-way migration pointers while a resize is under way.
    old: Option<(Vec<WayArray>, [usize; MAX_WAYS])>,
    /// Slots per way less one, of the current arrays and of the old ones (every way has
    /// as many): a lookup's slot without reading an array's length.
    cur_mask: usize,
    old_mask: usize,
    entries: usize,
    pub(crate) resizes: u64,
    pub(crate) migrated: u64,
    pub(crate) max_displacement: usize,
    /// Where recently found keys were: a direct-mapped memo of the simulator's own (no
    /// model state, nothing counted). A hint is checked against the slot's tag before
    /// use, so a key that moved (a kick, a migration, a resize) or left just misses it.
    hints: Box<[Cell<Hint>]>,
}

/// One `find` hint: the key + 1 (0 = none) and its location (way << 29 | old array << 28
/// | slot; a slot beyond 2^28 gets no hint).
#[derive(Clone, Copy, Default)]
struct Hint {
    tag: u64,
    at: u32,
}

/// Per-way hash: a multiply-xorshift mix with a distinct odd constant per way.
#[inline(always)]
pub(crate) fn way_hash(key: u64, way: usize) -> u64 {
    const SEEDS: [u64; 8] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0xd6e8_feb8_6659_fd93,
        0xff51_afd7_ed55_8ccd,
        0xc4ce_b9fe_1a85_ec53,
        0x2545_f491_4f6c_dd1d,
        0x94d0_49bb_1331_11eb,
    ];
    let x = (key ^ (way as u64).wrapping_mul(0x5851_f42d_4c95_7f2d)).wrapping_mul(SEEDS[way % 8]);
    x ^ (x >> 31)
}

impl ElasticCuckooTable {
    pub(crate) fn new(mem: &mut BuddyAllocator, p: CuckooParams, slots: usize) -> Result<ElasticCuckooTable> {
        assert!((1..=MAX_WAYS).contains(&p.ways), "ways checked by the config");
        let cur = (0..p.ways).map(|_| WayArray::new(mem, slots)).collect::<Result<Vec<_>>>()?;
        // Hints: one per slot of a way, 64 to 1024 (a few host cache lines' worth).
        let hints = (0..slots.next_power_of_two().clamp(64, 1024)).map(|_| Cell::new(Hint::default())).collect();
        Ok(ElasticCuckooTable { p, cur, old: None, cur_mask: slots - 1, old_mask: 0, entries: 0, resizes: 0, migrated: 0, max_displacement: 0, hints })
    }

    pub(crate) fn free(self, mem: &mut BuddyAllocator) {
        for w in self.cur {
            w.free(mem);
        }
        if let Some((old, _)) = self.old {
            for w in old {
                w.free(mem);
            }
        }
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }
    /// Present PTEs in all entries.
    pub(crate) fn mapped_ptes(&self) -> u64 {
        let count = |v: &Vec<WayArray>| -> u64 {
            let present = |w: &WayArray, i: usize| w.lines[i].0.iter().filter(|&&p| p != 0).count() as u64;
            v.iter().map(|w| (0..w.slots()).filter(|&i| w.tags[i] != 0).map(|i| present(w, i)).sum::<u64>()).sum()
        };
        count(&self.cur) + self.old.as_ref().map_or(0, |(o, _)| count(o))
    }
    /// Slots per way of the current arrays.
    pub(crate) fn slots(&self) -> usize {
        self.cur_mask + 1
    }
    pub(crate) fn ways(&self) -> usize {
        self.p.ways
    }
    pub(crate) fn migrating(&self) -> bool {
        self.old.is_some()
    }
    /// Bytes of the old arrays while a resize is under way (`bytes` includes them; they
    /// are freed once every entry has moved, which takes inserts).
    pub(crate) fn resizing_bytes(&self) -> u64 {
        self.old.as_ref().map_or(0, |_| self.p.ways as u64 * WayArray::bytes(self.old_mask + 1))
    }
    pub(crate) fn bytes(&self) -> u64 {
        // From the slot counts (every way's array has as many): called on every new
        // peak of mapped pages (`Mm::map_page`), so no walk over the arrays.
        let old = self.old.as_ref().map_or(0, |_| WayArray::bytes(self.old_mask + 1));
        self.p.ways as u64 * (WayArray::bytes(self.slots()) + old)
    }

    /// The array and slot way `w` uses for `key` now.
    #[inline]
    fn locate(&self, key: u64, w: usize) -> (bool, usize) {
        let (_, old, i) = self.way_slot(key, w);
        (old, i)
    }

    /// `locate`, with the array it picks.
    #[inline(always)]
    fn way_slot(&self, key: u64, w: usize) -> (&WayArray, bool, usize) {
        let h = way_hash(key, w) as usize;
        if let Some((old, moved)) = &self.old {
            let p_old = h & self.old_mask;
            if p_old >= moved[w] {
                return (&old[w], true, p_old);
            }
        }
        (&self.cur[w], false, h & self.cur_mask)
    }

    /// Way `w`'s old (mid-resize) or current array.
    #[inline(always)]
    fn array(&self, old: bool, w: usize) -> &WayArray {
        if old {
            &self.old.as_ref().expect("a resize is under way").0[w]
        } else {
            &self.cur[w]
        }
    }

    fn array_mut(&mut self, old: bool, w: usize) -> &mut WayArray {
        if old {
            &mut self.old.as_mut().expect("a resize is under way").0[w]
        } else {
            &mut self.cur[w]
        }
    }

    /// The physical address way `w` would read for `key` (a walk probes it whether or
    /// not the key is there).
    #[inline]
    pub(crate) fn probe_pa(&self, key: u64, w: usize) -> u64 {
        let (a, _, i) = self.way_slot(key, w);
        a.pa + i as u64 * ENTRY_BYTES
    }

    /// `probe_pa`, and PTE `pte` of the entry there if that slot holds `key` (else 0):
    /// a walk that reads the slot learns the mapping without a second search. The PTE is
    /// read either way and picked by a select: which of the ways holds a key is a coin
    /// toss, and a branch on it mispredicts.
    #[inline(always)]
    pub(crate) fn probe_way(&self, key: u64, w: usize, pte: usize) -> (u64, u64) {
        let (a, _, i) = self.way_slot(key, w);
        let e = a.lines[i][pte];
        (a.pa + i as u64 * ENTRY_BYTES, if a.holds(i, key) { e } else { 0 })
    }

    /// The entry of `key`: where it is, and its PTEs. Inline: most finds take the hint
    /// (the search, with its register pressure, is out of line).
    #[inline(always)]
    pub(crate) fn find(&self, key: u64) -> Option<(Probe, &PteLine)> {
        let (w, old, i) = self.find_slot(key)?;
        let arr = self.array(old, w);
        Some((Probe { way: w, pa: arr.pa + i as u64 * ENTRY_BYTES }, &arr.lines[i]))
    }

    /// Where the entry of `key` is: (way, in the old array, slot).
    #[inline(always)]
    fn find_slot(&self, key: u64) -> Option<(usize, bool, usize)> {
        let hint = &self.hints[Self::hint_slot(key, self.hints.len())];
        let h = hint.get();
        if h.tag == key.wrapping_add(1) {
            if let Some(found) = self.at(key, h.at) {
                return Some(found);
            }
        }
        self.search(key, hint)
    }

    /// `find_slot` without a usable hint: search the ways, and leave a hint.
    #[inline(never)]
    fn search(&self, key: u64, hint: &Cell<Hint>) -> Option<(usize, bool, usize)> {
        let (w, old, i) = if self.old.is_none() { self.locate_settled(key) } else { self.locate_migrating(key) }?;
        if i < 1 << 28 {
            hint.set(Hint { tag: key.wrapping_add(1), at: (w as u32) << 29 | (old as u32) << 28 | i as u32 });
        }
        Some((w, old, i))
    }

    /// The direct-mapped slot of `key`'s hint (a multiplicative hash of the key).
    #[inline(always)]
    fn hint_slot(key: u64, len: usize) -> usize {
        ((key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - len.trailing_zeros())) as usize
    }

    /// Location `at` (`Hint::at` coding) if its slot holds `key`.
    #[inline(always)]
    fn at(&self, key: u64, at: u32) -> Option<(usize, bool, usize)> {
        let (w, old, i) = ((at >> 29) as usize, at & 1 << 28 != 0, (at & ((1 << 28) - 1)) as usize);
        let arr = if old { self.old.as_ref()?.0.get(w)? } else { self.cur.get(w)? };
        (i < arr.slots() && arr.holds(i, key)).then_some((w, old, i))
    }

    /// Where `key` is when no resize is under way (nearly always): every way reads its
    /// current array, so the slot of way w is one hash and mask. The ways' tags are
    /// independent host reads: start them all before checking any, so their host cache
    /// misses overlap.
    #[inline]
    fn locate_settled(&self, key: u64) -> Option<(usize, bool, usize)> {
        let ways = &self.cur[..self.p.ways];
        let mut at = [0usize; MAX_WAYS];
        for (w, a) in ways.iter().enumerate() {
            let i = (way_hash(key, w) as usize) & self.cur_mask;
            at[w] = i;
            crate::host::prefetch(&a.tags[i]);
        }
        // Which way holds the key is a coin toss: gather the matches, then pick.
        let held = ways.iter().enumerate().fold(0u32, |m, (w, a)| m | (a.holds(at[w], key) as u32) << w);
        (held != 0).then(|| {
            let w = held.trailing_zeros() as usize;
            (w, false, at[w])
        })
    }

    /// Where `key` is mid-resize (a table can stay so for long: migration advances only
    /// on inserts): way w reads its old array at h mod old_slots if that slot has not
    /// moved yet, else its new one.
    fn locate_migrating(&self, key: u64) -> Option<(usize, bool, usize)> {
        // One pass picks each way's array and slot and reads its tag, a second checks
        // them: the reads overlap, as in `locate_settled`.
        let mut at: [(u64, bool, usize); MAX_WAYS] = [(0, false, 0); MAX_WAYS];
        for (w, a) in at.iter_mut().enumerate().take(self.p.ways) {
            let (arr, in_old, i) = self.way_slot(key, w);
            let t = &arr.tags[i];
            crate::host::prefetch(t);
            *a = (*t, in_old, i);
        }
        let tag = key.wrapping_add(1);
        at[..self.p.ways].iter().enumerate().find_map(|(w, &(t, in_old, i))| (t == tag).then_some((w, in_old, i)))
    }

    /// Hint the host to bring every tag a `find` of `key` may read, and the PTE lines
    /// beside them, into its cache (no state changes); `at(way, in old array, slot)`
    /// learns where each way's slot is.
    #[inline(always)]
    fn prefetch_ways(&self, key: u64, mut at: impl FnMut(usize, bool, usize)) {
        for w in 0..self.p.ways {
            let (a, old, i) = self.way_slot(key, w);
            crate::host::prefetch(a.tags.as_ptr().wrapping_add(i));
            crate::host::prefetch(a.lines.as_ptr().wrapping_add(i));
            at(w, old, i);
        }
    }

    /// `prefetch_ways`, for a caller that does not need the slots.
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        self.prefetch_ways(key, |_, _, _| {});
    }

    /// `prefetch_ways`, returning where the ways' slots are, for a later
    /// [`Self::line_at`]: way w's old-array flag and slot in bits 21w..21w+21; None if
    /// they do not fit (more than three ways, or a slot beyond 2^20).
    #[inline]
    pub(crate) fn prefetch_located(&self, key: u64) -> Option<u64> {
        let mut loc = 0u64;
        let mut fits = self.p.ways <= 3;
        self.prefetch_ways(key, |w, old, i| {
            fits &= i < 1 << 20;
            loc |= ((old as u64) << 20 | (i as u64 & ((1 << 20) - 1))) << (21 * w.min(2));
        });
        fits.then_some(loc)
    }

    /// The PTEs of `key` if it still sits where `loc` (from `prefetch_located`) says:
    /// a hint, read without a search. None if it moved, left or was never there.
    #[inline]
    pub(crate) fn line_at(&self, key: u64, loc: u64) -> Option<&PteLine> {
        (0..self.p.ways.min(3)).find_map(|w| {
            let f = loc >> (21 * w);
            let i = (f & ((1 << 20) - 1)) as usize;
            let arr = if f & 1 << 20 != 0 { self.old.as_ref()?.0.get(w)? } else { self.cur.get(w)? };
            (i < arr.slots() && arr.holds(i, key)).then(|| &arr.lines[i])
        })
    }

    pub(crate) fn find_mut(&mut self, key: u64) -> Option<&mut PteLine> {
        let (w, old, i) = self.find_slot(key)?;
        Some(&mut self.array_mut(old, w).lines[i])
    }

    /// Remove the entry of `key` (its PTEs are all clear).
    pub(crate) fn remove(&mut self, key: u64) {
        if let Some((w, old, i)) = self.find_slot(key) {
            self.array_mut(old, w).take(i);
            self.entries -= 1;
        }
    }

    /// The PTEs of `key`, inserted empty if absent (may displace, migrate, resize).
    pub(crate) fn entry(&mut self, mem: &mut BuddyAllocator, key: u64) -> Result<&mut PteLine> {
        let (w, old, i) = match self.find_slot(key) {
            Some(at) => at,
            None => {
                self.insert(mem, Entry { tag: key + 1, line: PteLine::default() })?;
                self.find_slot(key).expect("just inserted")
            }
        };
        Ok(&mut self.array_mut(old, w).lines[i])
    }

    fn insert(&mut self, mem: &mut BuddyAllocator, e: Entry) -> Result<()> {
        self.migrate(mem, self.p.migrate_per_insert)?;
        let cap = self.p.ways * self.slots();
        if !self.migrating() && (self.entries + 1) as f64 > self.p.threshold * cap as f64 {
            self.start_resize(mem)?;
        }
        let mut e = e;
        loop {
            match self.try_place(e) {
                None => {
                    self.entries += 1;
                    return Ok(());
                }
                Some(homeless) => {
                    // Kicks ran out: finish any migration, grow, place the homeless one.
                    e = homeless;
                    self.migrate(mem, usize::MAX)?;
                    self.start_resize(mem)?;
                }
            }
        }
    }

    /// Place `e` in the first of its ways whose slot is free; false if all are taken.
    fn place_free(&mut self, e: Entry, skip: usize) -> bool {
        for w in (0..self.p.ways).filter(|&w| w != skip) {
            let (old, i) = self.locate(e.key(), w);
            if self.array(old, w).tags[i] == 0 {
                self.array_mut(old, w).put(i, e);
                return true;
            }
        }
        false
    }

    /// Cuckoo placement with at most `max_kicks` displacements; on failure returns the
    /// entry left without a slot (every other entry is placed).
    fn try_place(&mut self, mut e: Entry) -> Option<Entry> {
        if self.place_free(e, usize::MAX) {
            return None;
        }
        let mut w = (e.key() as usize) % self.p.ways;
        for kicks in 1..=self.p.max_kicks {
            let (old, i) = self.locate(e.key(), w);
            let arr = self.array_mut(old, w);
            let evicted = arr.take(i);
            arr.put(i, e);
            e = evicted;
            self.max_displacement = self.max_displacement.max(kicks);
            // The evicted entry tries its other ways' slots first.
            if self.place_free(e, w) {
                return None;
            }
            w = (w + 1) % self.p.ways;
        }
        Some(e)
    }

    fn start_resize(&mut self, mem: &mut BuddyAllocator) -> Result<()> {
        debug_assert!(self.old.is_none());
        let slots = self.slots() * self.p.growth;
        let new = (0..self.p.ways).map(|_| WayArray::new(mem, slots)).collect::<Result<Vec<_>>>()?;
        let old = std::mem::replace(&mut self.cur, new);
        (self.old_mask, self.cur_mask) = (self.cur_mask, slots - 1);
        self.old = Some((old, [0; MAX_WAYS]));
        self.resizes += 1;
        Ok(())
    }

    /// Move up to `n` old slots (occupied or not) into the new arrays.
    fn migrate(&mut self, mem: &mut BuddyAllocator, mut n: usize) -> Result<()> {
        while n > 0 {
            let Some((old, ptr)) = &mut self.old else { return Ok(()) };
            let old_slots = self.old_mask + 1;
            // The way with the least progress moves next (round robin).
            let w = (0..self.p.ways).min_by_key(|&w| ptr[w]).unwrap();
            if ptr[w] == old_slots {
                let (old, _) = self.old.take().unwrap();
                for a in old {
                    a.free(mem);
                }
                return Ok(());
            }
            let e = old[w].take(ptr[w]);
            ptr[w] += 1;
            n -= 1;
            if e.tag != 0 {
                // Same way, bigger modulus: the slot is ≡ the old one, so it is free.
                let i = (way_hash(e.key(), w) as usize) & self.cur_mask;
                debug_assert_eq!(self.cur[w].tags[i], 0);
                self.cur[w].put(i, e);
                self.migrated += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn params() -> CuckooParams {
        CuckooParams { ways: 3, max_kicks: 8, threshold: 0.6, growth: 2, migrate_per_insert: 2 }
    }

    #[test]
    fn keys_survive_many_resizes_and_migration_is_gradual() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut t = ElasticCuckooTable::new(&mut mem, params(), 8).unwrap();
        let mut reference = HashMap::new();
        for k in 0..5000u64 {
            let key = k.wrapping_mul(0x9e37_79b9_7f4a_7c15); // distinct keys (odd multiplier)
            let before = t.migrated;
            t.entry(&mut mem, key).unwrap()[0] = key | 1;
            reference.insert(key, key | 1);
            // Gradual: an insert migrates at most its quota, unless kicks ran out.
            assert!(t.migrated - before <= 2 || t.max_displacement == 8, "migrated {} in one insert", t.migrated - before);
            if k % 97 == 0 {
                for (&rk, &v) in &reference {
                    assert_eq!(t.find(rk).map(|(_, c)| c[0]), Some(v), "key {rk} lost after {} resizes", t.resizes);
                }
            }
        }
        assert!(t.resizes >= 8, "resizes {} entries {} slots {} migrating {}", t.resizes, t.entries(), t.slots(), t.migrating());
        assert_eq!(t.entries(), reference.len());
        assert!(t.max_displacement <= 8);
        assert!((t.entries() as f64) <= 0.6 * (t.ways() * t.slots()) as f64 + 1.0);
        for &k in reference.keys() {
            t.remove(k);
        }
        assert_eq!(t.entries(), 0);
        t.free(&mut mem);
        assert_eq!(mem.counters().frames_page_table, 0);
    }

    /// Finds between every insert and remove fill the hints while kicks, migrations and
    /// resizes move keys: a find still answers exactly where a hint-free search does.
    #[test]
    fn hints_only_answer_for_a_key_where_it_is() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut t = ElasticCuckooTable::new(&mut mem, params(), 8).unwrap();
        let mut reference = HashMap::new();
        for step in 0..20_000u64 {
            let key = rng.gen_range(0..600u64);
            if rng.gen_range(0..3) == 0 {
                if reference.remove(&key).is_some() {
                    t.remove(key);
                }
            } else {
                t.entry(&mut mem, key).unwrap()[0] = step | 1;
                reference.insert(key, step | 1);
            }
            let probe = rng.gen_range(0..600u64);
            let found = t.find(probe);
            assert_eq!(found.map(|(_, c)| c[0]), reference.get(&probe).copied(), "step {step}, key {probe}");
            if let Some((p, _)) = found {
                let (w, old, i) = if t.old.is_none() { t.locate_settled(probe) } else { t.locate_migrating(probe) }.unwrap();
                assert_eq!((p.way, p.pa), (w, t.array(old, w).pa + i as u64 * ENTRY_BYTES), "step {step}, key {probe}");
            }
        }
        assert!(t.resizes >= 3 && t.max_displacement > 0, "the keys moved: {} resizes", t.resizes);
    }
}
