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
//! first set, and freed with the space. The array's own pages are 4 KiB.
//!
//! **Regions (Itanium's short-format VHPT, Chapman et al. §2.1, §2.3.1).** On Itanium
//! VA bits 63:61 pick one of 8 region registers; the short VHPT is a linear table "that
//! maps a single region, hence up to eight are required per process", and its 8-byte
//! PTE has no size field: the page size "is taken from the preferred page size field
//! contained in the region register", so every page of a region has that size. x86-64
//! user addresses never set bits 63:61, so vmlab takes the region number from VA bits
//! `region_shift + 2 : region_shift` (`page_table.linear.region_shift`, default 44: the
//! 47-bit user half in 8 regions of 16 TiB). Region r's array sits at
//! `base + r * 2^(region_shift - 9)` (the slot its 4 KiB PTEs would fill) and is
//! indexed by the page number *at the region's page size*: with every region at 4 KiB
//! this is exactly the one array indexed by VA >> 12.

use super::stlb::{SoftwareTlb, StlbConfig};
use super::{FastPaths, NoSplit, PageTable, PtFootprint, RadixPageTable, Translation, WalkPath};
use crate::addr::{Asid, PageSize, Perms};
use crate::config::{Bytes, Config};
use crate::error::{Error, Result};
use crate::mmu::pwc::PageWalkCache;
use crate::mmu::tlb::TlbConfig;
use crate::os::buddy::{BuddyAllocator, FrameUse};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

const PTE_BYTES: u64 = 8;
/// Region registers (Chapman et al. §2.1: "an array of eight region registers").
pub(crate) const REGIONS: usize = 8;
/// Largest region page size: 4 GiB, the largest Itanium page (§2.1: "eleven different
/// page sizes ranging from 4KB to 4GB").
const MAX_REGION_PAGE_SHIFT: u8 = 32;
/// The default region selector: VA bits 46:44.
const DEFAULT_REGION_SHIFT: u8 = 44;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinearBacking {
    /// The array's pages are mapped by a radix table (Elphinstone's hybrid).
    #[default]
    Mpt,
    /// A physical root array of the array's PTEs (VAX).
    Linear,
    /// The array pages' translations are cached in a software TLB in front of the radix
    /// table (Elphinstone §3.3, after [BKW94]): a nested miss first reads the STLB.
    Stlb,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LinearConfig {
    pub backing: LinearBacking,
    /// User virtual-address bits the array covers (pages above are an error).
    pub va_bits: u8,
    /// Virtual address of the array (upper canonical half).
    pub base: u64,
    /// The region of an address is `va >> region_shift` (Itanium: 61, VA bits 63:61).
    /// Left out of the resolved config at its default, so older configs hash the same.
    #[serde(skip_serializing_if = "is_default_region_shift")]
    pub region_shift: u8,
    /// Each region register's preferred page size (rr.ps), region 0 first: the size of
    /// every page mapped in that region.
    #[serde(skip_serializing_if = "all_4k")]
    pub region_page_sizes: Vec<Bytes>,
    /// The software TLB of `backing = "stlb"` (left out of the resolved config when
    /// unset, so older configs hash the same).
    #[serde(skip_serializing_if = "is_unset_stlb")]
    pub array_stlb: StlbConfig,
}

fn is_unset_stlb(c: &StlbConfig) -> bool {
    *c == StlbConfig::default()
}

fn is_default_region_shift(s: &u8) -> bool {
    *s == DEFAULT_REGION_SHIFT
}

fn all_4k(v: &Vec<Bytes>) -> bool {
    *v == default_region_page_sizes()
}

fn default_region_page_sizes() -> Vec<Bytes> {
    vec![Bytes(4096); REGIONS]
}

impl Default for LinearConfig {
    fn default() -> Self {
        LinearConfig {
            backing: LinearBacking::Mpt,
            va_bits: 47,
            base: 0xffff_a000_0000_0000,
            region_shift: DEFAULT_REGION_SHIFT,
            region_page_sizes: default_region_page_sizes(),
            array_stlb: StlbConfig::default(),
        }
    }
}

/// Whether a TLB structure can cache a page of `size` (itself, or as a splinter).
fn tlb_caches(t: &TlbConfig, size: PageSize) -> bool {
    let held: Vec<u64> = t.page_sizes.iter().map(|b| b.0).collect();
    let (lo, hi) = (held.iter().min().copied().unwrap_or(0), held.iter().max().copied().unwrap_or(0));
    held.contains(&size.bytes()) || (t.any_size && (lo..=hi).contains(&size.bytes())) || (t.splinter && lo < size.bytes())
}

impl LinearConfig {
    /// Whether region `r` holds any user address below 2^va_bits.
    fn reachable(&self, r: usize) -> bool {
        r == 0 || (self.region_shift < self.va_bits && (r as u64) < 1u64 << (self.va_bits - self.region_shift))
    }

    /// The page shift of each region, checked: `region_page_sizes` lists 8 powers of two
    /// from 4K to 4G, each no larger than its region; a region no user address reaches
    /// (above `va_bits`) must stay at 4K (a size there would never be used).
    pub(crate) fn region_shifts(&self) -> Result<[u8; REGIONS]> {
        if !(20..=47).contains(&self.va_bits) {
            return Err(Error::config("page_table.linear.va_bits", "must be between 20 and 47 (the user half)"));
        }
        let lo = self.va_bits.saturating_sub(3);
        if !(lo..=61).contains(&self.region_shift) {
            return Err(Error::config(
                "page_table.linear.region_shift",
                format!(
                    "must be between {lo} (so that 8 regions cover the {} bits of page_table.linear.va_bits) and 61 (Itanium's own: VA bits 63:61 name the region)",
                    self.va_bits
                ),
            ));
        }
        if self.region_page_sizes.len() != REGIONS {
            return Err(Error::config(
                "page_table.linear.region_page_sizes",
                format!("list {REGIONS} page sizes, one per region register (region 0 first), not {}", self.region_page_sizes.len()),
            ));
        }
        let span = self.region_shift.min(self.va_bits);
        let mut shifts = [12u8; REGIONS];
        for (r, b) in self.region_page_sizes.iter().enumerate() {
            let key = format!("page_table.linear.region_page_sizes[{r}]");
            let s = PageSize::from_bytes(b.0).map_err(|m| Error::config(&key, m))?;
            if s.shift() > MAX_REGION_PAGE_SHIFT {
                return Err(Error::config(key, format!("{s} is larger than 4G, Itanium's largest page")));
            }
            if s.shift() > span {
                return Err(Error::config(key, format!("a {s} page does not fit in a region of 2^{span} bytes")));
            }
            if s != PageSize::K4 && !self.reachable(r) {
                return Err(Error::config(
                    key,
                    format!(
                        "region {r} starts at {:#x}, above the 2^{} bytes of page_table.linear.va_bits: no page is ever mapped there (leave it 4K)",
                        (r as u64) << self.region_shift,
                        self.va_bits
                    ),
                ));
            }
            shifts[r] = s.shift();
        }
        Ok(shifts)
    }

    /// Checks across sections (`Config::validate`, when `page_table.kind = "linear"`).
    /// A region page size above 4K is an OS page-size policy too: the OS must map pages
    /// of that size there (FIXED, os/policy/fixed.rs), cannot split or merge them, and
    /// the TLBs must be able to hold them.
    pub(crate) fn validate(&self, cfg: &Config) -> Result<()> {
        let shifts = self.region_shifts()?;
        if shifts.iter().all(|&s| s == 12) {
            return Ok(());
        }
        let why = "page_table.linear.region_page_sizes gives a region pages above 4K, and the short VHPT takes every page's size from its region (Chapman et al. §2.3.1)";
        if cfg.os.page_size.0 != 4096 {
            return Err(Error::config("os.page_size", format!("must be 4K (the base page) when {why}")));
        }
        if cfg.os.policy.kind != crate::os::policy::PolicyName::Fixed {
            return Err(Error::config("os.policy.kind", format!("only \"fixed\" applies when {why}: the OS cannot choose, promote or demote page sizes")));
        }
        if cfg.os.policy.khugepaged.every > 0 {
            return Err(Error::config("os.policy.khugepaged.every", format!("must be 0 when {why}: khugepaged cannot collapse pages")));
        }
        if cfg.os.recolor.kind != crate::os::recolor::RecolorKind::None {
            return Err(Error::config("os.recolor.kind", format!("must be \"none\" when {why}: recolouring moves 4K pages")));
        }
        for (r, &s) in shifts.iter().enumerate().filter(|(_, &s)| s != 12) {
            let size = PageSize::from_valid_shift(s);
            for (side, serves) in
                [("data", crate::config::Serves::serves_data as fn(crate::config::Serves) -> bool), ("instruction", crate::config::Serves::serves_instr)]
            {
                let mut tlbs = cfg.tlb.values().filter(|t| serves(t.serves)).peekable();
                if tlbs.peek().is_some() && !tlbs.any(|t| tlb_caches(t, size)) {
                    return Err(Error::config(
                        format!("page_table.linear.region_page_sizes[{r}]"),
                        format!("no {side} TLB structure holds {size} pages, so no translation of region {r} would ever be cached (add \"{size}\" to a tlb.*.page_sizes)"),
                    ));
                }
            }
        }
        Ok(())
    }
}

struct Space {
    /// PTE slot (the entry's index in the array, see `slot`) -> PTE.
    ptes: HashMap<u64, u64>,
    /// Array page index -> its frame.
    array_pages: HashMap<u64, u64>,
    /// VAX backing: the physical root array.
    root: Option<(u64, PageSize)>,
}

/// The table that maps the array's own pages (`backing = "mpt"` or `"stlb"`).
enum ArrayTable {
    Mpt(RadixPageTable),
    Stlb(SoftwareTlb<RadixPageTable>),
}

/// Run `$e` with `$t` bound to the array table, whichever it is.
macro_rules! on_array_table {
    ($table:expr, $t:ident => $e:expr) => {
        match $table {
            ArrayTable::Mpt($t) => $e,
            ArrayTable::Stlb($t) => $e,
        }
    };
}

pub struct LinearPageTable {
    cfg: LinearConfig,
    /// Unused with `backing = "linear"`.
    backing: ArrayTable,
    spaces: Vec<Option<Space>>,
    mapped: u64,
    array_frames: u64,
    /// The page shift of each region (rr.ps).
    shifts: [u8; REGIONS],
    /// Some region's pages are not 4K: sizes are fixed by address (`page_size_at`).
    by_region: bool,
    /// The distinct region page sizes, smallest first.
    sizes: Vec<PageSize>,
}

impl LinearPageTable {
    pub fn new(cfg: &LinearConfig) -> Result<LinearPageTable> {
        if !(20..=47).contains(&cfg.va_bits) {
            return Err(Error::config("page_table.linear.va_bits", "must be between 20 and 47 (the user half)"));
        }
        if cfg.backing == LinearBacking::Linear && cfg.va_bits > 40 {
            return Err(Error::config("page_table.linear.va_bits", "a physical root array (backing = \"linear\") is only practical up to 40 bits"));
        }
        if cfg.backing != LinearBacking::Stlb && !is_unset_stlb(&cfg.array_stlb) {
            return Err(Error::config("page_table.linear.array_stlb", "applies only with backing = \"stlb\""));
        }
        let shifts = cfg.region_shifts()?;
        // The regions' arrays together span what one array of 4K PTEs over va_bits does.
        let top = (cfg.base as i64) >> 47;
        let array_bytes = (1u64 << (cfg.va_bits - 12)) * PTE_BYTES;
        if top != -1 || !cfg.base.is_multiple_of(4096) || cfg.base.checked_add(array_bytes).is_none() {
            return Err(Error::config("page_table.linear.base", "must be a page-aligned address in the upper canonical half"));
        }
        let mut sizes: Vec<PageSize> = (0..REGIONS).filter(|&r| cfg.reachable(r)).map(|r| PageSize::from_valid_shift(shifts[r])).collect();
        sizes.sort();
        sizes.dedup();
        Ok(LinearPageTable {
            cfg: cfg.clone(),
            backing: match cfg.backing {
                LinearBacking::Stlb => ArrayTable::Stlb(SoftwareTlb::configured_at(RadixPageTable::new(4)?, &cfg.array_stlb, "page_table.linear.array_stlb")?),
                _ => ArrayTable::Mpt(RadixPageTable::new(4)?),
            },
            spaces: Vec::new(),
            mapped: 0,
            array_frames: 0,
            shifts,
            by_region: shifts.iter().any(|&s| s != 12),
            sizes,
        })
    }

    /// Bytes of the table that maps the array's pages (0 for the VAX root arrays, which
    /// `footprint` counts per space).
    fn backing_bytes(&self) -> u64 {
        match self.cfg.backing {
            LinearBacking::Linear => 0,
            _ => on_array_table!(&self.backing, t => t.footprint().bytes),
        }
    }

    fn space(&self, asid: Asid) -> Option<&Space> {
        self.spaces.get(asid as usize)?.as_ref()
    }

    /// The array slot of the PTE mapping `va`, and the page size of its region: region
    /// r = va >> region_shift; its array starts at slot r * 2^(region_shift - 12) and
    /// holds one 8-byte entry per page of the region's size (§2.3.1: the walker indexes
    /// with rr.ps). With 4K everywhere the slot is va >> 12.
    #[inline(always)]
    fn slot(&self, va: u64) -> Option<(u64, PageSize)> {
        if va >> self.cfg.va_bits != 0 {
            return None;
        }
        let rs = self.cfg.region_shift;
        // rs >= va_bits - 3, so r < 8 (rs >= va_bits: region 0 only).
        let r = va >> rs;
        let s = self.shifts[r as usize];
        let offset = va & ((1u64 << rs) - 1);
        Some(((r << (rs - 12)) + (offset >> s), PageSize::from_valid_shift(s)))
    }

    /// Virtual address of the PTE in `slot`.
    #[inline(always)]
    fn pte_va(&self, slot: u64) -> u64 {
        self.cfg.base + slot * PTE_BYTES
    }

    /// The region of `va` (for messages).
    fn region(&self, va: u64) -> u64 {
        va >> self.cfg.region_shift
    }

    #[inline(always)]
    fn entry(e: u64, size: PageSize) -> Translation {
        Translation { pa: e & !0xfff, size, perms: Perms::from_bits(e as u8) }
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

    /// The region's page size (rr.ps, Chapman et al. §2.3.1), once any region's differs
    /// from 4K.
    #[inline]
    fn page_size_at(&self, va: u64) -> Option<PageSize> {
        if !self.by_region {
            return None;
        }
        self.slot(va).map(|(_, s)| s)
    }

    fn sizes_by_address(&self) -> bool {
        self.by_region
    }

    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()> {
        if self.spaces.len() <= asid as usize {
            self.spaces.resize_with(asid as usize + 1, || None);
        }
        if self.spaces[asid as usize].is_some() {
            return Ok(());
        }
        let root = match self.cfg.backing {
            LinearBacking::Mpt | LinearBacking::Stlb => {
                on_array_table!(&mut self.backing, t => t.create_space(mem, asid))?;
                None
            }
            LinearBacking::Linear => {
                let pages = 1u64 << (self.cfg.va_bits - 12 - 9);
                let size =
                    PageSize::from_bytes((pages * PTE_BYTES).next_power_of_two().max(4096)).map_err(|m| Error::config("page_table.linear.va_bits", m))?;
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
            if self.cfg.backing != LinearBacking::Linear {
                on_array_table!(&mut self.backing, t => t.unmap(mem, asid, base + page * 4096));
            }
            mem.free(frame, PageSize::K4, FrameUse::PageTable);
            self.array_frames -= 1;
        }
        match space.root {
            Some((pa, size)) => mem.free(pa, size, FrameUse::PageTable),
            None => on_array_table!(&mut self.backing, t => t.destroy_space(mem, asid)),
        }
    }

    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()> {
        let (slot, region_size) =
            self.slot(va).ok_or_else(|| Error::Sim(format!("virtual address {va:#x} is beyond the linear array's {} bits", self.cfg.va_bits)))?;
        if size != region_size {
            // The short-format PTE has no size field (§2.3.1).
            return Err(if self.by_region {
                Error::config(
                    format!("page_table.linear.region_page_sizes[{}]", self.region(va)),
                    format!("region {} maps {region_size} pages only, not a {size} page at {va:#x}", self.region(va)),
                )
            } else {
                Error::config("os.page_size", format!("the linear page table maps 4K pages only, not {size}"))
            });
        }
        let page = slot * PTE_BYTES / 4096;
        let array_va = self.cfg.base + page * 4096;
        let backing = self.cfg.backing;
        let space = self.spaces.get_mut(asid as usize).and_then(|s| s.as_mut()).ok_or_else(|| Error::Sim(format!("map into unknown address space {asid}")))?;
        if space.ptes.contains_key(&slot) {
            return Err(Error::Sim(format!("map {va:#x}: already mapped")));
        }
        if let std::collections::hash_map::Entry::Vacant(e) = space.array_pages.entry(page) {
            let frame = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
            e.insert(frame);
            self.array_frames += 1;
            if backing != LinearBacking::Linear {
                on_array_table!(&mut self.backing, t => t.map(mem, asid, array_va, frame, PageSize::K4, Perms::RW))?;
            }
        }
        let space = self.spaces[asid as usize].as_mut().unwrap();
        space.ptes.insert(slot, (pa & !0xfff) | perms.bits() as u64);
        self.mapped += 1;
        Ok(())
    }

    fn unmap(&mut self, _mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation> {
        let (slot, size) = self.slot(va)?;
        let space = self.spaces.get_mut(asid as usize)?.as_mut()?;
        let e = space.ptes.remove(&slot)?;
        self.mapped -= 1;
        // Array pages stay until the space goes: a TLB may still map them.
        Some(Self::entry(e, size))
    }

    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool {
        let Some((slot, _)) = self.slot(va) else { return false };
        match self.spaces.get_mut(asid as usize).and_then(|s| s.as_mut()).and_then(|s| s.ptes.get_mut(&slot)) {
            Some(e) => {
                *e = (*e & !0xfff) | perms.bits() as u64;
                true
            }
            None => false,
        }
    }

    fn translate(&self, asid: Asid, va: u64) -> Option<Translation> {
        let (slot, size) = self.slot(va)?;
        self.space(asid)?.ptes.get(&slot).map(|&e| Self::entry(e, size))
    }

    fn walk(&mut self, asid: Asid, va: u64, _: &mut PageWalkCache, path: &mut WalkPath) -> Option<Translation> {
        let (slot, size) = self.slot(va)?;
        let space = self.space(asid)?;
        // One read, at a virtual address: the MMU translates it (maybe nested). The
        // entry's page size is the region's (§2.3.1).
        path.push_virtual_step(self.pte_va(slot));
        space.ptes.get(&slot).map(|&e| Self::entry(e, size))
    }

    fn walk_nested(&mut self, asid: Asid, va: u64, caches: &mut PageWalkCache, path: &mut WalkPath) -> Option<Translation> {
        match self.cfg.backing {
            LinearBacking::Mpt | LinearBacking::Stlb => on_array_table!(&mut self.backing, t => t.walk(asid, va, caches, path)),
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
        let backing = self.backing_bytes();
        PtFootprint { bytes: self.array_frames * 4096 + roots + backing, nodes: self.array_frames, mapped_pages: self.mapped }
    }

    fn details(&self) -> serde_json::Value {
        let mut d = serde_json::json!({"backing": self.cfg.backing, "va_bits": self.cfg.va_bits, "base": self.cfg.base,
                           "array_pages": self.array_frames,
                           "backing_bytes": self.backing_bytes()});
        if let ArrayTable::Stlb(t) = &self.backing {
            d["array_stlb"] = t.details()["stlb"].clone();
        }
        if self.by_region {
            d["region_shift"] = self.cfg.region_shift.into();
            d["region_page_sizes"] = self.shifts.iter().map(|&s| PageSize::from_valid_shift(s).to_string()).collect::<Vec<_>>().into();
        }
        d
    }
}

impl FastPaths for LinearPageTable {
    type Split = NoSplit;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sizes(pairs: &[(usize, u64)]) -> Vec<Bytes> {
        let mut v = default_region_page_sizes();
        for &(r, b) in pairs {
            v[r] = Bytes(b);
        }
        v
    }

    /// The one reference a walk makes: the PTE's virtual address.
    fn pte_va_walked(pt: &mut LinearPageTable, va: u64) -> u64 {
        let mut path = WalkPath::new();
        pt.walk(0, va, &mut PageWalkCache::none(), &mut path);
        assert_eq!(path.refs().len(), 1);
        assert_eq!(path.refs()[0].what, crate::pt::WalkRef::VIRTUAL);
        path.refs()[0].pa
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        /// With every region at 4K the regions' arrays make one linear array indexed
        /// by VA >> 12, whatever the region selector.
        #[test]
        fn all_4k_regions_are_the_single_array(va in 0u64..(1 << 47), region_shift in 44u8..=61) {
            let cfg = LinearConfig { region_shift, ..Default::default() };
            let mut pt = LinearPageTable::new(&cfg).unwrap();
            let mut mem = BuddyAllocator::new(64 << 20).unwrap();
            pt.create_space(&mut mem, 0).unwrap();
            prop_assert_eq!(pte_va_walked(&mut pt, va), 0xffff_a000_0000_0000 + (va >> 12) * 8);
            prop_assert_eq!(pt.page_size_at(va), None);
            prop_assert!(!pt.sizes_by_address());
        }
    }

    #[test]
    fn a_16k_region_indexes_its_own_array_by_16k_page() {
        // Region 7 (VA bits 46:44 = 7) has 16K pages.
        let cfg = LinearConfig { region_page_sizes: sizes(&[(7, 16 << 10)]), ..Default::default() };
        let mut pt = LinearPageTable::new(&cfg).unwrap();
        let mut mem = BuddyAllocator::new(64 << 20).unwrap();
        pt.create_space(&mut mem, 0).unwrap();
        assert_eq!(pt.page_sizes(), &[PageSize::K4, PageSize::from_bytes(16 << 10).unwrap()]);
        assert!(pt.sizes_by_address());
        let k16 = PageSize::from_bytes(16 << 10).unwrap();
        // 0x7f00_0001_2345: offset in region 7 = 0xf00_0001_2345, 16K page 0x3c00_0004;
        // region 7's array starts at slot 7 << 32 (8 bytes each: byte 0x38_0000_0000).
        let va = 0x7f00_0001_2345;
        assert_eq!(pt.page_size_at(va), Some(k16));
        assert_eq!(pte_va_walked(&mut pt, va), 0xffff_a000_0000_0000 + 0x38_0000_0000 + 0x3c00_0004 * 8);
        // Every 4K piece of the 16K page reads the same entry; the next 16K page the next.
        assert_eq!(pte_va_walked(&mut pt, 0x7f00_0001_0000), pte_va_walked(&mut pt, 0x7f00_0001_3fff));
        assert_eq!(pte_va_walked(&mut pt, 0x7f00_0001_4000), pte_va_walked(&mut pt, va) + 8);
        // Region 0 keeps 4K pages in the first slot.
        assert_eq!(pt.page_size_at(0x40_1000), Some(PageSize::K4));
        assert_eq!(pte_va_walked(&mut pt, 0x40_1000), 0xffff_a000_0000_0000 + 0x401 * 8);

        // The entry has no size field: the translation's size is the region's.
        pt.map(&mut mem, 0, 0x7f00_0001_0000, 0x10_0000, k16, Perms::RW_USER).unwrap();
        let t = pt.translate(0, va).unwrap();
        assert_eq!((t.pa, t.size, t.phys(va)), (0x10_0000, k16, 0x10_2345));
        assert_eq!(pt.walk(0, va, &mut PageWalkCache::none(), &mut WalkPath::new()), Some(t));
        assert!(pt.protect(0, 0x7f00_0001_3000, Perms::R));
        assert_eq!(pt.unmap(&mut mem, 0, 0x7f00_0001_1000).map(|t| (t.size, t.perms)), Some((k16, Perms::R)));
        assert_eq!(pt.translate(0, va), None);

        // A page of another size than the region's is refused, naming the key.
        let e = pt.map(&mut mem, 0, 0x7f00_0002_0000, 0x20_0000, PageSize::K4, Perms::RW_USER).unwrap_err().to_string();
        assert!(e.contains("page_table.linear.region_page_sizes[7]") && e.contains("16K"), "{e}");
        let e = pt.map(&mut mem, 0, 0x40_0000, 0x20_0000, k16, Perms::RW_USER).unwrap_err().to_string();
        assert!(e.contains("page_table.linear.region_page_sizes[0]"), "{e}");
    }

    #[test]
    fn bad_region_keys_are_named() {
        let err = |c: LinearConfig| LinearPageTable::new(&c).err().expect("rejected").to_string();
        let e = err(LinearConfig { region_page_sizes: vec![Bytes(4096); 7], ..Default::default() });
        assert!(e.contains("`page_table.linear.region_page_sizes`") && e.contains("8 page sizes"), "{e}");
        for (b, what) in [(12u64 << 10, "power of two"), (2 << 10, "outside"), (8 << 30, "4G")] {
            let e = err(LinearConfig { region_page_sizes: sizes(&[(5, b)]), ..Default::default() });
            assert!(e.contains("`page_table.linear.region_page_sizes[5]`") && e.contains(what), "{b}: {e}");
        }
        // 8 regions must cover va_bits: 47 - 3 = 44 at least.
        let e = err(LinearConfig { region_shift: 43, ..Default::default() });
        assert!(e.contains("`page_table.linear.region_shift`"), "{e}");
        // A 2^20-byte region cannot hold a 2M page.
        let e = err(LinearConfig { va_bits: 23, region_shift: 20, region_page_sizes: sizes(&[(1, 2 << 20)]), ..Default::default() });
        assert!(e.contains("`page_table.linear.region_page_sizes[1]`") && e.contains("does not fit"), "{e}");
        // With va_bits = 40 only region 0 holds user addresses (region_shift 44).
        let e = err(LinearConfig { va_bits: 40, region_page_sizes: sizes(&[(3, 16 << 10)]), ..Default::default() });
        assert!(e.contains("`page_table.linear.region_page_sizes[3]`") && e.contains("va_bits"), "{e}");
        assert!(LinearPageTable::new(&LinearConfig { va_bits: 40, region_page_sizes: sizes(&[(0, 16 << 10)]), ..Default::default() }).is_ok());
    }
}
