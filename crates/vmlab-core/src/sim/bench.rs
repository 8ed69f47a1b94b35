//! `vmlab bench`: end-to-end throughput figures recorded in docs/performance.md.
//! Wall-clock numbers for a human; tests never time anything.

use crate::api::{open_source, SourceSpec};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::trace::{self, TraceSource};
use std::time::Instant;

/// One benchmark, run `runs.len()` times: `seconds` and `millions_per_second` are the
/// best run's (a noisy host only ever slows a run down), `median_seconds` the median's.
#[derive(Debug, serde::Serialize)]
pub(crate) struct BenchRow {
    pub(crate) name: String,
    pub(crate) items: u64,
    pub(crate) unit: String,
    pub(crate) seconds: f64,
    pub(crate) millions_per_second: f64,
    pub(crate) median_seconds: f64,
    pub(crate) runs: Vec<f64>,
    /// This row's best rate over its base row's, where the base ran too: the row whose
    /// name is this one's before its first " + " (the same run without data
    /// references, the time model or the CML buffer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vs_base: Option<f64>,
}

/// Set each row's `vs_base` from the rows it extends.
fn compare_with_bases(rows: &mut [BenchRow]) {
    for i in 0..rows.len() {
        let base = rows[i].name.split_once(" + ").and_then(|(base, _)| rows.iter().find(|r| r.name == base));
        rows[i].vs_base = base.map(|b| rows[i].millions_per_second / b.millions_per_second);
    }
}

/// Run `bench` (which returns the items it processed and its seconds) `repeat` times.
fn measure(name: &str, unit: &str, repeat: u32, mut bench: impl FnMut() -> Result<(u64, f64)>) -> Result<BenchRow> {
    let mut items = 0;
    let mut runs = Vec::new();
    for _ in 0..repeat.max(1) {
        let (n, secs) = bench()?;
        items = n;
        runs.push(secs);
    }
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    let (best, median) = (sorted[0], sorted[(sorted.len() - 1) / 2]);
    Ok(BenchRow {
        name: name.into(),
        items,
        unit: unit.into(),
        seconds: best,
        millions_per_second: items as f64 / best / 1e6,
        median_seconds: median,
        runs,
        vs_base: None,
    })
}

fn workload(name: &str, params: &[(&str, String)]) -> SourceSpec {
    SourceSpec::Workload { name: name.into(), params: params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect() }
}

fn simulate(cfg: &Config, spec: &SourceSpec) -> Result<(u64, f64)> {
    let (_, info) = open_source(spec)?;
    let t = Instant::now();
    let doc = crate::sim::run_source(cfg, &mut || Ok(open_source(spec)?.0), &info, |_| {})?;
    let secs = t.elapsed().as_secs_f64();
    Ok((doc["totals"]["accesses"].as_u64().unwrap_or(0), secs))
}

/// Peak resident memory of this process, from /proc (Linux), in bytes.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The sampled time model's rows: 1,000 references measured in every 100,000, after
/// 2,000 of warm-up (docs/config.md `[time.sampling]`).
const SAMPLED: &str = "time.sampling.period=100000";

/// Every benchmark whose name contains `only` (all if None), each run `repeat` times (on
/// a noisy host, the best of several runs is the machine's speed; the median shows the
/// noise).
pub(crate) fn run_benchmarks(quick: bool, repeat: u32, only: Option<&str>) -> Result<Vec<BenchRow>> {
    let scale: u64 = if quick { 1 } else { 10 };
    let wanted = |name: &str| only.is_none_or(|o| name.contains(o));
    let mut rows = Vec::new();
    let mut row = |name: &str, unit: &str, bench: &mut dyn FnMut() -> Result<(u64, f64)>| -> Result<()> {
        if wanted(name) {
            rows.push(measure(name, unit, repeat, bench)?);
        }
        Ok(())
    };

    // 1. Decode a .vmt trace alone.
    const DECODE: &str = "decode .vmt (stream)";
    if wanted(DECODE) {
        let dir = std::env::temp_dir().join(format!("vmlab-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let path = dir.join("stream.vmt");
        let n = 5_000_000 * scale;
        let (mut src, _) = open_source(&workload("stream", &[("accesses", n.to_string()), ("instrs_per_access", "0".into())]))?;
        crate::trace::vmt::write_file(src.as_mut(), &path)?;
        let decode = row(DECODE, "records", &mut || {
            let t = Instant::now();
            let mut r = trace::vmt::VmtReader::open(&path)?;
            let mut buf = Vec::with_capacity(trace::BATCH);
            let mut records = 0u64;
            while r.next_batch(&mut buf)? {
                records += buf.len() as u64;
            }
            Ok((records, t.elapsed().as_secs_f64()))
        });
        let _ = std::fs::remove_dir_all(&dir);
        decode?;
    }

    // 2. Stream through the Skylake-like preset.
    let sky = Config::load("skylake", &[])?;
    let stream = workload("stream", &[("accesses", (10_000_000 * scale).to_string())]);
    row("stream, skylake", "accesses", &mut || simulate(&sky, &stream))?;
    let sky_data = Config::load("skylake", &["memory.data_refs=true".into()])?;
    row("stream, skylake + data refs through caches", "accesses", &mut || simulate(&sky_data, &stream))?;
    // The time model (time/) on the same run: its rows sit beside the count-only ones.
    let sky_time = Config::load("skylake", &["memory.data_refs=true".into(), "time.model=ooo".into()])?;
    row("stream, skylake + time model", "accesses", &mut || simulate(&sky_time, &stream))?;
    let sky_sampled = Config::load("skylake", &["memory.data_refs=true".into(), "time.model=ooo".into(), SAMPLED.into()])?;
    row("stream, skylake + time model, sampled", "accesses", &mut || simulate(&sky_sampled, &stream))?;

    // 3. GUPS over 4 GiB, walks through the cache hierarchy.
    let gups = workload("gups", &[("footprint", "4G".into()), ("accesses", (2_000_000 * scale).to_string())]);
    row("gups 4G, skylake", "accesses", &mut || simulate(&sky, &gups))?;
    row("gups 4G, skylake + data refs through caches", "accesses", &mut || simulate(&sky_data, &gups))?;
    row("gups 4G, skylake + time model", "accesses", &mut || simulate(&sky_time, &gups))?;
    row("gups 4G, skylake + time model, sampled", "accesses", &mut || simulate(&sky_sampled, &gups))?;

    // 4. Romer's cache study: conflict misses, recolouring, COMBINED (data refs on).
    let strawman = workload("strawman", &[("accesses", (5_000_000 * scale).to_string())]);
    let romer_cache = Config::load("romer-cache", &[])?;
    row("strawman, romer-cache", "accesses", &mut || simulate(&romer_cache, &strawman))?;
    let cml = Config::load("romer-cache", &["os.recolor.kind=\"cml\"".into()])?;
    row("strawman, romer-cache + CML", "accesses", &mut || simulate(&cml, &strawman))?;
    let combined = Config::load("combined", &[])?;
    let gups = workload("gups", &[("footprint", "64M".into()), ("accesses", (5_000_000 * scale).to_string())]);
    row("gups 64M, combined", "accesses", &mut || simulate(&combined, &gups))?;

    // 5. Page-size policy bookkeeping (the target: within 2x of the 4K run): Romer's
    //    32-entry TLBs on a dense TLB-bound GUPS, fixed 4K pages vs the charge-driven
    //    policies.
    let gups = workload("gups", &[("footprint", "256M".into()), ("accesses", (1_000_000 * scale).to_string())]);
    for kind in ["fixed", "approx-online", "online"] {
        let cfg = Config::load("romer", &[format!("os.policy.kind=\"{kind}\"")])?;
        row(&format!("gups 256M, romer {kind}"), "accesses", &mut || simulate(&cfg, &gups))?;
    }
    // 6. Nested translation (the target: ≥ 5 M accesses/s on GUPS): the ASPLOS'22
    //    preset, a guest GUPS over 1 GiB, under nested radix and nested ECPT.
    let gups = workload("gups", &[("footprint", "1G".into()), ("accesses", (1_000_000 * scale).to_string())]);
    for kind in ["nested-radix", "nested-ecpt"] {
        let cfg = Config::load("ecpt-asplos22", &[format!("page_table.kind=\"{kind}\"")])?;
        row(&format!("gups 1G, {kind}"), "accesses", &mut || simulate(&cfg, &gups))?;
    }
    for kind in ["nested-radix", "nested-ecpt"] {
        let cfg = Config::load("ecpt-asplos22", &[format!("page_table.kind=\"{kind}\""), "memory.data_refs=true".into()])?;
        row(&format!("gups 1G, {kind} + data refs"), "accesses", &mut || simulate(&cfg, &gups))?;
        let cfg = Config::load("ecpt-asplos22", &[format!("page_table.kind=\"{kind}\""), "memory.data_refs=true".into(), "time.model=ooo".into()])?;
        row(&format!("gups 1G, {kind} + time model"), "accesses", &mut || simulate(&cfg, &gups))?;
        let cfg =
            Config::load("ecpt-asplos22", &[format!("page_table.kind=\"{kind}\""), "memory.data_refs=true".into(), "time.model=ooo".into(), SAMPLED.into()])?;
        row(&format!("gups 1G, {kind} + time model, sampled"), "accesses", &mut || simulate(&cfg, &gups))?;
    }
    compare_with_bases(&mut rows);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, rate: f64) -> BenchRow {
        BenchRow {
            name: name.into(),
            items: 1,
            unit: "accesses".into(),
            seconds: 1.0,
            millions_per_second: rate,
            median_seconds: 1.0,
            runs: vec![1.0],
            vs_base: None,
        }
    }

    #[test]
    fn a_row_is_compared_with_the_row_its_name_extends() {
        let mut rows = vec![
            row("gups 1G, nested-radix", 10.0),
            row("gups 1G, nested-ecpt", 5.0),
            row("gups 1G, nested-radix + time model, sampled", 6.0),
            row("gups 1G, nested-ecpt + data refs", 4.0),
            row("stream, skylake + time model", 9.0),
        ];
        compare_with_bases(&mut rows);
        let v: Vec<Option<f64>> = rows.iter().map(|r| r.vs_base).collect();
        assert_eq!(v, [None, None, Some(0.6), Some(0.8), None], "the stream row's base did not run");
    }
}
