//! The memory model: a physically indexed cache hierarchy with latencies. Page-walk
//! references always go through it; data references do when `memory.data_refs` is set.

pub mod cache;

pub use cache::{Cache, CacheCounters};

use crate::config::Config;
use crate::error::{Error, Result};

pub struct MemoryHierarchy {
    pub caches: Vec<Cache>,
    /// Cache ids on the data path (L1D, L2, ...) and instruction path (L1I, L2, ...),
    /// closest first.
    data_path: Vec<usize>,
    instr_path: Vec<usize>,
    /// Position in `data_path` where walk references enter.
    walker_entry: usize,
    pub memory_latency: u32,
    /// References that missed every level (to DRAM).
    pub memory_accesses: u64,
}

impl MemoryHierarchy {
    pub fn new(cfg: &Config) -> Result<MemoryHierarchy> {
        let mut caches = Vec::new();
        for (i, (name, c)) in cfg.cache.iter().enumerate() {
            caches.push(Cache::new(name, c, cfg.mmu.seed.wrapping_add(1000 + i as u64))?);
        }
        let max_level = caches.iter().map(|c| c.level).max().unwrap_or(0);
        let pick = |instr: bool| -> Result<Vec<usize>> {
            let mut path = Vec::new();
            for level in 1..=max_level {
                let ids: Vec<usize> = (0..caches.len())
                    .filter(|&i| caches[i].level == level)
                    .filter(|&i| if instr { caches[i].serves.serves_instr() } else { caches[i].serves.serves_data() })
                    .collect();
                match ids.len() {
                    0 => {}
                    1 => path.push(ids[0]),
                    _ => {
                        return Err(Error::config(
                            "cache",
                            format!("two caches serve the same side at level {level}"),
                        ))
                    }
                }
            }
            Ok(path)
        };
        let data_path = pick(false)?;
        let instr_path = pick(true)?;
        let wl = cfg.memory.walker_level;
        let walker_entry = match data_path.iter().position(|&i| caches[i].level >= wl) {
            Some(p) => p,
            None if caches.is_empty() => 0,
            None => {
                return Err(Error::config(
                    "memory.walker_level",
                    format!("no data-side cache at level {wl} or below memory"),
                ))
            }
        };
        Ok(MemoryHierarchy {
            caches,
            data_path,
            instr_path,
            walker_entry,
            memory_latency: cfg.memory.latency,
            memory_accesses: 0,
        })
    }

    /// Send one reference down the path from `from`; returns its latency in cycles.
    /// Every level that missed allocates the line (inclusive fill).
    #[inline]
    fn access_path(&mut self, instr: bool, from: usize, pa: u64, write: bool, walk: bool) -> u32 {
        let path = if instr { &self.instr_path } else { &self.data_path };
        for &id in &path[from.min(path.len())..] {
            if self.caches[id].access(pa, write, walk) {
                return self.caches[id].latency;
            }
        }
        self.memory_accesses += 1;
        self.memory_latency
    }

    /// A page-walk reference (a read of a page-table entry).
    #[inline]
    pub fn walk_ref(&mut self, pa: u64) -> u32 {
        self.access_path(false, self.walker_entry, pa, false, true)
    }

    /// A program's data or instruction reference.
    #[inline]
    pub fn data_ref(&mut self, pa: u64, write: bool, instr: bool) -> u32 {
        self.access_path(instr, 0, pa, write, false)
    }
}
