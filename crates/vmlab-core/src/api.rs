//! The library's front door: what the CLI and the Python bindings call.

use crate::error::Result;
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

/// Run one simulation; returns the stats document (docs/metrics.md).
pub fn run(_req: &RunRequest) -> Result<serde_json::Value> {
    Err(crate::Error::Sim("engine not built yet".into()))
}
