//! Victim cache (Jouppi 1990; Romer §5.5.3): a small fully associative LRU buffer of the
//! lines its cache level evicted. A miss at the level that hits here costs only the
//! victim cache's latency, and the line swaps back into the level.

use super::cache::{DIRTY, INVALID};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VictimConfig {
    /// Lines held (Romer §5.5.3: 8).
    pub entries: usize,
    /// Extra cycles of a hit in the victim cache after the miss at its level (Romer: 5).
    pub latency: u32,
}

#[derive(Clone, Debug)]
pub struct VictimCache {
    /// `line << 1 | dirty`, most recently inserted first; at most `entries`.
    lines: Vec<u64>,
    entries: usize,
    pub latency: u32,
}

impl VictimCache {
    pub fn new(entries: usize, latency: u32) -> VictimCache {
        VictimCache { lines: Vec::with_capacity(entries), entries, latency }
    }

    /// Take `line` out if held; returns whether it was dirty.
    #[inline]
    pub fn take(&mut self, line: u64) -> Option<bool> {
        let want = line << 1;
        let i = self.lines.iter().position(|&t| t | DIRTY == want | DIRTY)?;
        Some(self.lines.remove(i) & DIRTY != 0)
    }

    /// Keep a line its level evicted (`tag` = line << 1 | dirty); returns the line pushed
    /// out to make room, if any.
    #[inline]
    pub fn insert(&mut self, tag: u64) -> Option<u64> {
        if tag == INVALID {
            return None;
        }
        let out = if self.lines.len() == self.entries { self.lines.pop() } else { None };
        self.lines.insert(0, tag);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_victims() {
        let mut v = VictimCache::new(2, 5);
        assert_eq!(v.insert(1 << 1), None);
        assert_eq!(v.insert(2 << 1 | DIRTY), None);
        assert_eq!(v.insert(3 << 1), Some(1 << 1));
        assert_eq!(v.take(2), Some(true));
        assert_eq!(v.take(2), None);
        assert_eq!(v.take(3), Some(false));
    }
}
