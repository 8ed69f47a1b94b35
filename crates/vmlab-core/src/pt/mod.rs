//! Page tables. Every organisation implements [`PageTable`]: map, unmap, protect,
//! translate (a functional lookup with no side effects) and walk (what the hardware or
//! refill handler does: the physical references it makes, grouped into sequential steps).
//!
//! One `PageTable` value holds the tables of every address space (keyed by ASID), so
//! organisations with one global table (inverted, hashed) and per-process ones (radix)
//! sit behind the same interface.
//!
//! [`PageTable`] is the model alone. What only makes the host faster (prefetch hints,
//! splitting a walk across two threads) is in [`FastPaths`], which every kind also
//! implements, mostly with its do-nothing defaults; likewise [`WalkCaches`] is the walk
//! caches' model, and [`SplitCaches`] how they divide when the walk splits.

pub mod adaptive;
pub mod arena;
pub mod cuckoo;
pub mod ecpt;
pub mod fast_paths;
pub mod guarded;
pub mod hashed;
pub mod inverted;
pub mod linear;
pub mod mpt;
pub mod nested;
pub mod nested_ecpt;
pub mod radix;
pub mod slab;
pub mod stlb;
pub mod walk;

pub use ecpt::ElasticCuckooPageTable;
pub use fast_paths::{split_walk, FastPaths, GuestPath, NoSplit, PathOf, SplitCaches, SplitWalk};
pub use guarded::GuardedPageTable;
pub use hashed::HashedPageTable;
pub use inverted::InvertedPageTable;
pub use linear::LinearPageTable;
pub use mpt::MultilevelPageTable;
pub use nested::{NestedPageTable, NestedRadixPageTable};
pub use nested_ecpt::NestedEcptPageTable;
pub use radix::RadixPageTable;
pub use stlb::SoftwareTlb;
pub use walk::{WalkPath, WalkRef};

use crate::addr::{Asid, PageSize, Perms};
use crate::error::Result;
use crate::os::buddy::BuddyAllocator;
use serde::Serialize;

/// Itanium's long-VHPT hash input: RID xor VPN, with a process's RIDs allocated as
/// Linux/ia64 does: eight per context, RID = context × 8 + VRN (the region, the VA's top
/// three bits; "a linear mapping from context ID to RID", Chapman et al. §3.1), with the
/// context's two low bytes swapped when `swizzle` (the paper's fix for collisions between
/// neighbouring contexts, which forked processes with the same layout are). A global RID
/// (a shared region's, mmu/regions.rs) is used as it is. `va` is any address of the page
/// or block `vpn` numbers (only its region is read).
#[inline(always)]
pub(crate) fn rid_xor_vpn(vpn: u64, va: u64, asid: Asid, swizzle: bool) -> u64 {
    let rid = if asid >= crate::mmu::regions::GLOBAL_RID_BASE {
        asid as u64
    } else {
        let context = if swizzle { asid.swap_bytes() } else { asid } as u64;
        context << 3 | va >> 61
    };
    vpn ^ rid
}

/// A present mapping: the physical base of the page, its size and permissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Physical address of the first byte of the page (aligned to `size`).
    pub pa: u64,
    pub size: PageSize,
    pub perms: Perms,
}

impl Translation {
    /// Physical address of `va` under this translation.
    #[inline(always)]
    pub fn phys(&self, va: u64) -> u64 {
        self.pa | (va & self.size.offset_mask())
    }
}

/// Size and shape of the page-table structures (docs/metrics.md, `page_table`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PtFootprint {
    /// Bytes of simulated physical memory holding page-table structures.
    pub bytes: u64,
    /// Number of page-table nodes (radix: 4 KiB table pages).
    pub(crate) nodes: u64,
    /// Mappings (leaf entries that translate) currently installed, of any size.
    pub mapped_pages: u64,
}

/// Counters of the walk caches a page-table kind uses (PWC, CWC, ...).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct CacheCounters {
    pub(crate) lookups: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl CacheCounters {
    #[inline(always)]
    pub(crate) fn record(&mut self, hit: bool) {
        self.lookups += 1;
        if hit {
            self.hits += 1
        } else {
            self.misses += 1
        }
    }
}

/// The walk caches of one page-table kind, owned by the MMU and passed to `walk`: the
/// model alone. How they divide when the walker moves to a thread of its own is a
/// host-speed hook, [`SplitCaches`] (`pt/fast_paths.rs`).
pub trait WalkCaches: Send + 'static {
    /// Drop every cached entry (context switch without ASID tags, full TLB shootdown).
    fn flush_all(&mut self);
    /// Drop the entries of one address space.
    fn flush_asid(&mut self, asid: Asid);
    /// Drop what may cache the translation path of `va` (called on unmap/protect).
    fn invalidate(&mut self, asid: Asid, va: u64);
    /// Named counters for the stats document.
    fn counters(&self) -> Vec<(String, CacheCounters)>;
    /// Cycles charged at the start of every walk for probing these caches.
    fn probe_latency(&self) -> u64 {
        0
    }
}

/// Walk caches for a kind that has none.
#[derive(Default, Debug)]
pub struct NoWalkCaches;
impl WalkCaches for NoWalkCaches {
    fn flush_all(&mut self) {}
    fn flush_asid(&mut self, _: Asid) {}
    fn invalidate(&mut self, _: Asid, _: u64) {}
    fn counters(&self) -> Vec<(String, CacheCounters)> {
        Vec::new()
    }
}

/// The interface every page-table organisation implements.
pub trait PageTable: 'static {
    type Caches: WalkCaches;

    /// Short name used in stats (`radix`, `hashed`, ...).
    fn kind(&self) -> &'static str;
    /// The page sizes this organisation can map, smallest first.
    fn page_sizes(&self) -> &[PageSize];
    /// The one page size the table can map at `va`, if it fixes it by address: the
    /// short-format VHPT's PTE has no size field, the walker takes it from the region
    /// register (Chapman et al. §2.3.1). `None`: any of `page_sizes()` (the default).
    #[inline(always)]
    fn page_size_at(&self, _va: u64) -> Option<PageSize> {
        None
    }
    /// Whether `page_size_at` fixes the size anywhere: the OS then maps exactly that
    /// size (FIXED only) and cannot split or merge pages.
    fn sizes_by_address(&self) -> bool {
        false
    }
    /// Whether a walk reads the PTEs of both pages of an even/odd pair of base pages
    /// together (one 16-byte record), so a refill of a page-pair TLB entry
    /// (`tlb.NAME.pairs`) fills both halves at no extra reference.
    fn holds_pte_pairs(&self) -> bool {
        false
    }

    /// Set up the (empty) tables of a new address space.
    fn create_space(&mut self, mem: &mut BuddyAllocator, asid: Asid) -> Result<()>;
    /// Tear down an address space's tables and free their memory. Mappings must have
    /// been removed by the caller, or are dropped with it.
    fn destroy_space(&mut self, mem: &mut BuddyAllocator, asid: Asid);

    /// Install `va -> pa` of `size` with `perms`. `va` and `pa` are aligned to `size`;
    /// the range must not overlap an existing mapping (the OS model guarantees both).
    fn map(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64, pa: u64, size: PageSize, perms: Perms) -> Result<()>;
    /// Remove the mapping that covers `va`; returns it. Frees table nodes that became empty.
    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: Asid, va: u64) -> Option<Translation>;
    /// Change the permissions of the mapping covering `va`. Returns false if none.
    fn protect(&mut self, asid: Asid, va: u64, perms: Perms) -> bool;
    /// Functional lookup: the mapping covering `va`, with no side effects or costs.
    fn translate(&self, asid: Asid, va: u64) -> Option<Translation>;
    /// The frame the OS mapped at `va` (what its frame accounting counts), given `t`,
    /// the translation the MMU holds for it: `t`'s frame, except in a nested table,
    /// whose translations end in host memory while the guest OS maps guest frames.
    fn mapped_frame(&self, _asid: Asid, va: u64, t: &Translation) -> u64 {
        t.phys(va)
    }
    /// What a TLB refill does for `va`: the physical references it makes go into `path`
    /// (cleared by the caller), consulting and filling `caches`. A walk may reorganise
    /// the table (hashed tables promote chain hits). Returns the mapping, or
    /// `None` if `va` is unmapped (the walk that discovers a fault still costs its refs).
    fn walk(&mut self, asid: Asid, va: u64, caches: &mut Self::Caches, path: &mut WalkPath) -> Option<Translation>;

    /// Translate an address of the table's own virtual array (a `WalkRef::VIRTUAL`
    /// reference whose page missed the TLB): the nested walk, with its references in
    /// `path`. Tables that make no virtual references never get this call.
    fn walk_nested(&mut self, _asid: Asid, _va: u64, _caches: &mut Self::Caches, _path: &mut WalkPath) -> Option<Translation> {
        None
    }

    /// An error a walk met but could not return (a nested table's hypervisor out of
    /// host memory for a page-table page): the engine checks after a walk that found no
    /// mapping, so the run stops with it instead of treating it as a fault.
    fn take_error(&mut self) -> Option<crate::Error> {
        None
    }

    /// Current size of the structures.
    fn footprint(&self) -> PtFootprint;
    /// Extra kind-specific numbers for the stats document (e.g. nodes per level).
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

#[cfg(test)]
mod tests {
    use super::rid_xor_vpn;
    use std::collections::HashSet;

    /// Slots of a 131072-entry RID-xor-VPN table (Itanium 2's 4 MiB long VHPT) that ten
    /// forked processes (contexts 1 to 10) fill with the same `pages` VPNs of region 0.
    fn slots(pages: u64, swizzle: bool) -> usize {
        let base = 0x10_0000u64; // VPN of 4 GiB: aligned to any power of two up to 2^20 pages
        (1..=10u16).flat_map(|ctx| (base..base + pages).map(move |vpn| rid_xor_vpn(vpn, vpn << 12, ctx, swizzle) & (131_072 - 1))).collect::<HashSet<_>>().len()
    }

    /// Chapman et al. §3.1: contexts allocated in sequence with the same layout collide
    /// under RID xor VPN; swapping the context's low bytes spreads them. With Linux's
    /// eight RIDs per context, 10 × 1024 shared pages take 10,240 distinct slots when
    /// swizzled and 1,024 (all ten on the same ones) when not.
    #[test]
    fn swizzled_contexts_spread_forked_processes_over_the_table() {
        assert_eq!(slots(1024, true), 10 * 1024);
        assert_eq!(slots(1024, false), 1024);
    }

    /// A context's regions have RIDs of their own (context × 8 + VRN), and a global RID
    /// is used as it is.
    #[test]
    fn the_rid_is_context_times_eight_plus_the_region() {
        let vpn = 0x1234u64;
        assert_eq!(rid_xor_vpn(vpn, 0, 3, false), vpn ^ 24);
        assert_eq!(rid_xor_vpn(vpn, 4 << 61, 3, false), vpn ^ (24 + 4));
        assert_eq!(rid_xor_vpn(vpn, 4 << 61, 3, true), vpn ^ ((0x300 << 3) + 4));
        let global = crate::mmu::regions::GLOBAL_RID_BASE + 5;
        assert_eq!(rid_xor_vpn(vpn, 1 << 61, global, true), vpn ^ global as u64);
    }
}
