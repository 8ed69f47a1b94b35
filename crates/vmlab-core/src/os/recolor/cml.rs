//! CML (Romer §5.3): the CML buffer interrupts when a page's miss count reaches the
//! interrupt threshold; the OS scans it, and among pages at or above the recolour
//! threshold, any two or more of one colour conflict: all but the one with the most
//! misses are recoloured. The counters are cleared every `clear_every` cycles (5M).
//! Thresholds default to the lines per page + 4 and that + 60 (§5.3.1: 260 and 320 for
//! 32-byte lines and 8 KiB pages; 132 and 192 for 4 KiB pages). Tuples of frames that
//! no longer back a private page are ignored.

use super::{Ctx, RecolorConfig, Shared};
use crate::error::{Error, Result};
use crate::mem::CmlBuffer;
use crate::pt::PageTable;
use std::collections::BTreeMap;

pub(crate) struct Cml {
    lru: usize,
    hot: usize,
    pub(crate) recolor_threshold: u32,
    pub(crate) interrupt_threshold: u32,
    clear_every: u64,
}

impl Cml {
    /// Romer's CML policy by `rc`, over a colour cache of `line`-byte lines.
    pub(crate) fn new(rc: &RecolorConfig, line: u64) -> Result<Cml> {
        let recolor_threshold = rc.recolor_threshold.unwrap_or((4096 / line) as u32 + 4);
        let interrupt_threshold = rc.interrupt_threshold.unwrap_or(recolor_threshold + 60);
        if interrupt_threshold < recolor_threshold {
            return Err(Error::config(
                "os.recolor.interrupt_threshold",
                format!("{interrupt_threshold} is below the recolour threshold {recolor_threshold}: an interrupt would find no conflict"),
            ));
        }
        Ok(Cml {
            lru: rc.cml_lru.unwrap_or(16),
            hot: rc.cml_hot.unwrap_or(16),
            recolor_threshold,
            interrupt_threshold,
            clear_every: rc.clear_every.unwrap_or(5_000_000).max(1),
        })
    }

    pub(crate) fn buffer(&self) -> CmlBuffer {
        CmlBuffer::new(self.lru, self.hot, 12, self.interrupt_threshold)
    }

    pub(crate) fn interrupt<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>) -> Result<()> {
        let Some(buf) = cx.mem.cml.as_mut() else { return Ok(()) };
        buf.interrupt = false;
        let tuples = buf.scan();
        let shift = buf.page_shift();
        sh.stats.interrupts += 1;
        sh.stats.analyses += 1;
        let c = &sh.params.costs;
        sh.stats.overhead_cycles += c.interrupt + c.cml_scan + c.cml_analyze;
        // Hot pages by colour, most misses first.
        let mut groups: BTreeMap<u64, Vec<(u32, u32, u64)>> = BTreeMap::new();
        for t in tuples.iter().filter(|t| t.count >= self.recolor_threshold) {
            let pa = t.page << shift;
            if let Some((pid, va)) = cx.mm.rmap.as_ref().and_then(|r| r.lookup(pa)) {
                groups.entry(cx.mm.placement.color_of(pa)).or_default().push((t.count, pid, va));
            }
        }
        groups.retain(|_, g| g.len() >= 2);
        sh.stats.conflicts += groups.len() as u64;
        let avoid: Vec<u64> = groups.keys().copied().collect();
        for g in groups.values_mut() {
            g.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
            for &(_, pid, va) in &g[1..] {
                sh.recolor(cx, pid, va, &avoid)?;
            }
        }
        Ok(())
    }

    /// Clear the counters; returns the next timer cycle.
    pub(crate) fn timer<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>) -> u64 {
        if let Some(b) = cx.mem.cml.as_mut() {
            b.clear();
            sh.stats.cml_clears += 1;
        }
        cx.now + self.clear_every
    }
}
