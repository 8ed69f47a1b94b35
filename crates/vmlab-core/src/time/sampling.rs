//! Sampled timing: time a systematic sample of the run in detail and estimate the
//! rest (SMARTS: Wunderlich, Wenisch, Falsafi & Hoe, ISCA 2003), for runs too long to
//! time every reference (docs/config.md `[time.sampling]`).
//!
//! The functional model still applies every reference, so every TLB, walk, cache and
//! fault counter stays exact; only the `time` section becomes an estimate. Each period
//! of `period` references times `warmup` references in detail without measuring them
//! (the ROB, the queues, the MSHRs, the DRAM's queues and open rows refill), then
//! measures `unit` references, then skips the rest: a skipped reference costs the time
//! model a few instructions (its instruction count and OS cycles are summed, and a
//! DRAM reference reopens its bank's row). The first period measures from its first
//! reference, cold, as a fully timed run does.
//!
//! The estimate is stratified: the measured units' CPI without OS work times every
//! instruction, plus the OS cycles (faults, page copies) of every reference, exactly —
//! faults come in bursts that a sample would catch badly.

use super::core::FP;
use super::TimeStats;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// `[time.sampling]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingConfig {
    /// References per sampling period; 0 times every reference.
    pub period: u64,
    /// References measured per period.
    pub unit: u64,
    /// References timed, unmeasured, before each unit but the first.
    pub warmup: u64,
}

impl Default for SamplingConfig {
    // Units of 1,000 references after 2,000 of warm-up: a 224-entry ROB refills within a
    // few hundred instructions, MSHRs and DRAM queues within a few microseconds.
    fn default() -> SamplingConfig {
        SamplingConfig { period: 0, unit: 1000, warmup: 2000 }
    }
}

impl SamplingConfig {
    pub fn is_default(&self) -> bool {
        *self == SamplingConfig::default()
    }

    pub fn validate(&self) -> Result<()> {
        if self.unit == 0 {
            return Err(Error::config("time.sampling.unit", "must be at least 1 reference"));
        }
        if self.period > 0 && self.unit.saturating_add(self.warmup) > self.period {
            return Err(Error::config(
                "time.sampling.period",
                format!("{} is shorter than time.sampling.unit + time.sampling.warmup ({} + {})", self.period, self.unit, self.warmup),
            ));
        }
        Ok(())
    }
}

/// Where a reference falls in the sampling period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Timed and measured.
    Measure,
    /// Not timed: counted only.
    Skip,
    /// Timed, not measured.
    Warm,
}

/// The whole run's totals a sampled estimate scales the measured units to, and the
/// spread of the units' CPI (all additive, so a warm-up's snapshot subtracts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleSums {
    pub units: u64,
    /// Every reference and instruction so far, measured or not.
    pub references: u64,
    pub instructions: u64,
    /// OS cycles of the references not measured, summed exactly.
    pub unmeasured_os: u64,
    /// Per unit, its CPI without OS stalls: the sum and the sum of squares.
    pub cpi_sum: f64,
    pub cpi_squares: f64,
}

impl SampleSums {
    pub fn minus(&self, b: &SampleSums) -> SampleSums {
        SampleSums {
            units: self.units - b.units,
            references: self.references - b.references,
            instructions: self.instructions - b.instructions,
            unmeasured_os: self.unmeasured_os - b.unmeasured_os,
            cpi_sum: self.cpi_sum - b.cpi_sum,
            cpi_squares: self.cpi_squares - b.cpi_squares,
        }
    }

    /// The relative half-width of the 95% confidence interval of the mean unit CPI
    /// (0 with fewer than two units).
    pub fn cpi_error(&self) -> f64 {
        let n = self.units as f64;
        if self.units < 2 || self.cpi_sum <= 0.0 {
            return 0.0;
        }
        let mean = self.cpi_sum / n;
        let var = ((self.cpi_squares - n * mean * mean) / (n - 1.0)).max(0.0);
        1.96 * (var / n).sqrt() / mean
    }
}

/// The sampling schedule and what the measured units add up to.
pub struct Sampler {
    pub cfg: SamplingConfig,
    /// The detailed model's counters when the unit being measured began.
    start: Option<TimeStats>,
    /// The measured units' counters, summed.
    pub measured: TimeStats,
    pub sums: SampleSums,
    /// References and instructions the detailed model never saw.
    pub skipped_references: u64,
    pub skipped_instructions: u64,
}

impl Sampler {
    /// `None` when every reference is timed.
    pub fn new(cfg: &SamplingConfig) -> Option<Sampler> {
        (cfg.period > 0).then(|| Sampler {
            cfg: cfg.clone(),
            start: None,
            measured: TimeStats::default(),
            sums: SampleSums::default(),
            skipped_references: 0,
            skipped_instructions: 0,
        })
    }

    /// A unit begins, with the detailed model's counters at `now`.
    pub fn begin_unit(&mut self, now: TimeStats) {
        self.start = Some(now);
    }

    /// The unit being measured ends with the detailed model's counters at `now`.
    pub fn end_unit(&mut self, now: &TimeStats) {
        let Some(start) = self.start.take() else { return };
        let d = now.minus(&start);
        if d.instructions == 0 {
            return;
        }
        let cpi = (d.cycles as f64 - d.os_fp as f64 / FP as f64).max(0.0) / d.instructions as f64;
        self.sums.units += 1;
        self.sums.cpi_sum += cpi;
        self.sums.cpi_squares += cpi * cpi;
        self.measured = self.measured.plus(&d);
    }

    /// The phase after `phase` has run out, and its length in references (a phase of
    /// no references is passed over). A run starts with `(Phase::Measure, unit)`.
    pub fn after(&self, phase: Phase) -> (Phase, u64) {
        let c = &self.cfg;
        let skip = c.period - c.unit - c.warmup;
        let order = [(Phase::Measure, c.unit), (Phase::Skip, skip), (Phase::Warm, c.warmup)];
        let mut i = order.iter().position(|&(p, _)| p == phase).expect("a phase");
        loop {
            i = (i + 1) % 3;
            if order[i].1 > 0 {
                return order[i];
            }
        }
    }

    /// The `time.sampling` section.
    pub fn section(&self, s: &SampleSums, measured_references: u64) -> Value {
        let c = &self.cfg;
        json!({
            "period": c.period, "unit": c.unit, "warmup": c.warmup,
            "units": s.units,
            "references": s.references,
            "measured_references": measured_references,
            "measured_fraction": if s.references == 0 { 0.0 } else { measured_references as f64 / s.references as f64 },
            "cpi_error": s.cpi_error(),
        })
    }
}

/// The whole run's counters estimated from the measured units `m` (their sums, with
/// the run's totals in `m.sample`): every count scaled by instructions run over
/// instructions measured; the cycles are the units' CPI without OS work over every
/// instruction, plus the OS cycles of every reference.
pub fn estimate(m: &TimeStats) -> TimeStats {
    let s = m.sample.clone().unwrap_or_default();
    if m.instructions == 0 {
        let os = s.unmeasured_os;
        return TimeStats { cycles: os, instructions: s.instructions, os_fp: os * FP, sample: Some(s), ..TimeStats::default() };
    }
    let k = s.instructions as f64 / m.instructions as f64;
    let mut e = m.scaled(k);
    let os = m.os_fp as f64 / FP as f64;
    e.cycles = ((m.cycles as f64 - os).max(0.0) * k + os + s.unmeasured_os as f64).round() as u64;
    e.instructions = s.instructions;
    e.os_fp = m.os_fp + s.unmeasured_os * FP;
    e.sample = Some(s);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_run_unit_skip_warm_and_pass_over_empty_ones() {
        let cfg = SamplingConfig { period: 10, unit: 2, warmup: 3 };
        let s = Sampler::new(&cfg).unwrap();
        assert_eq!(s.after(Phase::Measure), (Phase::Skip, 5));
        assert_eq!(s.after(Phase::Skip), (Phase::Warm, 3));
        assert_eq!(s.after(Phase::Warm), (Phase::Measure, 2));
        let s = Sampler::new(&SamplingConfig { period: 5, unit: 2, warmup: 3 }).unwrap();
        assert_eq!(s.after(Phase::Measure).0, Phase::Warm);
        let s = Sampler::new(&SamplingConfig { period: 4, unit: 4, warmup: 0 }).unwrap();
        assert_eq!(s.after(Phase::Measure).0, Phase::Measure);
        assert!(Sampler::new(&SamplingConfig::default()).is_none());
    }

    #[test]
    fn the_confidence_interval_narrows_with_more_units() {
        let sums = |n: u64| {
            let mut s = SampleSums { units: n, ..Default::default() };
            for i in 0..n {
                let cpi = 1.0 + if i % 2 == 0 { 0.1 } else { -0.1 };
                s.cpi_sum += cpi;
                s.cpi_squares += cpi * cpi;
            }
            s
        };
        // CPIs of 1 ± 0.1: a sample standard deviation of 0.1 * sqrt(n / (n - 1)).
        let expected = |n: f64| 1.96 * 0.1 * (n / (n - 1.0)).sqrt() / n.sqrt();
        let (few, many) = (sums(10).cpi_error(), sums(1000).cpi_error());
        assert!((few - expected(10.0)).abs() < 1e-9, "{few}");
        assert!((many - expected(1000.0)).abs() < 1e-9, "{many}");
        assert_eq!(sums(1).cpi_error(), 0.0);
    }

    #[test]
    fn the_estimate_scales_the_units_and_adds_the_os_exactly() {
        let m = TimeStats {
            cycles: 1100,
            instructions: 1000,
            os_fp: 100 * FP,
            loads: 300,
            sample: Some(SampleSums { units: 1, references: 4000, instructions: 10_000, unmeasured_os: 50, ..Default::default() }),
            ..Default::default()
        };
        let e = estimate(&m);
        // 1000 cycles of non-OS work per 1000 instructions, over 10,000, plus 100 + 50.
        assert_eq!(e.cycles, 10_000 + 150);
        assert_eq!((e.instructions, e.loads), (10_000, 3000));
        assert_eq!(e.os_fp, 150 * FP);
    }
}
