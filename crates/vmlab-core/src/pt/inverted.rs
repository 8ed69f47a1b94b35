//! Inverted page table (Elphinstone §3.4): a hash anchor table (HAT) of 8-byte frame
//! indices and a frame table with one 16-byte entry per physical frame (tag = virtual
//! page number and ASID, link, permissions). One table serves every address space.
//!
//! A lookup reads the anchor selected by hash(VPN, ASID), then the frame entries of its
//! chain one after another: at least two sequential references.
//!
//! There is no aliasing: a frame holds one translation, so a frame cannot be mapped by
//! two address spaces (shared memory) or at two addresses; such a map is an error
//! that says so. Pages are 4 KiB only.

use super::{FastPaths, NoSplit, NoWalkCaches, PageTable, PtFootprint, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::error::{Error, Result};
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};

const NONE: u32 = u32::MAX;
const ANCHOR_BYTES: u64 = 8;
const FRAME_ENTRY_BYTES: u64 = 16;
/// The most frames (and anchors) the model holds: 256 GiB of simulated physical memory,
/// about 1.3 GiB of host memory for the two tables.
pub(crate) const MAX_FRAMES: u64 = 1 << 26;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct InvertedConfig {
    /// Anchors in the hash anchor table (a power of two); 0 = one per physical frame.
    pub anchors: usize,
}

#[derive(Clone, Copy)]
struct FrameEntry {
    vpn: u64,
    asid: Asid,
    perms: u8,
    used: bool,
    next: u32,
}

pub struct InvertedPageTable {
    anchors: Vec<u32>,
    frames: Vec<FrameEntry>,
    /// Simulated addresses of the two tables, allocated with the first address space.
    hat_pa: u64,
    ft_pa: u64,
    hat_size: Option<PageSize>,
    ft_size: Option<PageSize>,
    mapped: u64,
    sizes: [PageSize; 1],
}

impl InvertedPageTable {
    /// `phys_bytes` is the simulated physical memory the frame table describes.
    pub fn new(cfg: &InvertedConfig, phys_bytes: u64) -> Result<InvertedPageTable> {
        let frames = phys_bytes / 4096;
        // The model keeps an entry per simulated frame in host memory: bound it, so that
        // a large `phys_mem` is an error, not gigabytes (or an abort).
        if frames > MAX_FRAMES {
            return Err(Error::config(
                "machine.phys_mem",
                format!(
                    "an inverted page table keeps an entry per frame: at most {} GiB of physical memory with page_table.kind = \"inverted\"",
                    (MAX_FRAMES * 4096) >> 30
                ),
            ));
        }
        let anchors = if cfg.anchors == 0 { (frames as usize).next_power_of_two() } else { cfg.anchors };
        if !anchors.is_power_of_two() || anchors as u64 > MAX_FRAMES {
            return Err(Error::config("page_table.inverted.anchors", format!("must be a power of two up to {MAX_FRAMES} (or 0 for one per frame)")));
        }
        Ok(InvertedPageTable {
            anchors: vec![NONE; anchors],
            frames: vec![FrameEntry { vpn: 0, asid: 0, perms: 0, used: false, next: NONE }; frames as usize],
            hat_pa: 0,
            ft_pa: 0,
            hat_size: None,
            ft_size: None,
            mapped: 0,
            sizes: [PageSize::K4],
        })
    }

    #[inline]
    fn hash(&self, vpn: u64, asid: Asid) -> usize {
        let x = (vpn ^ ((asid as u64) << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((x ^ (x >> 31)) as usize) & (self.anchors.len() - 1)
    }

    /// The frame holding (asid, vpn), and its predecessor in the chain.
    fn find(&self, asid: Asid, vpn: u64) -> Option<(u32, Option<u32>)> {
        let mut f = self.anchors[self.hash(vpn, asid)];
        let mut prev = None;
        while f != NONE {
            let e = &self.frames[f as usize];
            if e.vpn == vpn && e.asid == asid {
                return Some((f, prev));
            }
            prev = Some(f);
            f = e.next;
        }
        None
    }

    fn translation(&self, f: u32) -> Translation {
        Translation { pa: (f as u64) << 12, size: PageSize::K4, perms: Perms::from_bits(self.frames[f as usize].perms) }
    }

    fn table_size(bytes: u64) -> Result<PageSize> {
        PageSize::from_bytes(bytes.next_power_of_two().max(4096)).map_err(|m| Error::config("machine.phys_mem", m))
    }
}

impl PageTable for InvertedPageTable {
    type Caches = NoWalkCaches;

    fn kind(&self) -> &'static str {
        "inverted"
    }

    fn page_sizes(&self) -> &[PageSize] {
        &self.sizes
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, _asid: Asid) -> Result<()> {
        if self.hat_size.is_none() {
            let hs = Self::table_size(self.anchors.len() as u64 * ANCHOR_BYTES)?;
            let fs = Self::table_size(self.frames.len() as u64 * FRAME_ENTRY_BYTES)?;
            self.hat_pa = mem.alloc(hs, FrameUse::PageTable)?;
            self.ft_pa = mem.alloc(fs, FrameUse::PageTable)?;
            self.hat_size = Some(hs);
            self.ft_size = Some(fs);
        }
        Ok(())
    }

    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) {
        let owned: Vec<u64> = self.frames.iter().filter(|e| e.used && e.asid == asid).map(|e| e.vpn << 12).collect();
        for va in owned {
            self.unmap(mem, asid, va);
        }
    }

    fn map(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        if size != PageSize::K4 {
            return Err(Error::config("os.page_size", format!("an inverted page table maps 4K pages only, not {size}")));
        }
        let f = (pa >> 12) as usize;
        if f >= self.frames.len() {
            return Err(Error::Sim(format!("frame {pa:#x} is outside the inverted table's physical memory")));
        }
        if self.frames[f].used {
            let e = self.frames[f];
            return Err(Error::Sim(format!(
                "inverted page table: frame {pa:#x} already holds {:#x} of address space {}; an IPT has one translation per frame, so shared pages cannot be mapped (use a page table that supports aliasing)",
                e.vpn << 12,
                e.asid
            )));
        }
        let vpn = va >> 12;
        if self.find(asid, vpn).is_some() {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        let h = self.hash(vpn, asid);
        self.frames[f] = FrameEntry { vpn, asid, perms: perms.bits(), used: true, next: self.anchors[h] };
        self.anchors[h] = f as u32;
        self.mapped += 1;
        Ok(())
    }

    fn unmap(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let vpn = va >> 12;
        let (f, prev) = self.find(asid, vpn)?;
        let t = self.translation(f);
        let next = self.frames[f as usize].next;
        match prev {
            Some(p) => self.frames[p as usize].next = next,
            None => {
                let h = self.hash(vpn, asid);
                self.anchors[h] = next;
            }
        }
        self.frames[f as usize] = FrameEntry { vpn: 0, asid: 0, perms: 0, used: false, next: NONE };
        self.mapped -= 1;
        Some(t)
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        match self.find(asid, va >> 12) {
            Some((f, _)) => {
                self.frames[f as usize].perms = perms.bits();
                true
            }
            None => false,
        }
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        self.find(asid, va >> 12).map(|(f, _)| self.translation(f))
    }

    fn walk(&mut self, asid: Asid, va: u64, _: &mut NoWalkCaches, path: &mut WalkPath) -> Option<Translation> {
        self.hat_size?;
        let vpn = va >> 12;
        let h = self.hash(vpn, asid);
        path.push_step(self.hat_pa + h as u64 * ANCHOR_BYTES, 0);
        let mut f = self.anchors[h];
        while f != NONE {
            path.push_step(self.ft_pa + f as u64 * FRAME_ENTRY_BYTES, 1);
            let e = &self.frames[f as usize];
            if e.vpn == vpn && e.asid == asid {
                return Some(self.translation(f));
            }
            f = e.next;
        }
        None
    }

    fn footprint(&self) -> PtFootprint {
        let bytes = self.hat_size.map_or(0, |s| s.bytes()) + self.ft_size.map_or(0, |s| s.bytes());
        PtFootprint { bytes, nodes: 2 * self.hat_size.is_some() as u64, mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({"anchors": self.anchors.len(), "frame_entries": self.frames.len(),
                           "anchor_bytes": ANCHOR_BYTES, "frame_entry_bytes": FRAME_ENTRY_BYTES})
    }
}

impl FastPaths for InvertedPageTable {
    type Split = NoSplit;
    const PREFETCHES: bool = true;

    /// The walk's first read is a random anchor slot in an array sized by physical
    /// memory: bring it into the host cache ahead of the walk. (The frame entry it
    /// names is known only once the anchor is read.)
    #[inline]
    fn prefetch(&self, asid: Asid, va: u64) {
        if !self.anchors.is_empty() {
            crate::host::prefetch(&self.anchors[self.hash(va >> 12, asid)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_touches_the_anchor_then_the_frame_entry() {
        let mut mem = BuddyAllocator::new(64 << 20).unwrap();
        let mut pt = InvertedPageTable::new(&InvertedConfig::default(), 64 << 20).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        let pa = mem.alloc(PageSize::K4, FrameUse::Data).unwrap();
        pt.map(&mut mem, 0, 0x7000_0000, pa, PageSize::K4, Perms::RW_USER).unwrap();
        let mut path = WalkPath::new();
        let t = pt.walk(0, 0x7000_0042, &mut NoWalkCaches, &mut path).unwrap();
        assert_eq!(t.pa, pa);
        assert_eq!(path.refs().len(), 2);
        assert_eq!(path.steps(), 2);
        // The table is proportional to physical memory: 16 B per frame + the anchors.
        assert_eq!(pt.footprint().bytes, (16384 * 16) + (16384 * 8));
    }

    #[test]
    fn aliasing_is_refused_with_an_explanation() {
        let mut mem = BuddyAllocator::new(64 << 20).unwrap();
        let mut pt = InvertedPageTable::new(&InvertedConfig::default(), 64 << 20).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        pt.create_space(&mut mem, 1).unwrap();
        pt.map(&mut mem, 0, 0x1000, 0x5000, PageSize::K4, Perms::RW_USER).unwrap();
        let e = pt.map(&mut mem, 1, 0x1000, 0x5000, PageSize::K4, Perms::RW_USER).unwrap_err().to_string();
        assert!(e.contains("shared pages cannot be mapped"), "{e}");
    }
}
