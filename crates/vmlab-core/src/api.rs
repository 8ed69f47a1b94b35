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
    /// The resident pages of a live process (/proc/PID/maps and pagemap).
    Snapshot(u32),
}

/// One simulation request.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// A preset name (`skylake`, `tiny`, ...) or a path to a TOML file.
    pub config: String,
    /// `key=value` overrides applied on top of the config, in order.
    pub overrides: Vec<String>,
    pub source: SourceSpec,
    /// Show progress on stderr ([`Progress`]).
    pub progress: bool,
}

/// `Ok` if `spec` can be read again: anything but a trace that is a pipe or a FIFO,
/// which an error names with `why` it would be read more than once.
fn readable_again(spec: &SourceSpec, why: &str) -> Result<()> {
    match spec {
        SourceSpec::Trace(path) if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) => {
            Err(Error::Trace { file: path.clone(), offset: 0, msg: format!("a pipe or FIFO can be read once, and {why}: save the trace to a file first") })
        }
        _ => Ok(()),
    }
}

/// Open a source: a trace file or a synthetic workload.
pub fn open_source(spec: &SourceSpec) -> Result<(Box<dyn TraceSource + Send>, SourceInfo)> {
    match spec {
        SourceSpec::Trace(path) => {
            // A regular file is read twice (its content hash, then its records); a pipe or
            // FIFO (`<(zstdcat t.vmt.zst)`) once, with no hash: it cannot be read again.
            let regular = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.is_file();
            let content_hash = if regular { Some(trace::vmt::content_hash(path)?) } else { None };
            let r = trace::vmt::VmtReader::open(path)?;
            let info =
                SourceInfo { kind: "trace".into(), name: path.display().to_string(), params: serde_json::Value::Object(Default::default()), content_hash };
            Ok((Box::new(r), info))
        }
        SourceSpec::Workload { name, params } => {
            let src = trace::synth::open(name, params)?;
            let resolved: serde_json::Map<String, serde_json::Value> = src.meta().extra.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect();
            let info = SourceInfo { kind: "workload".into(), name: name.clone(), params: serde_json::Value::Object(resolved), content_hash: None };
            Ok((src, info))
        }
        SourceSpec::Snapshot(pid) => {
            let src = trace::snapshot::snapshot(*pid)?;
            let info =
                SourceInfo { kind: "snapshot".into(), name: format!("pid {pid}"), params: serde_json::Value::Object(Default::default()), content_hash: None };
            Ok((Box::new(src), info))
        }
    }
}

/// Run one simulation; returns the stats document (docs/metrics.md).
pub fn run(req: &RunRequest) -> Result<serde_json::Value> {
    run_named(req, "")
}

/// [`run`], its progress named `label`.
fn run_named(req: &RunRequest, label: &str) -> Result<serde_json::Value> {
    let cfg = Config::load(&req.config, &req.overrides)?;
    let (src, info) = open_source(&req.source)?;
    let bar = Progress::new(req.progress, src.len_hint(), label);
    let mut first = Some(src);
    // The first open is reused; OFFLINE opens the source again for its second pass.
    let mut open = || -> Result<Box<dyn crate::trace::TraceSource + Send>> {
        match first.take() {
            Some(s) => Ok(s),
            None => {
                readable_again(&req.source, "the offline policy reads its input twice")?;
                Ok(open_source(&req.source)?.0)
            }
        }
    };
    let doc = sim::run_source(&cfg, &mut open, &info, |n| bar.set(n));
    bar.finish();
    doc
}

/// One pass, many configurations: decode `source` once and simulate it under every
/// `(config, overrides)` pair, on up to `threads` threads. One result per pair, in
/// order; a pair that fails (bad key, out of memory) fails alone. Each document is the
/// one [`run`] gives for that pair. OFFLINE pairs read the trace twice, so they run
/// on their own after the shared pass.
pub fn run_many(configs: &[(String, Vec<String>)], source: &SourceSpec, threads: usize, progress: bool) -> Result<Vec<Result<serde_json::Value>>> {
    let mut results: Vec<Option<Result<serde_json::Value>>> = (0..configs.len()).map(|_| None).collect();
    let mut shared = Vec::new();
    let mut shared_at = Vec::new();
    for (i, (config, overrides)) in configs.iter().enumerate() {
        match Config::load(config, overrides) {
            Ok(cfg) if cfg.os.policy.kind == crate::os::policy::PolicyName::Offline => {
                readable_again(source, "the offline policy reads its input twice")?;
                let req = RunRequest { config: config.clone(), overrides: overrides.clone(), source: source.clone(), progress: false };
                results[i] = Some(run(&req));
            }
            Ok(cfg) => {
                shared.push(cfg);
                shared_at.push(i);
            }
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    if !shared.is_empty() {
        let (mut src, info) = open_source(source)?;
        let bar = Progress::new(progress, src.len_hint(), "");
        let docs = sim::run_many(&shared, src.as_mut(), &info, threads, |n| bar.set(n));
        bar.finish();
        for (i, doc) in shared_at.into_iter().zip(docs?) {
            results[i] = Some(doc);
        }
    }
    Ok(results.into_iter().map(|r| r.expect("every config has a result")).collect())
}

/// TLB miss-ratio curves of a source in one pass (sim/mrc.rs).
pub fn miss_ratio_curves(source: &SourceSpec, opts: &sim::mrc::MrcOptions) -> Result<sim::mrc::MissRatioCurves> {
    let (mut src, _) = open_source(source)?;
    sim::mrc::miss_ratio_curves(src.as_mut(), opts)
}

/// Progress on stderr (never stdout: the JSON stays clean): a bar with the total and
/// an ETA on a terminal; elsewhere (a log, nohup) a line every [`Progress::LINE_EVERY`],
/// so a long run still shows it is alive. On a thread that [`watch_progress`] runs,
/// nothing is drawn: the position goes to its [`ProgressWatch`] (a notebook's bar).
pub(crate) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    lines: Option<std::cell::Cell<std::time::Instant>>,
    watch: Option<std::sync::Arc<ProgressWatch>>,
    len: Option<u64>,
    label: String,
    start: std::time::Instant,
}

impl Progress {
    pub(crate) const LINE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

    /// Progress over `len` records (None: unknown), named `label` ("" for none), if
    /// `enabled`.
    pub(crate) fn new(enabled: bool, len: Option<u64>, label: &str) -> Progress {
        use std::io::IsTerminal;
        let now = std::time::Instant::now();
        let mut p = Progress { bar: None, lines: None, watch: None, len, label: label.to_string(), start: now };
        if !enabled {
            return p;
        }
        if let Some(watch) = WATCH.with(|w| w.borrow().clone()) {
            watch.begin(len, label);
            p.watch = Some(watch);
            return p;
        }
        if !std::io::stderr().is_terminal() {
            p.lines = Some(std::cell::Cell::new(now));
            return p;
        }
        let target = indicatif::ProgressDrawTarget::stderr_with_hz(4);
        let style = match len {
            Some(_) => "{msg}{bar:40} {percent:>3}% {human_pos}/{human_len} records, ETA {eta}",
            None => "{msg}{spinner} {human_pos} records ({per_sec})",
        };
        let bar = indicatif::ProgressBar::with_draw_target(len, target)
            .with_style(indicatif::ProgressStyle::with_template(style).expect("template"))
            .with_message(if label.is_empty() { String::new() } else { format!("{label} ") });
        p.bar = Some(bar);
        p
    }

    /// `n` records done. A length that was an estimate (a synthetic workload's) is a
    /// ceiling, not a promise: the position stops at it.
    pub(crate) fn set(&self, n: u64) {
        if let Some(w) = &self.watch {
            // Unclamped: the watcher shows the count read when the run ends.
            w.pos.store(n, std::sync::atomic::Ordering::Relaxed);
        }
        let n = self.len.map_or(n, |l| n.min(l));
        if let Some(b) = &self.bar {
            b.set_position(n);
        }
        if let Some(last) = &self.lines {
            if last.get().elapsed() >= Self::LINE_EVERY {
                last.set(std::time::Instant::now());
                let secs = self.start.elapsed().as_secs_f64();
                let rate = n as f64 / secs.max(1e-9);
                let label = if self.label.is_empty() { String::new() } else { format!("{} ", self.label) };
                match self.len {
                    Some(l) if l > 0 && rate > 0.0 => eprintln!(
                        "vmlab: {label}{:.0}% ({n}/{l} records, {:.1} M/s, {:.0} s left)",
                        100.0 * n as f64 / l as f64,
                        rate / 1e6,
                        l.saturating_sub(n) as f64 / rate
                    ),
                    _ => eprintln!("vmlab: {label}{n} records ({:.1} M/s)", rate / 1e6),
                }
            }
        }
    }

    pub(crate) fn finish(self) {
        if let Some(w) = &self.watch {
            w.finish();
        }
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

thread_local! {
    static WATCH: std::cell::RefCell<Option<std::sync::Arc<ProgressWatch>>> = const { std::cell::RefCell::new(None) };
}

/// Run `work` on this thread with the progress of every [`Progress`] it shows going to
/// `watch` instead of stderr: for a caller that draws progress itself, polling
/// [`ProgressWatch::bars`] from another thread (the Python binding's notebook bar).
pub fn watch_progress<T>(watch: &std::sync::Arc<ProgressWatch>, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<std::sync::Arc<ProgressWatch>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            WATCH.with(|w| *w.borrow_mut() = prev);
        }
    }
    let _restore = Restore(WATCH.with(|w| w.borrow_mut().replace(watch.clone())));
    work()
}

/// The progress of the bars shown under [`watch_progress`], shared between the thread
/// that works and one that watches. [`Progress::set`], called per batch of records, is
/// one relaxed atomic store; the lock is taken when a bar begins or finishes and by
/// [`ProgressWatch::bars`].
#[derive(Debug, Default)]
pub struct ProgressWatch {
    /// The position of the last bar, while it runs.
    pos: std::sync::atomic::AtomicU64,
    bars: std::sync::Mutex<Vec<ProgressSnapshot>>,
}

/// One bar of a [`ProgressWatch`] at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Which bar: 1 for the first one shown, 2 for the next, ...
    pub bar: u64,
    pub label: String,
    /// Records done; once finished, the last position set. Not clamped to `len`: a
    /// synthetic workload's estimate may fall short of what it yields.
    pub pos: u64,
    /// Records in all, if known (a synthetic workload's is an estimate).
    pub len: Option<u64>,
    /// The bar is finished: its work ended, well or not.
    pub finished: bool,
}

impl ProgressWatch {
    pub fn new() -> std::sync::Arc<ProgressWatch> {
        std::sync::Arc::new(ProgressWatch::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ProgressSnapshot>> {
        self.bars.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn begin(&self, len: Option<u64>, label: &str) {
        let mut bars = self.lock();
        self.pos.store(0, std::sync::atomic::Ordering::Relaxed);
        let bar = bars.len() as u64 + 1;
        bars.push(ProgressSnapshot { bar, label: label.to_string(), pos: 0, len, finished: false });
    }

    fn finish(&self) {
        let mut bars = self.lock();
        if let Some(last) = bars.last_mut() {
            last.pos = self.pos.load(std::sync::atomic::Ordering::Relaxed);
            last.finished = true;
        }
    }

    /// Every bar so far, in order (none before the first begins).
    pub fn bars(&self) -> Vec<ProgressSnapshot> {
        let mut bars = self.lock().clone();
        if let Some(last) = bars.last_mut().filter(|b| !b.finished) {
            last.pos = self.pos.load(std::sync::atomic::Ordering::Relaxed);
        }
        bars
    }
}

/// A source that shows its progress as it is read (`vmlab convert`, `vmlab generate`).
pub(crate) struct WithProgress<'a> {
    pub(crate) inner: &'a mut dyn TraceSource,
    pub(crate) progress: Progress,
    read: u64,
}

impl<'a> WithProgress<'a> {
    pub(crate) fn new(inner: &'a mut dyn TraceSource, enabled: bool) -> WithProgress<'a> {
        let progress = Progress::new(enabled, inner.len_hint(), "");
        WithProgress { inner, progress, read: 0 }
    }
}

impl TraceSource for WithProgress<'_> {
    fn meta(&self) -> &crate::trace::TraceMeta {
        self.inner.meta()
    }
    fn next_batch(&mut self, buf: &mut Vec<crate::trace::Record>) -> Result<bool> {
        let more = self.inner.next_batch(buf)?;
        self.read += buf.len() as u64;
        self.progress.set(self.read);
        Ok(more)
    }
    fn len_hint(&self) -> Option<u64> {
        self.inner.len_hint()
    }
}

/// The built-in presets: (name, TOML text).
pub fn presets() -> Vec<(String, String)> {
    PRESETS.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
}

/// Parse the `key=value` parameters of `workload` (named in errors); a key given twice
/// is an error, not a silent choice of one.
pub(crate) fn parse_params(workload: &str, items: &[String]) -> Result<Vec<(String, String)>> {
    let err = |msg: String| Error::Workload { name: workload.into(), msg };
    let mut out: Vec<(String, String)> = Vec::with_capacity(items.len());
    for s in items {
        let (k, v) = s.split_once('=').ok_or_else(|| err(format!("parameter `{s}` must look like key=value")))?;
        let (k, v) = (k.trim(), v.trim());
        if let Some((_, first)) = out.iter().find(|(have, _)| have == k) {
            return Err(err(format!("parameter `{k}` given twice (`{k}={first}` and `{k}={v}`)")));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// A `vmlab pt compare` design's row label: its name, or the label of a
/// `"label:key=value;..."` design.
pub fn pt_design_label(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// Named page-table designs for `vmlab pt compare`: overrides on top of the config.
pub fn pt_design(name: &str) -> Result<Vec<String>> {
    let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(match name {
        "radix" => o(&["page_table.kind=radix"]),
        "radix5" => o(&["page_table.kind=radix", "page_table.radix.levels=5"]),
        // Elphinstone's own MPT (§6.1.1): six levels, PTE-pair leaves, 4K pages.
        "mpt" => o(&["page_table.kind=mpt"]),
        "hashed" => o(&["page_table.kind=hashed", "page_table.hashed.subblock=2"]),
        "hashed-h512" => o(&["page_table.kind=hashed", "page_table.hashed.subblock=2", "page_table.hashed.buckets=256"]),
        "clustered" => o(&["page_table.kind=hashed", "page_table.hashed.subblock=4", "page_table.hashed.buckets=2048"]),
        "inverted" => o(&["page_table.kind=inverted"]),
        "linear" => o(&["page_table.kind=linear"]),
        // Elphinstone §3.3's other hybrid: the array pages' translations cached in a
        // software TLB (the same 8192 x 16 B direct-mapped one as `guardedN+stlb`).
        "linear+stlb" => o(&["page_table.kind=linear", "page_table.linear.backing=stlb", "page_table.linear.array_stlb.entries=8192"]),
        // Itanium, as Linux uses it: the short VHPT is a virtually mapped linear table
        // over the leaves of a multi-level table; the long VHPT a hashed cache in front.
        "short-vhpt" => o(&["page_table.kind=linear", "page_table.stlb.entries=0"]),
        "long-vhpt" => o(&[
            "page_table.kind=radix",
            "page_table.stlb.entries=131072",
            "page_table.stlb.ways=1",
            "page_table.stlb.entry_bytes=32",
            "page_table.stlb.index=rid-xor-vpn",
            "page_table.stlb.swizzle_rid=true",
            "page_table.stlb.miss_cycles=100",
        ]),
        // The long-format VHPT as *the* page table: one global hashed table of 32-byte
        // entries on RID xor VPN; the hardware walker reads one entry, collisions trap
        // to a software handler that follows the chain.
        "long-vhpt-pt" => o(&[
            "page_table.kind=hashed",
            "page_table.hashed.subblock=1",
            "page_table.hashed.buckets=131072",
            "page_table.hashed.bucket_bytes=32",
            "page_table.hashed.hash=rid-xor-vpn",
            "page_table.hashed.scope=global",
            "page_table.hashed.promote=false",
            "page_table.hashed.chain_trap_cycles=100",
            "page_table.stlb.entries=0",
        ]),
        n if n.starts_with("guarded") => {
            let (g, stlb) = match n.strip_suffix("+stlb") {
                Some(g) => (g, true),
                None => (n, false),
            };
            let s = g.trim_start_matches("guarded");
            let s = if s.is_empty() { "16" } else { s };
            let mut v = vec!["page_table.kind=guarded".to_string(), format!("page_table.guarded.node_entries={s}")];
            if stlb {
                v.push("page_table.stlb.entries=8192".into());
            }
            v
        }
        other => {
            // `label:key=value;key=value`
            let (_, rest) = other.split_once(':').ok_or_else(|| {
                Error::arg("--designs", format!("unknown design `{other}` (named designs: radix, radix5, mpt, hashed, hashed-h512, clustered, inverted, linear, linear+stlb, short-vhpt, long-vhpt, long-vhpt-pt, guardedN[+stlb]; or label:key=value;...)"))
            })?;
            rest.split(';').map(|s| s.to_string()).collect()
        }
    })
}

/// A design for [`compare`]: a page-table kind (`nested-ecpt`), a named design of
/// [`pt_design`], or `label:key=value;key=value`. Returns (label, overrides).
pub fn design(name: &str) -> Result<(String, Vec<String>)> {
    let label = name.split(':').next().unwrap_or(name).to_string();
    if crate::config::PageTableKind::from_name(name).is_some() {
        return Ok((label, vec![format!("page_table.kind={name}")]));
    }
    Ok((label, pt_design(name)?))
}

/// How much faster each design runs `source` than `baseline` (a design's label; the
/// first design if `None`), under the time model: one pass over the input for every
/// design (`threads` threads), each on `config` + `overrides` + its own overrides, with
/// `time.model = "ooo"` and `memory.data_refs = true` set first. One JSON row per
/// design, in order; a design that fails fails the comparison.
pub fn compare(
    config: &str,
    overrides: &[String],
    source: &SourceSpec,
    designs: &[String],
    baseline: Option<&str>,
    threads: usize,
    progress: bool,
) -> Result<Vec<serde_json::Value>> {
    if designs.is_empty() {
        return Err(Error::arg("--designs", "name at least one design"));
    }
    let mut labels = Vec::new();
    let mut configs = Vec::new();
    for d in designs {
        let (label, own) = design(d)?;
        if labels.contains(&label) {
            return Err(Error::arg("--designs", format!("two designs are labelled `{label}`")));
        }
        let mut o: Vec<String> = COMPARE_OVERRIDES.iter().map(|s| s.to_string()).collect();
        o.extend(overrides.iter().cloned());
        o.extend(own);
        labels.push(label);
        configs.push((config.to_string(), o));
    }
    let base = match baseline {
        None => 0,
        Some(b) => {
            labels.iter().position(|l| l == b).ok_or_else(|| Error::arg("--baseline", format!("`{b}` is not one of the designs ({})", labels.join(", "))))?
        }
    };
    let mut docs = Vec::new();
    for (label, doc) in labels.iter().zip(run_many(&configs, source, threads, progress)?) {
        docs.push(doc.map_err(|e| Error::config(format!("design `{label}`"), e.to_string()))?);
    }
    Ok(labels.iter().zip(&docs).map(|(label, doc)| compare_row(label, doc, &labels[base], &docs[base])).collect())
}

/// What [`compare`] sets before a design's overrides: the time model, with every
/// program reference through the caches.
pub const COMPARE_OVERRIDES: [&str; 2] = ["memory.data_refs=true", "time.model=ooo"];

/// A design's stats document as its [`compare`] row beside the baseline's (NaN where
/// the document has no such number): what `vmlab compare` prints, and what a
/// reproduction that runs the documents itself (on Ray, say) derives from them.
pub fn compare_row(label: &str, doc: &serde_json::Value, baseline_label: &str, baseline: &serde_json::Value) -> serde_json::Value {
    let g = |p: &str| doc.pointer(p).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    let cycles = g("/time/cycles");
    let base_cycles = baseline.pointer("/time/cycles").and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    serde_json::json!({
        "design": label,
        "kind": doc["page_table"]["kind"],
        "baseline": baseline_label,
        "cycles": cycles,
        "instructions": g("/time/instructions"),
        "ipc": g("/time/ipc"),
        "speedup": base_cycles / cycles,
        "cpi_base": g("/time/cpi_stack/base"),
        "cpi_data": g("/time/cpi_stack/data"),
        "cpi_translation": g("/time/cpi_stack/translation"),
        "cpi_os": g("/time/cpi_stack/os"),
        "mlp": g("/time/mlp"),
        "walks": g("/time/walks/count"),
        "walk_latency": g("/time/walks/mean_latency"),
        "walker_occupancy": g("/time/walks/walker_occupancy"),
        "dram_gbs": g("/time/dram/bandwidth_gbs"),
        "refs_per_walk": g("/walks/refs_per_walk"),
        "pt_bytes": g("/page_table/bytes_at_peak"),
        // With sampled timing (`[time.sampling]`): the 95% interval of the CPI.
        "cpi_error": doc.pointer("/time/sampling/cpi_error").and_then(|v| v.as_f64()).unwrap_or(0.0),
    })
}

/// Elphinstone's refill-cost and size measurements (a walk reference is one cache-line
/// access, so `refs_per_walk` is his "cache lines per refill"): run `source` under each design
/// (named in [`pt_design`]) on top of `config` + `overrides`; one JSON row per design.
pub fn pt_compare(config: &str, overrides: &[String], source: &SourceSpec, designs: &[String], progress: bool) -> Result<Vec<serde_json::Value>> {
    if designs.len() > 1 {
        readable_again(source, "pt compare reads it once per design")?;
    }
    let mut rows = Vec::new();
    for (k, d) in designs.iter().enumerate() {
        let label = pt_design_label(d);
        let mut o = overrides.to_vec();
        o.extend(pt_design(d)?);
        let t0 = std::time::Instant::now();
        let shown = format!("[{}/{}] {label}", k + 1, designs.len());
        let doc = run_named(&RunRequest { config: config.to_string(), overrides: o, source: source.clone(), progress }, &shown)?;
        rows.push(pt_compare_row(label, &doc, Some(t0.elapsed().as_secs_f64())));
    }
    Ok(rows)
}

/// A stats document as its `pt compare` row (`label`: the design's name). `secs`: the
/// run's wall-clock seconds, when it was timed (the speed columns are NaN without).
pub fn pt_compare_row(label: &str, doc: &serde_json::Value, secs: Option<f64>) -> serde_json::Value {
    let g = |p: &str| doc.pointer(p).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    let secs = secs.unwrap_or(f64::NAN);
    serde_json::json!({
        "design": label,
        "kind": doc["page_table"]["kind"],
        "walks": g("/walks/count"),
        "refs_per_walk": g("/walks/refs_per_walk"),
        "steps_per_walk": g("/walks/steps_per_walk"),
        "cycles_per_walk": g("/walks/latency/mean"),
        "translation_cpki": g("/cycles/translation_per_kilo_instruction"),
        "nested_misses": g("/walks/nested_misses"),
        "pt_bytes": g("/page_table/bytes_at_peak"),
        "bytes_per_mapped_page": g("/page_table/bytes_per_mapped_page_at_peak"),
        "mapped_pages": g("/page_table/peak_mapped_pages"),
        // Wall-clock simulation speed (input generation or decoding included).
        "sim_seconds": secs,
        "accesses_per_second": g("/totals/accesses") / secs,
    })
}
