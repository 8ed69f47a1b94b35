//! Counters shared by the engine and the stats document (docs/metrics.md).

use serde::Serialize;

/// Version tag of the stats document; bump on any incompatible change.
pub(crate) const SCHEMA: &str = "vmlab.stats/1";

/// Exact counts for small values, log2 buckets above: walk latencies are sums of a few
/// cache latencies, so most runs have a handful of distinct values.
#[derive(Clone, Debug)]
pub struct Histogram {
    exact: Vec<u64>,
    /// overflow[k] counts values in [EXACT << k, EXACT << (k+1)).
    overflow: [u64; 64],
    count: u64,
    sum: u128,
    max: u64,
}

const EXACT: usize = 4096;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { exact: vec![0; EXACT], overflow: [0; 64], count: 0, sum: 0, max: 0 }
    }
}

impl Histogram {
    #[inline(always)]
    pub(crate) fn record(&mut self, v: u64) {
        if (v as usize) < EXACT {
            self.exact[v as usize] += 1;
        } else {
            let k = (63 - (v / EXACT as u64).leading_zeros()) as usize;
            self.overflow[k] += 1;
        }
        self.count += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }

    /// Add another histogram's samples.
    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.exact.iter_mut().zip(&other.exact) {
            *a += b;
        }
        for (a, b) in self.overflow.iter_mut().zip(&other.overflow) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub(crate) fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Smallest value v such that at least `q` of the samples are <= v (upper bound of
    /// the bucket for values past the exact range).
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let target = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (v, &c) in self.exact.iter().enumerate() {
            seen += c;
            if seen >= target {
                return v as u64;
            }
        }
        for (k, &c) in self.overflow.iter().enumerate() {
            seen += c;
            if seen >= target {
                return ((EXACT as u64) << (k + 1)) - 1;
            }
        }
        self.max
    }

    /// Non-empty buckets as (value or bucket upper bound, count), ascending.
    pub(crate) fn buckets(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = self.exact.iter().enumerate().filter(|(_, &c)| c > 0).map(|(v, &c)| (v as u64, c)).collect();
        for (k, &c) in self.overflow.iter().enumerate() {
            if c > 0 {
                out.push((((EXACT as u64) << (k + 1)) - 1, c));
            }
        }
        out
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count,
            "mean": self.mean(),
            "p50": self.quantile(0.50),
            "p90": self.quantile(0.90),
            "p95": self.quantile(0.95),
            "p99": self.quantile(0.99),
            "p999": self.quantile(0.999),
            "max": self.max,
            "histogram": self.buckets(),
        })
    }
}

/// `since(base)`: the counts made after a snapshot `base` of the same counters (the
/// statistics warm-up, `sim.warmup_accesses`).
#[macro_export]
macro_rules! counters_since {
    ($t:ty { $($f:ident),* $(,)? }) => {
        impl $t {
            pub(crate) fn since(&self, base: &Self) -> Self {
                Self { $($f: self.$f - base.$f),* }
            }
        }
    };
}

counters_since!(RunCounters { records, accesses, reads, writes, fetches, instructions, translations, page_crossings, os_events });
counters_since!(CycleCounters { tlb, walk, fault, data, recolor_copy, recolor_policy });
counters_since!(crate::pt::CacheCounters { lookups, hits, misses });

/// Totals the engine counts per run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunCounters {
    pub(crate) records: u64,
    pub(crate) accesses: u64,
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    pub(crate) fetches: u64,
    pub(crate) instructions: u64,
    /// Page translations requested: one per 4 KiB page an access touches.
    pub(crate) translations: u64,
    /// Accesses that crossed a 4 KiB boundary (each adds a translation).
    pub(crate) page_crossings: u64,
    pub(crate) os_events: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct WalkCounters {
    pub(crate) count: u64,
    pub(crate) refs: u64,
    pub(crate) steps: u64,
    pub(crate) faulting: u64,
    /// Virtual walk references translated through the TLB (linear arrays), and those
    /// that missed it and needed a nested walk.
    pub(crate) nested_lookups: u64,
    pub(crate) nested_misses: u64,
    /// References made off the critical path (included in `refs`).
    pub(crate) background_refs: u64,
    /// Walks a software refill handler made (`mmu.refill`), and its instructions.
    pub(crate) handler_refills: u64,
    pub(crate) handler_instructions: u64,
    pub(crate) latency: Histogram,
    /// Per step index k (the last slot gathers k ≥ its index): references issued in
    /// step k, and walks that had a step k. Sized once by the engine.
    pub(crate) step_refs: Vec<u64>,
    pub(crate) step_walks: Vec<u64>,
}

/// Steps tracked individually in [`WalkCounters::step_refs`].
pub(crate) const TRACKED_STEPS: usize = 48;

#[derive(Clone, Debug, Default, Serialize)]
pub struct CycleCounters {
    /// TLB lookup latency of levels beyond those that hide it.
    pub(crate) tlb: u64,
    /// Page-walk latency (PWC probe + sequential steps through the caches).
    pub(crate) walk: u64,
    /// `os.fault_cycles` per fault.
    pub(crate) fault: u64,
    /// Latency of data/instruction references through the caches (memory.data_refs).
    pub(crate) data: u64,
    /// Recolouring: the memory cycles of the page copies (through the caches).
    pub(crate) recolor_copy: u64,
    /// Recolouring: the policy's fixed costs (interrupts, TLB-miss checks, analyses,
    /// copy loop, PTE updates), rounded down.
    pub(crate) recolor_policy: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_exact_in_range() {
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!(h.quantile(1.0), 100);
        assert_eq!(h.mean(), 50.5);
        h.record(10_000);
        assert_eq!(h.quantile(1.0), 16383);
        assert_eq!(h.buckets().last(), Some(&(16383, 1)));
    }
}
