//! Adaptive caching of PTE-hCWT entries in step 3 of a nested ECPT walk (Stojkovic et
//! al. §4.2, §9.2): caching starts enabled; while enabled, the hit rate of PTE-hCWT
//! entries in the step-3 hCWC is watched, and below `disable_below` (0.5) caching turns
//! off; while disabled, the PMD-hCWT entries' hit rate is watched, and above
//! `enable_above` (0.85) caching turns back on. The paper plots rates per 5M-cycle
//! interval but gives no decision window; here a window is a number of counted lookups.

use serde::Serialize;

/// What one step-3 lookup did to the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    None,
    Disabled,
    Enabled,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub(crate) struct AdaptiveCounters {
    pub(crate) disables: u64,
    pub(crate) enables: u64,
    /// Decision windows that ended with caching on / off.
    pub(crate) windows_on: u64,
    pub(crate) windows_off: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct AdaptivePteCaching {
    enabled: bool,
    window: u64,
    disable_below: f64,
    enable_above: f64,
    lookups: u64,
    hits: u64,
    pub(crate) counters: AdaptiveCounters,
}

impl AdaptivePteCaching {
    pub(crate) fn new(window: u64, disable_below: f64, enable_above: f64) -> AdaptivePteCaching {
        AdaptivePteCaching { enabled: true, window, disable_below, enable_above, lookups: 0, hits: 0, counters: AdaptiveCounters::default() }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Record one step-3 lookup: `pte_hit` is the PTE-hCWC's answer (None when it was
    /// not consulted, or the region has no PTE-hCWT entry, e.g. a 2M host page: such a
    /// lookup says nothing about PTE locality), `pmd_hit` the PMD-hCWC's. While enabled
    /// only PTE lookups count, while disabled only PMD lookups (§9.2).
    pub(crate) fn observe(&mut self, pte_hit: Option<bool>, pmd_hit: bool) -> Transition {
        let counted = if self.enabled { pte_hit } else { Some(pmd_hit) };
        let Some(hit) = counted else {
            return Transition::None;
        };
        self.lookups += 1;
        self.hits += hit as u64;
        if self.lookups < self.window {
            return Transition::None;
        }
        let rate = self.hits as f64 / self.lookups as f64;
        (self.lookups, self.hits) = (0, 0);
        if self.enabled {
            self.counters.windows_on += 1;
            if rate < self.disable_below {
                self.enabled = false;
                self.counters.disables += 1;
                return Transition::Disabled;
            }
        } else {
            self.counters.windows_off += 1;
            if rate > self.enable_above {
                self.enabled = true;
                self.counters.enables += 1;
                return Transition::Enabled;
            }
        }
        Transition::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(a: &mut AdaptivePteCaching, pte: Option<bool>, pmd: bool, n: usize) -> Vec<Transition> {
        (0..n).map(|_| a.observe(pte, pmd)).filter(|t| *t != Transition::None).collect()
    }

    #[test]
    fn disables_strictly_below_half() {
        let mut a = AdaptivePteCaching::new(10, 0.5, 0.85);
        feed(&mut a, Some(true), false, 5);
        feed(&mut a, Some(false), false, 5);
        assert!(a.enabled(), "5/10 is not below 0.5");
        feed(&mut a, Some(true), false, 4);
        assert_eq!(feed(&mut a, Some(false), false, 6), vec![Transition::Disabled]);
        assert!(!a.enabled());
    }

    #[test]
    fn reenables_strictly_above_0_85_on_pmd_hits() {
        let mut a = AdaptivePteCaching::new(20, 0.5, 0.85);
        feed(&mut a, Some(false), true, 20);
        assert!(!a.enabled());
        // While disabled, PTE answers are ignored; 17/20 PMD hits = 0.85 stays off.
        feed(&mut a, Some(true), false, 3);
        feed(&mut a, None, true, 17);
        assert!(!a.enabled());
        feed(&mut a, None, false, 2);
        assert_eq!(feed(&mut a, None, true, 18), vec![Transition::Enabled]);
        assert_eq!(a.counters, AdaptiveCounters { disables: 1, enables: 1, windows_on: 1, windows_off: 2 });
    }

    #[test]
    fn lookups_without_a_pte_entry_never_switch() {
        let mut a = AdaptivePteCaching::new(10, 0.5, 0.85);
        assert!(feed(&mut a, None, false, 1000).is_empty());
        assert!(a.enabled());
        assert_eq!(a.counters.windows_on, 0);
    }
}
