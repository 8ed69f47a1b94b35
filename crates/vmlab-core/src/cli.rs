//! The `vmlab` command line (also reached from Python's `vmlab` console script).
//! Errors print as one line, `vmlab: error: ...`, with a non-zero exit status.

use crate::api::{self, RunRequest, SourceSpec};
use crate::error::{Error, Result};
use crate::trace::{self, TraceSource};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

/// `print!` to standard output, failing with an error that names it (a full disk, a
/// closed pipe) where `print!` would panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err(|e| Error::io("standard output", e))?
    }};
}

/// `println!` as [`out!`] does it.
macro_rules! outln {
    () => { out!("\n") };
    ($($arg:tt)*) => {{
        out!($($arg)*);
        out!("\n")
    }};
}

/// A plain text table, columns two spaces apart, the first left-aligned and the others
/// right-aligned (numbers); each line ends in a newline.
pub(crate) fn text_table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    use comfy_table::{presets, CellAlignment, Table};
    let mut t = Table::new();
    t.load_style(presets::NOTHING).set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    let last = header.len().saturating_sub(1);
    for i in 0..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_padding((0, if i == last { 0 } else { 2 }));
            if i > 0 {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    t.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

#[derive(Parser, Debug)]
#[command(name = "vmlab", version, about = "vmlab: a laboratory for virtual-memory address translation")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run several designs on one input under the time model and tabulate each one's
    /// execution time, IPC, CPI stack and speed-up over a baseline.
    Compare(CompareArgs),
    /// Simulate a trace or a synthetic workload under a configuration.
    Run {
        /// Preset name (see `vmlab presets`) or path to a TOML file.
        #[arg(long, short, default_value = "skylake")]
        config: String,
        /// Override a config key: --set tlb.l1d_4k.entries=32 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        #[command(flatten)]
        input: SimInput,
        /// Print the full stats document as JSON (schema in docs/metrics.md).
        #[arg(long)]
        json: bool,
        /// Write the JSON stats document to this file as well.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Progress bar on stderr (default: when stderr is a terminal).
        #[arg(long, overrides_with = "no_progress")]
        progress: bool,
        /// No progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// Summarise a trace: counts, footprint, VMAs, page-size histogram.
    Info {
        /// The .vmt trace (a file, a FIFO, or - for standard input).
        trace: PathBuf,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Trace a command straight into a .vmt file, under QEMU with vmlab's plugin (fast)
    /// or valgrind lackey.
    Trace {
        /// The .vmt file to write (replaced only when tracing succeeds).
        #[arg(long, short)]
        output: PathBuf,
        /// The tracing engine: qemu (fast; follows forks, not execs), lackey (follows
        /// execs too), or auto: qemu where it can run and the command is not a #!
        /// script, else lackey.
        #[arg(long, value_enum, default_value_t = trace::live::Engine::Auto)]
        engine: trace::live::Engine,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Convert a lackey text log, a ChampSim binary trace or a DynamoRIO drmemtrace
    /// trace (a file or a trace directory) to .vmt (--from), or a .vmt trace to a
    /// ChampSim binary trace (--to champsim; .xz compresses).
    Convert {
        /// Input format, converted to .vmt.
        #[arg(long, value_parser = ["lackey", "champsim", "drmemtrace"], required_unless_present = "to", conflicts_with = "to")]
        from: Option<String>,
        /// Output format, converted from a .vmt input.
        #[arg(long, value_parser = ["champsim"])]
        to: Option<String>,
        /// The file to convert, or - for standard input (for drmemtrace, a trace file
        /// or a trace directory).
        input: PathBuf,
        /// The output file (or give it after the input).
        #[arg(long, short, required_unless_present = "out", conflicts_with = "out")]
        output: Option<PathBuf>,
        /// The output file (or give it with -o).
        #[arg(value_name = "OUTPUT")]
        out: Option<PathBuf>,
        /// Process id to attribute records to when the input carries none.
        #[arg(long, default_value_t = 1)]
        pid: u32,
    },
    /// Write a synthetic workload to a .vmt file.
    Generate {
        /// A built-in workload (see `vmlab workloads`).
        workload: String,
        /// Workload parameters, key=value.
        #[arg(value_name = "PARAM")]
        params: Vec<String>,
        /// The .vmt file to write.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// List the built-in synthetic workloads and their parameters.
    Workloads,
    /// List the built-in presets, or print one preset's TOML.
    Presets {
        /// A preset whose TOML to print.
        name: Option<String>,
    },
    /// Page-table measurements (Elphinstone): compare organisations on one input.
    Pt {
        #[command(subcommand)]
        cmd: PtCmd,
    },
    /// TLB miss-ratio curves in one pass (stack distances): the misses of a fully
    /// associative LRU TLB of every power-of-two size, and of every associativity for
    /// the given set counts. Exact for LRU on the trace's page references; no
    /// invalidations, no page-size policy (docs/metrics.md).
    Mrc {
        #[command(flatten)]
        input: SimInput,
        /// Page size of the TLB entries.
        #[arg(long, default_value = "4K")]
        page_size: String,
        /// Which accesses reach the TLB: data, instr or unified.
        #[arg(long, default_value = "data")]
        side: String,
        /// Set counts for set-associative curves (powers of two), e.g. --sets 16,64.
        #[arg(long, value_delimiter = ',')]
        sets: Vec<usize>,
        /// Largest associativity per set count.
        #[arg(long, default_value_t = 16)]
        max_ways: usize,
        /// Largest fully associative size (powers of two up to it).
        #[arg(long, default_value_t = 65536)]
        max_entries: usize,
        /// Print the curves as JSON.
        #[arg(long)]
        json: bool,
    },
    /// End-to-end throughput benchmark (records/s, accesses/s, peak memory).
    Bench {
        /// Smaller inputs (seconds instead of a minute).
        #[arg(long)]
        quick: bool,
        /// Run each benchmark this many times and report the best (and the median).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        repeat: u32,
        /// Only the benchmarks whose name contains this text (e.g. "nested").
        #[arg(long)]
        only: Option<String>,
        /// Print every run as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// An input file named on the command line: `-` is standard input.
fn input_path(p: PathBuf) -> PathBuf {
    if p.as_os_str() == "-" {
        PathBuf::from("/dev/stdin")
    } else {
        p
    }
}

/// A trace or a synthetic workload.
#[derive(clap::Args, Debug)]
struct SimInput {
    /// A .vmt trace file (or - for standard input).
    #[arg(long, short, conflicts_with = "workload")]
    trace: Option<PathBuf>,
    /// A built-in workload (see `vmlab workloads`), followed by key=value parameters.
    #[arg(long, short)]
    workload: Option<String>,
    /// Workload parameters, key=value.
    #[arg(value_name = "PARAM")]
    params: Vec<String>,
}

impl SimInput {
    fn source(self) -> Result<SourceSpec> {
        match (self.trace, self.workload) {
            (Some(t), None) => {
                if !self.params.is_empty() {
                    return Err(Error::arg("PARAM", "workload parameters given with --trace"));
                }
                Ok(SourceSpec::Trace(input_path(t)))
            }
            (None, Some(w)) => Ok(SourceSpec::Workload { params: api::parse_params(&w, &self.params)?, name: w }),
            _ => Err(Error::arg("--trace/--workload", "give exactly one of --trace or --workload")),
        }
    }
}

#[derive(clap::Args, Debug)]
struct PtInput {
    /// Preset name or path to a TOML file every design starts from.
    #[arg(long, short, default_value = "skylake")]
    config: String,
    /// Override a config key for every design (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A .vmt trace file (or - for standard input).
    #[arg(long, short, conflicts_with_all = ["workload", "pid"])]
    trace: Option<PathBuf>,
    /// A built-in workload (see `vmlab workloads`), followed by key=value parameters.
    #[arg(long, short, conflicts_with = "pid")]
    workload: Option<String>,
    /// The resident pages of a live process (/proc/PID/maps and /proc/PID/pagemap).
    #[arg(long)]
    pid: Option<u32>,
    /// Workload parameters, key=value.
    #[arg(value_name = "PARAM")]
    params: Vec<String>,
    /// Designs to compare, `name:key=value;key=value` or a preset design name.
    #[arg(long, value_delimiter = ',', default_value = "radix,mpt,hashed,clustered,guarded2,guarded16,guarded256,inverted,linear,linear+stlb,guarded16+stlb")]
    designs: Vec<String>,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

impl PtInput {
    fn source(&self) -> Result<SourceSpec> {
        Ok(match (&self.trace, &self.workload, self.pid) {
            (Some(t), None, None) => SourceSpec::Trace(input_path(t.clone())),
            (None, Some(w), None) => SourceSpec::Workload { name: w.clone(), params: api::parse_params(w, &self.params)? },
            (None, None, Some(pid)) => SourceSpec::Snapshot(pid),
            _ => return Err(Error::arg("--trace/--workload/--pid", "give exactly one of --trace, --workload or --pid")),
        })
    }
}

/// `vmlab compare`'s arguments.
#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// Preset name or path to a TOML file every design starts from.
    #[arg(long, short, default_value = "skylake")]
    config: String,
    /// Override a config key for every design (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The designs: page-table kinds (radix, ecpt, nested-radix, nested-ecpt, ...),
    /// named designs of `vmlab pt compare`, or label:key=value;key=value.
    #[arg(long, value_delimiter = ',', required = true)]
    designs: Vec<String>,
    /// The design the speed-ups are over (default: the first).
    #[arg(long)]
    baseline: Option<String>,
    /// Simulate the designs on this many threads (one pass over the input).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    input: SimInput,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

/// The columns of `vmlab compare`: (header, JSON field, decimals).
const COMPARE_COLUMNS: &[(&str, &str, usize)] = &[
    ("cycles", "cycles", 0),
    ("IPC", "ipc", 3),
    ("speed-up", "speedup", 3),
    ("CPI base", "cpi_base", 3),
    ("CPI data", "cpi_data", 3),
    ("CPI xlate", "cpi_translation", 3),
    ("CPI OS", "cpi_os", 3),
    ("MLP", "mlp", 2),
    ("walks", "walks", 0),
    ("walk cyc", "walk_latency", 1),
    ("walkers busy", "walker_occupancy", 2),
];

#[derive(Subcommand, Debug)]
enum PtCmd {
    /// Run one input under several page-table organisations and tabulate refill cost
    /// and size side by side.
    Compare(PtInput),
    /// Page-table size per organisation: bytes, and bytes per mapped page, when the
    /// most pages were mapped (Elphinstone's dense and sparse measurements).
    Size(PtInput),
    /// Refill cost per organisation: walks, references (cache lines), sequential
    /// steps and modelled cycles per TLB refill.
    Refill(PtInput),
    /// Build every page table for a live process's resident pages (/proc/PID/maps and
    /// /proc/PID/pagemap) and compare their sizes and refill costs (= compare --pid).
    Snapshot {
        /// The live process.
        pid: u32,
        /// Preset name or path to a TOML file every design starts from.
        #[arg(long, short, default_value = "skylake")]
        config: String,
        /// Override a config key for every design (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Designs to compare, `name:key=value;key=value` or a preset design name.
        #[arg(long, value_delimiter = ',', default_value = "radix,mpt,hashed,clustered,guarded2,guarded16,guarded256,inverted,linear")]
        designs: Vec<String>,
        /// Print the rows as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The columns of the `vmlab pt` views: (header, JSON field, scale, decimals, views it
/// appears in: c = compare, s = size, r = refill).
const PT_COLUMNS: &[(&str, &str, f64, usize, &str)] = &[
    ("walks", "walks", 1.0, 0, "cr"),
    ("lines/refill", "refs_per_walk", 1.0, 2, "cr"),
    ("steps/refill", "steps_per_walk", 1.0, 2, "cr"),
    ("cycles/refill", "cycles_per_walk", 1.0, 1, "cr"),
    ("nested misses", "nested_misses", 1.0, 0, "r"),
    ("xlate CPKI", "translation_cpki", 1.0, 1, "r"),
    ("M acc/s", "accesses_per_second", 1e-6, 1, "r"),
    ("mapped pages*", "mapped_pages", 1.0, 0, "s"),
    ("PT bytes*", "pt_bytes", 1.0, 0, "cs"),
    ("B/page*", "bytes_per_mapped_page", 1.0, 1, "cs"),
];

fn print_pt_rows(rows: &[serde_json::Value], view: char) -> Result<()> {
    let cols: Vec<_> = PT_COLUMNS.iter().filter(|c| c.4.contains(view)).collect();
    let header: Vec<&str> = std::iter::once("design").chain(cols.iter().map(|c| c.0)).collect();
    let body = rows.iter().map(|r| {
        let cells = cols.iter().map(|c| format!("{:.*}", c.3, r[c.1].as_f64().unwrap_or(f64::NAN) * c.2));
        std::iter::once(r["design"].as_str().unwrap_or("").to_string()).chain(cells).collect()
    });
    out!("{}", text_table(&header, body));
    if view != 'r' {
        outln!("* when the most pages were mapped");
    }
    Ok(())
}

/// `text` on one line: control characters (a newline, an escape sequence from an
/// argument) are escaped, so an error cannot break its line or forge another.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// The commands of the Python package's `vmlab` script (python/vmlab/cli.py), which
/// this binary does not have.
const PYTHON_COMMANDS: [&str; 5] = ["demo", "sweep", "report", "export", "reproduce"];

/// Run the CLI on `args` (args[0] is the program name); returns the exit status.
pub fn main(args: Vec<String>) -> i32 {
    if let Some(c) = args.get(1).filter(|a| PYTHON_COMMANDS.contains(&a.as_str())) {
        eprintln!("vmlab: error: `{c}` is a command of the Python package's `vmlab` (after `make setup`: .venv/bin/vmlab {c}), not of this binary");
        return 2;
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            // Help and the version go to standard output, which may be full or closed.
            let printed = if e.use_stderr() || crate::host::fd_is_open(1) {
                e.print().and_then(|_| std::io::Write::flush(&mut std::io::stdout()))
            } else {
                Err(std::io::Error::from_raw_os_error(libc::EBADF))
            };
            if let Err(err) = printed {
                eprintln!("vmlab: error: {}", Error::io("standard output", err));
                return 1;
            }
            return code;
        }
    };
    // What prints to standard output fails on a closed one, as on a full one.
    let quiet = matches!(cli.cmd, Cmd::Trace { .. } | Cmd::Convert { .. } | Cmd::Generate { .. });
    if !quiet && !crate::host::fd_is_open(1) {
        eprintln!("vmlab: error: {}", Error::io("standard output", std::io::Error::from_raw_os_error(libc::EBADF)));
        return 1;
    }
    let flushed = |code| {
        use std::io::Write as _;
        std::io::stdout().flush().map(|_| code).map_err(|e| Error::io("standard output", e))
    };
    match dispatch(cli.cmd).and_then(flushed) {
        Ok(code) => code,
        // Like a shell reports a process a signal ended: 128 + the signal's number.
        Err(e @ Error::Interrupted { signal }) => {
            eprintln!("vmlab: {e}");
            128 + signal
        }
        Err(e) => {
            eprintln!("vmlab: error: {}", one_line(&e.to_string()));
            1
        }
    }
}

fn dispatch(cmd: Cmd) -> Result<i32> {
    match cmd {
        Cmd::Mrc { input, page_size, side, sets, max_ways, max_entries, json } => {
            let bytes = crate::addr::parse_bytes(&page_size).map_err(|m| Error::arg("--page-size", m))?;
            let opts = crate::sim::mrc::MrcOptions {
                page_size: crate::addr::PageSize::from_bytes(bytes).map_err(|m| Error::arg("--page-size", m))?,
                side: side.parse()?,
                sets,
                max_ways,
                max_entries,
            };
            let curves = api::miss_ratio_curves(&input.source()?, &opts)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&curves).expect("json"));
            } else {
                outln!(
                    "{} references to {} distinct {} pages ({} side), LRU:",
                    curves.references,
                    curves.distinct_pages,
                    curves.page_size,
                    serde_json::to_value(curves.side).expect("json").as_str().unwrap_or("")
                );
                let body = curves.fully_associative.iter().chain(&curves.set_associative).map(|p| {
                    let sets = if p.sets == 1 && p.ways == p.entries { "full".to_string() } else { p.sets.to_string() };
                    vec![sets, p.ways.to_string(), p.entries.to_string(), p.misses.to_string(), format!("{:.5}", p.miss_rate)]
                });
                out!("{}", text_table(&["sets", "ways", "entries", "misses", "miss rate"], body));
            }
            Ok(0)
        }
        Cmd::Run { config, set, input, json, output, progress, no_progress } => {
            let source = input.source()?;
            // A bar on a terminal, else a line every ten seconds (api::Progress).
            let show = progress || !no_progress;
            let started = std::time::Instant::now();
            let doc = api::run(&RunRequest { config, overrides: set, source, progress: show })?;
            let secs = started.elapsed().as_secs_f64();
            let text = serde_json::to_string_pretty(&doc).expect("json");
            if let Some(o) = output {
                crate::files::write(&o, text.as_bytes())?;
            }
            if json {
                outln!("{text}");
            } else {
                out!("{}", summary_text(&doc));
                // After the summary, on its own line, where both streams go to one file.
                std::io::Write::flush(&mut std::io::stdout()).map_err(|e| Error::io("standard output", e))?;
                eprintln!("vmlab: simulated in {secs:.2} s");
            }
            Ok(0)
        }
        Cmd::Compare(a) => {
            let show = std::io::stderr().is_terminal();
            let rows = api::compare(&a.config, &a.set, &a.input.source()?, &a.designs, a.baseline.as_deref(), a.threads, show)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&rows).expect("json"));
                return Ok(0);
            }
            let header: Vec<&str> = std::iter::once("design").chain(COMPARE_COLUMNS.iter().map(|c| c.0)).collect();
            let body = rows.iter().map(|r| {
                let cells = COMPARE_COLUMNS.iter().map(|c| format!("{:.*}", c.2, r[c.1].as_f64().unwrap_or(f64::NAN)));
                std::iter::once(r["design"].as_str().unwrap_or("").to_string()).chain(cells).collect()
            });
            out!("{}", text_table(&header, body));
            outln!("speed-up over {}", rows[0]["baseline"].as_str().unwrap_or(""));
            let error = rows.iter().filter_map(|r| r["cpi_error"].as_f64()).fold(0.0, f64::max);
            if error > 0.0 {
                outln!("sampled timing: each design's CPI within ±{:.2}% (95% confidence)", 100.0 * error);
            }
            Ok(0)
        }
        Cmd::Info { trace: path, json } => {
            let path = input_path(path);
            let mut r = trace::vmt::VmtReader::open(&path)?;
            let info = trace::info::summarize(&mut r)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&info).expect("json"));
            } else {
                out!("{}", info.to_text());
            }
            Ok(0)
        }
        Cmd::Trace { output, engine, command } => {
            let s = trace::live::trace_to_vmt(&command, &output, &trace::live::LiveOptions { engine, ..Default::default() })?;
            eprintln!(
                "vmlab: wrote {} records from {} process(es) to {} (traced by {}; command exit status {})",
                s.records,
                s.processes.len(),
                output.display(),
                s.engine,
                s.exit_code
            );
            if s.untraced_execs > 0 {
                eprintln!(
                    "vmlab: note: {} exec'd program(s) ran untraced: the QEMU engine follows forks, not execs (--engine lackey follows both)",
                    s.untraced_execs
                );
            }
            Ok(0)
        }
        Cmd::Convert { from, to, input, output, out, pid } => {
            let output = output.or(out).expect("clap requires an output");
            let input = input_path(input);
            let same = |a: &std::path::Path, b: &std::path::Path| {
                use std::os::unix::fs::MetadataExt;
                matches!((std::fs::metadata(a), std::fs::metadata(b)), (Ok(x), Ok(y)) if x.is_file() && x.dev() == y.dev() && x.ino() == y.ino())
            };
            if same(&input, &output) {
                return Err(Error::io(&output, std::io::Error::other("the output is the input file; convert to another file")));
            }
            if to.is_some() {
                let n = trace::champsim::write_file(&mut trace::vmt::VmtReader::open(&input)?, &output)?;
                eprintln!("vmlab: wrote {n} instructions to {}", output.display());
                return Ok(0);
            }
            if from.as_deref() == Some("drmemtrace") {
                let mut src = trace::drmemtrace::DrmemtraceReader::open(&input)?;
                let mut shown = api::WithProgress::new(&mut src, true);
                let n = trace::vmt::write_file(&mut shown, &output)?;
                shown.progress.finish();
                eprintln!("vmlab: wrote {n} records to {}", output.display());
                let d = src.dropped();
                if d != Default::default() {
                    eprintln!(
                        "vmlab: note: dropped {} prefetches, {} cache flushes and {} records of kernel code (docs/importers.md, \"drmemtrace\")",
                        d.prefetches, d.flushes, d.kernel
                    );
                }
                return Ok(0);
            }
            let mut src: Box<dyn TraceSource> = match from.as_deref() {
                Some("lackey") => {
                    let f = std::fs::File::open(&input).map_err(|e| Error::io(&input, e))?;
                    Box::new(trace::lackey::LackeyReader::new(std::io::BufReader::with_capacity(1 << 20, f), &input.display().to_string(), pid))
                }
                _ => Box::new(trace::champsim::ChampSimReader::open(&input, pid)?),
            };
            let mut shown = api::WithProgress::new(src.as_mut(), true);
            let n = trace::vmt::write_file(&mut shown, &output)?;
            shown.progress.finish();
            eprintln!("vmlab: wrote {n} records to {}", output.display());
            Ok(0)
        }
        Cmd::Generate { workload, params, output } => {
            let mut src = trace::synth::open(&workload, &api::parse_params(&workload, &params)?)?;
            let mut shown = api::WithProgress::new(src.as_mut(), true);
            let n = trace::vmt::write_file(&mut shown, &output)?;
            shown.progress.finish();
            eprintln!("vmlab: wrote {n} records to {}", output.display());
            Ok(0)
        }
        Cmd::Workloads => {
            for w in trace::synth::catalog() {
                outln!("{}: {}", w.name, w.description);
                for p in w.params {
                    outln!("    {:<18} default {:<14} {}", p.name, p.default, p.help);
                }
            }
            Ok(0)
        }
        Cmd::Presets { name } => {
            match name {
                None => {
                    for (n, text) in api::presets() {
                        let desc = text.lines().find_map(|l| l.strip_prefix("description = ")).unwrap_or("").trim_matches('"').to_string();
                        outln!("{n:<12} {desc}");
                    }
                }
                Some(n) => {
                    let (_, text) =
                        api::presets().into_iter().find(|(p, _)| *p == n).ok_or_else(|| Error::config("presets", format!("unknown preset `{n}`")))?;
                    out!("{text}");
                }
            }
            Ok(0)
        }
        Cmd::Bench { quick, repeat, only, json } => bench(quick, repeat, only.as_deref(), json),
        Cmd::Pt { cmd } => {
            let (input, view) = match cmd {
                PtCmd::Compare(i) => (i, 'c'),
                PtCmd::Size(i) => (i, 's'),
                PtCmd::Refill(i) => (i, 'r'),
                PtCmd::Snapshot { pid, config, set, designs, json } => {
                    (PtInput { config, set, trace: None, workload: None, pid: Some(pid), params: vec![], designs, json }, 'c')
                }
            };
            let rows = api::pt_compare(&input.config, &input.set, &input.source()?, &input.designs, true)?;
            if input.json {
                outln!("{}", serde_json::to_string_pretty(&rows).expect("json"));
            } else {
                print_pt_rows(&rows, view)?;
            }
            Ok(0)
        }
    }
}

/// `vmlab bench`: run the benchmarks and print their table (or JSON).
fn bench(quick: bool, repeat: u32, only: Option<&str>, json: bool) -> Result<i32> {
    use crate::sim::bench::{peak_rss_bytes, run_benchmarks};
    let rows = run_benchmarks(quick, repeat, only)?;
    if rows.is_empty() {
        eprintln!("vmlab: error: bench --only {:?}: no benchmark's name contains it", only.unwrap_or_default());
        return Ok(2);
    }
    let rss = peak_rss_bytes();
    // The tests' build (`test-release`, `scripts/setup.sh --tests`) runs a few times slower.
    let checked = cfg!(debug_assertions);
    if checked {
        eprintln!("vmlab: warning: this is the tests' build (debug assertions on, little optimised): its figures are not vmlab's speed; `make setup` builds the release one");
    }
    if json {
        outln!("{}", serde_json::json!({"rows": rows, "repeat": repeat, "peak_rss_bytes": rss, "checked_build": checked}));
    } else {
        if repeat > 1 {
            outln!("best of {repeat} runs each (median seconds beside)");
        }
        let body = rows.iter().map(|r| {
            let f = |x: f64, d: usize| format!("{x:.d$}");
            let base = r.vs_base.map_or_else(String::new, |v| f(v, 2));
            vec![r.name.to_string(), r.items.to_string(), r.unit.to_string(), f(r.seconds, 2), f(r.millions_per_second, 1), f(r.median_seconds, 2), base]
        });
        out!("{}", text_table(&["benchmark", "items", "unit", "seconds", "M/s", "median s", "× base"], body));
        if let Some(b) = rss {
            outln!("peak RSS {:.1} MiB", b as f64 / (1 << 20) as f64);
        }
    }
    Ok(0)
}

/// A short human-readable summary of a stats document.
pub(crate) fn summary_text(doc: &serde_json::Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let g = |p: &str| doc.pointer(p).cloned().unwrap_or(serde_json::Value::Null);
    let _ = writeln!(s, "source      {} {}", g("/source/kind").as_str().unwrap_or(""), g("/source/name").as_str().unwrap_or(""));
    let _ = writeln!(s, "accesses    {}   instructions {}", g("/totals/accesses"), g("/totals/instructions"));
    match (g("/warmup/accesses").as_u64().unwrap_or(0), g("/warmup/completed").as_bool() == Some(true)) {
        (0, _) => {}
        (n, true) => {
            let _ = writeln!(s, "warm-up     counters exclude the first {n} accesses");
        }
        (n, false) => {
            let _ = writeln!(s, "warm-up     of {n} accesses never ended: counters cover the whole run");
        }
    }
    if let Some(tlbs) = doc["tlb"].as_object() {
        let body = tlbs.iter().map(|(name, t)| {
            let n = |k: &str| t[k].as_u64().map_or_else(|| t[k].to_string(), |v| v.to_string());
            vec![name.clone(), n("level"), n("lookups"), n("misses"), format!("{:.3}%", 100.0 * t["miss_rate"].as_f64().unwrap_or(0.0))]
        });
        s.push_str(&text_table(&["tlb", "level", "lookups", "misses", "miss %"], body));
    }
    let _ = writeln!(
        s,
        "walks       {}  refs/walk {:.2}  mean latency {:.1} cycles  p99 {}",
        g("/walks/count"),
        g("/walks/refs_per_walk").as_f64().unwrap_or(0.0),
        g("/walks/latency/mean").as_f64().unwrap_or(0.0),
        g("/walks/latency/p99")
    );
    let _ = writeln!(s, "faults      {}", g("/faults/count"));
    let _ = writeln!(
        s,
        "page table  {} {} bytes in {} nodes for {} mapped pages",
        g("/page_table/kind").as_str().unwrap_or(""),
        g("/page_table/bytes"),
        g("/page_table/nodes"),
        g("/page_table/mapped_pages")
    );
    let _ = writeln!(s, "translation {:.2} cycles per kilo-instruction", g("/cycles/translation_per_kilo_instruction").as_f64().unwrap_or(0.0));
    if doc["time"].is_object() {
        let f = |p: &str| g(p).as_f64().unwrap_or(0.0);
        let _ = writeln!(s, "time        {} cycles  IPC {:.3}  MLP {:.2}", g("/time/cycles"), f("/time/ipc"), f("/time/mlp"));
        let _ = writeln!(
            s,
            "CPI stack   base {:.3}  data {:.3}  translation {:.3}  OS {:.3}",
            f("/time/cpi_stack/base"),
            f("/time/cpi_stack/data"),
            f("/time/cpi_stack/translation"),
            f("/time/cpi_stack/os")
        );
    }
    s
}
