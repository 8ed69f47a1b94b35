//! Periodic policies (Romer §4.2.3): every `period` cycles (Table 4-5: 2M), look at the
//! TLB's contents and recolour one page:
//! - `periodic-random`: a random page in the TLB;
//! - `periodic-color`: a page of the largest group of same-coloured TLB pages (the one
//!   at the highest address), if any two pages share a colour.

use super::{Ctx, Shared};
use crate::error::Result;
use crate::pt::PageTable;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) struct Periodic {
    random: bool,
    rng: Xoshiro256PlusPlus,
}

impl Periodic {
    pub(crate) fn new(random: bool, seed: u64) -> Periodic {
        Periodic { random, rng: Xoshiro256PlusPlus::seed_from_u64(seed) }
    }

    /// Returns the next timer cycle.
    pub(crate) fn timer<P: PageTable>(&mut self, sh: &mut Shared, cx: &mut Ctx<P>) -> Result<u64> {
        sh.stats.interrupts += 1;
        sh.stats.analyses += 1;
        sh.stats.overhead_cycles += sh.params.costs.interrupt + sh.params.costs.analyze;
        let pages: Vec<_> = sh.tlb.pages().map(|(_, va, pid, c)| (pid, va, c)).collect();
        let victim = if self.random {
            (!pages.is_empty()).then(|| pages[(self.rng.next_u64() % pages.len() as u64) as usize])
        } else {
            let groups = Shared::conflicts(&pages);
            sh.stats.conflicts += groups.len() as u64;
            groups.iter().max_by_key(|(c, g)| (g.len(), std::cmp::Reverse(**c))).map(|(&c, g)| (g[g.len() - 1].0, g[g.len() - 1].1, c))
        };
        if let Some((pid, va, _)) = victim {
            let avoid = sh.tlb.colors_present();
            sh.recolor(cx, pid, va, &avoid)?;
        }
        Ok(cx.now + sh.params.period)
    }
}
