//! Trace sources: the .vmt file format, importers, synthetic generators.
//!
//! Every source yields [`Record`]s in batches through [`TraceSource`]; nothing loads a
//! whole trace into memory.

pub mod record;

pub use record::{Access, Dep, MapFlags, Record};

use crate::error::Result;
use serde::{Deserialize, Serialize};

/// Records per batch that sources hand to the engine.
pub const BATCH: usize = 4096;

/// Metadata carried in a trace header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// What produced the trace: "lackey", "champsim", "synthetic:gups", ...
    pub source: String,
    /// Command line of the traced program, if any.
    #[serde(default)]
    pub command: Vec<String>,
    /// Base page size of the machine the trace was taken on, in bytes, if known.
    #[serde(default)]
    pub source_page_size: Option<u64>,
    /// Free-form key/values (generator parameters, seeds, tool versions).
    #[serde(default)]
    pub extra: std::collections::BTreeMap<String, String>,
}

/// A stream of records.
pub trait TraceSource {
    fn meta(&self) -> &TraceMeta;
    /// Clear `buf` and refill it with up to [`BATCH`] records. Returns `Ok(false)` once
    /// the stream is exhausted (and then `buf` is empty).
    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool>;
    /// Total records, if the source knows it up front (for progress bars).
    fn len_hint(&self) -> Option<u64> {
        None
    }
}

pub mod champsim;
pub mod compressed;
pub mod drmemtrace;
pub mod info;
pub mod lackey;
pub mod live;
pub mod qemu;
pub mod qemu_wire;
pub mod snapshot;
pub mod synth;
pub mod vmt;

/// A source over records held in memory (tests, small generated inputs).
pub struct VecSource {
    meta: TraceMeta,
    records: Vec<Record>,
    pos: usize,
}

impl VecSource {
    pub fn new(source: &str, records: Vec<Record>) -> VecSource {
        VecSource { meta: TraceMeta { source: source.into(), ..Default::default() }, records, pos: 0 }
    }
    pub(crate) fn meta_mut(&mut self) -> &mut TraceMeta {
        &mut self.meta
    }
}

impl TraceSource for VecSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool> {
        buf.clear();
        let end = (self.pos + BATCH).min(self.records.len());
        buf.extend_from_slice(&self.records[self.pos..end]);
        self.pos = end;
        Ok(!buf.is_empty())
    }
    fn len_hint(&self) -> Option<u64> {
        Some(self.records.len() as u64)
    }
}
