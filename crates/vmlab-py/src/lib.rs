// pyo3 0.22 macros test a `gil-refs` feature this crate does not declare.
#![allow(unexpected_cfgs)]
// ... and convert every `#[pyfunction]`'s `PyResult` into itself.
#![allow(clippy::useless_conversion)]

//! `vmlab._core`: the Python binding of the vmlab engine. The Python package
//! (python/vmlab) wraps these functions; the CLI is the Rust one, reached through
//! `cli_main`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vmlab::api::{self, RunRequest, SourceSpec};
use vmlab::trace::{Record, TraceSource};

// Named `vmlab.VmlabError`: that is where users catch it (python/vmlab re-exports it).
create_exception!(vmlab, VmlabError, PyException, "A vmlab error: bad input, bad config, or a simulation that cannot go on.");

fn to_py(e: vmlab::Error) -> PyErr {
    VmlabError::new_err(e.to_string())
}

/// Run `work` with the GIL released, on a thread of its own, while this thread runs
/// Python's signal handlers every 50 ms. A Ctrl-C (KeyboardInterrupt), or an exception a
/// SIGTERM handler raises, asks the work to stop (vmlab::interrupt: within one batch of
/// records) and is raised here once it has. Without this, Python would run its handlers
/// only when the run ended.
///
/// With `on_progress`, the progress bars the work shows are not drawn on stderr but
/// watched (vmlab::api::watch_progress): at each wake-up, and once at the end,
/// `on_progress(bar, label, pos, len, finished)` is called for each bar that changed
/// since (the fields of api::ProgressSnapshot; `len` None when unknown), in the order
/// of the bars. An exception it raises stops the work as a signal's does.
fn interruptible<T: Send>(py: Python<'_>, on_progress: Option<PyObject>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    use std::sync::mpsc::RecvTimeoutError;
    let watch = on_progress.as_ref().map(|_| api::ProgressWatch::new());
    let mut reported: Vec<api::ProgressSnapshot> = Vec::new();
    // Report the watched bars that changed since the last report.
    let mut report = |py: Python<'_>| -> PyResult<()> {
        let (Some(cb), Some(watch)) = (&on_progress, &watch) else { return Ok(()) };
        let bars = watch.bars();
        for (i, b) in bars.iter().enumerate() {
            if reported.get(i) != Some(b) {
                cb.call1(py, (b.bar, b.label.as_str(), b.pos, b.len, b.finished))?;
            }
        }
        reported = bars;
        Ok(())
    };
    py.allow_threads(|| {
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let watched = watch.clone();
            let worker = s.spawn(move || {
                let out = match &watched {
                    Some(w) => api::watch_progress(w, work),
                    None => work(),
                };
                let _ = tx.send(());
                out
            });
            let mut raised: Option<PyErr> = None;
            let stop = |py: Python<'_>, e: &PyErr| {
                let ctrl_c = e.get_type_bound(py).is(&py.get_type_bound::<pyo3::exceptions::PyKeyboardInterrupt>());
                vmlab::interrupt::request(if ctrl_c { vmlab::interrupt::SIGINT } else { vmlab::interrupt::SIGTERM });
            };
            while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(std::time::Duration::from_millis(50)) {
                if raised.is_none() {
                    raised = Python::with_gil(|py| py.check_signals().and_then(|()| report(py)).err().inspect(|e| stop(py, e)));
                }
            }
            let out = worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if raised.is_none() {
                // The final position and the end of the last bar.
                raised = Python::with_gil(|py| report(py).err());
            }
            match raised {
                Some(e) => {
                    vmlab::interrupt::clear();
                    Err(e)
                }
                None => Ok(out),
            }
        })
    })
}

/// Stringify workload parameter values (ints, floats, strings).
fn params_of(params: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(d) = params {
        for (k, v) in d.iter() {
            out.push((k.str()?.to_string(), v.str()?.to_string()));
        }
    }
    Ok(out)
}

/// Run one simulation and return the stats document as JSON text.
#[pyfunction]
#[pyo3(signature = (config, overrides=Vec::new(), trace=None, workload=None, params=None, progress=false, on_progress=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    config: String,
    overrides: Vec<String>,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<&Bound<'_, PyDict>>,
    progress: bool,
    on_progress: Option<PyObject>,
) -> PyResult<String> {
    let source = source_of(trace, workload, params)?;
    let req = RunRequest { config, overrides, source, progress };
    let doc = interruptible(py, on_progress, || api::run(&req))?.map_err(to_py)?;
    Ok(serde_json::to_string(&doc).expect("json"))
}

fn source_of(trace: Option<String>, workload: Option<String>, params: Option<&Bound<'_, PyDict>>) -> PyResult<SourceSpec> {
    match (trace, workload) {
        (Some(t), None) => Ok(SourceSpec::Trace(t.into())),
        (None, Some(w)) => Ok(SourceSpec::Workload { name: w, params: params_of(params)? }),
        _ => Err(VmlabError::new_err("give exactly one of trace= or workload=")),
    }
}

/// One pass, many configurations: `configs` is a list of (config, overrides). Returns
/// one (stats JSON, None) or (None, error message) per config, in order. An error
/// reading the source raises.
#[pyfunction]
#[pyo3(signature = (configs, trace=None, workload=None, params=None, threads=1, progress=false, on_progress=None))]
#[allow(clippy::too_many_arguments)]
fn run_many(
    py: Python<'_>,
    configs: Vec<(String, Vec<String>)>,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<&Bound<'_, PyDict>>,
    threads: usize,
    progress: bool,
    on_progress: Option<PyObject>,
) -> PyResult<Vec<(Option<String>, Option<String>)>> {
    let source = source_of(trace, workload, params)?;
    let docs = interruptible(py, on_progress, || api::run_many(&configs, &source, threads, progress))?.map_err(to_py)?;
    Ok(docs
        .into_iter()
        .map(|d| match d {
            Ok(doc) => (Some(serde_json::to_string(&doc).expect("json")), None),
            Err(e) => (None, Some(e.to_string())),
        })
        .collect())
}

/// TLB miss-ratio curves in one pass (stack distances), as JSON text.
#[pyfunction]
#[pyo3(signature = (trace=None, workload=None, params=None, page_size="4K".to_string(), side="data".to_string(), sets=Vec::new(), max_ways=16, max_entries=65536))]
#[allow(clippy::too_many_arguments)]
fn mrc(
    py: Python<'_>,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<&Bound<'_, PyDict>>,
    page_size: String,
    side: String,
    sets: Vec<usize>,
    max_ways: usize,
    max_entries: usize,
) -> PyResult<String> {
    let source = source_of(trace, workload, params)?;
    let bytes = vmlab::addr::parse_bytes(&page_size).map_err(|m| to_py(vmlab::Error::config("page_size", m)))?;
    let opts = vmlab::sim::mrc::MrcOptions {
        page_size: vmlab::addr::PageSize::from_bytes(bytes).map_err(|m| to_py(vmlab::Error::config("page_size", m)))?,
        side: side.parse().map_err(to_py)?,
        sets,
        max_ways,
        max_entries,
    };
    let curves = interruptible(py, None, || api::miss_ratio_curves(&source, &opts))?.map_err(to_py)?;
    Ok(serde_json::to_string(&curves).expect("json"))
}

/// The `vmlab` command line; returns the exit status. The console script calls
/// [`install_signal_handlers`] first, so SIGINT and SIGTERM stop a command as they stop
/// the native binary.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.allow_threads(|| vmlab::cli::main(argv))
}

/// Route SIGINT and SIGTERM to vmlab's own handlers (vmlab::interrupt), replacing
/// Python's: for a process that runs one Rust command and exits.
#[pyfunction]
fn install_signal_handlers() {
    vmlab::interrupt::install_handlers();
}

#[pyfunction]
fn version() -> &'static str {
    vmlab::VERSION
}

/// A preset or TOML file plus `key=value` overrides, resolved and validated:
/// (the resolved configuration as JSON text, its stable hash).
#[pyfunction]
#[pyo3(signature = (config, overrides=Vec::new()))]
fn resolve_config(config: String, overrides: Vec<String>) -> PyResult<(String, String)> {
    let cfg = vmlab::config::Config::load(&config, &overrides).map_err(to_py)?;
    Ok((cfg.to_json().to_string(), cfg.hash()))
}

/// A named design (`vmlab compare --designs`): (label, its config overrides).
#[pyfunction]
fn design(name: String) -> PyResult<(String, Vec<String>)> {
    api::design(&name).map_err(to_py)
}

/// Built-in presets as (name, TOML text).
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    api::presets()
}

/// `vmlab pt compare` as JSON text: one row per page-table design.
#[pyfunction]
#[pyo3(signature = (designs, config="skylake".to_string(), overrides=Vec::new(), trace=None, workload=None, params=None, progress=false, on_progress=None))]
#[allow(clippy::too_many_arguments)]
fn pt_compare(
    py: Python<'_>,
    designs: Vec<String>,
    config: String,
    overrides: Vec<String>,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<&Bound<'_, PyDict>>,
    progress: bool,
    on_progress: Option<PyObject>,
) -> PyResult<String> {
    let source = source_of(trace, workload, params)?;
    let rows = interruptible(py, on_progress, || api::pt_compare(&config, &overrides, &source, &designs, progress))?.map_err(to_py)?;
    Ok(serde_json::to_string(&rows).expect("json"))
}

/// `vmlab compare` as JSON text: one row per design.
#[pyfunction]
#[pyo3(signature = (designs, baseline=None, config="skylake".to_string(), overrides=Vec::new(), trace=None, workload=None, params=None, threads=1, progress=false, on_progress=None))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    designs: Vec<String>,
    baseline: Option<String>,
    config: String,
    overrides: Vec<String>,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<&Bound<'_, PyDict>>,
    threads: usize,
    progress: bool,
    on_progress: Option<PyObject>,
) -> PyResult<String> {
    let source = source_of(trace, workload, params)?;
    let rows =
        interruptible(py, on_progress, || api::compare(&config, &overrides, &source, &designs, baseline.as_deref(), threads, progress))?.map_err(to_py)?;
    Ok(serde_json::to_string(&rows).expect("json"))
}

/// A stats document (JSON text) as its `compare` row (JSON text) beside the baseline's.
#[pyfunction]
fn compare_row(label: &str, doc: &str, baseline_label: &str, baseline: &str) -> PyResult<String> {
    let parse =
        |what: &str, text: &str| serde_json::from_str::<serde_json::Value>(text).map_err(|e| VmlabError::new_err(format!("{what}: not a stats document: {e}")));
    let row = api::compare_row(label, &parse("doc", doc)?, baseline_label, &parse("baseline", baseline)?);
    Ok(serde_json::to_string(&row).expect("json"))
}

/// A `pt compare` design (a name or `"label:key=value;..."`) as its row label and the
/// overrides it sets.
#[pyfunction]
fn pt_design(name: &str) -> PyResult<(String, Vec<String>)> {
    Ok((api::pt_design_label(name).to_string(), api::pt_design(name).map_err(to_py)?))
}

/// A stats document (JSON text) as its `pt compare` row (JSON text), without the speed
/// columns (NaN: the run was not timed here).
#[pyfunction]
fn pt_compare_row(label: &str, doc: &str) -> PyResult<String> {
    let doc = serde_json::from_str::<serde_json::Value>(doc).map_err(|e| VmlabError::new_err(format!("doc: not a stats document: {e}")))?;
    Ok(serde_json::to_string(&api::pt_compare_row(label, &doc, None)).expect("json"))
}

/// The workload catalogue as JSON text.
#[pyfunction]
fn workloads() -> String {
    serde_json::to_string(&vmlab::trace::synth::catalog()).expect("json")
}

/// `vmlab info` as JSON text.
#[pyfunction]
fn trace_info(py: Python<'_>, path: String) -> PyResult<String> {
    interruptible(py, None, || {
        let mut r = vmlab::trace::vmt::VmtReader::open(std::path::Path::new(&path))?;
        let info = vmlab::trace::info::summarize(&mut r)?;
        Ok(serde_json::to_string(&info).expect("json"))
    })?
    .map_err(to_py)
}

/// Streams the records of a .vmt file (or a workload) as Python tuples:
/// `("read"|"write"|"fetch", vaddr, size, pid)`, `("tick", n)`,
/// `("mmap", pid, start, len, prot, flags)`, `("munmap", pid, start, len)`,
/// `("mprotect", pid, start, len, prot)`, `("brk", pid, end)`, `("fork", parent, child)`,
/// `("exit", pid)`, `("switch", pid)`.
#[pyclass]
struct TraceReader {
    src: Box<dyn TraceSource + Send>,
    buf: Vec<Record>,
}

#[pymethods]
impl TraceReader {
    #[new]
    #[pyo3(signature = (trace=None, workload=None, params=None))]
    fn new(trace: Option<String>, workload: Option<String>, params: Option<&Bound<'_, PyDict>>) -> PyResult<TraceReader> {
        let spec = source_of(trace, workload, params)?;
        let (src, _) = api::open_source(&spec).map_err(to_py)?;
        Ok(TraceReader { src, buf: Vec::new() })
    }

    /// The next batch of records (an empty list at the end).
    fn next_batch(&mut self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        if !self.src.next_batch(&mut self.buf).map_err(to_py)? {
            return Ok(Vec::new());
        }
        Ok(self.buf.iter().map(|r| record_to_py(py, r)).collect())
    }
}

fn record_to_py(py: Python<'_>, r: &Record) -> PyObject {
    match *r {
        Record::Access(a) => (a.kind.name(), a.vaddr, a.size, a.pid).into_py(py),
        Record::Tick(n) => ("tick", n).into_py(py),
        Record::Mmap { pid, start, len, prot, flags } => ("mmap", pid, start, len, prot, flags.0).into_py(py),
        Record::Munmap { pid, start, len } => ("munmap", pid, start, len).into_py(py),
        Record::Mprotect { pid, start, len, prot } => ("mprotect", pid, start, len, prot).into_py(py),
        Record::Brk { pid, end } => ("brk", pid, end).into_py(py),
        Record::Fork { parent, child } => ("fork", parent, child).into_py(py),
        Record::Exit { pid } => ("exit", pid).into_py(py),
        Record::ContextSwitch { pid } => ("switch", pid).into_py(py),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VmlabError", m.py().get_type_bound::<VmlabError>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_many, m)?)?;
    m.add_function(wrap_pyfunction!(mrc, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(install_signal_handlers, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(design, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_config, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(pt_compare, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(compare_row, m)?)?;
    m.add_function(wrap_pyfunction!(pt_design, m)?)?;
    m.add_function(wrap_pyfunction!(pt_compare_row, m)?)?;
    m.add("COMPARE_OVERRIDES", api::COMPARE_OVERRIDES.to_vec())?;
    m.add_class::<TraceReader>()?;
    Ok(())
}
