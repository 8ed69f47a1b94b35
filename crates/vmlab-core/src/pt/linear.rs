//! Linear virtual array page table (Elphinstone §3.3): the PTEs of an address space form
//! one array in virtual memory, indexed by virtual page number, so a refill reads a
//! single entry — at a virtual address that the MMU must itself translate. If that
//! translation misses the TLB, a nested walk resolves it through the array's own page
//! table:
//!
//! - `backing = "mpt"`: the hybrid of §3.3 — the array's pages are mapped by a
//!   multilevel (radix) table in physical memory, limiting nesting to one level;
//! - `backing = "linear"`: the VAX layout — a physically contiguous root array with one
//!   entry per array page (only practical for small address spaces: `va_bits` ≤ 40).
//!
//! The array lives in the upper canonical half (at `base`), one per address space,
//! tagged in the TLB by the space's ASID; its pages are allocated when a PTE in them is
//! first set, and freed with the space. Pages are 4 KiB.

use super::radix::PageWalkCache;
use super::{PageTable, PtFootprint, RadixPageTable, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

const PTE_BYTES: u64 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinearBacking {
    /// The array's pages are mapped by a radix table (Elphinstone's hybrid).
    #[default]
    Mpt,
    /// A physical root array of the array's PTEs (VAX).
    Linear,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LinearConfig {
    pub backing: LinearBacking,
    /// User virtual-address bits the array covers (pages above are an error).
    pub va_bits: u8,
    /// Virtual address of the array (upper canonical half).
    pub base: u64,
}

impl Default for LinearConfig {
    fn default() -> Self {
        LinearConfig { backing: LinearBacking::Mpt, va_bits: 47, base: 0xffff_a000_0000_0000 }
    }
}

struct Space {
    ptes: HashMap<u64, u64>,
    /// Array page index -> its frame.
    array_pages: HashMap<u64, u64>,
    /// VAX backing: the physical root array.
    root: Option<(u64, PageSize)>,
}

pub struct LinearPageTable {
    cfg: LinearConfig,
    backing: RadixPageTable,
    spaces: Vec<Option<Space>>,
    mapped: u64,
    array_frames: u64,
    sizes: [PageSize; 1],
}

impl LinearPageTable {
    pub fn new(cfg: &LinearConfig) -> Result<LinearPageTable> {
        if !(20..=47).contains(&cfg.va_bits) {
            return Err(Error::config("page_table.linear.va_bits", "must be between 20 and 47 (the user half)"));
        }
        if cfg.backing == LinearBacking::Linear && cfg.va_bits > 40 {
            return Err(Error::config(
                "page_table.linear.va_bits",
                "a physical root array (backing = \"linear\") is only practical up to 40 bits",
            ));
        }
        let top = (cfg.base as i64) >> 47;
        let array_bytes = (1u64 << (cfg.va_bits - 12)) * PTE_BYTES;
        if top != -1 || cfg.base % 4096 != 0 || cfg.base.checked_add(array_bytes).is_none() {
            return Err(Error::config("page_table.linear.base", "must be a page-aligned address in the upper canonical half"));
        }
        Ok(LinearPageTable {
            cfg: cfg.clone(),
            backing: RadixPageTable::new(4)?,
            spaces: Vec::new(),
            mapped: 0,
            array_frames: 0,
            sizes: [PageSize::K4],
        })
    }

    fn space(&self, asid: Asid) -> Option<&Space> {
        self.spaces.get(asid as usize)?.as_ref()
    }

    fn vpn(&self, va: u64) -> Option<u64> {
        (va >> self.cfg.va_bits == 0).then_some(va >> 12)
    }

    /// Virtual address of the PTE of `vpn`.
    fn pte_va(&self, vpn: u64) -> u64 {
        self.cfg.base + vpn * PTE_BYTES
    }

    fn entry(e: u64) -> Translation {
        Translation { pa: e & !0xfff, size: PageSize::K4, perms: Perms::from_bits(e as u8) }
    }
}

impl PageTable for LinearPageTable {
    type Caches = PageWalkCache;

    fn kind(&self) -> &'static str {
        "linear"
    }

    fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        if self.spaces.len() <= asid as usize {
            self.spaces.resize_with(asid as usize + 1, || None);
        }
        if self.spaces[asid as usize].is_some() {
            return Ok(());
        }
        let root = match self.cfg.backing {
            LinearBacking::Mpt => {
                self.backing.create_space(mem, asid)?;
                None
            }
            LinearBacking::Linear => {
                let pages = 1u64 << (self.cfg.va_bits - 12 - 9);
                let size = PageSize::from_bytes((pages * PTE_BYTES).next_power_of_two().max(4096))
                    .map_err(|m| Error::config("page_table.linear.va_bits", m))?;
                Some((mem.alloc(size, FrameUse::PageTable)?, size))
            }
        };
        self.spaces[asid as usize] = Some(Space { ptes: HashMap::new(), array_pages: HashMap::new(), root });
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let Some(space) = self.spaces.get_mut(asid as usize).and_then(|s| s.take()) else { return };
        self.mapped -= space.ptes.len() as u64;
        let base = self.cfg.base;
        for (&page, &frame) in &space.array_pages {
            if self.cfg.backing == LinearBacking::Mpt {
                self.backing.unmap(mem, asid, base + page * 4096);
            }
            mem.free(frame, PageSize::K4, FrameUse::PageTable);
            self.array_frames -= 1;
        }
        match space.root {
            Some((pa, size)) => mem.free(pa, size, FrameUse::PageTable),
            None => self.backing.destroy_space(mem, asid),
        }
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        if size != PageSize::K4 {
            return Err(Error::config("os.page_size", format!("the linear page table maps 4K pages only, not {size}")));
        }
        let vpn = self.vpn(va).ok_or_else(|| {
            Error::Sim(format!("virtual address {va:#x} is beyond the linear array's {} bits", self.cfg.va_bits))
        })?;
        let page = vpn * PTE_BYTES / 4096;
        let array_va = self.cfg.base + page * 4096;
        let backing = self.cfg.backing;
        let space = self.spaces.get_mut(asid as usize).and_then(|s| s.as_mut()).ok_or_else(|| Error::Sim(format!("map into unknown address space {asid}")))?;
        if space.ptes.contains_key(&vpn) {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        if !space.array_pages.contains_key(&page) {
            let frame = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
            space.array_pages.insert(page, frame);
            self.array_frames += 1;
            if backing == LinearBacking::Mpt {
                self.backing.map(mem, asid, array_va, frame, PageSize::K4, Perms::RW)?;
            }
        }
        let space = self.spaces[asid as usize].as_mut().unwrap();
        space.ptes.insert(vpn, (pa & !0xfff) | perms.bits() as u64);
        self.mapped += 1;
        Ok(())
    }

    fn unmap(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let vpn = self.vpn(va)?;
        let space = self.spaces.get_mut(asid as usize)?.as_mut()?;
        let e = space.ptes.remove(&vpn)?;
        self.mapped -= 1;
        // Array pages stay until the space goes: a TLB may still map them.
        Some(Self::entry(e))
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Some(vpn) = self.vpn(va) else { return false };
        match self.spaces.get_mut(asid as usize).and_then(|s| s.as_mut()).and_then(|s| s.ptes.get_mut(&vpn)) {
            Some(e) => {
                *e = (*e & !0xfff) | perms.bits() as u64;
                true
            }
            None => false,
        }
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        let vpn = self.vpn(va)?;
        self.space(asid)?.ptes.get(&vpn).map(|&e| Self::entry(e))
    }

    fn walk(&mut self, asid: Asid, va: u64, _: &mut PageWalkCache, path: &mut WalkPath) -> Option<Translation> {
        let vpn = self.vpn(va)?;
        self.space(asid)?;
        // One read, at a virtual address: the MMU translates it (maybe nested).
        path.push_virtual_step(self.pte_va(vpn));
        self.translate(asid, va)
    }

    fn walk_nested(&mut self, asid: Asid, va: u64, caches: &mut PageWalkCache, path: &mut WalkPath) -> Option<Translation> {
        match self.cfg.backing {
            LinearBacking::Mpt => self.backing.walk(asid, va, caches, path),
            LinearBacking::Linear => {
                let space = self.space(asid)?;
                let (root_pa, _) = space.root?;
                let page = (va - self.cfg.base) / 4096;
                path.push_step(root_pa + page * PTE_BYTES, 1);
                space.array_pages.get(&page).map(|&f| Translation { pa: f, size: PageSize::K4, perms: Perms::RW })
            }
        }
    }

    fn footprint(&self) -> PtFootprint {
        let roots: u64 = self.spaces.iter().flatten().filter_map(|s| s.root).map(|(_, s)| s.bytes()).sum();
        let backing = if self.cfg.backing == LinearBacking::Mpt { self.backing.footprint().bytes } else { 0 };
        PtFootprint { bytes: self.array_frames * 4096 + roots + backing, nodes: self.array_frames, mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({"backing": self.cfg.backing, "va_bits": self.cfg.va_bits, "base": self.cfg.base,
                           "array_pages": self.array_frames,
                           "backing_bytes": if self.cfg.backing == LinearBacking::Mpt { self.backing.footprint().bytes } else { 0 }})
    }
}
