//! Active policies (Romer §4.2.2): keep every page in the TLB a different colour.
//!
//! On each TLB miss to a base page whose colour another TLB page already has:
//! - `active-naive` (delay 0) recolours the missing page at once;
//! - `active-delay` invalidates the other pages' TLB entries (provoking misses that
//!   count how often the pages meet) and bumps the colour's counter; the page is
//!   recoloured when the counter reaches `delay` (100 TLB misses);
//! - `active-throttle` is active-delay with at most one recolour per `period` cycles:
//!   after a recolour, monitoring stops until the period is over.

use super::{Ctx, Shared};
use crate::addr::PageSize;
use crate::error::Result;
use crate::os::policy::TlbMiss;
use crate::os::Shootdown;
use crate::pt::PageTable;

pub(crate) struct Active {
    delay: u64,
    period: u64,
    /// Conflicting TLB misses per colour since its last recolour.
    counters: Vec<u64>,
    /// Monitoring is off until this cycle (active-throttle).
    suspended_until: u64,
}

impl Active {
    pub(crate) fn new(colors: u64, delay: u64, period: u64) -> Active {
        Active { delay, period, counters: vec![0; colors as usize], suspended_until: 0 }
    }

    pub(crate) fn tlb_miss<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>, m: &TlbMiss) -> Result<()> {
        if cx.now < self.suspended_until || m.translation.size != PageSize::K4 {
            return Ok(());
        }
        let color = cx.mm.placement.color_of(m.translation.phys(m.va));
        if sh.tlb.count(color) < 2 {
            return Ok(());
        }
        sh.stats.tlb_misses_recorded += 1;
        sh.stats.overhead_cycles += sh.params.costs.record;
        sh.stats.conflicts += 1;
        let page = PageSize::K4.align_down(m.va);
        if self.delay > 0 {
            // Provoke misses on the other pages of this colour.
            let others: Vec<_> = sh.tlb.pages().filter(|&(a, v, _, c)| c == color && !(a == m.asid && v == page)).collect();
            for (asid, va, _, _) in others {
                cx.mm.shootdowns.push(Shootdown::TlbEntry { asid, va });
                sh.stats.tlb_invalidations += 1;
            }
            self.counters[color as usize] += 1;
            if self.counters[color as usize] < self.delay {
                return Ok(());
            }
            self.counters[color as usize] = 0;
        }
        let avoid = sh.tlb.colors_present();
        if sh.recolor(cx, m.pid, page, &avoid)? && self.period > 0 {
            self.suspended_until = cx.now + self.period;
        }
        Ok(())
    }
}
