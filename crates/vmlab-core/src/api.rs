//! The library's front door: what the CLI and the Python bindings call.

use crate::config::{Config, PRESETS};
use crate::error::{Error, Result};
use crate::sim::{self, SourceInfo};
use crate::trace::{self, TraceSource};
use std::path::PathBuf;

/// Where a run's records come from.
#[derive(Clone, Debug)]
pub enum SourceSpec {
    /// A .vmt trace file.
    Trace(PathBuf),
    /// A built-in synthetic workload and its `key=value` parameters.
    Workload { name: String, params: Vec<(String, String)> },
}

/// One simulation request.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// A preset name (`skylake`, `tiny`, ...) or a path to a TOML file.
    pub config: String,
    /// `key=value` overrides applied on top of the config, in order.
    pub overrides: Vec<String>,
    pub source: SourceSpec,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

/// Open a source: a trace file or a synthetic workload.
pub fn open_source(spec: &SourceSpec) -> Result<(Box<dyn TraceSource + Send>, SourceInfo)> {
    match spec {
        SourceSpec::Trace(path) => {
            let r = trace::vmt::VmtReader::open(path)?;
            let info = SourceInfo {
                kind: "trace".into(),
                name: path.display().to_string(),
                params: serde_json::Value::Object(Default::default()),
                content_hash: Some(trace::vmt::content_hash(path)?),
            };
            Ok((Box::new(r), info))
        }
        SourceSpec::Workload { name, params } => {
            let src = trace::synth::open(name, params)?;
            let resolved: serde_json::Map<String, serde_json::Value> =
                src.meta().extra.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect();
            let info = SourceInfo {
                kind: "workload".into(),
                name: name.clone(),
                params: serde_json::Value::Object(resolved),
                content_hash: None,
            };
            Ok((src, info))
        }
    }
}

/// Run one simulation; returns the stats document (docs/metrics.md).
pub fn run(req: &RunRequest) -> Result<serde_json::Value> {
    let cfg = Config::load(&req.config, &req.overrides)?;
    let (mut src, info) = open_source(&req.source)?;
    let bar = progress_bar(req.progress, src.len_hint());
    let doc = sim::run(&cfg, src.as_mut(), &info, |n| {
        if let Some(b) = &bar {
            b.set_position(n)
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    doc
}

/// A progress bar on stderr (never stdout: the JSON stays clean), if asked for.
pub fn progress_bar(enabled: bool, len: Option<u64>) -> Option<indicatif::ProgressBar> {
    if !enabled {
        return None;
    }
    let target = indicatif::ProgressDrawTarget::stderr_with_hz(4);
    let bar = match len {
        Some(n) => indicatif::ProgressBar::with_draw_target(Some(n), target).with_style(
            indicatif::ProgressStyle::with_template("{bar:40} {percent:>3}% {human_pos}/{human_len} records, ETA {eta}")
                .expect("template"),
        ),
        None => indicatif::ProgressBar::with_draw_target(None, target).with_style(
            indicatif::ProgressStyle::with_template("{spinner} {human_pos} records ({per_sec})").expect("template"),
        ),
    };
    Some(bar)
}

/// The built-in presets: (name, TOML text).
pub fn presets() -> Vec<(String, String)> {
    PRESETS.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
}

/// Parse `key=value` workload parameters.
pub fn parse_params(items: &[String]) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| Error::Workload { name: "-".into(), msg: format!("parameter `{s}` must look like key=value") })
        })
        .collect()
}
