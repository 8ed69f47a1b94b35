//! Hashed and clustered page tables (Elphinstone §3.5–3.6, §6.1.2–6.1.3).
//!
//! One structure covers both: a power-of-two array of buckets, each holding a tag
//! (block number + ASID), a link, and the PTEs of a block of `subblock` consecutive
//! 4 KiB pages (subblock 1: a plain HPT; 2: Elphinstone's HPT of PTE pairs; 4–16: a
//! clustered page table). Bucket layout in simulated memory: tag (8 B) | link (8 B) |
//! subblock × PTE (8 B), i.e. 16 + 8n bytes. Collisions chain externally through
//! buckets allocated from per-table slab frames; a walk that hits in the chain promotes
//! the bucket to the head by swapping contents (Elphinstone §6.1.2), when `promote`.
//!
//! Page sizes: 4 KiB; (subblock > 1) a superpage covering a whole block, held as a
//! single PTE in the block's bucket (the CPT's native superpage, §3.6); and any larger
//! power of two listed in `page_sizes`, held one of two ways (`large_pages`):
//! `replicate` puts a copy of the large page's PTE in the bucket of every block it
//! covers (one table, a walk still reads one bucket, but a 2M page costs 512/n
//! buckets), `per-size` keeps one hash table per page size and a walk probes them in
//! turn, smallest size first (one sequential probe per size until a hit).
//!
//! A walk visits buckets one after another: each is a sequential step whose references
//! are the distinct cache lines it reads (the tag, then the PTE on a match or the link
//! on a mismatch).

use super::{FastPaths, NoSplit, NoWalkCaches, PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};

const NONE: u32 = u32::MAX;
const LINE: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HashFunction {
    /// Bit selection: the low bits of the block number (Elphinstone's choice).
    #[default]
    Bits,
    /// A multiplicative mix of block number and ASID (spreads clustered addresses).
    Mix,
    /// Itanium's long-format VHPT: block number (the VPN, with `subblock = 1`) xor the
    /// RID, Linux/ia64's (context × 8 + region) with the context's low bytes swapped
    /// (`super::rid_xor_vpn`; Chapman et al. §2.3.2, §3.1).
    #[serde(rename = "rid-xor-vpn")]
    RidXorVpn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TableScope {
    /// One table per address space (Elphinstone's per-task tables).
    #[default]
    PerSpace,
    /// One table shared by all address spaces, ASIDs in the tags.
    Global,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HashedConfig {
    /// Buckets in the hash table (a power of two).
    pub buckets: usize,
    /// 4 KiB pages per bucket: 1 or 2 (HPT), up to 16 (CPT).
    pub subblock: usize,
    pub hash: HashFunction,
    pub scope: TableScope,
    /// Swap a chain hit into the head bucket.
    pub promote: bool,
    /// Page sizes above the block size the table can map (e.g. `["2M"]`).
    pub page_sizes: Vec<crate::config::Bytes>,
    /// How those large pages are held.
    pub large_pages: LargePages,
    /// Buckets of each large-page table (`large_pages = "per-size"`; a power of two).
    pub large_buckets: usize,
    /// Bytes per bucket; 0 = the minimum, 16 + 8 × subblock. Itanium's long-format VHPT
    /// entries are 32 bytes (tag, PTE, page size/key, chain) with one PTE.
    pub bucket_bytes: u64,
    /// Cycles charged when a walk must go past the head bucket. Itanium's hardware
    /// walker reads one entry; a collision traps to a software handler that follows the
    /// chain (Chapman et al. §2.3.2). 0: the walker follows chains itself.
    pub chain_trap_cycles: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LargePages {
    /// A copy of the PTE in every covered block's bucket (one table).
    #[default]
    Replicate,
    /// One hash table per page size, probed smallest first.
    PerSize,
}

impl Default for HashedConfig {
    fn default() -> Self {
        HashedConfig {
            buckets: 8192,
            subblock: 2,
            hash: HashFunction::Bits,
            scope: TableScope::PerSpace,
            promote: true,
            page_sizes: Vec::new(),
            large_pages: LargePages::Replicate,
            large_buckets: 1024,
            bucket_bytes: 0,
            chain_trap_cycles: 0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    block: u64,
    asid: Asid,
    /// Bit i: PTE i present. A superpage uses bit 0 with `superpage` set.
    present: u16,
    superpage: bool,
    next: u32,
    /// Simulated physical address of the bucket.
    pa: u64,
}

impl Bucket {
    fn empty(pa: u64) -> Bucket {
        Bucket { block: 0, asid: 0, present: 0, superpage: false, next: NONE, pa }
    }
}

/// The buckets of one address space (or the global one) in one [`HashTable`].
struct Table {
    /// Arena index of head bucket 0; heads are contiguous.
    heads: u32,
    /// Simulated physical base of the head array and its size.
    table_pa: u64,
    table_size: PageSize,
    /// Slab frames holding this table's chain buckets, and free chain buckets.
    slab_frames: Vec<u64>,
    free_nodes: Vec<u32>,
    live_chain: u64,
}

/// PTE layout: physical page base | size code << 4 | permission bits. The size code is
/// 0 for the table's own sizes (a slot's page, or a block superpage), else the shift of
/// a replicated large page.
#[inline(always)]
fn pte(pa: u64, perms: Perms, shift: u8) -> u64 {
    (pa & !0xfff) | ((shift as u64) << 4) | perms.bits() as u64
}

#[inline(always)]
fn pte_shift(e: u64) -> u8 {
    ((e >> 4) & 0x3f) as u8
}

/// One hashed table of one page-size class: slots map pages of 2^`base_shift` bytes,
/// `subblock` of them per bucket.
struct HashTable {
    buckets_per_table: usize,
    subblock: usize,
    hash_fn: HashFunction,
    scope: TableScope,
    promote: bool,
    chain_trap_cycles: u64,
    base_shift: u32,
    block_shift: u32,
    bucket_bytes: u64,
    buckets: Vec<Bucket>,
    ptes: Vec<u64>,
    /// Table per ASID (PerSpace), or table 0 for everyone (Global).
    tables: Vec<Option<Table>>,
    /// Pages mapped (a replicated page counts once).
    mapped: u64,
    frames: u64,
    chain_hits: u64,
    promotions: u64,
}

impl HashTable {
    fn new(cfg: &HashedConfig, buckets: usize, subblock: usize, base_shift: u32) -> HashTable {
        let bucket_bytes = (16 + 8 * subblock as u64).max(cfg.bucket_bytes);
        HashTable {
            buckets_per_table: buckets,
            subblock,
            hash_fn: cfg.hash,
            scope: cfg.scope,
            promote: cfg.promote,
            chain_trap_cycles: cfg.chain_trap_cycles,
            base_shift,
            block_shift: base_shift + subblock.trailing_zeros(),
            bucket_bytes,
            buckets: Vec::new(),
            ptes: Vec::new(),
            tables: Vec::new(),
            mapped: 0,
            frames: 0,
            chain_hits: 0,
            promotions: 0,
        }
    }

    fn table_index(&self, asid: Asid) -> usize {
        match self.scope {
            TableScope::PerSpace => asid as usize,
            TableScope::Global => 0,
        }
    }

    fn table(&self, asid: Asid) -> Option<&Table> {
        self.tables.get(self.table_index(asid)).and_then(|t| t.as_ref())
    }

    #[inline]
    fn hash(&self, block: u64, asid: Asid) -> usize {
        let mask = self.buckets_per_table as u64 - 1;
        let h = match (self.hash_fn, self.scope) {
            (HashFunction::Bits, TableScope::PerSpace) => block,
            (HashFunction::Bits, TableScope::Global) => block ^ ((asid as u64) << 7),
            (HashFunction::Mix, _) => {
                let x = (block ^ ((asid as u64) << 48)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                x ^ (x >> 29)
            }
            (HashFunction::RidXorVpn, _) => super::rid_xor_vpn(block, block << self.block_shift, asid, true),
        };
        (h & mask) as usize
    }

    fn new_table(&mut self, mem: &mut BuddyAllocator) -> Result<Table> {
        let bytes = (self.buckets_per_table as u64 * self.bucket_bytes).next_power_of_two().max(4096);
        let size = PageSize::from_bytes(bytes).map_err(|m| Error::config("page_table.hashed.buckets", m))?;
        let table_pa = mem.alloc(size, FrameUse::PageTable)?;
        self.frames += size.base_pages();
        let heads = self.buckets.len() as u32;
        for i in 0..self.buckets_per_table as u64 {
            self.buckets.push(Bucket::empty(table_pa + i * self.bucket_bytes));
        }
        self.ptes.resize(self.buckets.len() * self.subblock, 0);
        Ok(Table { heads, table_pa, table_size: size, slab_frames: Vec::new(), free_nodes: Vec::new(), live_chain: 0 })
    }

    fn alloc_chain(&mut self, mem: &mut BuddyAllocator, ti: usize) -> Result<u32> {
        if self.tables[ti].as_ref().unwrap().free_nodes.is_empty() {
            let frame = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
            self.frames += 1;
            let per = 4096 / self.bucket_bytes;
            let first = self.buckets.len() as u32;
            for i in 0..per {
                self.buckets.push(Bucket::empty(frame + i * self.bucket_bytes));
            }
            self.ptes.resize(self.buckets.len() * self.subblock, 0);
            let t = self.tables[ti].as_mut().unwrap();
            t.slab_frames.push(frame);
            t.free_nodes.extend((first..first + per as u32).rev());
        }
        let t = self.tables[ti].as_mut().unwrap();
        t.live_chain += 1;
        Ok(t.free_nodes.pop().unwrap())
    }

    /// The bucket holding `block` for `asid`: (bucket, predecessor in the chain).
    fn find(&self, asid: Asid, block: u64) -> Option<(u32, Option<u32>)> {
        let t = self.table(asid)?;
        let mut b = t.heads + self.hash(block, asid) as u32;
        let mut prev = None;
        loop {
            let k = &self.buckets[b as usize];
            if k.present != 0 && k.block == block && k.asid == asid {
                return Some((b, prev));
            }
            if k.next == NONE {
                return None;
            }
            prev = Some(b);
            b = k.next;
        }
    }

    fn slot(&self, va: u64) -> usize {
        ((va >> self.base_shift) as usize) & (self.subblock - 1)
    }

    fn translation_of(&self, b: u32, va: u64) -> Option<Translation> {
        let k = &self.buckets[b as usize];
        let n = self.subblock;
        if k.superpage {
            let e = self.ptes[b as usize * n];
            let shift = match pte_shift(e) {
                0 => self.block_shift as u8,
                s => s,
            };
            return Some(Translation { pa: e & !0xfff, size: PageSize::from_valid_shift(shift), perms: Perms::from_bits(e as u8) });
        }
        let i = self.slot(va);
        if k.present & (1 << i) == 0 {
            return None;
        }
        let e = self.ptes[b as usize * n + i];
        Some(Translation { pa: e & !0xfff, size: PageSize::from_valid_shift(self.base_shift as u8), perms: Perms::from_bits(e as u8) })
    }

    /// Move the contents (not the address or link) of bucket `from` into `to`.
    fn move_contents(&mut self, from: u32, to: u32) {
        let n = self.subblock;
        let (f, t) = (from as usize, to as usize);
        let src = self.buckets[f];
        let dst = &mut self.buckets[t];
        dst.block = src.block;
        dst.asid = src.asid;
        dst.present = src.present;
        dst.superpage = src.superpage;
        for i in 0..n {
            self.ptes[t * n + i] = self.ptes[f * n + i];
        }
    }

    fn swap_contents(&mut self, a: u32, b: u32) {
        let n = self.subblock;
        let (x, y) = (a as usize, b as usize);
        let (ka, kb) = (self.buckets[x], self.buckets[y]);
        self.buckets[x] = Bucket { block: kb.block, asid: kb.asid, present: kb.present, superpage: kb.superpage, ..ka };
        self.buckets[y] = Bucket { block: ka.block, asid: ka.asid, present: ka.present, superpage: ka.superpage, ..kb };
        for i in 0..n {
            self.ptes.swap(x * n + i, y * n + i);
        }
    }

    /// Distinct cache lines read in a bucket at offsets `offs`, pushed as one step.
    fn push_bucket(&self, path: &mut WalkPath, b: u32, offs: &[u64]) {
        let pa = self.buckets[b as usize].pa;
        path.begin_step();
        let mut last = u64::MAX;
        for &o in offs {
            let line = (pa + o) & !(LINE - 1);
            if line != last {
                path.push_parallel(pa + o, 0);
                last = line;
            }
        }
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        let ti = self.table_index(asid);
        if self.tables.len() <= ti {
            self.tables.resize_with(ti + 1, || None);
        }
        if self.tables[ti].is_none() {
            let t = self.new_table(mem)?;
            self.tables[ti] = Some(t);
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        match self.scope {
            TableScope::Global => {
                // Remove this space's entries; the shared table stays.
                let blocks: Vec<u64> = self.buckets.iter().filter(|k| k.present != 0 && k.asid == asid).map(|k| k.block).collect();
                for block in blocks {
                    while let Some((b, _)) = self.find(asid, block) {
                        let k = self.buckets[b as usize];
                        let i = if k.superpage { 0 } else { k.present.trailing_zeros() as u64 };
                        self.unmap(asid, (block << self.block_shift) + (i << self.base_shift));
                    }
                }
            }
            TableScope::PerSpace => {
                let Some(t) = self.tables.get_mut(asid as usize).and_then(|t| t.take()) else { return };
                for b in t.heads..t.heads + self.buckets_per_table as u32 {
                    let mut c = Some(b);
                    while let Some(x) = c {
                        let k = self.buckets[x as usize];
                        if k.present != 0 {
                            self.mapped -= match (k.superpage, pte_shift(self.ptes[x as usize * self.subblock])) {
                                (false, _) => k.present.count_ones() as u64,
                                (true, 0) => 1,
                                // One replica of a large page: count the page at its first block.
                                (true, s) => ((k.block << self.block_shift) & ((1u64 << s) - 1) == 0) as u64,
                            };
                        }
                        self.buckets[x as usize].present = 0;
                        c = (k.next != NONE).then_some(k.next);
                    }
                }
                mem.free(t.table_pa, t.table_size, FrameUse::PageTable);
                self.frames -= t.table_size.base_pages();
                for f in t.slab_frames {
                    mem.free(f, PageSize::K4, FrameUse::PageTable);
                    self.frames -= 1;
                }
            }
        }
    }

    /// The bucket for `block`, created (at the head, or chained behind it) if absent.
    fn bucket_for(&mut self, mem: &mut BuddyAllocator, asid: Asid, block: u64) -> Result<(u32, bool)> {
        if let Some((b, _)) = self.find(asid, block) {
            return Ok((b, false));
        }
        let ti = self.table_index(asid);
        let head = self.tables[ti].as_ref().unwrap().heads + self.hash(block, asid) as u32;
        let b = if self.buckets[head as usize].present == 0 {
            head
        } else {
            let node = self.alloc_chain(mem, ti)?;
            self.buckets[node as usize].next = self.buckets[head as usize].next;
            self.buckets[head as usize].next = node;
            node
        };
        let k = &mut self.buckets[b as usize];
        k.block = block;
        k.asid = asid;
        k.present = 0;
        k.superpage = false;
        Ok((b, true))
    }

    /// Map a page of the slot size, a block superpage, or (`replica_shift` > 0) one block
    /// of a replicated larger page.
    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        if self.table(asid).is_none() {
            return Err(Error::Sim(format!("map into unknown address space {asid}")));
        }
        let shift = size.shift() as u32;
        if shift <= self.block_shift {
            self.map_one(mem, asid, va, pte(pa, perms, 0), shift == self.block_shift && self.subblock > 1)?;
        } else {
            // Replicate: the page's PTE in every block it covers (Elphinstone §3.6).
            let blocks = 1u64 << (shift - self.block_shift);
            for i in 0..blocks {
                if self.find(asid, (va >> self.block_shift) + i).is_some() {
                    return Err(Error::Sim(format!("map {va:#x}: overlaps a mapped page")));
                }
            }
            for i in 0..blocks {
                self.map_one(mem, asid, va + (i << self.block_shift), pte(pa, perms, shift as u8), true)?;
            }
        }
        self.mapped += 1;
        Ok(())
    }

    /// Install one PTE: in its slot, or as the block's superpage entry.
    fn map_one(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, entry: u64, superpage: bool) -> Result<()> {
        let (b, fresh) = self.bucket_for(mem, asid, va >> self.block_shift)?;
        let k = self.buckets[b as usize];
        let i = if superpage { 0 } else { self.slot(va) };
        if !fresh && (k.superpage || superpage || k.present & (1 << i) != 0) {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        self.ptes[b as usize * self.subblock + i] = entry;
        let k = &mut self.buckets[b as usize];
        k.present |= 1 << i;
        k.superpage = superpage;
        Ok(())
    }

    /// Clear the entry for `va` in its bucket (a whole superpage bucket, or one slot);
    /// an emptied bucket leaves its chain.
    fn unmap_one(&mut self, asid: Asid, va: u64) {
        let Some((b, prev)) = self.find(asid, va >> self.block_shift) else { return };
        let slot = self.slot(va);
        let k = &mut self.buckets[b as usize];
        if k.superpage {
            k.present = 0;
            k.superpage = false;
        } else {
            k.present &= !(1 << slot);
        }
        if self.buckets[b as usize].present != 0 {
            return;
        }
        let ti = self.table_index(asid);
        let next = self.buckets[b as usize].next;
        match prev {
            // A chain bucket: unlink and free it.
            Some(p) => {
                self.buckets[p as usize].next = next;
                self.buckets[b as usize].next = NONE;
                let tb = self.tables[ti].as_mut().unwrap();
                tb.free_nodes.push(b);
                tb.live_chain -= 1;
            }
            // The head: pull the first chain bucket into it.
            None if next != NONE => {
                self.move_contents(next, b);
                self.buckets[b as usize].next = self.buckets[next as usize].next;
                self.buckets[next as usize].present = 0;
                self.buckets[next as usize].next = NONE;
                let tb = self.tables[ti].as_mut().unwrap();
                tb.free_nodes.push(next);
                tb.live_chain -= 1;
            }
            None => {}
        }
    }

    /// The blocks holding the entry for `va`'s page: (first block address, count).
    fn page_blocks(&self, t: &Translation, va: u64) -> (u64, u64) {
        let shift = t.size.shift() as u32;
        if shift > self.block_shift {
            (t.size.align_down(va), 1 << (shift - self.block_shift))
        } else {
            (va, 1)
        }
    }

    fn unmap(&mut self, asid: Asid, va: u64) -> Option<Translation> {
        let (b, _) = self.find(asid, va >> self.block_shift)?;
        let t = self.translation_of(b, va)?;
        let (first, n) = self.page_blocks(&t, va);
        for i in 0..n {
            let at = if n == 1 { va } else { first + (i << self.block_shift) };
            self.unmap_one(asid, at);
        }
        self.mapped -= 1;
        Some(t)
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Some((b, _)) = self.find(asid, va >> self.block_shift) else { return false };
        let Some(t) = self.translation_of(b, va) else { return false };
        let (first, n) = self.page_blocks(&t, va);
        for i in 0..n {
            let at = if n == 1 { va } else { first + (i << self.block_shift) };
            let (b, _) = self.find(asid, at >> self.block_shift).expect("replica present");
            let i = if self.buckets[b as usize].superpage { 0 } else { self.slot(at) };
            let e = &mut self.ptes[b as usize * self.subblock + i];
            *e = (*e & !0xf) | perms.bits() as u64;
        }
        true
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        let (b, _) = self.find(asid, va >> self.block_shift)?;
        self.translation_of(b, va)
    }

    /// Probe the chain for `va`; each bucket visited is a step.
    fn walk(&mut self, asid: Asid, va: u64, path: &mut WalkPath) -> Option<Translation> {
        let block = va >> self.block_shift;
        let t = self.table(asid)?;
        let head = t.heads + self.hash(block, asid) as u32;
        let pte_off = 16 + 8 * self.slot(va) as u64;
        let mut b = head;
        loop {
            let k = self.buckets[b as usize];
            let hit = k.present != 0 && k.block == block && k.asid == asid;
            if hit {
                let off = if k.superpage { 16 } else { pte_off };
                self.push_bucket(path, b, &[0, off]);
                let found = self.translation_of(b, va);
                if b != head && found.is_some() {
                    self.chain_hits += 1;
                    if self.promote {
                        self.swap_contents(head, b);
                        self.promotions += 1;
                    }
                }
                return found;
            }
            self.push_bucket(path, b, &[0, 8]);
            if k.next == NONE {
                return None;
            }
            if b == head {
                path.add_cycles(self.chain_trap_cycles);
            }
            b = k.next;
        }
    }

    fn live_chain(&self) -> u64 {
        self.tables.iter().flatten().map(|t| t.live_chain).sum()
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "page_size": PageSize::from_valid_shift(self.base_shift as u8).to_string(),
            "buckets": self.buckets_per_table, "subblock": self.subblock, "bucket_bytes": self.bucket_bytes,
            "chain_buckets": self.live_chain(), "chain_hits": self.chain_hits, "promotions": self.promotions,
            "tables": self.tables.iter().flatten().count(),
        })
    }
}

/// Elphinstone's hashed and clustered page tables, with large pages replicated or in
/// tables of their own.
pub struct HashedPageTable {
    cfg: HashedConfig,
    sizes: Vec<PageSize>,
    /// `hash[0]` maps 4 KiB slots (and block superpages; with `replicate`, every larger
    /// page too); with `per-size`, `hash[i]` for i > 0 maps `large[i - 1]`.
    hash: Vec<HashTable>,
    large: Vec<PageSize>,
}

impl HashedPageTable {
    pub fn new(cfg: &HashedConfig) -> Result<HashedPageTable> {
        if cfg.buckets == 0 || !cfg.buckets.is_power_of_two() || cfg.buckets > 1 << 26 {
            return Err(Error::config("page_table.hashed.buckets", "must be a power of two between 1 and 2^26"));
        }
        if !(1..=16).contains(&cfg.subblock) || !cfg.subblock.is_power_of_two() {
            return Err(Error::config("page_table.hashed.subblock", "must be 1, 2, 4, 8 or 16"));
        }
        if cfg.large_buckets == 0 || !cfg.large_buckets.is_power_of_two() || cfg.large_buckets > 1 << 26 {
            return Err(Error::config("page_table.hashed.large_buckets", "must be a power of two between 1 and 2^26"));
        }
        if cfg.bucket_bytes != 0 && (cfg.bucket_bytes < 16 + 8 * cfg.subblock as u64 || cfg.bucket_bytes > 4096) {
            return Err(Error::config(
                "page_table.hashed.bucket_bytes",
                format!("a bucket of {} PTEs needs {} to 4096 bytes, not {}", cfg.subblock, 16 + 8 * cfg.subblock, cfg.bucket_bytes),
            ));
        }
        let base = HashTable::new(cfg, cfg.buckets, cfg.subblock, 12);
        let mut sizes = vec![PageSize::K4];
        if cfg.subblock > 1 {
            sizes.push(PageSize::from_valid_shift(base.block_shift as u8));
        }
        let mut large = Vec::new();
        for b in &cfg.page_sizes {
            let s = PageSize::from_bytes(b.0).map_err(|m| Error::config("page_table.hashed.page_sizes", m))?;
            if s.shift() as u32 <= base.block_shift || s.shift() > 40 {
                return Err(Error::config(
                    "page_table.hashed.page_sizes",
                    format!("{s} is not larger than the {} block a bucket covers (or above 1T)", sizes.last().unwrap()),
                ));
            }
            if !large.contains(&s) {
                large.push(s);
            }
        }
        large.sort();
        sizes.extend(&large);
        let mut hash = vec![base];
        if cfg.large_pages == LargePages::PerSize {
            hash.extend(large.iter().map(|s| HashTable::new(cfg, cfg.large_buckets, 1, s.shift() as u32)));
        }
        Ok(HashedPageTable { cfg: cfg.clone(), sizes, hash, large })
    }

    /// The table that holds pages of `size`.
    fn table_for(&mut self, size: PageSize) -> &mut HashTable {
        match self.large.iter().position(|&s| s == size) {
            Some(i) if self.cfg.large_pages == LargePages::PerSize => &mut self.hash[i + 1],
            _ => &mut self.hash[0],
        }
    }
}

impl PageTable for HashedPageTable {
    type Caches = NoWalkCaches;

    fn kind(&self) -> &'static str {
        match self.cfg.subblock {
            1 | 2 => "hashed",
            _ => "clustered",
        }
    }

    fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    /// A bucket of two or more PTEs holds each aligned pair side by side, read by the
    /// same walk (Elphinstone's HPT buckets of PTE pairs, §6.1.2).
    fn holds_pte_pairs(&self) -> bool {
        self.cfg.subblock >= 2
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        self.hash.iter_mut().try_for_each(|h| h.create_space(mem, asid))
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        self.hash.iter_mut().for_each(|h| h.destroy_space(mem, asid));
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        if !self.sizes.contains(&size) {
            return Err(Error::config(
                "os.page_size",
                format!(
                    "a {} page table with subblock {} maps {} pages, not {size} (add it to page_table.hashed.page_sizes)",
                    self.kind(),
                    self.cfg.subblock,
                    self.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        self.table_for(size).map(mem, asid, va, pa, size, perms)
    }

    fn unmap(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        self.hash.iter_mut().find_map(|h| h.unmap(asid, va))
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        self.hash.iter_mut().any(|h| h.protect(asid, va, perms))
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.hash.iter().find_map(|h| h.translate(asid, va))
    }

    fn walk(&mut self, asid: Asid, va: u64, _: &mut NoWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        // Per-size tables are probed one after another, smallest page size first.
        self.hash.iter_mut().find_map(|h| h.walk(asid, va, path))
    }

    fn footprint(&self) -> PtFootprint {
        let heads: u64 = self.hash.iter().map(|h| h.tables.iter().flatten().count() as u64 * h.buckets_per_table as u64).sum();
        PtFootprint {
            bytes: self.hash.iter().map(|h| h.frames).sum::<u64>() * 4096,
            nodes: heads + self.hash.iter().map(|h| h.live_chain()).sum::<u64>(),
            mapped_pages: self.hash.iter().map(|h| h.mapped).sum(),
        }
    }

    fn details(&self) -> serde_json::Value {
        let mut d = self.hash[0].details();
        d["large_pages"] = serde_json::to_value(self.cfg.large_pages).expect("json");
        d["page_sizes"] = self.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().into();
        if self.hash.len() > 1 {
            d["large_tables"] = self.hash[1..].iter().map(|h| h.details()).collect::<Vec<_>>().into();
        }
        d
    }
}

impl FastPaths for HashedPageTable {
    type Split = NoSplit;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(buckets: usize, subblock: usize) -> (HashedPageTable, BuddyAllocator) {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let mut pt = HashedPageTable::new(&HashedConfig { buckets, subblock, ..Default::default() }).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        (pt, mem)
    }

    #[test]
    fn a_lookup_without_collision_touches_one_entry() {
        let (mut pt, mut mem) = table(256, 2);
        pt.map(&mut mem, 0, 0x40_0000, 0x10_0000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0x40_0123, &mut NoWalkCaches, &mut path).unwrap();
        assert_eq!(t.phys(0x40_0123), 0x10_0123);
        assert_eq!(path.steps(), 1);
        // A 32-byte bucket never straddles a 64-byte line: tag and PTE share one line.
        assert_eq!(path.refs().len(), 1);
    }

    #[test]
    fn collisions_chain_and_chain_hits_are_promoted() {
        let (mut pt, mut mem) = table(256, 2);
        // Blocks 0 and 256 (8 KiB blocks) hash to the same bucket with bit selection.
        let (a, b) = (0x0u64, 256u64 << 13);
        pt.map(&mut mem, 0, a, 0x1000, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, b, 0x2000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        // `b` went into the chain: the walk reads the head, then the chain bucket.
        assert_eq!(pt.walk(0, b, &mut NoWalkCaches, &mut path).unwrap().pa, 0x2000);
        assert_eq!(path.steps(), 2);
        // It was promoted: now it is found at the head.
        path.clear();
        pt.walk(0, b, &mut NoWalkCaches, &mut path).unwrap();
        assert_eq!(path.steps(), 1);
        path.clear();
        assert_eq!(pt.walk(0, a, &mut NoWalkCaches, &mut path).unwrap().pa, 0x1000);
        assert_eq!(path.steps(), 2);
        // Unmapping the head pulls the chain bucket up.
        pt.unmap(&mut mem, 0, a).unwrap();
        assert_eq!(pt.translate(0, b).unwrap().pa, 0x2000);
        assert_eq!(pt.footprint().nodes, 256);
    }

    #[test]
    fn clustered_superpage_covers_the_block() {
        let (mut pt, mut mem) = table(128, 4);
        let sp = PageSize::from_bytes(16 << 10).unwrap();
        assert_eq!(pt.page_sizes(), &[PageSize::K4, sp]);
        pt.map(&mut mem, 0, 0x10_0000, 0x20_0000, sp, Perms::RW_USER).unwrap();
        let t = pt.translate(0, 0x10_3fff).unwrap();
        assert_eq!((t.pa, t.size), (0x20_0000, sp));
        assert!(pt.map(&mut mem, 0, 0x10_1000, 0x5000, PageSize::K4, Perms::RW_USER).is_err());
        assert!(pt.map(&mut mem, 0, 0, 0, PageSize::M2, Perms::RW_USER).is_err());
    }

    fn with_2m(large_pages: LargePages) -> (HashedPageTable, BuddyAllocator) {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let cfg =
            HashedConfig { buckets: 1024, subblock: 2, page_sizes: vec![crate::config::Bytes(2 << 20)], large_pages, large_buckets: 64, ..Default::default() };
        let mut pt = HashedPageTable::new(&cfg).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        (pt, mem)
    }

    #[test]
    fn replicated_large_page_fills_every_block_and_walks_in_one_bucket() {
        let (mut pt, mut mem) = with_2m(LargePages::Replicate);
        pt.map(&mut mem, 0, 0x4000_0000, 0x20_0000, PageSize::M2, Perms::RW_USER).unwrap();
        // 2M / 8K blocks = 256 replicas, one per bucket (no collisions with 1024 buckets).
        assert_eq!(pt.hash[0].buckets.iter().filter(|k| k.present != 0).count(), 256);
        assert_eq!(pt.footprint().mapped_pages, 1);
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0x401f_f123, &mut NoWalkCaches, &mut path).unwrap();
        assert_eq!((t.pa, t.size, t.phys(0x401f_f123)), (0x20_0000, PageSize::M2, 0x3f_f123));
        assert_eq!(path.steps(), 1);
        assert!(pt.map(&mut mem, 0, 0x4010_0000, 0x9000, PageSize::K4, Perms::RW_USER).is_err(), "inside the 2M page");
        assert!(pt.protect(0, 0x4000_0000, Perms::R));
        assert_eq!(pt.translate(0, 0x401f_f000).unwrap().perms, Perms::R, "every replica re-protected");
        assert_eq!(pt.unmap(&mut mem, 0, 0x4012_3000).unwrap().size, PageSize::M2);
        assert!(pt.hash[0].buckets.iter().all(|k| k.present == 0));
        assert_eq!(pt.footprint().mapped_pages, 0);
    }

    #[test]
    fn per_size_tables_are_probed_smallest_first() {
        let (mut pt, mut mem) = with_2m(LargePages::PerSize);
        pt.map(&mut mem, 0, 0x4000_0000, 0x20_0000, PageSize::M2, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 0, 0x8000_0000, 0x1000, PageSize::K4, Perms::RW_USER).unwrap();
        // One bucket in the 2M table, one in the 4K table.
        assert_eq!(pt.hash[1].buckets.iter().filter(|k| k.present != 0).count(), 1);
        assert_eq!(pt.hash[0].buckets.iter().filter(|k| k.present != 0).count(), 1);
        let mut path = WalkPath::new();
        // A 4K page: found by the first probe.
        pt.walk(0, 0x8000_0010, &mut NoWalkCaches, &mut path).unwrap();
        assert_eq!(path.steps(), 1);
        // A 2M page: the 4K table's probe misses, then the 2M table's hits.
        path.clear();
        assert_eq!(pt.walk(0, 0x4010_0000, &mut NoWalkCaches, &mut path).unwrap().size, PageSize::M2);
        assert_eq!(path.steps(), 2);
        assert_eq!(pt.footprint().mapped_pages, 2);
        assert_eq!(pt.unmap(&mut mem, 0, 0x4000_0000).unwrap().size, PageSize::M2);
        assert!(pt.translate(0, 0x4000_0000).is_none());
    }

    /// Itanium's long-format VHPT used as the page table: 32-byte entries, RID xor VPN,
    /// one global table; a collision costs a trap to the software chain walker.
    #[test]
    fn long_format_vhpt_as_the_page_table() {
        let mut mem = BuddyAllocator::new(1 << 30).unwrap();
        let cfg = HashedConfig {
            buckets: 16384,
            subblock: 1,
            bucket_bytes: 32,
            hash: HashFunction::RidXorVpn,
            scope: TableScope::Global,
            promote: false,
            chain_trap_cycles: 100,
            ..Default::default()
        };
        let mut pt = HashedPageTable::new(&cfg).unwrap();
        for asid in [1, 2] {
            pt.create_space(&mut mem, asid).unwrap();
        }
        // Contexts 1 and 2 swizzle to 0x100 and 0x200, so their region-0 RIDs are 0x800
        // and 0x1000: the same VPN lands in different entries.
        pt.map(&mut mem, 1, 0x5000, 0x1000, PageSize::K4, Perms::RW_USER).unwrap();
        pt.map(&mut mem, 2, 0x5000, 0x2000, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        assert_eq!(pt.walk(2, 0x5000, &mut NoWalkCaches, &mut path).unwrap().pa, 0x2000);
        assert_eq!((path.steps(), path.extra_cycles()), (1, 0));
        // A collision on purpose: VPN v of RID 2 meets VPN 5 of RID 1 where
        // v ^ 0x1000 == 5 ^ 0x800 i.e. v = 0x1805.
        pt.map(&mut mem, 2, 0x1805 << 12, 0x3000, PageSize::K4, Perms::RW_USER).unwrap();
        path.clear();
        assert_eq!(pt.walk(2, 0x1805 << 12, &mut NoWalkCaches, &mut path).unwrap().pa, 0x3000);
        assert_eq!((path.steps(), path.extra_cycles()), (2, 100), "head mismatch, trap, chain entry");
        // 32-byte entries: the 16384-entry table is 512 KiB.
        assert_eq!(pt.footprint().bytes, (512 << 10) + 4096, "table + one chain slab frame");
    }

    #[test]
    fn bad_geometry_names_the_key() {
        let e = HashedPageTable::new(&HashedConfig { bucket_bytes: 20, subblock: 2, ..Default::default() }).err().unwrap();
        assert!(e.to_string().contains("page_table.hashed.bucket_bytes"), "{e}");
        let e = HashedPageTable::new(&HashedConfig { page_sizes: vec![crate::config::Bytes(8 << 10)], ..Default::default() }).err().unwrap();
        assert!(e.to_string().contains("page_table.hashed.page_sizes"), "{e}");
        let e = HashedPageTable::new(&HashedConfig { buckets: 100, ..Default::default() }).err().unwrap();
        assert!(e.to_string().contains("page_table.hashed.buckets"));
        let e = HashedPageTable::new(&HashedConfig { subblock: 3, ..Default::default() }).err().unwrap();
        assert!(e.to_string().contains("page_table.hashed.subblock"));
    }
}
