//! One error type for the library. Every variant names what went wrong and where
//! (file and byte offset, config key path), so the CLI can print one clear line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A trace file is corrupt, truncated or not a trace at all.
    #[error("{file}: at byte offset {offset}: {msg}")]
    Trace { file: PathBuf, offset: u64, msg: String },

    /// A trace importer could not parse its input.
    #[error("{source_name}: line {line}: {msg}")]
    Import { source_name: String, line: u64, msg: String },

    /// A configuration key is unknown, ill-typed, or describes an impossible machine.
    #[error("config key `{key}`: {msg}")]
    Config { key: String, msg: String },

    /// A command-line argument (or its Python counterpart) is wrong: `--sets`,
    /// `--designs`, a workload parameter given with a trace.
    #[error("argument `{arg}`: {msg}")]
    Arg { arg: String, msg: String },

    /// A workload name or parameter is wrong.
    #[error("workload `{name}`: {msg}")]
    Workload { name: String, msg: String },

    /// The simulated machine ran out of physical memory (see docs/config.md, `os.on_oom`).
    #[error("simulated physical memory exhausted: {0}")]
    OutOfMemory(String),

    /// The simulated program did something the model cannot honour (e.g. access outside any VMA
    /// with `os.implicit_anon = false`).
    #[error("simulation: {0}")]
    Sim(String),

    /// Live tracing could not start or go on (`vmlab trace`: the tracer, the command).
    #[error("trace: {0}")]
    Tracing(String),

    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },

    /// SIGINT or SIGTERM asked the run to stop (crate::interrupt).
    #[error("interrupted by {}", crate::interrupt::signal_name(*signal))]
    Interrupted { signal: i32 },
}

impl Error {
    pub fn config(key: impl Into<String>, msg: impl Into<String>) -> Error {
        Error::Config { key: key.into(), msg: msg.into() }
    }
    pub(crate) fn arg(arg: impl Into<String>, msg: impl Into<String>) -> Error {
        Error::Arg { arg: arg.into(), msg: msg.into() }
    }
    pub(crate) fn io(path: impl Into<PathBuf>, err: std::io::Error) -> Error {
        Error::Io { path: path.into(), err }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
