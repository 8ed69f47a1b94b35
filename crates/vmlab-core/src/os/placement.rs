//! Physical page placement: which frame a new base page gets (`[os.placement]`).
//!
//! In a physically indexed cache the frame decides the *colour* of a page: the cache
//! page (way-sized slice of the cache) its lines fall in. Frames of one colour are
//! `colours` frames apart, `colours = cache size / (ways x 4 KiB)` of the largest cache
//! on the data path (Romer §2.1). Policies (Romer §4.3.2, Kessler & Hill 1992):
//!
//! - `buddy`: the buddy allocator's lowest free block (colour-blind; the default);
//! - `page-coloring`: colour = virtual page number mod colours (Ultrix);
//! - `bin-hopping`: colours in turn, in the order pages are first mapped (Digital Unix);
//! - `random`: a seeded random colour per page.
//!
//! A colour is honoured by claiming the lowest free frame of that colour (a cursor per
//! colour walks up, wrapping once); if none is free the page falls back to `buddy` and
//! the fallback is counted. Recolouring (os/recolor/) uses the same allocator.

use super::buddy::{BuddyAllocator, FrameUse};
use crate::addr::{PageSize, MIN_PAGE_SHIFT};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::mem::cache::CacheConfig;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::HashMap;

/// `os.placement.kind`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementKind {
    #[default]
    Buddy,
    PageColoring,
    BinHopping,
    Random,
}

/// `[os.placement]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    #[serde(default)]
    pub kind: PlacementKind,
    /// Number of colours; 0 = derived from the largest data-side cache.
    /// (The key keeps its British spelling, as do `cache.NAME.organisation` and the
    /// stats document's `colours`.)
    #[serde(default, rename = "colours", skip_serializing_if = "crate::config::is_default")]
    pub colors: u64,
    /// Seed of `random`.
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub seed: u64,
}

impl PlacementConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == PlacementConfig::default()
    }

    pub(crate) fn validate(&self, cfg: &Config) -> Result<()> {
        let frames = cfg.machine.phys_mem.0 >> MIN_PAGE_SHIFT;
        if self.colors > frames {
            return Err(Error::config("os.placement.colours", format!("{} colours but only {frames} frames", self.colors)));
        }
        Ok(())
    }
}

/// The cache page colours come from: the largest (highest-level) cache serving data.
pub(crate) fn color_cache(caches: &BTreeMap<String, CacheConfig>) -> Option<&CacheConfig> {
    caches.values().filter(|c| c.serves.serves_data()).max_by_key(|c| c.level)
}

/// What placement and recolouring need of the cache page colours come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColorCache {
    /// Its colours: size / (ways x 4 KiB), at least 1.
    pub(crate) colors: u64,
    /// Its line size in bytes.
    pub(crate) line: u64,
}

impl ColorCache {
    /// The colour cache of `caches` ([`color_cache`]), if any serves data.
    pub(crate) fn of(caches: &BTreeMap<String, CacheConfig>) -> Option<ColorCache> {
        color_cache(caches).map(|c| ColorCache { colors: (c.size.0 / (c.ways.max(1) as u64 * (1 << MIN_PAGE_SHIFT))).max(1), line: c.line.0 })
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub(crate) struct PlacementCounters {
    /// Base pages placed at the colour the policy chose.
    pub(crate) placed: u64,
    /// Pages whose colour had no free frame (given any frame instead).
    pub(crate) fallbacks: u64,
}

pub struct Placement {
    pub(crate) kind: PlacementKind,
    pub colors: u64,
    next_bin: u64,
    rng: Xoshiro256PlusPlus,
    /// Next candidate frame index k (frame = base + k * stride) per (order, base colour).
    cursors: HashMap<(u8, u64), u64>,
    pub(crate) counters: PlacementCounters,
}

impl Placement {
    /// Placement by `p` (validated with the rest of the configuration), for the colour
    /// cache `cache` (which gives the colours unless `p` does; none: 1 colour).
    pub(crate) fn new(p: &PlacementConfig, cache: Option<ColorCache>) -> Placement {
        let colors = if p.colors == 0 { cache.map_or(1, |c| c.colors) } else { p.colors };
        Placement {
            kind: p.kind,
            colors,
            next_bin: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(p.seed),
            cursors: HashMap::new(),
            counters: PlacementCounters::default(),
        }
    }

    /// The colour of physical address `pa`.
    #[inline]
    pub fn color_of(&self, pa: u64) -> u64 {
        (pa >> MIN_PAGE_SHIFT) % self.colors
    }

    /// The colour the policy gives a new base page at `va` (None: colour-blind).
    pub(crate) fn initial_color(&mut self, va: u64) -> Option<u64> {
        match self.kind {
            PlacementKind::Buddy => None,
            PlacementKind::PageColoring => Some((va >> MIN_PAGE_SHIFT) % self.colors),
            PlacementKind::BinHopping => {
                let c = self.next_bin;
                self.next_bin = (c + 1) % self.colors;
                Some(c)
            }
            PlacementKind::Random => Some(self.rng.next_u64() % self.colors),
        }
    }

    /// A free aligned block of `size` whose first frame has color `color` (a multiple
    /// of the block's frames when the block is smaller than a colour span; blocks that
    /// span every colour take any free block). None if there is none.
    pub(crate) fn alloc(&mut self, mem: &mut BuddyAllocator, size: PageSize, color: u64, usage: FrameUse) -> Option<u64> {
        let frames = size.base_pages();
        if frames >= self.colors {
            return mem.try_alloc(size, usage);
        }
        let order = BuddyAllocator::order_of(size);
        let base = color % self.colors;
        let total = mem.frames_total();
        let stride = self.colors;
        let cursor = self.cursors.entry((order, base)).or_insert(0);
        let start = *cursor;
        let limit = (total.saturating_sub(base)).div_ceil(stride);
        // From the cursor to the end, then once from the bottom (frames freed since).
        for k in (start..limit).chain(0..start.min(limit)) {
            let f = base + k * stride;
            if !f.is_multiple_of(frames) || f + frames > total {
                continue;
            }
            if mem.claim(f << MIN_PAGE_SHIFT, size, usage) {
                *cursor = k + 1;
                return Some(f << MIN_PAGE_SHIFT);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(kind: &str) -> Placement {
        let cfg = Config::load("romer-cache", &[format!("os.placement.kind=\"{kind}\"")]).unwrap();
        Placement::new(&cfg.os.placement, ColorCache::of(&cfg.cache))
    }

    #[test]
    fn colors_come_from_the_largest_data_cache() {
        let p = placement("page-coloring");
        assert_eq!(p.colors, 128, "512 KiB direct-mapped / 4 KiB");
        let cfg = Config::load("romer-cache", &["cache.l2.ways=2".into()]).unwrap();
        assert_eq!(ColorCache::of(&cfg.cache).map(|c| c.colors), Some(64));
    }

    #[test]
    fn policies_choose_colors_as_defined() {
        let mut pc = placement("page-coloring");
        assert_eq!(pc.initial_color(0x7f00_0000_0000 + 5 * 4096), Some((0x7f00_0000_0000u64 / 4096 + 5) % 128));
        let mut bh = placement("bin-hopping");
        let seq: Vec<u64> = (0..130).map(|i| bh.initial_color(0x1000 * 977 * i).unwrap()).collect();
        assert_eq!(&seq[..3], &[0, 1, 2]);
        assert_eq!(seq[128], 0, "cycles through every colour");
        let mut r = placement("random");
        let rs: Vec<u64> = (0..64).map(|_| r.initial_color(0).unwrap()).collect();
        assert!(rs.iter().all(|&c| c < 128) && rs.iter().collect::<std::collections::BTreeSet<_>>().len() > 16);
        assert_eq!(placement("buddy").initial_color(0), None);
    }

    #[test]
    fn allocations_honor_the_color_until_it_runs_out() {
        let mut p = placement("page-coloring");
        let mut mem = BuddyAllocator::new(1 << 20).unwrap(); // 256 frames: 2 of each colour
        let a = p.alloc(&mut mem, PageSize::K4, 5, FrameUse::Data).unwrap();
        let b = p.alloc(&mut mem, PageSize::K4, 5, FrameUse::Data).unwrap();
        assert_eq!((p.color_of(a), p.color_of(b)), (5, 5));
        assert_ne!(a, b);
        assert_eq!(p.alloc(&mut mem, PageSize::K4, 5, FrameUse::Data), None);
        mem.free(a, PageSize::K4, FrameUse::Data);
        assert_eq!(p.alloc(&mut mem, PageSize::K4, 5, FrameUse::Data), Some(a), "the cursor wraps to freed frames");
        // A 16K block at base colour 8 starts on a colour-8 frame, aligned.
        let blk = p.alloc(&mut mem, PageSize::from_valid_shift(14), 8, FrameUse::Data).unwrap();
        assert_eq!((p.color_of(blk), blk % (16 << 10)), (8, 0));
        assert_eq!(mem.counters().frames_data, 2 + 4);
    }
}
