//! Start-up fragmentation of physical memory (`[machine.fragmentation]`, docs/config.md):
//! frames left allocated by "other" owners (`FrameUse::Other`) so that large blocks are
//! scarce and page-size policies must fall back (the TPS paper's §V fragmentation study
//! started from a loaded server's buddy state).
//!
//! Two ways, both deterministic: a synthetic target (`free`, `level`, `order`, `seed`),
//! or the replay of an allocation history file (`history`).

use super::buddy::{BuddyAllocator, FrameUse, MAX_ORDER};
use crate::addr::{parse_bytes, PageSize};
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FragmentationConfig {
    /// Fraction of physical memory left free at start-up (the rest is "other").
    pub free: f64,
    /// Fraction of the free memory that lies only in blocks smaller than `order`.
    pub level: f64,
    /// The block order (log2 of 4 KiB frames) `level` refers to: 9 = 2 MiB.
    pub order: u8,
    pub seed: u64,
    /// An allocation history to replay instead (path; empty = none).
    pub history: String,
}

impl Default for FragmentationConfig {
    fn default() -> Self {
        FragmentationConfig { free: 1.0, level: 0.0, order: 9, seed: 0, history: String::new() }
    }
}

impl FragmentationConfig {
    /// Left out of the resolved config when default (documents of unfragmented runs
    /// are unchanged).
    pub(crate) fn is_default(&self) -> bool {
        *self == FragmentationConfig::default()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.free) {
            return Err(Error::config("machine.fragmentation.free", format!("{} is not in [0, 1]", self.free)));
        }
        if !(0.0..=1.0).contains(&self.level) {
            return Err(Error::config("machine.fragmentation.level", format!("{} is not in [0, 1]", self.level)));
        }
        if self.order == 0 || self.order > MAX_ORDER {
            return Err(Error::config("machine.fragmentation.order", format!("must be in 1..={MAX_ORDER}")));
        }
        Ok(())
    }
}

/// Fragment `mem` (freshly created, all free) as configured.
pub(crate) fn apply(mem: &mut BuddyAllocator, c: &FragmentationConfig) -> Result<()> {
    c.validate()?;
    if !c.history.is_empty() {
        let text = crate::files::read_text(std::path::Path::new(&c.history))?;
        return replay(mem, &text, &c.history);
    }
    if c.free >= 1.0 && c.level <= 0.0 {
        return Ok(());
    }
    // The synthetic target shuffles every block of memory; host memory and time follow
    // their number.
    let blocks = mem.frames_total() >> c.order;
    if blocks > MAX_SYNTHETIC_BLOCKS {
        let msg = format!(
            "synthetic fragmentation of {blocks} blocks of 2^{} frames; at most {MAX_SYNTHETIC_BLOCKS} (a larger machine.fragmentation.order, or less machine.phys_mem)",
            c.order
        );
        return Err(Error::config("machine.fragmentation.order", msg));
    }
    synthetic(mem, c);
    Ok(())
}

/// Most blocks the synthetic target shuffles: 2^24 (128 MiB of host memory; 32 TiB of
/// simulated memory in 2 MiB blocks).
pub(crate) const MAX_SYNTHETIC_BLOCKS: u64 = 1 << 24;

/// The synthetic target. Memory is cut into aligned blocks of 2^order frames, visited in
/// a seeded random order. The first ones stay wholly free while they hold at most
/// (1 − level) × free × memory; every other block is taken by "other", and then
/// the rest of free × memory (level × free × memory, plus what did not fill a whole
/// block) is given back, spread as evenly as possible over those blocks, are
/// given back at random offsets, with at least one frame of each block kept, so none of
/// them can serve an allocation of `order`. If that cap binds, less memory is free
/// than asked (e.g. free = 1 with level > 0). Frames past the last whole block stay free.
fn synthetic(mem: &mut BuddyAllocator, c: &FragmentationConfig) {
    let total = mem.frames_total();
    let block = 1u64 << c.order;
    let blocks = total / block;
    let free_target = (c.free * total as f64).round() as u64;
    let frag_free = (c.level * free_target as f64).round() as u64;
    let whole_free = ((free_target - frag_free) / block).min(blocks);
    // What whole blocks cannot hold (rounding) is given back in the taken ones.
    let frag_free = free_target - whole_free * block;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(c.seed);
    let mut order: Vec<u64> = (0..blocks).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    let taken = &order[whole_free as usize..];
    let n = taken.len() as u64;
    let size = PageSize::from_valid_shift(12 + c.order);
    let mut offsets: Vec<u64> = (0..block).collect();
    for (i, &b) in taken.iter().enumerate() {
        let pa = (b * block) << 12;
        let claimed = mem.claim(pa, size, FrameUse::Other);
        debug_assert!(claimed, "fresh memory is free");
        let give = frag_free.checked_div(n).map_or(0, |q| (q + u64::from((i as u64) < frag_free % n)).min(block - 1));
        // A partial Fisher-Yates shuffle picks `give` distinct frames of the block.
        for j in 0..give as usize {
            let k = rng.gen_range(j..block as usize);
            offsets.swap(j, k);
            mem.free(pa + (offsets[j] << 12), PageSize::K4, FrameUse::Other);
        }
    }
}

/// Replay an allocation history: one operation per line, `alloc ADDR SIZE` or
/// `free ADDR SIZE` (ADDR a physical address, decimal or 0x-hex, aligned to SIZE; SIZE a
/// power of two ≥ 4K such as `4K` or `2M`); `#` starts a comment. An `alloc` takes
/// exactly that block (it must be free); a `free` returns a block an earlier line of the
/// file allocated with the same size. Blocks still allocated at the end belong to
/// "other". Errors name the line, never quote it (the path may name any file).
pub(crate) fn replay(mem: &mut BuddyAllocator, text: &str, origin: &str) -> Result<()> {
    let mut live: BTreeSet<(u64, u8)> = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |m: String| Error::config("machine.fragmentation.history", format!("{origin}:{}: {m}", n + 1));
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [op, addr, size] = parts[..] else {
            return Err(err(format!("expected `alloc|free ADDR SIZE`, got {} fields", parts.len())));
        };
        let pa = match addr.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => addr.parse(),
        }
        .map_err(|_| err("bad address (decimal or 0x-hex)".into()))?;
        let size = parse_bytes(size).and_then(PageSize::from_bytes).map_err(|_| err("bad size (a power of two ≥ 4K, such as 4K or 2M)".into()))?;
        if !size.is_aligned(pa) {
            return Err(err(format!("{pa:#x} is not aligned to {size}")));
        }
        match op {
            "alloc" => {
                if !mem.claim(pa, size, FrameUse::Other) {
                    return Err(err(format!("{size} block at {pa:#x} is not free (or beyond memory)")));
                }
                live.insert((pa, size.shift()));
            }
            "free" => {
                if !live.remove(&(pa, size.shift())) {
                    return Err(err(format!("{size} block at {pa:#x} was not allocated by this history")));
                }
                mem.free(pa, size, FrameUse::Other);
            }
            _ => return Err(err("unknown operation (alloc or free)".into())),
        }
    }
    Ok(())
}

#[cfg(test)]
/// Free memory, and the part of it in blocks smaller than 2^order frames (the achieved
/// fragmentation level is the ratio).
pub(crate) fn free_below(mem: &BuddyAllocator, order: u8) -> (u64, u64) {
    let per = mem.free_blocks_per_order();
    let free: u64 = per.iter().enumerate().map(|(o, &n)| n << o).sum();
    let below: u64 = per.iter().enumerate().take(order as usize).map(|(o, &n)| n << o).sum();
    (free, below)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(free: f64, level: f64) -> BuddyAllocator {
        let mut m = BuddyAllocator::new(256 << 20).unwrap();
        apply(&mut m, &FragmentationConfig { free, level, ..Default::default() }).unwrap();
        m
    }

    #[test]
    fn synthetic_hits_its_targets() {
        let total = (256u64 << 20) >> 12;
        let m = frag(0.5, 0.6);
        let (free, below) = free_below(&m, 9);
        assert_eq!(free, total / 2);
        let want = (0.6 * (total / 2) as f64).round() as u64;
        assert!(below >= want && below < want + 512, "{below} vs {want}");
        assert_eq!(m.counters().frames_other, total - free);
        // level 0: every free frame in whole 2M blocks; level 1: none.
        let m = frag(0.5, 0.0);
        assert_eq!(free_below(&m, 9), (total / 2, 0));
        let m = frag(0.3, 1.0);
        let (free, below) = free_below(&m, 9);
        assert_eq!(free, below);
        assert!(!m.has_free(PageSize::M2));
    }

    #[test]
    fn synthetic_is_deterministic_and_seeded() {
        let a = frag(0.5, 0.5).free_blocks_per_order();
        assert_eq!(a, frag(0.5, 0.5).free_blocks_per_order());
        let mut m = BuddyAllocator::new(256 << 20).unwrap();
        apply(&mut m, &FragmentationConfig { free: 0.5, level: 0.5, seed: 7, ..Default::default() }).unwrap();
        let mut m2 = BuddyAllocator::new(256 << 20).unwrap();
        apply(&mut m2, &FragmentationConfig { free: 0.5, level: 0.5, seed: 7, ..Default::default() }).unwrap();
        assert_eq!(m.free_blocks_per_order(), m2.free_blocks_per_order());
    }

    #[test]
    fn history_replays_and_reports_bad_lines() {
        let mut m = BuddyAllocator::new(16 << 20).unwrap();
        replay(&mut m, "# test\nalloc 0x200000 2M\nalloc 0x1000 4K\nfree 0x200000 2M\nalloc 4096000 4K\n", "h").unwrap();
        assert_eq!(m.counters().frames_other, 2);
        let e = replay(&mut m, "alloc 0x1000 4K\n", "h").unwrap_err().to_string();
        assert!(e.contains("h:1") && e.contains("not free"), "{e}");
        let e = replay(&mut m, "\nfree 0x5000 4K\n", "h").unwrap_err().to_string();
        assert!(e.contains("h:2"), "{e}");
        let e = replay(&mut m, "alloc 0x1001 4K\n", "h").unwrap_err().to_string();
        assert!(e.contains("not aligned"), "{e}");
        // A file that is no history (any path can be named): errors never quote it.
        for text in ["root:x:0:0:root:/root:/bin/bash\n", "secret 0x1000 4K\n", "alloc secret 4K\n", "alloc 0x1000 secret\n"] {
            let e = replay(&mut m, text, "h").unwrap_err().to_string();
            assert!(e.contains("h:1") && !e.contains("root") && !e.contains("secret"), "{e}");
        }
    }
}
